"""Two hosts on one luigid (a real one, tests/luigid.py), one local data root: a partition that fails fails
the run of both hosts, the one that built it and the one that waited for it; one that could not run, as what it
reads changed, is not run on both (docs/scale-out.md)."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tasks.settings import write_config
from tests.conftest import QSR_HEADER, REPO
from tests.luigid import Luigid

pytestmark = pytest.mark.system

START = dt.date(2026, 9, 1)
DAYS = 8
BROKEN = START + (DAYS - 1) * dt.timedelta(days=1)  # reads folder BROKEN + 1, whose S003 lacks a column


def host(lab, name: str, port: int, *args: str, hold: dict | None = None) -> subprocess.Popen:
    """The range of StgQsrPos (or ``args``) as host ``name``: a process of its own, its own HOME, TMPDIR and
    cache. With ``hold`` ({"date": D, "flag": F}), its build of StgQsrPos D waits for the test (:data:`HOLDING`)."""
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
    args = args or ("RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(stop), "--workers", "2")
    cmd = [sys.executable, "-m", "luigi", "--module", "tasks", *args]
    if hold:
        env["HOLD"] = json.dumps(hold)
        cmd = [sys.executable, "-c", HOLDING, *args]
    return subprocess.Popen(cmd, cwd=home, env={**env, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip


# ``luigi --module tasks <args>`` whose build of StgQsrPos HOLD["date"] waits for the test as it starts and
# once it has committed: it creates <flag>.start (<flag>.success), then waits for <flag>.start.go (.success.go)
HOLDING = textwrap.dedent(
    """
    import json, os, sys, time
    import luigi, luigi.retcodes
    from tasks.qsr import StgQsrPos

    HOLD = json.loads(os.environ["HOLD"])

    def hold(event):
        def wait(task):
            if str(task.date) == HOLD["date"]:
                open(f"{HOLD['flag']}.{event}", "w").close()
                while not os.path.exists(f"{HOLD['flag']}.{event}.go"):
                    time.sleep(0.1)
        StgQsrPos.event_handler(getattr(luigi.Event, event.upper()))(wait)

    hold("start")
    hold("success")
    luigi.retcodes.run_with_retcodes(["--module", "tasks", *sys.argv[1:]])
    """
)


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


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while not path.exists():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[0]
        time.sleep(0.1)


def _workers_wanting(port: int, family: str) -> int:
    """How many workers luigid counts as wanting its pending task of ``family`` (0: none pending)."""
    query = urllib.parse.quote(json.dumps({"status": "PENDING", "upstream_status": ""}))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/task_list?data={query}", timeout=10) as response:
        listed = json.load(response)["response"]
    return max((len(info.get("workers") or ()) for key, info in listed.items() if key.startswith(family)), default=0)


def test_a_partition_whose_staging_changed_before_it_ran_is_not_run_on_every_host_that_wanted_it(lab, tmp_path):
    """Hosts A and B on one luigid both want store S001, which reads the staging dates. A builds the last one
    (the others built before) while B waits for it; then a file is copied into that partition, which makes it
    stale. Luigi refuses to run S001 on whichever host gets it (a requirement not complete at run time). Before,
    the host that built none of it exited 10 and said "a partition it reads failed or waits"; now both hosts
    exit 25 and name the staging date that changed."""
    days = 3
    lab.qsr_days(START, days + 1, ("S001", "S002"))
    last = START + (days - 1) * dt.timedelta(days=1)
    assert lab.range(START, last) == 0  # every staging date but the last
    server = Luigid(tmp_path / "luigid").start()
    flag = tmp_path / "a"
    store = ("StoreDailySales", "--store-id", "S001")
    a = b = None
    try:
        a = host(lab, "etl-a", server.port, *store, hold={"date": str(last), "flag": str(flag)})
        _wait_for(Path(f"{flag}.start"), a)  # A builds the last date
        b = host(lab, "etl-b", server.port, *store)
        deadline = time.monotonic() + 120
        while _workers_wanting(server.port, "StoreDailySales_S001") < 2:  # B waits for it, and S001, too
            assert time.monotonic() < deadline and b.poll() is None, b.communicate()[0]
            time.sleep(0.2)
        Path(f"{flag}.start.go").touch()
        _wait_for(Path(f"{flag}.success"), a)  # A has committed it
        folder = lab.data / "staging" / "qsr_pos" / f"business_date={last}"
        shutil.copy(folder / "data.parquet", folder / "part-1.parquet")
        Path(f"{flag}.success.go").touch()
        outs = [p.communicate(timeout=240)[0] for p in (a, b)]
    finally:
        for proc in (a, b):  # a host held or waiting when the test failed
            if proc is not None and proc.poll() is None:
                proc.kill()
        server.stop()
    for name, proc, out in zip("ab", (a, b), outs, strict=True):
        summary = out[out.index("summary of this run") :]
        assert proc.returncode == 25, f"host {name} exited {proc.returncode}:\n{summary}"
        assert f"StgQsrPos {last}" in summary and "now stale: stray file" in summary, summary
        assert "a partition it reads failed or waits" not in summary and "failed" not in summary, summary
        assert "stable_done_cooldown_secs" not in summary, summary  # one line for the date: what changed
    (folder / "part-1.parquet").unlink()
    assert lab.luigi(*store) == 0
