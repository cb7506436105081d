"""Reference data that changes with the business, not the code: the hotels list (``[hotels]
reference_file``), read once per process."""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path

from tasks.calendar import zone_problem
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
    """``path`` by hotel_id; a file that is not a valid hotels list is one line and exit 2, naming the row."""
    from tasks.guard import fail

    header, rows = _csv_rows(path)
    if not rows:
        fail(f"hotels list {path}: no hotel in it; write the header {','.join(COLUMNS)}, then a row per hotel")
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        fail(
            f"hotels list {path}: no column {', '.join(missing)} (its columns: {','.join(header)}; "
            f"expected {','.join(COLUMNS)})"
        )
    out = {}
    for n, fields in enumerate(rows, start=2):
        if len(fields) != len(header):
            plural = "" if len(fields) == 1 else "s"
            shape = f"{len(fields)} field{plural} where the header has {len(header)} ({','.join(header)})"
            if len(fields) > len(header):
                extra = ",".join(fields[len(header) :])
                fail(f"hotels list {path} row {n}: {shape}: {extra!r} is extra")
            fail(f"hotels list {path} row {n}: {shape}: no {','.join(header[len(fields) :])}")
        row = dict(zip(header, fields, strict=True))
        hotel_id = row["hotel_id"]
        if not is_store_file(f"{hotel_id}.csv"):  # its extracts are <hotel_id>.csv; its partitions hotel_id=<id>
            fail(f"hotels list {path} row {n}: hotel_id {hotel_id!r} does not match ^[A-Z0-9][A-Z0-9_-]{{0,31}}$")
        if hotel_id in out:
            fail(f"hotels list {path} row {n}: hotel_id {hotel_id} is listed twice; keep one row")
        timezone, rooms = row["timezone"], row["rooms"]
        problem = zone_problem(timezone)  # as Arrow, which gives each event its date, knows zones
        if problem:
            fail(f"hotels list {path} row {n}: timezone {timezone!r}: {problem}")
        try:
            count = int(rooms)
        except ValueError:
            count = 0
        if count < 1:
            fail(f"hotels list {path} row {n}: rooms {rooms!r}: not a whole number of at least 1")
        out[hotel_id] = Hotel(hotel_id, row["name"], timezone, count)
    return out


def _csv_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of ``path`` as CSV (blank lines left out), else exit 2 naming the row."""
    from tasks.guard import fail

    header, rows = [], []
    try:  # utf-8-sig: a BOM (a spreadsheet's "CSV UTF-8") is read as raw extracts' is, not as a column's name
        with open(path, newline="", encoding="utf-8-sig") as fh:
            for fields in csv.reader(fh, strict=True):  # strict: a quote never closed is an error, not the rest
                if fields:
                    (rows if header else header).extend([fields] if header else fields)
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"hotels list {path}: cannot be read ({getattr(exc, 'strerror', None) or exc})")
    except csv.Error as exc:
        why = str(exc)
        if why == "unexpected end of data":  # the file ended inside a quoted field
            why = 'a field opens with a quote (") that is never closed; close it, and write a quote inside a '
            why += 'quoted field as ""'
        fail(f"hotels list {path} row {len(rows) + 2 if header else 1}: {why}")
    return header, rows
