"""Hostile input through Luigi (issue 16, docs/reliability.md): rows that would poison a mart, bytes the
contract forbids, files that are not read. Every outcome is read back as a user would (DuckDB, pyarrow)."""

from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow.parquet as pq

FIRST = dt.date(2026, 9, 10)
HOTEL_HEADER = "booking_id,hotel_id,event_at,event,arrival_date,departure_date,rooms,rate,channel"


def hotel_extract(lab, day: dt.date, hotel: str, rows: list[str]) -> None:
    path = lab.raw / "hotel_bookings" / day.isoformat() / f"{hotel}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([HOTEL_HEADER, *rows]) + "\n")


def hotel_days(lab, days: int) -> None:
    """Extracts FIRST .. FIRST+days-1: one H1 booking a day (1 room, 100.00), one H2 (2 rooms, 50.00)."""
    for k in range(days):
        day = FIRST + dt.timedelta(days=k)
        hotel_extract(lab, day, "H1", [f"T{k},H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct"])
        hotel_extract(lab, day, "H2", [f"V{k},H2,{day}T23:30:00-07:00,CREATED,2026-10-02,2026-10-03,2,50.00,ota"])


def read(lab, glob: str, sql: str = "*") -> list[tuple]:
    return duckdb.execute(f"select {sql} from read_parquet('{lab.data}/{glob}', hive_partitioning=true)").fetchall()


POISON = {  # booking -> (its row on 09-11 at H1, the reason it is quarantined)
    "P1": ("2026-10-01,9999-12-31,1,100.00", "stay is longer than max_stay_nights (365 nights)"),
    "P2": ("2026-10-01,2026-10-02,999999999,999999999999999.99", "rooms is above max_rooms (1000)"),
    "P3": ("2026-10-01,2026-10-02,1,999999999999999.99", "rate is above max_rate (100000.00)"),
    "P4": ("2026-10-01,2027-10-02,1,100.00", "stay is longer than max_stay_nights (365 nights)"),  # 366 nights
}


def test_a_poisoned_booking_is_quarantined_and_blocks_no_hotel_mart(lab, setting):
    setting("daybreak", "start_date", FIRST)
    setting("hotels", "max_reject_share", 1.0)  # four bad rows of six: the share rule is not what is tested
    hotel_days(lab, 4)
    day = FIRST + dt.timedelta(days=1)
    poisoned = [f"{b},H1,{day}T13:00:00-04:00,CREATED,{values},direct" for b, (values, _) in POISON.items()]
    edge = f"E1,H1,{day}T14:00:00-04:00,CREATED,2026-10-01,2027-10-01,1000,100000.00,direct"  # every bound, exactly
    hotel_extract(lab, day, "H1", [f"T1,H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct"])
    with open(lab.raw / "hotel_bookings" / day.isoformat() / "H1.csv", "a") as fh:
        fh.write("\n".join([*poisoned, edge]) + "\n")
    stop = FIRST + dt.timedelta(days=4)
    assert lab.luigi("OtbByStayDate") == 0
    assert lab.luigi("AllHotelsPickup", "--start", str(FIRST), "--stop", str(stop)) == 0
    assert lab.luigi("HotelOtbExport", "--hotel", "H1") == 0

    quarantine = pq.read_table(
        lab.data / f"quarantine/staging/hotel_bookings_daily/business_date={day}/rejected.parquet"
    )
    got = {r["booking_id"]: (r["row_number"], r["reason"]) for r in quarantine.to_pylist()}
    assert got == {b: (3 + i, reason) for i, (b, (_, reason)) in enumerate(POISON.items())}
    staged = read(lab, "staging/hotel_bookings_daily/*/*.parquet", "booking_id")
    assert sorted(b for (b,) in staged) == sorted(["E1", *(f"T{k}" for k in range(4)), *(f"V{k}" for k in range(4))])
    # the edge booking is on the books for its 365 nights, at 1000 rooms x 100000.00 a night
    otb = read(lab, "marts/otb_by_stay_date/*.parquet", "stay_date, rooms_on_books, room_revenue::varchar")
    h1 = read(lab, "exports/otb/hotel_id=H1/data.parquet", "stay_date, rooms_on_books, room_revenue::varchar")
    assert len(h1) == 365 and h1[0] == (dt.date(2026, 10, 1), 1004, "100000400.00")
    assert h1[-1] == (dt.date(2027, 9, 30), 1000, "100000000.00")
    assert len(otb) == 366  # H1's 365 nights and H2's one
    picked = read(lab, "marts/hotel_pickup/*/*/*.parquet", "sum(rooms_picked_up), sum(revenue_picked_up)::varchar")
    assert picked == [(8 + 365 * 1000 + 8, "36500001200.00")]  # every day's pickup adds up to the books
