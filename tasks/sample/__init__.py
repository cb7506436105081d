"""``daybreak sample``: a deterministic, realistic raw zone (docs/raw-zone.md), one writer per source
(``tasks/sample/<source>.py``). Every draw is keyed per (seed, source, id, day): equal arguments give
byte-identical files; a file with other bytes is refused, never written over."""

from __future__ import annotations

import importlib
from datetime import date
from pathlib import Path

from tasks.catalogue import SOURCES
from tasks.sample.common import Request, Sink, writing_to
from tasks.sample.qsr_pos import late_file_relpath, qsr_store  # noqa: F401 - late_file_relpath: the sample's name

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
    """Write a raw zone for ``days`` business dates from ``start``; return a summary. Unless ``include_late``,
    the late QSR file is held back."""
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
    return {**summary, "late_file": late, "late_file_written": include_late and req.root / late in sink.written}


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
    """Write the late QSR file, byte-identical to ``generate(include_late=True)``'s; return its path."""
    rel = late_file_relpath(start, days, stores, seed)
    _, folder_name, file_name = rel.split("/")
    index = int(file_name.removesuffix(".csv")[1:])
    folder = date.fromisoformat(folder_name)
    with writing_to(Sink()) as sink:  # there with the same bytes: left alone
        qsr_store(Path(raw_root), start, days, stores, seed, mean_lines_per_store, index, folder, set())
    _refuse(Path(raw_root), sink)
    return Path(raw_root) / rel
