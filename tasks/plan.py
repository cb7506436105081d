"""Backfill plans: what a range run would rebuild and why, what it would make stale downstream, and
how long it should take. A dry run: it reads manifests and listings, runs and writes nothing."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field

from tasks import scheduler, settings
from tasks.base import CheckCache, MaterializedTask
from tasks.calendar import date_range
from tasks.freshness import engine as freshness
from tasks.freshness.identity import SAME_CONTENT
from tasks.guard import check_range
from tasks.status import DATASETS, day_status, shorten


@dataclass
class Plan:
    dataset: str
    runs: list[tuple[dt.date, str, str]]  # (date, state, reason) of each partition the run would build
    blocked: list[tuple[dt.date, str]]  # waiting for raw data: the run would exit 20 for these
    same_content: list[dt.date]  # up to date although raw files' metadata changed: not rebuilt
    downstream: dict[str, list[str]]  # dataset -> partitions that would become stale
    seconds_each: float | None  # mean recorded build time of the dataset's partitions
    workers: int
    start: dt.date
    stop: dt.date
    left_out: list[dt.date] = field(default_factory=list)  # not begun or not over: the run leaves them out
    left_out_why: str = ""
    previews: list[dict] = field(default_factory=list)  # open previews of the dataset over the range

    @property
    def mode(self) -> tuple[str, str]:
        """(Luigi family, why): one run for the range over SFTP or with one worker, else one task per date.

        benchmarks/single_run.py (60 dates): over SFTP one run for the range takes 0.52x the time of
        one task per date (2 connections instead of 61, each folder read once instead of twice), two
        workers 0.63x; on local disk two workers take 0.76x, one run 0.88x (docs/backfills.md)."""
        if settings.raw_root().startswith("sftp://"):
            return "RangeSingleRun", "the raw zone is SFTP: one connection, each raw folder read once"
        if self.workers == 1:
            return "RangeSingleRun", "one worker: one run reads each raw folder once for consecutive dates"
        return "RangeDaily", f"local raw zone and {self.workers} workers: dates run in parallel, one task each"

    @property
    def command(self) -> str:
        family, _ = self.mode
        workers = f" --workers {self.workers}" if family == "RangeDaily" and self.workers > 1 else ""
        of = DATASETS[self.dataset].__name__
        local = "" if scheduler.central_scheduler() else " --local-scheduler"  # a command that works as pasted
        return f"luigi --module tasks {family} --of {of} --start {self.start} --stop {self.stop}{workers}{local}"

    @property
    def estimate_s(self) -> float | None:
        if self.seconds_each is None:
            return None
        return math.ceil(len(self.runs) / self.workers) * self.seconds_each


def make_plan(dataset: str, start: dt.date, stop: dt.date, workers: int = 1, horizon_days: int = 7) -> Plan:
    """The plan of ``RangeDaily --of <dataset> --start start --stop stop`` (stop exclusive)."""
    check_range(start, stop, "plan")
    with settings.snapshot():
        return _make_plan(dataset, start, stop, workers, horizon_days)


def _make_plan(dataset: str, start: dt.date, stop: dt.date, workers: int, horizon_days: int) -> Plan:
    from tasks.backfill import left_out

    cache = freshness.new_pass()
    cls = DATASETS[dataset]
    family = Plan(dataset, [], [], [], {}, None, workers, start, stop).mode[0]
    later, why = left_out(family, cls, start, stop)
    tasks = [cls(date=d) for d in date_range(start, stop) if d not in set(later)]
    runs, blocked, same, durations = [], [], [], []
    for task in tasks:
        row = day_status(task, cache, dataset)
        if row.state in ("stale", "missing", "failed"):
            runs.append((task.date, row.state, row.reason))
        elif row.reason == SAME_CONTENT:
            same.append(task.date)
        elif row.state == "waiting":
            blocked.append((task.date, row.reason))
        manifest = cache.manifest(cache.once(("store", task.dataset_path()), task.store), task.date)
        if manifest and manifest.get("duration_s") is not None:
            durations.append(float(manifest["duration_s"]))
    rebuilt = {cls(date=d).task_id for d, _, _ in runs}
    downstream = _downstream(rebuilt, start, stop + dt.timedelta(days=horizon_days), cls)
    seconds = sum(durations) / len(durations) if durations else None
    from tasks.preview import open_for

    previews = open_for(dataset, start, stop)
    return Plan(dataset, runs, blocked, same, downstream, seconds, workers, start, stop, later, why, previews)


def _downstream(rebuilt: set[str], start: dt.date, stop: dt.date, of: type) -> dict[str, list[str]]:
    """Built partitions (of every known dataset, and the snapshots) that read one of ``rebuilt``:
    the ones the backfill would make stale."""
    from tasks.hotels import OtbByStayDate

    out: dict[str, list[str]] = {}
    candidates: list[tuple[str, MaterializedTask]] = [
        (name, cls(date=d)) for name, cls in DATASETS.items() if cls is not of for d in date_range(start, stop)
    ]
    candidates.append(("otb_by_stay_date", OtbByStayDate()))
    cache = freshness.new_pass()
    for name, task in candidates:
        if any(up.task_id in rebuilt for up in task.upstream()) and _is_built(task, cache):
            out.setdefault(name, []).append(str(task.key) if task.key else "(all)")
    return out


def _is_built(task: MaterializedTask, cache: CheckCache) -> bool:
    return cache.manifest(task.store(), task.key) is not None


def render(plan: Plan) -> str:
    from tasks.backfill import describe_left_out

    lines = [f"{plan.dataset}: {len(plan.runs)} partitions would run, {len(plan.blocked)} wait for raw data"]
    if plan.left_out:
        lines.append("  " + describe_left_out(plan.left_out, plan.left_out_why, (plan.stop - plan.start).days))
    lines += [f"  run   {d}  {state}: {shorten(reason)}" for d, state, reason in plan.runs]
    lines += [f"  wait  {d}  {shorten(reason)}" for d, reason in plan.blocked]
    if plan.same_content:
        first, last, n = plan.same_content[0], plan.same_content[-1], len(plan.same_content)
        lines.append(f"  keep  {first} .. {last}  {n} partitions: {SAME_CONTENT}, nothing to rebuild")
    for name, keys in plan.downstream.items():
        lines.append(f"  then stale downstream: {name} {', '.join(keys[:10])}{' ...' if len(keys) > 10 else ''}")
    for p in plan.previews:
        lines.append(
            f"  open preview {p['id']} ({p['start']} .. {p['stop']}, {len(p.get('partitions', []))} partitions): "
            f"see it with `daybreak previews`, put it in place with `daybreak publish {p['id']}`"
        )
    if plan.runs:
        if plan.estimate_s is None:
            lines.append("  estimate: no recorded durations yet")
        else:
            lines.append(
                f"  estimate: {len(plan.runs)} partitions x {plan.seconds_each:.1f} s / {plan.workers} workers "
                f"= {plan.estimate_s:.0f} s (mean of recorded build times)"
            )
        family, why = plan.mode
        kind = "one run for the range" if family == "RangeSingleRun" else "one Luigi task per date"
        lines.append(f"  mode: {kind} ({family}): {why}")
        lines.append(f"  run:  {plan.command}")
    return "\n".join(lines)
