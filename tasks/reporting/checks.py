"""A store or server that stops answering while a run schedules: the run ends as when it stops during the
builds (docs/reliability.md), one ``daybreak: error:`` line, then Daybreak's summary, exit 30.

Luigi's worker catches what a task's ``complete()`` (RangeDaily's, through ``bulk_complete()``) or
``requires()`` raises, logs it with its traceback and counts the task as failed scheduling (exit 35).
:func:`install` hands such an error to the run's summary when it is a store or server error
(:func:`tasks.faults.fault_line`): :func:`unchecked` records it, the summary names the store once and the
task as not run, the traceback is not shown (:mod:`tasks.reporting.runlog`), and the task counts as failed.
"""

from __future__ import annotations

import datetime as dt

from tasks.faults import STORAGE, Gone, fault_line, went_away
from tasks.luigi_shortcuts import failed_checks, worker_id
from tasks.luigi_shortcuts.hosts import FAILED_CHECKS
from tasks.reporting import names, runlog


def install() -> None:
    """Record the store and server errors of Luigi's completeness checks and requirements. Idempotent."""
    failed_checks(unchecked)


def unchecked(task, exception: BaseException) -> None:
    """``task``'s ``complete()`` or ``requires()`` raised ``exception``: a store or server error is the
    summary's; any other keeps Luigi's traceback and "failed scheduling" (a bug)."""
    line = fault_line(exception)
    if line is None:
        return
    runlog.unchecked(task.task_id, _name(task), went_away(exception) or Gone(line, line, STORAGE))
    FAILED_CHECKS[task.task_id] = worker_id()


def _name(task) -> str:
    """``StgQsrPos 2026-09-01 .. 2026-09-20`` for a range (its ``--stop`` is the day after its last), '' for
    a raw folder (an external task: the partitions that read it are on the summary), else the task's label."""
    if task.run is None:
        return ""
    start, stop = getattr(task, "start", None), getattr(task, "stop", None)
    of = getattr(task, "of_cls", None) if isinstance(start, dt.date) and isinstance(stop, dt.date) else None
    return f"{of.task_family} {start} .. {stop - dt.timedelta(days=1)}" if of else names.label(task)
