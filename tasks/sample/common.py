"""What every source's sample writer shares: the random streams' tags, the weekly rhythm, the writes (a file is
created, or left alone when it has the same bytes; never written over)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import date
from pathlib import Path

# rng stream tags (second element of every seed key)
QSR, HOTEL, ADS, DIRT, STORE, LATE = range(6)
DOW_FACTOR = [0.92, 0.92, 0.92, 0.92, 1.05, 1.20, 1.10]  # Mon..Sun, averages ~1


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


class Sink:
    """Where the writers' files go: one there with the same bytes is left alone, one with other bytes named
    in :attr:`differ`; with ``hold``, new files are created by :meth:`commit`."""

    def __init__(self, hold: bool = False):
        self.hold = hold
        self.pending: dict[Path, bytes] = {}
        self.differ: list[Path] = []
        self.unchanged = 0
        self.written: set[Path] = set()

    def put(self, path: Path, data: bytes) -> None:
        try:
            same = path.read_bytes() == data
        except FileNotFoundError:
            if self.hold:
                self.pending[path] = data
            else:
                _exclusive(path, data)
                self.written.add(path)
            return
        if same:
            self.unchanged += 1
        else:
            self.differ.append(path)

    def commit(self) -> None:
        for path, data in self.pending.items():
            _exclusive(path, data)
        self.written.update(self.pending)
        self.pending.clear()


_SINK: ContextVar[Sink | None] = ContextVar("sample_sink", default=None)


def create_file(path: Path, data: bytes) -> None:
    """Write a new file (through the sample's sink, if any), never over one that is there."""
    sink = _SINK.get()
    if sink is None:
        _exclusive(path, data)
    else:
        sink.put(path, data)


@contextmanager
def writing_to(sink: Sink) -> Iterator[Sink]:
    """Every :func:`create_file` of the block goes to ``sink``."""
    token = _SINK.set(sink)
    try:
        yield sink
    finally:
        _SINK.reset(token)


def _exclusive(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "xb") as fh:
        fh.write(data)
