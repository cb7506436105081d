"""Operations as a user runs them (issue 15): the morning refresh from cron, the command ``plan``
prints, the volume and content of a backfill's output."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasks.settings import day_in_progress
from tests.conftest import Lab

pytestmark = pytest.mark.system

DAY = dt.timedelta(days=1)


def cron_folder(lab: Lab, extra: str = "") -> Path:
    """A folder of its own with a luigi.cfg that sets only the two roots, as docs/operations.md's cron
    line uses (not the lab's root: the in-process tests' working directory)."""
    cron = lab.root / "cron"
    cron.mkdir(exist_ok=True)
    (cron / "luigi.cfg").write_text(f"[daybreak]\nraw_root = {lab.raw}\ndata_root = {lab.data}\n{extra}")
    return cron


def luigi_cmd(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PATH"}
    cmd = [sys.executable, "-m", "luigi", "--module", "tasks", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_morning_refresh_before_todays_exports_exits_20_and_names_the_folder(lab):
    """The cron line's normal case at 06:30: yesterday's POS folder is there, today's is not yet."""
    today = day_in_progress()
    lab.qsr_days(today - 2 * DAY, 1)  # folders today-2 and today-1
    proc = luigi_cmd(cron_folder(lab), "MorningRefresh", "--local-scheduler")
    assert proc.returncode == 20, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert f"waiting  for raw folder {lab.raw}/qsr_pos/{today}/ (not there yet): StgQsrPos {today - DAY}" in proc.stderr


def test_the_second_morning_line_leaves_today_out_and_exits_0_when_nothing_went_stale(lab):
    """docs/operations.md's second line takes the dates up to today in UTC. Today's business day is not over
    (its partition needs tomorrow's folder): the run leaves it out as plan does, counts it not over yet, and
    waits for nothing (it exited 20 every morning). Run again with nothing stale, it builds nothing."""
    from tasks.calendar import date_range
    from tasks.views import plan

    today = day_in_progress()
    lab.qsr_days(today - 8 * DAY, 8)  # folders today-8 .. today: this morning's drop has landed
    cwd = cron_folder(lab)
    utc_today = dt.datetime.now(dt.UTC).date()  # RangeDaily's last date: today or, in the evening, tomorrow
    args = ["RangeDaily", "--of", "StgQsrPos", "--start", "2026-01-01", "--days-back", "7", "--local-scheduler"]
    proc = luigi_cmd(cwd, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    built = set(date_range(utc_today - 6 * DAY, today))  # --days-back 7: the last 7 dates to utc_today
    assert set(lab.built_at()) == built
    not_over = list(date_range(today, utc_today + DAY))
    span = f"{today}" if len(not_over) == 1 else f"{today} .. {utc_today}"
    assert f"{len(built)} ran, {len(not_over)} not over yet" in proc.stderr, proc.stderr[-3000:]
    assert f"not over yet StgQsrPos {span}: " in proc.stderr and f"today is {today}" in proc.stderr
    assert "waiting" not in proc.stderr
    assert plan.make_plan("stg_qsr_pos", utc_today - 6 * DAY, utc_today + DAY).left_out == not_over  # plan agrees

    files = lab.files()
    proc = luigi_cmd(cwd, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{len(built)} up to date, {len(not_over)} not over yet" in proc.stderr
    assert lab.files() == files


def test_a_range_past_tomorrow_counts_every_day_not_over_as_its_warning_does(lab):
    """Luigi's RangeDaily never asks the dates that have not begun (in UTC): the summary counts them not over
    yet all the same, as many as the warning leaves out, and spans the whole range."""
    today = day_in_progress()
    start, stop = today - 4 * DAY, today + 6 * DAY
    lab.qsr_days(start, 6)  # folders start .. today+2
    args = ["RangeDaily", "--of", "StgQsrPos", "--start", str(start), "--stop", str(stop), "--local-scheduler"]
    proc = luigi_cmd(cron_folder(lab), *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"6 of 10 dates left out ({today} .. {stop - DAY})" in proc.stderr, proc.stderr[-3000:]
    assert f"StgQsrPos {start} .. {stop - DAY}: 4 ran, 6 not over yet" in proc.stderr, proc.stderr[-3000:]
    assert f"not over yet StgQsrPos {today} .. {stop - DAY}: " in proc.stderr


@pytest.mark.parametrize("family", ["RangeDaily", "RangeSingleRun"])
def test_an_empty_range_says_so_in_the_summary_and_exits_0(lab, family):
    """``--start`` equal to ``--stop``: nothing to do, one line of Daybreak's summary, not Luigi's own nor silence."""
    day = day_in_progress() - 3 * DAY
    lab.qsr_days(day, 1)
    args = [family, "--of", "StgQsrPos", "--start", str(day), "--stop", str(day), "--local-scheduler"]
    proc = luigi_cmd(cron_folder(lab), *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "summary of this run" in proc.stderr and "Luigi Execution Summary" not in proc.stderr, proc.stderr
    line = next(x for x in proc.stderr.splitlines() if "nothing to do" in x)
    assert f"{day} .. {day}" in line and "StgQsrPos" in line and "empty" in line


def shell(cwd: Path, command: str) -> subprocess.CompletedProcess:
    """``command`` as a user pastes it into bash, with this virtualenv's scripts on the PATH."""
    env = {k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PATH"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def planned_command(cwd: Path, start: dt.date, stop: dt.date) -> str:
    proc = shell(cwd, f"daybreak plan stg_qsr_pos --start {start} --stop {stop}")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # work to do
    (line,) = [x for x in proc.stdout.splitlines() if x.strip().startswith("run:")]
    return line.split("run:", 1)[1].strip()


PLAN_START = dt.date(2026, 9, 1)
# Luigi retries an unreachable scheduler for 3 x 30 s by default; a broken command fails fast here
FAST_RPC = "[core]\nrpc-retry-attempts = 1\nrpc-retry-wait = 1\n"


def test_the_command_plan_prints_works_as_pasted_without_a_scheduler(lab):
    lab.qsr_days(PLAN_START, 4)
    cwd = cron_folder(lab, FAST_RPC)
    command = planned_command(cwd, PLAN_START, PLAN_START + 4 * DAY)
    proc = shell(cwd, command)
    assert proc.returncode == 0, command + "\n" + proc.stderr[-3000:]
    assert command.endswith("--local-scheduler")
    assert set(lab.built_at()) == {PLAN_START + k * DAY for k in range(4)}


def test_the_command_plan_prints_uses_a_running_or_configured_scheduler(lab):
    from tests.luigid import Luigid

    lab.qsr_days(PLAN_START, 3)
    server = Luigid(lab.root / "luigid").start()
    try:  # a luigid answers on the configured port: the command goes to it
        cwd = cron_folder(lab, FAST_RPC + f"scheduler_port = {server.port}\n")
        command = planned_command(cwd, PLAN_START, PLAN_START + 3 * DAY)
        assert "--local-scheduler" not in command
        proc = shell(cwd, command)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert set(lab.built_at()) == {PLAN_START + k * DAY for k in range(3)}
    finally:
        server.stop()
    # configured, not running: the user runs a central scheduler; the command is for it
    cwd = cron_folder(lab, FAST_RPC + "default_scheduler_host = 127.0.0.1\ndefault_scheduler_port = 1\n")
    lab.qsr_days(PLAN_START + 3 * DAY, 1)
    assert "--local-scheduler" not in planned_command(cwd, PLAN_START, PLAN_START + 4 * DAY)


def test_a_60_date_backfill_prints_progress_and_a_short_summary_and_debug_prints_everything(lab):
    """Issue 15, item 11: the README's first command printed 1,741 lines. 60 dates of sample data, two
    partitions failing (a bad file in folder F is read by F-1 and F), the last one waiting for its
    d+1 folder, three up to date from an earlier run."""
    from tasks import sample

    start = dt.date(2026, 9, 1)
    stop = start + 60 * DAY
    sample.generate(lab.raw, start, 60, stores=3, seed=1, mean_lines_per_store=20)
    bad = lab.qsr_file(str(start + 20 * DAY), "S999", ["x,1,S999"], header="order_id,line_no,store_id")
    shutil.rmtree(lab.raw / "qsr_pos" / str(stop))
    cwd = cron_folder(lab)
    assert luigi_cmd(cwd, "RangeDaily", "--of", "StgQsrPos", "--start", str(start), "--stop", str(start + 3 * DAY),
                     "--local-scheduler").returncode == 0  # fmt: skip
    args = ["RangeDaily", "--of", "StgQsrPos", "--start", str(start), "--stop", str(stop), "--workers", "2"]
    began = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    proc = luigi_cmd(cwd, *args, "--local-scheduler")
    ended = dt.datetime.now(dt.UTC)
    assert proc.returncode == 30, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    progress = [x for x in lines if "progress: " in x]
    (first,) = [x for x in lines if x.startswith("INFO: summary of this run: ")]
    summary = lines[lines.index(first) :]
    # when it ran (UTC, to the minute), so that mornings appended to one log are told apart
    when = re.fullmatch(r"INFO: summary of this run: (\d{4}-\d\d-\d\d \d\d:\d\d) \.\. ([-\d: ]+) UTC", first)
    assert when, first
    since = dt.datetime.fromisoformat(when.group(1) + "+00:00")
    until = dt.datetime.fromisoformat(
        (when.group(2) if " " in when.group(2) else f"{since:%Y-%m-%d} {when.group(2)}") + "+00:00"
    )
    assert began <= since <= until <= ended, first
    assert 1 <= len(progress) <= 11  # the first, one per tenth, the last
    assert len(summary) <= 40
    assert len(lines) == len(progress) + len(summary), proc.stderr  # nothing else: no Luigi chatter, no warning
    text = "\n".join(summary)
    assert f"StgQsrPos {start} .. {stop - DAY}: 54 ran, 3 up to date, 2 failed, 1 waiting" in text
    for d in (start + 19 * DAY, start + 20 * DAY):  # the file, the column and the reason
        assert f"failed   StgQsrPos {d}: " in text
        assert f"qsr_pos/{start + 20 * DAY}/{bad.name}" in text.split(f"StgQsrPos {d}: ")[1].splitlines()[0]
    assert f"waiting  for raw folder {lab.raw}/qsr_pos/{stop}/ (not there yet): StgQsrPos {stop - DAY}" in text

    proc = luigi_cmd(cwd, *args, "--local-scheduler", "--log-level", "DEBUG")
    assert proc.returncode == 30
    assert "DEBUG: Checking if StgQsrPos(date=" in proc.stderr
    assert "===== Luigi Execution Summary =====" in proc.stderr and "summary of this run:" in proc.stderr
    assert f"Data for RawFolder(source=qsr_pos, date={stop}) does not exist (yet?)" in proc.stderr
    assert "Traceback" in proc.stderr  # the failed partitions' tracebacks
    # a line per partition: the two failed ones ran again; the one waiting never ends
    assert re.findall(r"progress: (\d+)/(\d+) partitions", proc.stderr) == [("1", "3"), ("2", "3")]


def test_a_single_run_range_prints_the_same_summary(lab):
    start = dt.date(2026, 9, 1)
    lab.qsr_days(start, 9)  # folders start .. start+9: dates start .. start+8 can be built
    bad = lab.qsr_file(str(start + 4 * DAY), "S009", ["x,1,S009"], header="order_id,line_no,store_id")
    args = ["RangeSingleRun", "--of", "StgQsrPos", "--start", str(start), "--stop", str(start + 10 * DAY)]
    proc = luigi_cmd(cron_folder(lab), *args, "--local-scheduler")
    assert proc.returncode == 30, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    text = proc.stderr[proc.stderr.index("summary of this run:") :]
    assert f"StgQsrPos {start} .. {start + 9 * DAY}: 7 ran, 2 failed, 1 waiting" in text
    assert f"failed   StgQsrPos {start + 3 * DAY}: qsr_pos/{start + 4 * DAY}/{bad.name}: missing column" in text
    assert f"waiting  for raw folder {lab.raw}/qsr_pos/{start + 10 * DAY}/ (not there yet): StgQsrPos" in text


def test_a_failure_the_summary_cannot_name_keeps_its_traceback(lab):
    """The default output leaves out the traceback of a failed partition (the summary gives its file
    and reason), never that of another task: here the store sensor, whose registry lock is a folder."""
    lab.qsr_days(dt.date(2026, 9, 1), 2)
    (lab.data / "_state" / "stores.lock").mkdir(parents=True)
    proc = luigi_cmd(cron_folder(lab), "AllStores", "--local-scheduler")
    assert proc.returncode == 30, proc.stderr[-3000:]
    assert "DiscoverStores" in proc.stderr and "IsADirectoryError" in proc.stderr, proc.stderr[-3000:]


def test_a_worker_process_killed_mid_build_is_a_failed_partition_saying_so(lab):
    """kill -9 (the OOM killer) of the worker process building one date of a two-worker range: that date is
    failed, its line says the process died and how, and the rest is built (exit 30)."""
    import json

    start = dt.date(2026, 9, 1)
    lab.qsr_days(start, 5)
    killed = start + 2 * DAY
    cwd = cron_folder(lab)
    # tests/crash_driver.py: the process writing the killed date's partition SIGKILLs itself at its first write
    plan = {"counter": str(lab.root / "steps"), "root": str(lab.data), "date": str(killed), "at": 1, "mode": "kill"}
    env = {k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PATH"} | {"CRASH_PLAN": json.dumps(plan)}
    args = ["RangeDaily", "--of", "StgQsrPos", "--start", str(start), "--stop", str(start + 4 * DAY)]
    driver = Path(__file__).resolve().parent / "crash_driver.py"
    cmd = [sys.executable, str(driver), *args, "--workers", "2", "--local-scheduler"]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 30, proc.stderr[-3000:]
    text = proc.stderr[proc.stderr.index("summary of this run") :]
    assert f"StgQsrPos {start} .. {start + 3 * DAY}: 3 ran, 1 failed" in text, text
    assert (
        f"failed   StgQsrPos {killed}: its worker process died (killed by signal 9, SIGKILL: out of memory, or killed)"
        in text
    ), text
    assert "not run" not in text, text


def test_a_single_run_process_killed_mid_build_fails_its_dates_saying_so(lab):
    """kill -9 of one of a single run's build processes: the dates of its stretch not reported are failed, each
    line says the process died and how (before: `not run ... luigid gave it to another host`, with no luigid)."""
    import json

    start = dt.date(2026, 9, 1)
    lab.qsr_days(start, 5)
    killed = start + 2 * DAY  # the first date of the second process's stretch (2 processes, 2 dates each)
    cwd = cron_folder(lab)
    plan = {"counter": str(lab.root / "steps"), "root": str(lab.data), "date": str(killed), "at": 1, "mode": "kill"}
    env = {k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PATH"} | {"CRASH_PLAN": json.dumps(plan)}
    args = ["RangeSingleRun", "--of", "StgQsrPos", "--start", str(start), "--stop", str(start + 4 * DAY)]
    driver = Path(__file__).resolve().parent / "crash_driver.py"
    proc = subprocess.run(
        [sys.executable, str(driver), *args, "--local-scheduler"], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 30, proc.stderr[-3000:]
    text = proc.stderr[proc.stderr.index("summary of this run") :]
    died = "its worker process died (killed by signal 9, SIGKILL: out of memory, or killed)"
    for day in (killed, killed + DAY):
        assert f"failed   StgQsrPos {day}: {died}" in text, text
    assert "not run" not in text and "luigid" not in text, text


def test_two_data_roots_run_one_command_at_once_and_one_data_root_takes_turns(lab):
    """Cron lines of two data roots on one machine (the same command in two folders) both run; the same
    command on the same data root waits its turn: one line naming the data root and the run, exit 10."""
    import fcntl

    day = dt.date(2026, 9, 1)
    lab.qsr_days(day, 1)
    env = {k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PATH"}
    env["TMPDIR"] = str(lab.root / "tmp")  # Luigi's own lock folder, $TMPDIR/luigi, this test's alone
    (lab.root / "tmp").mkdir()
    args = [sys.executable, "-m", "luigi", "--module", "tasks", "StgQsrPos", "--date", str(day), "--local-scheduler"]

    def run(cwd: Path) -> subprocess.CompletedProcess:
        return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)

    def folder(name: str, raw: Path, data: Path, extra: str = "") -> Path:
        path = lab.root / name
        path.mkdir()
        (path / "luigi.cfg").write_text(f"[daybreak]\nraw_root = {raw}\ndata_root = {data}\n{extra}")
        return path

    other = lab.root / "other"
    shutil.copytree(lab.raw, other / "raw")
    lock = lab.data / "_state" / "locks" / "staging" / "qsr_pos" / f"business_date={day}.lock"
    lock.parent.mkdir(parents=True)
    with open(lock, "a+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # the first run waits for its partition: a long build
        log = open(lab.root / "first.log", "w+")  # noqa: SIM115 - read at the end
        first = subprocess.Popen(args, cwd=folder("a", lab.raw, lab.data, "lock_wait_s = 120\n"), env=env,
                                 stdout=log, stderr=log)  # fmt: skip
        try:
            while not opened(first.pid, lock):  # it took Luigi's lock, then opened the partition's
                assert first.poll() is None, (lab.root / "first.log").read_text()
                time.sleep(0.05)

            second_root = run(folder("b", other / "raw", other / "data"))
            assert second_root.returncode == 0, second_root.stdout + second_root.stderr[-3000:]
            assert (other / "data" / "staging" / "qsr_pos" / f"business_date={day}").is_dir()

            same_root = run(folder("a2", lab.raw, lab.data))
            assert same_root.returncode == 10, same_root.stdout + same_root.stderr
            assert same_root.stdout == ""
            assert same_root.stderr == (
                f"daybreak: error: another run of this command on data root {lab.data} is running (pid "
                f"{first.pid}); this one ran nothing (exit 10): let that one end, then run the command again if "
                "it is still needed\n"
            )

            # a lock folder set by hand is Luigi's, for every data root: the first run's
            (shared,) = {p.parent for p in (lab.root / "tmp").rglob("*.pid") if p.read_text() == f"{first.pid}\n"}
            third = run(folder("c", other / "raw", other / "data", f"[core]\nlock_pid_dir = {shared}\n"))
            assert third.returncode == 10, third.stdout + third.stderr
            assert third.stderr.startswith(
                f"daybreak: error: another run of this command in lock folder {shared} ([core] lock_pid_dir) is "
                f"running (pid {first.pid}); "
            ), third.stderr
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
            assert first.wait(timeout=300) == 0, (lab.root / "first.log").read_text()
            log.close()


def opened(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (Linux)."""
    for fd in Path(f"/proc/{pid}/fd").glob("*"):
        with contextlib.suppress(OSError):
            if os.readlink(fd) == str(path):
                return True
    return False
