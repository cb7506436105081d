"""Backfill progress on the terminal: ``progress: 12/60 partitions (20%), 2.4/s, about 20 s left - ...``,
from a counter shared by the run's processes (:func:`expect`, :func:`finished`)."""

from __future__ import annotations

import logging
import multiprocessing
import time

from tasks.reporting import runlog

logger = logging.getLogger("luigi-interface")


def _seconds(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def shown(done: int, total: int) -> bool:
    """Whether the line of partition ``done`` of ``total`` is logged: in detail every one, else each tenth."""
    if not runlog.quiet() or done <= 1 or done >= total:
        return True
    return 10 * done // total > 10 * (done - 1) // total


def line(done: int, total: int, elapsed: float, what: str = "", failed: int = 0) -> str:
    """``done/total (pct), rate, time left``; once a partition failed, how many were built and failed."""
    total = max(total, done)
    pct = 100 * done / total if total else 100
    text = f"progress: {done}/{total} partitions ({pct:.0f}%)"
    if failed:
        text += f", {done - failed} built, {failed} failed"
    if done and elapsed > 0:
        rate = done / elapsed
        text += f", {rate:.1f}/s, about {_seconds((total - done) / rate)} left"
    return text + (f" - {what}" if what else "")


class Progress:
    """Progress of one process walking a known list of partitions (a single-run range)."""

    def __init__(self, total: int):
        self.total, self.done, self.failed, self.t0 = total, 0, 0, time.monotonic()

    def step(self, what: str = "", failed: bool = False) -> None:
        self.done += 1
        self.failed += failed
        if shown(self.done, self.total):
            logger.info(line(self.done, self.total, time.monotonic() - self.t0, what, self.failed))


# -- a range of Luigi tasks across worker processes -----------------------------------------------------
_expected: set[str] = set()
_shared = None  # (done counter, start time, failed counter) in shared memory, created before Luigi forks workers


def expect(task_ids) -> None:
    """Called in the scheduling process for partitions that will run (found incomplete)."""
    global _shared
    _expected.update(task_ids)
    if _shared is None:
        _shared = (multiprocessing.Value("i", 0), multiprocessing.Value("d", 0.0), multiprocessing.Value("i", 0))


def finished(task_id: str, what: str = "", failed: bool = False) -> None:
    """One expected partition task ended (built, found up to date, or ``failed``); ``what`` names it."""
    if _shared is None or task_id not in _expected:
        return
    done, started, failures = _shared
    with done.get_lock():  # both counters under the one lock: a line's counts belong together
        done.value += 1
        failures.value += failed
        count, failed_count = done.value, failures.value
    elapsed = time.time() - started.value if started.value else 0.0
    if shown(count, len(_expected)):
        logger.info(line(count, len(_expected), elapsed, what or task_id, failed_count))
    if count >= len(_expected):  # all done: a later run in this process counts from zero
        _expected.clear()
        done.value, started.value, failures.value = 0, 0.0, 0


def started(task_id: str) -> None:
    """A partition task starts: the clock of the rate starts with the first one."""
    if _shared is None or task_id not in _expected:
        return
    start = _shared[1]
    with start.get_lock():
        if not start.value:
            start.value = time.time()
