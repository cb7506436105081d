"""Daybreak's safety settings come with the package, not with the repository's luigi.cfg (issue 15, item 1).

Each test runs the real ``luigi`` command as cron would: from a folder outside the repository, with a
luigi.cfg there that sets only the two roots (docs/operations.md), and no $LUIGI_CONFIG_PATH.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Lab

pytestmark = pytest.mark.system

START = dt.date(2026, 3, 2)  # long before today (2026-12 on the machines of this repo): beyond days_back 100


def _minimal_cfg(lab: Lab) -> Path:
    """A cron-style folder of its own (not the lab's root, the working directory of the in-process
    tests, whose ./luigi.cfg Luigi would then read into this process too)."""
    cron = lab.root / "cron"
    cron.mkdir(exist_ok=True)
    cfg = cron / "luigi.cfg"
    # start_date too: the dates of these tests are before the built-in default, which a range leaves out
    cfg.write_text(f"[daybreak]\nraw_root = {lab.raw}\ndata_root = {lab.data}\nstart_date = 2026-01-01\n")
    return cfg


def _luigi(lab: Lab, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PATH"}
    cmd = [sys.executable, "-m", "luigi", "--module", "tasks", *args, "--local-scheduler"]
    return subprocess.run(cmd, cwd=lab.root / "cron", env=env, capture_output=True, text=True, timeout=600)


def _built(lab: Lab) -> set[dt.date]:
    return set(lab.built_at())


def test_a_long_old_range_is_built_whole_and_a_blocked_one_exits_20(lab):
    """62 dates, raw data for 60 (folders START .. START+60): Luigi's own defaults would build 50
    (task_limit) of nothing (the range ended more than days_back ago) and exit 0 either way."""
    lab.qsr_days(START, 60, stores=("S001",))
    _minimal_cfg(lab)
    stop = START + dt.timedelta(days=62)
    proc = _luigi(lab, "RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(stop), "--workers", "2")
    assert proc.returncode == 20, proc.stderr[-3000:]
    assert _built(lab) == {START + dt.timedelta(days=i) for i in range(60)}


def test_a_failed_partition_exits_30_without_the_repository_config(lab):
    lab.qsr_days(START, 1, stores=("S001",))
    lab.qsr_file(START.isoformat(), "S002", ["not,a,valid,row"], header="order_id,line_no,store")
    _minimal_cfg(lab)
    proc = _luigi(lab, "StgQsrPos", "--date", str(START))
    assert proc.returncode == 30, proc.stderr[-3000:]
    assert "S002.csv" in proc.stderr


def test_a_users_config_still_overrides_the_package_defaults(lab):
    lab.qsr_days(START, 1, stores=("S001",))
    with open(_minimal_cfg(lab), "a") as fh:
        fh.write("[retcode]\nmissing_data = 3\n")
    proc = _luigi(lab, "StgQsrPos", "--date", str(START + dt.timedelta(days=5)))
    assert proc.returncode == 3, proc.stderr[-3000:]
