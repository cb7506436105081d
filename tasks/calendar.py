"""Business-date arithmetic: pure functions, no I/O, no clock.

A QSR business date ``d`` runs from ``d 05:00`` to ``d+1 04:59:59`` local time, so the
business date of an instant is the wall-clock date of (local time - 5 h). The POS splits its
files at local midnight, so partition ``d`` reads raw folders ``d`` and ``d+1``.
"""

from __future__ import annotations

import datetime as dt
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


def date_range(start: dt.date, stop: dt.date) -> Iterable[dt.date]:
    """Dates from ``start`` (inclusive) to ``stop`` (exclusive)."""
    for i in range((stop - start).days):
        yield start + dt.timedelta(days=i)
