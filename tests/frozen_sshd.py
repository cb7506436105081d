"""An SSH server that logs any key in, then freezes at one step of opening the sftp session: the channel
open or the subsystem request. It stands in for a real sshd stopped (``kill -STOP``) right after a login,
which a test cannot make happen between two packets of one connection; a real sshd frozen anywhere else
is tests/sshd.py's. paramiko's server side, in threads of the test's process."""

from __future__ import annotations

import contextlib
import getpass
import socket
import threading
from pathlib import Path

import paramiko

from tests.sshd import free_port, keygen


class _Frozen(paramiko.ServerInterface):
    def __init__(self, step: str, thaw: threading.Event):
        self.step, self.thaw = step, thaw

    def get_allowed_auths(self, username):
        return "publickey"

    def check_auth_publickey(self, username, key):
        return paramiko.AUTH_SUCCESSFUL

    def check_channel_request(self, kind, chanid):
        if self.step == "open":
            self.thaw.wait()  # never answers while the test runs
        return paramiko.OPEN_SUCCEEDED

    def check_channel_subsystem_request(self, channel, name):
        if self.step == "subsystem":
            self.thaw.wait()
        return False


class FrozenSshd:
    """Listens on 127.0.0.1:``port``; each connection logs in, then freezes at ``step``."""

    def __init__(self, folder: Path, step: str):
        folder.mkdir(parents=True, exist_ok=True)
        self.step = step
        self.host_key = keygen(folder / "host_key")
        self.client_key = keygen(folder / "client_key")
        self.port = free_port()
        self.user = getpass.getuser()
        self.known_hosts = folder / "known_hosts"
        kind, key = (folder / "host_key.pub").read_text().split()[:2]
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {kind} {key}\n")
        self._thaw = threading.Event()
        self._transports: list[paramiko.Transport] = []
        self._listener = socket.create_server(("127.0.0.1", self.port))

    def start(self) -> FrozenSshd:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self) -> None:
        key = paramiko.Ed25519Key(filename=str(self.host_key))
        while not self._thaw.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed by stop()
                return
            transport = paramiko.Transport(conn)
            transport.add_server_key(key)
            self._transports.append(transport)
            with contextlib.suppress(Exception):
                transport.start_server(server=_Frozen(self.step, self._thaw))

    def stop(self) -> None:
        self._thaw.set()
        self._listener.close()
        for transport in self._transports:
            transport.close()

    def uri(self, path: Path) -> str:
        return f"sftp://{self.user}@127.0.0.1:{self.port}{path}"
