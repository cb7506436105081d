"""A preview's view of a bucket data root (:class:`S3ShadowStore`; the local one: tasks/storage/shadow.py)."""

from __future__ import annotations

import datetime as dt
import time
from typing import TYPE_CHECKING

from tasks.storage.s3 import Obj
from tasks.storage.s3store import S3PartitionStore
from tasks.storage.shadow import shadow_of

if TYPE_CHECKING:
    import pyarrow as pa


class S3ShadowStore(S3PartitionStore):
    """A dataset's partitions as a preview sees them (:class:`tasks.storage.shadow.ShadowStore` for a
    bucket): a partition the shadow root holds is read there, any other from production; every write
    (objects, manifests, failure records, leases) goes to the shadow. A manifest-only update of a
    partition the shadow does not hold yet copies production's objects into the shadow first."""

    def __init__(self, data_root: str, dataset: str, subpartition: str | None = None):
        shadow = shadow_of(data_root)
        super().__init__(shadow, dataset, subpartition)
        self.production = S3PartitionStore(data_root, dataset, subpartition)
        self.own = S3PartitionStore(shadow, dataset, subpartition)

    def _side(self, date: dt.date | None) -> S3PartitionStore:
        return self.own if self.own.manifest_stamp(date) is not None else self.production

    def manifest_stamp(self, date: dt.date | None, fresh: bool = False) -> tuple | None:
        return self._side(date).manifest_stamp(date, fresh)

    def read_manifest_stamped(self, date: dt.date | None, known: tuple | None) -> tuple[tuple | None, dict | None]:
        return self._side(date).read_manifest_stamped(date, known)

    def read_manifest(self, date: dt.date | None) -> dict | None:
        return self._side(date).read_manifest(date)

    def has_manifest(self, date: dt.date | None) -> bool:
        return self._side(date).has_manifest(date)

    def data_matches(self, date: dt.date | None, manifest: dict) -> bool:
        return self._side(date).data_matches(date, manifest)

    def data_problem(self, date: dt.date | None, manifest: dict) -> str:
        return self._side(date).data_problem(date, manifest)

    def strays_in(self, date: dt.date | None, manifest: dict | None) -> list[str]:
        return self._side(date).strays_in(date, manifest)

    def read_file(self, date: dt.date | None, name: str) -> bytes:
        return self._side(date).read_file(date, name)

    def read_table(self, date: dt.date | None, columns: list[str] | None = None) -> pa.Table:
        return self._side(date).read_table(date, columns)

    def file_digest(self, rel: str) -> tuple[str | None, str, int]:
        own = self.own.file_digest(rel)
        return own if own[0] is not None else self.production.file_digest(rel)

    def uri(self, date: dt.date | None = None) -> str:
        return self._side(date).uri(date)

    def refresh(self, date: dt.date | None) -> None:
        self.own.refresh(date)
        self.production.refresh(date)

    def listed_dates(self) -> set[dt.date]:
        return self.production.listed_dates() | self.own.listed_dates()

    def update_manifest(self, date: dt.date | None, manifest: dict) -> None:
        if self.own.manifest_stamp(date) is None:
            quarantine = manifest.get("quarantine")
            names = [f"{self.rel(date)}/{f['name']}" for f in manifest.get("data_files", [])]
            for rel in [*names, *([quarantine["path"]] if quarantine else [])]:
                content = self.production.bucket.read(rel)
                self.own._known(rel, Obj(len(content), self.own.bucket.put(rel, content), time.time_ns()))
        super().update_manifest(date, manifest)
