"""Business-date arithmetic: pure functions, no clock, in Arrow's time-zone data. A QSR business date
``d`` runs from ``d 05:00`` to ``d+1 04:59:59`` local, so partition ``d`` reads raw folders ``d`` and ``d+1``."""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


def qsr_dependency_window(date: dt.date) -> list[dt.date]:
    """Raw folders (export dates) that partition ``date`` reads: ``date`` and ``date + 1``."""
    return [date, date + dt.timedelta(days=1)]


def business_dates(instants: pa.Array, timezone: str, day_start_hour: int) -> pa.Array:
    """Business date (date32) of each UTC instant: local wall date of (local time - day_start_hour)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    local = pc.local_timestamp(instants.cast(pa.timestamp("s", tz=timezone)))
    shifted = pc.subtract(local, pa.scalar(dt.timedelta(hours=day_start_hour), pa.duration("s")))
    return shifted.cast(pa.timestamp("s")).cast(pa.date32())


def day_offset(timezone: str, day: dt.date, day_start_hour: int = 0) -> str:
    """``timezone``'s UTC offset on ``day``: ``-08:00``, or ``-07:00/-08:00`` when it differs at the day's
    start and end; in a partition's rules, so new time-zone data that moves a bound makes that day stale."""
    start, end = _start_offset(timezone, day_start_hour, day), _start_offset(timezone, day_start_hour, day + DAY)
    return start if start == end else f"{start}/{end}"


DAY = dt.timedelta(days=1)


def _start_offset(timezone: str, day_start_hour: int, day: dt.date) -> str:
    return _year_starts(timezone, day_start_hour, day.year)[day.timetuple().tm_yday - 1]


@functools.cache
def _year_starts(timezone: str, day_start_hour: int, year: int) -> tuple[str, ...]:
    """The UTC offset of the start of each day of ``year`` (``day_start_hour`` local), in one Arrow call."""
    import pyarrow as pa
    import pyarrow.compute as pc

    first = dt.datetime(year, 1, 1, day_start_hour)
    days = (dt.date(year + 1, 1, 1) - first.date()).days
    starts = pa.array([first + k * DAY for k in range(days)], pa.timestamp("s"))
    instants = pc.assume_timezone(starts, timezone=timezone, ambiguous="earliest", nonexistent="latest")
    seconds = pc.subtract(starts.cast(pa.int64()), instants.cast(pa.int64())).to_pylist()
    return tuple(_offset_text(s) for s in seconds)


def _offset_text(seconds: int) -> str:
    """``-08:00``, ``+05:30``; ``-07:52:58`` where the offset has seconds (local mean times before 1900)."""
    sign, left = "-" if seconds < 0 else "+", abs(seconds)
    hours, minutes, secs = left // 3600, left % 3600 // 60, left % 60
    return f"{sign}{hours:02d}:{minutes:02d}" + (f":{secs:02d}" if secs else "")


# names of the time-zone data that are no place's zone: what a business date must never be computed in
NOT_A_PLACE = {
    "localtime": "the time zone of the host it runs on (/etc/localtime), which differs from host to host",
    "Factory": "tzdata's placeholder for a host with no time zone set",
    "posixrules": "tzdata's default rules for POSIX TZ strings",
}
ZONE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*")


def zone_problem(name: str) -> str:
    """Why ``name`` is no IANA place name Arrow finds in its time-zone data ('' when it is one)."""
    example = "e.g. America/Toronto"
    if name in NOT_A_PLACE:
        return f"{NOT_A_PLACE[name]}, not a place's time zone: name the zone ({example})"
    head, _, rest = name.partition("/")
    if head in ("right", "posix") and rest:
        why = "counting leap seconds, which business dates do not" if head == "right" else "kept for POSIX"
        return f"tzdata's copy of {rest} {why}: write {rest!r}"
    if not ZONE_NAME.fullmatch(name):
        return f"not an IANA timezone ({example})"
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        pc.local_timestamp(pa.array([0], pa.timestamp("s", tz=name)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        return f"not an IANA timezone ({example}), or not in this host's time-zone data ({TZ_DATA})"
    return ""


TZ_DATA = "/usr/share/zoneinfo"  # where Arrow reads time-zone data on Linux (TZDIR is not read)


def date_range(start: dt.date, stop: dt.date) -> Iterable[dt.date]:
    for i in range((stop - start).days):
        yield start + dt.timedelta(days=i)
