"""An SFTP server that logs the client in, or starts to, and then answers nothing: every command gives it up
within `[sftp] timeout` per attempt, as a server not answering (docs/reliability.md), never hangs, never
blames the key."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys
import time

import pytest

from tasks.settings import write_config
from tests.frozen_sshd import FrozenSshd
from tests.sshd import Sshd

pytestmark = pytest.mark.system

START = dt.date(2026, 9, 10)
SPAN = ["--start", str(START), "--stop", str(START + dt.timedelta(days=2))]
COMMANDS = {
    "status": [sys.executable, "-m", "tasks.cli", "status", "--dataset", "stg_qsr_pos"],
    "range": [sys.executable, "-m", "luigi", "--module", "tasks", "--local-scheduler", "--workers", "2"]
    + ["RangeDaily", "--of", "StgQsrPos", *SPAN],
}
# timeout 2 s, 1 retry: two attempts of at most a few timeouts each, the backoff, a Python start
BOUND_S = 40


def run(lab, server, command: str) -> tuple[subprocess.CompletedProcess, float]:
    values = {"key_filename": server.client_key, "known_hosts": server.known_hosts, "retries": 1, "timeout": 2}
    roots = {"raw_root": server.uri(lab.raw), "data_root": lab.data}
    cfg = write_config(lab.root / "sftp.cfg", {"daybreak": roots, "sftp": values})
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg)}
    t0 = time.monotonic()
    # a hang fails the test at the subprocess timeout instead of holding the suite
    proc = subprocess.run(COMMANDS[command], cwd=lab.root, env=env, capture_output=True, text=True, timeout=180)
    return proc, time.monotonic() - t0


def not_answering(proc: subprocess.CompletedProcess, took: float, server) -> None:
    """Exit 30 within the bound, one line naming the server as not answering after its two attempts."""
    out = proc.stdout + proc.stderr
    assert proc.returncode == 30, out[-3000:]
    assert took < BOUND_S, f"{took:.1f} s"
    errors = [line for line in proc.stderr.splitlines() if line.startswith("daybreak: error: ")]
    assert len(errors) == 1, proc.stderr[-3000:]
    assert f"127.0.0.1:{server.port}" in errors[0], errors
    assert re.search(r"server not answering \((timed out|timeout)[^)]*\) after 2 attempts", errors[0]), errors
    for wrong in ("Traceback", "authentication failed", "key_filename", "no Daybreak summary"):
        assert wrong not in out, out[-3000:]


def every_command_gives_up(lab, server) -> None:
    """Each of :data:`COMMANDS` against ``server`` is :func:`not_answering`; then the server is stopped."""
    try:
        for command in COMMANDS:
            not_answering(*run(lab, server, command), server)
    finally:
        server.stop()


@pytest.mark.parametrize("step", ["open", "subsystem"])
def test_a_server_that_freezes_right_after_login_is_given_up_within_its_timeout(lab, tmp_path, step):
    """A stub server (tests/frozen_sshd.py), not a real sshd: a real one cannot be stopped deterministically
    between the login and the channel open, or the channel open and the subsystem request, of a connection
    a subprocess makes. The other freezes below are a real sshd's."""
    lab.qsr_days(START, 3)
    every_command_gives_up(lab, FrozenSshd(tmp_path / "frozen", step).start())


def test_an_sftp_server_process_that_never_answers_is_given_up_within_its_timeout(lab, tmp_path):
    """A real sshd whose sftp subsystem is a process that never says a word (a hung sftp-server): the
    login and the subsystem request are answered, the SFTP version never is. It reads what it is sent, so
    it ends with its session."""
    lab.qsr_days(START, 3)
    every_command_gives_up(lab, Sshd(tmp_path / "sshd", subsystem="/usr/bin/cat >/dev/null").start())


def test_a_server_frozen_during_login_is_retried_then_not_answering_not_a_wrong_key(lab, tmp_path):
    """A real sshd that never answers the key the client offers: the key is checked by an
    AuthorizedKeysCommand that never ends (the login frozen, as when the server's user lookup hangs)."""
    lab.qsr_days(START, 3)
    extra = "AuthorizedKeysCommand /usr/bin/sleep 3600\nAuthorizedKeysCommandUser nobody\n"
    server = Sshd(tmp_path / "sshd", extra=extra)
    (server.folder / "authorized_keys").write_text("")  # the key is for the command alone to answer
    server.start()
    try:
        proc, took = run(lab, server, "status")
        not_answering(proc, took, server)
        assert took > 2 * 2, f"{took:.1f} s: two attempts of 2 s each"  # retried, not refused at once
    finally:
        server.stop()


def test_a_server_that_drops_the_connection_during_login_is_retried_then_gone_not_a_wrong_key(lab, tmp_path):
    """A real sshd whose per-connection process dies while it checks the key (its AuthorizedKeysCommand kills
    it, as an sshd restarted or out of memory would): paramiko says "Authentication failed: transport shut down
    or saw EOF". That is the server going away (retried, exit 30), not a key to change (exit 2)."""
    lab.qsr_days(START, 3)
    extra = "AuthorizedKeysCommand /bin/sh -c 'kill -9 $PPID'\nAuthorizedKeysCommandUser root\n"
    server = Sshd(tmp_path / "sshd", extra=extra)
    (server.folder / "authorized_keys").write_text("")
    server.start()
    try:
        proc, _ = run(lab, server, "status")
    finally:
        server.stop()
    out = proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("daybreak: error: ")]
    assert proc.returncode == 30 and len(errors) == 1 and "after 2 attempts" in errors[0], out[-3000:]
    assert "connection closed during the login" in errors[0], errors
    for wrong in ("Traceback", "authentication failed", "key_filename"):
        assert wrong not in out, out[-3000:]
