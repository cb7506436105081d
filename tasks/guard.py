"""Usage and configuration errors: one line ``daybreak: error: ...`` and exit 2, from every command.
:class:`UsageError` is a :class:`SystemExit`, so it passes through Luigi's scheduling (where any
``Exception`` exits 35); the message is printed where it is raised."""

from __future__ import annotations

import contextlib
import datetime as dt
import difflib
import sys
import threading
from collections.abc import Iterator
from typing import NoReturn

USAGE_EXIT = 2
INTERRUPTED_EXIT = 130  # a shell's code for a command ended by Ctrl-C (SIGINT)
TERMINATED_EXIT = 143  # and by SIGTERM (kill, timeout, systemctl stop): 128 + 15
# what a command stopped by Ctrl-C prints, in place of Python's traceback
INTERRUPTED = (
    "daybreak: interrupted: the partitions written so far are kept, whole; run the same command again to build the rest"
)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises ``KeyboardInterrupt``; exits :data:`TERMINATED_EXIT`."""


def stop_on_sigterm() -> None:
    """Make SIGTERM stop this command as Ctrl-C does, ignoring a second one (``timeout`` sends two); forked
    processes keep the default. In the main thread only; idempotent."""
    import os
    import signal

    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:

        def terminated(*_) -> None:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            raise Terminated

        signal.signal(signal.SIGTERM, terminated)
    if not getattr(stop_on_sigterm, "forks", False):
        stop_on_sigterm.forks = True
        os.register_at_fork(after_in_child=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))


class Exit(SystemExit):
    """An error already printed as one line: exit ``EXIT`` wherever it is raised; the message is in ``str()``."""

    EXIT = USAGE_EXIT

    def __init__(self, message: str):
        super().__init__(self.EXIT)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(Exit):
    """Daybreak was called or configured wrongly: exit 2."""


def fail(message: str) -> NoReturn:
    """Print ``daybreak: error: <message>`` on stderr and exit 2 (raise :class:`UsageError`)."""
    print(f"daybreak: error: {message}", file=sys.stderr, flush=True)
    raise UsageError(message)


# -- the one check of dates and counts: every date a user gives lies in DATES, far enough from the
# calendar's ends for any window; a range holds at most MAX_RANGE_DAYS ([RangeDaily] days_back) dates
DATES = (dt.date(1900, 1, 1), dt.date(2999, 12, 31))
MAX_RANGE_DAYS = 36500


def check_date(value: dt.date, flag: str = "--date") -> dt.date:
    """``value`` if it lies in :data:`DATES`; else exit 2 naming ``flag`` (``--stop``, ``[daybreak] start_date``)."""
    low, high = DATES
    if not low <= value <= high:
        fail(f"{flag} {value}: out of range; a date is from {low} to {high}")
    return value


def count_error(value, low: int = 1, high: int | None = None) -> str | None:
    """Why ``value`` is not a whole number from ``low`` to ``high`` (inclusive; None: no upper bound), or None."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        return f"expected a whole number, {f'from {low} to {high}' if high is not None else f'{low} or more'}"
    return None


def check_count(value: int, flag: str, low: int = 1, high: int | None = None) -> int:
    """``value`` if it is a whole number from ``low`` to ``high``; else exit 2 naming ``flag``."""
    error = count_error(value, low, high)
    if error:
        fail(f"{flag} {value}: {error}")
    return value


def count_argument(low: int = 1, high: int | None = None):
    """An argparse ``type`` for a count of the ``daybreak`` command, by :func:`count_error`."""
    import argparse

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        error = count_error(value, low, high)
        if error:
            raise argparse.ArgumentTypeError(f"{value}: {error}")
        return value

    return parse


def check_range(start: dt.date | None, stop: dt.date | None, what: str = "") -> None:
    """A range ``[start, stop)`` of dates of :data:`DATES`, possibly empty, of at most :data:`MAX_RANGE_DAYS`."""
    prefix = f"{what}: " if what else ""
    for flag, value in (("--start", start), ("--stop", stop)):
        if value is not None:
            check_date(value, prefix + flag)
    if start is not None and stop is not None and start > stop:
        fail(
            f"{prefix}--start {start} is after --stop {stop}; a range runs from --start "
            "(inclusive) to --stop (exclusive), so --start must not be after --stop"
        )
    if start is not None and stop is not None and (stop - start).days > MAX_RANGE_DAYS:
        fail(
            f"{prefix}--start {start} --stop {stop} is {(stop - start).days} days; a range holds at most "
            f"{MAX_RANGE_DAYS} days (100 years): split it"
        )


def nearest(name: str, known) -> str:
    """``"; did you mean X?"`` for the closest of ``known`` (difflib), or ``""``."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def dataset_argument(known: list[str], refused: str = ""):
    """An argparse ``type`` for a dataset name of ``known``; a task family or near miss is refused
    suggesting the name, another dataset with ``refused`` (formatted with ``name`` and ``known``)."""
    import argparse

    from tasks.catalogue import named

    def parse(text: str) -> str:
        if text in known:
            return text
        spec = named(text)
        if refused and spec is not None and spec.name not in known:
            raise argparse.ArgumentTypeError(refused.format(name=spec.name, known=", ".join(known)))
        if spec is not None and spec.name in known:
            hint = f"; did you mean {spec.name}? ({text} is the luigi task that builds it)"
        else:
            hint = nearest(text, known)
        raise argparse.ArgumentTypeError(f"{text!r} is not a dataset{hint or '.'} Datasets: {', '.join(known)}")

    return parse


# What to run instead of a range of a dataset that is not one partition per date, by partition kind
_NOT_BY_DATE = {
    "date x hotel": "is partitioned by date and hotel, not by date alone: run AllHotelsPickup --start {start} "
    '--stop {stop} (every hotel), or give --of-params \'{{"hotel": "H1"}}\'',
    "none": "is one partition for every date, not one per date: run {family}",
    "hotel": "is one partition per hotel, not per date: run {family} --hotel H (each hotel of the hotels list)",
    "store": "is one partition per store, not per date: run AllStores (every store)",
}


_made_here = threading.local()


@contextlib.contextmanager
def range_made_here() -> Iterator[None]:
    """A range Daybreak makes for its dates alone (:func:`tasks.backfill.left_out`): :func:`check_of` lets it be."""
    _made_here.on = True
    try:
        yield
    finally:
        _made_here.on = False


def flag(name: str) -> str:
    """How the user gave a task's parameter ``name``: ``--hotel``, or ``--of-params hotel`` to a range."""
    return f"--of-params {name}" if getattr(_made_here, "of_params", False) else f"--{name.replace('_', '-')}"


def check_of(range_family: str, of: type, of_params, start, stop) -> None:
    """Exit 2 when a range is given ``--of`` a family that is not one partition per date, naming the
    command that builds it instead."""
    from tasks.catalogue import DATASETS

    if getattr(_made_here, "on", False) or not getattr(of, "__module__", "").startswith("tasks."):
        return  # Luigi's own families (its tests) are Luigi's to check

    entry = getattr(of, "entry", None)
    family = getattr(of, "get_task_family", lambda: str(of))()
    if entry is None:
        params = dict(of.get_params()) if hasattr(of, "get_params") else {}
        if "date" not in params:
            dated = ", ".join(d.task.get_task_family() for d in DATASETS if d.partition == "date")
            fail(f"{range_family}: {family} has no --date, so no range of dates: --of takes one of {dated}")
        return
    keyed = bool(entry.key_param) and entry.key_param in (of_params or {})
    if keyed:  # refused now, named as given (a range makes its tasks later)
        _made_here.of_params = True
        try:
            dict(of.get_params())[entry.key_param].normalize(of_params[entry.key_param])
        finally:
            _made_here.of_params = False
    if entry.partition == "date" or (keyed and "date" in entry.partition):
        return
    why = _NOT_BY_DATE[entry.partition].format(start=start, stop=stop, family=family)
    fail(f"{range_family}: {family} ({entry.name}) {why}")
