"""The host key an SFTP server shows, checked against ``[sftp] known_hosts`` (:mod:`tasks.storage.sftp` logs
in with it): never accepted automatically. A key refused is a setting to fix, one line and exit 2
(:func:`tasks.guard.fail`), never retried.

The file is read as OpenSSH reads it: a ``@cert-authority`` line is a certificate authority's key, no host's
(Daybreak takes no certificates); a ``@revoked`` key is refused, whatever other line trusts it; a line that
is not a host key (a key that does not decode) is skipped with a warning naming it, as ssh skips it."""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
from collections.abc import Iterator
from typing import NoReturn

import paramiko
from paramiko.hostkeys import HostKeyEntry

logger = logging.getLogger("luigi-interface")
_WARNED: set[tuple[str, int]] = set()  # the lines this process warned of: once each, not once a connection


class _Revoked(paramiko.SSHException):
    """The server's key is one the file marks ``@revoked``."""

    def __init__(self, key: paramiko.PKey):
        super().__init__("revoked host key")
        self.key = key


class _Reject(paramiko.RejectPolicy):
    """paramiko's refusal of a key the file does not give the host, told apart for a revoked key."""

    def __init__(self, revoked: dict[bytes, int]):
        self.revoked = revoked

    def missing_host_key(self, client, hostname, key):
        if key.asbytes() in self.revoked:
            raise _Revoked(key)
        super().missing_host_key(client, hostname, key)


class KnownHosts:
    """The keys ``path`` gives ``host:port``; ``where``: the raw zone, as its messages name it."""

    def __init__(self, path: str, host: str, port: int, where: str):
        self.path, self.host, self.port, self.where = path, host, port, where
        self.revoked: dict[bytes, int] = {}  # a revoked key (its bytes), the line that says so

    def trust(self, client: paramiko.SSHClient) -> None:
        """Make ``client`` accept only the keys of the file for this server, none revoked."""
        try:
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                lines = list(enumerate(fh, 1))
        except FileNotFoundError:
            self._refused(
                f"[sftp] known_hosts file {self.path} not found; no host key to verify {self.host}:{self.port} against"
            )
        except OSError as exc:  # a folder, a file this user cannot read: a setting to fix, not a server down
            self._refused(f"[sftp] known_hosts {self.path}: cannot be read ({exc.strerror or exc})")
        trusted, self.revoked, skipped = read_known_hosts(lines)
        for number, why in skipped:
            if (self.path, number) not in _WARNED:
                _WARNED.add((self.path, number))
                logger.warning("[sftp] known_hosts %s line %d: %s; skipped, as ssh skips it", self.path, number, why)
        keys = client.get_host_keys()
        for entry in trusted:
            if entry.key.asbytes() not in self.revoked:
                for name in entry.hostnames:
                    keys.add(name, entry.key.get_name(), entry.key)
        client.set_missing_host_key_policy(_Reject(self.revoked))

    @contextlib.contextmanager
    def checked(self) -> Iterator[None]:
        """A login, in which a host key refused is one line naming the file and what to do."""
        try:
            yield
        except (_Revoked, paramiko.BadHostKeyException) as exc:
            line = self.revoked.get(exc.key.asbytes())
            if line is not None:
                self._refused(
                    f"host key of {self.host}:{self.port} is revoked ([sftp] known_hosts {self.path} line {line} "
                    f"marks it @revoked): refusing to connect. Get the server's new key from its owner"
                )
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


def read_known_hosts(
    lines: list[tuple[int, str]],
) -> tuple[list[HostKeyEntry], dict[bytes, int], list[tuple[int, str]]]:
    """The numbered lines of a known_hosts file as OpenSSH reads them: the host keys (of the types paramiko
    knows), the revoked keys (their bytes, with their line), and the lines skipped, with why."""
    trusted, revoked, skipped = [], {}, []
    for number, line in lines:
        fields = line.split()
        if not fields or fields[0].startswith("#") or fields[0] == "@cert-authority":
            continue
        marker = fields.pop(0) if fields[0].startswith("@") else None
        if marker not in (None, "@revoked"):
            skipped.append((number, f"unknown marker {marker}"))
        elif len(fields) < 3:
            skipped.append((number, "not names, a key type and a key"))
        elif marker == "@revoked":
            try:
                revoked[base64.b64decode(fields[2], validate=True)] = number
            except binascii.Error:
                skipped.append((number, "not a valid key"))
        else:
            try:
                entry = HostKeyEntry.from_line(" ".join(fields[:3]), number)
            except Exception:  # noqa: BLE001 - paramiko raises what its parser meets in bytes that are not a key
                skipped.append((number, "not a valid key"))
                continue
            if entry is not None:  # None: a key type paramiko does not know, so no key a server shows it
                trusted.append(entry)
    return trusted, revoked, skipped
