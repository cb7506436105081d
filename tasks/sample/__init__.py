"""Deterministic, realistic sample raw zone for Daybreak (contract: docs/raw-zone.md).

``generate()`` writes, for business dates ``start .. start+days-1``:

* ``qsr_pos/<D>/<store_id>.csv``: one file per store (``S001`` ...) and folder date ``D`` in ``start .. start+days``.
  All stores are in America/Toronto. Stores have different sizes (lognormal around ``mean_lines_per_store`` lines
  per business day), weekends are busier, orders peak at breakfast (~08:00), lunch (~12:00) and dinner (~18:30),
  and some orders are placed between 00:00 and 04:59 local: they belong to the previous business day but sit in
  the next day's folder (the folder is the local wall date of ``ordered_at``). ``ordered_at`` carries the real
  Toronto UTC offset at that instant (``-04:00`` / ``-05:00``; both sides of the fall-back hour occur), about 0.5 %
  of lines are written in UTC with ``Z``. 30 menu items with fixed prices, 1-5 lines per order, qty mostly 1-3 and
  about 0.05 % bulk lines (24, 30, 50: above the suspicious threshold), a few discounts, ~2 % VOIDED and ~1 %
  REFUNDED orders. Dirt: ~0.3 % duplicated lines (re-written later in the same file, a fifth of them re-sent as
  VOIDED) and ~0.1 % malformed rows (qty ``abc``, negative unit_price, empty order_id, status ``PENDING``,
  ``ordered_at`` without offset, line_no 0), capped at 1 % of any file.
* ``hotel_bookings/<D>/<hotel_id>.csv``: for every hotel of the hotels list and every date, 20-60 CREATED /
  MODIFIED / CANCELLED events whose local date at the hotel is ``D`` (some at 00:00:xx and 23:59:xx).
* ``ads/<E>/ads.csv``: exports ``E = start+1 .. start+days``, each restating dates ``E-7 .. E-1`` (not before
  ``start``) for 8 campaigns; conversions and conversion_value grow with newer exports, the rest is fixed. One
  campaign-day has spend 0.

One QSR file (``late_file_relpath()``) is held back unless ``include_late``: ``write_late_file()`` drops it in later,
byte-identical. A file is never written over: run again with the same arguments, ``generate()`` leaves the
files that are there with the same bytes alone (not even their mtime changes) and writes the missing ones; it
refuses, writing nothing, when a file it would write is there with other bytes (:class:`SampleExists`). Every
new file is created exclusively. Every random draw comes from
``numpy.random.default_rng([seed, source, ...])`` keyed per (source, store/hotel/campaign, day), so equal
arguments give byte-identical files and one file can be written alone.
``seed`` must be a non-negative integer.

Each source of the catalogue (tasks/catalogue.py ``SOURCES``) has its writer in this package, a module named
after the source (``tasks/sample/<source>.py``) with ``planned(request)`` and ``write(request)``; a new
source needs one.
"""

from __future__ import annotations

import importlib
from datetime import date
from pathlib import Path

from tasks.catalogue import SOURCES
from tasks.sample.common import Request, Sink, writing_to
from tasks.sample.qsr_pos import late_file_relpath, qsr_store, store_id  # noqa: F401 - the sample's names

HOTELS_CSV = Path(__file__).resolve().parents[2] / "config" / "hotels.csv"
WRITERS = {source: importlib.import_module(f"tasks.sample.{source}") for source in SOURCES}  # source -> its writer


def _request(raw_root, start: date, days: int, stores: int, seed: int, mean: int, skip, hotels_csv: Path) -> Request:
    return Request(Path(raw_root), start, days, stores, seed, mean, frozenset(skip), Path(hotels_csv))


def generate(
    raw_root: str | Path,
    start: date,
    days: int,
    stores: int = 50,
    seed: int = 1,
    mean_lines_per_store: int = 400,
    include_late: bool = False,
    hotels_csv: Path = HOTELS_CSV,
) -> dict:
    """Write a raw zone for business dates ``start .. start+days-1`` (every source); return a summary.

    Unless ``include_late``, the designated late QSR file is not written (see ``write_late_file``). A file
    that is there with the bytes this sample gives it is left alone; raises :class:`SampleExists`, writing
    nothing, when one is there with other bytes.
    """
    if days < 1 or stores < 1:
        raise ValueError("days and stores must be >= 1")
    late = late_file_relpath(start, days, stores, seed)
    req = _request(
        raw_root, start, days, stores, seed, mean_lines_per_store, () if include_late else {late}, hotels_csv
    )
    there = any(
        (req.root / rel).exists() for rel in planned_files(start, days, stores, hotels_csv) if rel not in req.skip
    )
    summary: dict = {}
    with writing_to(Sink(hold=there)) as sink:  # files there: compare them all before anything is written
        for source in SOURCES:
            summary.update(WRITERS[source].write(req))
    _refuse(req.root, sink)
    sink.commit()
    if sink.unchanged:
        summary["files_unchanged"] = sink.unchanged
    return {**summary, "late_file": late, "late_file_written": include_late}


def _refuse(root: Path, sink: Sink) -> None:
    if sink.differ:
        raise SampleExists(root, sorted(path.relative_to(root).as_posix() for path in sink.differ))


class SampleExists(FileExistsError):
    """Files the sample would write are in the raw zone already: a raw file is never changed."""

    def __init__(self, root: Path, relpaths: list[str]):
        self.root, self.relpaths = root, relpaths
        more = f" (and {len(relpaths) - 1} more of the files it would write)" if len(relpaths) > 1 else ""
        super().__init__(
            f"{root / relpaths[0]} exists{more} with other bytes than this sample's: the sample never writes over "
            "a raw file; give it a new or empty folder (--raw-root), or the arguments it was made with"
        )


def planned_files(start: date, days: int, stores: int, hotels_csv: Path = HOTELS_CSV) -> list[str]:
    """Every file ``generate()`` writes (the late file included), as paths below the raw root."""
    req = _request(".", start, days, stores, 0, 0, (), hotels_csv)
    return [rel for source in SOURCES for rel in WRITERS[source].planned(req)]


def write_late_file(
    raw_root: str | Path, start: date, days: int, stores: int = 50, seed: int = 1, mean_lines_per_store: int = 400
) -> Path:
    """Write the designated late QSR file, byte-identical to ``generate(include_late=True)``'s; return its path.
    Left alone when it is there with those bytes; :class:`SampleExists` when with others."""
    rel = late_file_relpath(start, days, stores, seed)
    _, folder_name, file_name = rel.split("/")
    index = int(file_name.removesuffix(".csv")[1:])
    folder = date.fromisoformat(folder_name)
    with writing_to(Sink()) as sink:  # there with the same bytes: left alone
        qsr_store(Path(raw_root), start, days, stores, seed, mean_lines_per_store, index, folder, set())
    _refuse(Path(raw_root), sink)
    return Path(raw_root) / rel
