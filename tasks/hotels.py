"""Hotel tasks (contract section 3): booking events by business date, and on-the-books by stay date."""

from __future__ import annotations

import datetime as dt

import luigi

from tasks import catalogue, settings
from tasks.base import PartitionedTask, SnapshotTask, sftp_slot
from tasks.building import Built
from tasks.calendar import date_range, day_offset
from tasks.contract import is_store_file
from tasks.freshness import engine as freshness
from tasks.freshness.rules import OFFSETS
from tasks.guard import check_range, fail, flag, nearest
from tasks.hotel_chain import FINISHED, before_events, chain_versions, pa_concat, read_finished
from tasks.parameters import DateParameter
from tasks.reference import hotels, hotels_source
from tasks.storage.partitions import PartitionStore, open_store
from tasks.storage.rawzone import RawFile, RawZone
from tasks.targets import newest_raw_date

SOURCE = "hotel_bookings"


class UnknownHotelError(ValueError):
    """An extract whose hotel is not in config/hotels.csv: refused, never read."""


class HotelParameter(luigi.Parameter):
    """A hotel_id of config/hotels.csv; any other (``H9``, ``../x``) is a usage error (exit 2) when the
    task is made."""

    def normalize(self, x):
        known = hotels()
        if x not in known:
            listed = ", ".join(known)
            fail(f"{flag('hotel')} {x!r}: not a hotel of {hotels_source()}{nearest(str(x), known)} (hotels: {listed})")
        return x


class StgHotelBookingsDaily(PartitionedTask, entry=catalogue.STG_HOTEL_BOOKINGS_DAILY):
    """stg_hotel_bookings_daily: one row per booking event of business date ``date``, all hotels."""

    def raw_window(self) -> list[tuple[str, dt.date]]:
        return [(SOURCE, self.date)]

    input_names = "<hotel_id>.csv (hotel_id matching ^[A-Z0-9][A-Z0-9_-]{0,31}$)"

    def accepts_input(self, name: str) -> bool:
        return is_store_file(name)  # <id>.csv with a safe id; whether the hotel is known is checked on build

    def input_slice(self, relpath: str) -> str | None:
        from tasks.transforms.rawcsv import file_stem

        return file_stem(relpath)  # the contract: a row whose id is not its file's stem is rejected

    def hotels_read(self) -> list[str]:
        """The hotels of the date's extracts: only their settings can change this partition."""
        engine = freshness.process_engine()
        entries, _ = engine.raw_folder(engine.zone(self), SOURCE, self.date) or ([], [])
        return sorted(name.removesuffix(".csv") for name, _, _ in entries if self.accepts_input(name))

    def fails_on_listing(self) -> str:
        """The extracts of hotels not in the list, which fail the build (:meth:`build`)."""
        known = hotels()
        gone = [h for h in self.hotels_read() if h not in known]
        return "; ".join(
            f"raw file {SOURCE}/{self.date}/{h}.csv is of hotel {h}, not in {hotels_source()}" for h in gone
        )

    def rules(self) -> dict:
        known = hotels()  # a hotel not in config: None (its extract fails the partition until it is added)
        timezones = {h: known[h].timezone if h in known else None for h in self.hotels_read()}
        cfg = settings.hotels()
        return {
            "version": self.version,
            "timezones": timezones,
            OFFSETS: self._offsets(timezones),
            "max_stay_nights": cfg.max_stay_nights,
            "max_rooms": cfg.max_rooms,
            "max_rate": cfg.max_rate,
        }

    def settings_read(self) -> dict:
        """Its rules with every listed hotel's timezone, read or not: a hotel's zone changed back is a change."""
        return {**self.rules(), "timezones": {h: hotel.timezone for h, hotel in hotels().items()}}

    def _offsets(self, timezones: dict[str, str | None]) -> dict[str, dict[str, str]]:
        """Each zone's UTC offset on the date (``"0"``): new time-zone data that moves the day makes it stale."""
        return {z: {"0": day_offset(z, self.date)} for z in sorted({z for z in timezones.values() if z})}

    def rules_key(self) -> tuple:
        known = hotels()
        read = self.hotels_read()
        offsets = self._offsets({h: known[h].timezone if h in known else None for h in read})
        return (*super().rules_key(), *read, *(day["0"] for day in offsets.values()))

    def max_reject_share(self) -> float:
        return settings.hotels().max_reject_share

    def build(self, inputs: list[RawFile]) -> Built:
        from tasks.transforms.hotel_events import RAW_COLUMNS, HotelLimits, clean_booking_events
        from tasks.transforms.hotels import slice_digests
        from tasks.transforms.rawcsv import file_stem, parse_csv_many

        cfg = settings.hotels()
        limits = HotelLimits(cfg.max_stay_nights, cfg.max_rooms, cfg.max_rate)  # checked before any file is read
        known = hotels()
        unknown = [f.relpath for f in inputs if file_stem(f.relpath) not in known]
        if unknown:
            raise UnknownHotelError(
                f"{', '.join(unknown)}: hotel not in {hotels_source()}; the file was not read. "
                f"Add the hotel (id, name, timezone, rooms) to {hotels_source()} or remove the file."
            )
        zone = self.zone()
        # read as parsed, several in flight where a read is a request (a bucket, an SFTP server)
        read = zip(zone.read_inputs(inputs), (f.relpath for f in inputs), strict=True)
        parsed = parse_csv_many(read, RAW_COLUMNS)
        timezones = [known[file_stem(f.relpath)].timezone for f in inputs]
        result = clean_booking_events(list(zip(parsed, timezones, strict=True)), self.date, limits)
        stats = {"raw_files": len(inputs), "attributed_rows": result.rows_read}
        stats["hotel_versions"] = slice_digests(result.table, "hotel_id")  # what HotelPickup depends on
        return Built(result.table, result.rejected, stats, file_rows=result.file_rows)


class OtbByStayDate(SnapshotTask, entry=catalogue.OTB_BY_STAY_DATE):
    """otb_by_stay_date: one row per hotel and stay date with rooms, revenue and bookings on the books,
    from the newest hotel_booking_state and each date's finished bookings (docs/run-semantics.md)."""

    def dates(self) -> list[dt.date]:
        """``[daybreak] start_date`` .. the newest extract folder present, inclusive (start_date alone
        without one, so that the snapshot waits rather than reports empty books)."""
        start = settings.daybreak().start_date
        newest = newest_raw_date(RawZone.from_uri(settings.raw_root()), SOURCE)
        last = newest if newest is not None and newest > start else start
        return list(date_range(start, last + dt.timedelta(days=1)))

    def upstream(self) -> list[PartitionedTask]:
        dates = self.dates()
        return [*(StgHotelBookingsDaily(date=d) for d in dates), *[HotelBookingState(date=d) for d in dates[-1:]]]

    def upstream_version(self, manifest: dict | None) -> str | None:
        return _chain_version(manifest)

    def build(self, inputs: list[RawFile]) -> Built:
        from tasks.transforms.hotels import latest_per_booking, on_the_books_from_state, slice_digests

        (link,) = [u for u in self.upstream() if isinstance(u, HotelBookingState)]  # dates() is never empty
        store = link.store()
        # every booking's latest row: the newest state's open bookings and every finished row of the chain
        finished = [read_finished(store, d) for d in self.dates()]
        state = latest_per_booking(pa_concat([store.read_table(link.date), *finished]))
        table = on_the_books_from_state(state)
        stats = {"state_read": link.date.isoformat(), "bookings": state.num_rows}
        stats["hotel_versions"] = slice_digests(table, "hotel_id")  # what each hotel's HotelOtbExport depends on
        return Built(table, None, stats)


class _PerHotel:
    hotel = HotelParameter(description="hotel_id, one of the hotels list ([hotels] reference_file)")

    @classmethod
    def static_keys(cls) -> list[str]:
        return list(hotels())


class HotelOtbExport(_PerHotel, SnapshotTask, entry=catalogue.HOTEL_OTB_EXPORT):
    """exports/otb/hotel_id=H: one hotel's on-the-books, as ``data.parquet`` and ``otb.csv``; stale when the
    hotel's rows of on-the-books changed, not another hotel's."""

    reads_a_slice = True

    def dataset_path(self) -> str:
        return f"{self.dataset}/hotel_id={self.hotel}"

    def upstream(self) -> list[OtbByStayDate]:
        return [OtbByStayDate()]

    def upstream_version(self, manifest: dict | None) -> str | None:
        manifest = manifest or {}
        versions = manifest.get("stats", {}).get("hotel_versions")
        if versions is None:  # built before on-the-books recorded its hotels' versions: the whole version
            return manifest.get("data_version")
        return versions.get(self.hotel, "no rows")

    def build(self, inputs: list[RawFile]) -> Built:
        from tasks.transforms.hotels import hotel_rows, to_csv

        otb = OtbByStayDate().store().read_table(None)
        table = hotel_rows(otb, self.hotel)
        return Built(table, None, {"rows": table.num_rows}, extras={"otb.csv": to_csv(table)})


class HotelBookingState(PartitionedTask, entry=catalogue.HOTEL_BOOKING_STATE):
    """hotel_booking_state: each open booking's latest event at the end of ``date`` (finished ones in
    ``_finished.arrow``), a chain from state ``d-1`` and the events of ``d``."""

    def upstream(self) -> list[PartitionedTask]:
        return [*_state_before(self.date), StgHotelBookingsDaily(date=self.date)]

    def upstream_version(self, manifest: dict | None) -> str | None:
        return _chain_version(manifest)

    def build(self, inputs: list[RawFile]) -> Built:
        from tasks.transforms.hotels import booking_state, split_state
        from tasks.transforms.stores import to_ipc

        *chain, staging = self.upstream()
        events = staging.store().read_table(self.date)
        previous, previous_manifest = None, {}
        if chain:
            previous = before_events(chain[0], events)
            previous_manifest = chain[0].store().read_manifest(chain[0].date) or {}
        merged = booking_state(previous, events, self.date)
        table, finished = split_state(merged, self.date)
        stats = {"events": events.num_rows, "bookings": table.num_rows, "finished": finished.num_rows}
        stats.update(chain_versions(table, finished, previous_manifest.get("stats", {})))
        return Built(table, None, stats, extras={FINISHED: to_ipc(finished)})


def _state_before(day: dt.date) -> list[HotelBookingState]:
    """The booking state of the day before ``day``, none on ``[daybreak] start_date``."""
    previous = day - dt.timedelta(days=1)
    return [HotelBookingState(date=previous)] if previous >= settings.daybreak().start_date else []


def _chain_version(manifest: dict | None) -> str | None:
    """A hotel_booking_state manifest's chain version; any other manifest's data version."""
    manifest = manifest or {}
    return manifest.get("stats", {}).get("chain_version") or manifest.get("data_version")


class HotelPickup(_PerHotel, PartitionedTask, entry=catalogue.HOTEL_PICKUP):
    """hotel_pickup: for one hotel and booking date d, rooms and revenue picked up per stay date, from the
    hotel's slice of state d-1 and its events of d."""

    reads_a_slice = True

    def dataset_path(self) -> str:
        return f"{self.dataset}/*/hotel_id={self.hotel}"  # identity of this hotel's store (not a real path)

    def store(self) -> PartitionStore:
        return open_store(settings.data_uri(), self.dataset, subpartition=f"hotel_id={self.hotel}")

    def upstream(self) -> list[PartitionedTask]:
        return [*_state_before(self.date), StgHotelBookingsDaily(date=self.date)]

    def upstream_version(self, manifest: dict | None) -> str | None:
        return (manifest or {}).get("stats", {}).get("hotel_versions", {}).get(self.hotel, "no events")

    def build(self, inputs: list[RawFile]) -> Built:
        import pyarrow.compute as pc

        from tasks.transforms.hotels import STATE_SCHEMA, pickup_from_state

        *chain, staging = self.upstream()
        events = staging.store().read_table(self.date)
        events = events.filter(pc.equal(events["hotel_id"], self.hotel))
        state = before_events(chain[0], events, self.hotel) if chain else STATE_SCHEMA.empty_table()
        table = pickup_from_state(state, events, self.date)
        return Built(table, None, {"dates_read": 1 + len(chain)})


class AllHotelsPickup(luigi.WrapperTask):
    """Backfill HotelBookingState and every hotel's HotelPickup over [start, stop)."""

    start = DateParameter(flag="--start", description="First booking date, inclusive")
    stop = DateParameter(flag="--stop", description="Last booking date, exclusive")
    resources = property(lambda self: sftp_slot())

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        check_range(self.start, self.stop, type(self).__name__)

    def requires(self):
        from luigi.tools.range import RangeDaily

        # every date of the range (RangeDaily's default cap is 50 dates a run)
        limit = max((self.stop - self.start).days, 1)
        # the booking state through stop - 1 too, so the next day's pickups read one partition
        yield RangeDaily(of=HotelBookingState, start=self.start, stop=self.stop, task_limit=limit)
        for hotel in hotels():
            yield RangeDaily(
                of=HotelPickup, of_params={"hotel": hotel}, start=self.start, stop=self.stop, task_limit=limit
            )
