"""hotel_booking_state keeps open bookings only (finished ones move to each date's _finished.arrow):
hotel_pickup and otb_by_stay_date, built through Luigi, against a replay of the raw extracts written
here with pandas, independently of tasks/transforms/hotels.py (which the old, every-booking state
was checked against in tests/transforms/test_hotel_state.py)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.luigi

FIRST = dt.date(2026, 9, 10)
DAYS = 18
HEADER = "booking_id,hotel_id,event_at,event,arrival_date,departure_date,rooms,rate,channel"
OFFSET = {"H1": "-04:00", "H2": "-07:00"}  # America/Toronto, America/Vancouver in September


def d(k: int) -> dt.date:
    return FIRST + dt.timedelta(days=k)


def scripted() -> dict[tuple[int, str], list[tuple]]:
    """(day index, hotel) -> events (booking, event, arrival index, nights, rooms, rate), in time order.
    The cases a state without finished stays must still get right: a booking changed or cancelled
    after its stay ended (a no-show), one reopened to a later stay and finished a second time, a
    cancelled one brought back, one created and changed on the same day, one never created (an
    event of a booking from before start_date), and one booking id used by two hotels."""
    return {
        (0, "H1"): [
            ("A", "CREATED", 1, 2, 2, "100.00"),
            ("B", "CREATED", 2, 2, 1, "80.00"),
            ("C", "CREATED", 5, 1, 1, "60.00"),
        ],
        (0, "H2"): [("A", "CREATED", 2, 1, 4, "50.00")],
        (1, "H1"): [("N", "CREATED", 1, 1, 1, "90.00"), ("N", "MODIFIED", 1, 1, 3, "90.00")],
        (4, "H1"): [("Z", "MODIFIED", 6, 2, 1, "70.00")],  # never created: no state to replace
        (5, "H1"): [("A", "MODIFIED", 1, 2, 1, "100.00")],  # after the stay (ended on day 3): one room less
        (6, "H1"): [("B", "CANCELLED", 2, 2, 1, "80.00")],  # a no-show, cancelled after departure
        (6, "H2"): [("A", "MODIFIED", 2, 1, 1, "55.00")],  # H2's own A, after its stay
        (7, "H1"): [("A", "MODIFIED", 9, 2, 2, "120.00")],  # A reopened to a later stay
        (8, "H1"): [("C", "CANCELLED", 5, 1, 1, "60.00")],
        (9, "H1"): [("C", "MODIFIED", 10, 2, 1, "65.00")],  # brought back
        (12, "H1"): [("A", "MODIFIED", 9, 2, 3, "120.00")],  # finished a second time (day 11), changed again
        (15, "H1"): [("B", "MODIFIED", 16, 1, 2, "99.00")],  # the no-show rebooked
    }


def extracts() -> dict[tuple[int, str], list[str]]:
    """Every extract's rows: the scripted events, then random ones (new bookings; changes and
    cancellations of any booking seen before, finished or not), at increasing times of the day."""
    rng = np.random.default_rng(7)
    known: dict[str, list[str]] = {"H1": ["A", "B", "C", "N", "Z"], "H2": ["A"]}
    out = {}
    for k in range(DAYS):
        for hotel in ("H1", "H2"):
            events = list(scripted().get((k, hotel), []))
            for j in range(int(rng.integers(2, 6))):
                if rng.random() < 0.5:
                    booking = known[hotel][int(rng.integers(0, len(known[hotel])))]
                    event = "MODIFIED" if rng.random() < 0.7 else "CANCELLED"
                else:
                    booking, event = f"R{k}-{j}", "CREATED"
                    known[hotel].append(booking)
                arrival = k + int(rng.integers(-3, 5))
                rate = f"{int(rng.integers(40, 200))}.{int(rng.integers(0, 100)):02d}"
                events.append((booking, event, arrival, int(rng.integers(1, 4)), int(rng.integers(1, 4)), rate))
            rows = []
            for i, (booking, event, arrival, nights, rooms, rate) in enumerate(events):
                at = f"{d(k)}T{8 + i // 60:02d}:{i % 60:02d}:00{OFFSET[hotel]}"
                stay = f"{d(arrival)},{d(arrival + nights)}"
                rows.append(f"{booking},{hotel},{at},{event},{stay},{rooms},{rate},direct")
            out[(k, hotel)] = rows
    return out


def replay_events(raw) -> pd.DataFrame:
    """Every event of the raw zone, with its business date (folder), file and row number."""
    frames = []
    for path in sorted(raw.glob("hotel_bookings/*/*.csv")):
        df = pd.read_csv(path, dtype=str)
        df["business_date"] = dt.date.fromisoformat(path.parent.name)
        df["source_file"] = str(path.relative_to(raw))
        df["row_number"] = np.arange(2, len(df) + 2)
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    df["at"] = pd.to_datetime(df["event_at"], utc=True)
    df["cents"] = df["rate"].map(lambda r: int(Decimal(r) * 100))
    df["rooms"] = df["rooms"].astype(int)
    return df.sort_values(["hotel_id", "booking_id", "at", "business_date", "source_file", "row_number"])


def nights(latest: pd.DataFrame) -> pd.DataFrame:
    """One row per booked night of the live bookings among ``latest`` (one row per booking)."""
    rows = []
    for b in latest[latest["event"] != "CANCELLED"].itertuples():
        night = dt.date.fromisoformat(b.arrival_date)
        while night < dt.date.fromisoformat(b.departure_date):
            rows.append((b.hotel_id, b.booking_id, night, b.rooms, b.rooms * b.cents))
            night += dt.timedelta(days=1)
    return pd.DataFrame(rows, columns=["hotel_id", "booking_id", "stay_date", "rooms", "cents"])


def latest(events: pd.DataFrame) -> pd.DataFrame:
    return events.groupby(["hotel_id", "booking_id"], sort=False).tail(1)  # sorted by event time above


def money(cents: int) -> str:
    return str(Decimal(int(cents)).scaleb(-2))


def expected_pickup(events: pd.DataFrame) -> set[tuple]:
    out = set()
    for (day, hotel), today in events.groupby(["business_date", "hotel_id"]):
        mine = events[(events["hotel_id"] == hotel) & events["booking_id"].isin(today["booking_id"])]
        after = nights(latest(mine[mine["business_date"] <= day]))
        before = nights(latest(mine[mine["business_date"] < day]))
        before[["rooms", "cents"]] *= -1
        net = pd.concat([after, before]).groupby("stay_date")[["rooms", "cents"]].sum()
        for stay, r in net.iterrows():
            if r["rooms"] or r["cents"]:
                out.add((day, hotel, stay, int(r["rooms"]), money(r["cents"])))
    return out


def expected_books(events: pd.DataFrame) -> list[tuple]:
    stays = nights(latest(events))
    books = stays.groupby(["hotel_id", "stay_date"]).agg(
        rooms=("rooms", "sum"), cents=("cents", "sum"), bookings=("booking_id", "nunique")
    )
    return [(h, s, int(r.rooms), money(r.cents), int(r.bookings)) for (h, s), r in books.iterrows()]


def test_pickup_and_books_from_open_bookings_equal_a_replay_of_every_event(lab, setting):
    setting("daybreak", "start_date", FIRST)
    for (k, hotel), rows in extracts().items():
        path = lab.raw / "hotel_bookings" / d(k).isoformat() / f"{hotel}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join([HEADER, *rows]) + "\n")
    assert lab.luigi("AllHotelsPickup", "--start", str(FIRST), "--stop", str(d(DAYS))) == 0
    assert lab.luigi("OtbByStayDate") == 0
    events = replay_events(lab.raw)

    got = duckdb.execute(
        "select business_date, hotel_id, stay_date, rooms_picked_up, revenue_picked_up::varchar "
        f"from read_parquet('{lab.data}/marts/hotel_pickup/*/*/*.parquet', hive_partitioning = true)"
    ).fetchall()
    expected = expected_pickup(events)
    assert len(got) == len(set(got))
    assert set(got) == expected
    assert any(stay < day for day, _, stay, _, _ in expected)  # changes to stays already over are in it

    books = duckdb.execute(
        "select hotel_id, stay_date, rooms_on_books, room_revenue::varchar, bookings "
        f"from read_parquet('{lab.data}/marts/otb_by_stay_date/*.parquet') order by 1, 2"
    ).fetchall()
    assert books == expected_books(events)
    assert books[0][1] <= d(1)  # the past stay dates are reported too

    # the state itself: open bookings only; what finished on a date is in that date's _finished.arrow
    state = lab.data / "marts/hotel_booking_state"
    newest = d(DAYS - 1)
    open_rows = pq.read_table(state / f"business_date={newest}" / "data.parquet")
    ended = [r for r in open_rows.to_pylist() if r["event"] == "CANCELLED" or r["departure_date"] <= newest]
    assert all(r["event_business_date"] == newest for r in ended)  # only what was touched on that date
    assert open_rows.num_rows < len(latest(events))
    finished = sum(pa.ipc.open_file(pa.memory_map(str(p))).read_all().num_rows for p in state.glob("*/_finished.arrow"))
    assert finished >= len(latest(events)) - open_rows.num_rows
    manifest = json.loads((state / f"business_date={newest}" / "_manifest.json").read_text())
    assert "_finished.arrow" in [f["name"] for f in manifest["data_files"]]
