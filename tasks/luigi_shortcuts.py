"""Where Daybreak leans on Luigi's internals, for speed, and nowhere else.

A status view or a three-year check instantiates each partition task many times, asks every settings
section for ``data_root`` thousands of times, and must know which Luigi run a question belongs to. Luigi
answers each of these through paths that cost tens of microseconds a call (every parameter resolved
against the config, ``dir(cls)`` walked for every instance). Each shortcut below gives Luigi's own answer,
faster; tests/test_luigi_shortcuts.py checks each one against Luigi's own path, so a Luigi upgrade that
changes what they rely on fails there, in one place:

* :class:`CachedInstances`: the task metaclass. Luigi caches one instance per (class, parameter values)
  but resolves the values first; a partition task is made with keyword arguments only, so the same
  keywords give the same instance. Luigi's ``Register.clear_instance_cache()`` (and disabling the cache)
  is honoured: the shortcut reads Luigi's cache attribute (``Register._Register__instance_cache``).
* :class:`FixedParams`: ``get_params`` computed once per class (Luigi walks ``dir(cls)`` for each
  instance); ``get_param_values`` without config lookups when every parameter is given by keyword.
* :class:`SnapshotSections` and :func:`snapshot`: the metaclass of the settings sections; inside the
  block, one instance per section.
* :func:`luigi_run`: the Luigi run this process is in, recognised by its worker's keep-alive thread
  (``luigi.worker.KeepAliveThread``), which Luigi starts when a run begins scheduling and stops after its
  last task. Luigi has no public "run started" event.

* :class:`LocalScheduler` and :func:`linear_local_scheduler`: Luigi's local scheduler (the one a run
  without ``luigid`` makes) prunes its whole task graph and walks every pending task's upstream on each
  ``get_work``, which makes a run of n tasks cost n² (a three-year booking-state chain: 3,285 tasks,
  16 ms of scheduling a date). This one gives the same answers with the prune at most once a second,
  the upstream walk only when a task is disabled (the walk only looks for disabled tasks) and, for a
  one-worker run, the next task taken from a heap of ready tasks (:class:`_IndexedState`).

One more is not for speed: :func:`options_in_full` makes Luigi's command line take options only as
spelled in full (``CmdlineParser._build_parser``), since a task's ``--hotel`` is a prefix of the
``[hotels]`` settings' flags. And :func:`default_of` reads a parameter's default as declared in the code
(``Parameter._default``), for the settings table of the docs (tasks/docs.py).
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

from luigi import interface, scheduler
from luigi.task_register import Register
from luigi.worker import KeepAliveThread


def _luigi_instance_cache(cls) -> dict | None:
    """Luigi's own instance cache as ``Register.__call__`` reads it for ``cls`` (None when disabled); a
    new dict after ``clear_instance_cache()``, whichever class it was called on."""
    return cls._Register__instance_cache


class CachedInstances(Register):
    """Luigi's task metaclass, with a faster path to the instance Luigi itself would return.

    Positional arguments, unhashable values and a disabled Luigi cache take Luigi's path."""

    _cache: ClassVar[dict] = {}
    _for: ClassVar[dict | None] = None  # the Luigi cache the entries above belong to (the dict itself)

    def __call__(cls, *args, **kwargs):
        luigi_cache = _luigi_instance_cache(cls)
        if args or luigi_cache is None:
            return super().__call__(*args, **kwargs)
        if CachedInstances._for is not luigi_cache:  # Luigi's cache was cleared: so is this one
            CachedInstances._cache = {}
            CachedInstances._for = luigi_cache
        try:
            key = (cls, *sorted(kwargs.items()))
            return CachedInstances._cache[key]
        except KeyError:
            task = CachedInstances._cache[key] = super().__call__(**kwargs)
            return task
        except TypeError:  # an unhashable or unorderable value
            return super().__call__(**kwargs)


class FixedParams:
    """Mixin for a ``luigi.Task``: its parameter list computed once, and keyword-only values resolved
    without the config (a value given for every parameter wins over any config default anyway)."""

    @classmethod
    def get_params(cls) -> list:
        if "_fixed_params" not in cls.__dict__:
            cls._fixed_params = super().get_params()
        return cls._fixed_params

    @classmethod
    def get_param_values(cls, params, args, kwargs) -> list:
        if not args and len(kwargs) == len(params) and all(name in kwargs for name, _ in params):
            values = [(name, param.normalize(kwargs[name])) for name, param in params]
            return [(name, tuple(v) if isinstance(v, list | set) else v) for name, v in values]
        return super().get_param_values(params, args, kwargs)


_snapshot: dict | None = None


@contextmanager
def snapshot() -> Iterator[None]:
    """Read each settings section once for the duration of the block (a status view or range check asks
    for ``data_root`` thousands of times; each read resolves every parameter of the section against the
    config). Settings changed inside the block are not seen until it ends. Reentrant."""
    global _snapshot
    if _snapshot is not None:
        yield
        return
    _snapshot = {}
    try:
        yield
    finally:
        _snapshot = None


class SnapshotSections(Register):
    """Luigi's metaclass for the settings sections; inside :func:`snapshot`, one instance per section."""

    def __call__(cls, *args, **kwargs):
        if _snapshot is None or args or kwargs:
            return super().__call__(*args, **kwargs)
        if cls not in _snapshot:
            _snapshot[cls] = super().__call__()
        return _snapshot[cls]


def default_of(param):
    """The default a parameter declares in the code, whatever a config file sets (Luigi has no public
    name for it): what Luigi gives for the parameter when no config file sets it."""
    return param._default


def luigi_run() -> threading.Thread | None:
    """The Luigi run this process is in, if any: its worker's keep-alive thread, which Luigi starts when
    a run (``luigi.build``, the ``luigi`` command) begins scheduling and stops when its last task is done.
    tests/test_engine_luigi.py checks this against Luigi."""
    for thread in threading.enumerate():
        if isinstance(thread, KeepAliveThread):
            return thread
    return None


def options_in_full() -> None:
    """Make Luigi's command line take options only as spelled in full (argparse ``allow_abbrev=False``).

    Luigi parses the command line once before it knows the root task, and argparse then takes an option
    by any unambiguous prefix: a task's ``--hotel H1`` is a prefix of every ``--hotels-...`` setting flag,
    so with more than one ``[hotels]`` setting that parse stopped with "ambiguous option" (exit 2)."""
    from luigi.cmdline_parser import CmdlineParser

    build = CmdlineParser._build_parser
    if getattr(build, "options_in_full", False):
        return

    def build_parser(root_task=None, help_all=False):
        parser = build(root_task, help_all)
        parser.allow_abbrev = False
        return parser

    build_parser.options_in_full = True
    CmdlineParser._build_parser = staticmethod(build_parser)


_WAITING = frozenset((scheduler.PENDING, scheduler.FAILED))  # what count_pending counts


class _IndexedState(scheduler.SimpleTaskState):
    """Luigi's task state, plus two indexes kept up to date on every change, for :class:`LocalScheduler`.

    * ``ready``: a heap of entries ``(-priority, time, seq, task)``, Luigi's rank order (``_rank``,
      highest first). Every task that is ready (PENDING, every dependency DONE) has an entry with its
      current rank; an entry may be out of date (the task ran, a dependency was re-opened, its priority
      rose), so the scheduler checks it when it comes to the top and drops it if so. A task is pushed when
      it may have become ready: its status became PENDING, a dependency became DONE, or ``add_task``
      was called for it (deps, workers, priority).
    * ``waiting``: per worker, how many tasks are PENDING or FAILED with the worker among their
      ``workers`` (what ``count_pending`` counts), changed with each status and each worker membership.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ready: list = []
        self.dependents: dict[str, set[str]] = {}
        self.waiting: Counter[str] = Counter()
        self.with_resources = False  # a task with resources was ever added
        self._seq = 0

    def push(self, task) -> None:
        self._seq += 1
        heapq.heappush(self.ready, (-task.priority, task.time, self._seq, task))

    def count_waiting(self, task, delta: int) -> None:
        for worker_id in task.workers:
            self.waiting[worker_id] += delta

    def set_status(self, task, new_status, config=None):
        old = task.status
        super().set_status(task, new_status, config)
        new = task.status
        if new == old:
            return
        if (old in _WAITING) != (new in _WAITING):
            self.count_waiting(task, 1 if new in _WAITING else -1)
        if new == scheduler.PENDING:
            self.push(task)
        elif new == scheduler.DONE:
            for task_id in self.dependents.get(task.id, ()):
                dependent = self._tasks.get(task_id)
                if dependent is not None and dependent.status == scheduler.PENDING:
                    self.push(dependent)

    def inactivate_tasks(self, delete_tasks):
        for task_id in delete_tasks:
            task = self._tasks[task_id]
            if task.status in _WAITING:
                self.count_waiting(task, -1)
        super().inactivate_tasks(delete_tasks)

    def _remove_workers_from_tasks(self, workers, remove_stakeholders=True):
        for task in self.get_active_tasks():
            if task.status in _WAITING:
                for worker_id in workers:
                    if worker_id in task.workers:
                        self.waiting[worker_id] -= 1
        super()._remove_workers_from_tasks(workers, remove_stakeholders)


class LocalScheduler(scheduler.Scheduler):
    """Luigi's local scheduler, made as Luigi makes it (no task history), linear over a run.

    * The prune (dead workers, retry and re-enable delays, done tasks past ``remove_delay``) runs on the
      first ``get_work`` and then at most once every ``PRUNE_EVERY`` seconds, not on every call. Every
      delay it applies is counted in seconds or minutes; ``luigid`` itself prunes once a minute.
    * ``count_pending`` skips the upstream walk when no task is disabled: the walk only drops the tasks
      that wait on a disabled one, so without one the counts are the same. With one worker (a local
      run has one, whatever its ``--workers``) the counts are kept up to date (:class:`_IndexedState`)
      instead of counted over every pending task.
    * ``get_work``, in the case a local run is in (one worker, no task with resources, no batching, no
      assistant), takes the highest ranked ready task from a heap instead of sorting every pending task
      and scanning them for the first ready one, and gives the same answer. Any other case, and a tie
      in rank, goes to Luigi's own ``get_work``.
    """

    PRUNE_EVERY = 1.0  # seconds

    def __init__(self, **kwargs):
        super().__init__(prune_on_get_work=False, record_task_history=False, **kwargs)
        collector = self._state._metrics_collector
        self._state = _IndexedState(self._config.state_path)  # as Scheduler.__init__ makes its state
        self._state._metrics_collector = collector
        self._pruned_at: float | None = None

    def add_task(self, *args, **kwargs):
        # Luigi's worker passes every argument by name; task_id is also Luigi's first positional one
        task_id, worker, state = kwargs.get("task_id", args[0] if args else None), kwargs.get("worker"), self._state
        before = state._tasks.get(task_id)
        had = before is not None and worker in before.workers.map
        super().add_task(*args, **kwargs)
        task = state._tasks.get(task_id)
        if task is None:
            return
        if not had and worker in task.workers.map and task.status in _WAITING:
            state.waiting[worker] += 1
        for dep in task.deps:
            state.dependents.setdefault(dep, set()).add(task_id)
        if task.resources:
            state.with_resources = True
        if task.status == scheduler.PENDING:
            state.push(task)

    def _update_priority(self, task, prio, worker):
        old = task.priority
        super()._update_priority(task, prio, worker)
        if task.priority != old and task.status == scheduler.PENDING:
            self._state.push(task)

    def _ready(self, entry, worker_id: str) -> bool:
        """Whether the heap entry is current and its task one Luigi's ``get_work`` could hand to the
        worker: active, of the entry's priority, the worker in its ``workers``, and ``_schedulable``
        (PENDING, every dependency DONE)."""
        task = entry[3]
        return (
            self._state._tasks.get(task.id) is task
            and entry[0] == -task.priority
            and worker_id in task.workers.map
            and self._schedulable(task)
        )

    def _best_ready(self, worker_id: str):
        """(found, task): the highest ranked ready task of the worker (``None`` if none), as Luigi's
        sort and scan would pick it; ``found`` is False when another ready task has the same rank, since
        Luigi then picks by the order it iterates its tasks in."""
        heap = self._state.ready
        while heap and not self._ready(heap[0], worker_id):
            heapq.heappop(heap)
        if not heap:
            return True, None
        best = heapq.heappop(heap)
        found = True
        while heap and heap[0][:2] == best[:2]:
            if heap[0][3] is not best[3] and self._ready(heap[0], worker_id):
                found = False  # a tie: Luigi's own get_work decides
                break
            heapq.heappop(heap)  # a copy of best's entry, or not ready
        heapq.heappush(heap, best)
        return found, best[3]

    def _only_worker(self, worker_id: str):
        """The worker, if it is the only active one, else None."""
        workers = self._state._active_workers
        return workers.get(worker_id) if len(workers) == 1 else None

    def get_work(self, host=None, assistant=False, current_tasks=None, worker=None, **kwargs):
        now = time.monotonic()
        if self._pruned_at is None or now - self._pruned_at >= self.PRUNE_EVERY:
            self.prune()
            self._pruned_at = now
        state = self._state
        the_worker = self._only_worker(worker)
        fast = (
            the_worker is not None
            and the_worker.enabled
            and not the_worker.assistant
            and not assistant
            and not self._paused
            and not state.with_resources
            and not state._task_batchers.get(worker)
            and not state._status_tasks[scheduler.BATCH_RUNNING]
        )
        if fast and current_tasks is not None:  # Luigi re-hands a running task its worker has lost
            running = state._status_tasks[scheduler.RUNNING].values()
            claimed = set(current_tasks)
            fast = not any(t.worker_running == worker and t.id not in claimed for t in running)
        found, best = self._best_ready(worker) if fast else (False, None)
        if not found:
            kwargs.update(host=host, assistant=assistant, current_tasks=current_tasks, worker=worker)
            return super().get_work(**kwargs)
        # what Luigi's get_work does once it has chosen ``best`` (or none)
        self._update_worker(worker, worker_reference={"host": host}, get_work=True)
        reply = self.count_pending(worker)
        if best is None:
            reply["task_id"] = None
            return reply
        self.update_metrics_task_started(best)
        state.set_status(best, scheduler.RUNNING, self._config)
        best.worker_running = worker
        best.resources_running = best.resources.copy()
        best.time_running = time.time()
        self._update_task_history(best, scheduler.RUNNING, host=host)
        reply.update(task_id=best.id, task_family=best.family, task_module=getattr(best, "module", None))
        reply["task_params"] = best.params
        return reply

    def _pending_of(self, worker):
        """``worker.get_tasks(state, PENDING, FAILED)``, the same tasks in the same order, with the
        membership test inlined (Luigi calls a lambda and ``OrderedSet.__contains__`` for each task)."""
        statuses = (scheduler.PENDING, scheduler.FAILED)
        if len(worker.tasks) < sum(self._state.get_active_task_count_for_status(s) for s in statuses):
            return [task for task in worker.tasks if task.status in statuses]
        worker_id = worker.id
        return [task for task in self._state.get_active_tasks_by_status(*statuses) if worker_id in task.workers.map]

    def count_pending(self, worker):
        if self._state.get_active_task_count_for_status(scheduler.DISABLED):
            return super().count_pending(worker)
        # Luigi's count_pending without _upstream_status (which can only answer UPSTREAM_DISABLED here)
        worker_id, worker = worker, self._state.get_worker(worker)
        running_tasks = []
        for task in worker.get_tasks(self._state, scheduler.RUNNING):
            other_worker = self._state.get_worker(task.worker_running)
            if other_worker is not None:
                more_info = {"task_id": task.id, "worker": str(other_worker)}
                more_info.update(other_worker.info)
                running_tasks.append(more_info)
        if self._only_worker(worker_id) is not None:
            # every task's workers are active ones, so this worker is each counted task's only and last
            num_pending = num_unique_pending = num_pending_last_scheduled = self._state.waiting[worker_id]
        else:
            num_pending = num_unique_pending = num_pending_last_scheduled = 0
            for task in self._pending_of(worker):  # each task's workers: Luigi's OrderedSet, read directly
                workers = task.workers
                num_pending += 1
                num_unique_pending += len(workers.map) == 1
                num_pending_last_scheduled += workers.end[1][0] == worker_id  # workers.peek(last=True)
        return {
            "n_pending_tasks": num_pending,
            "n_unique_pending": num_unique_pending,
            "n_pending_last_scheduled": num_pending_last_scheduled,
            "worker_state": worker.state,
            "running_tasks": running_tasks,
        }


def linear_local_scheduler() -> None:
    """Make every Luigi run without ``luigid`` in this process use :class:`LocalScheduler`: Luigi's
    ``interface._WorkerSchedulerFactory.create_local_scheduler``, which the ``luigi`` command and
    ``luigi.build`` call, returns one instead of ``Scheduler(prune_on_get_work=True, ...)``."""
    factory = interface._WorkerSchedulerFactory
    if getattr(factory.create_local_scheduler, "linear", False):
        return

    def create_local_scheduler(self):
        return LocalScheduler()

    create_local_scheduler.linear = True
    factory.create_local_scheduler = create_local_scheduler


def checked_workers() -> None:
    """Make the ``luigi`` command refuse a worker count below 1 (``--workers 0``: Luigi would start no
    worker, run nothing and exit 25 "not run") with one line and exit 2, as every ``daybreak`` command
    does (:func:`tasks.guard.check_count`): Luigi's ``_WorkerSchedulerFactory.create_worker``, which it
    calls before any task is checked, checks it first. A program's own ``luigi.build(workers=0)`` (no
    command line parsed) is left to Luigi."""
    from luigi.cmdline_parser import CmdlineParser

    from tasks.guard import check_count

    factory = interface._WorkerSchedulerFactory
    if getattr(factory.create_worker, "checked", False):
        return
    create = factory.create_worker

    def create_worker(self, scheduler, worker_processes, assistant=False):
        if CmdlineParser.get_instance() is not None:
            check_count(worker_processes, "--workers")
        return create(self, scheduler, worker_processes, assistant)

    create_worker.checked = True
    factory.create_worker = create_worker


def checked_ranges() -> None:
    """Make Luigi's ``RangeDaily`` (every ``RangeDailyBase``) check ``--start`` and ``--stop`` when it is
    made, as every ``daybreak`` command and ``RangeSingleRun`` do (:func:`tasks.guard.check_range`: each
    a date of ``DATES``, ``--start`` not after ``--stop``, at most ``MAX_RANGE_DAYS`` apart). Luigi would
    cut a range at ``days_back`` and run what is left, without a word. Event handlers cannot refuse
    (Luigi logs and drops what they raise), so ``__init__`` checks."""
    from luigi.tools.range import RangeDailyBase

    from tasks.guard import check_range

    init = RangeDailyBase.__init__
    if getattr(init, "checked", False):
        return

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        check_range(self.start, self.stop, type(self).__name__)

    __init__.checked = True
    RangeDailyBase.__init__ = __init__


# -- many hosts on one luigid ----------------------------------------------------------------------------
SUPERSEDED = "another writer committed"  # how a build that lost the commit to another writer says so


def many_hosts() -> None:
    """What a run means when several hosts share one ``luigid`` (docs/scale-out.md), the same as on one:

    * a worker with nothing to do now stays while another worker runs a task it needs
      (``Worker._keep_alive``; Luigi's own rule otherwise): without it, a host gives up on a range
      another host is still building, and its run ends "not granted run permission" (exit 25);
    * the exit code (``execution_summary._summary_dict``, which ``luigi.retcodes`` reads): a task another
      worker ran, or that was not granted run permission, and that is complete when the run ends is done,
      whoever built it (exit 0, not 10 or 25); one the scheduler has DONE that is not complete here (a host
      with other rules built it) counts as run by another worker (exit 10, not 25), as does a build that
      lost its commit to another writer (:data:`SUPERSEDED`)."""
    from luigi import execution_summary, worker

    if getattr(worker.Worker._keep_alive, "daybreak", False):
        return
    keep_alive = worker.Worker._keep_alive

    def _keep_alive(self, get_work_response) -> bool:
        return bool(get_work_response.running_tasks) or keep_alive(self, get_work_response)

    _keep_alive.daybreak = True
    worker.Worker._keep_alive = _keep_alive
    execution_summary._summary_dict = _hosts_summary(execution_summary._summary_dict)


# A pending task is in "still_pending_not_ext" and in one of these: when it is complete by the end of the run
# (another host built it), it is done, not pending.
_DONE_ELSEWHERE = ("run_by_other_worker", "upstream_run_by_other_worker", "not_run")


def _hosts_summary(summary_dict):
    def hosts_summary_dict(worker) -> dict:
        sets = summary_dict(worker)
        for task in list(sets["failed"]):
            if SUPERSEDED in _error_of(worker, task):
                sets["failed"].discard(task)
                sets["run_by_other_worker"].add(task)
                sets["still_pending_not_ext"].add(task)
        done = _done_in_scheduler(worker) if any(sets[c] for c in _DONE_ELSEWHERE) else set()
        for category in _DONE_ELSEWHERE:
            for task in list(sets[category]):
                if task in sets["run_by_other_worker"] and SUPERSEDED in _error_of(worker, task):
                    continue
                if _complete(task):  # built, whoever built it
                    sets[category].discard(task)
                    sets["still_pending_not_ext"].discard(task)
                    sets["already_done"].add(task)
                elif task.task_id in done and category != "run_by_other_worker":  # another worker says it built it
                    sets[category].discard(task)
                    sets["run_by_other_worker"].add(task)
        return sets

    hosts_summary_dict.daybreak = True
    return hosts_summary_dict


def _done_in_scheduler(worker) -> set[str]:
    """Ids of the tasks the scheduler has DONE (whichever worker ran them)."""
    try:
        return set(worker._scheduler.task_list(scheduler.DONE, ""))
    except Exception:  # noqa: BLE001 - a scheduler that cannot say: each task is asked whether it is complete
        return set()


def _error_of(worker, task) -> str:
    try:
        found = worker._scheduler.fetch_error(task.task_id)
    except Exception:  # noqa: BLE001 - a scheduler that cannot say: the task keeps its category
        return ""
    return str((found or {}).get("error") or "")


def _complete(task) -> bool:
    try:
        return bool(task.complete())
    except Exception:  # noqa: BLE001 - a check that fails here: the task keeps its category
        return False
