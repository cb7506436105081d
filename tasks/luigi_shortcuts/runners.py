"""Task processes that run many tasks one after another (``--workers`` 2 and more; docs/architecture.md):
a *runner* forked at the worker's first task runs each through Luigi's own ``TaskProcess.run``, and
the worker still sees a process per task (:class:`_TaskInRunner`)."""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import time
import weakref
from multiprocessing.reduction import ForkingPickler

from luigi import worker as luigi_worker
from luigi.task_register import load_task

from tasks import forks

TASKS_PER_RUNNER = 200  # then the runner exits and the next task starts a new one
_STOP = None  # sent to a runner: exit


class _Runner:
    """A process forked from the worker that runs the tasks it is sent, one at a time."""

    def __init__(self, worker, others: list[_Runner]):
        context = multiprocessing.get_context("fork")
        self.conn, child = context.Pipe()
        self.task_id: str | None = None  # the task it runs now
        self.ran = 0
        # the worker's pipe ends are closed in the runner, so it sees the worker's death at once
        self.process = context.Process(
            target=_serve, args=(worker, child, [self.conn, *(r.conn for r in others)]), name="daybreak-task-runner"
        )
        self.process.start()  # under Luigi's fork_lock: the worker holds it while it starts a task
        child.close()

    def run(self, task) -> None:
        self.task_id = task.task_id
        self.ran += 1
        self.conn.send((task.task_id, task.task_module, task.task_family, task.to_str_params()))

    def finished(self) -> bool:
        """Whether the task it was sent last is done (its result put on the worker's queue)."""
        if self.task_id is not None:
            try:
                while self.conn.poll():
                    if self.conn.recv() == self.task_id:
                        self.task_id = None
            except (EOFError, OSError):  # the runner is gone
                return False
        return self.task_id is None

    def stop(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # the runner, or this end, is gone
            self.conn.send(_STOP)
        self.conn.close()

    def kill(self) -> None:
        _terminate_tree(self.process)
        self.conn.close()


def _serve(worker, conn, workers_ends) -> None:
    """The runner: each task it is sent run by Luigi's ``TaskProcess.run``, then the task id sent back;
    Ctrl-C ends it with exit code 130 and no traceback."""
    for end in workers_ends:
        end.close()
    first = True
    try:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):  # the worker's process is gone
                return
            if message is _STOP:
                return
            task_id, module, family, params = message
            if not first:
                forks.next_task()
            first = False
            # the worker's task object as of the fork, or one scheduled since made again from its parameters
            task = worker._scheduled_tasks.get(task_id) or load_task(module, family, params)
            process = _LUIGI_CREATE(worker, task)
            process.result_queue = _WrittenAtOnce(process.result_queue)
            process.run()
            try:
                conn.send(task_id)
            except OSError:  # the worker's process is gone (killed): nobody to tell
                return
    except KeyboardInterrupt:
        raise SystemExit(130) from None


class _WrittenAtOnce:
    """The worker's result queue, written before ``put`` returns without a feeder thread, so a task that
    kills its runner cannot leave the queue's write lock taken."""

    def __init__(self, queue):
        self.queue = queue

    def put(self, item) -> None:
        self.queue._sem.acquire()  # as Queue.put: released by the worker's get
        data = ForkingPickler.dumps(item)
        with self.queue._wlock:
            self.queue._writer.send_bytes(data)


class _TaskInRunner:
    """What Luigi's worker keeps of a task process, for a task run by a runner."""

    use_multiprocessing = True

    def __init__(self, worker, luigis):
        self.worker = worker
        self.task = luigis.task
        self.status_reporter = luigis.status_reporter
        self.worker_timeout = luigis.worker_timeout
        self.timeout_time = luigis.timeout_time  # from when Luigi made the process, as for its own
        self.runner: _Runner | None = None

    def start(self) -> None:
        self.runner = _pool(self.worker).take()
        self.runner.run(self.task)

    def _on_it(self) -> bool:
        return self.runner is not None and self.runner.task_id == self.task.task_id

    def is_alive(self) -> bool:
        return self._on_it() and self.runner.process.is_alive() and not self.runner.finished()

    @property
    def exitcode(self) -> int | None:
        if not self._on_it() or self.runner.finished():
            return 0
        if self.runner.process.is_alive():
            return None
        return self.runner.process.exitcode or 1  # gone without a result: never "done"

    @property
    def pid(self) -> int | None:
        return self.runner.process.pid if self.runner else None

    def terminate(self) -> None:
        if self.runner is not None:
            _pool(self.worker).drop(self.runner)
            self.runner.kill()


class _Pool:
    def __init__(self, worker):
        self.worker = worker
        self.runners: list[_Runner] = []

    def take(self) -> _Runner:
        waited = time.monotonic()
        while True:
            for runner in list(self.runners):
                if not runner.process.is_alive():
                    self.drop(runner)
                    runner.conn.close()
                elif runner.finished():  # asked once: a runner may finish between two questions
                    if runner.ran >= TASKS_PER_RUNNER or len(self.runners) > max(1, self.worker.worker_processes):
                        # its share of tasks run, or one runner too many (the worker's count was lowered)
                        self.drop(runner)
                        runner.stop()
                    else:
                        return runner
            # Luigi starts a task when one has put its result; its runner says so right after
            if len(self.runners) < max(1, self.worker.worker_processes) or time.monotonic() - waited > 5:
                runner = _Runner(self.worker, self.runners)
                self.runners.append(runner)
                return runner
            multiprocessing.connection.wait([r.conn for r in self.runners], timeout=0.5)

    def drop(self, runner: _Runner) -> None:
        if runner in self.runners:
            self.runners.remove(runner)

    def stop(self) -> None:
        runners, self.runners = self.runners, []
        for runner in runners:
            runner.stop()
        deadline = time.monotonic() + 5
        for runner in runners:
            runner.process.join(max(0.0, deadline - time.monotonic()))
            if runner.process.is_alive():
                runner.kill()


_POOLS: weakref.WeakSet[_Pool] = weakref.WeakSet()


def _pool(worker) -> _Pool:
    pool = worker.__dict__.get("_daybreak_runners")
    if pool is None:
        pool = worker._daybreak_runners = _Pool(worker)
        _POOLS.add(pool)
    return pool


@atexit.register
def _stop_every_pool() -> None:
    """Stop the runners of a worker never stopped, before multiprocessing's exit handler waits for them."""
    for pool in list(_POOLS):
        pool.stop()


def _terminate_tree(process) -> None:
    """``process`` and the processes it started, as Luigi's ``TaskProcess.terminate`` does."""
    try:
        import psutil
    except ImportError:
        psutil = None
    children = []
    if psutil is not None:
        with contextlib.suppress(psutil.NoSuchProcess):
            children = psutil.Process(process.pid).children(recursive=True)
    if process.is_alive():
        process.terminate()
    process.join(5)
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.terminate()


_LUIGI_CREATE = luigi_worker.Worker._create_task_process
_LUIGI_EXIT = luigi_worker.Worker.__exit__  # the one in place when the runners are installed


def _create_task_process(self, task):
    process = _LUIGI_CREATE(self, task)
    if process.use_multiprocessing and getattr(task, "reuses_task_process", False) and not task.accepts_messages:
        return _TaskInRunner(self, process)
    return process


def _exit(self, *exc):
    try:
        return _LUIGI_EXIT(self, *exc)  # terminates what still runs: a runner on a task is killed
    finally:
        pool = self.__dict__.get("_daybreak_runners")
        if pool is not None:
            pool.stop()


def long_lived_task_processes() -> None:
    """Install the runners in Luigi's worker (idempotent). Only on systems that fork."""
    if getattr(luigi_worker.Worker._create_task_process, "runners", False) or not hasattr(os, "fork"):
        return
    global _LUIGI_EXIT
    _create_task_process.runners = True
    _LUIGI_EXIT = luigi_worker.Worker.__exit__
    luigi_worker.Worker._create_task_process = _create_task_process
    luigi_worker.Worker.__exit__ = _exit
