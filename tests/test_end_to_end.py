"""The sample raw zone through RangeDaily, read back with DuckDB as a user would."""

from __future__ import annotations

import datetime as dt
import json

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import tasks
from tasks import sample
from tasks.base import MaterializedTask

pytestmark = pytest.mark.luigi

START = dt.date(2026, 10, 30)


def test_sample_backfill_across_the_dst_change(lab):
    sample.generate(lab.raw, START, 4, stores=4, seed=3, mean_lines_per_store=150)
    assert lab.range(START, START + dt.timedelta(days=4), "--workers", "2") == 0
    glob = f"{lab.data}/staging/qsr_pos/*/*.parquet"
    con = duckdb.connect()
    dupes = con.execute(
        f"select count(*) from (select business_date, store_id, order_id, line_no, count(*) n "
        f"from read_parquet('{glob}', hive_partitioning=true) group by all having n > 1)"
    ).fetchone()[0]
    assert dupes == 0  # key uniqueness
    # every row sits in the partition of its business date (local Toronto time minus 5 hours)
    wrong = con.execute(
        f"select count(*) from read_parquet('{glob}', hive_partitioning=true) "
        f"where cast(timezone('America/Toronto', ordered_at) - interval 5 hour as date) <> business_date"
    ).fetchone()[0]
    assert wrong == 0
    assert con.execute(f"select count(*) from read_parquet('{glob}') where status = 'VOIDED'").fetchone()[0] == 0
    # conservation: every raw row of the window (folders d and d+1) is staged, rejected, voided, a replaced
    # duplicate, or attributed to the other date, and the manifest says which, exactly
    duplicates = voided = rejected = 0
    for d in (START + dt.timedelta(days=i) for i in range(4)):
        m = json.loads((lab.partition(d) / "_manifest.json").read_text())
        s = m["stats"]
        folders = [f"'{lab.raw}/qsr_pos/{f}/*.csv'" for f in (d, d + dt.timedelta(days=1))]
        window = con.execute(f"select count(*) from read_csv([{', '.join(folders)}], all_varchar=true)").fetchone()[0]
        assert s["rows_read"] == window
        assert (
            m["row_count"] + m["rejected_count"] + s["voided_dropped"] + s["duplicates_of_date"]
            == (s["attributed_rows"])
        )
        assert s["attributed_rows"] + s["other_date_rows"] == window
        assert m["row_count"] > 0 and s["other_date_rows"] > 0
        duplicates, voided = duplicates + s["duplicates_of_date"], voided + s["voided_dropped"]
        rejected += m["rejected_count"]
    assert duplicates > 0 and voided > 0 and rejected > 0  # the sample's dirt reaches every term
    table = ds.dataset(
        lab.data / "staging/qsr_pos",
        partitioning=ds.partitioning(pa.schema([("business_date", pa.date32())]), flavor="hive"),
    ).to_table()
    assert sorted(set(table["business_date"].to_pylist())) == [START + dt.timedelta(days=i) for i in range(4)]
    # 2026-10-31 is a 25-hour business day: its lines span more than 24 hours of instants
    span = con.execute(
        f"select max(ordered_at) - min(ordered_at) from read_parquet('{glob}', hive_partitioning=true) "
        f"where business_date = DATE '2026-10-31'"
    ).fetchone()[0]
    assert span > dt.timedelta(hours=24)


def test_every_task_declares_its_contract_dataset_path():
    expected = {  # the contract's task families and dataset paths
        "StgQsrPos": "staging/qsr_pos",
        "StgHotelBookingsDaily": "staging/hotel_bookings_daily",
        "AdsDaily": "staging/ads_daily",
        "AdsRolling7d": "marts/ads_rolling_7d",
        "OtbByStayDate": "marts/otb_by_stay_date",
        "HotelOtbExport": "exports/otb",  # + /hotel_id=H
        "HotelPickup": "marts/hotel_pickup",  # business_date=D/hotel_id=H
        "HotelBookingState": "marts/hotel_booking_state",
        "StoreDailySales": "marts/store_daily_sales",  # + /store_id=S
    }
    families = {
        cls.__name__: cls.dataset
        for cls in _subclasses(MaterializedTask)
        if cls.__module__.startswith("tasks.") and cls.dataset
    }
    # the contract's datasets at the contract's paths; a dataset added beside them is welcome
    assert {name: families.get(name) for name in expected} == expected
    assert all(hasattr(tasks, name) for name in expected)


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out.extend([sub, *_subclasses(sub)])
    return out


def test_every_dated_dataset_reads_with_the_documented_pyarrow_recipe(lab, setting):
    """docs/raw-zone.md, "Outputs": ``ds.dataset(path, partitioning=...)`` over a dataset's folder reads its rows.
    A file beside data.parquet that pyarrow would take for data (no ``_`` or ``.`` prefix) breaks it."""
    setting("daybreak", "start_date", START)  # the state's chain starts there
    sample.generate(lab.raw, START, 3, stores=2, seed=3, mean_lines_per_store=20)
    days = [START + dt.timedelta(days=i) for i in range(2)]
    for family in ("StgQsrPos", "HotelBookingState", "AdsDaily"):
        assert lab.range(days[0], days[-1] + dt.timedelta(days=1), of=family) == 0, family
    partitioning = ds.partitioning(pa.schema([("business_date", pa.date32())]), flavor="hive")
    for path in ("staging/qsr_pos", "marts/hotel_booking_state", "staging/hotel_bookings_daily", "staging/ads_daily"):
        table = ds.dataset(lab.data / path, partitioning=partitioning).to_table()
        assert sorted(set(table["business_date"].to_pylist())) == days, path
