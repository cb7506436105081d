"""What a bucket dataset's prefixes hold apart from its partitions' files (:class:`S3Folders`, a part of
:class:`tasks.storage.s3store.S3PartitionStore`): keys that are no partition's, and keys under a partition's
folder that its manifest does not list (strays), found in the freshness pass's listing of the dataset (no
request per partition) and deleted after a commit (the delete is not part of it)."""

from __future__ import annotations

import datetime as dt
import logging

from tasks.storage.layout import listed_names, parse_partition_name
from tasks.storage.s3 import StoreError
from tasks.storage.tempnames import is_temp_name

logger = logging.getLogger("luigi-interface")

# The pass's listings by partition folder: (data_root, dataset prefix, levels of folders under it) ->
# {partition folder: its keys at any depth}; kept up to date by :func:`noted`, emptied by :func:`forget`.
_FOLDERS: dict[tuple[str, str, int], dict[str, set[str]]] = {}


def forget() -> None:
    """A new freshness pass: the listings are taken again."""
    _FOLDERS.clear()


def folder_of(rel: str, prefix: str, levels: int) -> str | None:
    """The partition folder (``levels`` folders under ``prefix``) that key ``rel`` is in; None for a key
    above the partitions' folders (a dataset's own stray, :meth:`S3Folders.strays`)."""
    if levels == 0:
        return prefix.rstrip("/")
    parts = rel[len(prefix) :].split("/", levels)
    return prefix + "/".join(parts[:levels]) if len(parts) > levels else None


def noted(data_root: str, rel: str, present: bool) -> None:
    """Key ``rel`` was written (``present``) or found gone: the folders' listings say so from now on."""
    for (root, prefix, levels), folders in _FOLDERS.items():
        folder = folder_of(rel, prefix, levels) if root == data_root and rel.startswith(prefix) else None
        if folder is not None:
            keys = folders.setdefault(folder, set())
            keys.add(rel) if present else keys.discard(rel)


class S3Folders:
    """The strays of a bucket dataset (its ``data_root``, ``dataset``, ``bucket``, ``rel``, ``uri``, ``_levels``,
    ``_objects``, ``_known`` and ``_listed_at_lease`` come from :class:`tasks.storage.s3store.S3PartitionStore`)."""

    def strays(self, depth: int) -> list[str]:
        """Keys under a date-partitioned dataset's prefix that are no partition's (never read as data): a
        first level that is not ``business_date=YYYY-MM-DD``, or an object where the partition's folders are
        (``depth`` levels of them: 1, or 2 with a second level such as ``hotel_id=H1``)."""
        out = []
        for rel in self._objects():
            parts = rel[len(self.dataset) + 1 :].split("/")
            if len(parts) <= depth or parse_partition_name(parts[0]) is None:
                out.append(rel)
        return sorted(out)

    def strays_in(self, date: dt.date | None, manifest: dict | None) -> list[str]:
        """Keys under the partition's folder, at any depth, that ``manifest`` does not list (every key but
        the manifest when None): from this pass's listing of the dataset, no request of its own."""
        folder = self.rel(date)
        keep = {f"{folder}/{name}" for name in listed_names(manifest)}
        keys = self._folders(len(self._levels(date))).get(folder, ())
        return sorted(k for k in keys if k not in keep and not is_temp_name(k.rsplit("/", 1)[-1]))

    def _folders(self, levels: int) -> dict[str, set[str]]:
        """The dataset's listing by partition folder (``levels`` folders deep), made once per pass."""
        prefix = f"{self.dataset}/"
        key = (self.data_root, prefix, levels)
        if key not in _FOLDERS:
            folders: dict[str, set[str]] = {}
            for rel in self._objects():
                folder = folder_of(rel, prefix, levels)
                if folder is not None:
                    folders.setdefault(folder, set()).add(rel)
            _FOLDERS[key] = folders
        return _FOLDERS[key]

    def drop_strays(self, date: dt.date | None, manifest: dict) -> None:
        """Delete the keys under the partition's folder that its manifest, now committed, does not list (as
        listed when the build took the lease): not part of the commit. A delete that fails is a warning; the
        partition counts as stale while the key is there."""
        folder = self.rel(date)
        keep = {f"{folder}/{name}" for name in listed_names(manifest)}
        for rel in sorted(self._listed_at_lease(date)):
            if not rel.startswith(f"{folder}/") or rel in keep or is_temp_name(rel.rsplit("/", 1)[-1]):
                continue
            try:
                self.bucket.delete(rel)
            except StoreError as exc:
                logger.warning(
                    "could not delete %s, which the manifest of %s does not list (%s): the partition counts as "
                    "stale until it is gone",
                    self.bucket.describe(rel),
                    self.uri(date),
                    exc,
                )
                continue
            self._known(rel, None)
            logger.info("deleted %s: the manifest of %s does not list it", self.bucket.describe(rel), self.uri(date))
