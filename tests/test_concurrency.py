"""Two backfills of the same range at once (a cron run and one started by hand): each partition is
built once, the other run waits for it and finds it done, and the data equals a single run's."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.system

START = dt.date(2026, 9, 10)
DAYS = 16


def test_two_local_scheduler_backfills_at_once_build_each_partition_once(lab):
    lab.qsr_days(START, DAYS)
    cfg = lab.write_cfg(lab.root / "luigi.cfg")
    stop = START + dt.timedelta(days=DAYS)
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg)}

    def backfill(family: str, workers: int) -> subprocess.Popen:
        cmd = [sys.executable, "-m", "luigi", "--module", "tasks", family, "--of", "StgQsrPos"]
        cmd += ["--start", str(START), "--stop", str(stop), "--workers", str(workers), "--local-scheduler"]
        cmd += ["--log-level", "INFO"]  # each partition's "wrote" line
        return subprocess.Popen(cmd, cwd=lab.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    # two different commands (Luigi's own lock stops a second identical one), each with its own scheduler
    runs = [backfill("RangeDaily", 2), backfill("RangeDaily", 3)]
    logs = [p.communicate(timeout=300)[1] for p in runs]
    assert [p.returncode for p in runs] == [0, 0], logs[0][-2000:] + logs[1][-2000:]
    writes = [line for log in logs for line in log.splitlines() if ": wrote " in line and "StgQsrPos_" in line]
    assert len(writes) == DAYS, writes  # each partition written by exactly one of the two runs
    # each summary counts what its own run wrote (both said "16 ran"), and names what the other one wrote
    counts = []
    for log in logs:
        line = next(x for x in log.splitlines() if f"StgQsrPos {START} .. {stop - dt.timedelta(days=1)}: " in x)
        counts.append({kind: int(n) for n, kind in re.findall(r"(\d+) ([a-z ]+?)(?:,|$)", line.split(": ", 1)[1])})
    own = [sum(": wrote " in x and "StgQsrPos_" in x for x in log.splitlines()) for log in logs]
    assert [c.get("ran", 0) for c in counts] == own and sum(own) == DAYS, counts
    for mine, theirs, log in ((counts[0], own[1], logs[0]), (counts[1], own[0], logs[1])):
        assert mine.get("written by another run", 0) <= theirs
        assert sum(mine.values()) == DAYS, mine
        assert ("another run wrote StgQsrPos" in log) == bool(mine.get("written by another run")), log[-2000:]
    concurrent = {p.name: pq.read_table(p / "data.parquet") for p in (lab.data / "staging/qsr_pos").iterdir()}

    # a single run into a fresh data root, for reference: the same partitions, the same rows
    single_cfg = lab.write_cfg(lab.root / "single.cfg")
    single_cfg.write_text(single_cfg.read_text().replace(str(lab.data), str(lab.root / "single")))
    args = ["RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(stop), "--local-scheduler"]
    assert lab.cli(*args, env={"LUIGI_CONFIG_PATH": str(single_cfg)}).returncode == 0
    single = {p.name: pq.read_table(p / "data.parquet") for p in (lab.root / "single/staging/qsr_pos").iterdir()}
    assert sorted(concurrent) == sorted(single) and len(single) == DAYS
    assert all(concurrent[k].equals(single[k]) for k in single)  # no double counting, nothing missing
    assert lab.range(START, stop) == 0 and lab.rebuilt_by(lambda: lab.range(START, stop)) == set()
