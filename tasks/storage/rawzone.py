"""The raw zone, read-only: the only module that lists and reads raw files.

:class:`RawZone` owns the contract (folders ``<source>/<YYYY-MM-DD>/<file>``, what is not read and why,
the content hashes of what a build read) over a :class:`RawBackend` that only lists and reads: a local
folder, SFTP or a bucket. A raw file is its path below the root, its size and its mtime in ns: the
triple input fingerprints are made of."""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib
import os
import re
from collections.abc import Iterator
from typing import NamedTuple

from tasks.storage.rawbackend import (  # noqa: F401 - the zone's errors
    FOLDER,
    LINK,
    NO_READ,
    NOT_A_DATE_NAME,
    NOT_A_FOLDER,
    NOT_REGULAR,
    OTHER,
    SYMLINK,
    UNREADABLE,
    RawBackend,
    RawFile,
    RawFileChanged,
    RawFileUnreadable,
    RawZoneUnavailable,
)
from tasks.storage.rawlocal import LocalRaw

_REFUSED = {LINK: SYMLINK, FOLDER: NOT_REGULAR, OTHER: NOT_REGULAR, NO_READ: UNREADABLE}


class Refused(NamedTuple):
    """An entry of the raw zone that is not read (by name in its folder, or path below the root), and why."""

    name: str
    reason: str


# By URI scheme: the module whose backend_for(uri) gives the backend
REMOTE = {"sftp": "tasks.storage.sftp", "s3": "tasks.storage.s3raw"}


def one_session(uri: str) -> bool:
    """Whether the raw zone at ``uri`` is read over one session a process, their number capped
    (:attr:`RawBackend.one_session`: SFTP), known without opening it."""
    scheme = uri.split("://", 1)[0] if "://" in uri else ""
    return scheme in REMOTE and importlib.import_module(REMOTE[scheme]).BACKEND.one_session


class RawZone:
    """The raw zone over its backend: ``RawZone(folder)`` a local folder, :meth:`from_uri` any ``raw_root``."""

    def __init__(self, root: str | os.PathLike | RawBackend):
        if isinstance(root, str | os.PathLike):
            root = LocalRaw(root)
        self.backend = root
        self.mtime_resolution_ns, self.reads_checked = root.mtime_resolution_ns, root.reads_checked
        self.folder_stamps_are_times = root.folder_stamps_are_times
        self.local_lookups, self.lists_at_once = root.local_lookups, root.lists_at_once

    @classmethod
    def from_uri(cls, uri: str) -> RawZone:
        """A local folder, ``sftp://user@host:port/path`` or ``s3://BUCKET/PREFIX``."""
        scheme = uri.split("://", 1)[0] if "://" in uri else ""
        if scheme in REMOTE:
            return cls(importlib.import_module(REMOTE[scheme]).backend_for(uri))
        if scheme:
            raise ValueError(f"raw_root {uri!r}: scheme {scheme!r} is not supported (a local folder, sftp:// or s3://)")
        from tasks.settings_check import check_raw_root

        check_raw_root(uri)  # a missing root is a setting to fix, not data to wait for: exit 2
        return cls(uri)

    def describe(self) -> str:
        return self.backend.describe()

    def close(self) -> None:
        self.backend.close()

    @staticmethod
    def folder_relpath(source: str, date: dt.date) -> str:
        return f"{source}/{date.isoformat()}"

    def folder_exists(self, source: str, date: dt.date) -> bool:
        """A real folder (no symbolic link on the way below the root), as :meth:`scan_folder_all` sees it."""
        return self.backend.folder_exists(source, date.isoformat())

    def scan_folder(self, source: str, date: dt.date) -> list[tuple[str, int, int]] | None:
        """(name, size, mtime_ns) of every regular, readable file of one folder, sorted; None when absent.
        Plain tuples: a completeness check scans a hundred thousand files."""
        scanned = self.scan_folder_all(source, date)
        return None if scanned is None else scanned[0]

    def scan_folder_all(self, source: str, date: dt.date) -> tuple[list[tuple[str, int, int]], list[Refused]] | None:
        """``scan_folder``'s entries, and the (name, reason) of every other entry, never read. None when the
        folder does not exist or is itself a symbolic link."""
        listed = self.backend.folder(source, date.isoformat())
        if listed is None:
            return None
        files, others = listed
        return sorted(files), sorted(Refused(name, _REFUSED[kind]) for name, kind in others)

    def list_folder(self, source: str, date: dt.date) -> list[RawFile] | None:
        entries = self.scan_folder(source, date)
        rel = self.folder_relpath(source, date)
        return None if entries is None else [RawFile(f"{rel}/{n}", size, mtime) for n, size, mtime in entries]

    def holds_nothing(self) -> bool:
        """Whether the whole root holds nothing at all (a bucket's prefix without one object: a typo in raw_root,
        or nothing sent yet); False where a root that is not there is refused instead (a folder, SFTP)."""
        return self.backend.holds_nothing()

    def newest_folder_date(self, source: str, not_after: dt.date | None = None) -> dt.date | None:
        """Latest date of a source's export folders (up to ``not_after``), counting only real folders named
        YYYY-MM-DD, as :meth:`scan_folder_all` reads them; None when it has none."""
        dates = folder_dates(self.backend.source(source)[1])
        return max((d for d in dates if not_after is None or d <= not_after), default=None)

    def source_listing(self, source: str) -> tuple[str | None, list[tuple[str, str]]]:
        return self.backend.source(source)

    def list_folders(self, source: str) -> dict[str, int]:
        """{folder name: stamp} of a source's dated folders, from one listing; a stamp changes when a file is
        added to, removed from or replaced in the folder."""
        return {name: stamp for name, stamp in self.backend.folder_stamps(source).items() if is_date_name(name)}

    def settled(self, mtime_ns: int, listed_ns: int) -> bool:
        """Whether a change stamped ``mtime_ns`` is older than a listing made at ``listed_ns`` by more than the
        clock resolution. If not ("racy"), a change made in the same tick after the listing may have kept the
        stamp: what was listed then is not trusted, and is looked at again next time."""
        return mtime_ns + self.mtime_resolution_ns <= listed_ns

    def folder_settled(self, stamp: int, listed_ns: int) -> bool:
        """:meth:`settled` for a stamp of :meth:`list_folders` (always, where a stamp is not a time)."""
        return not self.folder_stamps_are_times or self.settled(stamp, listed_ns)

    def read_bytes(self, raw: RawFile) -> bytes:
        return self.backend.read(raw)

    # -- content -----------------------------------------------------------------------------------
    def read_input(self, raw: RawFile) -> bytes:
        """The file's bytes for a build, checked against its listing where the backend can; hash remembered."""
        data = self.backend.read_listed(raw)
        self.remember(raw, data)
        return data

    def fetch_ahead(self, files: list[RawFile]) -> list:  # the fetches started (futures)
        return self.backend.fetch_ahead(files)

    def read_inputs(self, files: list[RawFile]) -> Iterator[bytes]:
        """:meth:`read_input` of each file, in order (several in flight where it helps)."""
        for raw, data in zip(files, self.backend.read_many(files), strict=True):
            self.remember(raw, data)
            yield data

    def remember(self, raw: RawFile, data: bytes) -> None:
        _remember((self.describe(), raw), content_hash(data))

    def digest(self, raw: RawFile) -> str:
        """The content hash of ``raw`` as this process read it for a build, else of its bytes now."""
        known = self.known_digest(raw)
        return known if known is not None else self.digest_now(raw)

    def known_digest(self, raw: RawFile) -> str | None:
        """The content hash of ``raw`` as this process read it, if it did."""
        return _DIGESTS.get((self.describe(), raw))

    def file_identity(self, raw: RawFile) -> list[int] | None:
        """What tells this very file again without reading it: a local file's (inode, size, mtime_ns, ctime_ns)
        (nobody can set a ctime, so a re-sent file with size and mtime kept differs), an object's size and
        MD5; None where the zone cannot tell (SFTP has no ctime)."""
        return self.backend.file_identity(raw)

    def recorded_digest(self, raw: RawFile, recorded: list | None, read_ns: int) -> bool:
        """Whether ``recorded`` = [file identity, hash], taken by a read at ``read_ns``, was adopted as the hash
        of ``raw``: only when the identity is unchanged and its last change older than that read by more
        than the clock resolution. If not, the file must be read."""
        if not recorded or len(recorded) != 2 or not isinstance(recorded[0], list) or len(recorded[0]) != 4:
            return False
        identity, digest = recorded
        if identity[3] + self.mtime_resolution_ns >= read_ns or self.file_identity(raw) != identity:
            return False
        _remember((self.describe(), raw), digest)
        return True

    def digest_now(self, raw: RawFile) -> str:
        """The content hash of ``raw``'s bytes now, never a remembered one; :class:`RawFileChanged` where the zone
        tells that what it read is not the version listed (a bucket: an object re-sent since its listing)."""
        return content_hash(self.backend.read_checked(raw))


# (zone, raw file) -> content hash of what a build of this process read; bounded (a long backfill)
_DIGESTS: dict[tuple[str, RawFile], str] = {}
_DIGESTS_MAX = 200_000


def _remember(key: tuple[str, RawFile], digest: str) -> None:
    if len(_DIGESTS) > _DIGESTS_MAX:
        _DIGESTS.clear()
    _DIGESTS[key] = digest


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_DATE_NAME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def folder_dates(entries: list[tuple[str, str]]) -> list[dt.date]:
    """The dates of a source's listing (``[(name, kind)]``, :meth:`RawZone.source_listing`): its real folders
    named YYYY-MM-DD."""
    return [dt.date.fromisoformat(name) for name, kind in entries if kind == FOLDER and is_date_name(name)]


def is_date_name(name: str) -> bool:
    """A YYYY-MM-DD folder name (``date.fromisoformat`` alone also takes ``20260922`` and ``2026-W39-2``)."""
    if _DATE_NAME.fullmatch(name) is None:
        return False
    try:
        dt.date.fromisoformat(name)
    except ValueError:  # 2026-02-30
        return False
    return True


def unread_in_source(source: str, kind: str | None, entries: list[tuple[str, str]]) -> list[Refused]:
    """The entries of a source folder that no partition reads (only real ``<source>/<YYYY-MM-DD>/`` folders
    are read), with the reason; a source folder that is a link or a file is the one entry."""
    if kind is None:
        return []
    if kind != FOLDER:
        return [Refused(source, SYMLINK if kind == LINK else NOT_A_FOLDER)]
    unread = []
    for name, entry in entries:
        if entry == LINK:
            unread.append(Refused(f"{source}/{name}", SYMLINK))
        elif not is_date_name(name):
            unread.append(Refused(f"{source}/{name}", NOT_A_DATE_NAME))
        elif entry != FOLDER:
            unread.append(Refused(f"{source}/{name}", NOT_A_FOLDER))
    return sorted(unread)
