"""PartitionedTask: one business date, one hive folder, and a completeness check that sees staleness.

A partition is complete when, and only when (docs/run-semantics.md):
1. its folder holds the data file and a manifest that describes it (size and mtime);
2. the manifest's rules fingerprint equals the current one (transform version + settings);
3. the manifest's input fingerprint equals a fresh one over the raw files it reads (name, size, mtime);
4. every upstream partition is itself complete and still has the data version recorded at build time.

``complete()`` and ``bulk_complete()`` share one code path (:meth:`PartitionedTask.state`) with a
:class:`CheckCache`, so a range check lists each dataset folder and each raw folder once.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import time
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import luigi
from luigi.task_register import Register

import tasks
from tasks import partitions, progress, settings
from tasks.partitions import PartitionStore
from tasks.rawzone import RawFile, RawFolderTarget, RawZone

if TYPE_CHECKING:
    import pyarrow as pa

logger = logging.getLogger("luigi-interface")


class RawFolder(luigi.ExternalTask):
    """One export folder of the raw zone (``<raw_root>/<source>/<date>/``), written by a source system."""

    source = luigi.Parameter(description="Raw source folder name, e.g. qsr_pos")
    date = luigi.DateParameter(description="Export date of the folder (the day the source wrote it)")

    def output(self):
        return RawFolderTarget(RawZone.from_uri(settings.raw_root()), self.source, self.date)


class PartitionTarget(luigi.Target):
    """The hive folder of one partition; ``exists()`` means a manifest is there (not that it is fresh)."""

    def __init__(self, store: PartitionStore, date: dt.date):
        self.store, self.date = store, date
        self.path = store.path(date)

    def exists(self) -> bool:
        return (self.path / "_manifest.json").is_file()


class RawInputChanged(RuntimeError):
    """A raw file of the window changed between the listing and the end of the read."""


class RejectShareExceeded(RuntimeError):
    """Too many rows of a partition failed the type rules: the partition fails, the old one is kept."""


@dataclass(frozen=True)
class PartitionState:
    state: str  # ok | stale | missing
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.state == "ok"


@dataclass
class CheckCache:
    """Memo for one completeness pass: each raw folder and dataset folder is listed at most once."""

    raw: dict = field(default_factory=dict)
    listed: dict = field(default_factory=dict)
    manifests: dict = field(default_factory=dict)
    states: dict = field(default_factory=dict)
    memo: dict = field(default_factory=dict)

    def once(self, key, compute, *args):
        """``compute(*args)`` the first time ``key`` is asked for in this pass, the remembered value after."""
        if key not in self.memo:
            self.memo[key] = compute(*args)
        return self.memo[key]

    def zone(self) -> RawZone:
        return self.once("zone", lambda: RawZone.from_uri(settings.raw_root()))

    def raw_folder(self, zone: RawZone, source: str, date: dt.date):
        """``zone.scan_folder_all`` of one folder (files read, entries refused), scanned once per pass
        even when two partitions read it; None when the folder does not exist."""
        key = (zone.describe(), source, date)
        if key not in self.raw:
            self.raw[key] = zone.scan_folder_all(source, date)
        return self.raw[key]

    def list_dataset(self, store: PartitionStore) -> None:
        if store.root not in self.listed:
            self.listed[store.root] = store.listed_dates()

    def manifest(self, store: PartitionStore, date: dt.date | None) -> dict | None:
        key = (store.root, store.sub, date)  # unique per partition, hotel sub-partitions included
        if key not in self.manifests:
            listed = self.listed.get(store.root) if date is not None else None
            self.manifests[key] = None if listed is not None and date not in listed else store.read_manifest(date)
        return self.manifests[key]


class Reuse:
    """What one date of a single-run range read and parsed, offered to the next date.

    Consecutive dates share raw folders (StgQsrPos reads folders d and d+1, so d+1 is read again for
    date d+1). Inside :func:`reusing`, :func:`reuse` keeps each value for the date that computed it
    and the next one, keyed by what it was computed from (file names, sizes and mtimes): two
    generations, so memory holds at most two dates' worth. Outside it, :func:`reuse` just computes.
    """

    def __init__(self):
        self.previous: dict = {}
        self.current: dict = {}

    def next_date(self) -> None:
        self.previous, self.current = self.current, {}


_reuse: Reuse | None = None


def reuse(key, compute):
    """``compute()``, or its value from the previous date of a single-run range (same key)."""
    if _reuse is None:
        return compute()
    if key not in _reuse.current:
        _reuse.current[key] = _reuse.previous.pop(key) if key in _reuse.previous else compute()
    return _reuse.current[key]


class reusing:
    """Context manager for a single-run range: :func:`reuse` remembers across consecutive dates."""

    def __enter__(self) -> Reuse:
        global _reuse
        _reuse = Reuse()
        return _reuse

    def __exit__(self, *exc) -> None:
        global _reuse
        _reuse = None


@dataclass(frozen=True)
class Built:
    """What a task's build step hands back to the run() template."""

    table: pa.Table
    rejected: pa.Table | None = None
    stats: dict = field(default_factory=dict)
    extras: dict = field(default_factory=dict)  # file name -> bytes, written beside the data file


def fingerprint(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:32]


def input_line(f: RawFile) -> str:
    """How a manifest lists one input: ``"<path> <size> <mtime_ns>"`` (fast to load for a thousand manifests)."""
    return f"{f.relpath} {f.size} {f.mtime_ns}"


@dataclass(frozen=True)
class FolderInputs:
    """One raw folder as a partition sees it: the entries it reads, the names it refuses, a digest."""

    relpath: str  # <source>/<date>
    read: list[tuple[str, int, int]]  # (name, size, mtime_ns)
    refused: list[tuple[str, str]]  # (name, reason): never read
    digest: str  # over the read entries' names, sizes and mtimes


@dataclass(frozen=True)
class Window:
    """The raw files a partition reads (and refuses) now, and the input fingerprint over them."""

    folders: list[FolderInputs]

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256("\n".join(f.digest for f in self.folders).encode()).hexdigest()[:32]

    @property
    def read(self) -> list[RawFile]:
        return [RawFile(f"{f.relpath}/{n}", size, mtime) for f in self.folders for n, size, mtime in f.read]

    @property
    def refused(self) -> list[dict[str, str]]:
        """Every file of the window that is not read, and why (the manifest's ``refused_inputs``)."""
        return [{"path": f"{f.relpath}/{name}", "reason": why} for f in self.folders for name, why in f.refused]


class _Instances(Register):
    """Luigi's task metaclass, with a faster path to the instance it already caches.

    A status view or a range check instantiates each partition task many times (a look-back's seven
    upstream days, a pickup's whole history); Luigi resolves every parameter against the config on
    each call (about 40 us) only to return its cached instance. Partition tasks take explicit
    parameters only (date, hotel, ...), so the same keyword arguments give the same task: this maps
    them straight to it. Positional arguments and unhashable values take Luigi's path."""

    _cache: ClassVar[dict] = {}

    def __call__(cls, *args, **kwargs):
        if args:
            return super().__call__(*args, **kwargs)
        try:
            key = (cls, *sorted(kwargs.items()))
            return _Instances._cache[key]
        except KeyError:
            task = _Instances._cache[key] = super().__call__(**kwargs)
            return task
        except TypeError:  # an unhashable or unorderable value
            return super().__call__(**kwargs)


class MaterializedTask(luigi.Task, metaclass=_Instances):
    """A task whose output is one folder of Parquet + manifest, complete only while fresh (see module doc).

    Subclasses: :class:`PartitionedTask` (one folder per business date) and :class:`SnapshotTask`
    (one unpartitioned folder)."""

    dataset: ClassVar[str] = ""

    @classmethod
    def get_params(cls) -> list:
        """Luigi's list of (name, Parameter), which it rebuilds with ``dir(cls)`` for every instance;
        a class's parameters are fixed once it is defined, so each class keeps its list."""
        if "_params" not in cls.__dict__:
            cls._params = super().get_params()
        return cls._params

    @classmethod
    def get_param_values(cls, params, args, kwargs) -> list:
        """Luigi's, without its config lookups when every parameter is given by keyword (the way
        Daybreak builds partition tasks): given values win over config defaults anyway. The config
        is still read, through Luigi's own path, for anything else."""
        if not args and len(kwargs) == len(params) and all(name in kwargs for name, _ in params):
            values = [(name, param.normalize(kwargs[name])) for name, param in params]
            return [(name, tuple(v) if isinstance(v, list | set) else v) for name, v in values]
        return super().get_param_values(params, args, kwargs)

    @property
    def key(self) -> dt.date | None:
        """The partition's business date; None for an unpartitioned dataset."""
        raise NotImplementedError

    # -- to define in subclasses -------------------------------------------------------------------
    def rules(self) -> dict:
        """Transform version and every setting that changes the output."""
        raise NotImplementedError

    def build(self, inputs: list[RawFile]) -> Built:
        raise NotImplementedError

    def accepts_input(self, name: str) -> bool:
        """Whether a file of the window (by name) may be read; refused ones are reported. Default: all."""
        return True

    input_names: ClassVar[str] = ""  # the names accepts_input takes, for the reason a file is refused

    def max_reject_share(self) -> float | None:
        """Fail the partition when rejected rows exceed this share of ``stats["attributed_rows"]``
        (the previous partition and its quarantine are kept; the rejected rows of the failed build are
        kept beside its failure record). None: never."""
        return None

    def check_built(self, built: Built) -> None:
        limit = self.max_reject_share()
        rejected = 0 if built.rejected is None else built.rejected.num_rows
        attributed = built.stats.get("attributed_rows")
        if limit is None or not attributed or rejected / attributed <= limit:
            return
        rows = built.rejected.slice(0, 5).to_pylist()
        examples = "; ".join(f"{r['source_file']} row {r['row_number']}: {r['reason']}" for r in rows)
        where = f"{self.dataset} {self.key}" if self.key else self.dataset
        raise RejectShareExceeded(
            f"{where}: {rejected} of {attributed} rows rejected ({rejected / attributed:.1%} > "
            f"max_reject_share {limit:.1%}), e.g. {examples}. All rejected rows: "
            f"{self.store().write_failed_rejects(self.key, built.rejected)}. The previous partition is kept."
        )

    def upstream_version(self, manifest: dict | None) -> str | None:
        """What of an upstream partition this one depends on, from its manifest: by default its whole
        data version; a task that reads a slice of it (one hotel) narrows this to that slice's version."""
        return (manifest or {}).get("data_version")

    def waiting_upstream(self, cache: CheckCache) -> MaterializedTask | None:
        """The first upstream partition that is not built and waits for raw data; None if none."""
        for up in self.upstream():
            if not up.state(cache).ok and waiting_for(up, cache):
                return up
        return None

    def provisional(self, cache: CheckCache) -> bool:
        """An up-to-date partition that later data is still expected to change (ads before export
        d+7). The status view shows it as provisional. Default: never."""
        return False

    def rules_fingerprint(self) -> str:
        return fingerprint(self.rules())

    # -- wiring ------------------------------------------------------------------------------------
    def dataset_path(self) -> str:
        """Folder of the dataset under the data root; a task with a static partition key (a hotel)
        puts it here (``exports/otb/hotel_id=H1``). Default: ``dataset``."""
        return self.dataset

    def store(self) -> PartitionStore:
        return PartitionStore(settings.data_root(), self.dataset_path())

    def zone(self) -> RawZone:
        return RawZone.from_uri(settings.raw_root())

    def output(self) -> PartitionTarget:
        return PartitionTarget(self.store(), self.key)

    def raw_window(self) -> list[tuple[str, dt.date]]:
        """(source, export date) of every raw folder the partition reads: its dependency window."""
        return []

    @property
    def resources(self) -> dict[str, int]:
        """One ``sftp`` resource while it reads an SFTP raw zone: ``[resources] sftp`` caps the
        concurrent SFTP sessions of all workers sharing a scheduler."""
        if settings.raw_root().startswith("sftp://") and (self.raw_window() or self.optional_raw_window()):
            return {"sftp": 1}
        return {}

    def raw_folders(self) -> list[RawFolder]:
        return [RawFolder(source=source, date=date) for source, date in self.raw_window()]

    def upstream(self) -> list[PartitionedTask]:
        """Upstream partitions this one reads (look-back and downstream tasks override it). Default: none."""
        return []

    def requires(self) -> list[luigi.Task]:
        """The dependency window's raw folders, then the upstream partitions."""
        return [*self.raw_folders(), *self.upstream()]

    def optional_raw_window(self) -> list[tuple[str, dt.date]]:
        """Raw folders read when present (not Luigi requirements): their arrival or change makes the
        partition stale, their absence does not block it (e.g. later ad exports). Default: none."""
        return []

    def input_files(self, cache: CheckCache) -> Window | None:
        """The raw files of the dependency window, read and refused; None while a required folder is missing."""
        zone, folders = cache.zone(), []
        optional = self.optional_raw_window()
        for source, date in [*self.raw_window(), *optional]:
            scanned = cache.raw_folder(zone, source, date)
            relpath = zone.folder_relpath(source, date)
            if scanned is None:
                if (source, date) not in optional:
                    return None
                folders.append(FolderInputs(relpath, [], [], "absent"))
                continue
            key = ("select", type(self), source, date)
            folders.append(cache.once(key, self._select, relpath, *scanned))
        return Window(folders)

    def _select(self, relpath: str, entries: list[tuple[str, int, int]], unread: list) -> FolderInputs:
        read, refused = [], [(name, reason) for name, reason in unread]
        for entry in entries:
            if self.accepts_input(entry[0]):
                read.append(entry)
            else:
                refused.append((entry[0], f"name is not {self.input_names or 'one this dataset reads'}"))
        refused.sort()
        return FolderInputs(relpath, read, refused, hashlib.sha256(repr(read).encode()).hexdigest())

    # -- completeness ------------------------------------------------------------------------------
    def complete(self) -> bool:
        with settings.snapshot():  # a check of a chain asks for start_date and data_root at every link
            done = self.state(CheckCache()).ok
        if not done:
            type(self).prepare_to_run()
            progress.expect([self.task_id])
        return done

    _prepared: ClassVar[bool] = False

    @classmethod
    def prepare_to_run(cls) -> None:
        """Called in the scheduling process once something of this class will run, before Luigi forks.

        Subclasses warm up what their transform loads lazily (kernels, timezone data), so that forked
        worker processes (``--workers`` > 1) do not each pay for it. A no-op run pays nothing.
        """
        if not cls._prepared:
            cls._prepared = True
            partitions.warm_up()
            cls.warm_up()

    @classmethod
    def warm_up(cls) -> None:
        """Load what the transform initialises lazily. Default: nothing."""

    def state(self, cache: CheckCache) -> PartitionState:
        """This partition's state (memoised in ``cache``).

        Rule 4 needs the state of each upstream partition, and a chain (hotel_booking_state: every date
        reads the day before) is as deep as the history, far deeper than Python's recursion limit after
        a few years. So the check runs as an explicit stack of :meth:`_state_steps` generators instead of
        recursing: a generator yields the upstream task whose state it needs next and is sent that state
        back. Same checks in the same order (an upstream is only looked at when the checks before it
        passed), so the answers and their cost are those of the recursive form."""
        states = cache.states
        if self.task_id in states:
            return states[self.task_id]
        stack = [(self, self._state_steps(cache))]
        answer: PartitionState | None = None
        while stack:
            task, steps = stack[-1]
            try:
                up = steps.send(answer)
            except StopIteration as done:
                states[task.task_id] = answer = done.value
                stack.pop()
                continue
            if up.task_id in states:
                answer = states[up.task_id]
            else:
                stack.append((up, up._state_steps(cache)))
                answer = None
        return states[self.task_id]

    def _state_steps(self, cache: CheckCache) -> Generator[MaterializedTask, PartitionState, PartitionState]:
        """The completeness rules as a generator: yields an upstream task to be sent its state, returns
        this partition's state."""
        store = cache.once(("store", self.dataset_path()), self.store)
        manifest = cache.manifest(store, self.key)
        if manifest is None:
            return PartitionState("missing", "no partition")
        if manifest.get("_corrupt") or not store.data_matches(self.key, manifest):
            return PartitionState("stale", "data file does not match its manifest (interrupted write?)")
        static = tuple(sorted((k, str(v)) for k, v in self.param_kwargs.items() if k != "date"))
        if manifest.get("rules_fingerprint") != cache.once(("rules", self.task_family, static), self.rules_fingerprint):
            return PartitionState("stale", "rules changed: " + _diff_rules(manifest.get("rules", {}), self.rules()))
        window = self.input_files(cache)
        if window is None:
            return PartitionState("stale", "a raw folder it read is gone")
        if manifest.get("input_fingerprint") != window.fingerprint:
            return PartitionState("stale", "input changed: " + _diff_inputs(manifest.get("inputs", []), window.read))
        recorded = manifest.get("upstream", {})
        for up in self.upstream():
            up_state = yield up
            if not up_state.ok:
                return PartitionState("stale", f"upstream {up.task_id} is {up_state.state}")
            up_store = cache.once(("store", up.dataset_path()), up.store)
            version = self.upstream_version(cache.manifest(up_store, up.key))
            if recorded.get(up.task_id) != version:
                return PartitionState("stale", f"upstream {up.task_id} changed")
        return PartitionState("ok")

    # -- the run template --------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._run()
        finally:
            # hand back this task's raw-zone session (SFTP) before Luigi frees its resource slot
            self.zone().close()

    def _run(self) -> None:
        # a second run building this partition waits (at most [daybreak] lock_wait_s), then finds it done
        with self.store().locked(self.key, settings.daybreak().lock_wait_s):
            self._build_and_write()

    def _build_and_write(self) -> None:
        started, t0 = dt.datetime.now(dt.UTC), time.perf_counter()
        cache = CheckCache()
        with settings.snapshot():
            up_to_date = self.state(cache).ok
        if up_to_date:
            # Luigi scheduled this because an upstream partition was stale; rebuilt, its data came out
            # the same (or another worker got here first). Nothing to recompute, nothing to rewrite.
            logger.info("%s: up to date now that its upstream is rebuilt; nothing written", self.task_id)
            self.store().clear_failure(self.key)
            return
        window = self.input_files(cache)
        if window is None:
            raise RuntimeError(f"{self.task_id}: a raw folder of its dependency window disappeared; rerun later")
        inputs = window.read
        if window.refused:  # also in the manifest (refused_inputs) and in `daybreak status`
            logger.warning(
                "%s: %d raw file(s) of its window not read: %s",
                self.task_id,
                len(window.refused),
                "; ".join(f"{r['path']} ({r['reason']})" for r in window.refused),
            )
        upstream = {u.task_id: self.upstream_version(cache.manifest(u.store(), u.key)) for u in self.upstream()}
        built = self.build(inputs)
        self._check_inputs_unchanged(window)
        store = self.store()
        self.check_built(built)
        manifest = {
            "dataset": self.dataset,
            "business_date": self.key.isoformat() if self.key else None,
            "rules": self.rules(),
            "rules_fingerprint": self.rules_fingerprint(),
            "inputs": [input_line(f) for f in inputs],
            "input_fingerprint": window.fingerprint,
            "refused_inputs": window.refused,
            "upstream": upstream,
            "row_count": built.table.num_rows,
            "rejected_count": 0 if built.rejected is None else built.rejected.num_rows,
            "stats": built.stats,
            "task_id": self.task_id,
            "package_version": tasks.__version__,
            "started_at": started.isoformat(),
        }
        finished = dt.datetime.now(dt.UTC)
        manifest.update(finished_at=finished.isoformat(), duration_s=round(time.perf_counter() - t0, 4))
        store.write(self.key, built.table, manifest, built.extras, rejected=built.rejected)
        store.clear_failure(self.key)
        logger.info(
            "%s: wrote %s rows (%s rejected) in %.2f s",
            self.task_id,
            manifest["row_count"],
            manifest["rejected_count"],
            manifest["duration_s"],
        )

    def _check_inputs_unchanged(self, before: Window) -> None:
        """Fail, writing nothing, when a raw file changed while the partition read it (still being
        uploaded, re-sent mid-read): a fresh listing must give the fingerprint taken before reading."""
        after = self.input_files(CheckCache())
        if after is None or after.fingerprint != before.fingerprint:
            changed = (
                "a raw folder disappeared"
                if after is None
                else _diff_inputs([input_line(f) for f in before.read], after.read)
            )
            raise RawInputChanged(
                f"{self.task_id}: raw input changed while it was read ({changed}); nothing was written, "
                "the previous partition is kept. Rerun once the upload is complete."
            )

    def on_failure(self, exception: BaseException) -> str:
        try:
            self.store().record_failure(
                self.key,
                {"failed_at": dt.datetime.now(dt.UTC).isoformat(), "error": str(exception), "task_id": self.task_id},
            )
        except OSError as exc:  # the failure record must never hide the real error
            logger.warning("could not record the failure of %s: %s", self.task_id, exc)
        return super().on_failure(exception)


@MaterializedTask.event_handler(luigi.Event.START)
def _progress_start(task: MaterializedTask) -> None:
    progress.started(task.task_id)


@MaterializedTask.event_handler(luigi.Event.SUCCESS)
def _progress_success(task: MaterializedTask) -> None:
    progress.finished(task.task_id)


@MaterializedTask.event_handler(luigi.Event.FAILURE)
def _progress_failure(task: MaterializedTask, exception: BaseException) -> None:
    progress.finished(task.task_id)


class PartitionedTask(MaterializedTask):
    """Base of every business-date partitioned task. Subclasses set ``dataset`` and define
    ``raw_window()`` (the raw folders they read) and/or ``upstream()`` (the partitions they read),
    ``rules()`` and ``build()``; ``requires()`` is derived from the first two, so the completeness
    check never has to instantiate Luigi tasks to know the window."""

    date = luigi.DateParameter(description="Business date of the partition")

    @property
    def key(self) -> dt.date:
        return self.date

    @classmethod
    def bulk_complete(cls, parameter_tuples: Iterable) -> list[dt.date]:
        """The dates of ``parameter_tuples`` that are complete; same answers as ``complete()``.

        Luigi's RangeDaily calls this with a ``functools.partial`` of the class (its of_params bound)
        and a one-pass iterator of dates.
        """
        factory = cls
        cache = CheckCache()
        done, incomplete = [], []
        with settings.snapshot():
            for value in parameter_tuples:
                task = factory(date=value)
                if not cache.listed:
                    cache.list_dataset(cache.once(("store", task.dataset_path()), task.store))
                if task.state(cache).ok:
                    done.append(task.date)
                else:
                    incomplete.append(task)
        if incomplete:
            type(incomplete[0]).prepare_to_run()
            progress.expect(t.task_id for t in incomplete)
        return done


class SnapshotTask(MaterializedTask):
    """Base of an unpartitioned dataset: one folder, ``<data_root>/<dataset>/``, rebuilt whole."""

    @property
    def key(self) -> None:
        return None


_warned_future: set[str] = set()


def newest_raw_date(zone: RawZone, source: str) -> dt.date | None:
    """The newest folder date of a raw source, at most tomorrow (business timezone): a stray folder
    dated later (``qsr_pos/2099-01-01/``) must not stretch a snapshot or the status view to 2099, so
    it is clamped and named in a warning (once per process)."""
    from tasks.backfill import business_today  # backfill imports the recipes, which import this module

    newest = zone.newest_folder_date(source)
    limit = business_today() + dt.timedelta(days=1)
    if newest is None or newest <= limit:
        return newest
    folder = f"{zone.describe()}/{zone.folder_relpath(source, newest)}"
    if folder not in _warned_future:
        _warned_future.add(folder)
        logger.warning(
            "raw folder %s is dated after tomorrow (%s): ignored, dates are taken up to %s. A stray folder? "
            "Move it out of the raw zone.",
            folder,
            limit,
            limit,
        )
    return limit


def missing_folders(task: MaterializedTask, cache: CheckCache) -> list[tuple[str, dt.date]]:
    """(source, export date) of the required raw folders of the task's own window that are absent."""
    zone = cache.zone()
    return [(s, d) for s, d in task.raw_window() if cache.raw_folder(zone, s, d) is None]


def waiting_for(task: MaterializedTask, cache: CheckCache) -> str:
    """Why a partition cannot be built yet: a raw folder of its window is missing, or an upstream
    partition waits for one. Empty when nothing is in the way."""
    if task.input_files(cache) is None:
        return "raw folder missing: " + ", ".join(f"{s}/{d}" for s, d in missing_folders(task, cache))
    up = task.waiting_upstream(cache)
    return f"upstream {up.dataset} {up.key} waits for raw data" if up is not None else ""


def _diff_rules(old: dict, new: dict) -> str:
    keys = sorted(set(old) | set(new))
    changed = [f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in keys if old.get(k) != new.get(k)]
    return ", ".join(changed) or "fingerprint differs"


def _parse_input_line(line: str | list) -> tuple[str, tuple[int, int]]:
    """One manifest input; manifests written before 0.1.0's final format hold ``[path, size, mtime_ns]``."""
    path, size, mtime_ns = line if isinstance(line, list) else line.rsplit(" ", 2)
    return path, (int(size), int(mtime_ns))


def _diff_inputs(old: list[str], new: list[RawFile]) -> str:
    before = dict(map(_parse_input_line, old))
    after = {f.relpath: (f.size, f.mtime_ns) for f in new}
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(p for p in set(after) & set(before) if after[p] != before[p])
    parts = [
        f"{what} {p}" for what, ps in (("new file", added), ("removed", removed), ("changed", changed)) for p in ps
    ]
    return ", ".join(parts[:3]) + (f" (+{len(parts) - 3} more)" if len(parts) > 3 else "")
