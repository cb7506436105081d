"""daybreak scheduler: a real luigid on 127.0.0.1 with its state and SQLite history under the data root."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

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
        # one worker here, but other hosts may take dates from the same scheduler: one task a date
        assert main([*args[:-1], "1"]) == 1
        line = capsys.readouterr().out.splitlines()[-1]
        assert line.endswith(f"RangeDaily --of StgQsrPos --start {START} --stop {START + dt.timedelta(days=2)}"), line
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


def _host_env(lab, name: str, port: int) -> dict[str, str]:
    """A host of its own (its own lock folder: Luigi refuses a second identical command per folder) that
    names the luigid on ``port``."""
    tmp = lab.root / name
    tmp.mkdir(exist_ok=True)
    roots = {"raw_root": lab.raw, "data_root": lab.data, "host_name": name}
    cfg = write_config(
        tmp / "luigi.cfg", {"daybreak": roots, "core": {"scheduler_host": "127.0.0.1", "scheduler_port": port}}
    )
    return {**os.environ, "LUIGI_CONFIG_PATH": str(cfg), "TMPDIR": str(tmp)}


def _range(days: int, family: str = "RangeDaily") -> list[str]:
    stop = START + dt.timedelta(days=days)
    return [sys.executable, "-m", "luigi", "--module", "tasks", family, "--of", "StgQsrPos",
            "--start", str(START), "--stop", str(stop)]  # fmt: skip


def test_a_luigid_that_does_not_answer_at_the_start_is_one_line_and_exit_2(lab):
    """A wrong [core] scheduler_port: Luigi's own retries took 65 s and printed 203 lines of tracebacks
    (exit 40). Now one line naming the address, exit 2, within 30 s, nothing built."""
    lab.qsr_days(START, 3)
    port = free_port()  # nothing listens there
    t0 = time.monotonic()
    proc = subprocess.run(_range(3), cwd=lab.root, env=_host_env(lab, "h", port), capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    took = time.monotonic() - t0
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert (proc.stdout + proc.stderr).strip().splitlines() == [
        f"daybreak: error: the central scheduler (luigid) at http://127.0.0.1:{port} does not answer (connection "
        "refused): start it with daybreak scheduler, or run with --local-scheduler"
    ]
    assert took < 30, f"{took:.1f} s"
    assert not (lab.data / "staging").exists()


def test_a_luigid_killed_mid_run_ends_each_host_with_one_line_and_exit_30_and_a_rerun_completes(lab):
    """Two hosts on one luigid, which is killed (SIGKILL) mid-range: Luigi's own retries ended each host
    after 61 s with exit 40, five tracebacks and no summary. Now each ends within 60 s (the retries, then
    the builds it was running) with one line naming luigid and exit 30, then Daybreak's summary; the
    partitions built are whole, and a rerun once luigid is back builds the rest."""
    from tests.luigid import Luigid

    days, stores = 30, tuple(f"S{k:03d}" for k in range(1, 41))
    lab.qsr_days(START, days, stores)
    server = Luigid(lab.root / "luigid").start()
    try:
        envs = [_host_env(lab, f"h{k}", server.port) for k in range(2)]
        hosts = [
            subprocess.Popen([*_range(days), "--workers", "2"], cwd=lab.root, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
            for env in envs
        ]  # fmt: skip
        built = lambda: len(list((lab.data / "staging" / "qsr_pos").glob("*/_manifest.json")))  # noqa: E731

        def builders() -> set:  # both hosts must be on luigid before it goes (a slow start: connection refused)
            found = set()
            for path in (lab.data / "staging" / "qsr_pos").glob("*/_manifest.json"):
                with contextlib.suppress(OSError, ValueError):
                    found.add((json.loads(path.read_text()).get("built_by") or {}).get("host"))
            return found

        deadline = time.monotonic() + 120
        while (built() < 3 or len(builders()) < 2) and time.monotonic() < deadline:
            time.sleep(0.02)
        server.proc.kill()  # SIGKILL: luigid gone mid-run
        killed = time.monotonic()
        outs = [host.communicate(timeout=120)[0] for host in hosts]
        took = time.monotonic() - killed
    finally:
        server.stop()
    assert 3 <= built() < days
    url = f"http://127.0.0.1:{server.port}"
    for host, out in zip(hosts, outs, strict=True):
        assert host.returncode == 30, out[-3000:]
        errors = [line for line in out.splitlines() if line.startswith("daybreak: error:")]
        assert len(errors) == 1 and errors[0].startswith(
            f"daybreak: error: the central scheduler (luigid) at {url} stopped answering ("
        ), out[-3000:]
        assert "Start luigid again (daybreak scheduler) and run the same command to finish" in errors[0]
        after = out[out.index(errors[0]) :].splitlines()
        assert after[1].startswith("INFO: summary of this run: "), out[-3000:]
        assert "(luigid stopped answering before they ran)" in out
        assert "Traceback" not in out and "Luigi Execution Summary" not in out
    assert took < 60, f"{took:.1f} s"
    again = Luigid(lab.root / "luigid", port=server.port).start()
    try:
        rerun = subprocess.run(_range(days), cwd=lab.root, env=envs[0], capture_output=True, text=True, timeout=300)
    finally:
        again.stop()
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert built() == days


def test_the_checked_scheduler_answers_as_luigis_own_then_gives_up_after_luigis_attempts(lab, setting):
    """tasks/luigi_shortcuts/remote.py against a real luigid: while it answers, the same answers as Luigi's
    RemoteScheduler (whose attributes it reads: its fetcher, attempts, wait, timeout); once it is gone, one
    request waits out [core] rpc_retry_attempts x rpc_retry_wait, and every later one returns at once."""
    from luigi.rpc import RemoteScheduler

    from tasks.luigi_shortcuts import remote
    from tests.luigid import Luigid

    setting("core", "rpc_retry_attempts", 2)
    setting("core", "rpc_retry_wait", 1)
    server = Luigid(lab.root / "luigid").start()
    url = f"http://127.0.0.1:{server.port}/"
    try:
        ours, luigis = remote.CheckedScheduler(url), RemoteScheduler(url)
        ours.add_task(worker="w", task_id="T1", status="PENDING", runnable=True)
        assert ours.get_work(worker="w", host="h")["task_id"] == "T1"
        running = ours.task_list("RUNNING", "")
        assert list(running) == ["T1"] and running == luigis.task_list("RUNNING", "")
        assert ours.is_paused() == luigis.is_paused() == {"paused": False}
    finally:
        server.stop()
    t0 = time.monotonic()
    assert ours.get_work(worker="w", host="h")["worker_state"] == "disabled"
    assert 1 <= time.monotonic() - t0 < 5  # two attempts, 1 s apart
    assert ours.lost == "connection refused" and url.rstrip("/") in remote.lost()
    t0 = time.monotonic()
    assert ours.ping(worker="w") is None and ours.add_task(worker="w", task_id="T1", status="DONE") is None
    assert time.monotonic() - t0 < 0.5


@pytest.mark.parametrize("family", ["RangeDaily", "RangeSingleRun"])
def test_a_rerun_that_luigid_keeps_from_its_partitions_for_the_cooldown_exits_25_not_10(lab, family):
    """A range built on luigid, then the threshold changed and the range run again at once: luigid counts the
    partitions done for [scheduler] stable_done_cooldown_secs and hands none out. Not run, exit 25 ("the
    scheduler did not let a task run"; it exited 10, the code of a run superseded: upgrade this host); a
    rerun after the cooldown builds them."""
    from tests.luigid import Luigid

    lab.qsr_days(START, 4)
    server = Luigid(lab.root / "luigid").start()
    try:
        env = _host_env(lab, "h", server.port)
        first = subprocess.run(_range(4, family), cwd=lab.root, env=env, capture_output=True, text=True, timeout=300)
        assert first.returncode == 0, first.stderr[-3000:]
        roots = {"raw_root": lab.raw, "data_root": lab.data}
        scheduler = {"scheduler_host": "127.0.0.1", "scheduler_port": server.port}
        overrides = {"daybreak": roots, "core": scheduler, "qsr": {"suspicious_qty_threshold": 15}}
        write_config(Path(env["LUIGI_CONFIG_PATH"]), overrides)
        again = subprocess.run(_range(4, family), cwd=lab.root, env=env, capture_output=True, text=True, timeout=300)
        assert again.returncode == 25, again.stderr[-3000:]
        assert f"StgQsrPos {START} .. {START + dt.timedelta(days=3)}: 4 not run" in again.stderr
        assert "Rerun in a few seconds" in again.stderr
        time.sleep(10)  # luigid's stable_done_cooldown_secs
        later = subprocess.run(_range(4, family), cwd=lab.root, env=env, capture_output=True, text=True, timeout=300)
        assert later.returncode == 0, later.stderr[-3000:]
        assert f"StgQsrPos {START} .. {START + dt.timedelta(days=3)}: 4 ran" in later.stderr
    finally:
        server.stop()
