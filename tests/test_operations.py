"""Operations as a user runs them (issue 15): the morning refresh from cron, the command ``plan``
prints, the volume and content of a backfill's output."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

from tasks.backfill import business_today
from tests.conftest import Lab

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
    today = business_today()
    lab.qsr_days(today - 2 * DAY, 1)  # folders today-2 and today-1
    proc = luigi_cmd(cron_folder(lab), "MorningRefresh", "--local-scheduler")
    assert proc.returncode == 20, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert f"source=qsr_pos, date={today}" in proc.stderr or f"qsr_pos/{today}" in proc.stderr


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
