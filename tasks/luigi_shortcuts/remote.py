"""A central scheduler (luigid) that does not answer: one line, never a traceback (docs/scale-out.md);
exit 2 when it never answered, and once *lost* mid-run (:func:`lost`), the tasks left count as failed."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
from urllib.error import HTTPError, URLError

from luigi import interface, rpc, scheduler
from luigi import worker as luigi_worker
from luigi.worker import WORKER_STATE_DISABLED

from tasks.guard import fail

logger = logging.getLogger("luigi-interface")


_lost: str | None = None  # what the last lost luigid of this process was: the line the run ends with


def lost() -> str | None:
    """The line a run ends with when its luigid stopped answering in this process, else None."""
    return _lost


def lost_by(worker) -> bool:
    return bool(getattr(getattr(worker, "_scheduler", None), "lost", None))


def _why(exc: BaseException, timeout: float) -> str:
    """``connection refused``, ``no answer in 10 s``, ``unknown host``, ``HTTP 404 Not Found``: why a request failed."""
    reason = exc.reason if isinstance(exc, URLError) and not isinstance(exc, HTTPError) else exc
    if isinstance(exc, HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, TimeoutError | socket.timeout):
        return f"no answer in {timeout:g} s"
    if isinstance(reason, socket.gaierror):
        return f"unknown host: {reason.strerror or reason}"
    if isinstance(reason, ConnectionError):
        return "connection closed"
    text = str(reason).strip().splitlines()
    return f"{type(reason).__name__}: {text[0]}" if text else type(reason).__name__


class SchedulerLost(rpc.RPCError):
    """luigid did not answer a request in ``[core] rpc_retry_attempts`` attempts."""


class CheckedScheduler(rpc.RemoteScheduler):
    """Luigi's remote scheduler, which ends a run with one line when luigid does not answer (module doc)."""

    def __init__(self, url: str = "http://localhost:8082/", connect_timeout: float | None = None):
        super().__init__(url, connect_timeout)
        # urllib's fetcher even where requests is installed: one kind of error to name on every host
        self._fetcher = rpc.URLLibFetcher()
        self.lost: str | None = None  # why luigid was given up on
        self.answered = False  # luigid has answered a request of this process
        self._warned = False
        self._lock = threading.Lock()
        self._given_up = threading.Event()  # wakes a thread waiting to try again once another gave up

    def _attempts(self) -> tuple[int, float]:
        return max(1, int(self._rpc_retry_attempts)), max(0.0, float(self._rpc_retry_wait))

    def _fetch(self, url_suffix: str, body: dict) -> str:
        """Luigi's request with its attempts, or :class:`SchedulerLost` at once once luigid is lost."""
        if self.lost:
            raise SchedulerLost(self.lost)
        attempts, wait = self._attempts()
        for attempt in range(1, attempts + 1):
            try:
                page = self._fetcher.fetch(rpc._urljoin(self._url, url_suffix), body, self._connect_timeout)
            except OSError as exc:  # urllib's URLError and timeout, a closed connection
                if attempt == attempts or self.lost:
                    raise SchedulerLost(self.lost or _why(exc, self._connect_timeout)) from None
                self._warn(_why(exc, self._connect_timeout), attempts, wait)
                self._given_up.wait(wait)
            else:
                self.answered, self._warned = True, False
                return page
        raise AssertionError("unreachable")

    def _warn(self, why: str, attempts: int, wait: float) -> None:
        """One warning per outage mid-run (none at the start: its error is the one line)."""
        with self._lock:
            if self._warned or not self.answered or not self._rpc_log_retries:
                return
            self._warned = True
        logger.warning(
            "luigid at %s does not answer (%s); trying again for %g s ([core] rpc_retry_attempts %d, "
            "rpc_retry_wait %g)", self._url, why, wait * (attempts - 1), attempts, wait,
        )  # fmt: skip

    def _request(self, url: str, data: dict, attempts: int = 3, allow_null: bool = True):
        try:
            return super()._request(url, data, attempts, allow_null)
        except SchedulerLost as exc:
            never = not self.answered
            self._give_up(str(exc))
            if never and threading.current_thread() is threading.main_thread():
                fail(
                    f"the central scheduler (luigid) at {self._url} does not answer ({exc}): start it with "
                    "daybreak scheduler, or run with --local-scheduler"
                )
        if url.endswith(("/get_work", "/count_pending")):  # no more work: the worker finishes what runs, then ends
            return {
                "task_id": None, "n_pending_tasks": 0, "n_unique_pending": 0, "n_pending_last_scheduled": 0,
                "running_tasks": [], "worker_state": WORKER_STATE_DISABLED,
            }  # fmt: skip
        return None

    def _give_up(self, why: str) -> None:
        global _lost
        with self._lock:
            if self.lost:
                return
            self.lost = why
        self._given_up.set()
        if not self.answered:  # the run ends here, with its own line (exit 2)
            return
        attempts, wait = self._attempts()
        _lost = (
            f"the central scheduler (luigid) at {self._url} stopped answering ({why}; {attempts} attempts "
            f"{wait:g} s apart): this host took no more work; what it built is kept. Start luigid again "
            "(daybreak scheduler) and run the same command to finish"
        )


STOPPED = "stopped mid-build (Ctrl-C or SIGTERM): put back for another host or the next run"


def leave(worker) -> None:
    """Tell luigid that ``worker`` has ended, so that its tasks no longer count it. Else luigid keeps, for
    ``[scheduler] worker_disconnect_delay`` (60 s), a share of each resource (``[resources] sftp``) for it
    to take the pending tasks it had added, and a run started meanwhile gets no task that needs one. A task
    it was running (the run stopped mid-build) is put back in the pool (failed first, saying why, as luigid
    takes RUNNING back only from its worker), not left RUNNING for that time: a host waiting for it, or a
    rerun, takes it at once."""
    found = getattr(worker, "_scheduler", None)
    if not isinstance(found, CheckedScheduler) or not found.answered or found.lost:
        return
    with contextlib.suppress(Exception):
        for task_id in list(getattr(worker, "_running_tasks", None) or ()):
            found.add_task(worker=worker._id, task_id=task_id, status=scheduler.FAILED, expl=json.dumps(STOPPED))
            found.add_task(worker=worker._id, task_id=task_id, status=scheduler.PENDING)
        found.disable_worker(worker=worker._id)


def checked_remote_scheduler() -> None:
    """Make every Luigi run of this process with a central scheduler use :class:`CheckedScheduler`, and its
    worker :func:`leave` luigid as it ends."""
    factory = interface._WorkerSchedulerFactory
    if getattr(factory.create_remote_scheduler, "checked", False):
        return
    ended = luigi_worker.Worker.__exit__

    def __exit__(self, *exc):
        try:
            return ended(self, *exc)
        finally:
            leave(self)

    luigi_worker.Worker.__exit__ = __exit__

    def create_remote_scheduler(self, url):
        global _lost
        _lost = None  # a new run: a luigid an earlier run of this process lost is not this run's
        return CheckedScheduler(url)

    create_remote_scheduler.checked = True
    factory.create_remote_scheduler = create_remote_scheduler
