"""Reference data under config/ (changes with the business, not the code), found relative to the project."""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from tasks.settings import CONFIG_DIR


@dataclass(frozen=True)
class Hotel:
    hotel_id: str
    name: str
    timezone: str
    rooms: int


@functools.cache
def hotels() -> dict[str, Hotel]:
    """config/hotels.csv by hotel_id; every timezone must be a valid IANA name."""
    path = CONFIG_DIR / "hotels.csv"
    with open(path, newline="", encoding="utf-8") as fh:
        out = {}
        for n, row in enumerate(csv.DictReader(fh), start=2):
            try:
                ZoneInfo(row["timezone"])
                out[row["hotel_id"]] = Hotel(row["hotel_id"], row["name"], row["timezone"], int(row["rooms"]))
            except (KeyError, ValueError) as exc:
                raise ValueError(f"{path} row {n}: {exc}") from exc
    return out
