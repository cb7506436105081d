"""What every source's sample writer shares: the random streams' tags, the weekly rhythm, exclusive writes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

# rng stream tags (second element of every seed key)
_QSR, _HOTEL, _ADS, _DIRT, _STORE, _LATE = range(6)
_DOW_FACTOR = [0.92, 0.92, 0.92, 0.92, 1.05, 1.20, 1.10]  # Mon..Sun, averages ~1


@dataclass(frozen=True)
class Request:
    """One sample: business dates ``start .. start+days-1``, and what each source's writer needs of it."""

    root: Path
    start: date
    days: int
    stores: int
    seed: int
    mean_lines_per_store: int
    skip: frozenset[str]  # paths below the root not to write (the late file, until it comes)
    hotels_csv: Path


def _create(path: Path, data: bytes) -> None:
    """Write a new file; one that is there already is never written over (FileExistsError)."""
    with open(path, "xb") as fh:
        fh.write(data)
