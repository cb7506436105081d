"""What Luigi sees of the raw zone and the data root: a raw export folder (:class:`RawFolder`), a
partition's folder (:class:`PartitionTarget`), and the run's freshness engine (:func:`luigi_engine`)."""

from __future__ import annotations

import datetime as dt
import logging

import luigi

from tasks import settings
from tasks.catalogue import SOURCES
from tasks.freshness import engine as freshness
from tasks.freshness.engine import Engine
from tasks.luigi_shortcuts import luigi_run
from tasks.storage.partitions import PartitionStore
from tasks.storage.rawzone import RawZone, folder_dates

logger = logging.getLogger("luigi-interface")


def luigi_engine() -> Engine:
    """The freshness engine of the current Luigi run (one pass per run); outside a run, a new pass."""
    return freshness.engine_for_run(luigi_run())


class RawFolderTarget(luigi.Target):
    """Exists when one export folder of the raw zone has arrived: it is there, holding a file it arrives with."""

    def __init__(self, zone: RawZone, source: str, date: dt.date):
        self.zone, self.source, self.date = zone, source, date

    def exists(self) -> bool:
        engine = luigi_engine()
        if self.zone.local_lookups:
            there = self.zone.folder_exists(self.source, self.date)
        else:  # a request to a server: the folder as this run listed it (one LIST or readdir per pass)
            there = engine.folder_there(self.zone, self.source, self.date)
        if there:  # it arrives with a file of a name read (tasks.contract.ARRIVES_WITH)
            return engine.arrived(self.zone, self.source, self.date)
        # there but not read (a symbolic link, a file, a linked source folder): named in a warning, once
        engine.source_unread(self.zone, self.source)
        return False

    def __repr__(self) -> str:
        return f"RawFolderTarget({self.zone.describe()}/{self.zone.folder_relpath(self.source, self.date)})"


class RawFolder(luigi.ExternalTask):
    """One export folder of the raw zone (``<raw_root>/<source>/<date>/``), written by a source system."""

    source = luigi.ChoiceParameter(choices=SOURCES, description="Raw source folder name, e.g. qsr_pos")
    date = luigi.DateParameter(description="Export date of the folder (the day the source wrote it)")

    def output(self):
        with settings.snapshot():  # the raw root and its check read the [daybreak] section once, not thrice
            return RawFolderTarget(RawZone.from_uri(settings.raw_root()), self.source, self.date)


class PartitionTarget(luigi.Target):
    """The hive folder of one partition; ``exists()`` means a manifest is there (not that it is fresh)."""

    def __init__(self, store: PartitionStore, date: dt.date):
        self.store, self.date = store, date

    def exists(self) -> bool:
        return self.store.has_manifest(self.date)


_warned_future: set[str] = set()


def newest_raw_date(zone: RawZone, source: str, arrived: bool = True) -> dt.date | None:
    """The newest folder date of a raw source that has arrived (``arrived=False``: that is there, arrived or
    not), at most tomorrow (a stray later folder is ignored with a warning)."""
    limit = settings.business_today() + dt.timedelta(days=1)
    dates = sorted(folder_dates(zone.source_listing(source)[1]), reverse=True)
    later = [d for d in dates if d > limit]
    engine = luigi_engine()
    newest = next((d for d in dates if d <= limit and (not arrived or engine.arrived(zone, source, d))), None)
    folder = f"{zone.describe()}/{zone.folder_relpath(source, later[0])}" if later else ""
    if later and folder not in _warned_future:
        _warned_future.add(folder)
        logger.warning(
            "raw folder %s is dated after tomorrow (%s): ignored; the newest folder counted is %s. A stray "
            "folder? Move it out of the raw zone.",
            folder,
            limit,
            newest or "none",
        )
    return newest
