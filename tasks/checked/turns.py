"""Turns at checking a raw folder (:meth:`tasks.checked.CheckedFolders.turn`): two processes, or two hosts, that
need the same folder at once take turns, so the second one reads what the first one checked instead of checking
the folder too. On a disk, an ``flock`` on ``<folder date>.lock`` beside the folder's entries; on a bucket, a
short lease object ``<folder date>.lease`` there (:class:`tasks.storage.s3lease.Lease`: taken with a
put-if-absent, renewed while held, removed after). A turn only saves work: a holder that is stuck is waited for
:data:`CHECK_WAIT_S` at most, and a turn that cannot be taken at all (a read-only data root) is no turn."""

from __future__ import annotations

import contextlib
import fcntl
import time
from pathlib import Path

from tasks.storage.partitions import flock_within

CHECK_WAIT_S = 60.0  # longest wait for another process checking the same folder; then check it here too
POLL_S = 0.005  # a check takes a few hundred ms: wake soon after it ends (a lease: every 10th of this, 50 ms)


class DiskTurn:
    """An ``flock`` on ``path`` (made as needed, never written): per open file, so two holders conflict even
    within one process."""

    def __init__(self, path: Path):
        self.path = path
        self.fh = None

    def _open(self) -> bool:
        if self.fh is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.fh = open(self.path, "a+b", buffering=0)
            except OSError:
                return False
        return True

    def try_take(self) -> bool:
        """Take the turn if nobody holds it; True also when there is no lock to take (a read-only data root)."""
        if not self._open():
            return True
        return flock_within(self.fh, 0)

    def take(self, wait_s: float | None = None) -> None:
        """Take the turn, waiting at most ``wait_s`` (:data:`CHECK_WAIT_S`) for its holder; then go on without it."""
        if self._open():
            flock_within(self.fh, CHECK_WAIT_S if wait_s is None else wait_s, poll_s=POLL_S)

    def release(self) -> None:
        if self.fh is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self.fh, fcntl.LOCK_UN)  # nothing if it was not taken
                self.fh.close()
            self.fh = None


class BucketTurn:
    """A lease object ``rel`` in ``bucket`` (:class:`tasks.storage.s3lease.Lease`'s body, renewed while held)
    held while the folder is looked up again and, on a miss, checked; deleted when released. Taken with one
    put-if-absent; a lease found there is read only then, and taken over once the store's clock says it
    expired (a holder that died). Waiting reads the lease until it is gone."""

    def __init__(self, bucket, rel: str, seconds: float):
        from tasks.storage.s3lease import Lease

        self.lease = Lease(bucket, rel, seconds)
        self.held: contextlib.ExitStack | None = None

    def try_take(self) -> bool:
        """Take the lease if nobody holds it (one PUT when it is free); True also when the store cannot be
        asked (what it says comes out when the folder's entry is looked up: a turn only saves work)."""
        from tasks.storage.s3 import StoreError
        from tasks.storage.s3lease import released

        lease = self.lease
        released(lease.rel)  # this process's own delete of it, still under way
        try:
            if lease.try_take() is not None:  # held, unless it expired or was let go meanwhile
                return False
        except StoreError:
            return True
        self.held = contextlib.ExitStack()
        self.held.enter_context(lease.renewing())
        return True

    def take(self, wait_s: float | None = None) -> None:
        """Take the lease, reading it every 50 ms while another holds it, at most ``wait_s``
        (:data:`CHECK_WAIT_S`); then go on without it."""
        from tasks.storage.s3 import StoreError

        deadline = time.monotonic() + (CHECK_WAIT_S if wait_s is None else wait_s)
        while time.monotonic() < deadline:
            try:
                if self.lease.try_take() is None:
                    self.held = contextlib.ExitStack()
                    self.held.enter_context(self.lease.renewing())
                    return
            except StoreError:
                return
            time.sleep(POLL_S * 10)

    def release(self) -> None:
        """Delete the lease (only a lease still this holder's: one taken over was another's)."""
        from tasks.storage.s3lease import later

        if self.held is None:
            return
        self.held.close()
        self.held = None
        if not self.lease.lost:  # deleted on a thread of its own, after the entry it stored
            later(self.lease.rel, self.lease.bucket.delete, self.lease.rel)
