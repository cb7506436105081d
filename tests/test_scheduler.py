"""daybreak scheduler: a real luigid on 127.0.0.1 with its state and SQLite history under the data root."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request

import pytest

from tasks.settings import write_config
from tests.sshd import free_port

pytestmark = pytest.mark.system

START = dt.date(2026, 9, 10)


def listening_on(port: int) -> set[str]:
    """Local addresses (hex, as /proc/net/tcp gives them) listening on ``port``."""
    with open("/proc/net/tcp") as fh:
        rows = [line.split() for line in fh.readlines()[1:]]
    return {r[1].split(":")[0] for r in rows if r[1].endswith(f":{port:04X}") and r[3] == "0A"}


def test_a_backfill_through_daybreak_scheduler_is_in_its_task_list_and_history(lab):
    lab.qsr_days(START, 3)
    port = free_port()
    cfg = write_config(
        lab.root / "sched.cfg",
        {
            "daybreak": {"raw_root": lab.raw, "data_root": lab.data},
            "core": {"scheduler_host": "127.0.0.1", "scheduler_port": port},
        },
    )
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg)}
    code = f"from tasks.cli import main; main(['scheduler', '--port', '{port}'])"
    server = subprocess.Popen(
        [sys.executable, "-c", code], cwd=lab.root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        assert listening_on(port) == {"0100007F"}  # 127.0.0.1 only, not every interface
        args = ["RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + dt.timedelta(days=3))]
        proc = subprocess.run(
            [sys.executable, "-m", "luigi", "--module", "tasks", *args],
            cwd=lab.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        listed = urllib.request.urlopen(f"http://127.0.0.1:{port}/api/task_list?data=%7B%7D").read().decode()
        assert all(f"StgQsrPos(date={START + dt.timedelta(days=k)})" in listed for k in range(3))
        history = lab.data / "_state/luigid/history.db"
        names = {row[0] for row in sqlite3.connect(history).execute("select name from tasks")}
        assert "StgQsrPos" in names
        assert (lab.data / "_state/luigid/logs").is_dir()
    finally:
        server.terminate()
        server.wait(timeout=10)


def _resource_totals(lab, cfg_text: str) -> dict[str, int]:
    """Start ``daybreak scheduler`` from a folder whose luigi.cfg is ``cfg_text`` (as cron or a systemd
    unit would), and read the resource caps the real luigid reports."""
    folder = lab.root / "sched"
    folder.mkdir(exist_ok=True)
    (folder / "luigi.cfg").write_text(cfg_text)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PATH"}
    code = f"from tasks.cli import main; main(['scheduler', '--port', '{port}'])"
    server = subprocess.Popen(
        [sys.executable, "-c", code], cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/api/resource_list", timeout=2).read()
                break
            except OSError:
                time.sleep(0.1)
        return {r["name"]: r["num_total"] for r in json.loads(body)["response"]}
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_luigid_gets_the_sftp_cap_of_the_users_config_or_the_packages(lab):
    roots = f"[daybreak]\nraw_root = {lab.raw}\ndata_root = {lab.data}\n"
    assert _resource_totals(lab, roots + "[resources]\nsftp = 3\n") == {"sftp": 3}
    assert _resource_totals(lab, roots) == {"sftp": 4}  # the package's default, not luigid's 1 slot


def _free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_plan_proposes_the_local_scheduler_unless_core_names_a_scheduler(lab, setting, capsys):
    """A luigid answering on Luigi's default address (127.0.0.1:8082) is anyone's: the plan's run line
    used to drop --local-scheduler for it, and its run then joined that scheduler. Only a scheduler that
    [core] names is used. (The luigid on 8082 is started only when the port is free.)"""
    from tasks.cli import main
    from tests.luigid import Luigid

    lab.qsr_days(START, 2)
    args = ["plan", "stg_qsr_pos", "--start", str(START), "--stop", str(START + dt.timedelta(days=2))]
    args += ["--workers", "2"]
    anyones = Luigid(lab.root / "anyone", port=8082).start() if _free(8082) else None
    try:
        assert main(args) == 1
        line = capsys.readouterr().out.splitlines()[-1]  # one run for the range (a process per core)
        stop = START + dt.timedelta(days=2)
        assert line.endswith(f"RangeSingleRun --of StgQsrPos --start {START} --stop {stop} --local-scheduler"), line
    finally:
        if anyones:
            anyones.stop()
    ours = Luigid(lab.root / "ours").start()
    try:
        setting("core", "scheduler_port", ours.port)
        assert main(args) == 1
        line = capsys.readouterr().out.splitlines()[-1]
        assert line.endswith(f"--stop {START + dt.timedelta(days=2)} --workers 2"), line
    finally:
        ours.stop()


def test_daybreak_scheduler_on_a_bucket_data_root_needs_no_credentials_and_says_where_it_listens(lab):
    """luigid never touches the store: with data_root in a bucket, no AWS credentials anywhere and the
    store's endpoint down, it starts, prints one line with its address and state folder, and serves."""
    port = free_port()
    cfg = write_config(
        lab.root / "sched.cfg",
        {
            "daybreak": {"raw_root": lab.raw, "data_root": "s3://lake/daybreak", "cache_dir": lab.root / "cache"},
            "s3": {"endpoint_url": f"http://127.0.0.1:{free_port()}"},  # nothing listens there
        },
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        LUIGI_CONFIG_PATH=str(cfg),
        HOME=str(lab.root),  # no ~/.aws
        AWS_SHARED_CREDENTIALS_FILE=str(lab.root / "none"),
        AWS_CONFIG_FILE=str(lab.root / "none"),
        AWS_EC2_METADATA_DISABLED="true",
    )
    code = f"from tasks.cli import main; main(['scheduler', '--port', '{port}'])"
    server = subprocess.Popen(
        [sys.executable, "-c", code], cwd=lab.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = server.stdout.readline().strip()  # printed once luigid accepts connections
        state = lab.root / "cache/s3/lake/daybreak/_state/luigid"
        assert line == (
            f"daybreak scheduler: luigid listening on http://127.0.0.1:{port} (visualiser, and /history), "
            f"state in {state}"
        ), (line, server.poll(), server.stderr.read() if server.poll() is not None else "")
        listed = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/task_list?data=%7B%7D").read())
        assert listed["response"] == {}
        assert (state / "logs").is_dir()
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert server.returncode != 2
