"""A cache of checked raw folders, shared by the processes that build a dataset (no Luigi here).

StgQsrPos reads raw folders d and d+1 for partition d, so in a per-date backfill every folder is
read by two partitions, often in two processes (``--workers 2``) or two runs (today's d+1 is
tomorrow's d). The first one to check a folder leaves the result here, as Arrow IPC:

    <data_root>/_state/cache/<dataset>/<folder date>.arrow

The entry's trailer holds its key (what it was computed from: cache format, transform version,
the rules that matter, each file's name and content hash) and the length and checksum (XXH3-64) of its
payload, so an entry that is torn or damaged (a crash before the page cache reached the disk: entries
are written to a temporary name and renamed, not fsynced) is never used. A wrong key or a damaged entry
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
import mmap
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import xxhash

from tasks.storage.partitions import flock_within
from tasks.storage.tempnames import sweep, temp_path

MAX_AGE_S = 7 * 86400  # a daily run reads yesterday's d+1 entry the next day; a week covers a pause
MIN_FREE_BYTES = 512 * 2**20  # no entry is written while less than this is free on the data root's disk
MIN_FREE_SHARE = 0.05  # ... or less than this share of it
CHECK_WAIT_S = 60.0  # longest wait for another process checking the same folder; then check it here too


class FolderCache:
    """Entries of one dataset: each a payload (Arrow IPC) followed by a JSON trailer (key, writer,
    length and XXH3-64 checksum of the payload) and the trailer's length (8 bytes, little-endian)."""

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

    def about(self, folder: dt.date) -> dict:
        """The trailer of the folder's entry (its key, writer, and what the writer added to it); {} when
        there is no entry or its trailer cannot be read. Nothing of the payload is read."""
        return _trailer(self.path(folder))

    def get(self, folder: dt.date, key: str, reader: dt.date) -> memoryview | None:
        """The payload of the folder's intact entry for ``key``, or None (a miss). The entry is removed
        when ``reader`` is not the partition that wrote it: each folder serves two partitions."""
        path = self.path(folder)
        try:
            # mapped, not read: no copy of the entry, and its pages come in 16 at a fault (a build forked
            # per task would fault a fresh copy's every page in); entries are renamed over, never
            # rewritten in place, so the mapping keeps what was found even if the entry is replaced
            with open(path, "rb") as fh:
                data = memoryview(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ))
            size = int.from_bytes(data[-8:], "little")
            meta = json.loads(bytes(data[-8 - size : -8]))
        except (OSError, ValueError):  # an empty file cannot be mapped: ValueError
            return None
        if not isinstance(meta, dict) or meta.get("key") != key:
            return None
        payload = memoryview(data)[: len(data) - 8 - size]
        if len(payload) != meta.get("length") or xxhash.xxh3_64_intdigest(payload) != meta.get("xxh3_64"):
            _remove(path)  # torn or damaged: never used
            return None
        if meta.get("writer") != reader.isoformat():
            _remove(path)  # both partitions reading this folder have had it
        return payload

    def put(self, folder: dt.date, key: str, writer: dt.date, write) -> None:
        """Store what ``write(file)`` writes as the folder's one entry. An OSError is ignored: a full
        disk or a read-only data root costs the next reader time, nothing else."""
        with self.putting(folder, writer) as entry:
            write(entry)
            entry.commit(key)

    @contextmanager
    def putting(self, folder: dt.date, writer: dt.date) -> Iterator[_Entry]:
        """An entry written as it is made: ``entry`` takes the payload (a file object writing to a
        temporary file), then ``entry.commit(key)`` adds the trailer and renames it into place, once the
        key is known (a folder's files are hashed as they are read). Leaving the block without a commit, or with an
        exception, leaves no entry. An OSError (a full disk, a read-only data root) is never raised:
        the entry takes the rest of the payload without writing it, and the commit does nothing."""
        final = self.path(folder)
        entry = _Entry(final, writer)
        try:
            if self._room():
                self.root.mkdir(parents=True, exist_ok=True)
                entry.open(temp_path(final))
        except OSError:
            pass
        try:
            yield entry
        finally:
            entry.close()
        if entry.committed:
            try:
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


class _Entry:
    """One entry being written (see :meth:`FolderCache.putting`): its temporary file, the payload's
    length and checksum so far. A write that fails (OSError) ends the writing, not the caller's work."""

    closed = False  # for pyarrow, which writes to ``sink``: a file object that stays open

    def __init__(self, final: Path, writer: dt.date):
        self.final, self.writer = final, writer
        self.tmp: Path | None = None
        self.fh = None
        self.length, self.checksum, self.committed = 0, xxhash.xxh3_64(), False

    def open(self, tmp: Path) -> None:
        self.tmp = tmp
        self.fh = open(tmp, "wb")

    def write(self, data) -> int:
        if self.fh is not None:
            try:
                self.fh.write(data)
            except OSError:
                self.close()
            self.checksum.update(data)
            self.length += len(data)
        return len(data)

    def flush(self) -> None:
        pass

    def commit(self, key: str, **about) -> None:
        """Add the trailer (``key``, writer, length, checksum, and ``about``: what the reader may want to
        know before it maps the entry, :meth:`FolderCache.about`) and rename the entry into place;
        nothing when the writing failed. When the folder's entry already holds ``key`` from the other
        partition reading the folder (both ran at once), that one is removed instead: both had it."""
        if self.fh is None:
            return
        other = _trailer(self.final)
        if other.get("key") == key and other.get("writer") != self.writer.isoformat():
            _remove(self.final)
            return self.close()
        meta = {**about, "key": key, "writer": self.writer.isoformat(), "length": self.length}
        meta["xxh3_64"] = self.checksum.intdigest()
        trailer = json.dumps(meta).encode()
        try:
            self.fh.write(trailer + len(trailer).to_bytes(8, "little"))
            self.fh.close()
            os.replace(self.tmp, self.final)
        except OSError:
            return self.close()
        self.fh, self.committed = None, True

    def close(self) -> None:
        """Drop what was written and not committed."""
        if self.fh is not None:
            try:
                self.fh.close()
            except OSError:
                pass
            self.fh = None
        if self.tmp is not None and not self.committed:
            _remove(self.tmp)


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
