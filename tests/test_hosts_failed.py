"""Two hosts on one luigid (a real one, tests/luigid.py), one local data root: a partition that fails fails
the run of both hosts, the one that built it and the one that waited for it (docs/scale-out.md)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys

import pytest

from tasks.settings import write_config
from tests.conftest import QSR_HEADER, REPO
from tests.luigid import Luigid

pytestmark = pytest.mark.system

START = dt.date(2026, 9, 1)
DAYS = 8
BROKEN = START + (DAYS - 1) * dt.timedelta(days=1)  # reads folder BROKEN + 1, whose S003 lacks a column


def host(lab, name: str, port: int) -> subprocess.Popen:
    """The range of StgQsrPos as host ``name``: a process of its own, its own HOME, TMPDIR and cache."""
    home = lab.root / "hosts" / name
    (home / "tmp").mkdir(parents=True)
    cfg = write_config(
        home / "luigi.cfg",
        {
            "daybreak": {
                "raw_root": lab.raw, "data_root": lab.data, "start_date": START, "host_name": name,
                "cache_dir": home / "cache",
            },
            "core": {"scheduler_host": "127.0.0.1", "scheduler_port": port},
        },
    )  # fmt: skip
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(home / "tmp"), "LUIGI_CONFIG_PATH": str(cfg)}
    stop = START + DAYS * dt.timedelta(days=1)
    args = ["RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(stop), "--workers", "2"]
    cmd = [sys.executable, "-m", "luigi", "--module", "tasks", *args]
    return subprocess.Popen(cmd, cwd=home, env={**env, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip


def test_a_partition_another_host_failed_fails_the_run_of_every_host_that_asked_for_it(lab, tmp_path):
    stores = [f"S00{k}" for k in range(1, 10)] + ["S010"]
    lab.qsr_days(START, DAYS, tuple(stores))
    broken = lab.raw / "qsr_pos" / str(BROKEN + dt.timedelta(days=1)) / "S003.csv"
    broken.write_text(broken.read_text().replace(QSR_HEADER, QSR_HEADER.removesuffix(",status")))
    server = Luigid(tmp_path / "luigid").start()
    try:
        for turn in range(2):  # both rounds: the partition fails again on whichever host luigid hands it
            hosts = [host(lab, f"etl-{k}-{turn}", server.port) for k in (1, 2)]
            outs = [p.communicate(timeout=240)[0] for p in hosts]
            summaries = [out[out.index("summary of this run") :] for out in outs]
            for out in outs:  # nothing disconnected: a failure is not a lost host's task to take back
                assert "disconnected from luigid" not in out, out
            for summary in summaries:  # the same answer on each host: the broken partition failed
                assert "1 failed" in summary and f"failed   StgQsrPos {BROKEN}" in summary, summary
                assert "'status'" in summary, summary
            assert [p.returncode for p in hosts] == [30, 30], summaries
            # a host that did not build it names the one that did: its settings, its hotels list may differ
            names = [s.split(f"failed   StgQsrPos {BROKEN}")[1].split(":")[0] for s in summaries]
            for k, name in zip((1, 2), names, strict=True):  # each its own failure, or one the other host built
                assert name in ("", f" (on host etl-{3 - k}-{turn})"), names
    finally:
        server.stop()
