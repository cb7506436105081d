"""Previews: while one builds, every store of the production data root writes to the preview's shadow root,
and reads a partition there once the shadow holds it (:class:`ShadowStore`, over any backend)."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from contextlib import contextmanager

from tasks.storage.layout import remote
from tasks.storage.store import PartitionStore

_shadow: tuple[str, str] | None = None  # (production's root_key, the shadow root)


def root_key(data_root: str | os.PathLike) -> str:
    return data_root.rstrip("/") if remote(data_root) else os.path.abspath(data_root)


@contextmanager
def shadowed(production: str | os.PathLike, shadow: str | os.PathLike) -> Iterator[None]:
    """In the block (and the processes forked in it), stores of ``production`` are shadowed by ``shadow``."""
    global _shadow
    previous, _shadow = _shadow, (root_key(production), str(shadow))
    try:
        yield
    finally:
        _shadow = previous


class ShadowStore(PartitionStore):
    """A dataset's partitions as a preview sees them: the ``shadow`` root over production; writes go to the shadow."""

    def __init__(
        self, data_root: str | os.PathLike, shadow: str | os.PathLike, dataset: str, subpartition: str | None = None
    ):
        super().__init__(shadow, dataset, subpartition)
        self.production = PartitionStore(data_root, dataset, subpartition)
        self.own = PartitionStore(shadow, dataset, subpartition)

    def _side(self, date: dt.date | None) -> PartitionStore:
        return self.own if self.backend.holds(self.dataset, self.rel(date)) else self.production

    def uri(self, date: dt.date | None = None) -> str:
        return self._side(date).uri(date)

    def listed_dates(self) -> set[dt.date]:
        return self.production.listed_dates() | self.own.listed_dates()

    def relist(self) -> bool:
        return False  # a preview looks at each partition of both sides

    def refresh(self, date: dt.date | None) -> None:
        self.own.refresh(date)
        self.production.refresh(date)

    def manifest_stamp(self, date: dt.date | None, fresh: bool = False) -> tuple | None:
        return self._side(date).manifest_stamp(date, fresh)

    def read_manifest_stamped(self, date: dt.date | None, known: tuple | None) -> tuple[tuple | None, dict | None]:
        return self._side(date).read_manifest_stamped(date, known)

    def read_manifest(self, date: dt.date | None) -> dict | None:
        return self._side(date).read_manifest(date)

    def has_manifest(self, date: dt.date | None) -> bool:
        return self._side(date).has_manifest(date)

    def data_problem(self, date: dt.date | None, manifest: dict) -> str:
        return self._side(date).data_problem(date, manifest)

    def strays_in(self, date: dt.date | None, manifest: dict | None) -> list[str]:
        return self._side(date).strays_in(date, manifest)

    def read_file(self, date: dt.date | None, name: str) -> bytes:
        return self._side(date).read_file(date, name)

    def read_table(self, date: dt.date | None, columns: list[str] | None = None):
        return self._side(date).read_table(date, columns)

    def file_digest(self, rel: str) -> tuple[str | None, str, int]:
        own = self.own.file_digest(rel)
        return own if own[0] is not None else self.production.file_digest(rel)

    def update_manifest(self, date: dt.date | None, manifest: dict, files_from: PartitionStore | None = None) -> None:
        if files_from is None and not self.backend.holds(self.dataset, self.rel(date)):
            files_from = self.production
        super().update_manifest(date, manifest, files_from)


def shadow_of(data_root: str | os.PathLike) -> str | None:
    """The shadow root that stands for ``data_root`` while a preview builds; None otherwise."""
    return _shadow[1] if _shadow is not None and root_key(data_root) == _shadow[0] else None
