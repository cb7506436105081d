"""Which partitions a preview builds: those of its range a backfill would rebuild, and the built ones downstream
that would then go stale."""

from __future__ import annotations

import datetime as dt

from tasks import catalogue
from tasks.calendar import date_range
from tasks.freshness import engine as freshness
from tasks.preview.records import (
    HORIZON_DAYS,
)


def _not_ok(dataset: str, start: dt.date, stop: dt.date) -> tuple[list, list[tuple[dt.date, str]]]:
    """Tasks of the range a RangeDaily would build (missing or stale), and the dates waiting for raw data."""
    from tasks.backfill import before_start, left_out

    cls = catalogue.BY_NAME[dataset].task_class()
    later, why_later = left_out("RangeDaily", cls, start, stop)  # not begun yet: RangeDaily leaves them out
    earlier, _ = before_start(start, stop)  # before start_date: every range leaves them out, kept as built
    engine = freshness.new_pass()
    build, waiting = [], [(day, why_later) for day in later]
    for day in date_range(start, stop):
        if day in later or day in earlier:
            continue
        task = cls(date=day)
        if engine.state(task).ok:
            continue
        why = engine.waiting_for(task)
        if why:
            waiting.append((day, why))
        else:
            build.append(task)
    return build, waiting


def _candidates(dataset: str, start: dt.date, stop: dt.date) -> list:
    """Partitions of the other datasets that may read what the range rebuilds, directly or not."""
    horizon = stop + dt.timedelta(days=HORIZON_DAYS)
    return [task for spec in catalogue.DATASETS if spec.name != dataset for task in spec.partitions(start, horizon)]


def downstream(rebuilt: list, dataset: str, start: dt.date, stop: dt.date, held: list | None = None) -> list:
    """Built partitions that read a rebuilt one, directly or through another: the ones that would go
    stale once the rebuild is published (to a fixed point, within the range and HORIZON_DAYS after).

    One that also reads a partition of ``dataset`` outside ``[start, stop)`` that is not up to date (a
    store's mart reads every date of its store) is not built: Luigi would build those dates too, into
    the preview, and the preview is of the range. It goes to ``held`` as (task, the date it waits on)."""
    ids = {t.task_id for t in rebuilt}
    root = type(rebuilt[0]) if rebuilt else None
    engine = freshness.new_pass()
    pending = [t for t in _candidates(dataset, start, stop) if engine.manifest(engine.store(t), t.key) is not None]
    found, grew = [], True
    while grew:
        grew = False
        for task in list(pending):
            upstream = task.upstream()
            if any(up.task_id in ids for up in upstream):
                pending.remove(task)
                grew = True
                outside = [
                    up
                    for up in upstream
                    if type(up) is root and not start <= up.date < stop and not engine.state(up).ok
                ]
                if outside:
                    if held is not None:
                        held.append((task, outside[0]))
                    continue
                ids.add(task.task_id)
                found.append(task)
    return found
