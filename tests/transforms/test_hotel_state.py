"""hotel_booking_state and the pickup computed from it, against the full-history pickup (the reference)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tasks.transforms.hotels import (
    EVENTS_SCHEMA,
    _live_bookings,
    _net_pickup,
    booking_state,
    latest_per_booking,
    pickup_from_state,
)

pytestmark = pytest.mark.unit

D = dt.date(2026, 9, 15)
UTC = dt.UTC


def events(day: dt.date, rows: list[tuple]) -> pa.Table:
    """Staged events of ``day`` from (hotel, booking, event, event_at, arrival, nights, rooms, rate)."""
    cols = {name: [] for name in EVENTS_SCHEMA.names}
    for i, (hotel, booking, event, at, arrival, nights, rooms, rate) in enumerate(rows):
        cols["hotel_id"].append(hotel)
        cols["booking_id"].append(booking)
        cols["event"].append(event)
        cols["event_at"].append(at)
        cols["arrival_date"].append(arrival)
        cols["departure_date"].append(arrival + dt.timedelta(days=nights))
        cols["rooms"].append(rooms)
        cols["rate"].append(Decimal(rate))
        cols["channel"].append("direct")
        cols["source_file"].append(f"hotel_bookings/{day}/{hotel}.csv")
        cols["row_number"].append(i + 2)
    return pa.table(cols, schema=EVENTS_SCHEMA)


def at(day: dt.date, hour: int) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(hour), tzinfo=UTC)


OCT1 = dt.date(2026, 10, 1)


def full_history_pickup(events: list[tuple[dt.date, pa.Table]], date: dt.date) -> pa.Table:
    """The reference pickup_from_state is checked against: one hotel's pickup on ``date`` from its staged
    events of every business date up to ``date`` (no booking state): the books after the day's events
    minus before them, for the bookings the day's events touched."""
    touched = pa.concat_arrays(
        [t["booking_id"].combine_chunks() for d, t in events if d == date] or [pa.array([], pa.string())]
    )
    mine = [(d, t.filter(pc.is_in(t["booking_id"], touched))) for d, t in events]
    before = _live_bookings([(d, t) for d, t in mine if d < date])
    after = _live_bookings(mine)
    return _net_pickup(after, before)


def test_the_state_keeps_cancelled_bookings_so_a_late_earlier_event_does_not_resurrect_one():
    d1, d2 = D, D + dt.timedelta(days=1)
    s1 = booking_state(None, events(d1, [("H1", "B1", "CREATED", at(d1, 10), OCT1, 2, 1, "100.00")]), d1)
    day2 = [
        ("H1", "B1", "CANCELLED", at(d2, 9), OCT1, 2, 1, "100.00"),
        ("H1", "B1", "MODIFIED", at(d1, 23), OCT1, 2, 5, "100.00"),  # late, and earlier than the cancellation
    ]
    s2 = booking_state(s1, events(d2, day2), d2)
    assert s2.select(["booking_id", "event", "event_business_date"]).to_pylist() == [
        {"booking_id": "B1", "event": "CANCELLED", "event_business_date": d2}
    ]
    # a later business date with the same event_at as a state row wins the tie (it was read later)
    s3 = booking_state(
        s2,
        events(d2 + dt.timedelta(days=1), [("H1", "B1", "MODIFIED", at(d2, 9), OCT1, 1, 3, "9.00")]),
        d2 + dt.timedelta(days=1),
    )
    assert s3["rooms"].to_pylist() == [3]
    # a late event whose event_at is earlier than the cancellation, arriving on a later day: still cancelled
    d4 = d2 + dt.timedelta(days=2)
    s4 = booking_state(s2, events(d4, [("H1", "B1", "MODIFIED", at(d2, 8), OCT1, 2, 7, "100.00")]), d4)
    assert s4["event"].to_pylist() == ["CANCELLED"]


def test_pickup_from_the_state_nets_a_modification_and_a_cancellation():
    d1, d2 = D, D + dt.timedelta(days=1)
    day1 = [
        ("H1", "B1", "CREATED", at(d1, 10), OCT1, 2, 1, "100.00"),
        ("H1", "B2", "CREATED", at(d1, 11), OCT1, 1, 2, "80.00"),
    ]
    state = booking_state(None, events(d1, day1), d1)
    day2 = [
        ("H1", "B1", "MODIFIED", at(d2, 9), OCT1, 2, 3, "100.00"),  # +2 rooms on 10-01 and 10-02
        ("H1", "B2", "CANCELLED", at(d2, 10), OCT1, 1, 2, "80.00"),  # -2 rooms on 10-01
        ("H1", "B3", "CREATED", at(d2, 11), OCT1 + dt.timedelta(days=5), 1, 1, "50.00"),
    ]
    got = pickup_from_state(state, events(d2, day2), d2).to_pylist()
    assert got == [  # 10-01: +2 rooms at 100 for B1, -2 rooms at 80 for B2: no rooms, 40.00 more revenue
        {"stay_date": dt.date(2026, 10, 1), "rooms_picked_up": 0, "revenue_picked_up": Decimal("40.00")},
        {"stay_date": dt.date(2026, 10, 2), "rooms_picked_up": 2, "revenue_picked_up": Decimal("200.00")},
        {"stay_date": dt.date(2026, 10, 6), "rooms_picked_up": 1, "revenue_picked_up": Decimal("50.00")},
    ]


def generated(seed: int, days: int, hotels=("H1", "H2")) -> list[tuple[dt.date, pa.Table]]:
    """Random events over ``days`` dates: CREATED, MODIFIED and CANCELLED on old and new bookings,
    several events of one booking in a day, late events (event_at days earlier than their business date,
    earlier than events already seen) and ties on event_at (coarse times), a booking id shared by hotels."""
    rng = np.random.default_rng(seed)
    out, known = [], {h: [] for h in hotels}
    for k in range(days):
        day = D + dt.timedelta(days=k)
        rows = []
        for hotel in hotels:
            for _ in range(int(rng.integers(0, 7))):
                if known[hotel] and rng.random() < 0.6:
                    booking = known[hotel][int(rng.integers(0, len(known[hotel])))]
                    event = ["MODIFIED", "CANCELLED", "CREATED"][int(rng.choice(3, p=[0.6, 0.3, 0.1]))]
                else:
                    booking = "SHARED" if rng.random() < 0.1 else f"{hotel}-{k}-{len(rows)}"
                    known[hotel].append(booking)
                    event = "CREATED"
                late = int(rng.integers(0, 3)) if rng.random() < 0.4 else 0
                when = at(day - dt.timedelta(days=late), int(rng.choice([0, 12])))
                arrival = OCT1 + dt.timedelta(days=int(rng.integers(0, 6)))
                rows.append(
                    (
                        hotel,
                        booking,
                        event,
                        when,
                        arrival,
                        int(rng.integers(1, 4)),
                        int(rng.integers(1, 4)),
                        f"{int(rng.integers(50, 200))}.{int(rng.integers(0, 100)):02d}",
                    )
                )
        order = rng.permutation(len(rows))  # file order is not event order
        table = events(day, [rows[i] for i in order])
        # one file name for every day, so ties across days go to the business date and not to the name;
        # rows not in row_number order, so ties within a file go to row_number and not to table order
        table = table.set_column(
            table.schema.get_field_index("source_file"),
            "source_file",
            pc.binary_join_element_wise(table["hotel_id"], pa.scalar(".csv"), ""),
        )
        out.append((day, table.take(rng.permutation(table.num_rows))))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_pickup_from_the_state_equals_the_full_history_pickup(seed):
    history = generated(seed, days=10)
    state = None
    for k, (day, day_events) in enumerate(history):
        for hotel in ("H1", "H2"):
            mine = [(d, t.filter(pc.equal(t["hotel_id"], hotel))) for d, t in history[: k + 1]]
            before = state if state is not None else booking_state(None, day_events.slice(0, 0), day)
            before = before.filter(pc.equal(before["hotel_id"], hotel))
            expected = full_history_pickup(mine, day)
            got = pickup_from_state(before, mine[-1][1], day)
            assert got.equals(expected), (seed, day, hotel)
        state = booking_state(state, day_events, day)
    # the chain equals one pass over every event (the merge is associative)
    everything = pa.concat_tables([booking_state(None, t, d) for d, t in history])
    assert latest_per_booking(everything).equals(state)


@pytest.mark.parametrize("seed", range(8))
def test_the_books_from_the_newest_state_equal_a_replay_of_every_event(seed):
    from tasks.transforms.hotels import on_the_books, on_the_books_from_state

    history = generated(seed, days=12, hotels=("H1", "H2", "H3"))
    state = None
    for k, (day, day_events) in enumerate(history):  # the chain, one day's events at a time
        state = booking_state(state, day_events, day)
        assert on_the_books_from_state(state).equals(on_the_books(history[: k + 1])), (seed, day)
    assert on_the_books_from_state(state).num_rows > 0


def test_the_open_state_sets_aside_finished_bookings_and_finds_the_ones_a_day_reopens():
    from tasks.transforms.hotels import reopened_keys, split_state

    d1, d2, d3 = D, D + dt.timedelta(days=1), D + dt.timedelta(days=2)
    day1 = [
        ("H1", "GONE", "CREATED", at(d1, 9), D - dt.timedelta(days=3), 2, 1, "10.00"),  # departed on D-1
        ("H1", "LEFT", "CREATED", at(d1, 9), D - dt.timedelta(days=1), 1, 1, "10.00"),  # departs on D
        ("H1", "STAY", "CREATED", at(d1, 9), D, 2, 1, "10.00"),  # in house
        ("H1", "OFF", "CANCELLED", at(d1, 9), OCT1, 2, 1, "10.00"),
    ]
    s1 = booking_state(None, events(d1, day1), d1)
    kept, finished = split_state(s1, d1)
    assert kept.num_rows == 4 and finished.num_rows == 0  # touched on d1: open one more day
    kept, finished = split_state(booking_state(kept, events(d2, []), d2), d2)
    assert sorted(kept["booking_id"].to_pylist()) == ["STAY"]
    assert sorted(finished["booking_id"].to_pylist()) == ["GONE", "LEFT", "OFF"]
    day3 = [
        ("H1", "GONE", "MODIFIED", at(d3, 9), D, 1, 1, "10.00"),  # a finished booking changed: looked up
        ("H1", "NEW", "CREATED", at(d3, 9), OCT1, 1, 1, "10.00"),  # new: not looked up
        ("H1", "NEW", "MODIFIED", at(d3, 10), OCT1, 1, 2, "10.00"),
        ("H1", "STAY", "MODIFIED", at(d3, 9), D, 3, 1, "10.00"),  # open: in the state already
        ("H2", "OFF", "CANCELLED", at(d3, 9), OCT1, 1, 1, "10.00"),  # another hotel's booking of that id
    ]
    assert reopened_keys(kept, events(d3, day3)).to_pylist() == [
        {"hotel_id": "H1", "booking_id": "GONE"},
        {"hotel_id": "H2", "booking_id": "OFF"},
    ]
