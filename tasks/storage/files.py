"""Local files written whole (temporary name, fsync, rename), Parquet as every partition file is written,
and exclusive ``flock`` locks with a bounded wait."""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.storage import tempnames

if TYPE_CHECKING:
    import pyarrow as pa


def warm_up() -> None:
    """Initialise the Parquet writer and its zstd codec (in memory), so forked workers inherit them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": [1]}), pa.BufferOutputStream(), compression="zstd")


def atomic_write_parquet(path: Path, table: pa.Table) -> str:
    """Write ``table`` to a hidden temporary name beside ``path``, fsync, ``os.replace``; return its sha256."""
    return _replace(path, lambda tmp: write_parquet_fsynced(tmp, table))


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    _replace(path, lambda tmp: write_bytes_fsynced(tmp, data))


def _replace(path: Path, write) -> str:
    """``write(tmp)``, rename it over ``path``, fsync the folder; dead writers' temporary files go first."""
    tempnames.sweep(path.parent)
    tmp = tempnames.temp_path(path)
    try:
        digest = write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return digest


DICTIONARY_PAGE_LIMIT = 64 << 10  # high-cardinality columns written plain (docs/performance.md, "Parquet")


def write_parquet_fsynced(path: Path, table: pa.Table) -> str:
    """Write ``table`` to ``path`` and fsync it; its sha256."""
    parquet_to(path, table)
    with open(path, "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
        os.fsync(fh.fileno())
    return digest


def parquet_to(where, table: pa.Table) -> None:
    """``table`` as every Parquet file of a partition is written (to a path or a buffer)."""
    import pyarrow.parquet as pq

    pq.write_table(
        table,
        where,
        compression="zstd",
        dictionary_pagesize_limit=DICTIONARY_PAGE_LIMIT,
        store_decimal_as_integer=True,
    )


def parquet_bytes(table: pa.Table) -> bytes:
    """``table`` as the Parquet file a partition holds, in memory (an object of a bucket)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    parquet_to(sink, table)
    return sink.getvalue().to_pybytes()


def parquet_sha256(table: pa.Table) -> str:
    """The sha256 of the Parquet file a partition write would make of ``table``."""
    return hashlib.sha256(parquet_bytes(table)).hexdigest()


def write_bytes_fsynced(path: Path, content: bytes) -> str:
    """Write and fsync ``content`` unbuffered (a buffered file raises a full disk twice: flush, close)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    return hashlib.sha256(content).hexdigest()


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class PartitionBusy(RuntimeError):
    """Another live run held a partition's lock for longer than ``[daybreak] lock_wait_s``."""


@contextmanager
def exclusive(path: Path, what: str = "", wait_s: float | None = None) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` for the block; a live holder is waited for ``wait_s`` seconds (None:
    for ever), then :class:`PartitionBusy` names it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b", buffering=0) as fh:  # an empty file: taking the lock writes nothing (a full disk)
        if not flock_within(fh, 0):
            holder = _lock_holder(os.fstat(fh.fileno()))
            logging.getLogger("luigi-interface").info("%s: %s holds it, waiting", what or path, holder)
            if not flock_within(fh, wait_s, poll_s=0.1):
                raise PartitionBusy(
                    f"{what or path}: {holder} has been writing it for over {wait_s:.0f} s (lock {path}); "
                    "nothing was written by this run. Rerun once that run has finished."
                )
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def flock_within(fh, wait_s: float | None, poll_s: float = 0.1) -> bool:
    """Whether an exclusive ``flock`` on ``fh`` was taken within ``wait_s`` seconds (None: ever; 0: once)."""
    deadline = None if wait_s is None else time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)


def _lock_holder(st: os.stat_result) -> str:
    """Who holds the flock of this file, from ``/proc/locks`` (this host's locks; Linux)."""
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == inode:
                    return f"pid {fields[4]} on {tempnames.host()}"
    except OSError:
        pass
    return "another run"
