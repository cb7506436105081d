"""Stores discovered at run time: the sensor, its registry, and one partition per store."""

from __future__ import annotations

import datetime as dt
import json
import threading

import duckdb

from tasks import stores
from tests.conftest import qsr_rows

START = dt.date(2026, 9, 10)


def store_parts(lab) -> dict[str, str]:
    out = {}
    for p in (lab.data / "marts/store_daily_sales").glob("store_id=*/_manifest.json"):
        out[p.parent.name.split("=")[1]] = json.loads(p.read_text())["finished_at"]
    return out


def build_all(lab) -> int:
    assert lab.range(START, START + dt.timedelta(days=4)) == 0
    return lab.luigi("AllStores")


def test_a_new_store_is_registered_and_only_its_partition_is_built(lab, setting):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S002"))
    assert build_all(lab) == 0
    assert stores.read_registry() == {"S001": "2026-09-10", "S002": "2026-09-10"}
    before = store_parts(lab)
    assert set(before) == {"S001", "S002"}
    # S003 opens: its first file lands in folder 09-13
    new_day = START + dt.timedelta(days=3)
    lab.qsr_file(new_day.isoformat(), "S003", [r.replace("S001", "S003") for r in qsr_rows("S001", new_day)])
    assert build_all(lab) == 0
    after = store_parts(lab)
    assert stores.read_registry()["S003"] == "2026-09-13"
    assert {s for s in after if after[s] != before.get(s)} == {"S003"}  # existing stores untouched
    got = duckdb.execute(
        f"select business_date, orders from '{lab.data}/marts/store_daily_sales/store_id=S003/data.parquet' order by 1"
    ).fetchall()
    # folder 09-13 holds 2 lines after 05:00 (business date 09-13: orders B, C) and 2 before (09-12: order A)
    assert got == [(dt.date(2026, 9, 12), 1), (dt.date(2026, 9, 13), 2)]


def test_a_late_file_rebuilds_exactly_one_store(lab, setting):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S007", "S009"))
    assert build_all(lab) == 0
    before = store_parts(lab)
    late = START + dt.timedelta(days=2)
    path = lab.raw / "qsr_pos" / late.isoformat() / "S007.csv"
    path.write_text(path.read_text().replace(",COLA,3,", ",COLA,9,"))  # re-sent with corrected content
    assert build_all(lab) == 0
    after = store_parts(lab)
    assert {s for s in after if after[s] != before[s]} == {"S007"}


def test_invalid_names_are_never_registered_or_read(lab, setting):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 1, stores=("S001",))
    folder = lab.raw / "qsr_pos" / START.isoformat()
    (folder / "s002.csv").write_text("garbage")
    (folder / "..S003.csv").write_text("garbage")
    found, invalid = stores.scan_stores(stores.RawZone(lab.raw), START, START + dt.timedelta(days=2))
    assert set(found) == {"S001"}
    assert sorted(invalid) == ["qsr_pos/2026-09-10/..S003.csv", "qsr_pos/2026-09-10/s002.csv"]


def test_two_sensors_at_once_lose_no_entry(lab):
    barrier = threading.Barrier(8)

    def sensor(i: int) -> None:
        barrier.wait()
        for k in range(20):
            stores.register({f"S{i}{k:02d}": "2026-09-10"})

    threads = [threading.Thread(target=sensor, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(stores.read_registry()) == 8 * 20
    assert stores.register({"S000": "2026-09-01", "S100": "2026-09-01"})["S100"] == "2026-09-01"  # earliest wins
