"""Previews: while a preview builds, every store of the production data root writes to the preview's shadow
root and reads a partition there when the shadow holds it (:class:`ShadowStore`; a bucket's:
:class:`tasks.storage.s3shadow.S3ShadowStore`). tasks/preview/ builds previews this way."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tasks.storage.files import _write_bytes
from tasks.storage.layout import MANIFEST, manifest_bytes, remote
from tasks.storage.local import LocalPartitionStore

_shadow: tuple[str, str] | None = None  # (production data root, as _root_key gives it; the preview's shadow root)


def root_key(data_root: str | os.PathLike) -> str:
    return data_root.rstrip("/") if remote(data_root) else os.path.abspath(data_root)


@contextmanager
def shadowed(production: str | os.PathLike, shadow: str | os.PathLike) -> Iterator[None]:
    """For the duration of the block (and in the worker processes forked in it), every store of the
    ``production`` data root that :func:`open_store` makes writes to ``shadow`` and reads a partition
    there when the shadow holds it (:class:`ShadowStore`): nothing under production is written.
    tasks/preview/ builds previews this way."""
    global _shadow
    previous, _shadow = _shadow, (root_key(production), str(shadow))
    try:
        yield
    finally:
        _shadow = previous


class ShadowStore(LocalPartitionStore):
    """A dataset's partitions as a preview sees them: a partition the shadow root holds is read there,
    any other from production; every write (data, manifest, quarantine, failure record, lock, staging)
    goes to the shadow. A manifest-only update of a partition the shadow does not hold yet (a rebuild
    that gave production's rows again) links production's data files into the shadow: no copy."""

    def __init__(self, data_root: str | os.PathLike, dataset: str, subpartition: str | None = None):
        assert _shadow is not None
        super().__init__(_shadow[1], dataset, subpartition)
        self.production = LocalPartitionStore(data_root, dataset, subpartition)
        self.own = LocalPartitionStore(_shadow[1], dataset, subpartition)

    def _side(self, date: dt.date | None) -> LocalPartitionStore:
        """The shadow once the preview has written the partition there, production before."""
        return self.own if os.path.isdir(self.own.folder(date)) else self.production

    def path(self, date: dt.date | None) -> Path:
        return self._side(date).path(date)

    def folder(self, date: dt.date | None) -> str:
        return self._side(date).folder(date)

    def uri(self, date: dt.date | None = None) -> str:
        return self._side(date).uri(date)

    def write_path(self, date: dt.date | None) -> Path:
        return self.own.path(date)

    def listed_dates(self) -> set[dt.date]:
        return self.production.listed_dates() | self.own.listed_dates()

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

    def update_manifest(self, date: dt.date | None, manifest: dict) -> None:
        if os.path.isdir(self.own.folder(date)):
            return super().update_manifest(date, manifest)
        origin = self.production.path(date)
        quarantine = manifest.get("quarantine")

        def fill(folder: Path) -> dict:
            for f in manifest.get("data_files", []):
                os.link(origin / f["name"], folder / f["name"])
            if quarantine:  # the manifest names it: the shadow's partition is whole only with it
                target = self.own.data_root / quarantine["path"]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.unlink(missing_ok=True)
                os.link(self.production.data_root / quarantine["path"], target)
            _write_bytes(folder / MANIFEST, manifest_bytes(manifest))
            return manifest

        with self._replacing(date):
            self._into(self.own.path(date), fill)


def shadow_of(data_root: str | os.PathLike) -> str | None:
    """The shadow root that stands for ``data_root`` while a preview builds; None otherwise."""
    return _shadow[1] if _shadow is not None and root_key(data_root) == _shadow[0] else None
