"""Which partitions a preview builds: those of its range a backfill would rebuild (and, through
:func:`tasks.downstream.stale_downstream`, the built ones downstream that would then go stale)."""

from __future__ import annotations

import datetime as dt

from tasks import catalogue
from tasks.calendar import date_range
from tasks.freshness import engine as freshness
from tasks.freshness.keys import up_to_date


def tasks_to_build(dataset: str, start: dt.date, stop: dt.date) -> tuple[list, list[tuple[dt.date, str]]]:
    """Tasks of the range a RangeDaily would build (missing or stale), and the dates waiting for raw data."""
    from tasks.backfill import before_start, left_out

    cls = catalogue.BY_NAME[dataset].task
    later, why_later = left_out("RangeDaily", cls, start, stop)  # not begun yet: RangeDaily leaves them out
    earlier, _ = before_start(start, stop)  # before start_date: every range leaves them out, kept as built
    engine = freshness.new_pass()
    build, waiting = [], [(day, why_later) for day in later]
    for day in date_range(start, stop):
        if day in later or day in earlier:
            continue
        task = cls(date=day)
        if up_to_date(task, engine):
            continue
        why = engine.waiting_for(task)
        if why:
            waiting.append((day, why))
        else:
            build.append(task)
    return build, waiting
