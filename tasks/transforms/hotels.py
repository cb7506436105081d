"""otb_by_stay_date, hotel_booking_state and hotel_pickup (contract section 3). Pure: staged booking
events in, tables out."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# RAW_COLUMNS, HotelLimits and clean_booking_events are imported from here too (the sample, the tests)
from tasks.transforms.hotel_events import (  # noqa: F401
    EVENTS_SCHEMA,
    MONEY,
    RAW_COLUMNS,
    HotelLimits,
    clean_booking_events,
)

OTB_SCHEMA = pa.schema(
    [
        ("hotel_id", pa.string()),
        ("stay_date", pa.date32()),
        ("rooms_on_books", pa.int64()),
        ("room_revenue", MONEY),
        ("bookings", pa.int64()),
    ]
)
# each booking's latest event as of a date; event_business_date orders two states as their events, so
# merging states is associative
STATE_SCHEMA = EVENTS_SCHEMA.append(pa.field("event_business_date", pa.date32()))
PICKUP_SCHEMA = pa.schema([("stay_date", pa.date32()), ("rooms_picked_up", pa.int64()), ("revenue_picked_up", MONEY)])


def on_the_books(events: list[tuple[dt.date, pa.Table]]) -> pa.Table:
    """On the books per hotel and stay date, replayed from every booking event: the reference the
    state-based OtbByStayDate is tested against."""
    return _books(_stays(_live_bookings(events)))


def on_the_books_from_state(state: pa.Table) -> pa.Table:
    """:func:`on_the_books` from a hotel_booking_state partition, in memory the size of the state."""
    live = _not_cancelled(state)
    hotels = pc.unique(live["hotel_id"]).to_pylist()
    # one hotel's nights at a time: memory holds the state and one hotel's nights, not every night
    parts = [_books(_stays(live.filter(pc.equal(live["hotel_id"], h)))) for h in sorted(hotels)]
    return pa.concat_tables(parts) if parts else OTB_SCHEMA.empty_table()


def _books(stays: pa.Table) -> pa.Table:
    """Booked nights (:func:`_stays`) summed per hotel and stay date."""
    if stays.num_rows == 0:
        return OTB_SCHEMA.empty_table()
    grouped = stays.group_by(["hotel_id", "stay_date"], use_threads=False).aggregate(
        [("rooms", "sum"), ("revenue", "sum"), ("booking_id", "count_distinct")]
    )
    out = pa.table(
        {
            "hotel_id": grouped["hotel_id"],
            "stay_date": grouped["stay_date"],
            "rooms_on_books": grouped["rooms_sum"],
            "room_revenue": pc.cast(grouped["revenue_sum"], MONEY),
            "bookings": grouped["booking_id_count_distinct"],
        },
        schema=OTB_SCHEMA,
    )
    return out.sort_by([("hotel_id", "ascending"), ("stay_date", "ascending")])


def booking_state(previous: pa.Table | None, events: pa.Table, date: dt.date) -> pa.Table:
    """hotel_booking_state as of the end of ``date`` from ``previous`` and the events of ``date``; CANCELLED
    bookings stay, so a late event with an earlier event_at cannot resurrect one."""
    tables = [_as_state(events, date)]
    if previous is not None:
        tables.insert(0, previous.select(STATE_SCHEMA.names).cast(STATE_SCHEMA))
    return latest_per_booking(pa.concat_tables(tables))


def split_state(state: pa.Table, date: dt.date) -> tuple[pa.Table, pa.Table]:
    """A merged state split into (open, finished): finished, a CANCELLED or departed booking whose latest
    event is of an earlier business date (a hotel's clock may go back across midnight)."""
    ended = pc.or_(
        pc.equal(state["event"], "CANCELLED"),
        pc.less_equal(state["departure_date"], pa.scalar(date, pa.date32())),
    )
    finished = pc.and_(ended, pc.less(state["event_business_date"], pa.scalar(date, pa.date32())))
    return state.filter(pc.invert(finished)), state.filter(finished)


def reopened_keys(open_state: pa.Table, events: pa.Table) -> pa.Table:
    """The keys of bookings ``events`` touch, not in ``open_state``, whose first event of the day is
    MODIFIED or CANCELLED: those whose finished row is needed."""
    if events.num_rows == 0:
        return pa.table({"hotel_id": pa.array([], pa.string()), "booking_id": pa.array([], pa.string())})
    order = [("hotel_id", "ascending"), ("booking_id", "ascending"), ("event_at", "ascending")]
    order += [("source_file", "ascending"), ("row_number", "ascending")]
    ordered = events.take(pc.sort_indices(events, sort_keys=order))
    first = np.ones(ordered.num_rows, dtype=bool)
    if ordered.num_rows > 1:
        hotel, booking = ordered["hotel_id"].combine_chunks(), ordered["booking_id"].combine_chunks()
        differs = pc.or_(pc.not_equal(hotel[1:], hotel[:-1]), pc.not_equal(booking[1:], booking[:-1]))
        first[1:] = differs.to_numpy(zero_copy_only=False)
    firsts = ordered.filter(pa.array(first))
    firsts = firsts.filter(pc.not_equal(firsts["event"], "CREATED")).select(["hotel_id", "booking_id"])
    known = open_state.select(["hotel_id", "booking_id"]).append_column(
        "known", pa.repeat(pa.scalar(True), open_state.num_rows)
    )
    joined = firsts.join(known, ["hotel_id", "booking_id"], join_type="left outer", use_threads=False)
    return (
        joined.filter(pc.is_null(joined["known"]))
        .select(["hotel_id", "booking_id"])
        .sort_by([("hotel_id", "ascending"), ("booking_id", "ascending")])
    )


def pickup_from_state(before_state: pa.Table, events: pa.Table, date: dt.date) -> pa.Table:
    """One hotel's pickup on ``date``: per stay date, rooms and revenue on the books after the day's events
    minus before, from the hotel's state of the day before and its events of ``date``."""
    touched = events["booking_id"].combine_chunks()
    before = before_state.select(STATE_SCHEMA.names).cast(STATE_SCHEMA)
    before = before.filter(pc.is_in(before["booking_id"], touched))
    after = latest_per_booking(pa.concat_tables([before, _as_state(events, date)]))
    return _net_pickup(_not_cancelled(after), _not_cancelled(before))


def latest_per_booking(rows: pa.Table, keys: tuple[str, ...] = ("hotel_id", "booking_id")) -> pa.Table:
    """The latest row of each booking (``keys``): by event_at, then business date, source_file, row_number."""
    if rows.num_rows == 0:
        return STATE_SCHEMA.empty_table()
    order = [(k, "ascending") for k in keys] + [("event_at", "ascending"), ("event_business_date", "ascending")]
    order += [("source_file", "ascending"), ("row_number", "ascending")]
    ordered = rows.take(pc.sort_indices(rows, sort_keys=order))
    last = np.ones(ordered.num_rows, dtype=bool)  # the last row of each booking's run is its latest state
    if ordered.num_rows > 1:
        differs = np.zeros(ordered.num_rows - 1, dtype=bool)
        for k in keys:
            col = ordered[k].combine_chunks()
            differs |= pc.not_equal(col[:-1], col[1:]).to_numpy(zero_copy_only=False)
        last[:-1] = differs
    return ordered.filter(pa.array(last))


def _as_state(events: pa.Table, date: dt.date) -> pa.Table:
    """Staged events of ``date`` as state rows (their business date carried along)."""
    rows = events.select(EVENTS_SCHEMA.names).cast(EVENTS_SCHEMA)
    return rows.append_column("event_business_date", pa.repeat(pa.scalar(date, pa.date32()), rows.num_rows))


def _not_cancelled(state: pa.Table) -> pa.Table:
    return state.filter(pc.not_equal(state["event"], "CANCELLED"))


def _net_pickup(after: pa.Table, before: pa.Table) -> pa.Table:
    """Per stay date, nights of ``after`` minus nights of ``before`` (live bookings); zero rows dropped."""
    after, before = _stays(after), _stays(before)
    before = before.set_column(2, "rooms", pc.negate(before["rooms"])).set_column(
        3, "revenue", pc.negate(before["revenue"])
    )
    both = pa.concat_tables([after, before])
    if both.num_rows == 0:
        return PICKUP_SCHEMA.empty_table()
    grouped = both.group_by("stay_date", use_threads=False).aggregate([("rooms", "sum"), ("revenue", "sum")])
    out = pa.table(
        {
            "stay_date": grouped["stay_date"],
            "rooms_picked_up": grouped["rooms_sum"],
            "revenue_picked_up": pc.cast(grouped["revenue_sum"], MONEY),
        },
        schema=PICKUP_SCHEMA,
    )
    changed = pc.or_(
        pc.not_equal(out["rooms_picked_up"], 0), pc.not_equal(out["revenue_picked_up"], pa.scalar(0, MONEY))
    )
    return out.filter(changed).sort_by("stay_date")


def _live_bookings(events: list[tuple[dt.date, pa.Table]]) -> pa.Table:
    """Each booking's latest state, not cancelled; apart from :func:`latest_per_booking` on purpose, to check it."""
    tables = [t.append_column("business_date", pa.repeat(pa.scalar(d, pa.date32()), t.num_rows)) for d, t in events]
    if not tables or sum(t.num_rows for t in tables) == 0:
        return EVENTS_SCHEMA.append(pa.field("business_date", pa.date32())).empty_table()
    all_events = pa.concat_tables(tables)
    order = [("hotel_id", "ascending"), ("booking_id", "ascending"), ("event_at", "ascending")]
    order += [("business_date", "ascending"), ("source_file", "ascending"), ("row_number", "ascending")]
    ordered = all_events.take(pc.sort_indices(all_events, sort_keys=order))
    last = np.ones(ordered.num_rows, dtype=bool)  # the last row of each (hotel, booking) run is its latest state
    if ordered.num_rows > 1:
        hotel, booking = ordered["hotel_id"].combine_chunks(), ordered["booking_id"].combine_chunks()
        differs = pc.or_(pc.not_equal(hotel[:-1], hotel[1:]), pc.not_equal(booking[:-1], booking[1:]))
        last[:-1] = differs.to_numpy(zero_copy_only=False)  # a booking id two hotels both use: two bookings
    latest = ordered.filter(pa.array(last))
    return latest.filter(pc.not_equal(latest["event"], "CANCELLED"))


def _stays(bookings: pa.Table) -> pa.Table:
    """One row per booked night: hotel_id, stay_date, rooms, revenue (rooms x rate), booking_id."""
    arrival = bookings["arrival_date"].to_numpy().astype("datetime64[D]")
    departure = bookings["departure_date"].to_numpy().astype("datetime64[D]")
    nights = (departure - arrival).astype(np.int64)
    idx = np.repeat(np.arange(len(nights)), nights)
    offset = np.arange(len(idx)) - np.repeat(np.cumsum(nights) - nights, nights)
    rooms = bookings["rooms"].take(idx)
    return pa.table(
        {
            "hotel_id": bookings["hotel_id"].take(idx),
            "stay_date": pa.array(arrival[idx] + offset.astype("timedelta64[D]"), pa.date32()),
            "rooms": pc.cast(rooms, pa.int64()),
            "revenue": pc.cast(pc.multiply(pc.cast(rooms, pa.decimal128(10, 0)), bookings["rate"].take(idx)), MONEY),
            "booking_id": bookings["booking_id"].take(idx),
        }
    )


def hotel_rows(otb: pa.Table, hotel_id: str) -> pa.Table:
    """One hotel's rows of otb_by_stay_date, by stay date."""
    return otb.filter(pc.equal(otb["hotel_id"], hotel_id)).sort_by("stay_date")


def to_csv(table: pa.Table) -> bytes:
    """CSV with a header, ISO dates, decimals as written (what a revenue-management import expects)."""
    import pyarrow.csv as pcsv

    sink = pa.BufferOutputStream()
    pcsv.write_csv(table, sink, pcsv.WriteOptions(quoting_style="needed"))
    return sink.getvalue().to_pybytes()


def slice_digests(table: pa.Table, column: str) -> dict[str, str]:
    """sha256 of each value's rows (Arrow IPC bytes, in table order): the version of one hotel's slice."""
    import hashlib

    out = {}
    for value in sorted(pc.unique(table[column]).to_pylist()):
        rows = table.filter(pc.equal(table[column], value))
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, rows.schema) as writer:
            writer.write_table(rows)
        out[value] = hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()
    return out
