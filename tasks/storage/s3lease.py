"""A lease object in a bucket: who builds a partition (or publishes a preview), until when by the store's
own clock. Taken with a put-if-absent, renewed with a compare-and-swap while held, taken over with a
compare-and-swap once expired, released with a compare-and-swap (docs/scale-out.md)."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from contextlib import contextmanager

from tasks.storage import tempnames
from tasks.storage.files import PartitionBusy
from tasks.storage.s3 import Bucket, PreconditionFailed, StoreError

logger = logging.getLogger("luigi-interface")


class Lease:
    """A lease object: who builds a partition, until when (by the store's clock)."""

    def __init__(self, bucket: Bucket, rel: str, seconds: float):
        self.bucket, self.rel, self.seconds = bucket, rel, seconds
        self.etag: str | None = None
        self.owner = f"{tempnames.host()} pid {os.getpid()} {uuid.uuid4().hex[:8]}"
        self.lost = False
        self._lock = threading.Lock()

    def _body(self, released: bool = False) -> bytes:
        return json.dumps({"owner": self.owner, "seconds": self.seconds, "released": released}).encode()

    def acquire(self, what: str, wait_s: float | None) -> None:
        deadline = None if wait_s is None else time.monotonic() + wait_s
        logged = False
        while True:
            holder = self._try()
            if holder is None:
                return
            if deadline is not None and time.monotonic() >= deadline:
                raise PartitionBusy(
                    f"{what}: {holder} has held its lease ({self.bucket.describe(self.rel)}) for over "
                    f"{wait_s:.0f} s; nothing was written by this run. Rerun once that run has finished."
                )
            if not logged:
                logger.info("%s: %s holds its lease, waiting", what, holder)
                logged = True
            time.sleep(min(1.0, max(0.05, self.seconds / 10)))

    def _try(self) -> str | None:
        """Take the lease if it is free or expired; None when taken, else who holds it."""
        try:
            data, obj, now = self.bucket.get_with_date(self.rel)
        except FileNotFoundError:
            try:
                self.etag = self.bucket.put(self.rel, self._body(), if_none_match=True)
                return None
            except PreconditionFailed:
                return "another host"
        try:
            held = json.loads(data)
        except ValueError:
            held = {}
        age = now - obj.mtime_ns / 1e9
        if held.get("released") or age > float(held.get("seconds", self.seconds)):
            try:
                self.etag = self.bucket.put(self.rel, self._body(), if_match=obj.etag)
                return None
            except PreconditionFailed:
                return "another host"
        return str(held.get("owner", "another host"))

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
                        logger.warning("could not renew the lease %s: %s", self.rel, exc)

        thread = threading.Thread(target=renew, name="lease", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()

    def release(self) -> None:
        if self.etag is None or self.lost:
            return
        try:
            self.bucket.put(self.rel, self._body(released=True), if_match=self.etag)
        except (PreconditionFailed, StoreError):
            pass  # taken over, or the store is gone: it expires by itself
