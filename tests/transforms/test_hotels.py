"""clean_booking_events and on_the_books on inline extracts, values worked out by hand."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from tasks.transforms.hotels import RAW_COLUMNS, HotelLimits, clean_booking_events, on_the_books
from tasks.transforms.rawcsv import parse_csv

pytestmark = pytest.mark.unit

D = dt.date(2026, 9, 15)
TORONTO, VANCOUVER = "America/Toronto", "America/Vancouver"


def extract(hotel: str, rows: list[str], folder: dt.date = D):
    text = "\n".join([",".join(RAW_COLUMNS), *rows]) + "\n"
    return parse_csv(text.encode(), f"hotel_bookings/{folder}/{hotel}.csv", RAW_COLUMNS)


def ev(
    booking: str,
    hotel: str,
    at: str,
    event: str = "CREATED",
    arr="2026-10-01",
    dep="2026-10-03",
    rooms="1",
    rate="100.00",
):
    return f"{booking},{hotel},{at},{event},{arr},{dep},{rooms},{rate},direct"


@pytest.mark.parametrize(
    ("hotel", "tz", "at", "misfiled"),
    [
        ("H1", TORONTO, "2026-09-15T23:59:59-04:00", None),
        ("H1", TORONTO, "2026-09-16T00:00:00-04:00", "2026-09-16 00:00:00 at the hotel (America/Toronto, -04:00)"),
        ("H1", TORONTO, "2026-09-15T00:00:00-04:00", None),
        ("H2", VANCOUVER, "2026-09-15T23:59:59-07:00", None),
        ("H2", VANCOUVER, "2026-09-16T06:59:59Z", None),  # 23:59:59 in Vancouver, already the 16th in UTC
        ("H2", VANCOUVER, "2026-09-16T07:00:00Z", "2026-09-16 00:00:00 at the hotel (America/Vancouver, -07:00)"),
        ("H1", TORONTO, "2026-09-16T03:59:59Z", None),  # 23:59:59 in Toronto
        ("H1", TORONTO, "2026-09-15T03:59:59Z", "2026-09-14 23:59:59 at the hotel (America/Toronto, -04:00)"),
    ],
)
def test_business_date_is_the_local_date_at_the_hotel(hotel, tz, at, misfiled):
    """A misfiled event's reason gives the local time, zone and offset its date was taken from (before: only
    "event_at is not on the folder's date at the hotel")."""
    result = clean_booking_events([(extract(hotel, [ev("B1", hotel, at)]), tz)], D)
    assert result.table.num_rows == (1 if misfiled is None else 0)
    if misfiled is not None:
        (reason,) = result.rejected["reason"].to_pylist()
        assert reason.startswith("event_at is ") and misfiled in reason and reason.endswith(f"not {D}"), reason


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (ev("B1", "H9", "2026-09-15T12:00:00-04:00"), "hotel_id does not match the file name"),
        (ev("B1", "H1", "2026-09-15T12:00:00-04:00", event="BOOKED"), "event is not CREATED, MODIFIED or CANCELLED"),
        (
            ev("B1", "H1", "2026-09-15T12:00:00-04:00", dep="2026-10-01"),
            "departure_date is not an ISO date after arrival_date",
        ),
        (ev("B1", "H1", "2026-09-15T12:00:00-04:00", rooms="0"), "rooms is not an integer >= 1"),
        (ev("", "H1", "2026-09-15T12:00:00-04:00"), "booking_id is empty"),
    ],
)
def test_bad_events_are_rejected_with_a_reason(row, reason):
    result = clean_booking_events([(extract("H1", [row]), TORONTO)], D)
    assert (result.table.num_rows, result.rejected["reason"].to_pylist()) == (0, [reason])


def events_of(day: dt.date, hotel: str, rows: list[str]):
    return day, clean_booking_events([(extract(hotel, rows, day), TORONTO)], day).table


def test_modified_then_cancelled_is_off_the_books_and_modified_carries_the_new_state():
    d1, d2 = D, D + dt.timedelta(days=1)
    otb = on_the_books(
        [
            events_of(
                d1,
                "H1",
                [
                    ev("B1", "H1", "2026-09-15T10:00:00-04:00"),  # 2 nights, 1 room at 100
                    ev(
                        "B2",
                        "H1",
                        "2026-09-15T11:00:00-04:00",
                        rooms="2",
                        rate="80.00",
                        arr="2026-10-02",
                        dep="2026-10-03",
                    ),
                ],
            ),
            events_of(
                d2,
                "H1",
                [
                    ev(
                        "B1",
                        "H1",
                        "2026-09-16T09:00:00-04:00",
                        "MODIFIED",
                        arr="2026-10-02",
                        dep="2026-10-04",
                        rate="120.00",
                    ),
                    ev("B2", "H1", "2026-09-16T10:00:00-04:00", "MODIFIED", rooms="3"),
                    ev("B2", "H1", "2026-09-16T12:00:00-04:00", "CANCELLED"),
                ],
            ),
        ]
    )
    assert otb.to_pylist() == [
        {
            "hotel_id": "H1",
            "stay_date": dt.date(2026, 10, 2),
            "rooms_on_books": 1,
            "room_revenue": Decimal("120.00"),
            "bookings": 1,
        },
        {
            "hotel_id": "H1",
            "stay_date": dt.date(2026, 10, 3),
            "rooms_on_books": 1,
            "room_revenue": Decimal("120.00"),
            "bookings": 1,
        },
    ]


def test_ties_on_event_at_go_to_the_later_row_read():
    at = "2026-09-15T10:00:00-04:00"
    rows = [ev("B1", "H1", at, rooms="1"), ev("B1", "H1", at, "MODIFIED", rooms="4")]
    otb = on_the_books([events_of(D, "H1", rows)])
    assert otb["rooms_on_books"].to_pylist() == [4, 4]  # two nights, the second row's state
    cancelled_last = on_the_books([events_of(D, "H1", [ev("B1", "H1", at), ev("B1", "H1", at, "CANCELLED")])])
    assert cancelled_last.num_rows == 0


def test_nothing_on_the_books():
    assert on_the_books([]).num_rows == 0


@pytest.mark.parametrize(
    ("arr", "dep", "rooms", "rate", "reason"),
    [
        ("2026-10-01", "9999-12-31", "1", "100.00", "stay is longer than max_stay_nights (365 nights)"),
        ("2026-10-01", "2027-10-02", "1", "100.00", "stay is longer than max_stay_nights (365 nights)"),  # 366
        ("2026-10-01", "2027-10-01", "1", "100.00", None),  # 365 nights: kept
        ("2026-10-01", "2026-10-02", "999999999", "999999999999999.99", "rooms is above max_rooms (1000)"),
        ("2026-10-01", "2026-10-02", "1001", "1.00", "rooms is above max_rooms (1000)"),
        ("2026-10-01", "2026-10-02", "1000", "100000.00", None),
        ("2026-10-01", "2026-10-02", "1", "100000.01", "rate is above max_rate (100000.00)"),
        ("2026-10-01", "2026-10-02", "1", "999999999999999.99", "rate is above max_rate (100000.00)"),
        ("2026-10-01", "2026-10-02", "5000000000", "1.00", "rooms is above max_rooms (1000)"),  # over int32
        ("2026-10-01", "2026-10-02", "1", "99999999999999999.99", "rate is above max_rate (100000.00)"),  # over 15
        ("2026-10-01", "2026-10-02", "1x", "1.00", "rooms is not an integer >= 1"),
    ],
)
def test_stays_rooms_and_rates_beyond_their_bounds_are_rejected(arr, dep, rooms, rate, reason):
    row = ev("B1", "H1", "2026-09-15T12:00:00-04:00", arr=arr, dep=dep, rooms=rooms, rate=rate)
    result = clean_booking_events([(extract("H1", [row]), TORONTO)], D)
    assert result.rejected["reason"].to_pylist() == ([reason] if reason else [])
    assert result.table.num_rows == (0 if reason else 1)
    on_the_books([(D, result.table)])  # whatever is staged, the books add up without an overflow


def test_bounds_are_settings_and_worded_with_their_values():
    limits = HotelLimits(max_stay_nights=2, max_rooms=5, max_rate=50.0)
    rows = [
        ev("B1", "H1", "2026-09-15T12:00:00-04:00", arr="2026-10-01", dep="2026-10-04"),
        ev("B2", "H1", "2026-09-15T12:00:00-04:00", rooms="6", rate="1"),
        ev("B3", "H1", "2026-09-15T12:00:00-04:00", rooms="5", rate="50.01"),
        ev("B4", "H1", "2026-09-15T12:00:00-04:00", arr="2026-10-01", dep="2026-10-03", rooms="5", rate="50"),
    ]
    result = clean_booking_events([(extract("H1", rows), TORONTO)], D, limits)
    assert result.rejected.select(["booking_id", "reason"]).to_pylist() == [
        {"booking_id": "B1", "reason": "stay is longer than max_stay_nights (2 nights)"},
        {"booking_id": "B2", "reason": "rooms is above max_rooms (5)"},
        {"booking_id": "B3", "reason": "rate is above max_rate (50.00)"},
    ]
    assert result.table["booking_id"].to_pylist() == ["B4"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_stay_nights": 0}, "max_stay_nights must be >= 1"),
        ({"max_rooms": 0}, "max_rooms must be 1 .. 999999999"),
        ({"max_rate": -1.0}, "max_rate must be >= 0"),
        ({"max_rooms": 100000, "max_rate": 1e6}, "max_rooms x max_rate must be at most 10000000000"),
    ],
)
def test_bounds_that_would_let_a_sum_overflow_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=r"\[hotels\] " + message):
        HotelLimits(**kwargs)


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (ev("B1", "H1", "2026-09-15T12:00:00-04:00", arr="2026-09-31"), "arrival_date is not an ISO date"),
        (
            # read as October 1st before: a valid two-night stay
            ev("B1", "H1", "2026-09-15T12:00:00-04:00", arr="2026-09-29", dep="2026-09-31"),
            "departure_date is not an ISO date after arrival_date",
        ),
        (ev("B1", "H1", "2026-09-15T24:00:00-04:00"), "event_at is not ISO 8601 with a UTC offset"),
        (ev("B1", "H1", "2026-09-15T12:00:00+24:00"), "event_at is not ISO 8601 with a UTC offset"),
    ],
)
def test_a_date_that_does_not_exist_is_rejected(row, reason):
    result = clean_booking_events([(extract("H1", [row]), TORONTO)], D)
    assert (result.table.num_rows, result.rejected["reason"].to_pylist()) == (0, [reason])
