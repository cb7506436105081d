"""Raw-zone retention through Luigi: a built partition whose raw folders are removed (an archive job) is kept as
built, and what reads it is still built from it when other dates change (docs/raw-zone.md, "Retention")."""

from __future__ import annotations

import datetime as dt
import json
import shutil

import duckdb
import pytest

from tasks.cli import main

pytestmark = pytest.mark.luigi

START = dt.date(2026, 9, 10)
DAY = dt.timedelta(days=1)
STORES = ("S001", "S002", "S003")


def archive(lab, source: str, *days: dt.date) -> None:
    """Move raw folders out of the raw zone, as a retention job does."""
    for day in days:
        shutil.move(lab.raw / source / day.isoformat(), lab.root / "archive" / source / day.isoformat())


def status_rows(capsys, dataset: str, start: dt.date, stop: dt.date) -> dict:
    """{date: (state, reason)} of ``daybreak status --json`` for one dataset."""
    capsys.readouterr()
    assert main(["status", "--dataset", dataset, "--start", str(start), "--stop", str(stop), "--json"]) == 0
    return {
        r["date"] and dt.date.fromisoformat(r["date"]): (r["state"], r["reason"])
        for r in json.loads(capsys.readouterr().out)
    }


def status_text(capsys, dataset: str, start: dt.date, stop: dt.date) -> str:
    capsys.readouterr()
    assert main(["status", "--dataset", dataset, "--start", str(start), "--stop", str(stop)]) == 0
    return capsys.readouterr().out


def mart_vs_staging(lab) -> list[tuple]:
    """(date, store, staging net, mart net) of every store and date where the mart disagrees with staging."""
    return duckdb.execute(
        f"""
        with s as (select business_date, store_id, sum(net_amount) net
                   from read_parquet('{lab.data}/staging/qsr_pos/*/*.parquet', hive_partitioning=true) group by all),
             m as (select business_date, store_id, net_sales net
                   from read_parquet('{lab.data}/marts/store_daily_sales/*/*.parquet', hive_partitioning=true))
        select s.business_date, s.store_id, s.net, m.net from s full join m using (business_date, store_id)
        where s.net is distinct from m.net order by 1, 2"""
    ).fetchall()


def s001_net(lab, day: dt.date):
    return duckdb.execute(
        f"select net_sales from '{lab.data}/marts/store_daily_sales/store_id=S001/data.parquet' "
        "where business_date = ?",
        [day],
    ).fetchall()[0][0]


def store_built_at(lab) -> dict[str, str]:
    return {
        p.parent.name.split("=")[1]: json.loads(p.read_text())["finished_at"]
        for p in (lab.data / "marts/store_daily_sales").glob("store_id=*/_manifest.json")
    }


def test_an_archived_pos_folder_keeps_its_staging_dates_and_the_stores_still_take_new_lines(lab, setting, capsys):
    """Folder 09-11 is archived (staging 09-10 and 09-11 read it), then S001's file of 09-14 gets a line: the two
    staging dates are kept as built and status says their folder is gone; AllStores rebuilds S001 from them and
    the new line, exits 0, and the mart agrees with staging (before: every store waited for 09-11, exit 20)."""
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 6, stores=STORES)  # folders 09-10 .. 09-16
    stop = START + 6 * DAY
    assert lab.range(START, stop) == 0 and lab.luigi("AllStores") == 0
    staging, stores, net = lab.built_at(), store_built_at(lab), s001_net(lab, START + 4 * DAY)
    archive(lab, "qsr_pos", START + DAY)
    late = lab.raw / "qsr_pos" / str(START + 4 * DAY) / "S001.csv"
    with late.open("a") as f:
        f.write(f"S001-late,1,S001,{START + 4 * DAY}T13:00:00-04:00,WRAP,2,8.00,,COMPLETED\n")
    assert lab.luigi("AllStores") == 0
    rebuilt = {d for d, t in lab.built_at().items() if staging[d] != t}
    assert rebuilt == {START + 3 * DAY, START + 4 * DAY}  # the two that read the changed file, not the kept ones
    assert {s for s, t in store_built_at(lab).items() if stores[s] != t} == {"S001"}
    assert mart_vs_staging(lab) == []
    assert s001_net(lab, START + 4 * DAY) == net + 16  # the new line: 2 x 8.00
    rows = status_rows(capsys, "stg_qsr_pos", START, stop)
    for day in (START, START + DAY):
        state, reason = rows[day]
        assert state == "ok" and f"qsr_pos/{START + DAY}" in reason and "kept as built" in reason, rows[day]
    assert f"{START} .. {START + DAY} ok, raw folder gone: qsr_pos/{START + DAY}" in status_text(
        capsys, "stg_qsr_pos", START, stop
    )
    assert status_rows(capsys, "store_daily_sales", START, stop) == {None: ("ok", "")}
    capsys.readouterr()
    assert main(["plan", "store_daily_sales", "--start", str(START), "--stop", str(stop)]) == 0, capsys.readouterr()
    built = lab.built_at()
    assert lab.luigi("AllStores") == 0 and lab.range(START, stop) == 0
    assert lab.built_at() == built  # nothing more to do
    # verify checks the data files and the raw files still there; the ones gone are no mismatch
    capsys.readouterr()
    assert main(["verify", "--start", str(START), "--stop", str(stop)]) == 0
    out = capsys.readouterr().out
    assert "0 mismatches" in out and "2 partition(s) read raw folders gone since" in out, out
    assert status_rows(capsys, "stg_qsr_pos", START, START + 2 * DAY)[START][0] == "ok"


def test_a_kept_partition_built_under_other_rules_stays_and_says_so(lab, setting, capsys):
    """A rule changes after the folder is archived: the other dates are rebuilt, the two that read it cannot be
    and are kept, named as built under other rules; the stores are rebuilt from all of them, exit 0."""
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=STORES)
    stop = START + 4 * DAY
    assert lab.range(START, stop) == 0 and lab.luigi("AllStores") == 0
    staging = lab.built_at()
    archive(lab, "qsr_pos", START + DAY)
    setting("qsr", "suspicious_qty_threshold", 2)
    assert lab.range(START, stop) == 0
    assert {d for d, t in lab.built_at().items() if staging[d] != t} == {START + 2 * DAY, START + 3 * DAY}
    assert lab.luigi("AllStores") == 0
    assert mart_vs_staging(lab) == []
    state, reason = status_rows(capsys, "stg_qsr_pos", START, stop)[START]
    assert state == "ok" and "built under other rules: suspicious_qty_threshold 20 -> 2" in reason, reason
    assert "2 built under other rules" in status_text(capsys, "stg_qsr_pos", START, stop)


def test_a_kept_partition_whose_data_file_is_gone_waits_for_its_raw_folder(lab, setting, capsys):
    """Kept as built needs the partition intact: with its data file deleted as well, no run can rebuild it, so it
    waits (exit 20) naming the folder, and so do the stores that read it."""
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 3, stores=STORES)
    stop = START + 3 * DAY
    assert lab.range(START, stop) == 0 and lab.luigi("AllStores") == 0
    archive(lab, "qsr_pos", START + DAY)
    (lab.partition(START) / "data.parquet").unlink()
    assert status_rows(capsys, "stg_qsr_pos", START, START + DAY) == {
        START: ("waiting", f"raw folder missing: qsr_pos/{START + DAY}")
    }
    assert lab.luigi("AllStores") == 20


def look_back_conversions(lab, day: dt.date) -> int:
    return duckdb.execute(
        f"select conversions_7d from read_parquet('{lab.data}/marts/ads_rolling_7d/*/*.parquet', "
        "hive_partitioning=true) where business_date = ? and campaign_id = 'C1'",
        [day],
    ).fetchall()[0][0]


def test_archived_ad_exports_keep_their_dates_and_the_look_back_takes_a_new_export(lab, setting, capsys):
    """Exports 09-11 .. 09-17 (every export of ad date 09-10) are archived: ads_daily 09-10 is kept as built; the
    dates that keep a newer export are rebuilt from it with the same rows, so no look-back changes; a new
    export then rebuilds its dates and the look-backs over them, whose windows hold the kept date (exit 0)."""
    setting("daybreak", "start_date", START)
    for k in range(1, 15):  # exports 09-11 .. 09-24
        lab.ads_export(START + k * DAY, START)
    stop = START + 14 * DAY
    assert lab.range(START, stop, of="AdsRolling7d") == 0
    before = {ds: lab.built_at(ds) for ds in ("staging/ads_daily", "marts/ads_rolling_7d")}
    daily_rows = lab.built_at("staging/ads_daily")
    assert look_back_conversions(lab, START + 13 * DAY) == sum(range(1, 8))  # each date from its newest export
    archive(lab, "ads", *(START + k * DAY for k in range(1, 8)))
    lab.ads_export(START + 15 * DAY, START)  # 09-25 restates 09-18 .. 09-24
    assert lab.range(START, stop, of="AdsRolling7d") == 0
    daily = {d for d, t in lab.built_at("staging/ads_daily").items() if before["staging/ads_daily"][d] != t}
    assert START not in daily and START + 8 * DAY in daily  # kept; a date of the new export rebuilt
    rolled = {d for d, t in lab.built_at("marts/ads_rolling_7d").items() if before["marts/ads_rolling_7d"][d] != t}
    assert rolled == {START + k * DAY for k in range(8, 14)}  # the windows over the new export's dates only
    assert set(daily_rows) == set(lab.built_at("staging/ads_daily"))
    state, reason = status_rows(capsys, "ads_daily", START, START + DAY)[START]
    assert state == "ok" and f"ads/{START + DAY}" in reason and f"ads/{START + 7 * DAY}" in reason, reason
    assert {s for s, _ in status_rows(capsys, "ads_rolling_7d", START, stop).values()} <= {"ok", "provisional"}
    # window 09-17 .. 09-23: 09-17 from export 09-24 (7 conversions), 09-18 .. 09-23 from 09-25 (7 .. 2)
    assert look_back_conversions(lab, START + 13 * DAY) == 7 + sum(range(2, 8))


def test_an_archived_hotel_extract_keeps_its_staging_date_and_the_books_take_a_resent_extract(lab, setting, capsys):
    """Extract folder 09-10 (start_date) is archived and H1's extract of 09-12 re-sent with a cancellation: staging
    09-10 is kept, the chain and the books are rebuilt from it and the new extract (before: exit 20)."""
    import pyarrow.parquet as pq

    from tasks.transforms.hotels import on_the_books
    from tests.conftest import HOTEL_HEADER

    setting("daybreak", "start_date", START)
    lab.hotel_days(START, 4)  # extracts 09-10 .. 09-13
    stop = START + 4 * DAY
    assert lab.luigi("OtbByStayDate") == 0
    assert lab.luigi("AllHotelsPickup", "--start", str(START), "--stop", str(stop)) == 0
    staging = lab.built_at("staging/hotel_bookings_daily")
    archive(lab, "hotel_bookings", START)
    day = START + 2 * DAY
    path = lab.raw / "hotel_bookings" / day.isoformat() / "H1.csv"
    path.write_text(
        "\n".join(
            [
                HOTEL_HEADER,
                f"T2,H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct",
                f"T0,H1,{day}T13:00:00-04:00,CANCELLED,2026-10-01,2026-10-03,1,100.00,direct",
            ]
        )
        + "\n"
    )
    assert lab.luigi("OtbByStayDate") == 0
    assert lab.luigi("AllHotelsPickup", "--start", str(START), "--stop", str(stop)) == 0
    after = lab.built_at("staging/hotel_bookings_daily")
    assert {d for d in after if after[d] != staging[d]} == {day}
    files = sorted((lab.data / "staging/hotel_bookings_daily").glob("business_date=*/data.parquet"))
    replay = on_the_books([(dt.date.fromisoformat(p.parent.name[-10:]), pq.read_table(p)) for p in files])
    assert pq.read_table(lab.data / "marts/otb_by_stay_date/data.parquet").equals(replay)
    state, reason = status_rows(capsys, "stg_hotel_bookings_daily", START, START + DAY)[START]
    assert state == "ok" and f"hotel_bookings/{START}" in reason, reason
    for name in ("hotel_booking_state", "hotel_pickup"):
        assert {s for s, _ in status_rows(capsys, name, START, stop).values()} == {"ok"}, name
    assert status_rows(capsys, "otb_by_stay_date", START, stop) == {None: ("ok", "")}
