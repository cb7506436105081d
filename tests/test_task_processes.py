"""With ``--workers`` 2 and more, a partition task runs in a worker process that runs many tasks
(tasks/luigi_shortcuts/runners.py), not in a process of its own: Luigi still sees each task start, end,
fail, die and time out as it would."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import types
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import luigi
import pytest

from tasks import forks
from tasks.luigi_shortcuts import runners

pytestmark = pytest.mark.luigi
REPO = Path(__file__).resolve().parent.parent

START = dt.date(2026, 9, 10)
RESETS = 0  # how many times the hook below ran in this process


def _count_reset() -> None:
    global RESETS
    RESETS += 1


@pytest.fixture
def reset_hook():
    forks.before_each_task(_count_reset)
    yield
    forks._HOOKS.remove(_count_reset)  # the fork hook stays (os.register_at_fork): it only counts


class _Probe(luigi.Task):
    """Writes the id of the process it ran in, and how many resets that process had seen."""

    reuses_task_process = True
    folder = luigi.Parameter()
    n = luigi.IntParameter()
    die = luigi.BoolParameter(default=False)
    sleep = luigi.FloatParameter(default=0.0)
    extra = luigi.IntParameter(default=-1)  # a dynamic dependency, scheduled only when this one runs

    def output(self):
        return luigi.LocalTarget(os.path.join(self.folder, f"probe-{self.n}"))

    def run(self):
        Path(self.folder, f"started-{self.n}").touch()
        if self.extra >= 0:
            yield _Probe(folder=self.folder, n=self.extra)
        if self.die:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(self.sleep)
        with self.output().open("w") as out:
            out.write(f"{os.getpid()} {RESETS}")


class _Probes(luigi.WrapperTask):
    """``count`` probes: a run with many tasks for the ``luigi`` command."""

    folder = luigi.Parameter()
    count = luigi.IntParameter()
    sleep = luigi.FloatParameter(default=0.0)

    def requires(self):
        return [_Probe(folder=self.folder, n=k, sleep=self.sleep) for k in range(self.count)]


class _Plain(_Probe):
    reuses_task_process = False


def _ran(folder: Path) -> dict[int, tuple[int, int]]:
    """Probe number -> (process id, resets seen)."""
    out = {}
    for p in folder.glob("probe-*"):
        pid, resets = p.read_text().split()
        out[int(p.name.split("-")[1])] = (int(pid), int(resets))
    return out


def _failed(result: luigi.LuigiRunResult) -> list[int]:
    """The probes the run's summary (what the ``luigi`` command prints at its end) lists as failed."""
    text = result.summary_text
    section = text[text.index("failed:\n") :].split("\n*")[0] if "failed:\n" in text else ""
    return sorted(int(n) for n in re.findall(r"_Probe\(folder=[^,]*, n=(\d+),", section))


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"


def test_two_workers_run_their_tasks_in_two_processes_that_each_run_several_then_end(tmp_path, reset_hook):
    ok = luigi.build(
        [_Probe(folder=str(tmp_path), n=k) for k in range(10)], workers=2, local_scheduler=True, log_level="WARNING"
    )
    assert ok
    ran = _ran(tmp_path)
    assert sorted(ran) == list(range(10))
    per_process = Counter(pid for pid, _ in ran.values())
    assert len(per_process) <= 2 and os.getpid() not in per_process, per_process
    assert max(per_process.values()) >= 2  # a process per task would give 10 processes
    # each task in a process that ran several saw a reset of its own: as if forked for it
    for pid, count in per_process.items():
        seen = sorted(r for p, r in ran.values() if p == pid)
        assert seen == list(range(seen[0], seen[0] + count)) and seen[0] >= 1, seen
    assert all(_gone(pid) for pid in per_process)  # stopped with the worker


class _Threads(_Probe):
    """Writes how many threads its process has when it starts."""

    def run(self):
        with self.output().open("w") as out:
            out.write(f"{os.getpid()} {threading.active_count()}")


def test_a_result_is_written_before_the_next_task_starts_so_a_task_that_kills_its_process_cannot_block_the_run(
    tmp_path,
):
    """multiprocessing's queue writes from a thread of its own, holding a lock every process that puts on the
    queue shares: a task that killed its process while that thread still wrote the result of the task before
    it left the lock taken, and the run waited forever. No such thread runs when a task starts."""
    assert luigi.build([_Threads(folder=str(tmp_path), n=k) for k in range(8)], workers=2, local_scheduler=True)
    ran = _ran(tmp_path)
    assert max(Counter(pid for pid, _ in ran.values()).values()) >= 2  # tasks after a first one in a process
    assert {threads for _, threads in ran.values()} == {1}, ran


def test_a_task_that_does_not_reuse_processes_gets_one_of_its_own(tmp_path):
    ok = luigi.build([_Plain(folder=str(tmp_path), n=k) for k in range(4)], workers=2, local_scheduler=True)
    assert ok
    assert len({pid for pid, _ in _ran(tmp_path).values()}) == 4


def test_a_dynamic_dependency_scheduled_after_the_processes_started_runs_in_one_of_them(tmp_path):
    tasks = [_Probe(folder=str(tmp_path), n=k, extra=100 + k) for k in range(3)]
    assert luigi.build(tasks, workers=2, local_scheduler=True, log_level="WARNING")
    ran = _ran(tmp_path)
    assert sorted(ran) == [0, 1, 2, 100, 101, 102]
    assert len({pid for pid, _ in ran.values()}) <= 2


def test_a_process_is_replaced_after_its_share_of_tasks(tmp_path, monkeypatch):
    monkeypatch.setattr(runners, "TASKS_PER_RUNNER", 2)
    assert luigi.build([_Probe(folder=str(tmp_path), n=k) for k in range(8)], workers=2, local_scheduler=True)
    per_process = Counter(pid for pid, _ in _ran(tmp_path).values())
    assert sum(per_process.values()) == 8
    assert len(per_process) >= 4 and max(per_process.values()) <= 2, per_process


@pytest.mark.system
def test_a_task_whose_process_dies_fails_and_the_others_run_in_a_new_one(tmp_path):
    tasks = [_Probe(folder=str(tmp_path), n=k, die=(k == 2)) for k in range(6)]
    result = luigi.build(tasks, workers=2, local_scheduler=True, detailed_summary=True, log_level="WARNING")
    assert result.status == luigi.LuigiStatusCode.FAILED
    assert _failed(result) == [2]
    assert sorted(_ran(tmp_path)) == [0, 1, 3, 4, 5]


@pytest.mark.system
def test_a_task_over_its_timeout_is_terminated_with_its_process_and_the_run_goes_on(tmp_path):
    slow = _Probe(folder=str(tmp_path), n=0, sleep=60)
    slow.worker_timeout = 1
    started = time.monotonic()
    result = luigi.build(
        [slow, *(_Probe(folder=str(tmp_path), n=k) for k in range(1, 5))],
        workers=2,
        local_scheduler=True,
        detailed_summary=True,
        log_level="WARNING",
    )
    assert time.monotonic() - started < 30  # not the 60 s of its sleep
    assert result.status == luigi.LuigiStatusCode.FAILED
    assert _failed(result) == [0]
    assert sorted(_ran(tmp_path)) == [1, 2, 3, 4]


def test_a_two_worker_range_builds_every_date_as_one_worker_does(lab):
    lab.qsr_days(START, 6)
    stop = START + dt.timedelta(days=6)
    assert lab.range(START, stop, "--workers", "2") == 0
    two = {d: (lab.partition(d) / "data.parquet").read_bytes() for d in lab.built_at()}
    assert sorted(two) == [START + dt.timedelta(days=k) for k in range(6)]
    for d in two:
        shutil.rmtree(lab.partition(d))
    assert lab.range(START, stop, "--workers", "1") == 0
    assert {d: (lab.partition(d) / "data.parquet").read_bytes() for d in lab.built_at()} == two


@pytest.mark.system
def test_the_worker_processes_end_when_the_run_is_killed(tmp_path):
    """kill -9 of a run: each worker process finishes the task it is on, then sees the run gone and exits
    without starting another one."""
    script = (
        "import luigi, tasks\n"
        "from tests.test_task_processes import _Probe\n"
        f"luigi.build([_Probe(folder={str(tmp_path)!r}, n=k, sleep=0.3) for k in range(40)], workers=2,"
        " local_scheduler=True)\n"
    )
    run = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # the run and every process it starts: one session, the run's pid
    )
    try:
        deadline = time.monotonic() + 60
        while len(_ran(tmp_path)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = _children(run.pid)
        assert len(workers) == 2, workers
        run.kill()
        run.wait()
        started_by_then = _started(tmp_path)
        deadline = time.monotonic() + 10
        while _in_session(run.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _in_session(run.pid), "a process of the run outlived it"
        # no process of the run is left to start a task: each worker finished the task it was on (one it
        # had been sent at most) and started no other
        assert _started(tmp_path) == set(_ran(tmp_path))
        assert len(_started(tmp_path) - started_by_then) <= len(workers) and len(_ran(tmp_path)) < 40
    finally:
        for pid in [run.pid, *_in_session(run.pid)]:  # when it failed: none left behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        run.wait()


def _started(folder: Path) -> set[int]:
    return {int(p.name.split("-")[1]) for p in folder.glob("started-*")}


def _processes() -> Iterator[tuple[int, list[str]]]:
    """(pid, the fields of /proc/PID/stat after the name) of every process now."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            yield int(stat.parent.name), stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue


def _in_session(sid: int) -> list[int]:
    """The live processes of session ``sid`` (zombies, already ended, are not)."""
    return [pid for pid, fields in _processes() if int(fields[3]) == sid and fields[0] != "Z"]


def _children(pid: int) -> list[int]:
    return [child for child, fields in _processes() if int(fields[1]) == pid]


def test_a_worker_whose_count_is_lowered_stops_its_idle_extra_process():
    worker = types.SimpleNamespace(worker_processes=2, _scheduled_tasks={})
    pool = runners._Pool(worker)
    try:
        first = pool.take()
        first.task_id = "busy"  # as if it ran a task: the next one needs a second runner
        second = pool.take()
        assert second is not first and len(pool.runners) == 2
        worker.worker_processes = 1  # Luigi's set_worker_processes
        first.task_id = None
        kept = pool.take()
        assert pool.runners == [kept]
        (gone,) = {first, second} - {kept}
        gone.process.join(10)
        assert gone.process.exitcode == 0
    finally:
        pool.stop()


@pytest.mark.system
def test_ctrl_c_stops_the_worker_processes_without_a_traceback_of_theirs(tmp_path):
    script = (
        "import luigi, tasks\n"
        "from tests.test_task_processes import _Probe\n"
        f"luigi.build([_Probe(folder={str(tmp_path)!r}, n=k, sleep=0.2 + 0.3 * (k % 2)) for k in range(40)],"
        " workers=2, local_scheduler=True)\n"
    )
    run = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while len(_ran(tmp_path)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = _children(run.pid)
        assert len(workers) == 2, workers
        os.killpg(run.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
        _, err = run.communicate(timeout=30)
        assert all(_gone(pid) for pid in workers)
        assert "daybreak-task-runner" not in err, err[-2000:]
    finally:
        run.kill()
        run.wait()


@pytest.mark.system
@pytest.mark.parametrize("to", ["process", "group"])
def test_sigterm_stops_the_run_as_ctrl_c_does_and_its_worker_processes_with_it(tmp_path, to):
    """SIGTERM to the run's process alone (``kill``), or to its process group (``timeout``, ``systemctl
    stop``): the interrupted line, exit 143, and no worker process left building."""
    from tasks.guard import INTERRUPTED

    command = [sys.executable, "-m", "luigi", "--module", "tests.test_task_processes", "_Probes"]
    command += ["--folder", str(tmp_path), "--count", "40", "--sleep", "60", "--workers", "2"]
    run = subprocess.Popen(
        [*command, "--local-scheduler", "--no-lock"],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len(_started(tmp_path)) < 2 and time.monotonic() < deadline:  # each worker on a task
            time.sleep(0.05)
        workers = _children(run.pid)
        assert len(workers) == 2, workers
        if to == "group":
            os.killpg(run.pid, signal.SIGTERM)
        else:
            os.kill(run.pid, signal.SIGTERM)
        _, err = run.communicate(timeout=30)
        assert run.returncode == 143, err[-2000:]
        assert INTERRUPTED in err and "Traceback" not in err, err[-2000:]
        assert all(_gone(pid) for pid in workers)
    finally:
        for pid in [run.pid, *_in_session(run.pid)]:  # when it failed: none left behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        run.wait()


@pytest.mark.system
def test_a_run_stopped_mid_build_on_luigid_leaves_no_task_running_there_and_its_rerun_takes_them_at_once(tmp_path):
    """SIGTERM mid-build on a central scheduler: before, luigid kept the run's two tasks RUNNING until it counted
    the worker gone ([scheduler] worker_disconnect_delay, 60 s, then a prune), and a rerun waited for them. Now
    they are put back in the pool, their history saying why, and the rerun is given them at once."""
    import json
    import urllib.parse
    import urllib.request

    from tasks.luigi_shortcuts.remote import STOPPED
    from tests.luigid import Luigid

    server = Luigid(tmp_path / "luigid").start()
    folder = tmp_path / "probes"
    folder.mkdir()
    command = [sys.executable, "-m", "luigi", "--module", "tests.test_task_processes", "_Probes", "--no-lock"]
    command += ["--folder", str(folder), "--count", "4", "--sleep", "60", "--workers", "2"]
    command += ["--scheduler-host", "127.0.0.1", "--scheduler-port", str(server.port)]

    def tasks_of(status: str) -> dict:
        query = urllib.parse.quote(json.dumps({"status": status, "upstream_status": ""}))
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/api/task_list?data={query}") as answer:
            return json.loads(answer.read())["response"]

    def started_two() -> subprocess.Popen:
        run = subprocess.Popen(command, cwd=REPO, stderr=subprocess.PIPE, text=True, start_new_session=True)
        deadline = time.monotonic() + 30
        while len(_started(folder)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_started(folder)) == 2, run.stderr.read() if run.poll() is not None else "not started"
        return run

    def fetch_error(task_id: str) -> str:
        query = urllib.parse.quote(json.dumps({"task_id": task_id}))
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/api/fetch_error?data={query}") as answer:
            return json.dumps(json.loads(answer.read())["response"])

    runs = []
    try:
        runs.append(started_two())
        os.kill(runs[0].pid, signal.SIGTERM)
        _, err = runs[0].communicate(timeout=30)
        assert runs[0].returncode == 143, err[-2000:]
        assert tasks_of("RUNNING") == {}
        pending = tasks_of("PENDING")
        assert len(pending) == 4 + 1, pending  # the probes, put back or never started, and their wrapper
        back = [t for t in pending if STOPPED in fetch_error(t)]
        assert len(back) == 2, pending
        for marker in folder.glob("started-*"):
            marker.unlink()
        runs.append(started_two())  # its first two tasks at once, not a minute later
        assert len(tasks_of("RUNNING")) == 2
    finally:
        for run in runs:
            for pid in [run.pid, *_in_session(run.pid)]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            run.wait()
        server.stop()
