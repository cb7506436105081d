"""A build's threads: the machine's cores shared by the processes that build at once (tasks/cores.py)."""

from __future__ import annotations

import concurrent.futures.thread
import datetime as dt
import os
import shutil
import threading

import luigi
import pytest

from tasks import cores
from tasks.qsr import StgQsrPos
from tests.conftest import qsr_rows

pytestmark = pytest.mark.luigi
D = dt.date(2026, 9, 10)
CORES = len(os.sched_getaffinity(0))


@pytest.fixture(autouse=True)
def shared_as_before():
    before = cores._processes
    yield
    cores.share(before)


def test_a_build_has_the_cores_its_worker_processes_leave_it():
    cores.share(1)
    assert cores.task_threads() == CORES
    cores.share(CORES)
    assert cores.task_threads() == 1
    cores.share(2 * CORES)
    assert cores.task_threads() == 1  # never none
    cores.share(0)  # counted as one process
    assert cores.task_threads() == CORES


def test_on_one_thread_background_work_runs_here_and_its_error_waits_for_result():
    cores.share(CORES)
    here = threading.get_ident()
    assert cores.start_on_side_thread(threading.get_ident).result() == here

    def fails():
        raise ValueError("bad rows")

    failed = cores.start_on_side_thread(fails)
    assert failed.done()
    with pytest.raises(ValueError, match="bad rows"):
        failed.result()
    with cores.executor(1, "x") as pool:
        assert list(pool.map(lambda _: threading.get_ident(), range(3))) == [here] * 3


@pytest.mark.skipif(CORES < 2, reason="a second core is what a build's threads are for")
def test_on_two_cores_background_work_runs_on_another_thread():
    cores.share(1)
    assert cores.start_on_side_thread(threading.get_ident).result() != threading.get_ident()


def _pool_threads_started(monkeypatch) -> list[str]:
    """Names of the thread pools' threads started from now on (Thread.start observed, then run)."""
    started: list[str] = []
    start = threading.Thread.start

    def observed(self):
        if getattr(self, "_target", None) is concurrent.futures.thread._worker:
            started.append(self.name)
        return start(self)

    monkeypatch.setattr(threading.Thread, "start", observed)
    return started


def _written(lab) -> dict[str, bytes | str]:
    """What the build of D wrote: its files' bytes, its versions."""
    folder = lab.partition(D)
    quarantine = lab.data / f"quarantine/staging/qsr_pos/business_date={D}/rejected.parquet"
    manifest = StgQsrPos(date=D).store().read_manifest(D)
    out = {p.name: p.read_bytes() for p in [folder / "data.parquet", folder / "_store_totals.arrow", quarantine]}
    out["data_version"] = manifest["data_version"]
    out["store_versions"] = str(manifest["stats"]["store_versions"])
    return out


@pytest.mark.skipif(CORES < 2, reason="the build on threads needs a second core to compare with")
def test_a_build_on_one_core_starts_no_thread_and_writes_what_a_build_on_threads_writes(lab, monkeypatch, qsr_setting):
    """On one core (a worker with as many processes as cores: each build's share), the folders are
    checked, the cache entries written, the columns picked and the versions hashed in the build's own
    thread: no thread is started, and the files are byte for byte those of a build on threads."""
    qsr_setting("max_reject_share", 0.5)
    for folder in (D, D + dt.timedelta(days=1)):
        for store in ("S001", "S002"):
            bad = f"X{store},1,{store},{folder}T13:00:00-04:00,COLA,x,1.99,,COMPLETED"  # quarantined
            lab.qsr_file(folder.isoformat(), store, [bad, *qsr_rows(store, folder)])
    started = _pool_threads_started(monkeypatch)
    with monkeypatch.context() as one_core:
        one_core.setattr(os, "sched_getaffinity", lambda pid: {0})
        assert lab.range(D, D + dt.timedelta(days=1)) == 0
    assert started == []
    alone = _written(lab)
    assert len(list((lab.data / "_state/checked").rglob("*.arrow"))) == 2  # both folders' entries written
    for made in (lab.partition(D), lab.data / "quarantine", lab.data / "_state/checked"):
        shutil.rmtree(made)  # built again from nothing, on this machine's cores, the folders checked again
    assert lab.range(D, D + dt.timedelta(days=1)) == 0
    assert {name.split("_")[0] for name in started} >= {"check", "cache", "pick", "store", "logical"}
    assert _written(lab) == alone


def test_a_worker_shares_the_cores_between_its_processes(lab):
    """``--workers 2``: the worker's two processes share the machine's cores, each build gets half."""
    from tests.test_luigi_shortcuts import _build_keeping_logging

    class ThreadsProbe(luigi.Task):
        reuses_task_process = True  # run in a worker process, as a partition task is
        n = luigi.IntParameter()

        def output(self):
            return luigi.LocalTarget(str(lab.root / f"threads-{self.n}"))

        def run(self):
            with self.output().open("w") as out:
                out.write(str(cores.task_threads()))

    cores.share(1)
    assert _build_keeping_logging([ThreadsProbe(n=n) for n in range(4)], workers=2)
    assert {p.read_text() for p in lab.root.glob("threads-*")} == {str(max(1, CORES // 2))}


@pytest.mark.skipif(CORES < 2, reason="a single run on one core builds in one process")
def test_a_single_run_shares_the_cores_between_its_processes(lab, monkeypatch):
    """RangeSingleRun builds a stretch of dates in each of its processes (one per core, at most one per
    two dates): the processes share the cores, each build gets its part."""
    from tasks import backfill

    seen = lab.root / "seen"
    seen.mkdir()
    in_order = backfill.built_in_order

    def recorded(todo, shared=()):  # in each build process (forked: this replacement comes along)
        (seen / str(os.getpid())).write_text(str(cores.task_threads()))
        return in_order(todo, shared)

    monkeypatch.setattr(backfill, "built_in_order", recorded)
    lab.qsr_days(D, 4)
    stop = D + dt.timedelta(days=4)
    assert lab.luigi("RangeSingleRun", "--of", "StgQsrPos", "--start", str(D), "--stop", str(stop)) == 0
    processes = min(CORES, 2)  # 4 dates: at most one process per two dates
    assert sorted(p.read_text() for p in seen.iterdir()) == [str(CORES // processes)] * processes
