"""A store or server that stops answering while a run schedules (a task's ``complete()`` or ``requires()``
raises): the run ends as when it stops during the builds (docs/reliability.md), exit 30, not Luigi's 35."""

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
    """``task``'s check raised ``exception``: a store or server error is the summary's; any other, Luigi's."""
    line = fault_line(exception)
    if line is None:
        return
    runlog.unchecked(task.task_id, _name(task), went_away(exception) or Gone(line, line, STORAGE))
    FAILED_CHECKS[task.task_id] = worker_id()


def _name(task) -> str:
    """``StgQsrPos 2026-09-01 .. 2026-09-20`` for a range, '' for a raw folder, else the task's label."""
    if task.run is None:
        return ""
    start, stop = getattr(task, "start", None), getattr(task, "stop", None)
    of = getattr(task, "of_cls", None) if isinstance(start, dt.date) and isinstance(stop, dt.date) else None
    return f"{of.task_family} {start} .. {stop - dt.timedelta(days=1)}" if of else names.label(task)
