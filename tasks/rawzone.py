"""The raw zone: list, stat and read raw files. The only module that touches raw files.

The raw zone is read-only for the pipeline: nothing here writes, moves or deletes a raw file.
``raw_root`` is a local folder (the embedded default). A raw file is identified by its path
relative to the root (``qsr_pos/2026-09-15/S001.csv``), its size and its mtime in nanoseconds:
that triple is what input fingerprints are made of.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import stat
from pathlib import Path
from typing import NamedTuple

import luigi

STORE_ID_PATTERN = re.compile(r"^[A-Z0-9][A-Z0-9_-]{0,31}$")
STORE_FILE_PATTERN = re.compile(r"[A-Z0-9][A-Z0-9_-]{0,31}\.csv")  # <store_id>.csv, matched whole


class RawFile(NamedTuple):
    """One raw file as listed: path relative to the raw root, size in bytes, mtime in ns."""

    relpath: str
    size: int
    mtime_ns: int

    @property
    def folder_date(self) -> dt.date:
        """Export date of the folder that holds the file (``<source>/<date>/<name>``)."""
        return dt.date.fromisoformat(self.relpath.split("/")[-2])


class RawZone:
    """A raw zone on local disk. ``folder(source, date)`` lists one export folder."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    @classmethod
    def from_uri(cls, uri: str) -> RawZone:
        """A local folder, or ``sftp://user@host:port/path`` (read with paramiko, settings from [sftp])."""
        if uri.startswith("sftp://"):
            from tasks.sftp import SftpRawZone

            return SftpRawZone.from_settings(uri)
        if "://" in uri:
            scheme = uri.split("://", 1)[0]
            raise ValueError(f"raw_root {uri!r}: scheme {scheme!r} is not supported (a local folder or sftp://)")
        from tasks.settings import check_raw_root

        check_raw_root(uri)  # a missing root is a setting to fix, not data to wait for: exit 2
        return cls(uri)

    def describe(self) -> str:
        return str(self.root)

    def close(self) -> None:
        """Release this process's connection to the raw zone, if it has one (local disk: nothing)."""

    @staticmethod
    def folder_relpath(source: str, date: dt.date) -> str:
        return f"{source}/{date.isoformat()}"

    def folder_exists(self, source: str, date: dt.date) -> bool:
        return (self.root / self.folder_relpath(source, date)).is_dir()

    def scan_folder(self, source: str, date: dt.date) -> list[tuple[str, int, int]] | None:
        """(name, size, mtime_ns) of every regular file of one folder, sorted by name; None when the
        folder does not exist. Plain tuples: a completeness check scans a hundred thousand files."""
        try:
            fd = os.open(self.root / self.folder_relpath(source, date), os.O_RDONLY | os.O_DIRECTORY)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:  # stat relative to the open folder: one path component to resolve per file
            entries = []
            for name in os.listdir(fd):
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode):
                    entries.append((name, st.st_size, st.st_mtime_ns))
        finally:
            os.close(fd)
        entries.sort()
        return entries

    def list_folder(self, source: str, date: dt.date) -> list[RawFile] | None:
        """Every regular file of one folder as RawFile, sorted by name; None when the folder does not exist."""
        entries = self.scan_folder(source, date)
        rel = self.folder_relpath(source, date)
        return None if entries is None else [RawFile(f"{rel}/{n}", size, mtime) for n, size, mtime in entries]

    def newest_folder_date(self, source: str) -> dt.date | None:
        """Latest folder date of a source, or None when it has no dated folder."""
        try:
            names = os.listdir(self.root / source)
        except FileNotFoundError:
            return None
        dates = []
        for name in names:
            try:
                dates.append(dt.date.fromisoformat(name))
            except ValueError:
                continue
        return max(dates, default=None)

    def list_folders(self, source: str) -> dict[str, int]:
        """{folder name: mtime_ns} of a source's dated folders, from one listing of the source folder. A
        folder's mtime changes when a file is added to, removed from or renamed into it."""
        try:
            entries = list(os.scandir(self.root / source))
        except FileNotFoundError:
            return {}
        return {
            e.name: e.stat().st_mtime_ns for e in entries if is_date_name(e.name) and e.is_dir(follow_symlinks=False)
        }

    def read_bytes(self, raw: RawFile) -> bytes:
        return (self.root / raw.relpath).read_bytes()


def is_date_name(name: str) -> bool:
    """A folder name that is an ISO date (YYYY-MM-DD): an export folder."""
    try:
        dt.date.fromisoformat(name)
    except ValueError:
        return False
    return True


def is_store_file(name: str) -> bool:
    """``<store_id>.csv`` with a store id of the contract's pattern: the only QSR files ever read."""
    return STORE_FILE_PATTERN.fullmatch(name) is not None


def split_store_files(files: list[RawFile]) -> tuple[list[RawFile], list[RawFile]]:
    """(store files that may be read, files that must not be read) by the contract's store id pattern."""
    good, bad = [], []
    for f in files:
        (good if is_store_file(f.relpath.rpartition("/")[2]) else bad).append(f)
    return good, bad


class RawFolderTarget(luigi.Target):
    """Exists when one export folder of the raw zone exists."""

    def __init__(self, zone: RawZone, source: str, date: dt.date):
        self.zone, self.source, self.date = zone, source, date

    def exists(self) -> bool:
        return self.zone.folder_exists(self.source, self.date)

    def __repr__(self) -> str:
        return f"RawFolderTarget({self.zone.describe()}/{self.zone.folder_relpath(self.source, self.date)})"
