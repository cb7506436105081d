"""A real OpenSSH server on 127.0.0.1 for the SFTP tests (Debian's openssh-server; .ci/run installs it)."""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


class Sshd:
    """sshd -D on 127.0.0.1 with a temporary host key and one authorized client key."""

    def __init__(self, folder: Path, subsystem: str = "internal-sftp", extra: str = ""):
        """``subsystem``: what runs the sftp subsystem; ``extra``: lines added to sshd_config."""
        if not os.path.exists(SSHD):
            raise RuntimeError("sshd not found: install Debian's openssh-server (.ci/run does)")
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.host_key = keygen(folder / "host_key")
        self.client_key = keygen(folder / "client_key")
        (folder / "authorized_keys").write_text((folder / "client_key.pub").read_text())
        self.port = free_port()
        self.user = getpass.getuser()
        self.known_hosts = folder / "known_hosts"
        host_pub = (folder / "host_key.pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_pub[0]} {host_pub[1]}\n")
        self.config = folder / "sshd_config"
        self.config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.host_key}\n"
            f"AuthorizedKeysFile {folder / 'authorized_keys'}\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nPermitRootLogin prohibit-password\n"
            f"StrictModes no\nUsePAM no\nPidFile {folder / 'sshd.pid'}\nSubsystem sftp {subsystem}\n"
            f"MaxStartups 100\nMaxSessions 100\nLogLevel VERBOSE\n{extra}"
        )
        self.proc: subprocess.Popen | None = None

    def start(self) -> Sshd:
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege separation directory
        self.log = open(self.folder / "sshd.log", "ab")
        self.proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(self.config)], stdout=self.log, stderr=self.log, start_new_session=True
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.05)
        raise RuntimeError(f"sshd did not start: {(self.folder / 'sshd.log').read_text()[-2000:]}")

    def stop(self) -> None:
        """Stop the server: the listener and its per-connection processes (continued first, if frozen)."""
        if self.proc and self.proc.poll() is None:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            self.proc.wait(timeout=10)

    def processes(self) -> list[int]:
        """The server's processes: the listener and every process under it. OpenSSH gives each
        connection a session of its own (setsid), outside the listener's process group."""
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:  # gone since the listing
                    continue
                children.setdefault(int(stat[stat.rindex(")") + 2 :].split()[1]), []).append(int(entry))
        found, todo = [], [self.proc.pid]
        while todo:
            found.append(todo.pop())
            todo.extend(children.get(found[-1], []))
        return found

    def signal(self, sig: int) -> None:
        """``sig`` to every process of the server (SIGSTOP: a frozen server, its open sessions too)."""
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def _tcp(self) -> tuple[str, list[list[str]]]:
        """This server's address as /proc/net/tcp spells it, and the table's rows (split)."""
        with open("/proc/net/tcp") as fh:
            return f"0100007F:{self.port:04X}", [line.split() for line in fh.readlines()[1:]]

    def established(self) -> int:
        """Server-side count of established TCP connections to the port (from /proc/net/tcp).

        Counted by client address: /proc/net/tcp is not read as one snapshot, and while other
        connections open and close (luigid's HTTP calls) a row can appear twice in one read."""
        server, rows = self._tcp()
        return len({r[2] for r in rows if r[1] == server and r[3] == "01"})

    def connections(self) -> dict[str, int]:
        """Each established connection to the port, by client address, with the inode of the client's
        socket (the same /proc/net/tcp read gives both ends of a loopback connection)."""
        server, rows = self._tcp()
        clients = {r[2] for r in rows if r[1] == server and r[3] == "01"}
        return {r[1]: int(r[9]) for r in rows if r[1] in clients and r[2] == server and r[3] == "01"}

    def uri(self, path: Path) -> str:
        return f"sftp://{self.user}@127.0.0.1:{self.port}{path}"
