"""A row of the status view (:class:`DayStatus`), and the kinds of rows that belong to no day."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

# The row, first when there is one, of the raw zone's entries that belong to no day: entries of a source
# folder that no partition reads (a link, a name that is not YYYY-MM-DD, ...), or a linked source folder.
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
