"""The Luigi side of a partition: parameters, requirements, the run template and failure records.
``complete()`` and ``bulk_complete()`` ask the freshness engine, as status, plan and single runs do."""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import logging
import multiprocessing
import signal
from collections.abc import Iterable
from typing import ClassVar

import luigi

from tasks import building, catalogue, settings
from tasks.building import Built
from tasks.faults import fault_line, went_away
from tasks.freshness import identity
from tasks.freshness.buildplan import NotReplaced, left_to_newer
from tasks.freshness.engine import Engine, State, label
from tasks.freshness.keys import up_to_date
from tasks.freshness.rules import fingerprint
from tasks.luigi_shortcuts import CachedInstances, FixedParams, summarising_now
from tasks.luigi_shortcuts.messages import DIED, unfulfilled
from tasks.parameters import DateParameter
from tasks.reporting import names, progress, runlog
from tasks.storage import partitions
from tasks.storage.partitions import PartitionStore
from tasks.storage.rawzone import RawFile, RawZone, RawZoneUnavailable, one_session
from tasks.targets import PartitionTarget, RawFolder, luigi_engine

logger = logging.getLogger("luigi-interface")


def sftp_slot() -> dict[str, int]:
    """A task's ``resources``: one ``sftp`` slot over an SFTP raw zone, for every task (its completeness
    check lists raw folders on a session of its own)."""
    return {"sftp": 1} if one_session(settings.raw_root()) else {}


@luigi.Task.event_handler(luigi.Event.SUCCESS)
@luigi.Task.event_handler(luigi.Event.FAILURE)
def _hand_back_session(*_) -> None:
    """A worker process hands back its SFTP session before Luigi frees the task's slot."""
    if multiprocessing.parent_process() is not None and one_session(settings.raw_root()):
        RawZone.from_uri(settings.raw_root()).close()


class MaterializedTask(FixedParams, luigi.Task, metaclass=CachedInstances):
    """A task whose output is one folder of Parquet + manifest, complete only while fresh."""

    entry: ClassVar[catalogue.Dataset | None] = None
    dataset: ClassVar[str] = ""  # the entry's path
    version: ClassVar[str] = ""  # the entry's transform version, part of every rules fingerprint
    reuses_task_process: ClassVar[bool] = True  # with --workers 2+, one worker process runs many tasks

    def __init_subclass__(cls, entry: catalogue.Dataset | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if entry is not None:
            cls.entry, cls.dataset, cls.version = entry, entry.path, entry.version
            entry.bind(cls)

    @property
    def key(self) -> dt.date | None:
        """The partition's business date; None for an unpartitioned dataset."""
        raise NotImplementedError

    # -- to define in subclasses -------------------------------------------------------------------
    def rules(self) -> dict:
        """Transform version and every setting that changes the output; by default the version alone."""
        return {"version": self.version}

    def build(self, inputs: list[RawFile]) -> Built:
        raise NotImplementedError

    def accepts_input(self, name: str) -> bool:
        """Whether a file of the window may be read, by its name; refused ones are reported."""
        return True

    input_names: ClassVar[str] = ""  # the names accepts_input takes, for the reason a file is refused

    def fails_on_listing(self) -> str:
        """Why a build would fail, as the listing of its raw folders already tells ('': it would not)."""
        return ""

    def max_reject_share(self) -> float | None:
        """Fail the partition when rejected rows exceed this share of ``stats["attributed_rows"]``; None: never."""
        return None

    def acceptance_settings(self) -> dict:
        """Settings that decide whether a build fails without changing its output (so not in :meth:`rules`)."""
        return {"max_reject_share": self.max_reject_share()}

    def upstream_version(self, manifest: dict | None) -> str | None:
        """What of an upstream partition this one depends on: its data version, or a slice's (one hotel)."""
        return (manifest or {}).get("data_version")

    def input_slice(self, relpath: str) -> str | None:
        """The key (a store, a hotel) whose rows alone a raw file of the window holds; None: any key's."""
        return None

    # upstream_version is one key's slice of each upstream: a plan says it "may go stale downstream"
    reads_a_slice: ClassVar[bool] = False

    def provisional(self, cache: Engine) -> bool:
        """An up-to-date partition that later data is still expected to change (ads before export d+7)."""
        return False

    def rules_fingerprint(self) -> str:
        return fingerprint(self.rules())

    def rules_key(self) -> tuple:
        """Partitions of one family and the same static parameters share their rules."""
        return (self.task_family, *sorted((k, str(v)) for k, v in self.param_kwargs.items() if k != "date"))

    # -- wiring ------------------------------------------------------------------------------------
    def dataset_path(self) -> str:
        """Folder of the dataset under the data root, with any static partition key."""
        return self.dataset

    def store(self) -> PartitionStore:
        return partitions.open_store(settings.data_uri(), self.dataset_path())

    def zone(self) -> RawZone:
        return RawZone.from_uri(settings.raw_root())

    def output(self) -> PartitionTarget:
        return PartitionTarget(self.store(), self.key)

    def raw_window(self) -> list[tuple[str, dt.date]]:
        """(source, export date) of every raw folder the partition needs and reads."""
        return []

    def any_raw_window(self) -> list[tuple[str, dt.date]]:
        """Raw folders of which at least one must exist, each present one read (ad exports ``d+1 .. d+7``)."""
        return []

    def reads_raw(self) -> bool:
        return bool(self.raw_window() or self.any_raw_window() or self.optional_raw_window())

    resources = property(lambda self: sftp_slot())

    def raw_folders(self) -> list[RawFolder]:
        """The window as Luigi requirements: each required folder, and of ``any_raw_window`` the newest
        present (or the first, for Luigi to report missing)."""
        folders = list(self.raw_window())
        if any_of := self.any_raw_window():
            try:
                folders += luigi_engine().present(self, any_of)[-1:] or any_of[:1]
            except Exception as exc:  # the raw zone gone as the summary walks the requirements: it names that
                if not summarising_now() or fault_line(exc) is None:
                    raise
                folders += any_of[:1]
        return [RawFolder(source=source, date=date) for source, date in folders]

    def upstream(self) -> list[PartitionedTask]:
        return []

    def requires(self) -> list[luigi.Task]:
        """The raw folders and the upstream partitions, but those built by newer code or settings: no run here
        replaces them, so they are read as they are, as status and plan judge a reader of one."""
        with settings.snapshot():  # each settings section read once, not once per link
            if summarising_now():  # what the run required, not asked of the engine again
                return [*self.raw_folders(), *self.upstream()]
            return [*self.raw_folders(), *(up for up in self.upstream() if not up.kept_as_newer())]

    def optional_raw_window(self) -> list[tuple[str, dt.date]]:
        """Raw folders read when present: their arrival makes the partition stale, their absence blocks nothing."""
        return []

    # -- completeness ------------------------------------------------------------------------------
    def before_start(self) -> str:
        """Why the partition is out of range, never built or rebuilt (one there is kept); '' when in range."""
        return ""

    # why this host leaves the partition to another, as its last completeness check found (:meth:`leave_to_newer`)
    declined: str = ""

    def complete(self) -> bool:
        engine, self.declined = luigi_engine(), ""  # not kept from an earlier check, should this one raise
        with settings.snapshot():
            done = bool(self.before_start()) or up_to_date(self, engine)
            self.declined = "" if done else self.leave_to_newer(engine)
        runlog.watch([(self, done)])
        if not done and not self.declined:
            type(self).prepare_to_run()
            progress.expect([self.task_id])
        return done

    def leave_to_newer(self, engine: Engine) -> str:
        """Why this host must not build the partition: newer code or newer settings built the one in place
        (docs/scale-out.md); Luigi then adds it as external data, for luigid to hand to another host."""
        return left_to_newer(self, engine, engine.summary(engine.store(self), self.key), label(self))

    def kept_as_newer(self) -> bool:
        """Whether newer code or newer settings built the partition, which a run here never replaces."""
        with settings.snapshot():
            return self.state(luigi_engine()).state == "newer"

    _prepared: ClassVar[bool] = False

    @classmethod
    def prepare_to_run(cls) -> None:
        """Load lazy imports in the scheduling process before Luigi forks, once something of this class runs."""
        if not cls._prepared:
            cls._prepared = True
            partitions.warm_up()
            cls.warm_up()
            # never collected: a forked task's collections then do not touch (and copy) the shared pages
            gc.freeze()

    @classmethod
    def warm_up(cls) -> None:
        pass

    def state(self, cache: Engine) -> State:
        return cache.state(self)

    # -- the run template --------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self.run_partition()
        finally:
            # the scheduling process keeps its session for the whole run (one login, not one a date)
            if multiprocessing.parent_process() is not None:
                self.zone().close()

    def run_partition(self) -> None:
        """``run()`` without handing back the raw-zone session (a single-run range keeps one connection)."""
        with settings.snapshot():
            luigi_engine().list_early(self)  # a bucket's raw folders listed while the lease is taken
            # a second run building this partition waits, then finds it done
            with self.store().locked(self.key, settings.daybreak().lock_wait_s):
                if self.before_start():  # reached only by a direct call of the template
                    logger.warning("%s: %s; nothing written", names.label(self), self.before_start())
                    return
                building.build(self, luigi_engine())

    def on_failure(self, exception: BaseException) -> str:
        if getattr(exception, "superseded", False):  # another writer committed it: not a failure
            logger.warning("%s", exception)
            return str(exception)
        if went_away(exception) or unfulfilled(str(exception)):  # named once by the run's summary; no record:
            return super().on_failure(exception)  # nothing of it failed; status shows what it is (missing, stale)
        record = {"failed_at": dt.datetime.now(dt.UTC).isoformat(), "error": str(exception), "task_id": self.task_id}
        record["host"] = settings.host_name()  # another host's summary names it: its settings may not be these
        try:  # what the attempt was made of: the record stops applying once any of it differs
            with settings.snapshot():
                record.update(identity.attempt(luigi_engine(), self, getattr(exception, "decided_by", None)))
        except Exception as exc:  # noqa: BLE001 - the failure record must never hide the real error
            if not isinstance(exc, RawZoneUnavailable):  # the error itself says the raw zone is gone
                logger.warning("could not record the identity of the failed %s: %r", self.task_id, exc)
        try:
            self.store().record_failure(self.key, record)
        except (OSError, RuntimeError) as exc:  # the failure record must never hide the real error
            first = (str(exception) or type(exception).__name__).splitlines()[0]
            level = logging.INFO if went_away(exc) else logging.WARNING
            logger.log(level, "%s failed: %s (could not record the failure: %s)", self.task_id, first, exc)
        return super().on_failure(exception)


@MaterializedTask.event_handler(luigi.Event.START)
def _progress_start(task: MaterializedTask) -> None:
    task.declined = ""  # handed to this host, which builds it (Luigi asks _is_external again after START)
    progress.started(task.task_id)


@MaterializedTask.event_handler(luigi.Event.SUCCESS)
def _progress_success(task: MaterializedTask) -> None:
    progress.finished(task.task_id, names.label(task))


@MaterializedTask.event_handler(luigi.Event.DEPENDENCY_MISSING)
def _declined(task: MaterializedTask) -> None:
    """A partition this host leaves to another: said once a run (Luigi adds a range again whose requirements
    luigid counted done for its cooldown), and counted superseded (exit 10)."""
    if task.declined and not runlog.superseded_in_run(task.task_id):
        logger.warning("%s", task.declined)
        runlog.failed(task, NotReplaced(task.declined))


@MaterializedTask.event_handler(luigi.Event.FAILURE)
def _progress_failure(task: MaterializedTask, exception: BaseException) -> None:
    runlog.failed(task, exception)
    progress.finished(task.task_id, names.label(task), failed=not getattr(exception, "superseded", False))


def _died(message: str) -> str:
    """:func:`process_died` of the code in Luigi's ``Task <id> died unexpectedly with exit code -9``."""
    return process_died(message.rpartition(DIED)[2].strip())


def process_died(code: int | str | None) -> str:
    """``its worker process died (killed by signal 9, SIGKILL: out of memory, or killed)`` for exit ``code``."""
    code = str(code)
    if not (code.startswith("-") and code[1:].isdigit()):
        return f"its worker process died (exit code {code})"
    number = int(code[1:])
    with contextlib.suppress(ValueError):  # a real-time signal has no name
        code = f"{number}, {signal.Signals(number).name}"
    oom = ": out of memory, or killed" if number == signal.SIGKILL else ""
    return f"its worker process died (killed by signal {code.lstrip('-')}{oom})"


@MaterializedTask.event_handler(luigi.Event.PROCESS_FAILURE)
def _process_died(task: MaterializedTask, message: str) -> None:
    """The worker process died (OOM killer, kill -9): recorded as a failure of the partition."""
    exception = RuntimeError(_died(message))
    task.on_failure(exception)  # its failure record: daybreak status says it too
    _progress_failure(task, exception)


class PartitionedTask(MaterializedTask):
    """One folder per business date: subclasses define ``raw_window()`` and/or ``upstream()``, ``rules()``
    and ``build()``; ``requires()`` is derived from them."""

    date = DateParameter(description="Business date of the partition")

    @property
    def key(self) -> dt.date:
        return self.date

    def before_start(self) -> str:
        """A date before ``[daybreak] start_date`` is out of range: never built, one there kept as built."""
        start = settings.daybreak().start_date
        return before_start_reason(start) if self.date < start else ""

    @classmethod
    def bulk_complete(cls, parameter_tuples: Iterable) -> list[dt.date]:
        """The dates of ``parameter_tuples`` (a one-pass iterator) that are complete, as ``complete()`` says."""
        engine = luigi_engine()
        done, incomplete = [], []
        with settings.snapshot():
            tasks = [cls(date=value) for value in parameter_tuples]
            engine.check_many([t for t in tasks if not t.before_start()])
            for task in tasks:
                if task.before_start():  # left out, as RangeDaily leaves out dates not begun
                    done.append(task)
                    continue
                if not engine.listed:
                    engine.list_dataset(engine.store(task))
                if up_to_date(task, engine):
                    done.append(task)
                else:
                    incomplete.append(task)
                    task.declined = task.leave_to_newer(engine)
        engine.just_found.update(t.task_id for t in incomplete)  # Luigi asks each again as it schedules it
        runlog.watch([(t, True) for t in done] + [(t, False) for t in incomplete])
        to_run = [t for t in incomplete if not t.declined]
        if to_run:
            type(to_run[0]).prepare_to_run()
            progress.expect(t.task_id for t in to_run)
        return [t.date for t in done]


BEFORE_START = "before [daybreak] start_date"


def before_start_reason(start: dt.date) -> str:
    return f"{BEFORE_START} {start}: kept as built, never rebuilt"


class SnapshotTask(MaterializedTask):
    """Base of an unpartitioned dataset: one folder, ``<data_root>/<dataset>/``, rebuilt whole."""

    @property
    def key(self) -> None:
        return None
