"""What one date's build keeps in this process for the next date's (StgQsrPos reads folders d and d+1):
at most two dates' worth, each key naming one content."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager

_current: dict = {}  # made or taken by the date being built
_previous: dict = {}  # made or taken by the date before
_range = False  # inside a single-run range: kept_for_next_date keeps what it computes
_read_by_others: frozenset = frozenset()  # raw folders (source, date) that another process of the range reads too


def next_date() -> None:
    """A build begins: forget the values of the build before the last one that kept or took any."""
    global _current, _previous
    if _current:
        _previous, _current = _current, {}


def keep(key: Hashable, value) -> None:
    _current[key] = value


def forget(key: Hashable) -> None:
    _current.pop(key, None)
    _previous.pop(key, None)


def kept(key: Hashable, default=None):
    """The value kept under ``key`` by this date or the one before (then kept for the next date too)."""
    if key not in _current and key in _previous:
        _current[key] = _previous.pop(key)
    return _current.get(key, default)


def kept_for_next_date(key: Hashable, compute: Callable):
    """``compute()``, or inside a single-run range its value kept from the previous date."""
    if not _range:
        return compute()
    missing = object()
    value = kept(key, missing)
    if value is missing:
        value = _current[key] = compute()
    return value


def keeps_for_next_date() -> bool:
    return _range


def read_by_others(folder: tuple[str, object]) -> bool:
    """Whether raw folder (source, date) is read by another process of this single-run range as well."""
    return folder in _read_by_others


@contextmanager
def keeping_for_next_date(shared: Iterable[tuple] = ()) -> Iterator[None]:
    """A single-run range: :func:`kept_for_next_date` keeps across consecutive dates; ``shared``: the raw
    folders another process reads too."""
    global _range, _read_by_others
    _range, _read_by_others = True, frozenset(shared)
    try:
        yield
    finally:
        _range, _read_by_others = False, frozenset()
        _current.clear()
        _previous.clear()
