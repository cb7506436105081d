"""A lease object in a bucket: who builds a partition (or publishes a preview), until when by the store's
clock; taken with a put-if-absent, renewed, taken over and released by compare-and-swap. Commits are fenced
by their own conditions, not by the lease (docs/scale-out.md)."""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
import uuid
from concurrent.futures import Future
from contextlib import contextmanager

from tasks import settings
from tasks.cores import process_pool
from tasks.storage import s3gone, tempnames
from tasks.storage.errors import StorageUnavailable
from tasks.storage.files import PartitionBusy
from tasks.storage.s3 import Bucket, PreconditionFailed, StoreError

logger = logging.getLogger("luigi-interface")

MAX_SECONDS = 3600.0  # [s3] lease_seconds's upper bound


def bounded(seconds: object) -> float | None:
    """``seconds`` as a finite number of seconds from 1 to :data:`MAX_SECONDS`; None when it is no number."""
    try:
        value = float(seconds)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    if not math.isfinite(value):
        return None
    return min(max(value, 1.0), MAX_SECONDS)


class Lease:
    """A lease object: who builds a partition, until when (by the store's clock)."""

    def __init__(self, bucket: Bucket, rel: str, seconds: float):
        self.bucket, self.rel = bucket, rel
        self.seconds = bounded(seconds) or MAX_SECONDS  # a renew thread's wait is always a sane number
        self.etag: str | None = None
        self.host = settings.host_name()  # [daybreak] host_name: containers of one image share a machine name
        self.owner = f"{self.host} pid {os.getpid()} {uuid.uuid4().hex[:8]}"
        self.lost = False
        self._lock = threading.Lock()

    def _body(self, released: bool = False) -> bytes:
        pid = os.getpid()
        process = {"host": self.host, "pid": pid, "start": tempnames.start_of(pid)}
        return json.dumps({"owner": self.owner, "seconds": self.seconds, "released": released, **process}).encode()

    def acquire(self, what: str, wait_s: float | None) -> bool:
        """Take the lease, waiting at most ``wait_s`` for a live holder (then :class:`PartitionBusy`); whether
        it was taken at the first try."""
        released(self.rel)  # this process's own release of it, still under way
        deadline = None if wait_s is None else time.monotonic() + wait_s
        logged = False
        first = True
        while True:
            holder = self.try_take()
            if first:
                _first_answer(waiting=holder is not None)
            if holder is None:
                return first
            first = False
            if deadline is not None and time.monotonic() >= deadline:
                raise PartitionBusy(
                    f"{what}: {holder} has held its lease ({self.bucket.describe(self.rel)}) for over "
                    f"{wait_s:.0f} s; nothing was written by this run. Rerun once that run has finished."
                )
            if not logged:
                logger.info("%s: %s holds its lease (%s), waiting", what, holder, self.bucket.describe(self.rel))
                logged = True
            time.sleep(min(1.0, max(0.05, self.seconds / 10)))

    def try_take(self) -> str | None:
        """Take the lease if it is free or expired; None when taken, else who holds it."""
        try:
            self.etag = self.bucket.put(self.rel, self._body(), if_none_match=True)
            return None
        except PreconditionFailed:
            pass
        try:
            data, obj, now = self.bucket.get_with_date(self.rel)
        except FileNotFoundError:
            return "another host"  # released meanwhile: taken at the next try
        held, free = self._judge(data, obj, now)
        if free:
            try:
                self.etag = self.bucket.put(self.rel, self._body(), if_match=obj.etag)
                return None
            except PreconditionFailed:
                return "another host"
        return str(held.get("owner", "another host"))

    def _judge(self, data: bytes, obj, now: float) -> tuple[dict, bool]:
        """(the lease object's body, whether it is free: released, expired by the store's clock (at most this
        host's ``lease_seconds``), unreadable, or held by a process of this host that is gone)."""
        try:
            held = json.loads(data)
        except ValueError:  # not JSON (UnicodeDecodeError is one)
            held = None
        seconds = bounded(held.get("seconds")) if isinstance(held, dict) else None
        if seconds is None:  # unreadable: it cannot say until when it holds, so it holds nothing
            logger.warning(
                "the lease %s is unreadable (%s); taken as expired", self.bucket.describe(self.rel), _excerpt(data)
            )
            held = {}
        expired = seconds is None or now - obj.mtime_ns / 1e9 > min(seconds, self.seconds)
        if not expired and _gone_from_this_host(held, self.host):
            logger.info("%s: its holder %s was a process of this host that is gone", self.rel, held.get("owner"))
            expired = True  # a run killed here (kill -9, a crash): its rerun need not wait for the lease to expire
        return held, held.get("released") is True or expired

    def sweep(self) -> bool:
        """Delete the lease object if it is free, marked released by compare-and-swap first (a host that took it
        over meanwhile keeps it)."""
        try:
            data, obj, now = self.bucket.get_with_date(self.rel)
        except FileNotFoundError:
            return False
        held, free = self._judge(data, obj, now)
        if not free:
            return False
        try:
            self.bucket.put(self.rel, self._body(released=True), if_match=obj.etag)
        except PreconditionFailed:
            return False  # taken over meanwhile: its holder's
        self.bucket.delete(self.rel)
        logger.info("removed the lease %s of %s, left by a run that did not delete it", self.rel, held.get("owner"))
        return True

    @contextmanager
    def renewing(self):
        """Renew the lease every third of its time while the block runs."""
        stop = threading.Event()

        def renew():
            while not stop.wait(self.seconds / 3):
                with self._lock:
                    try:
                        self.etag = self.bucket.put(self.rel, self._body(), if_match=self.etag)
                    except PreconditionFailed:
                        self.lost = True  # taken over (this host was frozen past it): the commit is the fence
                        return
                    except StoreError as exc:
                        logger.warning("could not renew the lease %s: %s", self.bucket.describe(self.rel), exc)
                    except Exception as exc:  # noqa: BLE001 - the thread must live; the commit is the fence
                        logger.warning("could not renew the lease %s: %r", self.bucket.describe(self.rel), exc)

        thread = threading.Thread(target=renew, name="lease", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            # a renewal under way waits out its timeouts, unless the store was given up meanwhile: nothing can
            # come of it then (a PUT the store applies later is conditional, and this lease expires by itself)
            while thread.is_alive() and s3gone.known(self.bucket.store) is None:
                thread.join(1.0)

    @contextmanager
    def holding(self):
        """Renew the lease while the block runs, then release it."""
        try:
            with self.renewing():
                yield self
        finally:
            self.release()

    def release(self) -> None:
        """Mark the lease released (if still this host's), then delete it, on a thread nothing waits for."""
        if self.etag is None or self.lost:
            return
        etag, self.etag = self.etag, None
        later(self.rel, self._release, etag)

    def _release(self, etag: str) -> None:
        try:
            self.bucket.put(self.rel, self._body(released=True), if_match=etag)
            self.bucket.delete(self.rel)
        except (PreconditionFailed, StoreError):
            pass  # taken over, or the store is gone: it expires by itself
        except Exception as exc:  # noqa: BLE001 - a release is never an error of the run; it expires by itself
            logger.warning("could not release the lease %s: %r", self.bucket.describe(self.rel), exc)


_on_wait = threading.local()


@contextmanager
def while_waiting(callback):
    """For the block: ``callback()`` if the first lease this thread acquires is held by another (let go what the
    holder may need before waiting)."""
    callbacks = _on_wait.__dict__.setdefault("callbacks", [])
    callbacks.append(callback)
    try:
        yield
    finally:
        if callback in callbacks:
            callbacks.remove(callback)


def _first_answer(waiting: bool) -> None:
    callbacks = _on_wait.__dict__.get("callbacks", [])
    while callbacks:
        callback = callbacks.pop()
        if waiting:
            callback()


def sweep_later(bucket: Bucket, prefix: str, seconds: float, after: str | None = None) -> None:
    """Delete the free lease objects under ``prefix`` (:meth:`Lease.sweep`), on the releases' threads, after
    the release of lease ``after``."""

    def sweep() -> None:
        try:
            for rel in bucket.list(prefix):
                Lease(bucket, rel, seconds).sweep()
        except StoreError:
            pass  # the store is gone: what is left is swept by a later run

    later(prefix, sweep, lane=after)


_releasing_by_pid: dict[int, dict[str, Future]] = {}  # per process: lease key -> its release under way
_lanes_by_pid: dict[int, dict[str, Future]] = {}  # per process: lane -> the last request queued in it
_releasing_lock = threading.Lock()
LATER_THREADS = 8  # requests nothing waits for, sent at once unless queued in the same lane


def _releasing() -> dict[str, Future]:
    return _releasing_by_pid.setdefault(os.getpid(), {})


def later(rel: str, request, *args, lane: str | None = None) -> None:
    """``request(*args)``, which nothing waits for, on the releases' threads after those queued in the same
    ``lane`` (by default ``rel``); errors only logged. ``rel`` names it for :func:`released`."""

    def send(before: Future | None) -> None:
        if before is not None:
            before.result()  # queued earlier in the pool: running or done, never waiting for this one
        try:
            request(*args)
        except Exception as exc:  # noqa: BLE001 - nothing waits for it; what is left expires by itself
            level = logging.INFO if isinstance(exc, StorageUnavailable) else logging.WARNING  # the summary says it
            logger.log(level, "could not remove %s: %s", rel, exc)

    with _releasing_lock:
        lanes = _lanes_by_pid.setdefault(os.getpid(), {})
        queued = process_pool("lease-release", LATER_THREADS).submit(send, lanes.get(lane or rel))
        lanes[lane or rel] = _releasing()[rel] = queued


def released(rel: str) -> None:
    """Wait for this process's release of lease ``rel``, if under way, before it is taken again."""
    with _releasing_lock:
        pending = _releasing().pop(rel, None)
    if pending is not None:
        pending.result()


def releasing() -> None:
    """Wait for every release under way in this process, and what they queued (the end of a run)."""
    while True:
        with _releasing_lock:
            pending = list(_releasing().values())
            _releasing().clear()
            if not pending:
                _lanes_by_pid.pop(os.getpid(), None)
        if not pending:
            return
        for future in pending:
            future.result()


def _gone_from_this_host(held: dict, host: str) -> bool:
    """Whether a lease's holder was a process of this host (``[daybreak] host_name``) no longer running."""
    pid, start = held.get("pid"), held.get("start")
    if held.get("host") != host or not isinstance(pid, int) or not isinstance(start, int):
        return False
    return not tempnames.writer_alive(pid, start)


def _excerpt(data: bytes) -> str:
    text = data[:60].decode("utf-8", "replace")
    return repr(text + ("..." if len(data) > 60 else ""))
