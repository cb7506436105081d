"""One dataset's partitions under a data root, written once for every backend: names and keys, manifests
read and parsed, whether a partition's files are the ones its manifest describes, strays, failure records
and manifest summaries. A backend (:class:`tasks.storage.localbackend.LocalBackend` for a folder,
:class:`tasks.storage.s3backend.S3Backend` for ``s3://``) answers listings and reads of keys under the
data root; the write protocols are the backends' own (:mod:`tasks.storage.localwrite`,
:mod:`tasks.storage.s3store`). Layout of one dataset::

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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tasks.storage.layout import (
    DATA_FILE,
    MANIFEST,
    differing_file,
    listed_names,
    missing_file,
    parse_manifest,
    parse_partition_name,
    partition_name,
    remote,
    safe_relpath,
)

if TYPE_CHECKING:  # pyarrow is imported where data is read: a completeness check never needs it
    import pyarrow as pa

_BACKENDS: dict[str, object] = {}  # data root -> its backend (a status view opens a store per dataset and day)


def open_backend(data_root: str | os.PathLike):
    """The backend of ``data_root``: a local folder or a bucket (its module loaded only then)."""
    key = os.fspath(data_root)
    backend = _BACKENDS.get(key)
    if backend is None:
        module = remote(key)
        if module is None:
            from tasks.storage.localbackend import LocalBackend

            backend = LocalBackend(data_root)
        else:
            backend = module.S3Backend(key)
        _BACKENDS[key] = backend
    return backend


class PartitionStore:
    """One dataset's partitions under ``data_root`` (:func:`tasks.storage.partitions.open_store` makes the
    store of any data root, the one that writes)."""

    def __init__(self, data_root: str | os.PathLike, dataset: str, subpartition: str | None = None):
        """``subpartition`` is a second hive level under each date, e.g. ``hotel_id=H1``."""
        self.backend = open_backend(data_root)
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
        if rel is None:  # a status view asks for each of a thousand folders several times
            rel = self._rels[date] = "/".join([self.dataset, *self._levels(date)])
        return rel

    def uri(self, date: dt.date | None = None) -> str:
        """The partition's folder as a user names it (messages, the status page's commands)."""
        return self.backend.uri(self.rel(date))

    def quarantine_rel(self, date: dt.date | None) -> str:
        return "/".join(["quarantine", self.dataset, *self._levels(date), "rejected.parquet"])

    def record_name(self, date: dt.date | None) -> str:
        """The partition's name under ``_state/failures``, ``_state/identity``...: ``<dataset>/<levels>.json``
        (``<dataset>.json`` for an unpartitioned dataset)."""
        return f"{self.rel(date)}.json"

    def failure_id(self, date: dt.date | None) -> str:
        """The key of the partition's failure record (as :meth:`failure_records` lists it)."""
        return f"_state/failures/{self.record_name(date)}"

    def failed_rejects_rel(self, date: dt.date | None) -> str:
        """Rejected rows of a build that failed on them (too many), beside its failure record."""
        return f"{self.failure_id(date)[: -len('.json')]}.rejected.parquet"

    def summaries_rel(self) -> str:
        """This dataset's manifest summaries (tasks/freshness/summaries.py), shared by every host."""
        return f"_state/summaries/{self.dataset}{f'/{self.sub}' if self.sub else ''}.json"

    @property
    def state_dir(self):
        """Where this host keeps its state for the data root (identity sidecars, the folder cache)."""
        return self.backend.state_dir

    # -- reading -------------------------------------------------------------------------------------
    def listed_dates(self) -> set[dt.date]:
        """Dates that have a partition folder, from one listing of the dataset folder."""
        return {d for d in map(parse_partition_name, self.backend.folders(self.dataset)) if d is not None}

    def strays(self, depth: int) -> list[str]:
        """Keys under a date-partitioned dataset's folder that are no partition's (never read as data): a first
        level that is not ``business_date=YYYY-MM-DD``, or a file where a partition's folders are (``depth``
        levels of folders under the dataset: 1, or 2 with a second level such as ``hotel_id=H1``). Writers'
        hidden temporary entries are left out."""
        return self.backend.dataset_strays(self.dataset, depth)

    def refresh(self, date: dt.date | None) -> None:
        """Look at the partition anew (another process may have committed it): nothing for a folder, whose
        files are looked at anew by every question; a bucket lists the partition again."""
        self.backend.refresh(self.dataset, self.rel(date), self.quarantine_rel(date))

    def manifest_stamp(self, date: dt.date | None, fresh: bool = False) -> tuple | None:
        """What identifies the partition's manifest as it is now (a file's device, inode, size and times; an
        object's ETag and size); None when it has none. ``fresh``: not from this pass's listing."""
        return self.backend.stamp(self.dataset, f"{self.rel(date)}/{MANIFEST}", fresh)

    def read_manifest_stamped(self, date: dt.date | None, known: tuple | None) -> tuple[tuple | None, dict | None]:
        """(stamp, content) of the manifest, ``known`` when it has that stamp still; the stamp is that of the
        content read. (None, None) when there is none."""
        return self.backend.read_stamped(self.dataset, f"{self.rel(date)}/{MANIFEST}", known, parse_manifest)

    def read_manifest(self, date: dt.date | None) -> dict | None:
        try:
            return parse_manifest(self.backend.read(f"{self.rel(date)}/{MANIFEST}"))
        except (FileNotFoundError, NotADirectoryError):
            return None

    def has_manifest(self, date: dt.date | None) -> bool:
        return self.backend.exists(f"{self.rel(date)}/{MANIFEST}")

    def data_matches(self, date: dt.date | None, manifest: dict) -> bool:
        """True when every data file the manifest lists, and its quarantine if it lists one, is there as
        recorded (a file's size and mtime; an object's ETag and size)."""
        return not self.data_problem(date, manifest)

    def data_problem(self, date: dt.date | None, manifest: dict) -> str:
        """Why the files the manifest lists (and its quarantine) are not the ones it describes; '' when they are."""
        backend, folder = self.backend, self.rel(date)
        data = backend.listing(f"{self.dataset}/")
        files = [(data, f"{folder}/{f['name']}", f) for f in manifest.get("data_files", [])]
        quarantine = manifest.get("quarantine")
        if quarantine:
            files.append((backend.listing(f"quarantine/{self.dataset}/"), quarantine["path"], quarantine))
        for listing, key, f in files:
            found = listing.get(key)
            if found is None:
                return missing_file(f)
            if not backend.same(found, f):
                return differing_file(f)
        return "" if manifest.get("data_files") else "its manifest lists no data file"

    def strays_in(self, date: dt.date | None, manifest: dict | None) -> list[str]:
        """Files under the partition's folder, at any depth, that ``manifest`` does not list (every file but
        the manifest when None), as keys under the data root; writers' hidden temporary entries left out."""
        folder, keep = self.rel(date), listed_names(manifest)
        names = self.backend.files_in(self.dataset, folder, len(self._levels(date)))
        return sorted(f"{folder}/{name}" for name in names if name not in keep)

    def read_file(self, date: dt.date | None, name: str) -> bytes:
        """A file of the partition's folder (``finished.arrow``, ``_store_totals.arrow``); FileNotFoundError."""
        return self.backend.read(f"{self.rel(date)}/{name}")

    def read_table(self, date: dt.date | None, columns: list[str] | None = None) -> pa.Table:
        """The data of one partition, as written (without the hive column); ``columns``: only these."""
        return self.backend.read_table(f"{self.rel(date)}/{DATA_FILE}", columns)

    def file_digest(self, rel: str) -> tuple[str | None, str, int]:
        """(sha256, "", bytes read) of a file of the data root (``rel`` below it) as it is now; (None, why, 0)
        when it is missing or not a regular file."""
        return self.backend.digest(rel)

    # -- leases or locks -----------------------------------------------------------------------------
    @contextmanager
    def locked(self, date: dt.date | None, wait_s: float | None = None) -> Iterator[None]:
        """Hold partition ``date``'s lock (a lease on a bucket): two runs that would build the same partition
        at once (two backfills of one range, started by hand and by cron) take turns instead of both writing."""
        what = f"{self.dataset} {date or ''}".strip()
        with self.backend.locked(self.record_name(date), self.rel(date), self.quarantine_rel(date), what, wait_s):
            yield

    # -- records beside the partitions -------------------------------------------------------------
    def failure_records(self) -> set[str]:
        """:meth:`failure_id` of every failure record under the data root (one listing; most days have none)."""
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
        """Remove the failure record and its rejected rows."""
        self.backend.remove_records([self.failure_id(date), self.failed_rejects_rel(date)], "_state/failures/")
