"""Where a dataset's checked folders are kept, on a disk (:class:`Disk`) or in a bucket (:class:`Bucket`):
listing, reading, storing and removing an entry, and taking turns at a folder."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import mmap
import os
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import xxhash

from tasks import nextdate
from tasks.checked.turns import BucketTurn, DiskTurn
from tasks.cores import process_pool
from tasks.storage.tempnames import is_temp_name, sweep, temp_path

ENTRY = ".arrow"
STORED = "checked entry stored"  # the last entry stored in a bucket (tasks/nextdate.py): not fetched back


def split(data) -> tuple[memoryview, dict] | None:
    """(payload, trailer) of an entry, when the payload has the length and checksum the trailer records."""
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


class Disk:
    """Entries in a folder: ``<day>/<name>``, written to a temporary name and linked into place; the turn's
    lock ``<day>.lock`` beside the day's folder."""

    stores_later = False  # a link into place costs nothing to wait for

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
        # mapped, not read: entries are linked into place, never rewritten, so the mapping keeps what was found
        try:
            with open(self.root / day / name, "rb") as fh:
                data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # an empty file cannot be mapped: ValueError
            return None
        return split(data)

    def remove(self, day: str, name: str) -> None:
        """The entry removed, and its folder when that leaves it empty (a writer makes it again)."""
        with contextlib.suppress(OSError):
            (self.root / day / name).unlink()
        with contextlib.suppress(OSError):
            (self.root / day).rmdir()

    def room(self) -> bool:
        """Whether ``MIN_FREE_BYTES`` and ``MIN_FREE_SHARE`` of the disk stay free for the partitions."""
        where = self.root
        while not where.exists() and where != where.parent:
            where = where.parent
        st = os.statvfs(where)
        free = st.f_bavail * st.f_frsize
        return free >= _limits()[0] and free >= _limits()[1] * st.f_blocks * st.f_frsize

    def sink(self, day: str):
        with contextlib.suppress(OSError):
            sweep(self.root / day)
        path = temp_path(self.root / day / ENTRY)
        try:
            fh = open(path, "wb")
        except FileNotFoundError:  # the folder date's first entry, or its folder removed just now
            (self.root / day).mkdir(parents=True, exist_ok=True)
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
        """Entries and locks older than ``before`` removed, and dead writers' temporaries (one stat a folder)."""
        for day in os.scandir(self.root):
            with contextlib.suppress(OSError):
                if day.is_dir(follow_symlinks=False):
                    if day.stat(follow_symlinks=False).st_mtime >= before:
                        continue
                    for entry in os.scandir(day.path):
                        if not is_temp_name(entry.name) and entry.stat().st_mtime < before:
                            os.unlink(entry.path)
                    sweep(Path(day.path))
                    with contextlib.suppress(OSError):
                        os.rmdir(day.path)  # only when empty
                elif day.name.endswith(".lock") and day.stat().st_mtime < before:
                    os.unlink(day.path)
        sweep(self.root)


EARLY_S = 1.0  # a survey listed before the build's lease serves the build when it is asked within this
_early: dict[tuple[int, str], tuple[float, Future]] = {}  # (pid, place) -> (when, its listing): list_early
_sinks = itertools.count()  # the order in which entries were started (Bucket.sink)
_keeping = threading.Lock()
# (pid, place, folder date) -> (its turn, its try_take), taken with the build's lease: list_early
_turns: dict[tuple[int, str, str], tuple[BucketTurn, Future]] = {}


class Bucket:
    """Entries in a bucket: ``<day>/<name>``, each one conditional PUT; the turn's lease ``<day>.lease``."""

    stores_later = True  # a PUT of some MB: sent on a thread of its own, the turn's lease deleted after it

    def __init__(self, bucket, rel: str):
        self.bucket, self.rel = bucket, rel
        self.key = bucket.describe(rel)
        self._got: dict[str, bytes] = {}  # the last entry read whole (a trailer is read with its payload)
        self.etags: dict[str, str] = {}  # key -> its ETag, as last listed

    def names(self, day: str) -> list[str]:
        start = len(f"{self.rel}/{day}/")
        listed = self.bucket.list(f"{self.rel}/{day}/")
        self.etags.update({k: obj.etag for k, obj in listed.items()})
        return [k[start:] for k in listed if k.endswith(ENTRY)]

    def list_early(self, day: str | None = None) -> None:
        """Start the survey's listing (and ``day``'s turn: :meth:`early_turn`) while the build takes its lease."""
        pool = process_pool("list-early", 4)
        _early[(os.getpid(), self.key)] = (time.monotonic(), pool.submit(self.bucket.list, f"{self.rel}/"))
        if day is not None:
            turn = self.turn(day)
            _turns[(os.getpid(), self.key, day)] = (turn, process_pool("checked-turn", 2).submit(turn.try_take))

    def early_turn(self, day: str) -> tuple[BucketTurn, Future] | None:
        """(the folder's turn, its ``try_take``) started by :meth:`list_early`, now the caller's to release."""
        return _turns.pop((os.getpid(), self.key, day), None)

    def let_go(self, day: str) -> None:
        """The turn :meth:`list_early` took at the folder, released if nobody took it over."""
        early = self.early_turn(day)
        if early is not None and early[1].exception() is None and early[1].result():
            early[0].release()

    def survey(self) -> tuple[dict[str, list[str]], set[str]]:
        """Every folder's entries, and the folders whose lease another holds (one listing)."""
        names: dict[str, list[str]] = {}
        busy = set()
        when, early = _early.pop((os.getpid(), self.key), (0.0, None))
        fresh = early is not None and time.monotonic() - when < EARLY_S
        listed = early.result() if fresh else self.bucket.list(f"{self.rel}/")
        self.etags.update({k: obj.etag for k, obj in listed.items()})
        for key, obj in listed.items():
            rest = key[len(self.rel) + 1 :]
            if rest.endswith(".lease") and "/" not in rest:
                day = rest.removesuffix(".lease")
                if not self._mine(day, obj.etag):
                    busy.add(day)
            elif rest.endswith(ENTRY) and rest.count("/") == 1:
                day, name = rest.split("/")
                names.setdefault(day, []).append(name)
        return names, busy

    def _mine(self, day: str, etag: str) -> bool:
        """Whether the turn listed at ``day`` with ``etag`` is the one this build took with its lease."""
        turn, taking = _turns.get((os.getpid(), self.key, day), (None, None))
        if turn is None or taking.exception() is not None or not taking.result():
            return False
        return turn.lease.etag == etag

    def turn(self, day: str) -> BucketTurn:
        from tasks import settings

        return BucketTurn(self.bucket, self.lane(day), settings.s3().lease_seconds)

    def lane(self, day: str) -> str:
        """The key of the folder's turn, and the lane of its requests nothing waits for (``s3lease.later``)."""
        return f"{self.rel}/{day}.lease"

    def _read(self, day: str, name: str) -> bytes | None:
        rel = f"{self.rel}/{day}/{name}"
        kept = nextdate.kept(STORED)
        if kept is not None and kept[:3] == (rel, os.getpid(), self.etags.get(rel)):  # this process stored it,
            self._got = {rel: kept[3]}  # and the listing shows that very object: not fetched back
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
        """Deleted on a thread nothing waits for (a reader that finds it still there removes it again)."""
        from tasks.storage.s3lease import later

        rel = f"{self.rel}/{day}/{name}"
        self._got.pop(rel, None)
        if (nextdate.kept(STORED) or ("",))[0] == rel:
            nextdate.forget(STORED)
        later(self.bucket.describe(rel), self.bucket.delete, rel, lane=self.lane(day))

    def room(self) -> bool:
        return True

    def sink(self, day: str) -> io.BytesIO:
        sink = io.BytesIO()
        sink.order = next(_sinks)  # type: ignore[attr-defined] - the entries of a build are started in read order
        return sink

    def store(self, day: str, name: str, sink: io.BytesIO) -> bool:
        """One PUT if the key is new; False when it is there already (412: another writer stored it)."""
        from tasks.storage.s3 import PreconditionFailed

        rel = f"{self.rel}/{day}/{name}"
        try:
            sink.seek(0)  # the buffer itself is the body, not a copy
            etag = self.bucket.put(rel, sink, if_none_match=True)
        except PreconditionFailed:
            self.drop(sink)
            return False
        except BaseException:
            self.drop(sink)
            raise
        with _keeping:  # the last one started kept for the next build; two may be stored in either order
            kept = nextdate.kept(STORED)
            if kept is None or kept[4] < sink.order:
                nextdate.keep(STORED, (rel, os.getpid(), etag, sink.getbuffer(), sink.order))
        return True

    def drop(self, sink: io.BytesIO) -> None:
        with contextlib.suppress(ValueError, BufferError):
            sink.close()

    def expire(self, before: float) -> None:
        """Entries and leases last written before ``before`` removed (one listing), on a thread nothing waits for."""
        from tasks.storage.s3lease import later

        def expire() -> None:
            with contextlib.suppress(OSError, RuntimeError):  # a later run expires them
                for key, obj in self.bucket.list(f"{self.rel}/").items():
                    if obj.mtime_ns / 1e9 < before:
                        self.bucket.delete(key)

        later(f"{self.key}/ (expiry)", expire)


def _limits() -> tuple[float, float]:
    """(MIN_FREE_BYTES, MIN_FREE_SHARE) as :mod:`tasks.checked` has them now."""
    from tasks import checked

    return checked.MIN_FREE_BYTES, checked.MIN_FREE_SHARE
