"""Backfills: the morning refresh of what late data can still change (RangeDaily wrappers), and the
single-run range (one Luigi task, one process, one raw-zone session for a whole range of dates)."""

from __future__ import annotations

import datetime as dt
import itertools
import multiprocessing
import multiprocessing.connection
import os
import time
import warnings
from collections.abc import Iterable, Iterator

import luigi
from luigi.tools.range import RangeDaily, RangeDailyBase

from tasks import catalogue, cores, settings
from tasks.base import PartitionedTask, before_start_reason, process_died, sftp_slot
from tasks.calendar import date_range
from tasks.freshness.engine import Engine
from tasks.freshness.keys import up_to_date
from tasks.freshness.node import raw_folders
from tasks.guard import check_of, check_range, range_made_here
from tasks.luigi_shortcuts import luigi_run, worker_id
from tasks.luigi_shortcuts.hosts import LEFT_BY_THE_LIMIT
from tasks.nextdate import keeping_for_next_date
from tasks.parameters import DateParameter
from tasks.reporting import names, progress, runlog
from tasks.reporting.progress import logger
from tasks.settings import day_in_progress
from tasks.storage.rawzone import one_session
from tasks.targets import RawFolder, luigi_engine


class BusinessDateParameter(DateParameter):
    """A date defaulting to :func:`day_in_progress`, resolved at creation (Luigi's summary needs a value)."""

    def normalize(self, x):
        return super().normalize(day_in_progress() if x is None else x)


class MorningRefresh(luigi.WrapperTask):
    """A RangeDaily of every dataset the catalogue marks ``refresh`` (docs/operations.md, "The morning
    refresh")."""

    resources = property(lambda self: sftp_slot())

    today = BusinessDateParameter(
        default=None, flag="--today", description="Run as of this date (default: the business day in progress)"
    )

    def as_of(self) -> dt.date:
        return self.today

    def requires(self):
        today = self.as_of()
        back = {
            "restated": max(today - dt.timedelta(days=settings.ads().restatement_days), settings.daybreak().start_date),
            "yesterday": today - dt.timedelta(days=1),
        }
        for spec in sorted((d for d in catalogue.DATASETS if d.refresh), key=lambda d: d.refresh != "restated"):
            yield RangeDaily(
                of=spec.task, start=first_read(spec.task, back[spec.refresh]), stop=today, now=_epoch(today)
            )


def first_read(cls: type, day: dt.date) -> dt.date:
    """The first date that partition ``day`` of ``cls`` reads of its upstream (``day`` itself when none):
    where a look-back's refresh starts, so every window over a rebuilt date is rebuilt too."""
    return min([day, *(up.date for up in cls(date=day).upstream())])


def left_out(
    family: str, of: type, start: dt.date, stop: dt.date, now: int | None = None, days_back: int | None = None
) -> tuple[list[dt.date], str]:
    """The dates of ``[start, stop)`` a range run of ``family`` leaves out, and why: business days not over,
    and for a RangeDaily, dates not before its ``now``, nor more than its ``days_back`` before it."""
    later = [d for d in date_range(start, stop) if settings.not_over(d)]
    reasons = [settings.not_over(later[0])] if later else []
    if family == "RangeSingleRun":
        return later, "; ".join(reasons)
    with warnings.catch_warnings(), range_made_here():  # Luigi's 'Parameter "param_name" with value "None"'
        warnings.simplefilter("ignore", UserWarning)
        back = {} if days_back is None else {"days_back": days_back}
        task = RangeDaily(of=of, start=start, stop=stop, now=now, **back)
    moment = dt.datetime.fromtimestamp(time.time() if now is None else now, tz=dt.UTC).replace(tzinfo=None)
    limit, first = task.moving_stop(moment), task.moving_start(moment)
    unbegun = [d for d in date_range(start, later[0] if later else stop) if task.parameter_to_datetime(d) >= limit]
    behind = [d for d in date_range(start, stop) if task.parameter_to_datetime(d) < first and d not in unbegun]
    if unbegun:
        reasons.insert(
            0,
            f"RangeDaily builds only dates that have begun (before {limit:%Y-%m-%d %H:%M} UTC, [RangeDaily] "
            f"days_forward {task.days_forward}); their raw data cannot have arrived",
        )
    if behind:
        why = f"RangeDaily checks no date before {first:%Y-%m-%d %H:%M} UTC ([RangeDaily] days_back {task.days_back})"
        reasons.insert(0, why)
    return sorted(behind + unbegun + later), "; ".join(reasons)


def before_start(start: dt.date, stop: dt.date) -> tuple[list[dt.date], str]:
    """The dates of ``[start, stop)`` before ``[daybreak] start_date``, which every range leaves out, and why."""
    first = settings.daybreak().start_date
    return list(date_range(start, min(stop, first))), before_start_reason(first)


def report_left_out(
    family: str, of: type, start: dt.date, stop: dt.date, now: int | None = None, days_back: int | None = None
) -> None:
    """Log (warning) how many dates a range run leaves out and why; an empty range is a line of the summary."""
    if start == stop:
        runlog.note(f"nothing to do: the range {start} .. {stop} (stop exclusive) of {of.__name__} is empty")
    for dates, why in (before_start(start, stop), left_out(family, of, start, stop, now, days_back)):
        line = f"{family} {of.__name__}: {describe_left_out(dates, why, (stop - start).days)}"
        if dates and (luigi_run(), line) not in _said:  # once a run: AllHotelsPickup's ranges, one a hotel,
            _said.add((luigi_run(), line))  # leave out the same dates
            logger.warning(line)


def describe_left_out(dates: list[dt.date], why: str, total: int) -> str:
    return f"{len(dates)} of {total} dates left out ({names.dates_span(dates)}): {why}"


_said: set[tuple] = set()  # (run, range task id or line): what a run said of the dates it leaves out
RangeDailyBase.resources = property(lambda self: sftp_slot())  # Luigi's range wrappers, as Daybreak's
_luigis_missing = RangeDaily.missing_datetimes


def _missing_datetimes(self: RangeDaily, finite_datetimes: list[dt.datetime]) -> set[dt.datetime]:
    """Luigi's, of the dates whose business day is over; the others are counted ``not over yet``."""
    if not (isinstance(self.of, type) and issubclass(self.of, PartitionedTask)):
        return _luigis_missing(self, finite_datetimes)  # Luigi's own families (its tests)
    later = [d for d in finite_datetimes if settings.not_over(self.datetime_to_parameter(d))]
    runlog.not_over([self._instantiate_task_cls(self.datetime_to_parameter(d)) for d in later])
    missing = sorted(_luigis_missing(self, [d for d in finite_datetimes if d not in later]))
    required = set(missing[-self.task_limit :] if self.reverse else missing[: self.task_limit])  # as Luigi's
    left = [d for d in missing if d not in required]
    if left:  # Luigi requires task_limit of them only: the others are not run (exit 25), and said so
        tasks = [self._instantiate_task_cls(self.datetime_to_parameter(d)) for d in left]
        LEFT_BY_THE_LIMIT.update((t.task_id, (t, self.task_limit, worker_id())) for t in tasks)
        logger.warning(
            f"RangeDaily {self.of.__name__}: [RangeDaily] task_limit {self.task_limit} leaves {len(left)} of its "
            f"{len(missing)} dates to build for the next run ({names.dates_span([t.date for t in tasks])})"
        )
    return set(missing)


RangeDaily.missing_datetimes = _missing_datetimes


@RangeDailyBase.event_handler(luigi.Event.DEPENDENCY_PRESENT)
@RangeDailyBase.event_handler(luigi.Event.DEPENDENCY_DISCOVERED)
def _report_range(task: luigi.Task, *_) -> None:
    """Once per RangeDaily, when Luigi has worked out its dates: the dates it left out, and why."""
    if (luigi_run(), task.task_id) in _said or not isinstance(task.of, type) or task.start is None or task.stop is None:
        return
    _said.add((luigi_run(), task.task_id))
    report_left_out("RangeDaily", task.of, task.start, task.stop, task.now, task.days_back)
    if issubclass(task.of, PartitionedTask):  # the summary counts them all, those Luigi drops itself (not begun) too
        later = [d for d in date_range(task.start, task.stop) if settings.not_over(d)]
        runlog.not_over([task._instantiate_task_cls(d) for d in later])


def _epoch(day: dt.date) -> int:
    """RangeDaily's ``now``: the start of ``day`` in UTC, so that its range ends at ``day``."""
    return int(dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC).timestamp())


class RangeSingleRun(luigi.WrapperTask):
    """Every stale or missing date of ``[start, stop)`` of one dataset, built by one Luigi task
    (docs/backfills.md, "One run per date or one run per range")."""

    resources = property(lambda self: sftp_slot())

    of = luigi.TaskParameter(description="The partitioned task family, e.g. StgQsrPos")
    of_params = luigi.DictParameter(default={}, description='Its other parameters, e.g. {"hotel": "H1"}')
    start = luigi.DateParameter(description="First business date, inclusive")
    stop = luigi.DateParameter(description="Last business date, exclusive")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        check_range(self.start, self.stop, type(self).__name__)  # exit 2, as RangeDaily's reversed range
        check_of(type(self).__name__, self.of, self.of_params, self.start, self.stop)

    def single_run_build(self) -> SingleRunBuild:
        return SingleRunBuild(of=self.of, of_params=self.of_params, start=self.start, stop=self.stop)

    def _report(self) -> None:
        """Once: the dates it leaves out, and why."""
        if (luigi_run(), self.task_id) not in _said:
            _said.add((luigi_run(), self.task_id))
            report_left_out("RangeSingleRun", self.of, self.start, self.stop)

    def requires(self) -> list[luigi.Task]:
        build = self.single_run_build()
        self._report()
        if runlog.store_went_away():  # Luigi's summary asks again: the run's records answer, not the store
            return [build]
        engine = luigi_engine()
        with settings.snapshot():
            parts = build.partitions()
            engine.check_many(parts)
            missing = sorted({f for t in parts if not up_to_date(t, engine) for f in engine.blocked(t).missing})
        return [build, *(RawFolder(source=source, date=date) for source, date in missing)]

    def complete(self) -> bool:
        if runlog.store_went_away():  # the summary is made from what the run recorded: the store is not asked
            return False
        self._report()
        engine = luigi_engine()
        with settings.snapshot():
            parts, builds = self.single_run_build().partitions(), self.single_run_build().upstream_builds()
            ups = []
            while builds:  # built in the same task, maybe in a worker process: counted here
                ups += builds[0].partitions()
                builds = builds[1:] + builds[0].upstream_builds()
            engine.check_many([*parts, *ups])
            states = [(t, up_to_date(t, engine)) for t in parts]
            upstream = [(t, up_to_date(t, engine)) for t in ups]
        runlog.watch(states + upstream)  # the summary counts them even when nothing runs
        return all(ok for _, ok in states)


class SingleRunBuild(luigi.Task):
    """The one task of a :class:`RangeSingleRun`: builds every date of the range stale or missing and not
    waiting for raw data."""

    of = luigi.TaskParameter()
    of_params = luigi.DictParameter(default={})
    start = luigi.DateParameter()
    stop = luigi.DateParameter()
    failures_summarised = True  # each failed date has its failure record, which the run's summary reports

    resources = property(lambda self: sftp_slot())

    def partitions(self) -> list[PartitionedTask]:
        """The range's partitions whose business day is over, in date order; for a chain (a date reads the
        day before) from the chain's first link, so one build covers it."""
        if not (isinstance(self.of, type) and issubclass(self.of, PartitionedTask)):
            raise TypeError(f"a single-run range builds a PartitionedTask family, not {self.of!r}")
        start = max(self.start, settings.daybreak().start_date)
        while earlier := [u.date for u in self.of(date=start, **self.of_params).upstream() if self._same(u, start)]:
            start = min(earlier)
        return [self.of(date=d, **self.of_params) for d in date_range(start, self.stop) if not settings.not_over(d)]

    def _same(self, up: PartitionedTask, before: dt.date) -> bool:
        """Whether ``up`` is a partition of this very dataset, dated before ``before``."""
        return type(up) is self.of and up.date < before and up.param_kwargs == {**self.of_params, "date": up.date}

    def todo(self, cache: Engine, watch: bool = False) -> list[PartitionedTask]:
        """The dates to build: not ok, not waiting for raw data; ``watch``: each answer goes to the summary."""
        with settings.snapshot():
            parts = self.partitions()
            cache.check_many(parts)
            states = [(t, cache.state(t).ok) for t in parts]
            if watch:
                runlog.watch(states)
            return [t for t, ok in states if not ok and not cache.blocked(t).missing]

    def upstream_builds(self) -> list[SingleRunBuild]:
        """One single-run build per upstream family (and static parameters), over the dates read."""
        groups: dict[tuple, list[dt.date]] = {}
        for task in self.partitions():
            for up in task.upstream():
                if self._same(up, task.date):
                    continue  # the chain's earlier links are in this build's own range, built first
                static = tuple(sorted((k, v) for k, v in up.param_kwargs.items() if k != "date"))
                groups.setdefault((type(up), static), []).append(up.date)
        return [
            SingleRunBuild(of=cls, of_params=dict(static), start=min(dates), stop=max(dates) + dt.timedelta(days=1))
            for (cls, static), dates in groups.items()
        ]

    def complete(self) -> bool:
        if runlog.store_went_away():  # as RangeSingleRun's
            return False
        todo = self.todo(luigi_engine(), watch=True)
        if todo:
            self.of.prepare_to_run()
        return not todo

    def run(self) -> None:
        """The upstream ranges first (a date that fails holds only the dates that read it), then this range."""
        failed: list[tuple[PartitionedTask, str]] = []
        tried = self.build(failed, set(), self)
        if failed:
            listed = "; ".join(f"{names.label(t)}: {err}" for t, err in sorted(failed, key=lambda f: f[0].task_id)[:5])
            raise RuntimeError(
                f"{len(failed)} of {tried} dates failed ({listed}{' ...' if len(failed) > 5 else ''}); the others are "
                "written and kept, but for the dates that read a failed one. See daybreak status."
            )

    def build(self, failed: list[tuple[PartitionedTask, str]], held: set[str], running: luigi.Task) -> int:
        """Build the upstream ranges, then each date that reads no failed or ``held`` partition (``failed``
        collects errors); return how many dates were tried."""
        tried = sum(up.build(failed, held, running) for up in self.upstream_builds() if not up.complete())
        held.update(t.task_id for t, _ in failed)
        todo = []
        for task in self.todo(luigi_engine()):
            if task.task_id in held:  # failed in another range's build of this run (two upstream ranges share one)
                continue
            if any(u.task_id in held for u in task.upstream()):
                held.add(task.task_id)
            else:
                todo.append(task)
        meter = progress.Progress(len(todo))
        processes = self.processes(todo)
        for task, error in built_in_parallel(todo, processes) if processes > 1 else built_in_order(todo):
            if error is not None:
                failed.append((task, error))
            meter.step(names.label(task), failed=error is not None)
            running.set_progress_percentage(round(100 * meter.done / len(todo)))
            running.set_status_message(f"{meter.done}/{len(todo)} dates of {self.of.__name__}, {len(failed)} failed")
        return tried + len(todo)

    def processes(self, todo: list[PartitionedTask]) -> int:
        """How many processes build the range: one per core locally; one over SFTP and for a chain."""
        if one_session(settings.raw_root()) or any(self._same(u, t.date) for t in todo for u in t.upstream()):
            return 1
        return max(1, min(len(os.sched_getaffinity(0)), len(todo) // 2))


def built_in_order(todo: list[PartitionedTask], shared: Iterable = ()) -> Iterator[tuple[PartitionedTask, str | None]]:
    """Build ``todo`` in order, a raw folder parsed once for consecutive dates (``shared``: those another
    process reads too); yield each task with None or the first line of its error."""
    try:
        with keeping_for_next_date(shared):
            if todo:  # each date's state and raw folders known at once: the next date's inputs fetched ahead
                engine = luigi_engine()
                engine.check_many(todo)
                for task in todo:
                    engine.state(task)
            for task in todo:
                error = None
                try:
                    task.run_partition()
                except Exception as exc:  # one bad date must not lose the others: record it, go on
                    progress.logger.exception(runlog.SINGLE_RUN_FAILED, task.task_id)
                    task.on_failure(exc)
                    runlog.failed(task, exc)
                    error = (str(exc) or type(exc).__name__).splitlines()[0]
                yield task, error
    finally:
        if todo:  # the one raw-zone session of the whole range (SFTP: one connection)
            todo[0].zone().close()


def built_in_parallel(todo: list[PartitionedTask], processes: int) -> Iterator[tuple[PartitionedTask, str | None]]:
    """``built_in_order`` of ``processes`` contiguous stretches of ``todo``, each in a forked process."""
    context = multiprocessing.get_context("fork")

    def build(stretch: list[PartitionedTask], pipe, inherited: list, shared: set) -> None:
        for end in inherited:  # the parent's ends and the other children's: once the parent is gone, a send fails
            if end is not pipe:
                end.close()
        cores.share(processes)  # the cores are this run's processes': a build in each on one thread (2 cores)
        try:
            for task, error in built_in_order(stretch, shared):
                pipe.send((task.task_id, error))
        except (KeyboardInterrupt, BrokenPipeError):  # Ctrl-C, said once by the parent; or the parent was killed
            pass

    by_id = {t.task_id: t for t in todo}
    bounds = [len(todo) * i // processes for i in range(processes + 1)]
    pipes = [context.Pipe(duplex=False) for _ in range(processes)]
    readers = [reader for reader, _ in pipes]
    stretches = [todo[a:b] for a, b in itertools.pairwise(bounds)]
    folders = [{f for t in stretch for f in raw_folders(t)} for stretch in stretches]
    workers = []
    for i, (stretch, (_, writer)) in enumerate(zip(stretches, pipes, strict=True)):
        ends = [end for pair in pipes for end in pair if not end.closed]
        shared = folders[i] & set().union(*(f for j, f in enumerate(folders) if j != i))  # a stretch's edges
        workers.append(context.Process(target=build, args=(stretch, writer, ends, shared), daemon=True))
        workers[-1].start()
        writer.close()  # the child holds the only writer: its exit ends the reader with EOFError
    try:
        while readers:
            for reader in multiprocessing.connection.wait(readers):
                try:
                    task_id, error = reader.recv()
                except EOFError:
                    readers.remove(reader)
                    continue
                yield by_id.pop(task_id), error
        for w in workers:
            w.join()
        owner = {t.task_id: w for w, stretch in zip(workers, stretches, strict=True) for t in stretch}
        for task in by_id.values():  # killed, out of memory: never reported, so recorded here
            error = RuntimeError(process_died(owner[task.task_id].exitcode))
            task.on_failure(error)
            runlog.failed(task, error)
            yield task, str(error)
    finally:
        for w in workers:
            if w.is_alive():
                w.terminate()
            w.join()
