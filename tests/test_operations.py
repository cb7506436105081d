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
