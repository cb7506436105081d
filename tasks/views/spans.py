"""Runs of status rows on consecutive days, and how the text view names a run (``first .. last``)."""

from __future__ import annotations

import datetime as dt
import re

from tasks.views.rows import DayStatus


def runs(rows: list[DayStatus], key) -> list[tuple[dt.date, dt.date, DayStatus]]:
    """(first date, last date, first row) of each run of ``rows`` on consecutive days with the same ``key``."""
    out: list[tuple[dt.date, dt.date, DayStatus]] = []
    for r in rows:
        if out and r.date == out[-1][1] + dt.timedelta(days=1) and key(r) == key(out[-1][2]):
            out[-1] = (out[-1][0], r.date, out[-1][2])
        else:
            out.append((r.date, r.date, r))
    return out


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def reason_runs(rows: list[DayStatus]) -> list[tuple[dt.date, dt.date, DayStatus]]:
    """Like :func:`runs`, for days whose reasons differ only by dates that stay the same or move with the day."""
    out: list[tuple[dt.date, dt.date, DayStatus]] = []
    prev: DayStatus | None = None
    for r in rows:
        if out and prev and r.date == prev.date + dt.timedelta(days=1) and _continues(out[-1][2], prev, r):
            out[-1] = (out[-1][0], r.date, out[-1][2])
        else:
            out.append((r.date, r.date, r))
        prev = r
    return out


def _continues(first: DayStatus, prev: DayStatus, r: DayStatus) -> bool:
    if (r.state, _DATE.sub("", r.reason)) != (first.state, _DATE.sub("", first.reason)):
        return False
    for a, b, c in zip(*(_DATE.findall(x.reason) for x in (first, prev, r)), strict=True):
        if not (a == b == c or _offset(a, first) == _offset(b, prev) == _offset(c, r) is not None):
            return False
    return True


def _offset(text: str, row: DayStatus) -> dt.timedelta | None:
    """How far a date in a row's reason is from the row's date; None for text that is no date (``2026-99-99``)."""
    try:
        return dt.date.fromisoformat(text) - row.date
    except ValueError:
        return None


def spanning(first: str, last: str) -> str:
    """The reason of a run of days: each date that differs as ``first .. last``, in a partition's path a glob."""
    if first == last:
        return first
    ends = zip(_DATE.finditer(first), _DATE.findall(last), strict=True)
    texts = iter(
        a[0] if a[0] == b else "*" if first[a.start() - 1 : a.start()] == "=" else f"{a[0]} .. {b}" for a, b in ends
    )
    return _DATE.sub(lambda _: next(texts), first)


def span(first: dt.date, last: dt.date) -> str:
    """``2026-09-10``, or ``2026-09-01 .. 2026-10-29 (59 days)`` (both ends inclusive)."""
    return str(first) if first == last else f"{first} .. {last} ({(last - first).days + 1} days)"
