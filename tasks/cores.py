"""How many threads a build may use: this machine's cores, shared by the processes that build at once
(the worker says how many it runs: :func:`share`). Imports nothing of Daybreak and no Luigi."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

_processes = 1  # processes that build at once on this machine: the worker's, as it was made


def share(processes: int) -> None:
    """This machine's cores are shared by ``processes`` processes that build at once."""
    global _processes
    _processes = max(1, int(processes))


def task_threads() -> int:
    """Threads a build may keep busy: the cores of this process's CPU affinity over the processes sharing them."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores // _processes)


class InThisThread:
    """An executor that runs each call at once, in the calling thread, into a :class:`Future`."""

    def __enter__(self) -> InThisThread:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args))
        except Exception as exc:  # noqa: BLE001 - handed on by result(), as a thread pool would
            future.set_exception(exc)
        return future

    def map(self, fn, *iterables) -> Iterator:
        return map(fn, *iterables)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


def executor(threads: int, name: str) -> ThreadPoolExecutor | InThisThread:
    """A pool of ``threads`` threads named ``name``, or for one thread (or fewer), :class:`InThisThread`."""
    return ThreadPoolExecutor(threads, thread_name_prefix=name) if threads > 1 else InThisThread()


_process_pools: dict[tuple[int, str], ThreadPoolExecutor] = {}


def process_pool(name: str, threads: int) -> ThreadPoolExecutor:
    """This process's pool of ``threads`` threads named ``name``, made at its first use (a forked process
    makes its own)."""
    key = (os.getpid(), name)
    pool = _process_pools.get(key)
    if pool is None:
        pool = _process_pools[key] = ThreadPoolExecutor(threads, thread_name_prefix=name)
    return pool


def side_thread(name: str) -> ThreadPoolExecutor | InThisThread:
    """One thread named ``name`` beside the build's own, or :class:`InThisThread` for a one-thread build."""
    return ThreadPoolExecutor(1, thread_name_prefix=name) if task_threads() > 1 else InThisThread()


def start_on_side_thread(fn, *args) -> Future:
    """``fn(*args)`` started now on a thread of its own, or run here when a build has one thread."""
    pool = side_thread(getattr(fn, "__name__", "background"))
    try:
        return pool.submit(fn, *args)
    finally:
        pool.shutdown(wait=False)
