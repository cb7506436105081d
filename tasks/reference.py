"""Reference data that changes with the business, not the code: the hotels list.

Its file is ``[hotels] reference_file`` when set (relative to the working directory, like every path
setting); else ``config/hotels.csv`` beside the config file read last (the luigi.cfg that wins), when
there is one; else the package's own ``config/hotels.csv``. Read once per process.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tasks.contract import is_store_file
from tasks.settings import CONFIG_DIR

COLUMNS = ("hotel_id", "name", "timezone", "rooms")


@dataclass(frozen=True)
class Hotel:
    hotel_id: str
    name: str
    timezone: str
    rooms: int


def hotels_file() -> Path:
    """The hotels list in force (see the module doc), as an absolute path."""
    import os

    from tasks import configfiles, settings

    chosen = settings.hotels().reference_file
    if chosen:
        return Path(chosen).resolve()
    read = [p for p in configfiles.luigi_files() if os.path.isfile(p)]
    beside = Path(read[-1]).resolve().parent / "config" / "hotels.csv" if read else None
    return beside if beside is not None and beside.is_file() else (CONFIG_DIR / "hotels.csv").resolve()


@functools.cache
def _load() -> tuple[Path, dict[str, Hotel]]:
    path = hotels_file()
    return path, read_hotels(path)


def hotels() -> dict[str, Hotel]:
    """The hotels list by hotel_id (:func:`hotels_file`); a file that cannot be read as one is exit 2."""
    return _load()[1]


def hotels_source() -> Path:
    """The file :func:`hotels` was read from: every message that refuses a hotel names it."""
    return _load()[0]


hotels.cache_clear = _load.cache_clear  # type: ignore[attr-defined]  (tests and tools: read the setting again)


def read_hotels(path: Path) -> dict[str, Hotel]:
    """``path`` by hotel_id; every timezone must be a valid IANA name. A file that is not a hotels list
    (missing, a column short, a bad timezone or room count) is one line and exit 2, naming the file and row."""
    from tasks.guard import fail

    try:  # utf-8-sig: a BOM (a spreadsheet's "CSV UTF-8") is read as raw extracts' is, not as a column's name
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            header = list(reader.fieldnames or [])
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        fail(f"hotels list {path}: cannot be read ({getattr(exc, 'strerror', None) or exc})")
    missing = [c for c in COLUMNS if c not in header]
    if rows and missing:
        fail(
            f"hotels list {path}: no column {', '.join(missing)} (its columns: {','.join(header)}; "
            f"expected {','.join(COLUMNS)})"
        )
    out = {}
    for n, row in enumerate(rows, start=2):
        hotel_id = row.get("hotel_id") or ""
        if not is_store_file(f"{hotel_id}.csv"):  # its extracts are <hotel_id>.csv; its partitions hotel_id=<id>
            fail(f"hotels list {path} row {n}: hotel_id {hotel_id!r} does not match ^[A-Z0-9][A-Z0-9_-]{{0,31}}$")
        if hotel_id in out:
            fail(f"hotels list {path} row {n}: hotel_id {hotel_id} is listed twice; keep one row")
        timezone, rooms = row.get("timezone") or "", row.get("rooms") or ""
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):  # '' or a path-like key is a ValueError
            fail(f"hotels list {path} row {n}: timezone {timezone!r}: not an IANA timezone (e.g. America/Toronto)")
        try:
            count = int(rooms)
        except ValueError:
            count = 0
        if count < 1:
            fail(f"hotels list {path} row {n}: rooms {rooms!r}: not a whole number of at least 1")
        out[hotel_id] = Hotel(hotel_id, row.get("name") or "", timezone, count)
    return out
