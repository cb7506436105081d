"""Checked raw folders, an intermediate in the data root shared by every process and host that builds a
dataset (no Luigi here).

StgQsrPos reads raw folders d and d+1 for partition d, so every folder is read by two partitions, often
in two processes (``--workers 2``), two hosts (luigid hands them dates d and d+1 at once) or two runs
(today's d+1 is tomorrow's d). The first one to check a folder leaves its checked rows in the data root,
through its backend (a disk or the bucket), as Arrow IPC, content-addressed:

    <data_root>/_state/checked/<dataset>/<folder date>/<key>.arrow

The key is a fingerprint of what the rows were computed from: the entry format, the transform's version,
the rules that matter, each file's name and content hash. The entry's trailer holds the key, the partition
that wrote it, the files' identities and hashes as read (so that a reader need not read a file again to
hash it) and the payload's length and checksum (XXH3-64): an entry that is torn or damaged is never used.
An entry is written like a partition: to a temporary name then renamed on a disk (not fsynced), with one
conditional PUT (``If-None-Match: *``) on a bucket, where a 412 means another writer stored the same
content. A wrong key is a miss (another name); a damaged entry is a miss and is removed. Never a source of
truth: deleting ``_state/checked`` at any time only costs time.

Two processes or hosts that need the same folder at once take turns (:mod:`tasks.checked.turns`): the
second one waits for the first one's entry instead of checking the folder too.

An entry is removed once the second partition reading the folder has used it (the writer is recorded),
or has checked the folder itself (both ran at once); any entry older than :data:`MAX_AGE_S` is removed
when a process first writes one. No entry is written while the local disk of the data root has less than
512 MiB or 5 % free: the intermediate never takes the space a partition needs. What stays is the entry
of a folder whose other partition has not been built: at the ends of a range (folder d+1 of the last date
d, for tomorrow's run).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import mmap
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import xxhash

from tasks.checked.turns import BucketTurn, DiskTurn
from tasks.storage.tempnames import is_temp_name, sweep, temp_path

ROOT = "_state/checked"  # below the data root
MAX_AGE_S = 7 * 86400  # a daily run reads yesterday's d+1 entry the next day; a week covers a pause
MIN_FREE_BYTES = 512 * 2**20  # no entry is written while less than this is free on the data root's disk
MIN_FREE_SHARE = 0.05  # ... or less than this share of it
ENTRY = ".arrow"
_EXPIRED: set[str] = set()  # the buckets' intermediates this process has expired (once a process: a listing)


def split(data) -> tuple[memoryview, dict] | None:
    """(payload, trailer) of an entry's bytes, when its trailer reads and the payload has the length and
    checksum it records; None otherwise."""
    data = memoryview(data)
    try:
        size = int.from_bytes(data[-8:], "little")
        meta = json.loads(bytes(data[-8 - size : -8])) if 8 < 8 + size <= len(data) else None
    except ValueError:
        return None
    if not isinstance(meta, dict):
        return None
    payload = data[: len(data) - 8 - size]
    if len(payload) != meta.get("length") or xxhash.xxh3_64_intdigest(payload) != meta.get("xxh3_64"):
        return None
    return payload, meta


class CheckedFolders:
    """The checked folders of one dataset under a data root (``backend``: :mod:`tasks.storage.backend`)."""

    def __init__(self, backend, dataset: str):
        self.rel = f"{ROOT}/{dataset}"
        bucket = getattr(backend, "bucket", None)
        self.where = _Disk(Path(backend.data_root) / self.rel) if bucket is None else _Bucket(bucket, self.rel)

    def names(self, folder: dt.date) -> list[str]:
        """The folder's entries (``<key>.arrow``)."""
        return self.where.names(folder.isoformat())

    def turn(self, folder: dt.date):
        """The folder's turn (:mod:`tasks.checked.turns`): ``try_take()``, ``take()``, ``release()``."""
        return self.where.turn(folder.isoformat())

    @contextmanager
    def checking(self, folder: dt.date) -> Iterator[None]:
        """Hold the folder's turn for the block, waiting for another holder first."""
        turn = self.turn(folder)
        turn.take()
        try:
            yield
        finally:
            turn.release()

    def lookup(self, folder: dt.date, prepare: Callable[[dict], None], key: Callable[[], str], reader: dt.date):
        """The payload of the folder's intact entry for ``key()``, or None (a miss). ``prepare(trailer)`` is
        called with the trailer of an entry found, before ``key()``: the key needs every file's hash, which
        the trailer may give. The entry is removed when ``reader`` is not the partition that wrote it: each
        folder serves two partitions."""
        day = folder.isoformat()
        names = self.where.names(day)
        meta = {}
        for name in names:
            meta = self.where.trailer(day, name)
            if meta:
                break
        if not meta:
            return None
        prepare(meta)
        name = f"{key()}{ENTRY}"
        if name not in names:
            return None
        found = self.where.entry(day, name)
        if found is None or found[1].get("key") != name.removesuffix(ENTRY):
            self.where.remove(day, name)  # torn or damaged: never used
            return None
        payload, meta = found
        if meta.get("writer") != reader.isoformat():
            self.where.remove(day, name)  # both partitions reading this folder have had it
        return payload

    def put(self, folder: dt.date, key: str, writer: dt.date, write) -> None:
        """Store what ``write(file)`` writes as the folder's entry for ``key``."""
        with self.putting(folder, writer) as entry:
            write(entry)
            entry.commit(key)

    @contextmanager
    def putting(self, folder: dt.date, writer: dt.date) -> Iterator[Entry]:
        """An entry written as it is made: ``entry`` takes the payload (a file object), then
        ``entry.commit(key)`` adds the trailer and stores it, once the key is known (a folder's files are
        hashed as they are read). Leaving the block without a commit, or with an exception, leaves no entry.
        No error of the storage is raised (a full disk, a read-only data root, a store that refuses): the
        entry takes the rest of the payload without keeping it, and the commit does nothing."""
        entry = Entry(self.where, folder.isoformat(), writer)
        with contextlib.suppress(OSError):
            if self.where.room():
                entry.sink = self.where.sink(entry.day)
        try:
            yield entry
        finally:
            entry.close()
        if entry.committed and self.where.key not in _EXPIRED:
            if isinstance(self.where, _Bucket):
                _EXPIRED.add(self.where.key)
            with contextlib.suppress(OSError, RuntimeError):
                self.where.expire(time.time() - MAX_AGE_S)


class Entry:
    """One entry being written (see :meth:`CheckedFolders.putting`): its sink, the payload's length and
    checksum so far. A write that fails (OSError) ends the writing, not the caller's work."""

    closed = False  # for pyarrow, which writes to ``sink``: a file object that stays open

    def __init__(self, where, day: str, writer: dt.date):
        self.where, self.day, self.writer = where, day, writer
        self.sink = None
        self.length, self.checksum, self.committed = 0, xxhash.xxh3_64(), False

    def write(self, data) -> int:
        if self.sink is not None:
            try:
                self.sink.write(data)
            except OSError:
                self.close()
            self.checksum.update(data)
            self.length += len(data)
        return len(data)

    def flush(self) -> None:
        pass

    def commit(self, key: str, **about) -> None:
        """Add the trailer (``key``, writer, length, checksum, and ``about``: what a reader wants before it
        reads the payload, the files' identities and hashes) and store the entry; nothing when the writing
        failed. When the folder's entry for ``key`` is there already (another process checked the same
        content at the same time): kept, unless the other partition reading the folder wrote it (both ran at
        once): then it is removed, both had it. Other entries of the folder (other files, other rules) go."""
        if self.sink is None:
            return
        name = f"{key}{ENTRY}"
        meta = {**about, "key": key, "writer": self.writer.isoformat(), "length": self.length}
        meta["xxh3_64"] = self.checksum.intdigest()
        trailer = json.dumps(meta).encode()
        sink, self.sink = self.sink, None
        try:
            sink.write(trailer + len(trailer).to_bytes(8, "little"))
            created = self.where.store(self.day, name, sink)
            if not created and self.where.trailer(self.day, name).get("writer") != meta["writer"]:
                self.where.remove(self.day, name)
            for other in self.where.names(self.day):
                if other != name:
                    self.where.remove(self.day, other)
        except (OSError, RuntimeError):  # a full disk, a store that refuses (StoreError is a RuntimeError)
            self.where.drop(sink)
            return
        self.committed = True

    def close(self) -> None:
        """Drop what was written and not committed."""
        if self.sink is not None:
            self.where.drop(self.sink)
            self.sink = None


class _Disk:
    """Entries in a folder: ``<day>/<name>``, written to a temporary name and linked into place; the turn's
    lock ``<day>.lock`` beside the day's folder."""

    def __init__(self, root: Path):
        self.root, self.key = root, str(root)

    def names(self, day: str) -> list[str]:
        try:
            return [n for n in os.listdir(self.root / day) if n.endswith(ENTRY) and not is_temp_name(n)]
        except OSError:
            return []

    def turn(self, day: str) -> DiskTurn:
        return DiskTurn(self.root / f"{day}.lock")

    def trailer(self, day: str, name: str) -> dict:
        try:
            with open(self.root / day / name, "rb") as fh:
                fh.seek(-8, os.SEEK_END)
                size = int.from_bytes(fh.read(8), "little")
                fh.seek(-8 - size, os.SEEK_END)
                meta = json.loads(fh.read(size))
        except (OSError, ValueError):
            return {}
        return meta if isinstance(meta, dict) else {}

    def entry(self, day: str, name: str) -> tuple[memoryview, dict] | None:
        # mapped, not read: no copy of the entry, and its pages come in 16 at a fault; entries are linked
        # into place and removed, never rewritten in place, so the mapping keeps what was found
        try:
            with open(self.root / day / name, "rb") as fh:
                data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # an empty file cannot be mapped: ValueError
            return None
        return split(data)

    def remove(self, day: str, name: str) -> None:
        with contextlib.suppress(OSError):
            (self.root / day / name).unlink()

    def room(self) -> bool:
        """Whether the data root's file system has room to spare: at least :data:`MIN_FREE_BYTES` and
        :data:`MIN_FREE_SHARE` of it stay free for the partitions."""
        where = self.root
        while not where.exists() and where != where.parent:
            where = where.parent
        st = os.statvfs(where)
        free = st.f_bavail * st.f_frsize
        return free >= MIN_FREE_BYTES and free >= MIN_FREE_SHARE * st.f_blocks * st.f_frsize

    def sink(self, day: str):
        (self.root / day).mkdir(parents=True, exist_ok=True)
        path = temp_path(self.root / day / ENTRY)
        fh = open(path, "wb")
        fh.temp = path  # type: ignore[attr-defined]
        return fh

    def store(self, day: str, name: str, sink) -> bool:
        """Link the written entry into place; False when an entry of that name is there already."""
        sink.close()
        try:
            os.link(sink.temp, self.root / day / name)
            return True
        except FileExistsError:
            return False
        finally:
            self.drop(sink)

    def drop(self, sink) -> None:
        with contextlib.suppress(OSError):
            sink.close()
        with contextlib.suppress(OSError):
            os.unlink(sink.temp)

    def expire(self, before: float) -> None:
        """Entries and locks older than ``before`` removed, and temporaries of a writer that died."""
        for day in os.scandir(self.root):
            with contextlib.suppress(OSError):
                if day.is_dir(follow_symlinks=False):
                    for entry in os.scandir(day.path):
                        if not is_temp_name(entry.name) and entry.stat().st_mtime < before:
                            os.unlink(entry.path)
                    sweep(Path(day.path))
                    with contextlib.suppress(OSError):
                        os.rmdir(day.path)  # only when empty
                elif day.name.endswith(".lock") and day.stat().st_mtime < before:
                    os.unlink(day.path)
        sweep(self.root)


class _Bucket:
    """Entries in a bucket: ``<day>/<name>``, each one conditional PUT; the turn's lease ``<day>.lease``."""

    def __init__(self, bucket, rel: str):
        self.bucket, self.rel = bucket, rel
        self.key = bucket.describe(rel)
        self._got: dict[str, bytes] = {}  # the last entry read whole (a trailer is read with its payload)

    def names(self, day: str) -> list[str]:
        start = len(f"{self.rel}/{day}/")
        return [k[start:] for k in self.bucket.list(f"{self.rel}/{day}/") if k.endswith(ENTRY)]

    def turn(self, day: str) -> BucketTurn:
        from tasks import settings

        return BucketTurn(self.bucket, f"{self.rel}/{day}.lease", settings.s3().lease_seconds)

    def _read(self, day: str, name: str) -> bytes | None:
        rel = f"{self.rel}/{day}/{name}"
        if rel not in self._got:
            try:
                self._got = {rel: self.bucket.read(rel)}
            except FileNotFoundError:
                return None
        return self._got[rel]

    def trailer(self, day: str, name: str) -> dict:
        data = self._read(day, name)
        found = split(data) if data else None
        return found[1] if found else {}

    def entry(self, day: str, name: str) -> tuple[memoryview, dict] | None:
        data = self._read(day, name)
        self._got = {}  # the caller holds it now
        return split(data) if data else None

    def remove(self, day: str, name: str) -> None:
        from tasks.storage.s3 import StoreError

        self._got.pop(f"{self.rel}/{day}/{name}", None)
        with contextlib.suppress(StoreError):
            self.bucket.delete(f"{self.rel}/{day}/{name}")

    def room(self) -> bool:
        return True

    def sink(self, day: str) -> io.BytesIO:
        return io.BytesIO()

    def store(self, day: str, name: str, sink: io.BytesIO) -> bool:
        """One PUT if the key is new; False when it is there already (412: another writer stored it)."""
        from tasks.storage.s3 import PreconditionFailed

        try:
            self.bucket.put(f"{self.rel}/{day}/{name}", sink.getvalue(), if_none_match=True)
        except PreconditionFailed:
            return False
        finally:
            self.drop(sink)
        return True

    def drop(self, sink: io.BytesIO) -> None:
        with contextlib.suppress(ValueError, BufferError):
            sink.close()

    def expire(self, before: float) -> None:
        """Entries and leases last written before ``before`` removed (one listing)."""
        for key, obj in self.bucket.list(f"{self.rel}/").items():
            if obj.mtime_ns / 1e9 < before:
                self.bucket.delete(key)
