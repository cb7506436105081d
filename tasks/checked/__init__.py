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
An entry is written like a partition: to a temporary name then linked into place on a disk (not fsynced;
an entry there already is kept), with one conditional PUT (``If-None-Match: *``) on a bucket, where a 412
means another writer stored the same content. A wrong key is a miss (another name); a damaged entry is a
miss and is removed. Never a source of truth: deleting ``_state/checked`` at any time only costs time.

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
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import xxhash

from tasks.checked.places import ENTRY, Bucket, Disk

ROOT = "_state/checked"  # below the data root
MAX_AGE_S = 7 * 86400  # a daily run reads yesterday's d+1 entry the next day; a week covers a pause
MIN_FREE_BYTES = 512 * 2**20  # no entry is written while less than this is free on the data root's disk
MIN_FREE_SHARE = 0.05  # ... or less than this share of it
_EXPIRED: set[str] = set()  # the buckets' intermediates this process has expired (once a process: a listing)


class CheckedFolders:
    """The checked folders of one dataset under a data root (``backend``: :mod:`tasks.storage.backend`)."""

    def __init__(self, backend, dataset: str):
        self.rel = f"{ROOT}/{dataset}"
        bucket = getattr(backend, "bucket", None)
        self.where = Disk(Path(backend.data_root) / self.rel) if bucket is None else Bucket(bucket, self.rel)
        self.listed: dict[str, list[str]] | None = None  # folder date -> its entries, as last listed
        self.busy: set[str] = set()  # folder dates whose turn another holds, as last listed
        self.surveyed = False

    def survey(self) -> None:
        """List every folder's entries and turns at once (on a bucket: one listing, then each folder's first
        lookup needs no request of its own; on a disk each lookup looks at its folder, at no cost)."""
        if isinstance(self.where, Bucket):
            self.listed, self.busy = self.where.survey()
            self.surveyed = True

    def names(self, folder: dt.date, fresh: bool = True) -> list[str]:
        """The folder's entries (``<key>.arrow``): listed now, or (``fresh`` False) as the survey found them."""
        day = folder.isoformat()
        if fresh or self.listed is None:
            if self.listed is None:
                self.listed = {}
            self.listed[day] = self.where.names(day)
        return self.listed.setdefault(day, [])

    def free(self, folder: dt.date) -> bool:
        """Whether :meth:`survey` found neither an entry of the folder nor its turn taken: a build that then took
        the turn at once need not look for an entry again (one stored since would have needed the whole check
        of another host in between)."""
        day = folder.isoformat()
        return self.surveyed and day not in self.busy and not (self.listed or {}).get(day)

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

    def lookup(
        self, folder: dt.date, prepare: Callable[[dict], None], key: Callable[[], str], reader: dt.date, fresh=True
    ):
        """The payload of the folder's intact entry for ``key()``, or None (a miss); ``fresh`` False: among the
        entries :meth:`survey` found. ``prepare(trailer)`` is called with the trailer of an entry found, before
        ``key()``: the key needs every file's hash, which the trailer may give. The entry is removed when
        ``reader`` is not the partition that wrote it: each folder serves two partitions."""
        day = folder.isoformat()
        names = self.names(folder, fresh)
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
            self._remove(day, name)  # torn or damaged: never used
            return None
        payload, meta = found
        if meta.get("writer") != reader.isoformat():
            self._remove(day, name)  # both partitions reading this folder have had it
        return payload

    def _remove(self, day: str, name: str) -> None:
        self.where.remove(day, name)
        if self.listed is not None and name in self.listed.get(day, ()):
            self.listed[day].remove(name)

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
        entry = Entry(self.where, folder.isoformat(), writer, (self.listed or {}).get(folder.isoformat()))
        with contextlib.suppress(OSError):
            if self.where.room():
                entry.sink = self.where.sink(entry.day)
        try:
            yield entry
        finally:
            entry.close()
        if entry.committed and self.where.key not in _EXPIRED:
            if isinstance(self.where, Bucket):
                _EXPIRED.add(self.where.key)
            with contextlib.suppress(OSError, RuntimeError):
                self.where.expire(time.time() - MAX_AGE_S)


class Entry:
    """One entry being written (see :meth:`CheckedFolders.putting`): its sink, the payload's length and
    checksum so far. A write that fails (OSError) ends the writing, not the caller's work."""

    closed = False  # for pyarrow, which writes to ``sink``: a file object that stays open

    def __init__(self, where, day: str, writer: dt.date, listed: list[str] | None = None):
        self.where, self.day, self.writer, self.listed = where, day, writer, listed
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
        except (OSError, RuntimeError):
            self.where.drop(sink)
            return
        self.committed = True
        others = None if self.listed is None else [n for n in self.listed if n != name]
        if self.where.stores_later:  # a bucket: stored on a thread of its own, before the turn is let go there
            from tasks.storage.s3lease import later

            if self.listed is not None:
                self.listed[:] = [name]
            later(f"{self.where.key}/{self.day}/{name}", self._store, name, meta, sink, others)
            return
        self._store(name, meta, sink, others)

    def _store(self, name: str, meta: dict, sink, others: list[str] | None) -> None:
        """Store the written entry; when the same entry is there already, keep it, unless the folder's other
        partition wrote it (then both had it: removed); the folder's ``others`` entries (None: listed now)
        removed."""
        try:
            created = self.where.store(self.day, name, sink)
            if not created and self.where.trailer(self.day, name).get("writer") != meta["writer"]:
                self.where.remove(self.day, name)
                created = None  # removed
            for other in self.where.names(self.day) if others is None else others:
                if other != name:
                    self.where.remove(self.day, other)
            if self.listed is not None and not self.where.stores_later:
                self.listed[:] = [] if created is None else [name]
        except (OSError, RuntimeError):  # a full disk, a store that refuses (StoreError is a RuntimeError)
            self.where.drop(sink)

    def close(self) -> None:
        """Drop what was written and not committed."""
        if self.sink is not None:
            self.where.drop(self.sink)
            self.sink = None
