"""The store marts: stores discovered at run time (the DiscoverStores sensor, its registry) and their
per-store partitions."""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path

import luigi

from tasks import catalogue, settings
from tasks.base import PartitionedTask, SnapshotTask, newest_raw_date
from tasks.building import Built
from tasks.contract import is_store_file
from tasks.guard import fail
from tasks.qsr import STORE_TOTALS_FILE, StgQsrPos
from tasks.storage import partitions
from tasks.storage.partitions import atomic_write_text, exclusive
from tasks.storage.rawzone import RawFile, RawZone, folder_dates
from tasks.targets import luigi_engine

logger = logging.getLogger("luigi-interface")
SOURCE = "qsr_pos"


REGISTRY = "stores.json"  # shared by every host: _state/stores.json under the data root


def read_registry() -> dict[str, str]:
    """{store_id: first-seen folder date} of every registered store."""
    return partitions.read_document(settings.data_uri(), REGISTRY) or {}


def register(found: dict[str, str]) -> dict[str, str]:
    """Merge ``found`` ({store: first-seen date}) into the registry, keeping the earliest date; atomic (two
    sensors at once: one merges after the other)."""

    def merge(registry: dict | None) -> dict:
        registry = dict(registry or {})
        for store, first in found.items():
            if store not in registry or first < registry[store]:
                registry[store] = first
        return registry

    return partitions.update_document(settings.data_uri(), REGISTRY, merge, "the store registry")


def seen_path() -> Path:
    """This host's memory of the folders it listed (a cache: a new host lists them again)."""
    return partitions.state_dir(settings.data_uri()) / "stores_seen.json"


def read_seen(zone: RawZone) -> dict[str, list]:
    """{folder name: [its mtime_ns when listed, the stores it held]} of every qsr_pos folder the sensor has
    listed in this raw zone; {} for another raw zone (the state names the zone it was made from)."""
    try:
        state = json.loads(seen_path().read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return state.get("folders", {}) if state.get("raw_root") == zone.describe() else {}


def unseen_folders(zone: RawZone, start: dt.date, stop: dt.date) -> tuple[dict[str, int], dict[str, list]]:
    """({name: mtime_ns} of the folders of [start, stop) not listed yet, or changed since: new, or a file
    added or removed, which changes a folder's mtime; what was remembered of the others). One listing of
    ``qsr_pos/``; no folder is listed."""
    seen, listed = read_seen(zone), zone.list_folders(SOURCE)
    new, known = {}, {}
    for name, mtime_ns in sorted(listed.items()):
        if start <= dt.date.fromisoformat(name) < stop:
            if seen.get(name, [None])[0] == mtime_ns:
                known[name] = seen[name]
            else:
                new[name] = mtime_ns
    return new, known


def discover(zone: RawZone, start: dt.date, stop: dt.date) -> tuple[dict[str, str], list[str]]:
    """({store: first folder date it appears in}, invalid file names) over the qsr_pos folders of [start, stop),
    by name only. Lists only the folders not seen before (and remembers them in ``_state/stores_seen.json``);
    the stores of the others come from that state."""
    found, invalid, fresh = _stores_in(zone, start, stop)
    path = seen_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(path.with_suffix(".lock"), "the stores seen"):  # another sensor may have remembered others
        state = {"raw_root": zone.describe(), "folders": {**read_seen(zone), **fresh}}
        atomic_write_text(path, json.dumps(state, indent=1, sort_keys=True))
    return found, invalid


def _stores_in(zone: RawZone, start: dt.date, stop: dt.date) -> tuple[dict[str, str], list[str], dict[str, list]]:
    """(what :func:`discover` returns, and what it would remember of the folders it listed); writes nothing."""
    new, known = unseen_folders(zone, start, stop)
    fresh: dict[str, list] = {}
    invalid: list[str] = []
    for name, mtime_ns in new.items():
        day, stores = dt.date.fromisoformat(name), set()
        for file, _, _ in zone.scan_folder(SOURCE, day) or []:
            if is_store_file(file):
                stores.add(file.removesuffix(".csv"))
            else:
                invalid.append(f"{SOURCE}/{day}/{file}")
        fresh[name] = [mtime_ns, sorted(stores)]
    found = {}
    for name, (_, folder_stores) in sorted({**known, **fresh}.items()):
        for store in folder_stores:
            found.setdefault(store, name)
    return found, invalid, fresh


def unregistered_stores() -> list[str]:
    """The stores with a file in the qsr_pos folders that the sensor has not registered yet (it will at the
    next AllStores): what a plan counts as partitions to build. Lists only the folders not seen before."""
    zone = RawZone.from_uri(settings.raw_root())
    start = settings.daybreak().start_date
    newest = newest_raw_date(zone, SOURCE)
    if newest is None:
        return []
    found, _, _ = _stores_in(zone, start, newest + dt.timedelta(days=1))
    return sorted(set(found) - set(read_registry()))


class DiscoverStores(luigi.Task):
    """The sensor: registers every store with a file in the qsr_pos folders of [start, stop), with the
    first date seen, listing only folders new or changed since (``_state/stores_seen.json``); invalid names
    are reported, never read."""

    start = luigi.DateParameter(description="First folder date to scan (inclusive)")
    stop = luigi.DateParameter(description="Last folder date to scan (exclusive)")

    def zone(self) -> RawZone:
        return RawZone.from_uri(settings.raw_root())

    def complete(self) -> bool:
        new, known = unseen_folders(self.zone(), self.start, self.stop)
        return not new and {s for _, stores in known.values() for s in stores} <= set(read_registry())

    def run(self) -> None:
        found, invalid = discover(self.zone(), self.start, self.stop)
        for name in invalid:
            logger.warning("%s: not a store file name (^[A-Z0-9][A-Z0-9_-]{0,31}.csv$); never read", name)
        new = set(found) - set(read_registry())
        register(found)
        logger.info("DiscoverStores: %d stores, %d new: %s", len(found), len(new), ", ".join(sorted(new)))


class StoreIdParameter(luigi.Parameter):
    """A store id of the contract's pattern (the stem of its files, ``qsr_pos/<date>/<store_id>.csv``).
    Any other value (``../../x``, which would name a folder outside the dataset) is a usage error when
    the task is made, before anything is checked or written: one line and exit 2 (tasks/guard.py)."""

    def normalize(self, x):
        if not isinstance(x, str) or not is_store_file(f"{x}.csv"):
            fail(f"--store-id {x!r}: not a store id; a store id matches ^[A-Z0-9][A-Z0-9_-]{{0,31}}$ (e.g. S001)")
        return x


class StoreDailySales(SnapshotTask, entry=catalogue.STORE_DAILY_SALES):
    """store_daily_sales: one row per business date for one registered store (net sales, orders,
    suspicious lines); stale when that store's slice of a staging partition changed."""

    reads_a_slice = True

    store_id = StoreIdParameter(description="A store from the registry (data/_state/stores.json)")

    @classmethod
    def static_keys(cls) -> list[str]:
        """The registered stores (the catalogue's partitions of the dataset)."""
        return list(read_registry())

    def dataset_path(self) -> str:
        return f"{self.dataset}/store_id={self.store_id}"

    def upstream(self) -> list[PartitionedTask]:
        """Every staging date built, and every date from ``[daybreak] start_date`` whose raw folder is there
        but the newest (which waits for the next): a staging partition deleted or not built yet is rebuilt
        first, never left out of the store's rows."""
        start = settings.daybreak().start_date
        staging = StgQsrPos(date=start)
        dates = set(staging.store().listed_dates())
        engine = luigi_engine()
        folders = _folder_dates(engine, engine.zone(staging), start)
        dates.update(folders[:-1])
        return [StgQsrPos(date=d) for d in sorted(dates)]

    def upstream_version(self, manifest: dict | None) -> str | None:
        return (manifest or {}).get("stats", {}).get("store_versions", {}).get(self.store_id, "no files")

    def build(self, inputs: list[RawFile]) -> Built:
        """Incremental: the rows of the previous build are kept for every date whose store version is the
        one recorded then; only the other dates are read, each from the staging partition's per-store
        totals (``_store_totals.arrow``), never from its lines. Same rows as a build from scratch."""
        import pyarrow.compute as pc

        from tasks.transforms.stores import daily_sales

        recorded, previous = self._previous()
        parts, read, rows_read = [], 0, 0
        for u in self.upstream():
            version = self.upstream_version(u.store().read_manifest(u.date))
            if previous is not None and recorded.get(u.task_id) == version:
                parts.append(previous.filter(pc.equal(previous["business_date"], u.date)))
            elif version != "no files":  # the store sent nothing read by that date: it has no row
                table, rows = self._read_date(u)
                parts.append(table)
                read, rows_read = read + 1, rows_read + rows
        # dates_read: staging dates read again; staging_rows_read: rows read from them (totals or lines)
        return Built(daily_sales(parts), None, {"dates_read": read, "staging_rows_read": rows_read})

    def _previous(self):
        """({staging task_id: store version recorded}, rows) of the previous build, when it is intact and
        built under the current rules; ({}, None) otherwise: a build from scratch."""
        store = self.store()
        manifest = store.read_manifest(None)
        if (
            not manifest
            or manifest.get("_corrupt")
            or manifest.get("rules_fingerprint") != self.rules_fingerprint()
            or not store.data_matches(None, manifest)
        ):
            return {}, None
        return manifest.get("upstream", {}), store.read_table(None)

    def _read_date(self, staging: StgQsrPos):
        """(this store's row of one staging date, rows read): from the per-store totals written beside the
        data file; a partition built before they existed is read whole and filtered (and summed here)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from tasks.transforms.stores import store_rows, store_totals

        try:
            data = staging.store().read_file(staging.date, STORE_TOTALS_FILE)
        except FileNotFoundError:
            data = None
        if data is not None:
            totals = pa.ipc.open_file(pa.BufferReader(data)).read_all()
            return store_rows(totals, self.store_id), totals.num_rows
        lines = staging.store().read_table(staging.date).select(["store_id", "order_id", "net_amount", "is_suspicious"])
        mine = lines.filter(pc.equal(lines["store_id"], self.store_id))
        return store_rows(store_totals(mine, staging.date), self.store_id), lines.num_rows


def _folder_dates(engine, zone: RawZone, start: dt.date) -> list[dt.date]:
    """The dates of the qsr_pos folders from ``start`` to tomorrow (a stray later folder is not counted),
    from the source's listing of this pass."""
    limit = settings.business_today() + dt.timedelta(days=1)
    return sorted(d for d in folder_dates(engine.source_listed(zone, SOURCE)[1]) if start <= d <= limit)


class AllStores(luigi.Task):
    """Runs the sensor over the qsr_pos folders (listing only new ones), then yields one StoreDailySales
    per registered store (Luigi dynamic dependencies): a store registered during this run gets its
    partition in this run."""

    def requires(self):
        zone = RawZone.from_uri(settings.raw_root())
        newest = newest_raw_date(zone, SOURCE) or settings.daybreak().start_date
        return DiscoverStores(start=settings.daybreak().start_date, stop=newest + dt.timedelta(days=1))

    def complete(self) -> bool:
        engine = luigi_engine()
        return self.requires().complete() and all(engine.state(StoreDailySales(store_id=s)).ok for s in read_registry())

    def run(self):
        yield [StoreDailySales(store_id=s) for s in sorted(read_registry())]
