"""Partition storage: hive paths, atomic whole replacement, manifests, failure records.

The only module that writes Parquet and manifests. Layout of one dataset::

    <data_root>/<dataset>/business_date=YYYY-MM-DD/data.parquet
    <data_root>/<dataset>/business_date=YYYY-MM-DD/_manifest.json
    <data_root>/quarantine/<dataset>/business_date=YYYY-MM-DD/rejected.parquet
    <data_root>/_state/failures/<dataset>/business_date=YYYY-MM-DD.json
    <data_root>/_state/failures/<dataset>/business_date=YYYY-MM-DD.rejected.parquet  (a build failed on them)
    <data_root>/_state/locks/<dataset>/business_date=YYYY-MM-DD.lock

A write never leaves a reader a mix. Every file, the quarantine of rejected rows included, is first
written under a hidden temporary name (``tempnames``: it names the writer's host and process) and
fsynced; only then are they renamed into place, data first, then the quarantine, the manifest last
(it records the quarantine's digest, so a partition's quarantine is always the one of its build).
A new partition is assembled that way in a staging folder
(``<data_root>/_state/staging/``, outside every dataset) and renamed into place whole. A crash
between two renames leaves a manifest that no longer describes the data file, so the partition counts
as stale and is rebuilt; each file itself is always whole. Temporary entries of a writer killed
mid-write are swept by the next write to the same folder. A full disk fails the write before
anything is renamed (:class:`PartitionWriteError`, naming the partition).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.storage.files import atomic_write_text, exclusive
from tasks.storage.layout import (
    DATA_FILE,
    MANIFEST,
    differing_file,
    listed_names,
    missing_file,
    parse_manifest,
    parse_partition_name,
    partition_name,
    safe_relpath,
)
from tasks.storage.localwrite import LocalWrites
from tasks.storage.tempnames import is_temp_name

if TYPE_CHECKING:  # pyarrow is imported where data is written: a completeness check never needs it
    import pyarrow as pa


class PartitionStore(LocalWrites):
    """One dataset's partitions under a local ``data_root`` (:func:`open_store` makes the store of any data
    root; while a preview builds, :func:`shadowed`, a store of the production data root is a
    :class:`ShadowStore`: it writes to the preview's shadow root)."""

    def __init__(self, data_root: str | os.PathLike, dataset: str, subpartition: str | None = None):
        """``subpartition`` is a second hive level under each date, e.g. ``hotel_id=H1``."""
        self.data_root = Path(data_root)
        self.dataset = safe_relpath(dataset)
        self.root = self.data_root / dataset
        if subpartition is not None and ("/" in subpartition or safe_relpath(subpartition) != subpartition):
            raise ValueError(f"subpartition {subpartition!r} could escape its folder")
        self.sub = subpartition
        self._paths: dict[dt.date | None, Path] = {}
        self._strs: dict[dt.date | None, str] = {}

    def _levels(self, date: dt.date | None) -> list[str]:
        return [] if date is None else [partition_name(date), *([self.sub] if self.sub else [])]

    def rel(self, date: dt.date | None) -> str:
        """The partition's folder, relative to the data root (``staging/qsr_pos/business_date=D``)."""
        return "/".join([self.dataset, *self._levels(date)])

    def path(self, date: dt.date | None) -> Path:
        """The partition's folder; the dataset folder itself for an unpartitioned dataset (None)."""
        if date not in self._paths:  # a status view asks for each of a thousand folders several times
            self._paths[date] = self.root.joinpath(*self._levels(date))
        return self._paths[date]

    def quarantine_path(self, date: dt.date | None) -> Path:
        return (self.data_root / "quarantine" / self.dataset).joinpath(*self._levels(date)) / "rejected.parquet"

    def record_name(self, date: dt.date | None) -> str:
        """The partition's name under ``_state/failures``, ``_state/identity``...: ``<dataset>/<levels>.json``
        (``<dataset>.json`` for an unpartitioned dataset)."""
        if date is None:
            return f"{self.dataset}.json"
        return "/".join([self.dataset, *self._levels(date)]) + ".json"

    def failure_path(self, date: dt.date | None) -> Path:
        return self.data_root / "_state" / "failures" / self.record_name(date)

    def lock_path(self, date: dt.date | None) -> Path:
        """``_state/locks/`` mirrors ``_state/failures/``: one lock file per partition."""
        state = self.data_root / "_state"
        return (state / "locks" / self.failure_path(date).relative_to(state / "failures")).with_suffix(".lock")

    @contextmanager
    def locked(self, date: dt.date | None, wait_s: float | None = None) -> Iterator[None]:
        """Hold partition ``date``'s lock: two runs that would build the same partition at once (two
        backfills of one range, started by hand and by cron) take turns instead of both writing."""
        with exclusive(self.lock_path(date), f"{self.dataset} {date or ''}".strip(), wait_s):
            yield

    # -- reading -------------------------------------------------------------------------------
    def listed_dates(self) -> set[dt.date]:
        """Dates that have a partition folder, from one listing of the dataset folder."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return set()
        return {d for d in map(parse_partition_name, names) if d is not None}

    def strays(self, depth: int) -> list[str]:
        """Entries of a date-partitioned dataset's folder that are no partition (never read as data): a name
        that is not ``business_date=YYYY-MM-DD``, or a file where a partition's folders are (``depth`` levels
        of folders under the dataset: 1, or 2 with a second level such as ``hotel_id=H1``). Hidden
        temporary entries of writers are left out."""
        out = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            rel = os.path.relpath(dirpath, self.root)
            level = 0 if rel == "." else rel.count(os.sep) + 1
            prefix = self.dataset if level == 0 else f"{self.dataset}/{rel}"
            out += [f"{prefix}/{name}" for name in filenames if not name.startswith(".")]
            if level == 0:
                out += [f"{prefix}/{name}" for name in dirnames if parse_partition_name(name) is None]
            dirnames[:] = [d for d in dirnames if level + 1 < depth and not d.startswith(".")]
        return sorted(out)

    def folder(self, date: dt.date | None) -> str:
        """:meth:`path` as a string: a status view opens and stats files of thousands of folders, and
        a ``Path`` join and its conversion back to a string cost more than the system call."""
        if date not in self._strs:
            self._strs[date] = os.fspath(self.path(date))
        return self._strs[date]

    def read_manifest(self, date: dt.date | None) -> dict | None:
        try:
            with open(os.path.join(self.folder(date), MANIFEST), "rb") as fh:
                return parse_manifest(fh.read())
        except FileNotFoundError:
            return None

    def data_matches(self, date: dt.date | None, manifest: dict) -> bool:
        """True when every data file the manifest lists, and its quarantine if it lists one, is there
        with the recorded size and mtime."""
        return not self.data_problem(date, manifest)

    def data_problem(self, date: dt.date | None, manifest: dict) -> str:
        """Why the files the manifest lists (and its quarantine) are not the ones it describes (size and
        mtime); '' when they are."""
        folder = self.folder(date)
        quarantine = manifest.get("quarantine")
        files = [(os.path.join(folder, f["name"]), f) for f in manifest.get("data_files", [])]
        files += [(self.data_root / quarantine["path"], quarantine)] if quarantine else []
        for path, f in files:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                return missing_file(f)
            if st.st_size != f["size"] or st.st_mtime_ns != f["mtime_ns"]:
                return differing_file(f)
        return "" if manifest.get("data_files") else "its manifest lists no data file"

    def strays_in(self, date: dt.date | None, manifest: dict | None) -> list[str]:
        """Files under the partition's folder, at any depth, that ``manifest`` does not list (every file
        but the manifest when None), as keys under the data root; writers' hidden temporary entries left out.
        One listing of the folder (and of a folder in it, which is itself a stray)."""
        folder = self.folder(date)
        keep = listed_names(manifest)
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            return []
        out, rel = [], self.rel(date)
        for entry in entries:
            if entry.name in keep or is_temp_name(entry.name):
                continue
            if not entry.is_dir(follow_symlinks=False):
                out.append(f"{rel}/{entry.name}")
                continue
            for dirpath, dirnames, filenames in os.walk(entry.path):
                dirnames[:] = [d for d in dirnames if not is_temp_name(d)]
                inner = os.path.relpath(dirpath, folder).replace(os.sep, "/")
                out += [f"{rel}/{inner}/{n}" for n in filenames if not is_temp_name(n)]
        return sorted(out)

    def read_table(self, date: dt.date | None, columns: list[str] | None = None) -> pa.Table:
        """The data of one partition, as written (without the hive column); ``columns``: only these."""
        import pyarrow.parquet as pq

        return pq.read_table(self.path(date) / DATA_FILE, columns=columns)

    def read_file(self, date: dt.date | None, name: str) -> bytes:
        """A file of the partition's folder (``finished.arrow``, ``_store_totals.arrow``); FileNotFoundError."""
        with open(os.path.join(self.folder(date), name), "rb") as fh:
            return fh.read()

    def file_digest(self, rel: str) -> tuple[str | None, str, int]:
        """(sha256, "", bytes read) of a file of the data root (``rel`` below it) as it is now; (None, why, 0)
        when it is missing or not a regular file (a FIFO put in its place is refused, not waited on)."""
        from tasks.storage.rawzone import RawFileUnreadable, open_regular

        path = self.data_root / rel
        try:
            fd = open_regular(path)
        except FileNotFoundError:
            return None, "missing", 0
        except RawFileUnreadable as exc:
            return None, str(exc).removeprefix(f"{path}: "), 0
        h, size = hashlib.sha256(), 0
        with os.fdopen(fd, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
                size += len(block)
        return h.hexdigest(), "", size

    def has_manifest(self, date: dt.date | None) -> bool:
        return os.path.isfile(os.path.join(self.folder(date), MANIFEST))

    def uri(self, date: dt.date | None = None) -> str:
        """The partition's folder as a user names it (messages, the status page's commands)."""
        return self.folder(date)

    @property
    def state_dir(self) -> Path:
        """Where this data root's own state lives (summaries, identity sidecars, the folder cache)."""
        return self.data_root / "_state"

    def summaries_path(self) -> Path:
        """This dataset's manifest summaries (tasks/freshness/summaries.py): ``_state/summaries/<dataset>.json``."""
        name = f"{self.dataset}/{self.sub}.json" if self.sub else f"{self.dataset}.json"
        return self.state_dir / "summaries" / name

    def read_summaries(self) -> bytes | None:
        try:
            return self.summaries_path().read_bytes()
        except FileNotFoundError:
            return None

    def write_summaries(self, data: bytes) -> None:
        if not self.data_root.is_dir():  # the data root is gone (a test's temporary folder)
            return
        path = self.summaries_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, data.decode())

    def refresh(self, date: dt.date | None) -> None:
        """Nothing to do: a folder's files are looked at anew by every question (a bucket's listing is not)."""

    def manifest_stamp(self, date: dt.date | None, fresh: bool = False) -> tuple | None:
        """(device, inode, size, mtime_ns, ctime_ns) of the partition's manifest; None when it has none. The
        ctime cannot be set back (a restore that keeps mtimes, a reused inode), and a rename sets it."""
        try:
            st = os.stat(os.path.join(self.folder(date), MANIFEST))  # a string path: a view stats thousands
        except (FileNotFoundError, NotADirectoryError):
            return None
        return _stat_stamp(st)

    def read_manifest_stamped(self, date: dt.date | None, known: tuple | None) -> tuple[tuple | None, dict | None]:
        """(stamp, content) of the manifest, ``known`` when it has that stamp still; the stamp is taken from
        the open file, so it is the stamp of the content read. (None, None) when there is none."""
        try:
            fh = open(os.path.join(self.folder(date), MANIFEST), "rb")
        except (FileNotFoundError, NotADirectoryError):
            return None, None
        with fh:
            stamp = _stat_stamp(os.fstat(fh.fileno()))
            if known is not None and known[0] == stamp:
                return known
            return stamp, parse_manifest(fh.read())

    def failure_id(self, date: dt.date | None) -> str:
        return str(self.failure_path(date))

    def failure_records(self) -> set[str]:
        """:meth:`failure_id` of every failure record under the data root (one walk; most days have none)."""
        top = os.path.join(self.data_root, "_state", "failures")
        return {os.path.join(folder, name) for folder, _, names in os.walk(top) for name in names}

    def read_failure(self, date: dt.date | None) -> dict | None:
        try:
            return json.loads(self.failure_path(date).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None


def _stat_stamp(st: os.stat_result) -> tuple:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
