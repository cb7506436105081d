"""The store marts: stores discovered at run time (the DiscoverStores sensor, its registry) and their
per-store partitions."""

from __future__ import annotations

import datetime as dt
import logging
import os
import time

import luigi

from tasks import catalogue, settings
from tasks.base import PartitionedTask, SnapshotTask, sftp_slot
from tasks.building import Built
from tasks.contract import is_store_file
from tasks.freshness.engine import Engine
from tasks.freshness.inputs import parse_inputs
from tasks.freshness.keys import up_to_date
from tasks.guard import fail, nearest
from tasks.luigi_shortcuts import luigi_run, worker_id
from tasks.qsr import STORE_TOTALS_FILE, StgQsrPos
from tasks.reporting import runlog
from tasks.storage import partitions
from tasks.storage.rawzone import RawFile, RawZone, folder_dates
from tasks.targets import luigi_engine, newest_raw_date
from tasks.transforms.rawcsv import file_stem

logger = logging.getLogger("luigi-interface")
SOURCE = "qsr_pos"


REGISTRY = "stores.json"  # shared by every host: _state/stores.json under the data root


def read_registry() -> dict[str, str]:
    """{store_id: first-seen folder date} of every registered store."""
    return partitions.read_document(settings.data_uri(), REGISTRY) or {}


def check_known(store_id: str) -> None:
    """A usage error unless ``store_id`` is registered, staged or has a file in the qsr_pos folders."""
    known: set[str] = set()
    for look in (read_registry, staged_stores, sensed_stores):
        known.update(look())
        if store_id in known:
            return
    listed = sorted(known)
    shown = ", ".join(listed) if len(listed) <= 10 else f"{', '.join(listed[:10])}, ... ({len(listed)})"
    fail(
        f"--store-id {store_id!r}: not a registered store (_state/{REGISTRY}), and no file of it in the raw zone"
        f"{nearest(store_id, listed)} (stores: {shown or 'none yet'}); AllStores builds every store"
    )


def register(found: dict[str, str]) -> dict[str, str]:
    """Merge ``found`` ({store: first-seen date}) into the registry atomically, keeping the earliest date."""

    def merge(registry: dict | None) -> dict:
        registry = dict(registry or {})
        for store, first in found.items():
            if store not in registry or first < registry[store]:
                registry[store] = first
        return registry

    return partitions.update_document(settings.data_uri(), REGISTRY, merge, "the store registry")


# the folders the sensor has listed, shared by every host (a cache: deleted, the next lists them all again)
SEEN = "stores_seen.json"


def this_run() -> list | None:
    """[worker, pid of the run's process] of the Luigi run this process is in; None outside a run."""
    if not worker_id():
        return None
    return [worker_id(), os.getpid() if luigi_run() is not None else os.getppid()]


def read_seen(zone: RawZone) -> dict:
    """``_state/stores_seen.json`` when made from this raw zone, else {}: ``folders``, {folder name:
    [mtime_ns when listed, its stores]}, and ``run``, the run that listed last."""
    state = partitions.read_document(settings.data_uri(), SEEN) or {}
    return state if state.get("raw_root") == zone.describe() else {}


def unseen_folders(zone: RawZone, start: dt.date, stop: dt.date) -> tuple[dict[str, int], dict[str, list], int]:
    """({name: mtime_ns} of the folders of [start, stop) new or changed since listed, what was remembered
    of the others, the time of the listing in ns), from one listing of ``qsr_pos/``."""
    listed_ns = time.time_ns()  # before the listing: a folder stamped within its clock tick is not trusted
    seen, listed = read_seen(zone).get("folders", {}), zone.list_folders(SOURCE)
    new, known = {}, {}
    for name, mtime_ns in sorted(listed.items()):
        if start <= dt.date.fromisoformat(name) < stop:
            if seen.get(name, [None])[0] == mtime_ns:
                known[name] = seen[name]
            else:
                new[name] = mtime_ns
    return new, known, listed_ns


def discover(zone: RawZone, start: dt.date, stop: dt.date) -> tuple[dict[str, str], list[str]]:
    """({store: first folder date}, invalid file names) over the qsr_pos folders of [start, stop), listing
    only the folders not seen before (remembered in ``_state/stores_seen.json``)."""
    found, invalid, fresh = _stores_in(zone, start, stop)

    def merge(state: dict | None) -> dict:  # another sensor may have remembered others meanwhile
        state = state if (state or {}).get("raw_root") == zone.describe() else {}
        return {"raw_root": zone.describe(), "folders": {**state.get("folders", {}), **fresh}, "run": this_run()}

    partitions.update_document(settings.data_uri(), SEEN, merge, "the stores seen")
    return found, invalid


def _stores_in(zone: RawZone, start: dt.date, stop: dt.date) -> tuple[dict[str, str], list[str], dict[str, list]]:
    """What :func:`discover` returns and would remember, writing nothing. A folder stamped within the
    listing's clock tick is not remembered: a file added in that tick keeps the stamp."""
    new, known, listed_ns = unseen_folders(zone, start, stop)
    listed: dict[str, list] = {}
    invalid: list[str] = []
    for name, mtime_ns in new.items():
        day, stores = dt.date.fromisoformat(name), set()
        for file, _, _ in zone.scan_folder(SOURCE, day) or []:
            if is_store_file(file):
                stores.add(file.removesuffix(".csv"))
            else:
                invalid.append(f"{SOURCE}/{day}/{file}")
        listed[name] = [mtime_ns, sorted(stores)]
    found = {}
    for name, entry in sorted({**known, **listed}.items()):
        for store in entry[1]:
            found.setdefault(store, name)
    fresh = {name: entry for name, entry in listed.items() if zone.folder_settled(entry[0], listed_ns)}
    return found, invalid, fresh


def sensor() -> DiscoverStores:
    """The sensor over the qsr_pos folders from ``[daybreak] start_date`` to the newest."""
    zone = RawZone.from_uri(settings.raw_root())
    newest = newest_raw_date(zone, SOURCE) or settings.daybreak().start_date
    return DiscoverStores(start=settings.daybreak().start_date, stop=newest + dt.timedelta(days=1))


def sensed_stores() -> set[str]:
    """The stores the sensor has registered or will at its next run; writes nothing."""
    task = sensor()
    return set(_stores_in(task.zone(), task.start, task.stop)[0])


def staged_stores(engine: Engine | None = None) -> dict[str, str]:
    """{store: first folder date} of the stores a stg_qsr_pos partition read and the registry lacks (a
    copy that kept the folder's time hides a file from the sensor)."""
    engine = engine or luigi_engine()
    store = engine.store(StgQsrPos(date=settings.daybreak().start_date))
    registry = read_registry()
    first: dict[str, dt.date] = {}
    for day in sorted(store.listed_dates()):
        stats = (engine.summary(store, day) or {}).get("stats") or {}
        for s in stats.get("store_versions") or {}:
            if s not in registry and is_store_file(f"{s}.csv"):
                first.setdefault(s, day)
    out = {}
    for s, day in first.items():
        paths = parse_inputs((engine.manifest(store, day) or {}).get("inputs", []))
        out[s] = min((p.split("/")[-2] for p in paths if file_stem(p) == s), default=day.isoformat())
    return out


def listed_stores(engine: Engine) -> set[str]:
    """The stores with a file in the qsr_pos folders ``engine``'s pass has listed, whatever the folders'
    times say (a file copied with its time kept: rsync -a, cp -p)."""
    start = settings.daybreak().start_date
    listed = engine.listed_files(SOURCE)
    return {n.removesuffix(".csv") for d, names in listed.items() if d >= start for n in names if is_store_file(n)}


def unregistered_stores(engine: Engine | None = None) -> list[str]:
    """The stores with a file in the qsr_pos folders, or read by a staging partition, not registered yet:
    what a plan counts as partitions to build."""
    if newest_raw_date(RawZone.from_uri(settings.raw_root()), SOURCE) is None:
        return []
    engine = engine or luigi_engine()
    for staging in _staging_read():
        engine.state(staging)
    found = sensed_stores() | listed_stores(engine)
    return sorted((found - set(read_registry())) | set(staged_stores(engine)))


class DiscoverStores(luigi.Task):
    """The sensor: registers every store with a file in the qsr_pos folders of [start, stop), with the
    first date seen; invalid names are reported, never read."""

    start = luigi.DateParameter(description="First folder date to scan (inclusive)")
    stop = luigi.DateParameter(description="Last folder date to scan (exclusive)")

    def zone(self) -> RawZone:
        return RawZone.from_uri(settings.raw_root())

    resources = property(lambda self: sftp_slot())

    def complete(self) -> bool:
        """Listed in this run, or nothing new since (a folder changed later is for the next run)."""
        if (run := this_run()) is not None and read_seen(self.zone()).get("run") == run:
            return True
        new, known, _ = unseen_folders(self.zone(), self.start, self.stop)
        return not new and {s for entry in known.values() for s in entry[1]} <= set(read_registry())

    def run(self) -> None:
        found, invalid = discover(self.zone(), self.start, self.stop)
        for name in invalid:
            logger.warning("%s: not a store file name (^[A-Z0-9][A-Z0-9_-]{0,31}.csv$); never read", name)
        new = set(found) - set(read_registry())
        register(found)
        logger.info("DiscoverStores: %d stores, %d new: %s", len(found), len(new), ", ".join(sorted(new)))


class StoreIdParameter(luigi.Parameter):
    """A store id of the contract's pattern; any other (``../../x``), or one typed of no known store, is a
    usage error (exit 2) before anything is checked or written."""

    def normalize(self, x):
        if not isinstance(x, str) or not is_store_file(f"{x}.csv"):
            fail(f"--store-id {x!r}: not a store id; a store id matches ^[A-Z0-9][A-Z0-9_-]{{0,31}}$ (e.g. S001)")
        return x

    def parse(self, x):
        """A value a user typed: also a known store's, not a typo's."""
        check_known(self.normalize(x))
        return x


class StoreDailySales(SnapshotTask, entry=catalogue.STORE_DAILY_SALES):
    """store_daily_sales: one row per business date for one store; stale when its slice of staging changed."""

    reads_a_slice = True

    store_id = StoreIdParameter(description="A store from the registry (data/_state/stores.json)")

    @classmethod
    def static_keys(cls) -> list[str]:
        return list(read_registry())

    def dataset_path(self) -> str:
        return f"{self.dataset}/store_id={self.store_id}"

    def upstream(self) -> list[PartitionedTask]:
        """Every staging date built, and every date whose raw folder is there but the newest and whose
        business day is over: a staging partition deleted or not built yet is rebuilt first."""
        return _staging_read()

    def upstream_version(self, manifest: dict | None) -> str | None:
        return (manifest or {}).get("stats", {}).get("store_versions", {}).get(self.store_id, "no files")

    def build(self, inputs: list[RawFile]) -> Built:
        """Incremental: the previous build's rows are kept for every date whose store version is unchanged;
        the other dates are read from the staging partitions' per-store totals."""
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
        """({staging task_id: store version}, rows) of the previous build if intact and of these rules."""
        store = self.store()
        manifest = store.read_manifest(None)
        if (
            not manifest
            or manifest.get("_corrupt")
            or manifest.get("verify_mismatch")  # daybreak verify found its file damaged: not read again
            or manifest.get("rules_fingerprint") != self.rules_fingerprint()
            or not store.data_matches(None, manifest)
        ):
            return {}, None
        return manifest.get("upstream", {}), store.read_table(None)

    def _read_date(self, staging: StgQsrPos):
        """(this store's row of one staging date, rows read): from its per-store totals, else its lines."""
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


def _staging_read() -> list[StgQsrPos]:
    start = settings.daybreak().start_date
    staging = StgQsrPos(date=start)
    dates = set(staging.store().listed_dates())
    engine = luigi_engine()
    dates.update(_folder_dates(engine, engine.zone(staging), start)[:-1])
    return [StgQsrPos(date=d) for d in sorted(dates) if not settings.not_over(d)]


def _staging_to_build() -> list[StgQsrPos]:
    """The staging dates a run rebuilds, whichever stores' rows they change: one may reveal a new store (one
    built by newer code or settings is kept as it is)."""
    engine = luigi_engine()
    return [t for t in _staging_read() if engine.state(t).state not in ("ok", "newer")]


def _folder_dates(engine, zone: RawZone, start: dt.date) -> list[dt.date]:
    """The dates of the qsr_pos folders from ``start`` to tomorrow, up to the newest that has arrived."""
    limit = settings.business_today() + dt.timedelta(days=1)
    dates = sorted(d for d in folder_dates(engine.source_listed(zone, SOURCE)[1]) if start <= d <= limit)
    while dates and not engine.arrived(zone, SOURCE, dates[-1]):
        dates.pop()
    return dates


class AllStores(luigi.Task):
    """Runs the sensor and builds one StoreDailySales per known store, as requirements (so exit codes are
    a range's); a store a staging rebuild in this run reveals is a dynamic dependency."""

    _of_run: tuple[list, list] | None = None  # (the run, its requirements)
    resources = property(lambda self: sftp_slot())

    def requires(self) -> list:
        """The same list whenever Luigi asks during one run, though the sensor registers stores meanwhile."""
        run = this_run()
        if run is not None and self._of_run is not None and self._of_run[0] == run:
            return self._of_run[1]
        stores = sorted({*read_registry(), *sensed_stores(), *staged_stores()})
        required = [sensor(), *(StoreDailySales(store_id=s) for s in stores), *_staging_to_build()]
        if not stores:  # the summary says so, not Luigi's own (a run with no partition has no other line)
            zone = required[0].zone()
            runlog.note(f"AllStores: no store known yet (no store's file under {zone.describe()}/{SOURCE})")
        if run is not None:
            self._of_run = (run, required)
        return required

    def complete(self) -> bool:
        engine = luigi_engine()
        first, *stores = self.requires()
        if not first.complete():
            return False
        states = [(t, up_to_date(t, engine)) for t in stores if isinstance(t, StoreDailySales)]
        runlog.watch(states)  # the summary counts them even when nothing runs
        return all(ok for _, ok in states) and not staged_stores() and not _staging_to_build()

    def run(self):
        sensing, *required = self.requires()
        stores = [t for t in required if isinstance(t, StoreDailySales)]
        sensing.run()  # again: a store whose first file landed while this run built the others
        register(staged_stores())
        required = {t.store_id for t in stores}
        later = sorted(set(read_registry()) - required)
        if later:
            yield [StoreDailySales(store_id=s) for s in later]
