"""Who built a partition: every manifest records the host (``[daybreak] host_name``, the machine's host name by
default), the process and the Luigi worker that committed it; `daybreak status --json` shows it, and luigid's
task history names the configured host too."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time

import pytest

from tasks import cli
from tasks.settings import write_config
from tests.sshd import free_port

pytestmark = pytest.mark.luigi

START = dt.date(2026, 9, 10)
DAY = dt.timedelta(days=1)


def built_by(lab, day: dt.date) -> dict:
    return json.loads((lab.partition(day) / "_manifest.json").read_text())["built_by"]


def test_each_manifest_names_the_host_process_and_luigi_worker_that_committed_it(lab, setting, capsys):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 3)
    assert lab.range(START, START + DAY) == 0
    mine = built_by(lab, START)
    assert mine["host"] == socket.gethostname()  # by default, the machine's
    assert mine["pid"] == os.getpid()  # one worker: the task runs in this process
    assert mine["worker"].startswith("Worker(") and f"pid={os.getpid()}" in mine["worker"]

    setting("daybreak", "host_name", "etl-a")
    assert lab.range(START, START + 3 * DAY, "--workers", "2") == 0
    forked = built_by(lab, START + DAY)
    assert forked["host"] == "etl-a" and forked["pid"] != os.getpid()  # the task process that committed it
    assert "host=etl-a" in forked["worker"] and f"pid={os.getpid()}" in forked["worker"]  # the scheduling worker
    assert built_by(lab, START) == mine  # up to date: not rebuilt

    capsys.readouterr()
    assert (
        cli.main(
            ["status", "--json", "--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(START + 2 * DAY)]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert [r["built_by"] for r in rows] == [mine, forked]


@pytest.mark.unit
def test_a_host_name_that_is_no_host_name_is_one_line_and_exit_2(lab, tmp_path):
    cfg = write_config(
        tmp_path / "bad.cfg", {"daybreak": {"raw_root": lab.raw, "data_root": lab.data, "host_name": "etl a"}}
    )
    lab.raw.mkdir(parents=True, exist_ok=True)
    proc = lab.cli(
        "RangeDaily",
        "--of",
        "StgQsrPos",
        "--start",
        str(START),
        "--stop",
        str(START + DAY),
        "--local-scheduler",
        env={"LUIGI_CONFIG_PATH": str(cfg)},
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        f"daybreak: error: [daybreak] host_name = 'etl a' in {cfg}: expected a host name: letters, digits, '.', '_' "
        "and '-', at most 253"
    )


@pytest.mark.system
def test_luigids_task_history_names_the_configured_host(lab):
    """Two hosts' workers on one real luigid (``daybreak scheduler``, SQLite history): each task's RUNNING is
    recorded with the host_name of the worker that ran it, not the machine's host name shared by both."""
    lab.qsr_days(START, 4)
    port = free_port()
    sections = {"data_root": lab.data, "raw_root": lab.raw}
    core = {"scheduler_host": "127.0.0.1", "scheduler_port": port}
    cfg = write_config(lab.root / "sched.cfg", {"daybreak": sections, "core": core})
    code = f"from tasks.cli import main; main(['scheduler', '--port', '{port}'])"
    server = subprocess.Popen(
        [sys.executable, "-c", code], cwd=lab.root, env={**os.environ, "LUIGI_CONFIG_PATH": str(cfg)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        for name, first in (("etl-a", START), ("etl-b", START + 2 * DAY)):
            host_cfg = write_config(
                lab.root / f"{name}.cfg", {"daybreak": {**sections, "host_name": name}, "core": core}
            )
            args = ["RangeDaily", "--of", "StgQsrPos", "--start", str(first), "--stop", str(first + 2 * DAY)]
            proc = lab.cli(*args, env={"LUIGI_CONFIG_PATH": str(host_cfg)})
            assert proc.returncode == 0, proc.stderr[-3000:]
        history = sqlite3.connect(lab.data / "_state/luigid/history.db")
        running = history.execute(
            "select p.value, t.host from task_events e join tasks t on e.task_id = t.id "
            "join task_parameters p on p.task_id = t.id and p.name = 'date' "
            "where t.name = 'StgQsrPos' and e.event_name = 'RUNNING' order by p.value"
        ).fetchall()
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert running == [(str(START + i * DAY), "etl-a" if i < 2 else "etl-b") for i in range(4)]
    assert {built_by(lab, START + i * DAY)["host"] for i in range(4)} == {"etl-a", "etl-b"}
