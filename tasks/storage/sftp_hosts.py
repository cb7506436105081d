"""The host key an SFTP server shows, checked against ``[sftp] known_hosts`` (:mod:`tasks.storage.sftp` logs
in with it): never accepted automatically. A key refused is a setting to fix, one line and exit 2
(:func:`tasks.guard.fail`), never retried."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import NoReturn

import paramiko


class KnownHosts:
    """The keys ``path`` gives ``host:port``; ``where``: the raw zone, as its messages name it."""

    def __init__(self, path: str, host: str, port: int, where: str):
        self.path, self.host, self.port, self.where = path, host, port, where

    def trust(self, client: paramiko.SSHClient) -> None:
        """Make ``client`` accept only the keys of the file for this server."""
        try:
            client.load_host_keys(self.path)
        except FileNotFoundError:
            self._refused(
                f"[sftp] known_hosts file {self.path} not found; no host key to verify {self.host}:{self.port} against"
            )
        client.set_missing_host_key_policy(paramiko.RejectPolicy())

    @contextlib.contextmanager
    def checked(self) -> Iterator[None]:
        """A login, in which a host key refused is one line naming the file and what to do."""
        try:
            yield
        except paramiko.BadHostKeyException:
            self._refused(
                f"host key of {self.host}:{self.port} changed (it is not the one in [sftp] known_hosts {self.path}): "
                f"refusing to connect. Check with the server's owner that it changed, then replace its line "
                f"({self.keyscan()})"
            )
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):  # paramiko's RejectPolicy
                self._refused(
                    f"unknown host key for {self.host}:{self.port}: it is not in [sftp] known_hosts {self.path}, "
                    f"and host keys are never accepted automatically. Get it ({self.keyscan()}), compare its "
                    f"fingerprint with the one the server's owner gives you, then add the line to {self.path}"
                )
            raise

    def keyscan(self) -> str:
        return f"ssh-keyscan -p {self.port} {self.host}"

    def _refused(self, message: str) -> NoReturn:
        from tasks.guard import fail

        fail(f"{self.where}: {message}")
