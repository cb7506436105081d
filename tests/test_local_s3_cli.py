"""``bin/local-s3`` (tools/local_s3_cli.py): a mistake is one line on stderr and exit 2, as its --help says; a
port an ended server's connections still wait on (TIME_WAIT) is free for the next start."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests import radosgw

REPO = Path(__file__).resolve().parents[1]
needs_radosgw = pytest.mark.skipif(not radosgw.installed(), reason=f"radosgw not installed ({radosgw.INSTALL})")


def listening(port: int) -> bool:
    """Whether something accepts connections on ``port`` of 127.0.0.1."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return False
    return True


def local_s3(*args: str) -> subprocess.CompletedProcess:
    """``bin/local-s3 ARGS`` with this Python's virtualenv active (its ``python3`` first on PATH)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [str(REPO / "bin" / "local-s3"), *args], capture_output=True, text=True, timeout=300, cwd=REPO, env=env
    )


@pytest.mark.unit
@pytest.mark.parametrize("name", ["b", "ab", "x" * 64, "Lake", "la_ke", "-lake", "lake-", ".lake", "lake.", "la ke"])
def test_a_bucket_name_s3_refuses_is_named_with_the_rule(name):
    from tools.local_s3_cli import bucket_problem

    problem = bucket_problem(name)
    assert problem is not None and repr(name) in problem


@pytest.mark.unit
@pytest.mark.parametrize("name", ["abc", "lake", "landing", "my.lake-2", "0lake9", "x" * 63])
def test_a_bucket_name_s3_takes_is_not_refused(name):
    from tools.local_s3_cli import bucket_problem

    assert bucket_problem(name) is None


@pytest.mark.system
def test_a_bucket_name_s3_refuses_is_one_line_and_exit_2_before_any_server_starts(tmp_path):
    folder = tmp_path / "s3"
    done = local_s3("start", "--folder", str(folder), "--port", str(radosgw.free_port()), "--bucket", "b")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "'b'" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.stdout == "" and not folder.exists()  # nothing started


@pytest.mark.system
@needs_radosgw
def test_a_bucket_the_server_refuses_is_one_line_and_exit_2_and_no_server_is_left(tmp_path):
    """An IP address passes the name rules checked first; radosgw refuses it."""
    folder, port = tmp_path / "s3", radosgw.free_port()
    done = local_s3("start", "--folder", str(folder), "--port", str(port), "--bucket", "lake", "--bucket", "10.1.2.3")
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "10.1.2.3" in done.stderr and "InvalidBucketName" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == "", done.stderr
    assert not (folder / "local-s3.json").exists() and not listening(port)  # the server was stopped


def time_wait_on(port: int) -> None:
    """Leave a connection of a server on ``port`` of 127.0.0.1 in TIME_WAIT (the server closed first), and
    nothing listening there."""
    with socket.create_server(("127.0.0.1", port)) as listener:
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = listener.accept()
        accepted.close()  # the server's side closes first: its end waits out TIME_WAIT
        assert client.recv(1) == b""
        client.close()


@pytest.mark.system
@needs_radosgw
def test_a_port_an_ended_servers_connections_wait_on_is_free_and_one_listened_on_is_taken(tmp_path):
    port = radosgw.free_port()
    time_wait_on(port)
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))  # what the check once did: the port looked taken
    assert not listening(port)
    folder = tmp_path / "s3"
    started = local_s3("start", "--folder", str(folder), "--port", str(port), "--bucket", "lake")
    try:
        assert started.returncode == 0, started.stderr
        assert f"export S3_ENDPOINT=http://127.0.0.1:{port}" in started.stdout
        # the stop command it prints stops this server, as printed
        assert started.stderr.split("stop it with: ")[1].split() == ["bin/local-s3", "stop", "--folder", str(folder)]
        assert listening(port)
        again = local_s3("start", "--folder", str(tmp_path / "other"), "--port", str(port))
        assert again.returncode == 2 and again.stderr.count("\n") == 1 and str(port) in again.stderr, again.stderr
    finally:
        assert local_s3("stop", "--folder", str(folder)).returncode == 0
