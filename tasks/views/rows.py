"""A row of the status view (:class:`DayStatus`), and the kinds of rows that belong to no day."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from tasks.freshness.node import RAW_GONE
from tasks.reporting.names import dates_span

# rows of entries that belong to no day (RAW_ZONE: raw zone entries no partition reads)
RAW_ZONE, DATA_ROOT, NOT_READ = "raw_zone", "data_root", "not_read"
LEFT_OVER = "left_over"  # a data_root row: partitions of hotels or stores no longer listed


@dataclass(frozen=True)
class DayStatus:
    dataset: str
    date: dt.date | None  # None: an unpartitioned dataset (one state for all of it)
    state: str  # ok | provisional | stale | pending | newer | missing | waiting | failed
    reason: str = ""
    rows: int | None = None
    duration_s: float | None = None
    not_read: tuple[str, ...] = ()  # raw files of its window that are not read: "path (reason)"
    warnings: tuple[str, ...] = ()  # of the build in place: a store that had rows and has none now
    built_by: dict | None = None  # of the build in place: its manifest's host, pid and Luigi worker
    raw_folders: dict | None = None  # of the build in place: how it had each raw folder (checked, shared, ...)


_FOLDER = re.compile(r"([\w-]+)/(\d{4}-\d{2}-\d{2})")  # a raw folder in a reason: qsr_pos/2026-09-02


def kept_gone(rows: list[DayStatus]) -> str:
    """What the days kept as built with their raw folders gone have in common: the folders, by source, and
    how many were built under other rules."""
    folders: dict[str, set[dt.date]] = {}
    for r in rows:
        for source, day in _FOLDER.findall(r.reason.partition(": kept")[0]):
            folders.setdefault(source, set()).add(dt.date.fromisoformat(day))
    named = ", ".join(f"{source}/{dates_span(list(days))}" for source, days in sorted(folders.items()))
    other = sum("built under other rules" in r.reason for r in rows)
    rules = f"; {other} built under other rules (--json says which)" if other else ""
    return f"{RAW_GONE}: {named}: kept as built, no run checks or rebuilds them{rules}"
