"""Store and server errors as a user sees them: one line and exit 30, never a traceback. Any other error
keeps its traceback (a bug)."""

from __future__ import annotations

import errno
import logging
import re
import sys
from collections.abc import Iterable
from typing import NamedTuple, NoReturn

from tasks.guard import Exit
from tasks.storage.errors import StorageUnavailable
from tasks.storage.partitions import PartitionBusy, PartitionWriteError
from tasks.storage.rawbackend import RawZoneUnavailable

FAULT_EXIT = 30  # Luigi's task_failed: what docs/operations.md promises for a server or a disk that fails


class Fault(Exit):
    """The raw zone's server or the data root's storage failed: exit 30, the one line printed first."""

    EXIT = FAULT_EXIT


# OS errors of the storage itself, not of one file: the data root (or the raw zone) cannot be written or read
STORAGE_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.EIO}
FAULTS = (StorageUnavailable, PartitionWriteError, PartitionBusy)  # and their subclasses


def fault_line(exc: BaseException) -> str | None:
    """The line for a store or server error; None for any other error, which keeps its traceback."""
    if isinstance(exc, FAULTS):
        return str(exc).splitlines()[0]
    if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS:
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror}; nothing more was written, the partitions in place are kept"
    return None


class Gone(NamedTuple):
    """A store or server that stopped serving the run: ``what`` names it, ``line`` is the summary's error
    line, ``who`` the side that failed."""

    what: str
    line: str
    who: str
    at_start: bool = False  # it never answered this run: down before the command started
    buckets: tuple[str, ...] = ()  # the object store's (``what`` is its endpoint): those whose requests failed
    code: str = ""  # the object store's error code


RAW_SERVER = "the raw zone's SFTP server"
OBJECT_STORE = "the object store"
STORAGE = "the storage"  # of the data root or the raw zone (read-only, full, ...): :func:`fault_line`


def went_away(exc: BaseException) -> Gone | None:
    """:class:`Gone` when a partition failed because a store or server stopped serving the run, else None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, StorageUnavailable):
            break
        exc = exc.__cause__ or exc.__context__
    if not isinstance(exc, StorageUnavailable):
        return None
    where, code = getattr(exc, "where", ""), getattr(exc, "code", "") or type(exc).__name__
    seconds = getattr(exc, "seconds", None)  # a store that did not answer in time (tasks/storage/s3gone.py)
    if where and seconds:
        line = f"{OBJECT_STORE} ({where}) did not answer within {seconds:g} s, not asked again in this run: {_AFTER}"
        return Gone(where.split(",")[0], line, OBJECT_STORE)
    if where:  # one line per endpoint: its buckets (a landing bucket, the data root's) go down together
        endpoint, _, bucket = where.partition(", bucket ")
        return Gone(endpoint, _store_line(endpoint, [bucket], code), OBJECT_STORE, buckets=(bucket,), code=code)
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]  # "sftp://u@host:22/x: server not ..."
    first = first.removesuffix("; not tried again in this run")
    who = RAW_SERVER if isinstance(exc, RawZoneUnavailable) else STORAGE
    if getattr(exc, "at_start", False):  # down before the command started: the line any command gives
        return Gone(first.split(": ", 1)[0], first, who, at_start=True)
    line = f"{who} failed during the run: {first}: {_AFTER}" if who == RAW_SERVER else f"{first}: {_AFTER}"
    return Gone(first.split(": ", 1)[0], line, who)


_AFTER = (
    "the partitions it failed are kept as they were, or stale where it stopped mid-commit; rerun the same command "
    "once it answers"
)


def _store_line(endpoint: str, buckets: list[str], code: str) -> str:
    named = f"bucket {buckets[0]}" if len(buckets) == 1 else f"buckets {', '.join(buckets[:-1])} and {buckets[-1]}"
    return f"{OBJECT_STORE} ({endpoint}, {named}) failed during the run ({code}): {_AFTER}"


def gone_lines(gones: Iterable[Gone]) -> dict[str, str]:
    """The line of each store or server gone (:attr:`Gone.what`), in the order they failed: the first one
    said of it, an object store's naming every bucket of its endpoint whose requests failed."""
    first: dict[str, Gone] = {}
    buckets: dict[str, dict[str, None]] = {}
    for gone in gones:
        first.setdefault(gone.what, gone)
        buckets.setdefault(gone.what, {}).update(dict.fromkeys(gone.buckets))
    return {
        what: _store_line(what, list(buckets[what]), gone.code) if gone.buckets else gone.line
        for what, gone in first.items()
    }


def fault_exit(line: str) -> NoReturn:
    """Print ``daybreak: error: <line>`` on stderr and exit 30 (raise :class:`Fault`)."""
    print(f"daybreak: error: {line}", file=sys.stderr, flush=True)
    raise Fault(line)


_TRACEBACK_LAST = re.compile(r"^(?P<cls>[\w.]+): (?P<msg>.*)$")


def fault_in_traceback(text: str) -> str | None:
    """:func:`fault_line` for an error Luigi hands on as traceback text only."""
    lines = [line for line in text.strip().splitlines() if line and not line.startswith(" ")]
    match = _TRACEBACK_LAST.match(lines[-1]) if lines else None
    if match is None:
        return None
    name, message = match.group("cls"), match.group("msg")
    module, _, qualname = name.rpartition(".")
    raised = getattr(sys.modules.get(module or "builtins"), qualname, None)  # loaded: it was raised
    if isinstance(raised, type) and issubclass(raised, FAULTS):
        return message
    code = re.match(r"\[Errno (\d+)\] ([^:]*)(?::\s*(.*))?", message)
    if isinstance(raised, type) and issubclass(raised, OSError) and code and int(code.group(1)) in STORAGE_ERRNOS:
        where = f"{code.group(3)}: " if code.group(3) else ""
        return f"{where}{code.group(2)}; nothing more was written, the partitions in place are kept"
    return None


class _FaultFilter(logging.Filter):
    """On the ``luigi-interface`` logger: a store or server error Luigi is about to log with a traceback
    ends the run with one line, exit 30."""

    def filter(self, record: logging.LogRecord) -> bool:
        from tasks.luigi_shortcuts import messages  # Luigi's texts (loaded: this filter is on Luigi's logger)

        if record.exc_info and record.exc_info[1] is not None and record.getMessage() == messages.UNCAUGHT:
            line = fault_line(record.exc_info[1])
            if line is not None:
                fault_exit(line)
        return True


def install() -> None:
    """Hook the store and server errors of the ``luigi`` command. Idempotent."""
    logger = logging.getLogger("luigi-interface")
    if not any(isinstance(f, _FaultFilter) for f in logger.filters):
        logger.addFilter(_FaultFilter())


def check_stores(writes: bool = True) -> None:
    """Exit 2 when data_root or raw_root is a bucket that does not answer or, for a command that
    ``writes``, when data_root's store ignores conditional writes (it cannot fence writers)."""
    from tasks import settings
    from tasks.guard import fail
    from tasks.storage.partitions import check_roots

    data_root = "[daybreak] data_root"
    error = check_roots(
        (data_root, settings.data_uri()),
        ("[daybreak] raw_root", settings.raw_root()),
        written=(data_root,) if writes else (),
    )
    if error:
        fail(error)
