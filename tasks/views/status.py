"""Partition status view (docs/operations.md), per dataset and day, from manifests, failure records and
raw folder listings only, through the same check that decides what a backfill runs."""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import json
from dataclasses import replace

from tasks import catalogue, settings
from tasks.base import BEFORE_START, MaterializedTask, PartitionedTask
from tasks.calendar import date_range
from tasks.contract import printable
from tasks.freshness import engine as freshness
from tasks.freshness import identity
from tasks.freshness.engine import Engine
from tasks.freshness.identity import SAME_CONTENT
from tasks.freshness.keys import fold_upstream, not_its_keys
from tasks.freshness.node import RAW_GONE
from tasks.freshness.rawfolders import quiet
from tasks.guard import check_range
from tasks.reporting.names import cut_at_word, dates_span
from tasks.storage.partitions import open_store
from tasks.targets import newest_raw_date
from tasks.views.leftover import data_root_rows
from tasks.views.rows import DATA_ROOT, LEFT_OVER, NOT_READ, RAW_ZONE, DayStatus, kept_gone
from tasks.views.spans import reason_runs, runs, span, spanning

DATASETS: dict[str, type[PartitionedTask]] = catalogue.classes("date")
MULTI = catalogue.classes("date x hotel")  # one state per day: the worst of its keys' states
SNAPSHOTS: dict[str, type[MaterializedTask]] = catalogue.classes("none")  # one state each, after the daily ones
STATIC = catalogue.classes("hotel", "store")  # one partition per key: one state, the worst of the keys'
SYMBOLS = {
    "ok": "#",
    "provisional": "p",
    "stale": "s",
    "pending": "?",
    "newer": "n",
    "missing": ".",
    "waiting": "w",
    "failed": "F",
    "not over yet": "-",
}
NOT_OVER_YET = "not over yet"  # a day a range leaves out as not over, never built: no work (settings.not_over)
WORST_FIRST = ["failed", "stale", "newer", "waiting", "missing", "pending", "provisional", NOT_OVER_YET, "ok"]
RAW_ZONE_LINES = 20  # the text view lists this many, then "... and N more" (--json lists them all)


def day_status(task: MaterializedTask, cache: Engine, name: str) -> DayStatus:
    """The state of one partition, and the raw files of its window that are not read."""
    status = _day_status(task, cache, name)
    doomed = task.fails_on_listing() if status.state in ("stale", "missing") else ""  # a run would fail it
    if doomed:
        status = replace(status, reason=f"{status.reason}; would fail: {doomed}")
    manifest = cache.summary(cache.store(task), task.key) or {}
    stats = manifest.get("stats") or {}
    window = cache.window(task) if task.reads_raw() else None
    return replace(
        status,
        warnings=tuple(stats.get("warnings") or ()) if status.state in ("ok", "provisional") else (),
        built_by=manifest.get("built_by") or None,
        raw_folders=stats.get("raw_folders") or None,
        not_read=tuple(f"{r['path']} ({r['reason']})" for r in window.refused) if window else (),
    )


def failure(task: MaterializedTask, cache: Engine) -> str:
    """The error of the partition's last build when it failed and that still applies; '' otherwise."""
    return cache.once_per_pass(("failure", task.task_id), _failure, task, cache)


def _failure(task: MaterializedTask, cache: Engine) -> str:
    store, day = cache.store(task), task.key
    if task.state(cache).ok:
        return ""
    recorded = cache.once_per_pass(("failure records", store.data_root), store.failure_records)
    record = store.read_failure(day) if recorded and store.failure_id(day) in recorded else None
    manifest = cache.summary(store, day) or {}
    if (
        record
        and record.get("failed_at", "") > manifest.get("finished_at", "")
        and identity.failure_applies(cache, task, record)
    ):
        return record.get("error", "") or "failed"
    return ""


def failed_upstream(task: MaterializedTask, cache: Engine) -> str:
    """``<partition> (failed: <error's first line>)`` of the nearest upstream partition whose failure still
    applies, or ''."""

    def ups_of(node) -> list:  # its not-ok upstream, and what its own failure is
        return [(up, failure(up, cache)) for up in node.upstream() if not cache.state(up).ok]

    def through(pair) -> bool:
        up, error = pair
        return not error and cache.state(up).may_rebuild

    def fold(ups, values) -> tuple[int, str] | None:  # (links away, text) of the first of the nearest
        found = [
            (1, f"{freshness.label(up)} (failed: {error.splitlines()[0]})")
            if error
            else (values[up.task_id][0] + 1, values[up.task_id][1])
            for up, error in ups
            if error or (through((up, error)) and values[up.task_id])
        ]
        return min(found, key=lambda f: f[0]) if found else None

    nearest = fold_upstream(task, cache, "failed upstream", ups_of, through, fold)
    return nearest[1] if nearest else ""


def _day_status(task: MaterializedTask, cache: Engine, name: str) -> DayStatus:
    state, day = task.state(cache), task.key
    store = cache.store(task)
    manifest = cache.summary(store, day) or {}  # rows, duration, finished_at: no list of inputs
    error = failure(task, cache)
    rows, duration = manifest.get("row_count"), manifest.get("duration_s")  # of the build in place, if any
    if error:
        return DayStatus(name, day, "failed", error, rows, duration)  # whole: shortened only for display
    if state.state == "missing" and isinstance(task, PartitionedTask) and (why := settings.not_over(day)):
        return DayStatus(name, day, NOT_OVER_YET, why)  # left out by every range, as by plan: not work
    if task.before_start() or state.state == "newer":  # kept as built: nothing waits, a run does not replace it
        return DayStatus(name, day, state.state, state.reason, rows, duration)
    if not state.ok:  # missing or stale, and a run cannot build it yet: it waits, as the run says
        waiting = cache.waiting_for(task)
        if waiting:
            return DayStatus(name, day, "waiting", waiting)
    if not_its_keys(task, cache):  # its upstream's rebuild can change other stores' or hotels' rows only
        return DayStatus(name, day, "ok", "", rows, duration)
    if state.may_rebuild:  # a run rebuilds its upstream first, then this partition only if what it reads changed
        failed = failed_upstream(task, cache)
        reason = f"may rebuild once its upstream is rebuilt: {failed}" if failed else state.reason
        return DayStatus(name, day, "pending", reason, rows, duration)
    if state.ok and task.provisional(cache):
        note = f"; {state.reason}" if state.reason == SAME_CONTENT else ""
        return DayStatus(name, day, "provisional", f"later exports may still restate it{note}", rows, duration)
    failed = "" if state.ok else failed_upstream(task, cache)  # its build waits on that one's, which fails
    if failed:
        return DayStatus(name, day, state.state, f"{state.reason}; upstream {failed}", rows, duration)
    # an ok partition's reason is a note: its raw files' metadata changed, their content did not
    return DayStatus(name, day, state.state, state.reason, rows, duration)


def keyed_status(name: str, day: dt.date | None, cache: Engine) -> DayStatus:
    """One day of a keyed dataset: the worst state of its keys, every key not ok in the reason, worst first."""
    spec = catalogue.BY_NAME[name]
    key = spec.key_param
    parts, new = spec.partitions() if day is None else spec.partitions(day, day + dt.timedelta(days=1)), []
    if spec.partition == "store":  # a store with a file in the raw zone, not registered yet: the next run builds it
        from tasks.store_marts import StoreDailySales, unregistered_stores

        new = unregistered_stores(cache)  # as the plan counts them
        parts += [StoreDailySales(store_id=s) for s in new]
    if not parts:
        run = "; AllStores registers and builds every store whose files are in the raw zone"
        return DayStatus(name, day, "missing", f"no {key} known yet{run if key == 'store_id' else ''}")
    rows = {getattr(t, key): day_status(t, cache, name) for t in parts}
    for k in new:  # what builds it: AllStores registers it first
        if rows[k].state == "missing":
            registers = "not registered yet: AllStores registers and builds it"
            rows[k] = replace(rows[k], reason=f"{rows[k].reason}, {registers}")
    states = sorted({r.state for r in rows.values()}, key=WORST_FIRST.index)
    worst, bad, groups = states[0], [s for s in states if s != "ok"], []
    for state in bad:  # every key not ok, worst state first: each reason cut short when there are several
        keys = [k for k, r in rows.items() if r.state == state]
        named = ", ".join(keys) if len(keys) <= 10 else f"{keys[0]} .. {keys[-1]} ({len(keys)} of {len(rows)})"
        why = rows[keys[0]].reason if len(bad) == 1 else shorten(rows[keys[0]].reason, 150)
        groups.append(f"{key} {named}: {why}" if state == worst else f"{named} {state}: {why}")
    first = rows[next(k for k, r in rows.items() if r.state == worst)]
    reason = "; ".join(g.rstrip(": ") for g in groups)
    counts = [r.rows for r in rows.values() if r.rows is not None]
    took = [r.duration_s for r in rows.values() if r.duration_s is not None]
    rows_sum, took_sum = sum(counts) if counts else None, round(sum(took), 4) if took else None
    return DayStatus(name, day, worst, reason, rows_sum, took_sum, built_by=first.built_by)  # the first key's


def collect(start: dt.date, stop: dt.date, datasets: list[str] | None = None) -> list[DayStatus]:
    check_range(start, stop, "status")
    with settings.snapshot(), _without_gc_pauses(), quiet():
        return _collect(start, stop, datasets)


@contextlib.contextmanager
def _without_gc_pauses():
    """Python's cyclic garbage collector off while the view is collected (its objects hold no cycles)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _collect(start: dt.date, stop: dt.date, datasets: list[str] | None) -> list[DayStatus]:
    with freshness.view_pass() as cache:
        out = []
        for name in datasets or catalogue.names():
            if name in SNAPSHOTS:
                out.append(day_status(SNAPSHOTS[name](), cache, name))
                continue
            if name in STATIC:
                out.append(keyed_status(name, None, cache))
                continue
            if name in MULTI:
                cache.list_dataset(open_store(settings.data_uri(), MULTI[name].dataset))
                out.extend(keyed_status(name, d, cache) for d in date_range(start, stop))
                continue
            days = [DATASETS[name](date=d) for d in date_range(start, stop)]
            if not days:  # --start equal to --stop: an empty range
                continue
            cache.list_dataset(days[0].store())
            cache.scan_ahead(days)  # a bucket's raw folders listed at once, not one request after another
            out.extend(day_status(task, cache, name) for task in days)
        out[:0] = data_root_rows(datasets or catalogue.names(), cache)
        unread = cache.unread_listed()  # of the source folders the partitions above read
        if unread:
            n = len(unread)
            reason = f"{n} {'entry' if n == 1 else 'entries'} of the raw zone not read by any partition"
            not_read = tuple(f"{printable(r.name)} ({r.reason})" for r in unread)
            out.insert(0, DayStatus(RAW_ZONE, None, NOT_READ, reason, not_read=not_read))
        return out


def default_start(datasets: list[str] | None = None) -> dt.date:
    """``[daybreak] start_date``, or the first date of a partition kept from before it."""
    first = settings.daybreak().start_date
    for name in datasets or catalogue.names("date", "date x hotel"):
        spec = catalogue.BY_NAME[name]
        if spec.partition in ("date", "date x hotel"):
            first = min([first, *open_store(settings.data_uri(), spec.path).listed_dates()])
    return first


def default_stop() -> dt.date:
    """The day after the newest raw folder of any source, arrived or not (a late file shows as waiting): one stop
    for every dataset."""
    from tasks.catalogue import SOURCES
    from tasks.storage.rawzone import RawZone

    zone = RawZone.from_uri(settings.raw_root())
    newest = [d for d in (newest_raw_date(zone, source, arrived=False) for source in SOURCES) if d is not None]
    return (max(newest) if newest else settings.daybreak().start_date) + dt.timedelta(days=1)


def shorten(reason: str, width: int = 300) -> str:
    return cut_at_word(reason, width)


def render_text(rows: list[DayStatus]) -> str:
    lines = [f"legend: {'  '.join(f'{v} {k}' for k, v in SYMBOLS.items())}"]
    left = [entry for r in rows if r.state == LEFT_OVER for entry in r.not_read]
    for name in dict.fromkeys(r.dataset for r in rows):
        mine = [r for r in rows if r.dataset == name]
        spec = catalogue.BY_NAME.get(name)
        n_left = sum(entry.startswith(f"{spec.path}/") for entry in left) if spec else 0
        also = f"; {n_left} left over (above)" if n_left else ""  # a hotel's no longer in the list
        if name in (RAW_ZONE, DATA_ROOT):
            for row in mine:  # the data root's: left over, then strays
                unread = row.not_read
                lines.append(row.reason if row.state == LEFT_OVER else f"{row.reason}:")  # it ends with a command
                lines.extend(f"  {entry}" for entry in unread[:RAW_ZONE_LINES])
                if len(unread) > RAW_ZONE_LINES:
                    lines.append(f"  ... and {len(unread) - RAW_ZONE_LINES} more (--json lists them all)")
            continue
        if mine[0].date is None:  # unpartitioned: one state
            lines.append(
                f"{name}  (unpartitioned)  {mine[0].state}" + (f": {mine[0].reason}" if mine[0].reason else "") + also
            )
            continue
        counts = {k: sum(r.state == k for r in mine) for k in SYMBOLS}
        lines.append(f"{name}  {mine[0].date} .. {mine[-1].date}")
        bar = "".join(SYMBOLS[r.state] for r in mine)
        lines.extend(f"  {bar[i : i + 70]}" for i in range(0, len(bar), 70))
        unread = len({entry for r in mine for entry in r.not_read})  # a file is in the windows of two dates
        warned = sum(len(r.warnings) for r in mine)
        lines.append(
            "  "
            + ", ".join(f"{v} {k}" for k, v in counts.items() if v)
            + (f"; {unread} raw file(s) not read" if unread else "")
            + (f"; {warned} warning(s)" if warned else "")
            + also
        )
        # provisional: a count, not a line; days in a row with the same state and reason: one line
        attention = [r for r in mine if r.state not in ("ok", "provisional")]
        last_of = {r.date: r for r in attention}
        for first, last, r in reason_runs(attention):
            lines.append(f"  {span(first, last)} {r.state}: {shorten(spanning(r.reason, last_of[last].reason))}")
        for first, last, r in runs([r for r in mine if r.warnings], lambda r: r.warnings):
            lines.extend(f"  {span(first, last)} warning: {shorten(w)}" for w in r.warnings)
        for first, last, r in runs([r for r in mine if r.not_read], lambda r: r.not_read):
            lines.append(f"  {span(first, last)} not read: {', '.join(r.not_read)}")
        kept = [r for r in mine if r.state == "ok" and r.reason.startswith(BEFORE_START)]
        if kept:
            lines.append(f"  {dates_span([r.date for r in kept])} ok, {kept[0].reason}")
        gone = [r for r in mine if r.state == "ok" and r.reason.startswith(RAW_GONE)]
        if gone:
            lines.append(f"  {dates_span([r.date for r in gone])} ok, {kept_gone(gone)}")
        same = [r for r in mine if r.state in ("ok", "provisional") and r.reason.endswith(SAME_CONTENT)]
        if same:
            ok = "ok" if all(r.state == "ok" for r in same) else "up to date"
            days = dates_span([r.date for r in same])
            lines.append(f"  {len(same)} {ok}, {SAME_CONTENT} ({days}): nothing to rebuild")
    return "\n".join(lines)


def built_by_text(built_by: dict | None) -> str:
    """``host-a, pid 4242, Worker(salt=..., host=host-a, ...)``: who committed a manifest; '' when it does not say."""
    if not built_by:
        return ""
    parts = [str(built_by.get("host", "?")), f"pid {built_by.get('pid', '?')}", built_by.get("worker") or ""]
    return ", ".join(p for p in parts if p)


def render_json(rows: list[DayStatus]) -> str:
    """Every row as a dict (its fields; the date as text), indented by one."""
    return json.dumps([{**r.__dict__, "date": r.date and r.date.isoformat()} for r in rows], indent=1)
