"""What a backfill would make stale downstream (plan, preview): the built partitions that read what it rebuilds,
directly or through another, and those it holds because they also read a stale partition it does not rebuild."""

from __future__ import annotations

import datetime as dt

from tasks import catalogue, settings
from tasks.freshness.engine import Engine, view_pass
from tasks.freshness.keys import changed_keys
from tasks.settings import business_today


def stale_downstream(
    rebuilt: list, dataset: str, start: dt.date, stop: dt.date, horizon_days: int = 7, held: list | None = None
) -> list:
    """Built partitions that would go stale once ``rebuilt`` is in place, within the range and
    ``horizon_days`` after (a chain to its last built day); one that also reads a stale partition outside
    the range goes to ``held`` instead, with what reads it (docs/backfills.md)."""
    with view_pass() as engine:  # within a plan, the plan's pass
        ids = {t.task_id: changed_keys(t, engine) for t in rebuilt}
        stack = list(rebuilt)
        while stack:  # what the run rebuilds first, as their upstream: its readers past the range may go stale too
            for up in stack.pop().upstream():
                if up.task_id not in ids and not engine.state(up).ok and not engine.waiting_for(up):
                    ids[up.task_id] = changed_keys(up, engine)
                    stack.append(up)
        horizon = stop + dt.timedelta(days=max(horizon_days, settings.ads().rolling_window_days))
        found = _reading(ids, dataset, start, stop, horizon, engine)
        while horizon < business_today() and any(_a_link(t) and t.key >= horizon - dt.timedelta(days=1) for t in found):
            horizon = min(business_today(), horizon + (horizon - start))  # a chain that goes on: all of it
            found = _reading(ids, dataset, start, stop, horizon, engine)
        reach, stuck, grew = set(ids) | {t.task_id for t in found}, {}, True
        while grew:  # held: a partition read neither rebuilt nor up to date, or a held one (the preview has neither)
            grew = False
            for task in (t for t in found if t.task_id not in stuck):
                ups = task.upstream()
                bad = [u for u in ups if u.task_id in stuck or not (u.task_id in reach or engine.state(u).ok)]
                if bad:
                    stuck[task.task_id], grew = bad[0], True
        held = held if held is not None else []
        held += [(t, stuck[t.task_id]) for t in found if t.task_id in stuck]
        return [t for t in found if t.task_id not in stuck]


def _a_link(task) -> bool:
    """Whether ``task`` is a day of a chain: it reads its own dataset's day before."""
    return task.key is not None and any(type(up) is type(task) and up.key < task.key for up in task.upstream())


def _reading(
    ids: dict[str, frozenset[str] | None], dataset: str, start: dt.date, stop: dt.date, horizon: dt.date, engine: Engine
) -> list:
    """The built partitions from ``start`` to ``horizon`` that read one of ``ids`` (-> the keys whose rows
    may change, None: any), directly or through another; a one-key partition only when its key's may."""
    keys = dict(ids)
    candidates = [t for spec in catalogue.DATASETS if spec.name != dataset for t in spec.partitions(start, horizon)]
    if catalogue.BY_NAME[dataset].partition == "date":  # its own dates past the range (a look-back's)
        candidates += catalogue.BY_NAME[dataset].partitions(stop, horizon)
    pending = [t for t in candidates if engine.manifest(engine.store(t), t.key) is not None]
    found: dict[str, object] = {}
    grew = True
    while grew:  # until no partition is found, nor reads more keys than before (keys only grow)
        grew = False
        for task in pending:
            read = [keys[up.task_id] for up in task.upstream() if up.task_id in keys]
            if not read:
                continue
            mine = None if None in read else frozenset().union(*read)
            spec = type(task).entry
            if task.reads_a_slice and mine is not None and getattr(task, spec.key_param) not in mine:
                continue
            if task.task_id in keys:  # one rebuilt first, or found before: its keys only grow
                old = keys[task.task_id]
                mine = None if old is None or mine is None else old | mine
            if task.task_id not in found or keys[task.task_id] != mine:
                keys[task.task_id], grew = mine, True
                found.setdefault(task.task_id, task)
    return list(found.values())
