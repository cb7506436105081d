"""Luigi's local scheduler in linear time (:class:`LocalScheduler`, docs/architecture.md): Luigi's answers,
but a task's dependencies rank in the order it lists them rather than in hash order."""

from __future__ import annotations

import heapq
import math
import time
from collections import Counter

from luigi import interface, scheduler

_WAITING = frozenset((scheduler.PENDING, scheduler.FAILED))  # what count_pending counts


class _IndexedState(scheduler.SimpleTaskState):
    """Luigi's task state plus ``ready``, a heap of every ready task in Luigi's rank order (entries checked
    at the top), and ``waiting``, per worker, its PENDING or FAILED tasks."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.due = math.inf  # when the first failed task's retry or disabled task's re-enable is due
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
        elif new in (scheduler.FAILED, scheduler.DISABLED):
            self.due = min(self.due, _due(task, config))
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


def _due(task, config) -> float:
    """When the prune would retry or re-enable a failed or disabled task, by Luigi's rules; inf when never."""
    if task.status == scheduler.FAILED and task.retry is not None and config is not None and config.retry_delay >= 0:
        return task.retry
    if task.status == scheduler.DISABLED and task.scheduler_disable_time is not None and config is not None:
        return task.scheduler_disable_time + config.disable_persist
    return math.inf


def _in_given_order(made: list, stretches: int = 1) -> None:
    """Rank the dependency tasks ``made`` in the order they were listed, not in hash order, taking a task of
    each of ``stretches`` in turn (dates that run at once never read one raw folder)."""
    times = sorted(task.time for task in made)
    size = -(-len(made) // max(1, stretches))  # a stretch's length, rounded up
    order = [made[i] for start in range(size) for i in range(start, len(made), size)]
    for task, when in zip(order, times, strict=True):
        task.time = when


class LocalScheduler(scheduler.Scheduler):
    """Luigi's local scheduler (no task history), linear over a run: a prune at most every ``PRUNE_EVERY``
    seconds, and ``count_pending``/``get_work`` from the indexes where Luigi's answer is sure to agree."""

    PRUNE_EVERY = 1.0  # seconds
    stretches = 1  # the worker's processes, when Daybreak's worker factory made the worker (tasks/luigi_shortcuts)

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
        deps = kwargs.get("deps") or ()
        unknown = [dep for dep in deps if dep not in state._tasks]
        super().add_task(*args, **kwargs)
        task = state._tasks.get(task_id)
        if task is None:
            return
        if len(unknown) > 1:
            _in_given_order([state._tasks[dep] for dep in unknown if dep in state._tasks], self.stretches)
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
        """Whether the heap entry is current and its task one Luigi's ``get_work`` could hand to the worker."""
        task = entry[3]
        return (
            self._state._tasks.get(task.id) is task
            and entry[0] == -task.priority
            and worker_id in task.workers.map
            and self._schedulable(task)
        )

    def _best_ready(self, worker_id: str):
        """(found, task): the worker's highest ranked ready task, or None; ``found`` is False on a tie in
        rank (Luigi then picks by its iteration order)."""
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
        workers = self._state._active_workers
        return workers.get(worker_id) if len(workers) == 1 else None

    def get_work(self, host=None, assistant=False, current_tasks=None, worker=None, **kwargs):
        now, state = time.monotonic(), self._state
        if self._pruned_at is None or now - self._pruned_at >= self.PRUNE_EVERY or time.time() >= state.due:
            self.prune()
            self._pruned_at = now
            waiting = state.get_active_tasks_by_status(scheduler.FAILED, scheduler.DISABLED)
            state.due = min((_due(task, self._config) for task in waiting), default=math.inf)
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

    def count_pending(self, worker):
        if self._only_worker(worker) is None or self._state.get_active_task_count_for_status(scheduler.DISABLED):
            return super().count_pending(worker)
        # Luigi's count_pending without _upstream_status (which can only answer UPSTREAM_DISABLED here); every
        # task's workers are active ones, so the only worker is each counted task's only and last
        worker_id, worker = worker, self._state.get_worker(worker)
        running_tasks = []
        for task in worker.get_tasks(self._state, scheduler.RUNNING):
            other_worker = self._state.get_worker(task.worker_running)
            if other_worker is not None:
                more_info = {"task_id": task.id, "worker": str(other_worker)}
                more_info.update(other_worker.info)
                running_tasks.append(more_info)
        pending = self._state.waiting[worker_id]
        return {
            "n_pending_tasks": pending,
            "n_unique_pending": pending,
            "n_pending_last_scheduled": pending,
            "worker_state": worker.state,
            "running_tasks": running_tasks,
        }


def linear_local_scheduler() -> None:
    """Make every Luigi run without ``luigid`` in this process use :class:`LocalScheduler`."""
    factory = interface._WorkerSchedulerFactory
    if getattr(factory.create_local_scheduler, "linear", False):
        return

    def create_local_scheduler(self):
        return LocalScheduler()

    create_local_scheduler.linear = True
    factory.create_local_scheduler = create_local_scheduler
