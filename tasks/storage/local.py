"""Partitions under a local folder: :class:`tasks.storage.store.PartitionStore` with the local write
protocol (:class:`tasks.storage.localwrite.LocalWrites`: every file written under a temporary name and
fsynced, then renamed into place, the manifest last) and the paths it writes to."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from tasks.storage.localwrite import LocalWrites
from tasks.storage.store import PartitionStore


class LocalPartitionStore(LocalWrites, PartitionStore):
    """One dataset's partitions under a local ``data_root`` (:func:`open_store` makes the store of any data
    root; while a preview builds, :func:`shadowed`, a store of the production data root is a
    :class:`ShadowStore`: it writes to the preview's shadow root)."""

    def path(self, date: dt.date | None) -> Path:
        """The partition's folder; the dataset folder itself for an unpartitioned dataset (None)."""
        return self.data_root / self.rel(date)

    def folder(self, date: dt.date | None) -> str:
        """:meth:`path` as a string."""
        return self.backend.path(self.rel(date))

    def quarantine_path(self, date: dt.date | None) -> Path:
        return self.data_root / self.quarantine_rel(date)

    def failure_path(self, date: dt.date | None) -> Path:
        return self.data_root / self.failure_id(date)

    def lock_path(self, date: dt.date | None) -> Path:
        """``_state/locks/`` mirrors ``_state/failures/``: one lock file per partition."""
        return self.backend.lock_path(self.record_name(date))

    def summaries_path(self) -> Path:
        return self.data_root / self.summaries_rel()
