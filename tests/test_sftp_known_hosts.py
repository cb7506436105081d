"""``[sftp] known_hosts`` read as OpenSSH reads it, against a real OpenSSH server: a certificate authority's
line is no host's key, a malformed line is skipped with a warning, a revoked key is refused."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys

import pytest

from tasks.settings import write_config
from tests.sshd import keygen

pytestmark = pytest.mark.system

START = dt.date(2026, 9, 10)


def public(path) -> str:
    """``type base64`` of the public key beside ``path``."""
    return " ".join(path.with_name(path.name + ".pub").read_text().split()[:2])


def command(lab, sshd, known_hosts, *args: str) -> subprocess.CompletedProcess:
    """``args`` (a ``daybreak`` command, or ``luigi`` ones after "luigi") with the raw zone over ``sshd``."""
    values = {"key_filename": sshd.client_key, "known_hosts": known_hosts, "retries": 1, "timeout": 5}
    roots = {"raw_root": sshd.uri(lab.raw), "data_root": lab.data}
    cfg = write_config(lab.root / "sftp.cfg", {"daybreak": roots, "sftp": values})
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg)}
    if args[0] == "luigi":
        cmd = [sys.executable, "-m", "luigi", "--module", "tasks", "--local-scheduler", *args[1:]]
    else:
        cmd = [sys.executable, "-m", "tasks.cli", *args]
    return subprocess.run(cmd, cwd=lab.root, env=env, capture_output=True, text=True, timeout=120)


def test_a_certificate_authority_and_a_malformed_line_beside_the_servers_key_are_skipped(lab, sshd):
    lab.qsr_days(START, 2)
    ca = keygen(lab.root / "ca")
    known = lab.root / "known_hosts"
    known.write_text(
        "# managed by the platform team\n"
        f"@cert-authority *.example.com {public(ca)}\n"
        f"[127.0.0.1]:{sshd.port} ssh-ed25519 not-a-key!\n"
        f"{sshd.known_hosts.read_text()}"
    )
    for args in (("status", "--dataset", "stg_qsr_pos"), ("luigi", "StgQsrPos", "--date", str(START))):
        proc = command(lab, sshd, known, *args)
        assert proc.returncode == 0, proc.stderr[-3000:]
        warned = [line for line in proc.stderr.splitlines() if str(known) in line]
        assert len(warned) == 1 and "line 3" in warned[0] and "skipped" in warned[0], proc.stderr[-3000:]
        assert "Traceback" not in proc.stderr and "InvalidHostKey" not in proc.stderr
    assert (lab.partition(START) / "_manifest.json").exists()


def test_a_server_trusted_only_through_a_certificate_authority_is_an_unknown_host_key(lab, sshd):
    lab.qsr_days(START, 1)
    known = lab.root / "known_hosts"
    known.write_text(f"@cert-authority * {public(sshd.host_key)}\n")  # even the server's own key, as a CA
    proc = command(lab, sshd, known, "status")
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("daybreak: error: ")]
    assert len(errors) == 1 and f"unknown host key for 127.0.0.1:{sshd.port}" in errors[0], proc.stderr[-3000:]


@pytest.mark.parametrize("listed", [True, False], ids=["also-listed", "revoked-only"])
def test_a_revoked_host_key_is_refused_naming_the_file_and_line(lab, sshd, listed):
    """OpenSSH refuses a key marked @revoked, even where another line of the file trusts it."""
    lab.qsr_days(START, 1)
    known = lab.root / "known_hosts"
    trusted = sshd.known_hosts.read_text() if listed else ""
    known.write_text(f"{trusted}\n@revoked * {public(sshd.host_key)}\n")
    for args in (("status",), ("luigi", "StgQsrPos", "--date", str(START))):
        proc = command(lab, sshd, known, *args)
        assert proc.returncode == 2, proc.stderr[-3000:]
        errors = [line for line in proc.stderr.splitlines() if line.startswith("daybreak: error: ")]
        assert len(errors) == 1, proc.stderr[-3000:]
        for fact in (f"127.0.0.1:{sshd.port}", "revoked", f"{known} line {3 if listed else 2}"):
            assert fact in errors[0], errors
        for wrong in ("Traceback", "not answering", "retrying"):
            assert wrong not in proc.stderr, proc.stderr[-3000:]
    assert not lab.partition(START).exists()


def test_a_known_hosts_setting_naming_a_folder_is_a_setting_to_fix_not_a_server_down(lab, sshd):
    """[sftp] known_hosts naming a folder (or a file this user cannot read): one line naming it, exit 2; not
    retried and reported as the server not answering (exit 30)."""
    lab.qsr_days(START, 2)
    folder = lab.root / "ssh"
    folder.mkdir()
    proc = command(lab, sshd, folder, "status", "--dataset", "stg_qsr_pos")
    errors = [line for line in proc.stderr.splitlines() if line.startswith("daybreak: error: ")]
    assert proc.returncode == 2 and len(errors) == 1 and str(folder) in errors[0], proc.stderr[-3000:]
    assert "not answering" not in proc.stderr and "retrying" not in proc.stderr, proc.stderr[-3000:]
