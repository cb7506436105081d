"""Turns at checking a raw folder (an ``flock`` on a disk, a lease in a bucket), so the second to need it reads
the first one's entry. A turn only saves work: one that cannot be taken is no turn."""

from __future__ import annotations

import contextlib
import fcntl
import time
from pathlib import Path

from tasks.storage.partitions import flock_within

CHECK_WAIT_S = 60.0  # longest wait for another process checking the same folder; then check it here too
POLL_S = 0.005  # a check takes a few hundred ms: wake soon after it ends (a lease: 10 times this)


class DiskTurn:
    """An ``flock`` on ``path``: per open file, so two holders conflict even within one process."""

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
        """Take the turn if nobody holds it; True also when there is no lock to take."""
        if not self._open():
            return True
        return flock_within(self.fh, 0)

    def take(self) -> None:
        """Take the turn, waiting at most :data:`CHECK_WAIT_S`; then go on without it."""
        if self._open():
            flock_within(self.fh, CHECK_WAIT_S, poll_s=POLL_S)

    def release(self) -> None:
        if self.fh is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self.fh, fcntl.LOCK_UN)  # nothing if it was not taken
                self.fh.close()
            self.fh = None


class BucketTurn:
    """A lease ``rel`` held while the folder is looked up again and, on a miss, checked; deleted on release."""

    def __init__(self, bucket, rel: str, seconds: float):
        from tasks.storage.s3lease import Lease

        self.lease = Lease(bucket, rel, seconds)
        self.held: contextlib.ExitStack | None = None

    def try_take(self) -> bool:
        """Take the lease if nobody holds it; True also when the store cannot be asked (the lookup says why)."""
        from tasks.storage.s3 import StoreError
        from tasks.storage.s3lease import released

        lease = self.lease
        released(lease.rel)  # this process's own delete of it, still under way
        try:
            if lease.try_take() is not None:
                return False
        except StoreError:
            return True
        self._hold()
        return True

    def _hold(self) -> None:
        self.held = contextlib.ExitStack()
        self.held.enter_context(self.lease.renewing())

    def take(self) -> None:
        """Take the lease, waiting at most :data:`CHECK_WAIT_S`; then go on without it."""
        from tasks.storage.s3 import StoreError

        deadline = time.monotonic() + CHECK_WAIT_S
        while time.monotonic() < deadline:
            try:
                if self.lease.try_take() is None:
                    self._hold()
                    return
            except StoreError:
                return
            time.sleep(POLL_S * 10)

    def release(self) -> None:
        """Delete the lease, if still this holder's."""
        from tasks.storage.s3lease import later

        if self.held is None:
            return
        self.held.close()
        self.held = None
        if not self.lease.lost:  # queued after the entry it stored
            later(self.lease.rel, self.lease.bucket.delete, self.lease.rel)
