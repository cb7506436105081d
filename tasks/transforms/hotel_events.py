"""stg_hotel_bookings_daily (contract section 3): the booking events of one business date, checked.
Pure: parsed extracts in, tables out."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from tasks.transforms.checks import (
    MONEY,
    blank,
    count,
    file_rejects,
    first_failed,
    int_too_long,
    is_money,
    money_too_long,
    not_int_ge1,
    parse_dates,
    parse_instants,
    reject_schema,
)
from tasks.transforms.rawcsv import ParsedCsv, file_stem

RAW_COLUMNS = [
    "booking_id",
    "hotel_id",
    "event_at",
    "event",
    "arrival_date",
    "departure_date",
    "rooms",
    "rate",
    "channel",
]
EVENTS = ["CREATED", "MODIFIED", "CANCELLED"]
EVENTS_SCHEMA = pa.schema(
    [
        ("hotel_id", pa.string()),
        ("booking_id", pa.string()),
        ("event", pa.string()),
        ("event_at", pa.timestamp("s", tz="UTC")),
        ("arrival_date", pa.date32()),
        ("departure_date", pa.date32()),
        ("rooms", pa.int32()),
        ("rate", MONEY),
        ("channel", pa.string()),
        ("source_file", pa.string()),
        ("row_number", pa.int64()),
    ]
)
REJECT_SCHEMA = reject_schema(RAW_COLUMNS)


@dataclass(frozen=True)
class HotelLimits:
    """Bounds on a booking event ([hotels] settings): a row beyond one is rejected, so that no booking
    expands into millions of nights and no revenue sum overflows decimal(18,2)."""

    max_stay_nights: int = 365
    max_rooms: int = 1000
    max_rate: float = 100000.0

    # a booking-night at the bounds is a millionth of a decimal(18,2) sum's limit
    MAX_NIGHT_VALUE: ClassVar[float] = 1e10

    def __post_init__(self) -> None:
        problems = []
        if self.max_stay_nights < 1:
            problems.append(f"max_stay_nights must be >= 1 (is {self.max_stay_nights})")
        if not 1 <= self.max_rooms <= 999_999_999:
            problems.append(f"max_rooms must be 1 .. 999999999 (is {self.max_rooms})")
        if not 0 <= self.max_rate < 1e15:
            problems.append(f"max_rate must be >= 0 and below 10**15 (is {self.max_rate})")
        if self.max_rooms * self.max_rate > self.MAX_NIGHT_VALUE:
            problems.append(
                f"max_rooms x max_rate must be at most {self.MAX_NIGHT_VALUE:.0f} "
                f"(is {self.max_rooms} x {self.max_rate:.2f}), or revenue sums could overflow decimal(18,2)"
            )
        if problems:
            raise ValueError("[hotels] " + "; ".join(problems))

    def reasons(self) -> list[str]:
        """Reasons by check index (0: valid), worded with these bounds."""
        return [
            "",
            "booking_id is empty",
            "hotel_id does not match the file name",
            "event_at is not ISO 8601 with a UTC offset",
            "event_at is not on the folder's date at the hotel",
            "event is not CREATED, MODIFIED or CANCELLED",
            "arrival_date is not an ISO date",
            "departure_date is not an ISO date after arrival_date",
            f"stay is longer than max_stay_nights ({self.max_stay_nights} nights)",
            "rooms is not an integer >= 1",
            f"rooms is above max_rooms ({self.max_rooms})",
            "rate is not a decimal >= 0 (2 dp)",
            f"rate is above max_rate ({self.max_rate:.2f})",
            "channel is empty",
        ]


REASONS = HotelLimits().reasons()  # with the default bounds
MISFILED = REASONS.index("event_at is not on the folder's date at the hotel")  # its reason gives the local time


@dataclass(frozen=True)
class EventsResult:
    table: pa.Table  # EVENTS_SCHEMA
    rejected: pa.Table  # REJECT_SCHEMA
    rows_read: int
    file_rows: dict[str, int] = field(default_factory=dict)  # source_file -> its data rows (all the date's)


def clean_booking_events(
    files: list[tuple[ParsedCsv, str]], date: dt.date, limits: HotelLimits | None = None
) -> EventsResult:
    """Every valid booking event of business date ``date`` from (extract, hotel's timezone) pairs; one of
    another local date is rejected as misfiled, as is one beyond ``limits``."""
    limits = limits or HotelLimits()
    tables, rejects, file_rows = [], [], {}
    for parsed, timezone in files:
        rows, bad = _file_events(parsed, timezone, date, limits)
        tables.append(rows)
        rejects.append(bad)
        file_rows[parsed.source_file] = parsed.table.num_rows + len(parsed.malformed)
    table = pa.concat_tables(tables) if tables else EVENTS_SCHEMA.empty_table()
    rejected = pa.concat_tables(rejects) if rejects else REJECT_SCHEMA.empty_table()
    return EventsResult(table.combine_chunks(), rejected.combine_chunks(), sum(file_rows.values()), file_rows)


def _file_events(parsed: ParsedCsv, timezone: str, date: dt.date, limits: HotelLimits) -> tuple[pa.Table, pa.Table]:
    raw = parsed.table
    stem = file_stem(parsed.source_file)
    event_at = parse_instants(raw["event_at"])
    local_day = (
        pc.local_timestamp(event_at.cast(pa.timestamp("s", tz=timezone))).cast(pa.timestamp("s")).cast(pa.date32())
    )
    arrival = parse_dates(raw["arrival_date"])
    departure = parse_dates(raw["departure_date"])
    nights = pc.subtract(departure.cast(pa.int32()), arrival.cast(pa.int32()))
    rooms_ok, rate_ok = pc.invert(not_int_ge1(raw["rooms"])), is_money(raw["rate"])
    # a number of more digits than the type holds is above its bound, not "not a number"
    big_rooms = int_too_long(raw["rooms"], pc.invert(rooms_ok))
    big_rate = money_too_long(raw["rate"], pc.invert(rate_ok))
    # typed only where the type rule passed (the others are rejected by it first)
    rooms = pc.cast(pc.if_else(rooms_ok, raw["rooms"], "1"), pa.int64())
    rate = pc.cast(pc.if_else(rate_ok, raw["rate"], "0"), pa.float64())
    checks = [
        blank(raw["booking_id"]),
        pc.not_equal(raw["hotel_id"], stem),
        pc.is_null(event_at),
        pc.not_equal(local_day, pa.scalar(date, pa.date32())),
        pc.invert(pc.is_in(raw["event"], pa.array(EVENTS))),
        pc.is_null(arrival),
        pc.or_kleene(pc.is_null(departure), pc.less_equal(departure, arrival)),
        pc.greater(nights, limits.max_stay_nights),
        pc.and_not(pc.invert(rooms_ok), big_rooms),
        pc.or_(pc.greater(rooms, limits.max_rooms), big_rooms),
        pc.and_not(pc.invert(rate_ok), big_rate),
        pc.or_(pc.greater(rate, limits.max_rate), big_rate),
        blank(raw["channel"]),
    ]
    code = first_failed([pc.fill_null(c, True) for c in checks])
    valid = pc.equal(code, 0)
    misfiled = pc.equal(code, MISFILED)
    picked = raw.filter(valid)
    rows = pa.table(
        {
            "hotel_id": picked["hotel_id"],
            "booking_id": picked["booking_id"],
            "event": picked["event"],
            "event_at": pc.filter(event_at, valid),
            "arrival_date": pc.filter(arrival, valid),
            "departure_date": pc.filter(departure, valid),
            "rooms": pc.cast(picked["rooms"], pa.int32()),
            "rate": pc.cast(picked["rate"], MONEY),
            "channel": picked["channel"],
            "source_file": pa.repeat(pa.scalar(parsed.source_file, pa.string()), picked.num_rows),
            "row_number": pc.filter(parsed.row_numbers, valid),
        },
        schema=EVENTS_SCHEMA,
    )
    reasons = limits.reasons()
    # a misfiled event's reason gives its local time, as the date was taken from it
    detail = pc.if_else(misfiled, _misfiled(event_at, timezone, date), None) if count(misfiled) else None
    rejected = file_rejects(parsed, code, pc.invert(valid), reasons, REJECT_SCHEMA, detail=detail)
    return rows, rejected


def _misfiled(event_at: pa.Array, timezone: str, date: dt.date) -> pa.Array:
    """``event_at is 2026-11-04 23:30:00 at the hotel (America/Vancouver, -08:00), not 2026-11-05``."""
    local = event_at.cast(pa.timestamp("s", tz=timezone))
    return pc.strftime(local, f"event_at is %Y-%m-%d %H:%M:%S at the hotel ({timezone}, %Ez), not {date}")
