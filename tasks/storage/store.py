"""One dataset's partitions under a data root, for every backend (:mod:`~tasks.storage.backend`): names and
keys, manifests, whether a partition's files are the ones its manifest describes, strays, failure records,
summaries, and commits handed over in order (data, quarantine, manifest last). Layout of one dataset::

    <data_root>/<dataset>/business_date=YYYY-MM-DD/data.parquet
    <data_root>/<dataset>/business_date=YYYY-MM-DD/_manifest.json
    <data_root>/quarantine/<dataset>/business_date=YYYY-MM-DD/rejected.parquet
    <data_root>/_state/failures/<dataset>/business_date=YYYY-MM-DD.json
    <data_root>/_state/failures/<dataset>/business_date=YYYY-MM-DD.rejected.parquet  (a build failed on them)
    <data_root>/_state/summaries/<dataset>.json
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tasks.storage.layout import (
    DATA_FILE,
    MANIFEST,
    check_extra_names,
    differing_file,
    listed_names,
    manifest_bytes,
    missing_file,
    parse_manifest,
    parse_partition_name,
    partition_name,
    remote,
    safe_relpath,
    same_files,
)

if TYPE_CHECKING:  # a completeness check never imports pyarrow
    import pyarrow as pa

    from tasks.storage.backend import Backend

_LOCAL: dict[str, Backend] = {}  # a local data root -> its backend


def open_backend(data_root: str | os.PathLike) -> Backend:
    """The backend of ``data_root``, one per process (a bucket's listings serve every store)."""
    module = remote(data_root)
    if module is not None:
        return module.backend_for(os.fspath(data_root))
    key = os.fspath(data_root)
    backend = _LOCAL.get(key)
    if backend is None:
        from tasks.storage.localbackend import LocalBackend

        backend = _LOCAL[key] = LocalBackend(data_root)
    return backend


class PartitionStore:
    """One dataset's partitions under ``data_root``; open it with :func:`tasks.storage.partitions.open_store`."""

    def __init__(self, data_root: str | os.PathLike, dataset: str, subpartition: str | None = None):
        """``subpartition`` is a second hive level under each date, e.g. ``hotel_id=H1``."""
        self.backend: Backend = open_backend(data_root)
        self.data_root = self.backend.data_root
        self.dataset = safe_relpath(dataset)
        self.root = self.backend.at(dataset)
        if subpartition is not None and ("/" in subpartition or safe_relpath(subpartition) != subpartition):
            raise ValueError(f"subpartition {subpartition!r} could escape its folder")
        self.sub = subpartition
        self._rels: dict[dt.date | None, str] = {}

    # -- names -------------------------------------------------------------------------------------
    def _levels(self, date: dt.date | None) -> list[str]:
        return [] if date is None else [partition_name(date), *([self.sub] if self.sub else [])]

    def rel(self, date: dt.date | None) -> str:
        """The partition's folder, relative to the data root (``staging/qsr_pos/business_date=D``)."""
        rel = self._rels.get(date)
        if rel is None:
            rel = self._rels[date] = "/".join([self.dataset, *self._levels(date)])
        return rel

    def uri(self, date: dt.date | None = None) -> str:
        """The partition's folder as a user names it."""
        return self.backend.uri(self.rel(date))

    def quarantine_rel(self, date: dt.date | None) -> str:
        return "/".join(["quarantine", self.dataset, *self._levels(date), "rejected.parquet"])

    def record_name(self, date: dt.date | None) -> str:
        """The partition's name under ``_state/failures`` and the like: ``<dataset>/<levels>.json``."""
        return f"{self.rel(date)}.json"

    def failure_id(self, date: dt.date | None) -> str:
        return f"_state/failures/{self.record_name(date)}"

    def failed_rejects_rel(self, date: dt.date | None) -> str:
        """Rejected rows of a build that failed on them (too many), beside its failure record."""
        return f"{self.failure_id(date)[: -len('.json')]}.rejected.parquet"

    def summaries_rel(self) -> str:
        return f"_state/summaries/{self.dataset}{f'/{self.sub}' if self.sub else ''}.json"

    # -- reading -------------------------------------------------------------------------------------
    def relist(self) -> bool:
        """Drop this pass's listings of the dataset for :meth:`listed_dates` to list it anew: True on a bucket;
        False on a disk, where each look is a stat anyway."""
        return self.backend.forget_listings([f"{self.dataset}/", f"quarantine/{self.dataset}/", "_state/failures/"])

    def listed_dates(self) -> set[dt.date]:
        """Dates that have a partition folder (a bucket lists quarantine and failures at the same time)."""
        self.backend.list_ahead([f"{self.dataset}/", f"quarantine/{self.dataset}/", "_state/failures/"])
        return {d for d in map(parse_partition_name, self.backend.folders(self.dataset)) if d is not None}

    def strays(self, levels: Sequence[Callable[[str], bool]]) -> list[str]:
        """Keys under the dataset's folder that are no partition's: a folder its level's test in ``levels``
        refuses, or a file where the partition folders are."""
        return self.backend.dataset_strays(self.dataset, levels)

    def refresh(self, date: dt.date | None) -> None:
        """Look at the partition anew (another process may have committed it)."""
        self.backend.refresh(self.dataset, self.rel(date), self.quarantine_rel(date))

    def manifest_stamp(self, date: dt.date | None, fresh: bool = False) -> tuple | None:
        """What identifies the partition's manifest now; None when it has none. ``fresh``: not from this pass."""
        return self.backend.stamp(self.dataset, f"{self.rel(date)}/{MANIFEST}", fresh)

    def read_manifest_stamped(self, date: dt.date | None, known: tuple | None) -> tuple[tuple | None, dict | None]:
        """(stamp, content) of the manifest, ``known`` when its stamp still holds; (None, None) when absent."""
        return self.backend.read_stamped(self.dataset, f"{self.rel(date)}/{MANIFEST}", known, parse_manifest)

    def read_manifest(self, date: dt.date | None) -> dict | None:
        try:
            return parse_manifest(self.backend.read(f"{self.rel(date)}/{MANIFEST}"))
        except (FileNotFoundError, NotADirectoryError):
            return None

    def has_manifest(self, date: dt.date | None) -> bool:
        return self.backend.exists(f"{self.rel(date)}/{MANIFEST}")

    def data_matches(self, date: dt.date | None, manifest: dict) -> bool:
        return not self.data_problem(date, manifest)

    def data_problem(self, date: dt.date | None, manifest: dict) -> str:
        """Why the files the manifest lists (and its quarantine) are not the ones it describes; '' when they are."""
        for f, found in self._listed(date, manifest):
            if found is None:
                return missing_file(f)
            if not self.backend.same(found, f):
                return differing_file(f, self.backend.differs_by)
        return "" if manifest.get("data_files") else "its manifest lists no data file"

    def stamped_now(self, date: dt.date | None, manifest: dict) -> dict | None:
        """``manifest`` with each file it lists stamped as the store holds it now, when one differs; None when
        none does. Only for files whose content was checked since (verify)."""
        backend, changed = self.backend, {}
        for f, found in self._listed(date, manifest):
            if found is not None and not backend.same(found, f):
                changed[f.get("path", f.get("name"))] = {**f, **backend.stamp_of(found)}
        if not changed:
            return None
        files = [changed.get(f["name"], f) for f in manifest.get("data_files", [])]
        quarantine = manifest.get("quarantine")
        return dict(
            manifest,
            data_files=files,
            **({"quarantine": changed.get(quarantine["path"], quarantine)} if quarantine else {}),
        )

    def _listed(self, date: dt.date | None, manifest: dict) -> Iterator[tuple[dict, object]]:
        """(entry, what this pass's listing holds, or None) of each file ``manifest`` lists, its quarantine last."""
        backend, folder = self.backend, self.rel(date)
        data = backend.listing(f"{self.dataset}/")
        for f in manifest.get("data_files", []):
            yield f, data.get(f"{folder}/{f['name']}")
        quarantine = manifest.get("quarantine")
        if quarantine:
            yield quarantine, backend.listing(f"quarantine/{self.dataset}/").get(quarantine["path"])

    def strays_in(self, date: dt.date | None, manifest: dict | None) -> list[str]:
        """Keys under the partition's folder, at any depth, that ``manifest`` does not list."""
        folder, keep = self.rel(date), listed_names(manifest)
        names = self.backend.files_in(self.dataset, folder, len(self._levels(date)))
        return sorted(f"{folder}/{name}" for name in names if name not in keep)

    def read_file(self, date: dt.date | None, name: str) -> bytes:
        """A file of the partition's folder (``_store_totals.arrow``); FileNotFoundError."""
        return self.backend.read(f"{self.rel(date)}/{name}")

    def read_table(self, date: dt.date | None, columns: list[str] | None = None) -> pa.Table:
        """The data of one partition, as written (without the hive column)."""
        return self.backend.read_table(f"{self.rel(date)}/{DATA_FILE}", columns)

    def file_digest(self, rel: str) -> tuple[str | None, str, int]:
        return self.backend.digest(rel)

    # -- leases or locks -----------------------------------------------------------------------------
    @contextmanager
    def locked(self, date: dt.date | None, wait_s: float | None = None) -> Iterator[None]:
        """Hold partition ``date``'s lock (a lease on a bucket): two runs building it take turns."""
        what = f"{self.dataset} {date or ''}".strip()
        with self.backend.locked(self.record_name(date), self.rel(date), self.quarantine_rel(date), what, wait_s):
            yield

    # -- records beside the partitions -------------------------------------------------------------
    def failure_records(self) -> set[str]:
        """:meth:`failure_id` of every failure record under the data root (one listing)."""
        return self.backend.keys("_state/failures/")

    def read_failure(self, date: dt.date | None) -> dict | None:
        try:
            return json.loads(self.backend.read(self.failure_id(date)))
        except FileNotFoundError:
            return None

    def read_summaries(self) -> bytes | None:
        try:
            return self.backend.read(self.summaries_rel())
        except FileNotFoundError:
            return None

    def write_summaries(self, data: bytes) -> None:
        """A cache keyed by manifest stamps: the last writer wins, nothing is wrong."""
        self.backend.put_document(self.summaries_rel(), data)

    def record_failure(self, date: dt.date | None, record: dict) -> None:
        self.backend.put_record(self.failure_id(date), json.dumps(record, indent=1, default=str).encode())

    def clear_failure(self, date: dt.date | None) -> None:
        self.backend.remove_records([self.failure_id(date), self.failed_rejects_rel(date)], "_state/failures/")

    def write_failed_rejects(self, date: dt.date | None, rejected: pa.Table) -> str:
        """Keep the rejected rows of a build that failed on them, beside its failure record; where they are."""
        return self.backend.put_rejects(self.failed_rejects_rel(date), rejected, self._where(date))

    # -- writing -----------------------------------------------------------------------------------
    def write(
        self,
        date: dt.date | None,
        table: pa.Table,
        manifest: dict,
        extras: dict[str, bytes] | None = None,
        rejected: pa.Table | None = None,
    ) -> dict:
        """Replace partition ``date`` with ``table`` and ``extras`` (and the quarantine with ``rejected``, when
        not None) in one commit; the manifest as written."""
        check_extra_names(extras)
        folder, quarantine = self.rel(date), self.quarantine_rel(date)

        def fill(commit) -> dict:
            named = [
                (f"{folder}/{name}", content, name) for name, content in [(DATA_FILE, table), *(extras or {}).items()]
            ]
            files_count = len(named)
            if rejected is not None and rejected.num_rows:
                named.append((quarantine, rejected, "the quarantine"))
            found = commit.put_all(named)
            files = [
                {"name": name, **f} for (_, _, name), f in zip(named[:files_count], found[:files_count], strict=True)
            ]
            written = dict(manifest, data_files=files)
            if rejected is not None:
                written["quarantine"] = None
                if rejected.num_rows:
                    written["quarantine"] = {"path": quarantine, "rows": rejected.num_rows, **found[-1]}
                else:
                    commit.clear(quarantine, lambda: rejected)
            commit.put(f"{folder}/{MANIFEST}", manifest_bytes(written), MANIFEST, manifest=written)
            return written

        return self._commit(date, fill)

    def commit_build(
        self,
        date: dt.date | None,
        table: pa.Table,
        manifest: dict,
        extras: dict[str, bytes] | None = None,
        rejected: pa.Table | None = None,
        in_place: dict | None = None,
    ) -> dict:
        """Replace partition ``date`` with a build; only its manifest when the files in place already hold it."""
        extras = extras or {}
        if in_place and not in_place.get("verify_mismatch"):  # a data file verify found damaged is rewritten
            if isinstance(manifest.get("data_version"), Future):
                manifest["data_version"] = manifest["data_version"].result()
            if (
                in_place.get("data_version") == manifest["data_version"]
                and self.data_matches(date, in_place)
                and same_files(in_place, extras, rejected)
            ):
                written = dict(manifest, data_files=in_place["data_files"], quarantine=in_place.get("quarantine"))
                self.update_manifest(date, written)
                self.drop_strays(date, written)
                return written
        return self.write(date, table, manifest, extras, rejected=rejected)

    def copy_partition_from(self, date: dt.date | None, source: PartitionStore) -> dict:
        """Replace partition ``date`` with ``source``'s (a preview's shadow), byte for byte, in one commit."""
        manifest = source.read_manifest(date)
        if not manifest or manifest.get("_corrupt"):
            raise ValueError(f"{source.uri(date)}: no readable manifest to adopt")
        quarantine = self.quarantine_rel(date)

        def fill(commit) -> dict:
            self._copy_files(commit, date, manifest, source)
            if not manifest.get("quarantine"):
                commit.clear(quarantine, lambda: self.backend.empty_like(quarantine))
            commit.copy(f"{self.rel(date)}/{MANIFEST}", source.backend, MANIFEST, manifest=manifest)
            return manifest

        return self._commit(date, fill)

    def update_manifest(self, date: dt.date | None, manifest: dict, files_from: PartitionStore | None = None) -> None:
        """Replace the manifest alone; ``files_from``: a store whose files are copied in the same commit."""
        folder, quarantine, key = self.rel(date), self.quarantine_rel(date), f"{self.rel(date)}/{MANIFEST}"
        if files_from is None:
            self.backend.commit_one(
                self._where(date), self._label(date), folder, quarantine, key, manifest_bytes(manifest), manifest
            )
            return

        def fill(commit) -> dict:
            self._copy_files(commit, date, manifest, files_from)
            commit.put(key, manifest_bytes(manifest), MANIFEST, manifest=manifest)
            return manifest

        self._commit(date, fill)

    def _copy_files(self, commit, date: dt.date | None, manifest: dict, source: PartitionStore) -> None:
        """Copy into ``commit`` the data files and quarantine ``manifest`` lists from ``source``."""
        for f in manifest.get("data_files", []):
            commit.copy(f"{self.rel(date)}/{f['name']}", source.backend, f["name"])
        if manifest.get("quarantine"):
            commit.copy(manifest["quarantine"]["path"], source.backend, "the quarantine")

    def _commit(self, date: dt.date | None, fill) -> dict:
        """Hand the backend one commit of partition ``date``: what ``fill(commit)`` puts, in order."""
        return self.backend.commit(
            self._where(date), self._label(date), self.rel(date), self.quarantine_rel(date), fill
        )

    def drop_strays(self, date: dt.date | None, manifest: dict) -> None:
        """Remove the files of partition ``date`` its manifest in place does not list (not part of a commit)."""
        self.backend.drop_strays(self.rel(date), self.quarantine_rel(date), manifest)

    def _label(self, date: dt.date | None) -> str:
        return f"{self.dataset} {date}" if date else self.dataset

    def _where(self, date: dt.date | None) -> str:
        return self.dataset if date is None else f"{self.dataset} {'/'.join(self._levels(date))}"
