"""A raw zone on an SFTP server (paramiko): the only module that opens SFTP connections.

Host keys are verified against ``[sftp] known_hosts``, never auto-accepted. One connection per process
serves every listing and read; it remembers the pid that opened it, so a forked worker never uses its
parent's. Transient failures are retried with backoff; authentication and host-key failures are not: they
are settings to fix, one line and exit 2 (:func:`_refused`), not a server to wait for."""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import mmap
import os
import socket
import stat
import threading
import time
from collections.abc import Iterator
from typing import NoReturn
from urllib.parse import urlsplit

import paramiko

from tasks.storage.rawbackend import (
    FOLDER,
    NO_READ,
    UNREADABLE,
    RawBackend,
    RawFile,
    RawFileUnreadable,
    RawZoneUnavailable,
    mode_kind,
)
from tasks.storage.sftp_hosts import KnownHosts
from tasks.storage.sftp_read import BYTES_PER_CALL, FILES_PER_CALL, read_pipelined

logger = logging.getLogger("luigi-interface")
# paramiko's transport thread would log a traceback of its own; SftpError names the cause in one line
logging.getLogger("paramiko").setLevel(logging.CRITICAL)
WINDOW_BYTES = 64 * 1024 * 1024
_CONNECTIONS: dict[tuple, tuple[int, paramiko.SSHClient, paramiko.SFTPClient]] = {}


class SftpError(RawZoneUnavailable):
    """The server did not answer past the retries (exit 30: rerun once it answers). A host key or a login it
    refuses is a configuration error instead (:func:`_refused`). ``at_start``: it never answered this run,
    down before the command started, not gone during it."""

    def __init__(self, message: str, at_start: bool = False):
        super().__init__(message)
        self.at_start = at_start


def _refused(message: str) -> NoReturn:
    """A host key or a login refused: a setting to fix ([sftp] known_hosts, key_filename), which no rerun
    fixes, so one line and exit 2 like every configuration error (:func:`tasks.guard.fail`), never retried."""
    from tasks.guard import fail

    fail(message)


# A server that failed past its retries is dead for this process and every process forked from it (a
# shared mapping), so the remaining partitions fail at once instead of each waiting out its retries.
# Bytes: 1 (dead) or 0, then the reason, NUL-terminated.
_DEAD = mmap.mmap(-1, 4096)
# Whether the server answered this run once (1) or never (0), in whichever process: shared as _DEAD is
_ANSWERED = mmap.mmap(-1, 1)


def _declare_dead(reason: str) -> None:
    _DEAD[1:] = reason.encode("utf-8", "replace")[: len(_DEAD) - 2].ljust(len(_DEAD) - 1, b"\0")
    _DEAD[0] = 1


def known_dead() -> str | None:
    """Why the server was given up on by this run, or None."""
    return _DEAD[1:].split(b"\0", 1)[0].decode("utf-8", "replace") if _DEAD[0] else None


def forget_dead() -> None:
    """Take the server for alive again (a new run in the same process: tests)."""
    _DEAD[0] = 0
    _ANSWERED[0] = 0


def answered() -> bool:
    """Whether the server answered this run once: one that never did was down before the command started."""
    return bool(_ANSWERED[0])


def backend_for(uri: str) -> SftpRaw:
    """``sftp://user@host:port/path`` as a raw zone's backend, the key and known hosts from [sftp]."""
    from tasks import settings

    parts = urlsplit(uri)
    if not parts.hostname or not parts.username:
        raise ValueError(f"raw_root {uri!r}: expected sftp://user@host:port/path")
    cfg = settings.sftp()
    options = {name: getattr(cfg, name) for name in ("key_filename", "known_hosts", "timeout", "retries")}
    return SftpRaw(parts.hostname, parts.port or 22, parts.username, parts.path or "/", **options)


class SftpRaw(RawBackend):
    """The files below a path on an SFTP server, over this process's one connection to it."""

    mtime_resolution_ns = 10**9  # SFTP (v3) gives whole-second mtimes
    local_lookups = False
    one_session = True

    def __init__(
        self,
        host: str,
        port: int,
        user: str,
        path: str,
        *,
        key_filename: str,
        known_hosts: str,
        timeout: float = 15.0,
        retries: int = 3,
    ):
        self.host, self.port, self.user, self.base = host, port, user, path.rstrip("/") or "/"
        self.key_filename = os.path.expanduser(key_filename) if key_filename else None
        self.known_hosts = os.path.expanduser(known_hosts)
        self.timeout, self.retries = timeout, retries
        self._real: dict[str, bool] = {}  # source folders found real (not a link), once per object

    def describe(self) -> str:
        return f"sftp://{self.user}@{self.host}:{self.port}{self.base}"

    # -- the RawBackend interface --------------------------------------------------------------
    def folder(self, source: str, name: str) -> tuple[list[tuple[str, int, int]], list[tuple[str, str]]] | None:
        """OpenSSH lists with lstat, so a link shows as one. A file is NO_READ when no one has the read bit
        (unless the session is root's); one the bits cannot tell (another owner's 0600) fails when opened."""
        folder = f"{self.base}/{source}/{name}"

        def scan(sftp: paramiko.SFTPClient):
            if not self._real_folder(sftp, f"{self.base}/{source}", once=True) or not self._real_folder(sftp, folder):
                return None
            return _listdir_attr(sftp, folder)

        attrs = self._call(scan)
        if attrs is None:
            return None
        files, others = [], []
        for a in attrs:
            mode = a.st_mode or 0
            if not stat.S_ISREG(mode):
                others.append((a.filename, mode_kind(mode)))
            elif self.user == "root" or mode & 0o444:
                files.append((a.filename, a.st_size, int(a.st_mtime) * 10**9))
            else:
                others.append((a.filename, NO_READ))
        return files, others

    def _real_folder(self, sftp: paramiko.SFTPClient, path: str, once: bool = False) -> bool:
        """Whether ``path`` is a folder, not a symbolic link (lstat); ``once``: asked once per object."""
        if once and path in self._real:  # only a real folder is remembered: a missing one may come
            return True
        try:
            mode = sftp.lstat(path).st_mode or 0
        except FileNotFoundError:
            mode = 0
        if once and stat.S_ISDIR(mode):
            self._real[path] = True
        return stat.S_ISDIR(mode)

    def source(self, source: str) -> tuple[str | None, list[tuple[str, str]]]:
        path = f"{self.base}/{source}"

        def listing(sftp: paramiko.SFTPClient):
            try:
                kind = mode_kind(sftp.lstat(path).st_mode or 0)
            except FileNotFoundError:
                return None, []
            if kind != FOLDER:
                return kind, []
            return kind, [(a.filename, mode_kind(a.st_mode or 0)) for a in _listdir_attr(sftp, path) or []]

        return self._call(listing)

    def folder_stamps(self, source: str) -> dict[str, int]:
        path = f"{self.base}/{source}"
        attrs = self._call(lambda sftp: self._real_folder(sftp, path, once=True) and _listdir_attr(sftp, path))
        return {a.filename: int(a.st_mtime) * 10**9 for a in attrs or [] if stat.S_ISDIR(a.st_mode or 0)}

    def read_many(self, files: list[RawFile]) -> Iterator[bytes]:
        """Pipelined reads (:mod:`tasks.storage.sftp_read`), in groups of at most :data:`FILES_PER_CALL` files
        or about :data:`BYTES_PER_CALL` bytes, a group retried whole after a transient failure."""
        group: list[RawFile] = []
        held = 0
        for i, raw in enumerate(files):
            group.append(raw)
            held += raw.size
            if i + 1 < len(files) and len(group) < FILES_PER_CALL and held < BYTES_PER_CALL:
                continue
            paths = [(f"{self.base}/{f.relpath}", f.relpath, f.size) for f in group]
            yield from self._call(lambda sftp, paths=paths: read_pipelined(sftp, paths))
            group, held = [], 0

    def read(self, raw: RawFile) -> bytes:
        """Checked with lstat first: the server would open what a link swapped in since points to."""
        path = f"{self.base}/{raw.relpath}"

        def read(sftp: paramiko.SFTPClient) -> bytes:
            try:
                if not stat.S_ISREG(sftp.lstat(path).st_mode or 0):
                    raise RawFileUnreadable(f"{raw.relpath}: no longer a regular file (a symbolic link?); rerun")
                with sftp.open(path, "rb") as fh:
                    fh.prefetch()
                    return fh.read()
            except PermissionError as exc:  # not transient: never retried
                raise RawFileUnreadable(f"{raw.relpath}: {UNREADABLE} ({exc}); fix its permissions") from exc

        return self._call(read)

    # -- connections ---------------------------------------------------------------------------
    def _call(self, operation):
        """``operation(sftp)`` on this process's connection, retrying transient failures; past the retries
        the server is given up on for the rest of the run (:func:`known_dead`)."""
        dead = known_dead()
        if dead is not None:
            raise SftpError(f"{dead}; not tried again in this run", at_start=not answered())
        for attempt in range(self.retries + 1):
            try:
                return operation(self._sftp())
            except (OSError, EOFError, paramiko.SSHException) as exc:
                if isinstance(exc, paramiko.AuthenticationException | paramiko.BadHostKeyException | SftpError):
                    raise
                self.close()
                if attempt == self.retries:
                    tries = self.retries + 1
                    reason = f"{self.describe()}: server not answering ({_cause(exc)}) after {tries} attempts"
                    _declare_dead(f"{reason} at {time.strftime('%H:%M:%S')}")
                    raise SftpError(reason, at_start=not answered()) from exc
                wait = 0.5 * 2**attempt
                # a server that never answered this run: its one line says it, past the retries (INFO: not shown)
                level = logging.WARNING if answered() else logging.INFO
                logger.log(level, "%s: %r, retrying in %.1f s", self.describe(), exc, wait)
                time.sleep(wait)

    def _key(self) -> tuple:
        return (self.host, self.port, self.user, self.key_filename, self.known_hosts)

    def _sftp(self) -> paramiko.SFTPClient:
        cached = _CONNECTIONS.get(self._key())
        if cached and cached[0] == os.getpid():
            if cached[1].get_transport() and cached[1].get_transport().is_active():
                return cached[2]
            self.close()  # this process's, ended: its socket closed before the next connection opens
        elif cached:
            _CONNECTIONS.pop(self._key())  # the parent's: never used, never closed here
        client, sftp = self._connect()
        _ANSWERED[0] = 1
        _CONNECTIONS[self._key()] = (os.getpid(), client, sftp)
        return sftp

    def _check_base(self, sftp: paramiko.SFTPClient) -> None:
        """A base path the server does not have is a setting to fix, not folders to wait for (exit 2)."""
        try:
            sftp.stat(self.base)
        except FileNotFoundError:
            from tasks.settings_check import raw_root_missing

            raw_root_missing(self.describe(), " on the server")

    def _connect(self) -> tuple[paramiko.SSHClient, paramiko.SFTPClient]:
        client = paramiko.SSHClient()
        known = KnownHosts(self.known_hosts, self.host, self.port, f"raw_root {self.describe()}")
        known.trust(client)
        try:
            self._login(client, known)
            sftp = self._open_sftp(client.get_transport())
            self._check_base(sftp)
        except BaseException:  # closed now, not at exit: a retry would hold one connection more
            _end(client)
            raise
        return client, sftp

    def _open_sftp(self, transport: paramiko.Transport) -> paramiko.SFTPClient:
        """The sftp session, each step within [sftp] timeout (paramiko's open_sftp waits for the subsystem's
        answer without a limit): past it, the connection is shut, which wakes the wait, and it is a timeout."""
        channel = transport.open_session(timeout=self.timeout)
        channel.settimeout(self.timeout)  # the SFTP version, then each request
        expired = threading.Event()
        timer = threading.Timer(self.timeout, lambda: (expired.set(), _shut(transport)))
        timer.daemon = True
        timer.start()
        try:
            channel.invoke_subsystem("sftp")
        except (OSError, EOFError, paramiko.SSHException) as exc:
            if expired.is_set():
                raise TimeoutError("timed out opening the sftp subsystem") from exc
            raise
        finally:
            timer.cancel()
        return paramiko.SFTPClient(channel)

    def _check_key(self) -> None:
        """One line, not retried, for a private key that is not there or that other users can read (OpenSSH
        refuses such a key too)."""
        if self.key_filename is None:
            return
        try:
            mode = os.stat(self.key_filename).st_mode
        except OSError as exc:
            _refused(
                f"raw_root {self.describe()}: [sftp] key_filename {self.key_filename}: {exc.strerror}; not retried"
            )
        if mode & 0o077:
            _refused(
                f"raw_root {self.describe()}: [sftp] key_filename {self.key_filename} can be read by other users "
                f"(mode {mode & 0o777:o}): chmod 600 it, as ssh requires; not retried"
            )

    def _login(self, client: paramiko.SSHClient, known: KnownHosts) -> None:
        self._check_key()
        try:
            with known.checked():
                client.connect(
                    self.host,
                    self.port,
                    username=self.user,
                    key_filename=self.key_filename,
                    timeout=self.timeout,
                    banner_timeout=self.timeout,
                    auth_timeout=self.timeout,
                    allow_agent=False,
                    look_for_keys=False,
                    # a 64 MiB window instead of paramiko's 2 MiB (docs/performance.md, "SFTP")
                    transport_factory=functools.partial(_transport, default_window_size=WINDOW_BYTES),
                )
        except paramiko.AuthenticationException as exc:
            if str(exc) == "Authentication timeout.":  # paramiko's: no answer within auth_timeout, not a refusal
                raise TimeoutError("timed out authenticating") from exc
            if "transport shut down or saw EOF" in str(exc):  # paramiko's: the connection ended mid-login
                raise ConnectionResetError(errno.ECONNRESET, "connection closed during the login") from exc
            _refused(
                f"raw_root {self.describe()}: authentication failed for user {self.user!r} with [sftp] key_filename "
                f"{self.key_filename} ({exc}); not retried: give the key the server knows for {self.user!r}"
            )
        except TimeoutError as exc:
            raise OSError(f"timeout connecting to {self.host}:{self.port}") from exc

    def close(self) -> None:
        """End this process's connection, if it has one (a parent's is left alone)."""
        cached = _CONNECTIONS.pop(self._key(), None)
        if cached and cached[0] == os.getpid():
            _end(cached[1])


def _end(client: paramiko.SSHClient) -> None:
    """Close ``client``'s connection now: a plain close() waits for paramiko's reader thread, so the server
    would see the session end after Luigi handed this task's sftp slot on (one connection over the cap)."""
    transport = client.get_transport()
    if transport is not None:
        _shut(transport)
    try:
        client.close()
    except Exception:  # noqa: BLE001 - closing a broken connection must not hide the real error
        pass


def _shut(transport: paramiko.Transport) -> None:
    """Shut ``transport``'s socket: its reader thread sees the end, and every wait on the connection ends."""
    with contextlib.suppress(OSError):
        transport.sock.shutdown(socket.SHUT_RDWR)


def _transport(sock, *args, **kwargs) -> paramiko.Transport:
    """A paramiko transport on ``sock`` with Nagle's algorithm off (many small requests go out at once) that
    offers AES-GCM first (one pass for cipher and integrity). Why: docs/performance.md, "SFTP"."""
    if isinstance(sock, socket.socket) and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    transport = paramiko.Transport(sock, *args, **kwargs)
    options = transport.get_security_options()
    options.ciphers = tuple(sorted(options.ciphers, key=lambda name: "-gcm@" not in name))
    return transport


def _cause(exc: BaseException) -> str:
    """What failed, in a few words (``connection refused``, ``timed out``)."""
    text = str(exc) or ("timed out" if isinstance(exc, TimeoutError) else type(exc).__name__)
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
    return text.splitlines()[0].lower().rstrip(".")


def _listdir_attr(sftp: paramiko.SFTPClient, path: str):
    try:
        return sftp.listdir_attr(path)
    except FileNotFoundError:
        return None


BACKEND = SftpRaw  # the class of this place's backend (rawzone.one_session)
