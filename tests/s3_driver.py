"""Run the ``luigi`` command line, and stop or kill it at the N-th write of one partition to the bucket.

Used by tests/test_hosts.py as a subprocess (a "host")::

    S3_PLAN='{"counter": "/tmp/c", "date": "2026-09-11", "at": 2, "mode": "stop"}' \\
        LUIGI_CONFIG_PATH=host.cfg python tests/s3_driver.py RangeDaily --of StgQsrPos ...

A *write* is one ``PutObject`` of an object of partition ``date`` (its data, the files beside it, its
quarantine, its manifest; not its lease) by any process of the run. Writes are numbered through
``<counter>.<date>`` (one byte appended per write, atomic across processes). Before write ``at``:

- ``stop``: ``<counter>.stopped`` is created, then the process stops itself (SIGSTOP): a host frozen
  mid-build, its lease no longer renewed (its renewing thread stops with it);
- ``kill``: every process of the run is killed (SIGKILL to its session), as a host crash would;
- ``hold``: ``<counter>.stopped`` is created, then the build waits (its other threads, luigid's pings and the
  lease's renewal, go on) until the test kills the host: a host killed mid-build at a moment of the test's choosing.

With ``"date": "*"``, the writes of every partition are numbered together: write ``at`` of the run's first
partitions. With ``"after": true``, write ``at`` is made first, then the process stops or is killed (``at`` the last
write of the partition, its manifest: a store that goes away right after a commit).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import luigi.retcodes

from tasks.storage import s3

PLAN = json.loads(os.environ["S3_PLAN"])
real_put = s3.Bucket.put


def append(path: str) -> int:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, b".")
        return os.lseek(fd, 0, os.SEEK_CUR)
    finally:
        os.close(fd)


def put(self, rel, data, **kwargs):
    date = PLAN.get("date")
    ours = "business_date=" in rel if date == "*" else f"business_date={date}" in rel  # "*": any partition
    if not (date and ours and not rel.startswith("_state/")):
        return real_put(self, rel, data, **kwargs)
    if append(f"{PLAN['counter']}.{date}") != PLAN["at"]:
        return real_put(self, rel, data, **kwargs)
    if PLAN.get("after"):  # the write made first: the step after it is the one interrupted
        etag = real_put(self, rel, data, **kwargs)
        interrupt()
        return etag
    interrupt()
    return real_put(self, rel, data, **kwargs)


def interrupt() -> None:
    if PLAN["mode"] == "stop":
        open(PLAN["counter"] + ".stopped", "w").close()
        os.kill(os.getpid(), signal.SIGSTOP)
    elif PLAN["mode"] == "hold":
        open(PLAN["counter"] + ".stopped", "w").close()
        while True:
            time.sleep(1)
    else:
        os.killpg(os.getpgrp(), signal.SIGKILL)


s3.Bucket.put = put

if __name__ == "__main__":
    luigi.retcodes.run_with_retcodes(["--module", "tasks", *sys.argv[1:]])
