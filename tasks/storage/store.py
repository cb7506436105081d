"""One dataset's partitions under a data root, written once for every backend: names and keys, manifests
read and parsed, whether a partition's files are the ones its manifest describes, strays, failure records
and manifest summaries. A backend (:class:`tasks.storage.backend.Backend`: a folder's
:class:`tasks.storage.localbackend.LocalBackend`, a bucket's :class:`tasks.storage.s3backend.S3Backend`)
answers listings and reads of keys under the data root, and commits a partition's objects in the order the
store hands them over (data first, the quarantine, the manifest last): :mod:`tasks.storage.localcommit`
(a rename on a disk), :mod:`tasks.storage.s3commit` (conditional PUTs). Layout of one dataset::

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
from concurrent.futures import Future
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tasks.storage.layout import (
    DATA_FILE,
    DATA_VERSION,
    MANIFEST,
    WRITE_HOOKS,
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

if TYPE_CHECKING:  # pyarrow is imported where data is read: a completeness check never needs it
    import pyarrow as pa

    from tasks.storage.backend import Backend

_LOCAL: dict[str, Backend] = {}  # a local data root -> its backend (a status view opens a store per dataset and day)


def open_backend(data_root: str | os.PathLike) -> Backend:
    """The backend of ``data_root``: a local folder, or a bucket (its module loaded only then: one backend per
    bucket prefix and endpoint in a process, so that what it listed in a pass serves every store of it)."""
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
    """One dataset's partitions under ``data_root`` (:func:`tasks.storage.partitions.open_store` makes the
    store of any data root, the one that writes)."""

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
        """Where this host keeps its state for the data root."""
        return self.backend.state_dir

    # -- reading -------------------------------------------------------------------------------------
    def listed_dates(self) -> set[dt.date]:
        """Dates that have a partition folder, from one listing of the dataset folder (a bucket lists its
        quarantine and the failure records at the same time: a check asks all three)."""
        self.backend.list_ahead([f"{self.dataset}/", f"quarantine/{self.dataset}/", "_state/failures/"])
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

    def write_failed_rejects(self, date: dt.date | None, rejected: pa.Table) -> str:
        """Keep the rejected rows of a build that failed on them for a person to read; the partition and its
        quarantine are left as they were. Removed with the failure record. Returns where they are."""
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
        """Replace partition ``date`` with ``table`` (and the files ``extras`` names beside it) in one commit,
        and return the manifest as written: the data first, the quarantine, the manifest last.

        ``rejected`` (when not None) replaces the partition's quarantine in the same commit; the manifest
        records its path, rows, identity and sha256; with no rows, the old one is removed (emptied on a
        bucket: no delete is part of a commit). Raises :class:`PartitionWriteError`, naming the partition,
        when the backend fails (a full disk, the store's error)."""
        check_extra_names(extras)
        folder, quarantine = self.rel(date), self.quarantine_rel(date)

        def fill(commit) -> dict:
            # the rows' version is hashed on another core while the files are written (both release the GIL)
            version = None
            if "data_version" not in manifest and DATA_VERSION:
                from tasks.cores import start_on_side_thread

                kind, versioner = DATA_VERSION[0]
                version = start_on_side_thread(versioner, table)
            named = [
                (f"{folder}/{name}", content, name) for name, content in [(DATA_FILE, table), *(extras or {}).items()]
            ]
            files_count = len(named)
            if rejected is not None and rejected.num_rows:
                named.append((quarantine, rejected, "the quarantine"))
            found = commit.put_all(named)  # at once on a bucket: one round trip, not one per object
            files = [
                {"name": name, **f} for (_, _, name), f in zip(named[:files_count], found[:files_count], strict=True)
            ]
            written = dict(manifest, data_files=files)
            if version is not None:  # the rows, not the bytes: see tasks/freshness/dataversions.py
                written.update(data_version=version.result(), data_version_kind=kind)
            if rejected is not None:
                written["quarantine"] = None
                if rejected.num_rows:
                    written["quarantine"] = {"path": quarantine, "rows": rejected.num_rows, **found[-1]}
                else:
                    commit.clear(quarantine, lambda: rejected)
            commit.put(f"{folder}/{MANIFEST}", manifest_bytes(written), MANIFEST, manifest=written)
            return written

        with self._replacing(date):
            return self.backend.commit(self._where(date), self._label(date), folder, quarantine, fill)

    def commit_build(
        self,
        date: dt.date | None,
        table: pa.Table,
        manifest: dict,
        extras: dict[str, bytes] | None = None,
        rejected: pa.Table | None = None,
        in_place: dict | None = None,
    ) -> dict:
        """Replace partition ``date`` with a build, in one commit, and return the manifest as written. When the
        partition in place (its manifest ``in_place``) already holds exactly this build (the rows' data version,
        its files intact, each file beside the data and the quarantine byte for byte), its files are kept and
        the manifest alone is replaced (then the files it no longer lists are removed); else :meth:`write`."""
        extras = extras or {}
        if in_place and not in_place.get("verify_mismatch"):  # a data file verify found damaged is rewritten
            if isinstance(manifest.get("data_version"), Future):  # hashed on another core while the build ran
                manifest["data_version"] = manifest["data_version"].result()
            if (
                in_place.get("data_version") == manifest["data_version"]
                and self.data_matches(date, in_place)
                and same_files(in_place, extras, rejected)
            ):
                written = dict(manifest, data_files=in_place["data_files"], quarantine=in_place.get("quarantine"))
                self.update_manifest(date, written)
                self.drop_strays(date, written)  # a write does it after its manifest
                return written
        return self.write(date, table, manifest, extras, rejected=rejected)

    def copy_partition_from(self, date: dt.date | None, source: PartitionStore) -> dict:
        """Replace partition ``date`` with the one ``source`` (a preview's shadow root) holds, by the same
        commit as :meth:`write`: each file the manifest lists, and its quarantine, copied (hard linked on a
        disk: no byte is copied, and the source stays whole, so an interrupted copy is simply done again),
        the manifest last, byte for byte. Returns the manifest copied."""
        manifest = source.read_manifest(date)
        if not manifest or manifest.get("_corrupt"):
            raise ValueError(f"{source.uri(date)}: no readable manifest to adopt")
        folder, quarantine = self.rel(date), self.quarantine_rel(date)

        def fill(commit) -> dict:
            for f in manifest.get("data_files", []):
                commit.copy(f"{folder}/{f['name']}", source.backend, f["name"])
            recorded = manifest.get("quarantine")
            if recorded:
                commit.copy(recorded["path"], source.backend, "the quarantine")
            else:
                commit.clear(quarantine, lambda: self.backend.empty_like(quarantine))
            commit.copy(f"{folder}/{MANIFEST}", source.backend, MANIFEST, manifest=manifest)
            return manifest

        with self._replacing(date):
            return self.backend.commit(self._where(date), self._label(date), folder, quarantine, fill)

    def update_manifest(self, date: dt.date | None, manifest: dict, files_from: PartitionStore | None = None) -> None:
        """Replace the manifest alone: the data files it lists are kept as they are (a rebuild that produced
        the same rows; ``daybreak verify`` marking a partition stale). ``files_from``: a store that holds them
        while this one does not hold the partition yet (a preview's shadow and production): they are copied
        (hard linked on a disk) in the same commit."""
        folder, quarantine, key = self.rel(date), self.quarantine_rel(date), f"{self.rel(date)}/{MANIFEST}"
        with self._replacing(date):
            if files_from is None:
                self.backend.commit_one(
                    self._where(date), self._label(date), folder, quarantine, key, manifest_bytes(manifest), manifest
                )
                return

            def fill(commit) -> dict:
                for f in manifest.get("data_files", []):
                    commit.copy(f"{folder}/{f['name']}", files_from.backend, f["name"])
                if manifest.get("quarantine"):  # the manifest names it: the partition is whole only with it
                    commit.copy(manifest["quarantine"]["path"], files_from.backend, "the quarantine")
                commit.put(key, manifest_bytes(manifest), MANIFEST, manifest=manifest)
                return manifest

            self.backend.commit(self._where(date), self._label(date), folder, quarantine, fill)

    def drop_strays(self, date: dt.date | None, manifest: dict) -> None:
        """Remove the files of partition ``date`` that its manifest, in place, does not list (a rebuild whose
        files were already in place: only its manifest was replaced). Not part of a commit."""
        self.backend.drop_strays(self.rel(date), self.quarantine_rel(date), manifest)

    def _label(self, date: dt.date | None) -> str:
        return f"{self.dataset} {date}" if date else self.dataset

    def _where(self, date: dt.date | None) -> str:
        return self.dataset if date is None else f"{self.dataset} {'/'.join(self._levels(date))}"

    @contextmanager
    def _replacing(self, date: dt.date | None) -> Iterator[None]:
        """Around every replacement of partition ``date``: the write hooks (the freshness engine) hear of it
        whether it succeeded or failed half-way."""
        try:
            yield
        finally:
            for hook in WRITE_HOOKS:
                hook(self, date)
