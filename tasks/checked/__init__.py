"""Checked raw folders in ``_state/checked/<dataset>/<folder date>/<key>.arrow``: the first of the folder's two
partitions to check it leaves its rows there for the second (docs/performance.md, "Checked folders")."""

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
_EXPIRED: set[str] = set()  # buckets' intermediates expired by this process (a listing each)


class CheckedFolders:
    """The checked folders of one dataset under a data root (``backend``: :mod:`tasks.storage.backend`)."""

    def __init__(self, backend, dataset: str):
        self.rel = f"{ROOT}/{dataset}"
        bucket = getattr(backend, "bucket", None)
        self.where = Disk(Path(backend.data_root) / self.rel) if bucket is None else Bucket(bucket, self.rel)
        self.listed: dict[str, list[str]] | None = None  # folder date -> its entries, as last listed
        self.busy: set[str] = set()  # folder dates whose turn another holds, as last listed
        self.surveyed = False

    @contextmanager
    def early(self, folder: dt.date | None) -> Iterator[None]:
        """On a bucket, for a build: :meth:`survey`'s listing started and the turn at ``folder`` (the window's
        last) taken with the partition's lease; let go when that lease is waited for, or at the end if unused."""
        if not isinstance(self.where, Bucket):
            yield
            return
        from tasks.storage.s3lease import while_waiting

        day = None if folder is None else folder.isoformat()
        self.where.list_early(day)
        if day is None:
            yield
            return
        try:
            with while_waiting(lambda: self.where.let_go(day)):
                yield
        finally:
            self.where.let_go(day)

    def early_turn(self, folder: dt.date):
        """(the folder's turn, the future of its ``try_take``) when :meth:`early` took it; then the caller's."""
        return self.where.early_turn(folder.isoformat()) if isinstance(self.where, Bucket) else None

    def survey(self) -> None:
        """On a bucket, list every folder's entries and turns at once (one listing)."""
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
        """Whether :meth:`survey` found neither an entry nor a turn taken (a turn taken at once needs no look)."""
        day = folder.isoformat()
        return self.surveyed and day not in self.busy and not (self.listed or {}).get(day)

    def turn(self, folder: dt.date):
        """The folder's turn (:mod:`tasks.checked.turns`): ``try_take()``, ``take()``, ``release()``."""
        return self.where.turn(folder.isoformat())

    def lookup(
        self, folder: dt.date, prepare: Callable[[dict], None], key: Callable[[], str], reader: dt.date, fresh=True
    ):
        """The payload of the folder's intact entry for ``key()``, or None; ``prepare(trailer)`` runs first. The
        entry is removed when ``reader`` is not its writer (the folder's second partition)."""
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

    @contextmanager
    def putting(self, folder: dt.date, writer: dt.date) -> Iterator[Entry]:
        """An entry written as it is made, stored by ``entry.commit(key)``; storage errors are never raised."""
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
    """One entry being written: its sink, length and checksum so far. A failed write ends the writing only."""

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
        """Add the trailer (``about``) and store the entry, unless the writing failed; the folder's others go."""
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
        if self.where.stores_later:  # queued before the turn's release, in the folder's lane
            from tasks.storage.s3lease import later

            if self.listed is not None:
                self.listed[:] = [name]
            key = f"{self.where.key}/{self.day}/{name}"
            later(key, self._store, name, meta, sink, others, lane=self.where.lane(self.day))
            return
        self._store(name, meta, sink, others)

    def _store(self, name: str, meta: dict, sink, others: list[str] | None) -> None:
        """Store the entry (one there already from the other partition: both had it, removed); remove ``others``
        (None: listed now)."""
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
        if self.sink is not None:
            self.where.drop(self.sink)
            self.sink = None
