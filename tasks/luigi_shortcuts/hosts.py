"""Hosts sharing one luigid: they wait for each other and exit as one host would (:func:`many_hosts`)."""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import Callable

from luigi import rpc, scheduler

from tasks.luigi_shortcuts.messages import unfulfilled
from tasks.luigi_shortcuts.remote import lost_by

logger = logging.getLogger("luigi-interface")

# how a build says it must not replace the partition (another writer or host, newer code or settings)
SUPERSEDED = (
    "another writer committed",
    "another host committed",
    ": upgrade this host. Not replaced",
    ": update them. Not replaced",
)


def superseded(error: str) -> bool:
    """Whether a task's error says it was superseded (:data:`SUPERSEDED`), not failed."""
    return any(marker in error for marker in SUPERSEDED)


def many_hosts() -> None:
    """Make a run on several hosts sharing one ``luigid`` mean what it means on one: waiting, taking back
    a lost host's task, and exit codes as docs/scale-out.md gives them."""
    from luigi import execution_summary, worker

    if getattr(worker.Worker._keep_alive, "daybreak", False):
        return
    keep_alive, external = worker.Worker._keep_alive, worker._is_external

    def _is_external(task) -> bool:  # a partition this host leaves to a host on newer code or settings
        return external(task) or bool(getattr(task, "declined", ""))

    worker._is_external = _is_external

    def _keep_alive(self, get_work_response) -> bool:
        if self._config.count_uniques or self._config.count_last_scheduled:  # the user's own rule for leaving
            LEFT_BY_A_LOST_HOST.clear()
            return keep_alive(self, get_work_response)
        if get_work_response.running_tasks or keep_alive(self, get_work_response):
            return True
        return take_back(self)

    _keep_alive.daybreak = True
    worker.Worker._keep_alive = _keep_alive
    execution_summary._summary_dict = _hosts_summary(execution_summary._summary_dict)


def take_back(worker) -> bool:
    """Put back in luigid's pool, once per task and run, the tasks ``worker`` needs whose worker disconnected
    mid-build (luigid would mark them FAILED for ``retry_delay``); whether it put any back. Those it cannot
    are kept in :data:`LEFT_BY_A_LOST_HOST` for the summary."""
    LEFT_BY_A_LOST_HOST.clear()
    if not isinstance(worker._scheduler, rpc.RemoteScheduler):
        return False
    taken = worker.__dict__.setdefault("_daybreak_taken_back", set())
    lost = {}
    for status in (scheduler.FAILED, scheduler.DISABLED):
        try:
            listed = worker._scheduler.task_list(status, "")
        except Exception:  # noqa: BLE001 - a luigid that cannot say: the worker leaves as Luigi's would
            return False
        lost.update(
            (task_id, (status, info))
            for task_id, info in (listed or {}).items()
            if isinstance(info, dict) and worker._id in (info.get("workers") or ())
            and info.get("time_running") and info.get("worker_running") is None  # ran, on a worker luigid lost
        )  # fmt: skip
    back = [(task_id, info) for task_id, (status, info) in lost.items() if status == scheduler.FAILED]
    back = [(task_id, info) for task_id, info in back if task_id not in taken]
    for task_id, info in back:
        taken.add(task_id)
        task = worker._scheduled_tasks.get(task_id)
        name = f"{task.task_family} {task.key}" if hasattr(task, "key") else info.get("display_name", task_id)
        logger.warning(  # said before its lease: the lost host's task process, if alive, or another host
            # waiting for it (luigid hands the task back to one of them) may commit first
            "%s: the host building it disconnected from luigid (killed or frozen mid-build); this host runs it "
            "again (and builds it unless another build commits first)",
            name,
        )
        worker._scheduler.add_task(worker=worker._id, task_id=task_id, status=scheduler.PENDING, runnable=True)
    if not back:
        LEFT_BY_A_LOST_HOST.update((task_id, status) for task_id, (status, _) in lost.items())
    return bool(back)


# ids of the tasks a lost host left undone that could not be put back -> their status in luigid
LEFT_BY_A_LOST_HOST: dict[str, str] = {}


# ids of the tasks whose check failed as a store or server stopped answering -> the worker: failed (exit 30)
FAILED_CHECKS: dict[str, str] = {}

# ids of the tasks the scheduler had DONE when the last run's summary was made
DONE_IN_SCHEDULER: set[str] = set()

# id -> error of each task the last run asked for that another host ran and failed, as luigid says
FAILED_ELSEWHERE: dict[str, str] = {}

# id -> (family, Luigi's error) of each task the last run asked for that another host could not run, as a
# partition it reads changed after it was built ("Unfulfilled dependencies at run time")
UNFULFILLED_ELSEWHERE: dict[str, tuple[str, str]] = {}

# the tasks the last run's summary counted not run (exit 25)
NOT_RUN: dict[str, object] = {}

# task id -> (the task, the range's task_limit, the worker's id) of each date a range left for the next run
LEFT_BY_THE_LIMIT: dict[str, tuple[object, int, str]] = {}

# a pending task in one of these that is complete by the end of the run is done, not pending
_DONE_ELSEWHERE = ("run_by_other_worker", "upstream_run_by_other_worker", "not_run")


def _hosts_summary(summary_dict):
    def hosts_summary_dict(worker) -> dict:
        from tasks.luigi_shortcuts import summarising

        with summarising(worker):  # one pass of questions for both summaries of the run, not one a task
            return _hosts_summary_dict(worker)

    def _hosts_summary_dict(worker) -> dict:
        sets = summary_dict(worker)
        errors = {task: _error_here(worker, task) for task in sets["failed"]}
        ran_here = set(errors)  # luigid keeps one error a task: of this host's run of it, or another's

        def error_of(task) -> str:  # one question to the scheduler a task
            if task not in errors:
                errors[task] = _error_of(worker, task)
            return errors[task]

        def run_by_other_worker(task) -> None:  # failed here, but what it asked for another host has
            sets["failed"].discard(task)
            sets["run_by_other_worker"].add(task)
            sets["still_pending_not_ext"].add(task)

        for task in list(sets["still_pending_ext"]):  # left to a host on newer code or settings: superseded
            if getattr(task, "declined", ""):
                sets["still_pending_ext"].discard(task)
                sets["run_by_other_worker"].add(task)
        for task, error in list(errors.items()):  # superseded builds first: a wrapper's requirements may be
            if superseded(error):
                run_by_other_worker(task)
        for task, error in list(errors.items()):
            if task in sets["failed"] and unfulfilled(error):  # Luigi found what it reads not complete
                if _left_to_newer(worker, task):
                    run_by_other_worker(task)
                else:  # not run (exit 25): what it reads changed since it was built, here or elsewhere
                    sets["failed"].discard(task)
                    sets["not_run"].add(task)
        asks = any(sets[c] for c in _DONE_ELSEWHERE) or any(unfulfilled(e) for e in errors.values())
        done = _done_in_scheduler(worker) if asks else set()  # what another host built: the summary's lines
        DONE_IN_SCHEDULER.clear()
        DONE_IN_SCHEDULER.update(done)
        for category in _DONE_ELSEWHERE:
            for task in list(sets[category]):
                if task in sets["run_by_other_worker"] and superseded(error_of(task)):
                    continue
                if _complete(task):  # built, whoever built it
                    sets[category].discard(task)
                    sets["still_pending_not_ext"].discard(task)
                    sets["already_done"].add(task)
                elif task.task_id in done and category != "run_by_other_worker":  # luigid did not hand it out:
                    sets[category].discard(task)  # built by newer rules elsewhere: superseded (exit 10); else
                    # done less than stable_done_cooldown_secs ago: not run (exit 25), a rerun builds it
                    sets["run_by_other_worker" if _kept_as_newer(task) else "not_run"].add(task)
        for task in list(sets["run_by_other_worker"]):  # a host luigid lost left it: not run here (exit 25)
            if task.task_id in LEFT_BY_A_LOST_HOST:
                sets["run_by_other_worker"].discard(task)
                sets["not_run"].add(task)
        failed_elsewhere(worker, sets, lambda task: "" if task in ran_here else error_of(task))
        for task in [t for t in sets["scheduling_error"] if FAILED_CHECKS.get(t.task_id) == worker._id]:
            sets["scheduling_error"].discard(task)
            sets["failed"].add(task)
        if lost_by(worker):  # luigid stopped answering: what is left undone failed with it
            for category in _DONE_ELSEWHERE:
                for task in list(sets[category]):
                    if category != "run_by_other_worker" or not superseded(error_of(task)):
                        sets[category].discard(task)
                        sets["failed"].add(task)
        left = [task for task, _, run in LEFT_BY_THE_LIMIT.values() if run == worker._id]
        sets["not_run"].update(task for task in left if not _complete(task))  # exit 25
        NOT_RUN.clear()
        NOT_RUN.update((task.task_id, task) for task in sets["not_run"])
        return sets

    return hosts_summary_dict


def failed_elsewhere(worker, sets: dict, error_of: Callable[[object], str]) -> None:
    """A task this run asked for that another host ran and failed is failed here too (exit 30); one Luigi did
    not run there, as what it reads changed, is not run here either (exit 25)."""
    FAILED_ELSEWHERE.clear()
    UNFULFILLED_ELSEWHERE.clear()
    waited = [t for c in _DONE_ELSEWHERE for t in sets[c] if t.task_id not in LEFT_BY_A_LOST_HOST]
    if not waited or not isinstance(worker._scheduler, rpc.RemoteScheduler):
        return
    try:
        failed = set(worker._scheduler.task_list(scheduler.FAILED, "") or ())
    except Exception:  # noqa: BLE001 - a luigid that cannot say: the tasks keep their categories
        return
    for task in waited:
        error = error_of(task) if task.task_id in failed else ""
        changed = bool(error) and unfulfilled(error) and not _left_to_newer(worker, task)  # not run there
        if changed or (error and not superseded(error) and not unfulfilled(error)):
            for category in _DONE_ELSEWHERE:
                sets[category].discard(task)
            sets["still_pending_not_ext"].discard(task)
            sets["not_run" if changed else "failed"].add(task)
            if changed:
                UNFULFILLED_ELSEWHERE[task.task_id] = (task.task_family, error)
            else:
                FAILED_ELSEWHERE[task.task_id] = luigid_error_message(error)


def luigid_error_message(error: str) -> str:
    """The exception's message of an error luigid keeps (a JSON string of Luigi's "Runtime error:" and its
    traceback, whose last line is ``module.ExceptionType: message``)."""
    try:
        text = json.loads(error)
    except ValueError:
        text = error
    last = ([line for line in str(text).splitlines() if line.strip()] or [""])[-1]
    kind, found, message = last.partition(": ")
    return message if found and " " not in kind else last


def _left_to_newer(worker, task) -> bool:
    """Whether what ``task`` requires and is not complete here was built by newer code or settings, which this
    host never replaces (superseded, exit 10); else it changed since it was built (not run, exit 25). Decided
    once a run: the exit code comes after the summary."""
    known = _NEWER.setdefault(worker, {})
    if task.task_id not in known:
        try:
            left = [dep for dep in task.deps() if not _complete(dep)]
        except Exception:  # noqa: BLE001 - requirements that cannot be listed: not known to be superseded
            left = []
        known[task.task_id] = bool(left) and all(_kept_as_newer(dep) for dep in left)
    return known[task.task_id]


_NEWER: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # worker -> {task id: left to newer}


def own_unfulfilled(task_id: str) -> str:
    """Luigi's error of a task this run did not run as a requirement was not complete, from this host's own
    records ('' for any other; tasks.reporting.runlog replaces this): luigid may hold another host's error of
    it since, or none."""
    return ""


def _error_here(worker, task) -> str:
    """The error of a task this host ran and failed: its own record of an unfulfilled requirement, else
    luigid's. Decided once a run: the exit code comes after the summary, which consumes the records."""
    known = _ERRORS.setdefault(worker, {})
    if task.task_id not in known:
        known[task.task_id] = own_unfulfilled(task.task_id) or _error_of(worker, task)
    return known[task.task_id]


_ERRORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # worker -> {task id: its error here}


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


def _kept_as_newer(task) -> bool:
    """Whether newer code or settings built ``task``'s partition (a run here never replaces it)."""
    try:
        return bool(getattr(task, "kept_as_newer", lambda: False)())
    except Exception:  # noqa: BLE001 - a check that fails here: not known to be newer
        return False


def _complete(task) -> bool:
    try:
        return bool(task.complete())
    except Exception:  # noqa: BLE001 - a check that fails here: the task keeps its category
        return False
