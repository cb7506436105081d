"""What a raw zone's backend is and gives (:class:`RawBackend`, :class:`RawFile`, the kinds of entries), and the
one way a local raw file is opened (:func:`open_regular`): below :mod:`tasks.storage.rawzone`, which owns
what is read and why, and the backends (a local folder, SFTP, a bucket)."""

from __future__ import annotations

import datetime as dt
import errno
import os
import stat
from collections.abc import Iterator
from typing import NamedTuple, Protocol

from tasks.storage.errors import StorageUnavailable

SYMLINK = "a symbolic link (never followed)"
NOT_REGULAR = "not a regular file"
UNREADABLE = "not readable by the pipeline's user"
NOT_A_FOLDER = "not a folder"
NOT_A_DATE_NAME = "not a YYYY-MM-DD folder name"

# An entry's kind as a listing tells it without following links (NO_READ: a file the user may not read)
FOLDER, LINK, FILE, OTHER, NO_READ = "folder", "link", "file", "other", "no read"


class RawZoneUnavailable(StorageUnavailable):
    """The raw zone cannot be reached: nothing can be listed or read."""


class RawFileUnreadable(RuntimeError):
    """A listed raw file that could not be opened (permissions, or replaced by a symbolic link)."""


class RawFileChanged(RuntimeError):
    """A raw file read is not the one listed (re-sent meanwhile): the build writes nothing; the next run reads it."""


def open_regular(path: str | os.PathLike, shown: str | None = None) -> int:
    """A descriptor open for reading on the regular file ``path``: the one way a raw file is opened. A link is
    not followed; a FIFO is not waited on (``O_NONBLOCK``) and, like a folder or device, refused after an
    ``fstat`` (:class:`RawFileUnreadable` naming ``shown``). FileNotFoundError when missing."""
    shown = shown or os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except PermissionError as exc:
        raise RawFileUnreadable(f"{shown}: {UNREADABLE} ({exc.strerror}); fix its permissions") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RawFileUnreadable(f"{shown}: became {SYMLINK} after it was listed; rerun") from exc
        if exc.errno in (errno.ENOTDIR, errno.ENXIO):  # a path through a file; a socket
            raise RawFileUnreadable(f"{shown}: {NOT_REGULAR} ({exc.strerror})") from exc
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
        raise RawFileUnreadable(f"{shown}: {NOT_REGULAR} ({kind}); nothing was read from it")
    os.set_blocking(fd, True)
    return fd


class RawFile(NamedTuple):
    """One raw file as listed: path relative to the raw root, size in bytes, mtime in ns."""

    relpath: str
    size: int
    mtime_ns: int

    @property
    def folder_date(self) -> dt.date:
        """Export date of the folder that holds the file (``<source>/<date>/<name>``)."""
        return dt.date.fromisoformat(self.relpath.split("/")[-2])


class RawBackend(Protocol):
    """Where a raw zone's files are: lists and reads, never following a symbolic link below the root, and
    says what it can. What is read, or why not, is RawZone's."""

    # A file's mtime is trusted only when older than this (the place's clock resolution)
    mtime_resolution_ns: int = 10_000_000
    # folder_stamps are mtimes (a change in the tick of a listing may keep one), not digests of what is listed
    folder_stamps_are_times: bool = True
    # Each read checks it got the very version listed: no re-listing after a build
    reads_checked: bool = False
    # Whether a folder is there costs a system call, not a request to a server
    local_lookups: bool = True
    # Folders are best listed many at once (a bucket)
    lists_at_once: bool = False
    # One session a process, their number capped ([resources] sftp): a range is built by one process, in
    # one run, and a task holds a session while it reads (an SFTP server)
    one_session: bool = False

    def describe(self) -> str: ...  # a path or a URI
    # ([(name, size, mtime_ns) of each readable regular file], [(name, kind) of each other entry]); None when
    # the folder is not there or it or its source folder is a symbolic link
    def folder(self, source: str, name: str) -> tuple[list[tuple[str, int, int]], list[tuple[str, str]]] | None: ...
    # (the kind of <source> or None when absent, [(name, kind)] of its entries when it is a real folder)
    def source(self, source: str) -> tuple[str | None, list[tuple[str, str]]]: ...
    # {name: a stamp that changes when a file is added, removed or replaced in it} of each real folder in <source>/
    def folder_stamps(self, source: str) -> dict[str, int]: ...
    # the file's bytes now; a link or FIFO swapped in since the listing is refused (RawFileUnreadable)
    def read(self, raw: RawFile) -> bytes: ...

    def close(self) -> None:
        """Release this process's connection to the raw zone, if any."""

    def folder_exists(self, source: str, name: str) -> bool:
        return self.folder(source, name) is not None

    def read_listed(self, raw: RawFile) -> bytes:  # for a build: checked to be the version listed, if reads_checked
        return self.read(raw)

    def read_checked(self, raw: RawFile) -> bytes:  # read now (never fetched ahead), checked as read_listed is
        return self.read(raw)

    def read_many(self, files: list[RawFile]) -> Iterator[bytes]:  # read_listed of each, several in flight if it helps
        return map(self.read_listed, files)

    def fetch_ahead(self, files: list[RawFile]) -> list:
        """Start fetching the next partition's inputs while this one builds, where a read is a request (a
        bucket); the futures started."""
        return []

    def file_identity(self, raw: RawFile) -> list[int] | None:  # RawZone.file_identity; None: cannot tell
        return None

    def holds_nothing(self) -> bool:  # RawZone.holds_nothing; False where a missing root is refused (exit 2)
        return False


def mode_kind(mode: int) -> str:
    """FOLDER, LINK, FILE or OTHER, from an lstat mode."""
    return LINK if stat.S_ISLNK(mode) else FOLDER if stat.S_ISDIR(mode) else FILE if stat.S_ISREG(mode) else OTHER
