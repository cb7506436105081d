"""Manifest summaries: what a completeness check reads of a manifest, remembered on disk between processes.

A no-op check of three years reads a thousand manifests, and most of each (a staging manifest is about
40 KB) is the list of inputs with their content hashes, which a check needs only when the raw files'
metadata changed. So each dataset keeps one summary file, ``<data_root>/_state/summaries/<dataset>.json``
(``<dataset>/<sub>.json`` for a dataset with a second level, such as one hotel's pickups): for each
partition, the manifest without the keys in :data:`DETAIL`, with the (device, inode, size, mtime_ns, ctime_ns) of the
manifest file it was taken from.

It is a cache and never an authority: an entry is used only while the manifest file still has the
recorded stamp (a manifest is always replaced by a rename, so a rewritten manifest has
a new inode), and a missing, unreadable or corrupt summary file only means the manifests are parsed again.
Summaries learned in a process are written when its pass ends (:meth:`SummaryFiles.flush`), with a
temporary name and a rename (:func:`tasks.storage.partitions.atomic_write_text`); two processes that
write at once lose entries, not correctness.
"""

from __future__ import annotations

import datetime as dt
import json

from tasks.storage.partitions import PartitionStore

# The keys a check does not read unless the raw files' metadata changed (then it reads the manifest).
DETAIL = frozenset({"inputs", "input_hashes", "refused_inputs"})
FORMAT = 1


def summary(manifest: dict | None) -> dict | None:
    """The manifest without its :data:`DETAIL` keys."""
    if manifest is None:
        return None
    return {k: v for k, v in manifest.items() if k not in DETAIL}


class SummaryFiles:
    """The summary files of one process: loaded once per dataset, written back when they learned something.
    Each store reads and writes its own (:meth:`read_summaries`, :meth:`write_summaries`: a file of the
    data root's state folder; an object of a bucket's ``_state/summaries/``, which every host shares)."""

    def __init__(self) -> None:
        self._files: dict[tuple, dict[str, list]] = {}  # (data root, dataset, sub) -> {partition: [stamp, summary]}
        self._stores: dict[tuple, PartitionStore] = {}  # the store each was read from: it writes it back
        self._dirty: set[tuple] = set()

    def _entries(self, store: PartitionStore) -> dict[str, list]:
        key = (store.data_root, store.dataset, store.sub)
        entries = self._files.get(key)
        if entries is None:
            try:
                doc = json.loads(store.read_summaries() or b"{}")
                entries = doc["partitions"] if doc.get("format") == FORMAT else {}
                if not isinstance(entries, dict):
                    entries = {}
            except (OSError, ValueError, KeyError, TypeError, AttributeError, RuntimeError):
                entries = {}  # none yet, or unreadable: the manifests are parsed again
            self._files[key], self._stores[key] = entries, store
        return entries

    def get(self, store: PartitionStore, key: dt.date | None, stamp: tuple) -> dict | None:
        """The summary of partition ``key`` if it was taken from the manifest file with ``stamp``."""
        entry = self._entries(store).get(str(key))
        try:
            if len(entry) == 2 and tuple(entry[0]) == stamp and isinstance(entry[1], dict):
                return entry[1]
        except (TypeError, IndexError, KeyError):  # none, or not [stamp, summary]: parse the manifest
            pass
        return None

    def put(self, store: PartitionStore, key: dt.date | None, stamp: tuple, content: dict) -> None:
        self._entries(store)[str(key)] = [list(stamp), content]
        self._dirty.add((store.data_root, store.dataset, store.sub))

    def flush(self) -> None:
        """Write the summary files that learned something, each whole. A data root that is gone or read-only
        (or a store that does not answer) keeps none: the next process parses the manifests again."""
        dirty, self._dirty = self._dirty, set()
        for key in sorted(dirty, key=str):
            doc = {"format": FORMAT, "partitions": self._files[key]}
            try:
                self._stores[key].write_summaries(json.dumps(doc, separators=(",", ":")).encode())
            except (OSError, RuntimeError):
                continue
