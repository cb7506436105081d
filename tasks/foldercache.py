"""A cache of checked raw folders, shared by the processes that build a dataset (no Luigi here).

StgQsrPos reads raw folders d and d+1 for partition d, so in a per-date backfill every folder is
read by two partitions, often in two processes (``--workers 2``) or two runs (today's d+1 is
tomorrow's d). The first one to check a folder leaves the result here, as Arrow IPC:

    <data_root>/_state/cache/<dataset>/<folder date>.arrow

The entry's trailer holds its key (what it was computed from: cache format, transform version,
the rules that matter, each file's name and content hash) and the length and CRC-32 of its payload,
so an entry that is torn or damaged (a crash before the page cache reached the disk: entries are
written to a temporary name and renamed, not fsynced) is never used. A wrong key or a damaged entry
is a miss: the folder is checked again and the entry replaced. Never a source of truth: deleting
``_state/cache`` at any time only costs time.

Two processes that need the same folder at once (``--workers 2`` runs dates d and d+1 together,
and both read folder d+1) take turns: :meth:`FolderCache.checking` holds the folder's lock
(``<folder date>.lock`` beside the entry) while a process looks for the entry and, on a miss, checks
the folder and writes it, so the second one waits for the entry instead of checking the folder too.
It waits at most :data:`CHECK_WAIT_S`, then checks the folder itself: the lock only saves work.

One entry per folder. It is removed once the second partition reading the folder has used it
(the writer recorded which partition it was), or has checked the folder itself (both partitions ran
at the same time, ``--workers 2``), and any entry older than :data:`MAX_AGE_S` is removed whenever an
entry is written. No entry is written while the data root's file system has less than 512 MiB or
5 % free: the cache never takes the space a partition needs. What stays is the entry of a folder
whose other partition has not been built: at the ends of a range (folder d+1 of the last date d,
for tomorrow's run).
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tasks.storage.partitions import flock_within
from tasks.storage.tempnames import sweep, temp_path

MAX_AGE_S = 7 * 86400  # a daily run reads yesterday's d+1 entry the next day; a week covers a pause
MIN_FREE_BYTES = 512 * 2**20  # no entry is written while less than this is free on the data root's disk
MIN_FREE_SHARE = 0.05  # ... or less than this share of it
CHECK_WAIT_S = 60.0  # longest wait for another process checking the same folder; then check it here too


class FolderCache:
    """Entries of one dataset: each a payload (Arrow IPC) followed by a JSON trailer (key, writer,
    length and CRC-32 of the payload) and the trailer's length (8 bytes, little-endian)."""

    def __init__(self, data_root: str | os.PathLike, dataset: str):
        self.root = Path(data_root) / "_state" / "cache" / dataset

    def path(self, folder: dt.date) -> Path:
        return self.root / f"{folder.isoformat()}.arrow"

    @contextmanager
    def checking(self, folder: dt.date) -> Iterator[None]:
        """Hold the folder's lock while its entry is looked for and, on a miss, the folder is checked
        and its entry written: another process that needs the folder meanwhile waits, then finds the
        entry. After :data:`CHECK_WAIT_S` (a holder that is stuck) it goes on without the lock; when the
        lock file cannot be made (a read-only data root), without waiting."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fh = open(self.root / f"{folder.isoformat()}.lock", "a+b", buffering=0)  # never written
        except OSError:
            fh = None
        if fh is None:
            yield
            return
        with fh:
            flock_within(fh, CHECK_WAIT_S, poll_s=0.005)  # a check takes a few hundred ms: wake soon after
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)  # nothing if it was not taken

    def get(self, folder: dt.date, key: str, reader: dt.date) -> memoryview | None:
        """The payload of the folder's intact entry for ``key``, or None (a miss). The entry is removed
        when ``reader`` is not the partition that wrote it: each folder serves two partitions."""
        path = self.path(folder)
        try:
            data = path.read_bytes()
            size = int.from_bytes(data[-8:], "little")
            meta = json.loads(data[-8 - size : -8])
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict) or meta.get("key") != key:
            return None
        payload = memoryview(data)[: len(data) - 8 - size]
        if len(payload) != meta.get("length") or zlib.crc32(payload) != meta.get("crc32"):
            _remove(path)  # torn or damaged: never used
            return None
        if meta.get("writer") != reader.isoformat():
            _remove(path)  # both partitions reading this folder have had it
        return payload

    def put(self, folder: dt.date, key: str, writer: dt.date, write) -> None:
        """Store what ``write(file)`` writes as the folder's one entry. An OSError is ignored: a full
        disk or a read-only data root costs the next reader time, nothing else."""
        try:
            final = self.path(folder)
            other = _trailer(final)
            if other.get("key") == key and other.get("writer") != writer.isoformat():
                _remove(final)  # the other partition of this folder checked it too (they ran at once): both had it
                return
            if not self._room():
                return
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = temp_path(final)
            try:
                with open(tmp, "wb") as fh:
                    sink = _Crc32(fh)
                    write(sink)
                    meta = {"key": key, "writer": writer.isoformat(), "length": sink.length, "crc32": sink.crc}
                    trailer = json.dumps(meta).encode()
                    fh.write(trailer + len(trailer).to_bytes(8, "little"))
                os.replace(tmp, final)
            finally:
                _remove(tmp)
            self._expire()
        except OSError:
            pass

    def _room(self) -> bool:
        """Whether the data root's file system has room to spare: the cache never takes the space the
        partitions need (at least :data:`MIN_FREE_BYTES` and :data:`MIN_FREE_SHARE` of it stay free)."""
        where = self.root
        while not where.exists() and where != where.parent:
            where = where.parent
        st = os.statvfs(where)
        free = st.f_bavail * st.f_frsize
        return free >= MIN_FREE_BYTES and free >= MIN_FREE_SHARE * st.f_blocks * st.f_frsize

    def _expire(self) -> None:
        limit = time.time() - MAX_AGE_S
        for entry in os.scandir(self.root):
            try:
                if entry.name.endswith((".arrow", ".lock")) and entry.stat().st_mtime < limit:
                    os.unlink(entry.path)
            except OSError:
                pass
        sweep(self.root)  # temporaries of a writer that died


class _Crc32:
    """A write-only file that passes what it is given on, keeping its length and CRC-32."""

    closed = False

    def __init__(self, fh):
        self.fh, self.length, self.crc = fh, 0, 0

    def write(self, data) -> int:
        self.crc = zlib.crc32(data, self.crc)
        self.length += len(data)
        return self.fh.write(data)

    def flush(self) -> None:
        self.fh.flush()


def _trailer(path: Path) -> dict:
    """The trailer of an entry (key, writer, ...); {} when there is none or it cannot be read."""
    try:
        with open(path, "rb") as fh:
            fh.seek(-8, os.SEEK_END)
            size = int.from_bytes(fh.read(8), "little")
            fh.seek(-8 - size, os.SEEK_END)
            meta = json.loads(fh.read(size))
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
