"""A local S3-compatible server on 127.0.0.1: Ceph's RADOS Gateway (Debian's radosgw, ceph-mon, ceph-osd).

One monitor, one OSD on the memstore backend (objects live in the OSD's memory, no disk) and radosgw's beast
frontend, all run by the current user in a folder of their own: a fresh fsid, cephx off, no systemd.

    apt-get install -y --no-install-recommends radosgw ceph-mon ceph-osd

From a shell (``bin/local-s3``; docs/scale-out.md tries a bucket and two hosts with it)::

    eval "$(bin/local-s3 start --port 7480 --bucket landing --bucket lake)"   # exports the endpoint and keys
    bin/local-s3 put data/raw s3://landing/pos                                   # every file, one plain PUT each
    bin/local-s3 stop

In a test module (tests/radosgw.py is this module)::

    @pytest.fixture(scope="module")
    def rgw(tmp_path_factory):
        with radosgw.running(tmp_path_factory.mktemp("radosgw")) as server:
            yield server

    def test_put(rgw):
        s3 = rgw.client()
        rgw.make_bucket("lake")
        s3.put_object(Bucket="lake", Key="k", Body=b"x")
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BINARIES = ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool", "ceph")
SETPRIV = shutil.which("setpriv")  # util-linux, essential in Debian
INSTALL = "apt-get install -y --no-install-recommends radosgw ceph-mon ceph-osd"


def missing() -> list[str]:
    """The Ceph programs the fixture runs that are not installed."""
    return [name for name in BINARIES if shutil.which(name) is None and not os.path.exists(f"/usr/bin/{name}")]


def installed() -> bool:
    return not missing()


def free_port(avoid: tuple[int, ...] = ()) -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in avoid:
            return port


class Radosgw:
    """ceph-mon + one memstore OSD + radosgw on 127.0.0.1, with one S3 user.

    stop() ends every process and loses the data (it lives in the OSD's memory); restart() restarts radosgw
    only, so the objects written before are still there."""

    # the zonegroup: any region signs a request, but a bucket's LocationConstraint must be "default" or absent
    region = "default"
    user = "daybreak"

    def __init__(
        self,
        folder: Path,
        memstore_bytes: int = 1 << 30,
        timeout: float = 60,
        port: int | None = None,
        detach: bool = False,
    ):
        """``port``: radosgw's (default: a free one); ``detach``: the daemons outlive this process (``bin/local-s3
        start``), else they die with the thread that started them."""
        if gone := missing():
            raise RuntimeError(f"{', '.join(gone)} not found: install Debian's Ceph packages ({INSTALL})")
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self.memstore_bytes = memstore_bytes
        self.fixed_port, self.detach = port, detach
        self.mon_port = free_port(avoid=(port,) if port else ())
        self.port = port or free_port(avoid=(self.mon_port,))
        self.access_key = "DB" + secrets.token_hex(9).upper()  # 20 characters, as AWS's
        self.secret_key = secrets.token_urlsafe(30)  # 40 characters
        self.conf = folder / "ceph.conf"
        self.logs = folder / "log"
        self.procs: dict[str, subprocess.Popen] = {}
        self._deadline = 0.0

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- configuration ------------------------------------------------------------------------------
    def _write_conf(self, fsid: str) -> None:
        f = self.folder
        self.conf.write_text(
            f"""[global]
fsid = {fsid}
mon host = v2:127.0.0.1:{self.mon_port}
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
ms bind ipv6 = false
ms bind retry count = 1
# no cephx: and daemons talk to the monitor in crc mode, as secure mode needs cephx's session key
auth cluster required = none
auth service required = none
auth client required = none
ms mon client mode = crc
keyring = {f / "keyring"}
admin socket =
run dir = {f / "run"}
crash dir = {f / "crash"}
log file = {self.logs}/$name.log
mon cluster log file = {self.logs}/cluster.log
mon data = {f}/mon.$id
osd data = {f}/osd.$id
osd objectstore = memstore
memstore device bytes = {self.memstore_bytes}
# one OSD: every pool has one copy, few placement groups, no autoscaler (there is no manager)
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail crit = 1
# a new pool (radosgw makes 6 or more) is usable at once, not after the monitor's 1 s batching: start 1 s, not 13
paxos propose interval = 0.01
paxos min wait = 0.001

[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:{self.port} tcp_nodelay=1
rgw data = {f / "rgw"}
rgw thread pool size = 64
"""
        )

    # -- processes ----------------------------------------------------------------------------------
    def _run(self, *args: str) -> str:
        """A Ceph command on this cluster, by the deadline; its output, or a RuntimeError with the logs."""
        command = " ".join(args[:3])
        with open(self.logs / "commands.out", "ab") as err:
            proc = subprocess.Popen(
                [*args, "--conf", str(self.conf)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err
            )
            try:
                while True:  # a daemon that died would leave the command waiting for it to the deadline
                    try:
                        out, _ = proc.communicate(timeout=0.1)
                        break
                    except subprocess.TimeoutExpired:
                        self._check_daemons()
                        if time.monotonic() > self._deadline:
                            raise RuntimeError(f"{command} took over {self.timeout} s\n{self.log_tail()}") from None
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        if proc.returncode != 0:
            raise RuntimeError(f"{command} failed with {proc.returncode}\n{self.log_tail()}")
        return out.decode()

    def _check_daemons(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}\n{self.log_tail()}")

    def _daemon(self, name: str, *args: str) -> None:
        """A daemon in the foreground, in its own process group (stop() kills the group).

        Started from the main thread, it is also killed when the test process ends without stop() (killed
        itself): Linux's parent-death signal, which fires when the thread that started the child ends."""
        guard = (
            [SETPRIV, "--pdeathsig", "KILL", "--"]
            if SETPRIV and threading.current_thread() is threading.main_thread() and not self.detach
            else []
        )
        with open(self.logs / f"{name}.out", "ab") as out:
            self.procs[name] = subprocess.Popen(
                [*guard, *args, "--conf", str(self.conf), "-f"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )

    def _kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def log_tail(self, chars: int = 1500) -> str:
        """The end of each daemon's log, for an error message."""
        parts = []
        for path in sorted(self.logs.glob("*")):
            text = path.read_text(errors="replace").strip()
            if text:
                parts.append(f"--- {path.name}\n{text[-chars:]}")
        return "\n".join(parts)

    def _wait_osd(self) -> None:
        """Until the OSD is up: when radosgw-admin made its first pool before, its requests waited 5 s more."""
        log = self.logs / "osd.0.log"
        while not (log.exists() and "state: booting -> active" in log.read_text(errors="replace")):
            self._check_daemons()
            if time.monotonic() > self._deadline:
                raise RuntimeError(f"the OSD did not boot in {self.timeout} s\n{self.log_tail()}")
            time.sleep(0.02)

    def _wait_ready(self) -> None:
        """Until radosgw answers HTTP on its port; a RuntimeError when a daemon died or at the deadline."""
        while True:
            self._check_daemons()
            try:
                with urllib.request.urlopen(self.endpoint_url, timeout=2) as response:
                    response.read()
                return
            except urllib.error.HTTPError:
                return  # any answer from the gateway means it is serving
            except OSError:
                pass
            if time.monotonic() > self._deadline:
                raise RuntimeError(f"radosgw not serving {self.endpoint_url} after {self.timeout} s\n{self.log_tail()}")
            time.sleep(0.05)

    # -- life cycle ---------------------------------------------------------------------------------
    def start(self) -> Radosgw:
        """A new cluster (a fresh fsid, nothing stored) and its S3 user; returns when radosgw serves S3."""
        if self.procs:
            raise RuntimeError("radosgw already started")
        self._deadline = time.monotonic() + self.timeout
        for attempt in (1, 2, 3):
            try:
                self._bootstrap()
                return self
            except BaseException as e:
                self.stop()
                if attempt == 3 or not isinstance(e, RuntimeError) or not self._port_taken():
                    raise
            # another program bound a port between free_port() and the daemon: again, on new ports
            self.mon_port = free_port(avoid=(self.fixed_port,) if self.fixed_port else ())
            self.port = self.fixed_port or free_port(avoid=(self.mon_port,))
        raise AssertionError("unreachable")

    def _bootstrap(self) -> None:
        for old in ("mon.a", "osd.0", "rgw", "run", "crash", "log", "monmap", "keyring"):
            path = self.folder / old
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
        for new in ("mon.a", "osd.0", "rgw", "run", "crash", "log"):
            (self.folder / new).mkdir()
        (self.folder / "keyring").touch()
        fsid, osd_uuid = str(uuid.uuid4()), str(uuid.uuid4())
        self._write_conf(fsid)
        monmap = str(self.folder / "monmap")
        self._run("monmaptool", "--create", "--fsid", fsid, "--addv", "a", f"[v2:127.0.0.1:{self.mon_port}]", monmap)
        self._run("ceph-mon", "--mkfs", "-i", "a", "--monmap", monmap)
        self._run("ceph-osd", "--mkfs", "-i", "0", "--osd-uuid", osd_uuid, "--no-mon-config")
        self._daemon("mon", "ceph-mon", "-i", "a")
        self._run("ceph", "osd", "new", osd_uuid, "0")
        self._daemon("osd", "ceph-osd", "-i", "0")
        self._wait_osd()
        # before radosgw starts: radosgw-admin makes the default realm, zone and their pools on its own
        self._run(
            "radosgw-admin", "user", "create", f"--uid={self.user}", "--display-name=Daybreak tests",
            f"--access-key={self.access_key}", f"--secret-key={self.secret_key}",
        )  # fmt: skip
        self._daemon("rgw", "radosgw", "--name", "client.rgw")
        self._wait_ready()

    def _port_taken(self) -> bool:
        return any("Address already in use" in p.read_text(errors="replace") for p in self.logs.glob("*.out"))

    def stop(self) -> None:
        """End radosgw, the OSD and the monitor (each its own process group); the data goes with them."""
        for name in ("rgw", "osd", "mon"):
            self._kill(name)

    def restart(self) -> None:
        """Restart radosgw only (SIGTERM, then a new process on the same port); the stored objects stay."""
        if "osd" not in self.procs:
            raise RuntimeError("radosgw not started")
        self._deadline = time.monotonic() + self.timeout
        self._kill("rgw", signal.SIGTERM)
        self._daemon("rgw", "radosgw", "--name", "client.rgw")
        self._wait_ready()

    # -- S3 -----------------------------------------------------------------------------------------
    def client(self, **config: Any):
        """A boto3 S3 client for this server: path-style addressing, this server's keys and region.

        Keyword arguments go to botocore's Config, over these defaults. Checksums only when required: over
        HTTP botocore's default (a CRC32 header) works too, but over HTTPS it sends aws-chunked bodies with
        trailing checksums, which radosgw 16 does not take."""
        import boto3
        from botocore.config import Config

        settings = {
            "s3": {"addressing_style": "path"},
            "signature_version": "s3v4",
            "retries": {"max_attempts": 3, "mode": "standard"},
            "request_checksum_calculation": "when_required",
            "response_checksum_validation": "when_required",
        } | config
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
            config=Config(**settings),
        )

    def make_bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)
        return name


@contextlib.contextmanager
def running(folder: Path, **options: Any) -> Iterator[Radosgw]:
    """A started Radosgw in folder, stopped on the way out (for a module- or session-scoped fixture)."""
    server = Radosgw(folder, **options).start()
    try:
        yield server
    finally:
        server.stop()
