"""Run the ``luigi`` command line, and crash it at the N-th write step of one partition.

Used by tests/test_reliability.py as a subprocess (started in a new session)::

    CRASH_PLAN='{"counter": "/tmp/c", "root": "/data", "date": "2026-09-11", "at": 3, "mode": "kill",
    "truncate": 0.4}' LUIGI_CONFIG_PATH=luigi.cfg python tests/crash_driver.py RangeDaily --of StgQsrPos ...

A *write step* is one call of ``pyarrow.parquet.write_table`` to a temporary name, ``os.fsync``, or
``os.replace`` / ``os.rename`` of a path under ``root``, in any process of the run (Luigi forks one
per task with ``--workers 2``). Every step is logged to ``counter`` as a line ``<kind> <path>``
(relative to ``root``). The steps of partition ``date`` (the path names ``business_date=<date>``)
are numbered through ``<counter>.<date>``, a file each of them appends one byte to (``O_APPEND``
makes the numbering atomic across processes). A partition is written by one process, one step after
the other, so its numbering does not depend on the order in which Luigi runs the tasks, nor on how
two workers interleave. At the partition's step ``at`` the process taking it, before the call (a
Parquet write: after it, truncated to ``truncate`` of its size, as a kill mid-write leaves it):

- ``kill``: sends itself SIGKILL (with ``--workers 2``, one task process dies; Luigi goes on);
- ``killgroup``: SIGKILLs every process of the run (its session), as a host crash would;
- ``stop``: sends itself SIGSTOP, to stand for a live writer that is slow; ``<counter>.stopped`` is
  created first.

With ``"date": "*"``, the steps of every partition are numbered together: step ``at`` of the run's first
partitions. Without ``date`` (or with ``at`` beyond the partition's last step) the run finishes normally; its
log then lists every step.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import luigi.retcodes
import pyarrow.parquet as pq

PLAN = json.loads(os.environ["CRASH_PLAN"])
ROOT = os.path.realpath(PLAN["root"])
real = {"write_table": pq.write_table, "fsync": os.fsync, "replace": os.replace, "rename": os.rename}


def append(path: str, data: bytes) -> int:
    """Append ``data`` to ``path`` in one write; return the file's size after it."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        return os.lseek(fd, 0, os.SEEK_CUR)
    finally:
        os.close(fd)


def step(kind: str, path) -> bool:
    """Log one write step; True when it is the crash point."""
    rel = os.path.relpath(os.path.realpath(os.fspath(path)), ROOT)
    append(PLAN["counter"], f"{kind} {rel}\n".encode())
    date = PLAN.get("date")
    if date is None or f"business_date={'' if date == '*' else date}" not in rel:
        return False
    return append(f"{PLAN['counter']}.{date}", b".") == PLAN["at"]


def crash() -> None:
    mode = PLAN["mode"]
    if mode == "stop":
        open(PLAN["counter"] + ".stopped", "w").close()
        os.kill(os.getpid(), signal.SIGSTOP)
        return
    if mode == "killgroup":
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def under_root(path) -> bool:
    return os.path.realpath(os.fspath(path)).startswith(ROOT + os.sep)


def write_table(table, where, *args, **kwargs):
    if not (isinstance(where, str | os.PathLike) and under_root(where)):
        return real["write_table"](table, where, *args, **kwargs)  # warm-up writes to memory
    if not step("write_table", where):
        return real["write_table"](table, where, *args, **kwargs)
    real["write_table"](table, where, *args, **kwargs)
    if PLAN["mode"] != "stop":
        os.truncate(where, int(os.path.getsize(where) * PLAN.get("truncate", 0.5)))
    crash()


def fsync(fd):
    path = os.readlink(f"/proc/self/fd/{fd if isinstance(fd, int) else fd.fileno()}")
    if under_root(path) and step("fsync", path):
        crash()
    return real["fsync"](fd)


def renamer(name):
    def rename(src, dst, *args, **kwargs):
        if under_root(dst) and step(name, dst):
            crash()
        return real[name](src, dst, *args, **kwargs)

    return rename


pq.write_table = write_table
os.fsync = fsync
os.replace = renamer("replace")
os.rename = renamer("rename")

if __name__ == "__main__":
    luigi.retcodes.run_with_retcodes(["--module", "tasks", *sys.argv[1:]])
