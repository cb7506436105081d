"""A raw zone in a local folder: lists with no symbolic link followed below the root, reads regular files only."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from tasks.storage.rawbackend import FOLDER, LINK, NO_READ, OTHER, RawBackend, RawFile, mode_kind, open_regular


class LocalRaw(RawBackend):
    """The files below a local folder."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def describe(self) -> str:
        return str(self.root)

    def folder_exists(self, source: str, name: str) -> bool:  # two lstats, no listing
        try:
            return all(stat.S_ISDIR(os.lstat(p).st_mode) for p in (self.root / source, self.root / source / name))
        except (FileNotFoundError, NotADirectoryError):
            return False

    def folder(self, source: str, name: str) -> tuple[list[tuple[str, int, int]], list[tuple[str, str]]] | None:
        try:  # no symbolic link is followed below the root: not the source folder, not the date folder
            top = os.open(self.root / source, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            try:
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top)
            finally:
                os.close(top)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:  # a symbolic link (ELOOP on some systems): reported by unread_in_source
            if exc.errno != errno.ELOOP:
                raise
            return None
        uid = os.geteuid()  # root, or an owner with the read bit, needs no access check
        try:
            files, others = [], []
            for entry in os.listdir(fd):
                st = os.stat(entry, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    others.append((entry, mode_kind(st.st_mode)))
                elif (
                    uid == 0
                    or (st.st_uid == uid and st.st_mode & stat.S_IRUSR)
                    or os.access(entry, os.R_OK, dir_fd=fd, follow_symlinks=False)
                ):
                    files.append((entry, st.st_size, st.st_mtime_ns))
                else:
                    others.append((entry, NO_READ))
        finally:
            os.close(fd)
        return files, others

    def source(self, source: str) -> tuple[str | None, list[tuple[str, str]]]:
        """The kinds come from the listing itself (no stat per entry)."""
        path = self.root / source
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None, []
        except OSError as exc:  # ENOTDIR (or ELOOP): a symbolic link, or a file
            if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise
            return (LINK if os.path.islink(path) else OTHER), []
        try:
            with os.scandir(fd) as listing:  # the open folder: a link swapped in since is not followed
                return FOLDER, [(e.name, _entry_kind(e)) for e in listing]
        finally:
            os.close(fd)

    def folder_stamps(self, source: str) -> dict[str, int]:
        """Folders' mtimes: a folder's mtime changes when a file is added to, removed from or renamed into it."""
        try:
            if not stat.S_ISDIR(os.lstat(self.root / source).st_mode):
                return {}
            entries = list(os.scandir(self.root / source))
        except FileNotFoundError:
            return {}
        return {e.name: e.stat().st_mtime_ns for e in entries if e.is_dir(follow_symlinks=False)}

    def read(self, raw: RawFile) -> bytes:
        with os.fdopen(open_regular(self.root / raw.relpath, raw.relpath), "rb") as fh:
            return fh.read()

    def file_identity(self, raw: RawFile) -> list[int] | None:
        try:
            st = os.stat(self.root / raw.relpath, follow_symlinks=False)
        except OSError:
            return None
        return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _entry_kind(entry: os.DirEntry) -> str:
    return LINK if entry.is_symlink() else FOLDER if entry.is_dir(follow_symlinks=False) else OTHER
