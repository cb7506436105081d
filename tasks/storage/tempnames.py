"""Temporary names ``.<target>.tmp-<host>-<pid>-<start>-<random>`` for atomic writes, and the sweep of those a
dead writer left (docs/run-semantics.md, "Replace, never append")."""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import time
import uuid
from pathlib import Path

logger = logging.getLogger("luigi-interface")

FOREIGN_MAX_AGE_S = 24 * 3600
_TEMP = re.compile(r"^\..+\.tmp-(?P<host>[A-Za-z0-9._-]+)-(?P<pid>\d+)-(?P<start>\d+)-[0-9a-f]+$")


def host() -> str:
    """This host's name in temporary names: ``[daybreak] host_name`` when set, else the machine's."""
    from tasks import settings

    return _safe(settings.host_name())


@functools.cache
def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "unknown"


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (state first); None when unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].decode().split()
    except (OSError, IndexError):
        return None


@functools.cache
def start_of(pid: int) -> int:
    """When process ``pid`` started (clock ticks since boot; 0 where /proc cannot say), to tell pids reused."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else 0


def temp_path(path: Path) -> Path:
    """A hidden temporary name beside ``path`` that names this writer (host, pid, start time)."""
    pid = os.getpid()
    return path.with_name(f".{path.name}.tmp-{host()}-{pid}-{start_of(pid)}-{uuid.uuid4().hex[:12]}")


def is_temp_name(name: str) -> bool:
    return name.startswith(".") and ".tmp-" in name


def writer_alive(pid: int, start: int) -> bool:
    """Whether process ``pid`` of this host, started at ``start`` (0: unknown), is still running."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's live process
    fields = _stat_fields(pid)
    if fields is None:
        return True  # no /proc: the pid exists, assume it is the writer
    if fields[0] in ("Z", "X"):
        return False  # killed, not yet reaped by its parent
    return start == 0 or int(fields[19]) == start


def is_orphan(entry: os.DirEntry | Path) -> bool:
    """Whether a temporary entry's writer is gone."""
    match = _TEMP.match(entry.name)
    if match and match["host"] == host():
        return not writer_alive(int(match["pid"]), int(match["start"]))
    try:
        mtime = os.lstat(entry).st_mtime
    except FileNotFoundError:
        return False
    return time.time() - mtime > FOREIGN_MAX_AGE_S


def remove_entry(entry: os.DirEntry) -> None:
    """Remove a folder entry, a folder with all it holds (a symbolic link is not followed)."""
    if entry.is_dir(follow_symlinks=False):
        shutil.rmtree(entry.path)
    else:
        os.unlink(entry.path)


def sweep(folder: Path) -> list[Path]:
    """Remove the orphaned temporary files and staging folders directly in ``folder``; return them."""
    removed = []
    try:
        entries = [e for e in os.scandir(folder) if is_temp_name(e.name)]
    except FileNotFoundError:
        return removed
    for entry in entries:
        if not is_orphan(entry):
            continue
        try:
            remove_entry(entry)
        except FileNotFoundError:
            continue  # another sweeper got there first
        removed.append(Path(entry.path))
        logger.info("removed %s, left behind by a writer that is gone", entry.path)
    return removed
