"""Partition storage: hive paths, atomic whole replacement, manifests, failure records.

The only module that writes Parquet and manifests. Layout of one dataset::

    <data_root>/<dataset>/business_date=YYYY-MM-DD/data.parquet
    <data_root>/<dataset>/business_date=YYYY-MM-DD/_manifest.json
    <data_root>/quarantine/<dataset>/business_date=YYYY-MM-DD/rejected.parquet
    <data_root>/_state/failures/<dataset>/business_date=YYYY-MM-DD.json
    <data_root>/_state/locks/<dataset>/business_date=YYYY-MM-DD.lock

A write never leaves a reader a mix: a new partition is built in a hidden sibling folder and renamed
into place; an existing one has its data file replaced with ``os.replace`` and then its manifest.
A crash between the two leaves a manifest that no longer describes the data file, so the partition
counts as stale and is rebuilt; the data file itself is always whole.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pyarrow is imported where data is written: a completeness check never needs it
    import pyarrow as pa

MANIFEST = "_manifest.json"
DATA_FILE = "data.parquet"
PARTITION_PREFIX = "business_date="


def partition_name(date: dt.date) -> str:
    if not isinstance(date, dt.date):
        raise TypeError(f"partition key must be a date, got {date!r}")
    return f"{PARTITION_PREFIX}{date.isoformat()}"


def parse_partition_name(name: str) -> dt.date | None:
    if not name.startswith(PARTITION_PREFIX):
        return None
    try:
        return dt.date.fromisoformat(name[len(PARTITION_PREFIX) :])
    except ValueError:
        return None


def _safe_relpath(dataset: str) -> str:
    parts = dataset.split("/")
    if not dataset or any(p in ("", ".", "..") or p.startswith(".") or "\\" in p for p in parts):
        raise ValueError(f"dataset path {dataset!r} could escape the data root")
    return dataset


class PartitionStore:
    """One dataset's partitions under ``data_root``."""

    def __init__(self, data_root: str | os.PathLike, dataset: str, subpartition: str | None = None):
        """``subpartition`` is a second hive level under each date, e.g. ``hotel_id=H1``."""
        self.data_root = Path(data_root)
        self.dataset = _safe_relpath(dataset)
        self.root = self.data_root / dataset
        if subpartition is not None and ("/" in subpartition or _safe_relpath(subpartition) != subpartition):
            raise ValueError(f"subpartition {subpartition!r} could escape its folder")
        self.sub = subpartition

    def _levels(self, date: dt.date | None) -> list[str]:
        return [] if date is None else [partition_name(date), *([self.sub] if self.sub else [])]

    def path(self, date: dt.date | None) -> Path:
        """The partition's folder; the dataset folder itself for an unpartitioned dataset (None)."""
        return self.root.joinpath(*self._levels(date))

    def quarantine_path(self, date: dt.date | None) -> Path:
        return (self.data_root / "quarantine" / self.dataset).joinpath(*self._levels(date)) / "rejected.parquet"

    def failure_path(self, date: dt.date | None) -> Path:
        folder = self.data_root / "_state" / "failures"
        if date is None:
            return folder / f"{self.dataset}.json"
        *parents, last = self._levels(date)
        return (folder / self.dataset).joinpath(*parents) / f"{last}.json"

    def lock_path(self, date: dt.date | None) -> Path:
        """``_state/locks/`` mirrors ``_state/failures/``: one lock file per partition."""
        state = self.data_root / "_state"
        return (state / "locks" / self.failure_path(date).relative_to(state / "failures")).with_suffix(".lock")

    @contextmanager
    def locked(self, date: dt.date | None) -> Iterator[None]:
        """Hold partition ``date``'s lock: two runs that would build the same partition at once (two
        backfills of one range, started by hand and by cron) take turns instead of both writing."""
        with exclusive(self.lock_path(date), f"{self.dataset} {date or ''}".strip()):
            yield

    # -- reading -------------------------------------------------------------------------------
    def listed_dates(self) -> set[dt.date]:
        """Dates that have a partition folder, from one listing of the dataset folder."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return set()
        return {d for d in map(parse_partition_name, names) if d is not None}

    def read_manifest(self, date: dt.date | None) -> dict | None:
        try:
            with open(self.path(date) / MANIFEST, encoding="utf-8") as fh:
                return json.load(fh)
        except FileNotFoundError:
            return None
        except (json.JSONDecodeError, UnicodeDecodeError):
            return {"_corrupt": True}

    def data_matches(self, date: dt.date | None, manifest: dict) -> bool:
        """True when every data file the manifest lists is there with the recorded size and mtime."""
        folder = self.path(date)
        for f in manifest.get("data_files", []):
            try:
                st = os.stat(folder / f["name"])
            except FileNotFoundError:
                return False
            if st.st_size != f["size"] or st.st_mtime_ns != f["mtime_ns"]:
                return False
        return bool(manifest.get("data_files"))

    def read_table(self, date: dt.date | None) -> pa.Table:
        """The data of one partition, as written (without the hive column)."""
        import pyarrow.parquet as pq

        return pq.read_table(self.path(date) / DATA_FILE)

    def read_failure(self, date: dt.date | None) -> dict | None:
        try:
            return json.loads(self.failure_path(date).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None

    # -- writing -------------------------------------------------------------------------------
    def write(
        self, date: dt.date | None, table: pa.Table, manifest: dict, extras: dict[str, bytes] | None = None
    ) -> dict:
        """Replace partition ``date`` with ``table`` and return the manifest as written."""
        final = self.path(date)
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.is_dir():
            return self._write_files(final, table, manifest, extras or {})
        staging = final.parent / f".{final.name}.tmp-{uuid.uuid4().hex}"
        staging.mkdir()
        try:
            written = self._write_files(staging, table, manifest, extras or {})
            os.rename(staging, final)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if not final.is_dir():
                raise
            return self._write_files(final, table, manifest, extras or {})  # a concurrent run created it first
        _fsync_dir(final.parent)
        return written

    def _write_files(self, folder: Path, table: pa.Table, manifest: dict, extras: dict[str, bytes]) -> dict:
        files = [(DATA_FILE, atomic_write_parquet(folder / DATA_FILE, table))]
        for name, content in extras.items():  # e.g. a CSV copy for a system that cannot read Parquet
            if name in (DATA_FILE, MANIFEST) or "/" in name or name.startswith(".") or name.endswith(".parquet"):
                raise ValueError(f"extra file name {name!r} is not allowed in a partition folder")
            files.append((name, atomic_write_bytes(folder / name, content)))
        manifest = dict(manifest)
        manifest["data_files"] = []
        for name, digest in files:
            st = os.stat(folder / name)
            manifest["data_files"].append(
                {"name": name, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}
            )
        manifest["data_version"] = files[0][1] if len(files) == 1 else _sha256_text("".join(d for _, d in files))
        atomic_write_text(folder / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True, default=str))
        return manifest

    def write_quarantine(self, date: dt.date | None, rejected: pa.Table) -> Path | None:
        """Rejected rows of the latest attempt at ``date`` (removed when an attempt rejects nothing)."""
        path = self.quarantine_path(date)
        if rejected.num_rows == 0:
            path.unlink(missing_ok=True)
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_parquet(path, rejected)
        return path

    def record_failure(self, date: dt.date | None, record: dict) -> None:
        path = self.failure_path(date)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(record, indent=1, default=str))

    def clear_failure(self, date: dt.date | None) -> None:
        self.failure_path(date).unlink(missing_ok=True)


def warm_up() -> None:
    """Initialise the Parquet writer and its zstd codec (in memory), so forked workers inherit them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": [1]}), pa.BufferOutputStream(), compression="zstd")


def atomic_write_parquet(path: Path, table: pa.Table) -> str:
    """Write ``table`` to a hidden temporary name beside ``path``, ``os.replace`` it; return its sha256."""
    import pyarrow.parquet as pq

    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex}")
    try:
        pq.write_table(table, tmp, compression="zstd")
        digest = _sha256(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return digest


def atomic_write_bytes(path: Path, content: bytes) -> str:
    """Write ``content`` beside ``path`` under a hidden name, ``os.replace`` it; return its sha256."""
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex}")
    try:
        tmp.write_bytes(content)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return hashlib.sha256(content).hexdigest()


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex}")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def exclusive(path: Path, what: str = "") -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created if needed) for the duration of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logging.getLogger("luigi-interface").info("%s: another run holds it, waiting", what or path)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
