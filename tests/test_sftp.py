"""The raw zone over SFTP, against a real OpenSSH server on 127.0.0.1 (no mock, no in-process fake)."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasks.settings import write_config
from tests.sshd import keygen

pytestmark = pytest.mark.system

START = dt.date(2026, 9, 10)


@pytest.fixture
def over_sftp(lab, sshd, setting):
    """The lab's raw zone served by sshd; raw_root points at it."""
    setting("daybreak", "raw_root", sshd.uri(lab.raw))
    setting("sftp", "key_filename", sshd.client_key)
    setting("sftp", "known_hosts", sshd.known_hosts)
    setting("sftp", "retries", 1)
    return lab


def sftp_config(lab, sshd, **sftp) -> dict:
    """The environment of a command whose luigi.cfg reads the lab's raw zone over ``sshd``."""
    values = {"key_filename": sshd.client_key, "known_hosts": sshd.known_hosts, "retries": 1, **sftp}
    cfg = write_config(
        lab.root / "sftp.cfg",
        {
            "daybreak": {"raw_root": sshd.uri(lab.raw), "data_root": lab.data},
            "sftp": values,
        },
    )
    return {"LUIGI_CONFIG_PATH": str(cfg)}


def cli_with(lab, sshd, *args, **sftp):
    return lab.cli(*args, "--local-scheduler", env=sftp_config(lab, sshd, **sftp))


def daybreak_with(lab, sshd, *args, **sftp):
    """``daybreak <args>`` in a subprocess, its raw zone over ``sshd``."""
    env = {**os.environ, **sftp_config(lab, sshd, **sftp)}
    cmd = [sys.executable, "-m", "tasks.cli", *args]
    return subprocess.run(cmd, cwd=lab.root, env=env, capture_output=True, text=True, timeout=300)


def configuration_error(proc: subprocess.CompletedProcess, *facts: str) -> None:
    """Exit 2 and one ``daybreak: error:`` line naming ``facts``: a setting to fix, never a server or store to
    wait for, and no summary (nothing ran)."""
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("daybreak: error: ")]
    assert len(errors) == 1, proc.stderr[-3000:]
    for fact in facts:
        assert fact in errors[0], errors
    for wrong in ("once it answers", "store", "not answering", "Traceback", "summary of this run", "retrying"):
        assert wrong not in proc.stderr, proc.stderr[-3000:]


def test_sftp_and_local_give_identical_partitions_and_the_same_staleness(over_sftp, sshd, setting):
    from tests.conftest import qsr_rows

    lab = over_sftp
    lab.qsr_days(START, 4)
    stop = START + dt.timedelta(days=4)
    assert lab.range(START, stop) == 0  # over SFTP, into lab.data
    local_data = lab.root / "local-data"
    setting("daybreak", "raw_root", lab.raw)
    setting("daybreak", "data_root", local_data)
    assert lab.range(START, stop) == 0  # the same files, read locally
    for k in range(4):
        name = f"staging/qsr_pos/business_date={START + dt.timedelta(days=k)}/data.parquet"
        assert pq.read_table(lab.data / name).equals(pq.read_table(local_data / name))
    # back over SFTP: a late file in folder D rebuilds exactly D-1 and D, as it does locally
    setting("daybreak", "raw_root", sshd.uri(lab.raw))
    setting("daybreak", "data_root", lab.data)
    late = START + dt.timedelta(days=2)
    lab.qsr_file(late.isoformat(), "S777", [r.replace("S001", "S777") for r in qsr_rows("S001", late)])
    assert lab.rebuilt_by(lambda: lab.range(START, stop)) == {late - dt.timedelta(days=1), late}
    assert lab.rebuilt_by(lambda: lab.range(START, stop)) == set()


def test_an_unknown_host_key_is_a_configuration_error_naming_host_port_and_what_to_do(lab, sshd):
    lab.qsr_days(START, 2)
    span = ["--start", str(START), "--stop", str(START + dt.timedelta(days=1))]
    assert cli_with(lab, sshd, "StgQsrPos", "--date", str(START)).returncode == 0
    built = {p: p.read_bytes() for p in (lab.data / "staging").rglob("*") if p.is_file()}
    empty = lab.root / "empty_known_hosts"
    empty.write_text("")
    facts = (f"unknown host key for 127.0.0.1:{sshd.port}", f"ssh-keyscan -p {sshd.port} 127.0.0.1", str(empty))
    date = ["StgQsrPos", "--date", str(START + dt.timedelta(days=1))]
    configuration_error(cli_with(lab, sshd, *date, known_hosts=empty), *facts)
    args = ["RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + dt.timedelta(days=2))]
    configuration_error(cli_with(lab, sshd, *args, "--workers", "2", known_hosts=empty), *facts)
    configuration_error(daybreak_with(lab, sshd, "status", known_hosts=empty), *facts)
    configuration_error(daybreak_with(lab, sshd, "plan", "stg_qsr_pos", *span, known_hosts=empty), *facts)
    configuration_error(daybreak_with(lab, sshd, "verify", *span, known_hosts=empty), *facts)
    assert {p: p.read_bytes() for p in (lab.data / "staging").rglob("*") if p.is_file()} == built  # nothing ran


def test_a_changed_host_key_is_a_configuration_error(lab, sshd):
    lab.qsr_days(START, 1)
    other = keygen(lab.root / "impostor")
    changed = lab.root / "changed_known_hosts"
    key_type, key = (lab.root / "impostor.pub").read_text().split()[:2]
    changed.write_text(f"[127.0.0.1]:{sshd.port} {key_type} {key}\n")
    assert other.exists()
    proc = cli_with(lab, sshd, "StgQsrPos", "--date", str(START), known_hosts=changed)
    configuration_error(proc, f"host key of 127.0.0.1:{sshd.port} changed", str(changed))


def test_an_authentication_failure_is_a_configuration_error_not_retried(lab, sshd):
    lab.qsr_days(START, 1)
    stranger = keygen(lab.root / "stranger")
    proc = cli_with(lab, sshd, "StgQsrPos", "--date", str(START), key_filename=stranger, retries=3)
    configuration_error(proc, "authentication failed", str(stranger))


def test_the_server_going_away_fails_cleanly_and_the_next_run_finishes(lab, sshd):
    lab.qsr_days(START, 3)
    assert (
        cli_with(
            lab,
            sshd,
            "RangeDaily",
            "--of",
            "StgQsrPos",
            "--start",
            str(START),
            "--stop",
            str(START + dt.timedelta(days=2)),
        ).returncode
        == 0
    )
    kept = {p: p.read_bytes() for p in (lab.data / "staging/qsr_pos").rglob("*") if p.is_file()}
    path = lab.raw / "qsr_pos" / START.isoformat() / "S001.csv"
    path.write_text(path.read_text().replace(",COLA,3,", ",COLA,4,"))  # makes the first date stale
    sshd.stop()
    args = ["RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + dt.timedelta(days=3))]
    down = cli_with(lab, sshd, *args)
    assert down.returncode != 0
    assert {p: p.read_bytes() for p in kept} == kept  # old partitions intact
    sshd.start()
    assert cli_with(lab, sshd, *args).returncode == 0
    assert set(lab.built_at()) == {START, START + dt.timedelta(days=1), START + dt.timedelta(days=2)}


CAP = 2  # the scheduler's [resources] sftp in the tests below


@pytest.fixture
def scheduler(tmp_path):
    """A real luigid whose own config caps ``sftp`` at CAP. Resource limits are the scheduler's: a
    luigid without ``[resources] sftp`` gives an unknown resource 1 slot, whatever the workers' config says."""
    from tests.luigid import Luigid

    config = write_config(tmp_path / "luigid.cfg", {"resources": {"sftp": CAP}})
    server = Luigid(tmp_path / "luigid", config).start()
    yield server
    server.stop()


def capped_config(lab, sshd, scheduler, **daybreak):
    """A luigi.cfg for runs through ``scheduler`` (which holds the cap) that read ``sshd``."""
    return write_config(
        lab.root / "capped.cfg",
        {
            "daybreak": {"raw_root": sshd.uri(lab.raw), "data_root": lab.data, **daybreak},
            "sftp": {"key_filename": sshd.client_key, "known_hosts": sshd.known_hosts},
            "core": {"scheduler_host": "127.0.0.1", "scheduler_port": scheduler.port},
        },
    )


@contextlib.contextmanager
def sampling(sample):
    """Call ``sample()`` every 5 ms on a thread of its own for the duration of the block."""
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            sample()
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def steady():
    """A filter of successive samples of the server's connections that keeps those in this sample and
    the one before. /proc/net/tcp is read a page (~27 sockets) per read(), not as one snapshot: while
    a task's session ends and the next one's begins, a read that a loaded machine pauses between pages
    can show the old row before the close and the new row after the connect, a connection more than
    ever existed at once. An SSH session lasts at least its login (~0.1 s), many 5 ms samples, so a
    real one is never filtered out."""
    before: set = set()

    def now(conns: set) -> set:
        nonlocal before
        kept, before = conns & before, conns
        return kept

    return now


@contextlib.contextmanager
def peak_connections(sshd):
    """Yields a list whose only item ends as the most established connections seen server-side at once
    (:func:`steady`)."""
    peak = [0]
    steady_now = steady()

    def sample() -> None:
        peak[0] = max(peak[0], len(steady_now(set(sshd.connections()))))

    with sampling(sample):
        yield peak


def socket_holders(inodes: set[int], roots: set[int]) -> dict[int, set[int]]:
    """The processes among ``roots`` and their children that hold each of the socket ``inodes``."""
    pids = set(roots)
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) in roots:
                pids.add(int(entry))
        except OSError:
            continue
    holders: dict[int, set[int]] = {}
    for pid in pids:
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:  # gone, or an fd closed between the listing and the read: looked up again
            continue
        for link in links:
            if link.startswith("socket:[") and int(link[8:-1]) in inodes:
                holders.setdefault(int(link[8:-1]), set()).add(pid)
    return holders


@contextlib.contextmanager
def sessions_by_owner(sshd, mains: list[int]):
    """Yields a dict that ends with the most established connections seen at once held by task
    processes (``"tasks"``: forked by the Luigi workers of the processes in ``mains``, which is filled
    once they start) and by each process of ``mains`` itself (its completeness checks, ``pid: most``).
    A connection's owner is the process holding its client socket when it is first seen (a socket a
    task process inherits from its parent stays its parent's)."""
    peaks: dict = {"tasks": 0, "scheduling": {}}
    owner: dict[tuple[str, int], object] = {}

    steady_now = steady()

    def sample() -> None:
        conns = steady_now(set(sshd.connections().items()))
        new = {conn for conn in conns if conn not in owner}
        if new and mains:
            holders = socket_holders({inode for _, inode in new}, set(mains))
            for conn in new:
                if pids := holders.get(conn[1]):
                    own = pids & set(mains)
                    owner[conn] = min(own) if own else "tasks"
        known = [owner[conn] for conn in conns if conn in owner]
        peaks["tasks"] = max(peaks["tasks"], known.count("tasks"))
        for pid in mains:
            peaks["scheduling"][pid] = max(peaks["scheduling"].get(pid, 0), known.count(pid))

    with sampling(sample):
        yield peaks


def test_closing_a_session_ends_it_on_the_server_at_once(over_sftp, sshd):
    """A task closes its session at the end of run(), before Luigi hands its sftp slot on: the server
    must see it gone then, not when paramiko's reader thread next wakes up (up to 0.1 s later, while
    the next task connects: the cap's extra connection)."""
    from tasks.storage.rawzone import RawZone

    over_sftp.qsr_days(START, 0)
    for _ in range(5):
        zone = RawZone.from_uri(sshd.uri(over_sftp.raw))
        assert zone.folder_exists("qsr_pos", START)
        assert sshd.established() == 1
        zone.close()
        assert sshd.established() == 0


def test_a_connection_sends_each_request_at_once(over_sftp, sshd):
    """A build's requests are small (lstat, open, read, close) and go out while replies come in: the
    connection's socket has Nagle's algorithm off, or each small write would wait for the
    acknowledgement of the one before (reads of 900 files: 89 MB/s with it, 250 MB/s without)."""
    import socket

    from tasks.storage.rawzone import RawZone

    over_sftp.qsr_days(START, 0)
    zone = RawZone.from_uri(sshd.uri(over_sftp.raw))
    try:
        assert zone.folder_exists("qsr_pos", START)
        sock = zone.backend._sftp().get_channel().get_transport().sock
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        zone.close()


def test_a_connection_that_fails_after_its_login_is_closed_at_once(over_sftp, sshd):
    """A base path the server does not have is found after the login: that connection ends with the
    error, not when the process exits (a retrying task would hold one connection more than its slot)."""
    from tasks.guard import UsageError
    from tasks.storage.rawzone import RawZone

    zone = RawZone.from_uri(sshd.uri(over_sftp.root / "nowhere"))
    with pytest.raises(UsageError, match="does not exist on the server"):
        zone.folder_exists("qsr_pos", START)
    assert sshd.established() == 0


def test_a_missing_or_open_private_key_is_a_configuration_error_not_retried(lab, sshd):
    """Before, a missing key file was 'server not answering (no such file or directory) after 4 attempts', and
    a key other users can read was used (OpenSSH refuses it)."""
    lab.qsr_days(START, 1)
    missing = lab.root / "no-such-key"
    proc = cli_with(lab, sshd, "StgQsrPos", "--date", str(START), key_filename=missing, retries=3)
    configuration_error(proc, f"[sftp] key_filename {missing}: No such file or directory; not retried")
    shared = lab.root / "shared_key"
    shared.write_bytes(sshd.client_key.read_bytes())
    shared.chmod(0o644)
    proc = cli_with(lab, sshd, "StgQsrPos", "--date", str(START), key_filename=shared, retries=3)
    configuration_error(proc, f"[sftp] key_filename {shared} can be read by other users (mode 644): chmod 600 it")
    shared.chmod(0o600)
    assert cli_with(lab, sshd, "StgQsrPos", "--date", str(START), key_filename=shared).returncode == 0


def test_a_failed_login_leaves_no_connection_open(over_sftp, sshd, setting):
    """A key the server refuses fails the login: the connection paramiko opened for it ends with the
    error, not when the process exits."""
    from tasks.guard import UsageError
    from tasks.storage.rawzone import RawZone

    setting("sftp", "key_filename", keygen(over_sftp.root / "stranger"))
    zone = RawZone.from_uri(sshd.uri(over_sftp.raw))
    with pytest.raises(UsageError, match="authentication failed"):
        zone.folder_exists("qsr_pos", START)
    assert sshd.established() == 0


def test_the_sftp_resource_caps_sessions_across_workers_of_a_real_luigid(lab, sshd, scheduler):
    lab.qsr_days(START, 20)
    cfg = capped_config(lab, sshd, scheduler)
    args = ["RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + dt.timedelta(days=20))]
    with peak_connections(sshd) as peak:
        proc = lab.cli(*args, "--workers", "8", env={"LUIGI_CONFIG_PATH": str(cfg)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(lab.built_at()) == 20
    # exactly CAP task sessions at once, plus the scheduling process's own connection (completeness
    # checks). Without the resource this run reaches 9; with a luigid that lacks [resources] sftp, 2.
    log = (sshd.folder / "sshd.log").read_text()
    assert peak[0] == CAP + 1, (peak[0], log[-3000:])  # the server's log, to tell which one
    assert "Corrupted" not in log and "Bad packet" not in log and "incorrect" not in log, log[-3000:]
    tasks = urllib.request.urlopen(f"http://127.0.0.1:{scheduler.port}/api/task_list?data=%7B%7D").read()
    assert b"StgQsrPos" in tasks  # the run went through this luigid


def test_the_sftp_resource_caps_the_stores_sessions_too(lab, sshd, scheduler):
    """Before, AllStores --workers 3 held 4 connections with a cap of 1: each store's check lists the raw
    folders (its upstream dates) from its worker process, which took no sftp resource."""
    lab.qsr_days(START, 3, stores=tuple(f"S{i:03d}" for i in range(1, 9)))
    cfg = capped_config(lab, sshd, scheduler)
    env = {"LUIGI_CONFIG_PATH": str(cfg)}
    stop = str(START + dt.timedelta(days=3))
    assert lab.cli("RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", stop, env=env).returncode == 0
    with peak_connections(sshd) as peak:
        proc = lab.cli("AllStores", "--workers", "4", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(list((lab.data / "marts" / "store_daily_sales").glob("store_id=*/_manifest.json"))) == 8
    assert peak[0] <= CAP + 1, (peak[0], (sshd.folder / "sshd.log").read_text()[-3000:])


def test_the_sftp_resource_caps_the_hotel_marts_sessions_too(lab, sshd, scheduler):
    """Before, AllHotelsPickup --workers 4 held 5 connections with a cap of 2: a hotel's pickups and the
    booking states read no raw file, but each one's check that the staging dates it reads (built by
    other workers of this run) are up to date lists their raw folders from its worker process, which
    took no sftp resource."""
    lab.hotel_days(START, 4)
    cfg = capped_config(lab, sshd, scheduler, start_date=START)
    env = {"LUIGI_CONFIG_PATH": str(cfg)}
    stop = str(START + dt.timedelta(days=4))
    with peak_connections(sshd) as peak:
        proc = lab.cli("AllHotelsPickup", "--start", str(START), "--stop", stop, "--workers", "4", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(list((lab.data / "marts" / "hotel_pickup").glob("*/hotel_id=*/_manifest.json"))) == 4 * 5
    print("PEAK", peak[0])
    assert peak[0] <= CAP + 1, (peak[0], (sshd.folder / "sshd.log").read_text()[-3000:])


def test_two_worker_processes_on_one_luigid_share_the_cap_and_build_each_date_once(over_sftp, sshd, scheduler):
    lab = over_sftp
    lab.qsr_days(START, 30)
    cfg = capped_config(lab, sshd, scheduler)
    args = ["RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + dt.timedelta(days=30))]
    cmd = [sys.executable, "-m", "luigi", "--module", "tasks", *args, "--workers", "4", "--no-lock"]
    cmd += ["--log-level", "INFO"]  # each partition's "wrote" line, Luigi's execution summary
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg)}
    mains: list[int] = []
    with sessions_by_owner(sshd, mains) as peaks:
        procs = [
            subprocess.Popen(cmd, cwd=lab.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for _ in range(2)
        ]
        mains += [p.pid for p in procs]
        logs = [p.communicate(timeout=300)[1].decode() for p in procs]
    codes = [p.returncode for p in procs]
    summaries = [log[log.rfind("===== Luigi Execution Summary", 0, len(log) - 40) :] for log in logs]
    # a date the other process built is done for this one too (docs/scale-out.md): both exit 0
    assert codes == [0, 0], (codes, summaries)
    from tasks.cli import main

    assert main(["plan", "stg_qsr_pos", "--start", str(START), "--stop", str(START + dt.timedelta(days=30))]) == 0
    manifests = [json.loads(p.read_text()) for p in (lab.data / "staging/qsr_pos").glob("*/_manifest.json")]
    assert len(manifests) == 30 and len({m["task_id"] for m in manifests}) == 30
    writes = [[line for line in log.splitlines() if ": wrote " in line] for log in logs]
    assert sum(map(len, writes)) == 30, writes  # every date built exactly once, by one process or the other
    for mine, theirs, summary in zip(writes, writes[::-1], summaries, strict=True):
        kinds = ((len(mine), "ran"), (len(theirs), "written by another run"))
        counts = ", ".join(f"{n} {kind}" for n, kind in kinds if n)
        assert f"StgQsrPos {START} .. {START + dt.timedelta(days=29)}: {counts}\n" in summary, summary
    # task sessions, from the forked task processes of both: the shared cap exactly
    assert peaks["tasks"] == CAP, peaks
    # each process's own connection, for its completeness checks
    assert peaks["scheduling"] == {pid: 1 for pid in mains}, peaks


def test_a_single_run_range_uses_one_connection_and_reads_each_raw_file_once(over_sftp, sshd, monkeypatch, setting):
    from tasks.storage import sftp as sftp_module
    from tasks.storage.sftp import SftpRaw
    from tests.test_identity import backdate

    lab = over_sftp
    lab.qsr_days(START, 6)  # folders START .. START+6, two stores each; dates START .. START+5
    backdate(lab.raw)  # not written within SFTP's one-second mtimes of the build: no check hashes them
    log = sshd.folder / "sshd.log"
    reads: list[str] = []
    real_read = SftpRaw.read
    real_pipelined = sftp_module.read_pipelined

    def counted(zone, raw):  # a spy: the real read over the real server, counted
        reads.append(raw.relpath)
        return real_read(zone, raw)

    def counted_many(sftp, paths):  # the same for the reads a build makes, several files in flight
        reads.extend(relpath for _, relpath, _ in paths)
        return real_pipelined(sftp, paths)

    monkeypatch.setattr(SftpRaw, "read", counted)
    monkeypatch.setattr(sftp_module, "read_pipelined", counted_many)
    stop = START + dt.timedelta(days=6)
    from tasks.views.plan import make_plan

    assert make_plan("stg_qsr_pos", START, stop, workers=4).mode[0] == "RangeSingleRun"  # what plan says
    mark = len(log.read_text())
    assert lab.luigi("RangeSingleRun", "--of", "StgQsrPos", "--start", str(START), "--stop", str(stop)) == 0
    assert len(lab.built_at()) == 6
    # the range's one session, plus the scheduling checks' own before the task runs
    assert log.read_text()[mark:].count("Accepted publickey") <= 2
    assert len(reads) == len(set(reads)) == 14  # folder d+1 is read once for dates d and d+1
    # one task per date, for contrast: every inner folder read twice, and with one worker all over one
    # session (the tasks run in the scheduling process and keep its connection)
    shutil.rmtree(lab.data)
    reads.clear()
    mark = len(log.read_text())
    assert lab.range(START, stop) == 0
    assert log.read_text()[mark:].count("Accepted publickey") <= 1
    assert len(reads) == 24
    # with two workers a session per date: each task's process is forked for it, and logs in
    shutil.rmtree(lab.data)
    mark = len(log.read_text())
    assert lab.range(START, stop, "--workers", "2") == 0
    assert log.read_text()[mark:].count("Accepted publickey") >= 6
    setting("core", "scheduler_host", "127.0.0.1")  # a host that shares a luigid: other hosts may take dates
    setting("core", "scheduler_port", "18999")
    assert make_plan("stg_qsr_pos", START, stop, workers=4).mode[0] == "RangeDaily"  # as docs/backfills.md says


def test_verify_over_sftp_finds_a_change_behind_kept_metadata_in_one_connection(over_sftp, sshd, capsys):
    from tasks import cli
    from tasks.storage.sftp import _CONNECTIONS
    from tests.test_identity import backdate, changed_behind_metadata

    lab = over_sftp
    lab.qsr_days(START, 4)
    backdate(lab.raw)
    stop = START + dt.timedelta(days=4)
    assert lab.range(START, stop) == 0
    changed_behind_metadata(lab.raw / "qsr_pos" / "2026-09-12" / "S002.csv")
    assert lab.rebuilt_by(lambda: lab.range(START, stop)) == set()  # whole-second mtimes, same size: unseen
    for _, client, _ in _CONNECTIONS.values():  # a connection of the runs above, to count verify's alone
        client.close()
    _CONNECTIONS.clear()
    log = sshd.folder / "sshd.log"
    logins = log.read_text().count("Accepted publickey")
    assert cli.main(["verify", "--start", str(START), "--stop", str(stop)]) == 1
    assert log.read_text().count("Accepted publickey") == logins + 1  # every raw file over one connection
    out = capsys.readouterr().out
    assert "MISMATCH raw qsr_pos/2026-09-12/S002.csv: content differs" in out
    assert "stale now: staging/qsr_pos 2026-09-11, staging/qsr_pos 2026-09-12" in out
    assert lab.rebuilt_by(lambda: lab.range(START, stop)) == {
        START + dt.timedelta(days=1),
        START + dt.timedelta(days=2),
    }


def test_sftp_lists_the_same_folders_and_mtimes_as_local_disk(over_sftp):
    from tasks.settings import raw_root
    from tasks.storage.rawzone import RawZone

    lab = over_sftp
    lab.qsr_days(START, 2)
    (lab.raw / "qsr_pos" / "not-a-date").mkdir()
    (lab.raw / "qsr_pos" / "2026-09-30").write_text("a file, not a folder")
    local, remote = RawZone(lab.raw).list_folders("qsr_pos"), RawZone.from_uri(raw_root()).list_folders("qsr_pos")
    assert sorted(remote) == sorted(local) == ["2026-09-10", "2026-09-11", "2026-09-12"]
    assert {n: m // 10**9 for n, m in remote.items()} == {n: m // 10**9 for n, m in local.items()}


def test_sftp_never_follows_a_symbolic_link_to_a_folder_as_local_disk_does_not(over_sftp, tmp_path):
    """A date folder that is a symbolic link (to files outside the raw zone) is not read over SFTP
    either: the partitions that read it wait for it, as they do locally, and nothing outside is read."""
    from tasks.settings import raw_root
    from tasks.storage.rawzone import RawZone
    from tests.conftest import qsr_rows

    lab = over_sftp
    lab.qsr_days(START, 1)  # folders 09-10 and 09-11
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "S001.csv").write_text("order_id,line_no,store_id,ordered_at,sku,qty,unit_price,discount,status\n")
    day = START + dt.timedelta(days=2)
    (lab.raw / "qsr_pos" / str(day)).symlink_to(outside, target_is_directory=True)
    local, remote = RawZone(lab.raw), RawZone.from_uri(raw_root())
    assert local.scan_folder_all("qsr_pos", day) is None
    assert remote.scan_folder_all("qsr_pos", day) is None  # before: the link's target was listed
    assert seconds(remote.scan_folder_all("qsr_pos", START)) == seconds(local.scan_folder_all("qsr_pos", START))
    assert not remote.folder_exists("qsr_pos", day)
    (lab.raw / "qsr_pos" / str(day)).unlink()
    lab.qsr_file(str(day), "S001", qsr_rows("S001", day))
    assert seconds(remote.scan_folder_all("qsr_pos", day)) == seconds(local.scan_folder_all("qsr_pos", day))


def seconds(scanned):
    """A folder's scan with mtimes in whole seconds (SFTP's resolution)."""
    entries, refused = scanned
    return [(name, size, mtime // 10**9) for name, size, mtime in entries], refused


def test_an_ad_date_is_built_from_a_later_export_over_sftp_as_locally_and_waits_alike(over_sftp, setting):
    """Contract section 4 over SFTP: with exports d+1 and d+2 missing, date d is built from d+3, the
    same rows as from local disk; a date with no export in d+1 .. d+7 waits for d+1 (exit 20)."""
    from tasks.views import status

    lab, day = over_sftp, START
    lab.ads_export(day + dt.timedelta(days=3), day)  # 09-13: restates 09-10 .. 09-12
    assert lab.luigi("AdsDaily", "--date", str(day)) == 0
    assert lab.luigi("AdsDaily", "--date", str(day + dt.timedelta(days=3))) == 20  # 09-14 .. 09-20: none
    rows = status.collect(day, day + dt.timedelta(days=4), ["ads_daily"])
    assert [(r.state, r.reason) for r in rows] == [
        ("provisional", "later exports may still restate it"),
        ("missing", "no partition"),
        ("missing", "no partition"),
        ("waiting", "raw folder missing: ads/2026-09-14"),
    ]
    local_data = lab.root / "local-data"
    setting("daybreak", "raw_root", lab.raw)
    setting("daybreak", "data_root", local_data)
    assert lab.luigi("AdsDaily", "--date", str(day)) == 0
    name = f"staging/ads_daily/business_date={day}"
    remote, local = pq.read_table(lab.data / name / "data.parquet"), pq.read_table(local_data / name / "data.parquet")
    assert remote.equals(local) and remote.num_rows == 2
    assert remote.column("source_export_date").to_pylist() == [day + dt.timedelta(days=3)] * 2
    stats = [json.loads((root / name / "_manifest.json").read_text())["stats"] for root in (lab.data, local_data)]
    assert [s["exports_read"] for s in stats] == [["2026-09-13"], ["2026-09-13"]]


def test_a_folder_made_before_its_store_files_waits_over_sftp_as_locally(over_sftp):
    """Folder d+1 there over SFTP, empty or holding no store file yet: date d waits (exit 20) and says why,
    as over local disk, and is built whole once its files land."""
    from tasks.views import status

    lab, day = over_sftp, START
    lab.qsr_days(day, 1)  # folders d, d+1
    nxt = lab.raw / "qsr_pos" / str(day + dt.timedelta(days=1))
    held = {path.name: path.read_bytes() for path in nxt.iterdir()}
    for name in held:
        (nxt / name).unlink()
    (nxt / "S001.csv.part").write_bytes(held["S001.csv"])  # an upload under way
    assert lab.luigi("StgQsrPos", "--date", str(day)) == 20
    rows = status.collect(day, day + dt.timedelta(days=1), ["stg_qsr_pos"])
    why = "there, without any <store_id>.csv yet; it holds S001.csv.part"
    assert [(r.state, r.reason) for r in rows] == [("waiting", f"raw folder missing: qsr_pos/{nxt.name} ({why})")]
    for name, data in held.items():
        (nxt / name).write_bytes(data)
    assert lab.luigi("StgQsrPos", "--date", str(day)) == 0
    assert pq.read_table(lab.partition(day) / "data.parquet").num_rows == 8


def test_the_newest_folder_date_counts_real_folders_only_over_sftp_as_locally(over_sftp, tmp_path):
    """A file or a symbolic link named like a later date is not a folder (audit item 5), on both zones."""
    from tasks.settings import raw_root
    from tasks.storage.rawzone import RawZone

    lab = over_sftp
    lab.qsr_days(START, 2)  # folders 09-10 .. 09-12
    (lab.raw / "qsr_pos" / "2026-09-20").write_text("a file, not a folder")
    (tmp_path / "elsewhere").mkdir()
    (lab.raw / "qsr_pos" / "2026-09-21").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    local, remote = RawZone(lab.raw), RawZone.from_uri(raw_root())
    assert remote.newest_folder_date("qsr_pos") == local.newest_folder_date("qsr_pos") == dt.date(2026, 9, 12)


@pytest.mark.parametrize("chunk", [32768, 1 << 20])  # 1 MiB: more than OpenSSH sends at once, so replies are short
def test_files_read_several_at_a_time_are_each_file_whole_and_a_link_is_named(sshd, tmp_path, monkeypatch, chunk):
    from tasks.storage import sftp_read
    from tasks.storage.rawzone import RawFileUnreadable, RawZone
    from tasks.storage.sftp import SftpRaw

    folder = tmp_path / "raw" / "qsr_pos" / "2026-09-10"
    folder.mkdir(parents=True)
    monkeypatch.setattr(sftp_read, "_CHUNK", chunk)
    sizes = {"A": 0, "B": 1, "C": 32768, "D": 32769, "E": 600_000, "F": 5}  # empty, one chunk, its edges, many
    for name, size in sizes.items():
        (folder / f"{name}.csv").write_bytes(bytes((i * 7 + len(name)) % 251 for i in range(size)))
    files = RawZone(tmp_path / "raw").list_folder("qsr_pos", dt.date(2026, 9, 10))
    (folder / "F.csv").write_bytes(b"grown since it was listed, past one chunk " * 1000)  # listed at 5 bytes
    zone = RawZone(SftpRaw(
        "127.0.0.1", sshd.port, sshd.user, str(tmp_path / "raw"), key_filename=str(sshd.client_key),
        known_hosts=str(sshd.known_hosts),
    ))  # fmt: skip
    got = list(zone.read_inputs(files))
    assert got == [(tmp_path / "raw" / f.relpath).read_bytes() for f in files]
    assert [zone.known_digest(f) for f in files] == [hashlib.sha256(g).hexdigest() for g in got]
    assert sftp_read.FILES_IN_FLIGHT > 1 and len(files) > sftp_read.FILES_IN_FLIGHT  # files really in flight
    (folder / "C.csv").unlink()
    os.symlink(folder / "A.csv", folder / "C.csv")  # swapped for a link after the listing
    with pytest.raises(RawFileUnreadable, match="qsr_pos/2026-09-10/C.csv: no longer a regular file"):
        list(zone.read_inputs(files))
    assert list(zone.read_inputs(files[:2])) == [b"", (folder / "B.csv").read_bytes()]  # the session still serves
    (folder / "C.csv").unlink()
    os.mkfifo(folder / "C.csv")  # a FIFO: the server would wait on it for a writer, were it opened
    failed: list[BaseException] = []
    reader = threading.Thread(
        target=lambda: failed.append(pytest.raises(RawFileUnreadable, list, zone.read_inputs(files)))
    )
    reader.start()
    reader.join(timeout=20)
    assert not reader.is_alive() and failed, "a FIFO in the raw zone hung the read"
    assert "qsr_pos/2026-09-10/C.csv: no longer a regular file" in str(failed[0].value)


def test_a_run_right_after_another_on_one_luigid_gets_the_sftp_slots_the_ended_run_no_longer_needs(
    lab, sshd, scheduler
):
    """Two hosts run the hotel chain while one extract had not landed; both end (exit 20) with the chain from
    that date pending. It lands, and both run a longer range at once. Before, luigid kept the capped slots for
    the ended runs' workers for [scheduler] worker_disconnect_delay (60 s): the new runs got no task, exit 25."""
    lab.hotel_days(START, 24)
    late = lab.raw / "hotel_bookings" / str(START + dt.timedelta(days=4)) / "H2.csv"
    held = lab.root / "held.csv"
    shutil.move(late, held)
    cfg = capped_config(lab, sshd, scheduler, start_date=START)
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg)}

    def both_hosts(days: int) -> tuple[list[int], list[str]]:
        stop = str(START + dt.timedelta(days=days))
        cmd = [sys.executable, "-m", "luigi", "--module", "tasks", "AllHotelsPickup", "--start", str(START)]
        cmd += ["--stop", stop, "--workers", "3", "--no-lock"]
        procs = [
            subprocess.Popen(cmd + ["--daybreak-host-name", f"h{k}"], cwd=lab.root, env=env, stderr=subprocess.PIPE)
            for k in (1, 2)
        ]
        errors = [p.communicate(timeout=300)[1].decode() for p in procs]
        return [p.returncode for p in procs], errors

    codes, errors = both_hosts(10)
    assert codes == [20, 20], [e[-2500:] for e in errors]
    shutil.move(held, late)
    codes, errors = both_hosts(23)
    assert codes == [0, 0], [e[-2500:] for e in errors]


def test_two_hosts_whose_sftp_server_freezes_mid_run_each_end_with_their_summary(lab, sshd, scheduler):
    """Two hosts on one luigid build the ads windows over SFTP; the server freezes (SIGSTOP) mid-run. Each
    host's summary walks the requirements of the partitions it waited for, which asked the frozen server:
    before, both ended with the one error line and no summary; now each says what failed or was not run. A host
    whose own reads did not fail names the other host's failures as luigid gives them (exit 30 with them)."""
    import signal

    from tasks import sample
    from tests.conftest import REPO

    sample.generate(lab.raw, START, 12, stores=3, seed=3, mean_lines_per_store=20)
    stop, hosts = START + dt.timedelta(days=11), []
    for name in ("h1", "h2"):
        home = lab.root / name
        (home / "tmp").mkdir(parents=True)
        cfg = write_config(
            home / "luigi.cfg",
            {
                "daybreak": {"raw_root": sshd.uri(lab.raw), "data_root": lab.data, "host_name": name},
                "sftp": {"key_filename": sshd.client_key, "known_hosts": sshd.known_hosts, "timeout": 2, "retries": 1},
                "core": {"scheduler_host": "127.0.0.1", "scheduler_port": scheduler.port},
            },
        )  # fmt: skip
        env = {**os.environ, "HOME": str(home), "TMPDIR": str(home / "tmp"), "LUIGI_CONFIG_PATH": str(cfg)}
        args = ["RangeDaily", "--of", "AdsRolling7d", "--start", str(START), "--stop", str(stop), "--workers", "2"]
        cmd = [sys.executable, "-m", "luigi", "--module", "tasks", *args]
        out = open(home / "out.txt", "w")  # noqa: SIM115 - the host's, closed with it
        hosts.append(
            (subprocess.Popen(cmd, cwd=home, env={**env, "PYTHONPATH": str(REPO)}, stdout=out, stderr=out), home)
        )
    deadline = time.monotonic() + 120
    while not any("progress: " in (home / "out.txt").read_text() for _, home in hosts):
        assert time.monotonic() < deadline, [(home / "out.txt").read_text()[-2000:] for _, home in hosts]
        time.sleep(0.1)
    sshd.signal(signal.SIGSTOP)
    try:
        codes = [proc.wait(timeout=240) for proc, _ in hosts]
    finally:
        sshd.signal(signal.SIGCONT)
        for proc, _ in hosts:
            proc.kill()
    for code, (_, home) in zip(codes, hosts, strict=True):
        text = (home / "out.txt").read_text()
        summary = text.split("summary of this run")[-1]
        assert code == 30 and "summary of this run" in text and "AdsRolling7d" in summary, text[-3000:]
        # the server failed this host's reads (mid-run, or from its start on a loaded machine), or the other
        # host's: luigid's error of them, as a failure
        here = any(x.startswith("daybreak: error: ") and "server not answering" in x for x in text.splitlines())
        assert here or ("(on another host): " in summary and "server not answering" in summary), text[-3000:]
