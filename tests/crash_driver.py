"""Run the ``luigi`` command line, and crash it at the N-th write step under a data root.

Used by tests/test_reliability.py as a subprocess (started in a new session)::

    CRASH_PLAN='{"counter": "/tmp/c", "root": "/data", "at": 7, "mode": "kill", "truncate": 0.4}' \\
    LUIGI_CONFIG_PATH=luigi.cfg python tests/crash_driver.py RangeDaily --of StgQsrPos ... --local-scheduler

A *write step* is one call of ``pyarrow.parquet.write_table`` to a temporary name, ``os.fsync``, or
``os.replace`` / ``os.rename`` of a path under ``root``, in any process of the run (Luigi forks one
per task with ``--workers 2``): steps are numbered through ``counter``, a file every step appends
one byte to (``O_APPEND`` makes the numbering atomic across processes). At step ``at`` the process
taking it, before the call (a Parquet write: after it, truncated to ``truncate`` of its size, as a
kill mid-write leaves it):

- ``kill``: sends itself SIGKILL (with ``--workers 2``, one task process dies; Luigi goes on);
- ``killgroup``: SIGKILLs every process of the run (its session), as a host crash would;
- ``stop``: sends itself SIGSTOP, to stand for a live writer that is slow; ``<counter>.stopped`` is
  created first.

With ``at`` beyond the last step the run finishes normally; the counter then holds its step count.
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


def step() -> bool:
    """Count one write step; True when it is the crash point."""
    fd = os.open(PLAN["counter"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, b".")
        n = os.lseek(fd, 0, os.SEEK_CUR)
    finally:
        os.close(fd)
    return n == PLAN["at"]


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
    if not step():
        return real["write_table"](table, where, *args, **kwargs)
    real["write_table"](table, where, *args, **kwargs)
    if PLAN["mode"] != "stop":
        os.truncate(where, int(os.path.getsize(where) * PLAN.get("truncate", 0.5)))
    crash()


def fsync(fd):
    if step():
        crash()
    return real["fsync"](fd)


def renamer(name):
    def rename(src, dst, *args, **kwargs):
        if under_root(dst) and step():
            crash()
        return real[name](src, dst, *args, **kwargs)

    return rename


pq.write_table = write_table
os.fsync = fsync
os.replace = renamer("replace")
os.rename = renamer("rename")

if __name__ == "__main__":
    luigi.retcodes.run_with_retcodes(["--module", "tasks", *sys.argv[1:]])
