"""Backfill plans: what a range run would rebuild and why, what it would make stale downstream, and how
long it should take; reads manifests and listings, writes nothing."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field

from tasks import catalogue, luigid, settings
from tasks.base import MaterializedTask
from tasks.calendar import date_range
from tasks.catalogue import KEYED_RUNS
from tasks.freshness import engine as freshness
from tasks.freshness.engine import Engine
from tasks.freshness.identity import SAME_CONTENT
from tasks.guard import check_range
from tasks.reporting.names import dates_span
from tasks.storage.rawzone import one_session
from tasks.views.leftover import data_root_rows
from tasks.views.rows import LEFT_OVER, DayStatus
from tasks.views.spans import reason_runs, spanning
from tasks.views.status import DATASETS, day_status, failure, shorten

EXIT_WORK = 1  # a partition would run or may run, or a hotel's partitions are left over (docs/operations.md)
EXIT_NEWER = 10  # nothing to do here but partitions built by a newer version or settings: the run exits 10
EXIT_WAITING = 20  # nothing to do but partitions that wait for raw data: Luigi's missing_data, as the run would exit


@dataclass
class Plan:
    dataset: str
    # (partition, state, reason) of each partition the run would build (a date, or a label: "2026-09-15 H1")
    runs: list[tuple[dt.date | str, str, str]]
    blocked: list[tuple[dt.date | str, str]]  # waiting for raw data: the run would exit 20 for these
    same_content: list[dt.date]  # up to date although raw files' metadata changed: not rebuilt
    downstream: dict[str, list[str]]  # dataset -> partitions that would become stale
    seconds_each: float | None  # mean recorded build time of the dataset's partitions
    workers: int
    start: dt.date
    stop: dt.date
    left_out: list[dt.date] = field(default_factory=list)  # before start_date or not over: the run leaves them out
    left_out_why: list[tuple[list[dt.date], str]] = field(default_factory=list)  # each stretch of them, and why
    previews: list[dict] = field(default_factory=list)  # open previews of the dataset over the range
    # (partition, reason) of each that reads a key's slice of a not-ok upstream: rebuilt only if it changes
    maybe: list[tuple[dt.date | str, str]] = field(default_factory=list)
    # partition folders of hotels no longer in the hotels list, which no run builds or removes
    left_over: list[str] = field(default_factory=list)
    left_over_why: str = ""
    # (dataset, partition, state, reason) of each upstream partition outside the plan that the run builds first
    first: list[tuple[str, str, str, str]] = field(default_factory=list)
    # (partition, reason) of each built by a newer transform version than this host's: a run refuses to replace it
    newer: list[tuple[dt.date | str, str]] = field(default_factory=list)
    # what reads the partitions of ``maybe`` (dataset -> partitions) beyond ``downstream``: may go stale
    downstream_maybe: dict[str, list[str]] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """0 nothing to do, 1 work to do (whatever waits), 20 nothing to do but partitions waiting for raw data,
        10 nothing to do here but partitions built by newer code or settings (the run's exit: superseded)."""
        if self.runs or self.maybe or self.left_over:
            return EXIT_WORK
        return EXIT_WAITING if self.blocked else EXIT_NEWER if self.newer else 0

    @property
    def kind(self) -> str:
        """The dataset's partition kind (catalogue): date, date x hotel, hotel, store or none."""
        return catalogue.BY_NAME[self.dataset].partition

    @property
    def mode(self) -> tuple[str, str]:
        """(Luigi family, why) of the run the plan recommends (docs/backfills.md)."""
        if self.kind == "date x hotel":  # the list this host reads, by its path
            from tasks.reference import hotels_source

            family, why = KEYED_RUNS[self.kind]
            return family, why.replace("the hotels list", f"the hotels list {hotels_source()}")
        if self.kind != "date":
            return KEYED_RUNS[self.kind]
        if luigid.central_scheduler():  # other hosts may take dates too: one task a date
            return "RangeDaily", "a central scheduler: the dates shared among its workers and hosts, one task each"
        if one_session(settings.raw_root()):
            return "RangeSingleRun", "the raw zone is SFTP: one connection, each raw folder read once"
        if self.workers == 1:
            return "RangeSingleRun", "one worker: one run reads each raw folder once for consecutive dates"
        cls, day = catalogue.BY_NAME[self.dataset].task, settings.daybreak().start_date + dt.timedelta(days=1)
        if any(type(up) is cls for up in cls(date=day).upstream()):  # SingleRunBuild.processes: one for a chain
            return "RangeSingleRun", "a chain (each date reads the day before): one process builds the dates in order"
        return "RangeSingleRun", "a process per core, each a stretch of dates, each raw folder read once"

    @property
    def command(self) -> str:
        family, _ = self.mode
        local = "" if luigid.central_scheduler() else " --local-scheduler"  # a command that works as pasted
        workers = f" --workers {self.workers}" if family != "RangeSingleRun" and self.workers > 1 else ""
        if self.kind == "date x hotel":
            return f"luigi --module tasks {family} --start {self.start} --stop {self.stop}{workers}{local}"
        if self.kind == "hotel":  # one task per hotel that would run; one hotel waiting stops no other
            hotels = [h for h, *_ in [*self.runs, *self.maybe]]
            return "; ".join(f"luigi --module tasks {family} --hotel {h}{local}" for h in hotels)
        if self.kind != "date":
            return f"luigi --module tasks {family}{workers}{local}"
        of = DATASETS[self.dataset].__name__
        return f"luigi --module tasks {family} --of {of} --start {self.start} --stop {self.stop}{workers}{local}"

    @property
    def estimate_s(self) -> float | None:
        if self.seconds_each is None:
            return None
        return math.ceil(len(self.runs) / self.workers) * self.seconds_each


LEFT_OVER_LINES = 20  # the plan lists this many partitions left over, then "... and N more"


def make_plan(dataset: str, start: dt.date, stop: dt.date, workers: int = 1) -> Plan:
    """The plan of a range run of ``dataset`` over [start, stop), or of its keyed run."""
    from tasks.backfill import before_start, left_out
    from tasks.preview import open_for

    check_range(start, stop, "plan")
    plan = Plan(dataset, [], [], [], {}, None, workers, start, stop)
    with settings.snapshot(), freshness.view_pass() as cache:
        if plan.kind != "date":
            parts = _keyed_partitions(dataset, start, stop, cache)
            if plan.kind == "date x hotel":  # AllHotelsPickup's ranges leave out the days not over, as a date's do
                later = [d for d in date_range(start, stop) if settings.not_over(d)]
                plan.left_out, plan.left_out_why = later, [(later, settings.not_over(later[0]))] if later else []
                parts = [(label, t) for label, t in parts if t.date not in later]
            rebuilt, pending = _classify(plan, parts, cache)
        else:
            cls = DATASETS[dataset]
            earlier, why_earlier = before_start(start, stop)  # kept as built, never rebuilt
            later, why = left_out(plan.mode[0], cls, start, stop)
            plan.left_out_why = [(dates, w) for dates, w in ((earlier, why_earlier), (later, why)) if dates]
            plan.left_out = earlier + later
            rebuilt, pending = _classify(
                plan, [(d, cls(date=d)) for d in date_range(start, stop) if d not in set(plan.left_out)], cache
            )
        plan.first = _runs_first([*rebuilt, *pending], cache)
        plan.downstream = _downstream(rebuilt, dataset, start, stop)
        if pending:  # what reads the partitions that may run may go stale too
            more = _downstream([*rebuilt, *pending], dataset, start, stop)
            plan.downstream_maybe = {
                name: [k for k in keys if k not in plan.downstream.get(name, [])] for name, keys in more.items()
            }
        for row in data_root_rows([dataset], cache):
            if row.state == LEFT_OVER:
                plan.left_over, plan.left_over_why = list(row.not_read), row.reason
    if plan.kind == "date":  # after the plan's pass: whether each can be published is a pass of its own
        with settings.snapshot():
            plan.previews = open_for(dataset, start, stop)
    return plan


def _keyed_partitions(dataset: str, start: dt.date, stop: dt.date, cache: Engine) -> list[tuple[str, MaterializedTask]]:
    """(label, task) of every partition a keyed or unpartitioned dataset's run would consider."""
    spec = catalogue.BY_NAME[dataset]
    parts = spec.partitions(start, stop)
    if spec.partition == "date x hotel":
        return [(f"{t.date} {getattr(t, spec.key_param)}", t) for t in parts]
    if spec.partition == "store":  # a store the sensor will register at the start of the run is built too
        from tasks.store_marts import StoreDailySales, unregistered_stores

        parts += [StoreDailySales(store_id=s) for s in unregistered_stores(cache)]
    if spec.key_param:
        return [(getattr(t, spec.key_param), t) for t in parts]
    return [("(all)", t) for t in parts]


def _classify(plan: Plan, partitions: list[tuple], cache: Engine) -> tuple[list, list]:
    """Sort (label, task) pairs into the plan; return (the tasks that would run, the tasks that may run)."""
    rebuilt: dict[str, MaterializedTask] = {}
    maybe: list[MaterializedTask] = []
    durations = []
    for label, task in partitions:
        row = day_status(task, cache, plan.dataset)
        if row.state in ("stale", "missing", "failed"):
            plan.runs.append((label, row.state, row.reason))  # with what would fail it (status.day_status)
            rebuilt[task.task_id] = task
        elif row.reason.endswith(SAME_CONTENT):  # ok, or provisional
            plan.same_content.append(label)
        elif row.state == "pending":
            plan.maybe.append((label, row.reason))
            maybe.append(task)
        elif row.state == "waiting":
            plan.blocked.append((label, row.reason))
        elif row.state == "newer":
            plan.newer.append((label, row.reason))
        manifest = cache.summary(cache.store(task), task.key)
        if manifest and manifest.get("duration_s") is not None:
            durations.append(float(manifest["duration_s"]))
    plan.seconds_each = sum(durations) / len(durations) if durations else None
    return list(rebuilt.values()), maybe


def _runs_first(tasks: list[MaterializedTask], cache: Engine) -> list[tuple[str, str, str, str]]:
    """(dataset, partition, state, reason) of each not-ok upstream partition of ``tasks`` the run builds first."""
    seen = {t.task_id for t in tasks}
    stack = [up for t in tasks for up in t.upstream()]
    found = []
    while stack:
        up = stack.pop()
        if up.task_id in seen:
            continue
        seen.add(up.task_id)
        state = cache.state(up)
        if state.state not in ("stale", "missing"):  # ok, or built by newer code: the run leaves it
            continue
        stack.extend(up.upstream())  # a stale partition's upstream may be rebuilt first too
        if not state.may_rebuild and not cache.waiting_for(up):
            error = failure(up, cache)  # its last build failed, and would again: say so, not only why it is stale
            shown = ("failed", error.splitlines()[0]) if error else (state.state, state.reason)
            found.append((type(up).entry.name, _label(up), *shown))
    return sorted(found)


def _downstream(rebuilt: list, dataset: str, start: dt.date, stop: dt.date) -> dict[str, list[str]]:
    """Built partitions of other datasets the backfill of ``rebuilt`` would make stale, under their labels."""
    from tasks.downstream import stale_downstream

    if not rebuilt:
        return {}
    held: list = []
    found = stale_downstream(rebuilt, dataset, start, stop, held=held)
    out: dict[str, list[str]] = {}
    for task in [*found, *(t for t, _ in held)]:
        out.setdefault(type(task).entry.name, []).append(_label(task))
    return out


def _label(task: MaterializedTask) -> str:
    """A partition as the plan names it: its date, its key, both, or ``(all)``."""
    spec = type(task).entry
    key = getattr(task, spec.key_param) if spec.key_param else None
    if spec.partition == "date x hotel":
        return f"{task.date} {key}"
    return str(key if key is not None else task.key if task.key is not None else "(all)")


def render(plan: Plan) -> str:
    from tasks.backfill import describe_left_out

    maybe = f", {len(plan.maybe)} may run once their upstream is rebuilt" if plan.maybe else ""
    runs, waits = len(plan.runs), len(plan.blocked)
    left = f", {len(plan.left_over)} left over" if plan.left_over else ""
    newer = f", {len(plan.newer)} built by a newer version or settings" if plan.newer else ""
    lines = [
        f"{plan.dataset}: {runs} partition{'' if runs == 1 else 's'} would run{maybe}, "
        f"{waits} wait{'s' if waits == 1 else ''} for raw data{newer}{left}"
    ]
    for dates, why in plan.left_out_why:
        lines.append("  " + describe_left_out(dates, why, (plan.stop - plan.start).days))
    for name in dict.fromkeys(name for name, *_ in plan.first):
        rows = [(label, f"{state}: {reason}".rstrip(": ")) for n, label, state, reason in plan.first if n == name]
        for first, last, n, reason in _grouped(rows):
            lines.append(f"  first {name} {_stretch(first, last, n)}  {shorten(reason)}")
    for first, last, n, reason in _grouped([(label, f"{state}: {reason}") for label, state, reason in plan.runs]):
        lines.append(f"  run   {_stretch(first, last, n)}  {shorten(reason)}")
    for first, last, n, reason in _grouped(plan.maybe):
        lines.append(f"  may   {_stretch(first, last, n)}: {shorten(reason)}")
    for first, last, n, reason in _grouped(plan.blocked):
        lines.append(f"  wait  {_stretch(first, last, n)}  {shorten(reason)}")
    for first, last, n, reason in _grouped(plan.newer):
        lines.append(f"  newer {_stretch(first, last, n)}  {shorten(reason)}")
    if plan.same_content:
        first, last, n = plan.same_content[0], plan.same_content[-1], len(plan.same_content)
        shown = dates_span(plan.same_content) or (str(first) if n == 1 else f"{first} .. {last}")
        lines.append(f"  keep  {shown}  {n} partition{'' if n == 1 else 's'}: {SAME_CONTENT}, nothing to rebuild")
    for name, keys in plan.downstream.items():
        # a hotel's or a store's partition reads its own rows of what is rebuilt: stale only if they change
        how = "may go stale" if catalogue.BY_NAME[name].task.reads_a_slice else "stale"
        lines.append(f"  then {how} downstream: {name} {_listed(keys)}")
    for name, keys in plan.downstream_maybe.items():
        if keys:
            lines.append(f"  then may go stale downstream: {name} {_listed(keys)}")
    lines += [f"  left  {folder}" for folder in plan.left_over[:LEFT_OVER_LINES]]
    if len(plan.left_over) > LEFT_OVER_LINES:
        lines.append(
            f"  left  ... and {len(plan.left_over) - LEFT_OVER_LINES} more (`daybreak status --json` lists them)"
        )
    if plan.left_over:
        lines.append(f"  {plan.left_over_why}")  # whole: it ends with the command that deletes them
    for p in plan.previews:
        pid, why = p["id"], p.get("why_not") or []
        head = f"  open preview {pid} ({p['start']} .. {p['stop']}, {len(p.get('partitions', []))} partitions)"
        if why:
            more = f" (and {len(why) - 1} more)" if len(why) > 1 else ""
            lines.append(
                f"{head}: cannot be published: {shorten(why[0])}{more}; discard it with `daybreak discard {pid}`"
            )
        elif p.get("state") == "publishing":
            lines.append(f"{head}: half published: finish it with `daybreak publish {pid}`")
        else:
            lines.append(f"{head}: see it with `daybreak previews`, put it in place with `daybreak publish {pid}`")
    if plan.runs and plan.estimate_s is None:
        lines.append("  estimate: no recorded durations yet")
    elif plan.runs:
        lines.append(
            f"  estimate: {len(plan.runs)} partition{'' if len(plan.runs) == 1 else 's'} x {plan.seconds_each:.2g} s / "
            f"{plan.workers} worker{'' if plan.workers == 1 else 's'} "
            f"= {plan.estimate_s:.0f} s (mean of recorded build times)"
        )
    if plan.runs or plan.maybe:
        family, why = plan.mode
        kind = {"RangeSingleRun": "one run for the range", "RangeDaily": "one Luigi task per date"}.get(family, "")
        kind = kind or "one Luigi task per partition"
        lines.append(f"  mode: {kind} ({family}): {why}")
        lines.append(f"  run:  {plan.command}")
    return "\n".join(lines)


def _listed(keys: list[str]) -> str:
    """Partitions named one by one up to 10, a day with several keys once (``2026-09-21 H1, H2``); more, as at
    most 10 spans of days with their keys."""
    if len(keys) <= 10:
        by_day: dict[str, list[str]] = {}  # a day -> the keys after it, in order
        for label in keys:
            day, _, key = label.partition(" ")
            by_day.setdefault(day, []).append(key)
        if all(len(ks) == 1 for ks in by_day.values()):
            return ", ".join(keys)
        return "; ".join(f"{day} {', '.join(ks)}" for day, ks in by_day.items())
    days: dict[str, list[str]] = {}  # the key after the date ('' for none) -> its dates, in order
    for label in keys:
        day, _, key = label.partition(" ")
        days.setdefault(key, []).append(day)
    spans: dict[str, list[str]] = {}  # the spans of dates -> the keys that have them
    for key, dates in days.items():
        runs = _grouped([(d, "") for d in dates])
        spans.setdefault(", ".join(f"{a} .. {b}" if n > 1 else str(a) for a, b, n, _ in runs), []).append(key)
    shown = [f"{span} {', '.join(k for k in names if k)}".rstrip() for span, names in spans.items()]
    return f"{'; '.join(shown[:10])}{' ...' if len(shown) > 10 else ''} ({len(keys)} partitions)"


def _stretch(first, last, n: int) -> str:
    """A run of :func:`_grouped` as a plan line names it: ``2026-09-01 .. 2026-09-30 (30 partitions)``, or its one."""
    return str(first) if n == 1 else f"{first} .. {last} ({n} partitions)"


def _date(label) -> dt.date | None:
    try:
        return dt.date.fromisoformat(str(label))
    except ValueError:
        return None


def _next(last, label) -> bool:
    """Whether ``label`` follows ``last`` in a run: the next date (a date, or its text); any other label does."""
    before, after = _date(last), _date(label)
    return before is None or after is None or after - before == dt.timedelta(days=1)


def _grouped(rows: list[tuple]) -> list[tuple]:
    """(first, last, count, reason) of each run of ``rows`` in a row with the same reason, or of days whose
    reasons differ only by dates that move with the day (as status groups them): one line each."""
    days = [(_date(label), reason) for label, reason in rows]
    if days and all(day is not None for day, _ in days):
        why = dict(days)
        return [
            (str(first), str(last), (last - first).days + 1, spanning(row.reason, why[last]))
            for first, last, row in reason_runs([DayStatus("", day, "", reason) for day, reason in days])
        ]
    out: list[list] = []
    for label, reason in rows:
        if out and out[-1][3] == reason and _next(out[-1][1], label):
            out[-1][1], out[-1][2] = label, out[-1][2] + 1
        else:
            out.append([label, label, 1, reason])
    return [tuple(g) for g in out]
