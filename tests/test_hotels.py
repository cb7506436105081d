"""Hotel staging and on-the-books through Luigi on a temporary raw zone."""

from __future__ import annotations

import datetime as dt
import json
import shutil

import duckdb
import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.luigi

FIRST = dt.date(2026, 9, 10)
DAY = dt.timedelta(days=1)
STATE = "marts/hotel_booking_state"
HEADER = "booking_id,hotel_id,event_at,event,arrival_date,departure_date,rooms,rate,channel"


def write(lab, day: dt.date, hotel: str, rows: list[str]):
    path = lab.raw / "hotel_bookings" / day.isoformat() / f"{hotel}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return path


def extracts(lab) -> None:
    for k in range(4):  # extracts 09-10 .. 09-13; H1 Toronto, H2 Vancouver
        day = FIRST + dt.timedelta(days=k)
        write(lab, day, "H1", [f"T{k},H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct"])
        write(lab, day, "H2", [f"V{k},H2,{day}T23:30:00-07:00,CREATED,2026-10-02,2026-10-03,2,50.00,ota"])


@pytest.fixture
def hotel_lab(lab, setting):
    setting("daybreak", "start_date", FIRST)
    extracts(lab)
    return lab


def build_pickups(lab) -> None:
    extracts(lab)
    assert lab.luigi("AllHotelsPickup", "--start", str(FIRST), "--stop", str(FIRST + 4 * DAY)) == 0


@pytest.fixture
def pickups_built(hotel_lab, built_once):
    """hotel_lab with every hotel's pickups built 09-10 .. 09-13 (and the chain they read), by a run before the test."""
    return built_once(hotel_lab, "pickups", build_pickups)


def otb(lab) -> list[tuple]:
    return duckdb.execute(
        f"select hotel_id, stay_date, rooms_on_books, room_revenue::varchar, bookings "
        f"from read_parquet('{lab.data}/marts/otb_by_stay_date/*.parquet') order by 1, 2"
    ).fetchall()


def summed_pickups(lab) -> list[tuple]:
    """(hotel, stay date, rooms, revenue) of every pickup summed over its booking dates, as DuckDB reads them: on
    the books, if every day's pickup adds up."""
    glob = f"{lab.data}/marts/hotel_pickup/*/*/*.parquet"
    return duckdb.execute(
        f"select hotel_id, stay_date, sum(rooms_picked_up), sum(revenue_picked_up)::varchar from "
        f"read_parquet('{glob}', hive_partitioning=true) group by all order by 1, 2"
    ).fetchall()


def test_an_empty_newest_extract_folder_is_not_the_newest_on_the_books_is_built_through_the_last_one(hotel_lab):
    """The newest extract folder made before its files: on-the-books is built to the newest one that arrived
    (before: it waited for the empty one, exit 20)."""
    (hotel_lab.raw / "hotel_bookings" / (FIRST + 4 * DAY).isoformat()).mkdir()
    assert hotel_lab.luigi("OtbByStayDate") == 0
    assert otb(hotel_lab)


def test_the_summary_names_a_hotels_export_by_its_hotel(hotel_lab):
    """Before: ``HotelOtbExport: 1 not run``, which hotel's not said (a date's partitions name their date)."""
    from tasks.hotels import HotelOtbExport
    from tasks.reporting import runlog

    runlog.watch([(HotelOtbExport(hotel="H2"), False)])  # found to build, not built by this run
    _, text = runlog.report()
    assert "  HotelOtbExport H2: 1 " in text, text


def test_on_the_books_and_a_resent_old_extract(hotel_lab):
    assert hotel_lab.luigi("OtbByStayDate") == 0
    assert otb(hotel_lab) == [
        ("H1", dt.date(2026, 10, 1), 4, "400.00", 4),
        ("H1", dt.date(2026, 10, 2), 4, "400.00", 4),
        ("H2", dt.date(2026, 10, 2), 8, "400.00", 4),
    ]
    staging = "staging/hotel_bookings_daily"
    before, files = hotel_lab.built_at(staging), hotel_lab.files()
    assert hotel_lab.luigi("OtbByStayDate") == 0
    assert hotel_lab.files() == files  # nothing changed: nothing runs, nothing is written
    # the extract of 09-11 is re-sent: T1 is cancelled the same day
    day = FIRST + dt.timedelta(days=1)
    write(
        hotel_lab,
        day,
        "H1",
        [
            f"T1,H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct",
            f"T1,H1,{day}T13:00:00-04:00,CANCELLED,2026-10-01,2026-10-03,1,100.00,direct",
        ],
    )
    manifest = hotel_lab.data / "marts/otb_by_stay_date/_manifest.json"
    otb_mtime = manifest.stat().st_mtime_ns
    from tasks.views import status

    (snapshot,) = status.collect(FIRST, FIRST + dt.timedelta(days=4), ["otb_by_stay_date"])
    assert (snapshot.date, snapshot.state) == (None, "pending")  # rebuilt if the staging date's rows change
    assert f"upstream is rebuilt: staging/hotel_bookings_daily {day} (stale: input content changed" in snapshot.reason
    assert "otb_by_stay_date  (unpartitioned)  pending: may rebuild once" in status.render_text([snapshot])
    assert hotel_lab.luigi("OtbByStayDate") == 0
    assert [r.state for r in status.collect(FIRST, FIRST + dt.timedelta(days=4), ["otb_by_stay_date"])] == ["ok"]
    after = hotel_lab.built_at(staging)
    assert {d for d in after if after[d] != before.get(d)} == {day}  # only that staging date
    assert manifest.stat().st_mtime_ns != otb_mtime
    assert otb(hotel_lab)[:2] == [
        ("H1", dt.date(2026, 10, 1), 3, "300.00", 3),
        ("H1", dt.date(2026, 10, 2), 3, "300.00", 3),
    ]


def test_the_books_after_a_new_extract_date_name_the_partitions_of_that_date(hotel_lab):
    """The morning's extracts land: the books read that date's staging and state in place of the day before's,
    and status names them, not only that an upstream partition is read no more."""
    from tasks.views import status

    assert hotel_lab.luigi("OtbByStayDate") == 0
    new = FIRST + 4 * DAY
    write(hotel_lab, new, "H1", [])
    write(hotel_lab, new, "H2", [])
    (books,) = status.collect(FIRST, new + DAY, ["otb_by_stay_date"])
    assert books.state == "stale", books
    assert f"staging/hotel_bookings_daily {new}" in books.reason and f"{STATE} {new}" in books.reason, books.reason
    assert hotel_lab.luigi("OtbByStayDate") == 0
    assert [r.state for r in status.collect(FIRST, new + DAY, ["otb_by_stay_date"])] == ["ok"]


def test_a_missing_date_inside_the_range_blocks_on_the_books(hotel_lab):
    shutil.rmtree(hotel_lab.raw / "hotel_bookings" / "2026-09-11")
    assert hotel_lab.luigi("OtbByStayDate") == 20  # missing data, never skipped silently
    assert not (hotel_lab.data / "marts/otb_by_stay_date").exists()


@pytest.mark.system
def test_no_extract_at_all_waits_for_the_start_date_folder_instead_of_empty_books(lab):
    """A raw zone without hotel_bookings/ (a wrong raw_root, the extracts not there yet): the range is
    start_date .. the newest extract, so it waits for start_date's folder; nothing is written."""
    lab.qsr_days(dt.date(2026, 9, 1), 1)  # other sources are there, the hotel extracts are not
    cfg = lab.root / "roots.cfg"
    cfg.write_text(f"[daybreak]\nraw_root = {lab.raw}\ndata_root = {lab.data}\n")  # start_date: 2026-09-01
    proc = lab.cli("OtbByStayDate", "--local-scheduler", env={"LUIGI_CONFIG_PATH": str(cfg)})
    assert proc.returncode == 20, proc.stderr[-3000:]
    assert f"waiting  for raw folder {lab.raw}/hotel_bookings/2026-09-01/ (not there yet): OtbByStayDate" in proc.stderr
    assert not (lab.data / "marts").exists()
    from tasks.views import status

    (row,) = status.collect(dt.date(2026, 9, 1), dt.date(2026, 9, 2), ["otb_by_stay_date"])
    assert (row.state, row.reason) == ("waiting", "upstream staging/hotel_bookings_daily 2026-09-01 waits for raw data")


def test_extracts_only_before_start_date_wait_for_the_start_date_folder(lab, setting):
    setting("daybreak", "start_date", FIRST)
    write(lab, FIRST - dt.timedelta(days=1), "H1", [])  # 09-09: before start_date, never read
    assert lab.luigi("OtbByStayDate") == 20
    assert not (lab.data / "marts/otb_by_stay_date").exists()
    write(lab, FIRST, "H1", [f"T0,H1,{FIRST}T12:00:00-04:00,CREATED,2026-10-01,2026-10-02,2,100.00,direct"])
    assert lab.luigi("OtbByStayDate") == 0
    assert otb(lab) == [("H1", dt.date(2026, 10, 1), 2, "200.00", 1)]


def test_a_file_or_a_link_named_like_a_later_date_does_not_stretch_the_range(hotel_lab, tmp_path):
    """Only real folders are extract folders (audit item 5): a stray file ``hotel_bookings/2026-09-14``
    or a symbolic link ``2026-09-15`` to a folder elsewhere made OtbByStayDate wait for 09-14 .. 09-15."""
    (hotel_lab.raw / "hotel_bookings" / "2026-09-14").write_text("junk\n")
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(hotel_lab.raw / "hotel_bookings" / "2026-09-13", elsewhere)
    (hotel_lab.raw / "hotel_bookings" / "2026-09-15").symlink_to(elsewhere, target_is_directory=True)
    assert hotel_lab.luigi("OtbByStayDate") == 0
    manifest = json.loads((hotel_lab.data / "marts/otb_by_stay_date/_manifest.json").read_text())
    assert manifest["stats"]["state_read"] == "2026-09-13"  # extracts 09-10 .. 09-13, the real folders
    assert set(hotel_lab.built_at("staging/hotel_bookings_daily")) == {FIRST + dt.timedelta(days=k) for k in range(4)}


@pytest.mark.system
def test_an_unknown_hotel_file_is_refused_naming_it(hotel_lab):
    write(hotel_lab, FIRST, "H9", ["this is not even a valid row"])
    cfg = hotel_lab.write_cfg(hotel_lab.root / "luigi.cfg")
    text = cfg.read_text().replace("start_date = 2026-09-01", f"start_date = {FIRST}")
    cfg.write_text(text)
    proc = hotel_lab.cli(
        "StgHotelBookingsDaily", "--date", str(FIRST), "--local-scheduler", env={"LUIGI_CONFIG_PATH": str(cfg)}
    )
    assert proc.returncode == 30
    listed = REPO / "config" / "hotels.csv"  # no config/ beside the luigi.cfg read: the package's list
    assert f"hotel_bookings/2026-09-10/H9.csv: hotel not in {listed}; the file was not read" in proc.stderr


def test_a_hotel_export_as_parquet_and_csv_follows_on_the_books(hotel_lab):
    import csv

    assert hotel_lab.luigi("HotelOtbExport", "--hotel", "H2") == 0
    folder = hotel_lab.data / "exports/otb/hotel_id=H2"
    rows = list(csv.DictReader((folder / "otb.csv").open()))
    assert rows == [
        {"hotel_id": "H2", "stay_date": "2026-10-02", "rooms_on_books": "8", "room_revenue": "400.00", "bookings": "4"}
    ]
    parquet = duckdb.execute(f"select stay_date, rooms_on_books from '{folder}/data.parquet'").fetchall()
    assert parquet == [(dt.date(2026, 10, 2), 8)]
    day = FIRST + dt.timedelta(days=2)  # V2 is modified: 3 rooms instead of 2
    write(
        hotel_lab,
        day,
        "H2",
        [
            f"V2,H2,{day}T23:30:00-07:00,CREATED,2026-10-02,2026-10-03,2,50.00,ota",
            f"V2,H2,{day}T23:40:00-07:00,MODIFIED,2026-10-02,2026-10-03,3,50.00,ota",
        ],
    )
    assert hotel_lab.luigi("HotelOtbExport", "--hotel", "H2") == 0
    assert list(csv.DictReader((folder / "otb.csv").open()))[0]["rooms_on_books"] == "9"


def test_one_hotels_resent_extract_rebuilds_that_hotels_export_only(hotel_lab, capsys):
    """An export reads its own hotel's rows of on-the-books: H1's re-sent extract changes H1's rows only, so
    H2's export is up to date (before: every hotel's export ran and rewrote its manifest)."""
    from tasks.cli import main

    for hotel in ("H1", "H2"):
        assert hotel_lab.luigi("HotelOtbExport", "--hotel", hotel) == 0
    exports = hotel_lab.data / "exports/otb"
    before = {h: (exports / f"hotel_id={h}/_manifest.json").read_text() for h in ("H1", "H2")}
    day = FIRST + DAY  # H1's extract of 09-11 re-sent with one more booking
    write(
        hotel_lab,
        day,
        "H1",
        [
            f"T1,H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct",
            f"T8,H1,{day}T13:00:00-04:00,CREATED,2026-10-04,2026-10-05,1,90.00,direct",
        ],
    )
    assert hotel_lab.luigi("OtbByStayDate") == 0
    capsys.readouterr()
    assert main(["status", "--dataset", "hotel_otb_export"]) == 0
    shown = capsys.readouterr().out
    stale = shown.split("stale: hotel ", 1)[1].split(":", 1)[0]  # the hotels named stale
    assert stale == "H1", shown
    for hotel in ("H1", "H2"):
        assert hotel_lab.luigi("HotelOtbExport", "--hotel", hotel) == 0
    after = {h: (exports / f"hotel_id={h}/_manifest.json").read_text() for h in ("H1", "H2")}
    assert after["H1"] != before["H1"] and after["H2"] == before["H2"]
    rows = duckdb.execute(f"select stay_date from '{exports}/hotel_id=H1/data.parquet' order by 1").fetchall()
    assert (dt.date(2026, 10, 4),) in rows


def test_once_the_staging_is_rebuilt_first_the_plan_of_the_exports_names_the_one_hotel_whose_rows_may_change(
    hotel_lab, capsys
):
    """H1's extract re-sent and its staging date rebuilt first: on-the-books may change for H1's rows only, so the
    plan of the exports says H1's may run, not H2's (H3 .. H5's were never built: they run)."""
    from tasks.cli import main

    for hotel in ("H1", "H2"):
        assert hotel_lab.luigi("HotelOtbExport", "--hotel", hotel) == 0
    day = FIRST + DAY
    write(hotel_lab, day, "H1", [f"T1,H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,120.00,direct"])
    newest = max(dt.date.fromisoformat(p.name) for p in (hotel_lab.raw / "hotel_bookings").iterdir())
    assert hotel_lab.range(FIRST, newest + DAY, of="StgHotelBookingsDaily") == 0
    capsys.readouterr()
    assert main(["plan", "hotel_otb_export"]) == 1
    plan = capsys.readouterr().out
    assert plan.splitlines()[0].startswith("hotel_otb_export: 3 partitions would run, 1 may run "), plan
    assert [line[:11] for line in plan.splitlines() if line.startswith("  may ")] == ["  may   H1:"], plan


@pytest.mark.parametrize("hotel", ["H9", "../../etc", "H1/../H2"])
def test_an_export_for_an_unknown_or_escaping_hotel_is_refused(hotel_lab, hotel):
    """Refused when the task is made (a usage error, exit 2: tests/test_usage_errors.py), so no path is
    ever made of the value."""
    import re

    from tasks.guard import UsageError
    from tasks.hotels import HotelOtbExport, HotelPickup

    refused = re.escape(f"--hotel {hotel!r}: not a hotel of {REPO / 'config' / 'hotels.csv'}")
    with pytest.raises(UsageError, match=refused):
        HotelOtbExport(hotel=hotel)
    with pytest.raises(UsageError, match=refused):
        HotelPickup(date=FIRST, hotel=hotel)


def pickups(lab) -> dict:
    """finished_at of every (business date, hotel) pickup partition."""
    import json

    out = {}
    for p in (lab.data / "marts/hotel_pickup").glob("business_date=*/hotel_id=*/_manifest.json"):
        key = (dt.date.fromisoformat(p.parent.parent.name.split("=")[1]), p.parent.name.split("=")[1])
        out[key] = json.loads(p.read_text())["finished_at"]
    return out


def test_pickup_adds_up_to_the_books_and_a_resent_extract_rebuilds_one_hotel(hotel_lab):
    day = FIRST + dt.timedelta(days=2)  # T1 (booked on 09-11) is modified on 09-12: 2 rooms from 1
    write(
        hotel_lab,
        day,
        "H1",
        [
            f"T2,H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct",
            f"T1,H1,{day}T14:00:00-04:00,MODIFIED,2026-10-01,2026-10-03,2,100.00,direct",
        ],
    )
    stop = FIRST + dt.timedelta(days=4)
    assert hotel_lab.luigi("AllHotelsPickup", "--start", str(FIRST), "--stop", str(stop)) == 0
    assert hotel_lab.luigi("OtbByStayDate") == 0
    summed = summed_pickups(hotel_lab)
    assert summed == [row[:4] for row in otb(hotel_lab)]  # every day's pickup adds up to the books
    glob = f"{hotel_lab.data}/marts/hotel_pickup/*/*/*.parquet"
    day_rows = duckdb.execute(
        f"select stay_date, rooms_picked_up, revenue_picked_up::varchar from read_parquet('{glob}', "
        f"hive_partitioning=true) where business_date = ? and hotel_id = 'H1' order by 1",
        [day],
    ).fetchall()
    assert day_rows == [(dt.date(2026, 10, 1), 2, "200.00"), (dt.date(2026, 10, 2), 2, "200.00")]  # T2 + 1 more for T1

    before, states = pickups(hotel_lab), hotel_lab.built_at(STATE)
    last = FIRST + dt.timedelta(days=3)  # the newest H2 extract is re-sent with one more booking
    write(
        hotel_lab,
        last,
        "H2",
        [
            f"V3,H2,{last}T23:30:00-07:00,CREATED,2026-10-02,2026-10-03,2,50.00,ota",
            f"V9,H2,{last}T23:50:00-07:00,CREATED,2026-10-05,2026-10-06,1,80.00,ota",
        ],
    )
    assert hotel_lab.luigi("AllHotelsPickup", "--start", str(FIRST), "--stop", str(stop)) == 0
    after = pickups(hotel_lab)
    assert {k for k in after if after[k] != before.get(k)} == {(last, "H2")}  # exactly one (date, hotel)
    assert {d for d, t in hotel_lab.built_at(STATE).items() if states.get(d) != t} == {last}  # and its state


def test_a_resent_old_extract_rebuilds_the_states_from_its_date_and_only_its_hotels_pickups(pickups_built):
    stop = FIRST + dt.timedelta(days=4)
    assert set(pickups_built.built_at(STATE)) == {FIRST + dt.timedelta(days=k) for k in range(4)}
    before, states = pickups(pickups_built), pickups_built.built_at(STATE)
    day = FIRST + dt.timedelta(days=1)  # H1's extract of 09-11 re-sent: T0 (booked 09-10) cancelled, one more booking
    write(
        pickups_built,
        day,
        "H1",
        [
            f"T1,H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct",
            f"T0,H1,{day}T13:00:00-04:00,CANCELLED,2026-10-01,2026-10-03,1,100.00,direct",
            f"T9,H1,{day}T14:00:00-04:00,CREATED,2026-10-05,2026-10-06,3,90.00,direct",
        ],
    )
    assert pickups_built.luigi("AllHotelsPickup", "--start", str(FIRST), "--stop", str(stop)) == 0
    after = pickups(pickups_built)
    rebuilt = {k for k in after if after[k] != before.get(k)}
    assert rebuilt == {(FIRST + dt.timedelta(days=k), "H1") for k in range(1, 4)}  # H2's slices did not change
    assert {d for d, t in pickups_built.built_at(STATE).items() if states.get(d) != t} == {
        FIRST + dt.timedelta(days=k) for k in range(1, 4)
    }
    assert pickups_built.luigi("OtbByStayDate") == 0
    glob = f"{pickups_built.data}/marts/hotel_pickup/*/*/*.parquet"
    summed = duckdb.execute(
        f"select hotel_id, stay_date, sum(rooms_picked_up), sum(revenue_picked_up)::varchar from "
        f"read_parquet('{glob}', hive_partitioning=true) group by all having sum(rooms_picked_up) <> 0 order by 1, 2"
    ).fetchall()
    assert summed == [row[:4] for row in otb(pickups_built)]
    assert ("H1", dt.date(2026, 10, 5), 3, "270.00", 1) in otb(pickups_built)
    day_rows = duckdb.execute(
        f"select stay_date, rooms_picked_up, revenue_picked_up::varchar from read_parquet('{glob}', "
        f"hive_partitioning=true) where business_date = ? and hotel_id = 'H1' order by 1",
        [day],
    ).fetchall()
    assert day_rows == [(dt.date(2026, 10, 5), 3, "270.00")]  # T1 booked and T0 cancelled on 10-01/02: net zero


def test_the_completeness_check_of_a_long_chain_does_not_recurse(hotel_lab, setting):
    import sys

    from tasks.hotels import HotelBookingState

    setting("daybreak", "start_date", FIRST - dt.timedelta(days=36))
    for k in range(1, 37):  # 40 dates of extracts in all
        day = FIRST - dt.timedelta(days=k)
        write(hotel_lab, day, "H1", [f"E{k},H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct"])
    last = FIRST + dt.timedelta(days=3)
    assert (
        hotel_lab.luigi(
            "RangeDaily",
            "--of",
            "HotelBookingState",
            "--start",
            str(FIRST - dt.timedelta(days=36)),
            "--stop",
            str(last + dt.timedelta(days=1)),
        )
        == 0
    )
    assert len(hotel_lab.built_at(STATE)) == 40
    depth = len(__import__("inspect").stack())
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + 60)  # far fewer frames than a recursive check of 40 dates needs
    try:
        assert HotelBookingState(date=last).complete()  # cold: a fresh cache, every date of the chain checked
        assert not HotelBookingState(date=FIRST + dt.timedelta(days=1000)).complete()  # not built
    finally:
        sys.setrecursionlimit(limit)
    manifest = hotel_lab.partition(FIRST - dt.timedelta(days=30), STATE) / "_manifest.json"
    manifest.write_text(manifest.read_text().replace('"rules_fingerprint": "', '"rules_fingerprint": "x'))
    assert not HotelBookingState(date=last).complete()  # an old link of the chain stale: every later one too


def test_an_extract_folder_made_before_its_files_has_not_arrived_its_date_waits(lab, setting, capsys):
    """Extract folder d made before its files are written: staging d waits (exit 20) and status says why,
    instead of being built without d's events; the books are as of the newest folder that has arrived. A
    day with no booking event is a file with its header only."""
    from tasks.cli import main

    setting("daybreak", "start_date", FIRST)
    lab.hotel_days(FIRST, 1)
    day = FIRST + DAY
    (lab.raw / "hotel_bookings" / str(day)).mkdir()
    assert lab.range(FIRST, day + DAY, of="StgHotelBookingsDaily") == 20
    assert set(lab.built_at("staging/hotel_bookings_daily")) == {FIRST}
    assert lab.luigi("OtbByStayDate") == 0  # as of the newest extract folder that has arrived
    assert (lab.data / "marts" / "otb_by_stay_date").exists()
    capsys.readouterr()
    args = ["--dataset", "stg_hotel_bookings_daily", "--start", str(FIRST), "--stop", str(day + DAY)]
    assert main(["status", *args]) == 0
    shown = capsys.readouterr().out
    why = "there, without any <hotel_id>.csv yet"
    assert f"{day} waiting: raw folder missing: hotel_bookings/{day} ({why})" in shown, shown
    for hotel in ("H1", "H2"):  # no booking event that day: each hotel's file holds the header only
        lab.hotel_extract(day, hotel, [])
    assert lab.range(FIRST, day + DAY, of="StgHotelBookingsDaily") == 0
    assert set(lab.built_at("staging/hotel_bookings_daily")) == {FIRST, day}


def test_a_folder_without_the_extract_of_a_listed_hotel_that_sent_before_waits_for_it(hotel_lab, capsys, caplog):
    """Extract folder d holds H1's file, not H2's (H2 is on the hotels list and sent every day before): staging d
    waits for it (exit 20), the run's summary, status and plan name the file, and the books are as of d-1. Before,
    the folder counted as arrived with any hotel's file: d was staged without H2 and the run said nothing. H3 .. H5,
    on the list but never sent, are awaited by no folder. Once H2's file lands, d is built."""
    from tasks import reference
    from tasks.cli import main

    day = FIRST + 4 * DAY
    write(hotel_lab, day, "H1", [f"T4,H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct"])
    listed = str(reference.hotels_source())
    assert hotel_lab.range(FIRST, day + DAY, of="StgHotelBookingsDaily") == 20
    assert day not in hotel_lab.built_at("staging/hotel_bookings_daily")
    summary = caplog.text[caplog.text.rindex("summary of this run") :]
    assert f"hotel_bookings/{day}/ (there, without H2.csv yet: hotel H2 of {listed}" in summary, summary
    assert hotel_lab.luigi("OtbByStayDate") == 0  # as of the newest folder that has arrived
    manifest = json.loads((hotel_lab.data / "marts/otb_by_stay_date/_manifest.json").read_text())
    assert manifest["stats"]["state_read"] == str(day - DAY)
    span = ["--start", str(FIRST), "--stop", str(day + DAY)]
    capsys.readouterr()
    assert main(["status", "--dataset", "stg_hotel_bookings_daily", *span]) == 0
    shown = capsys.readouterr().out
    waits = [line for line in shown.splitlines() if line.startswith(f"  {day} waiting: ")]
    assert len(waits) == 1 and f"hotel_bookings/{day} (there, without H2.csv yet" in waits[0], shown
    assert main(["plan", "stg_hotel_bookings_daily", *span]) == 20  # only waiting: as the run
    plan = capsys.readouterr().out
    assert any(line.startswith(f"  wait  {day}") and "without H2.csv" in line for line in plan.splitlines()), plan
    # by default too: status and plan run to the newest folder there, arrived or not (the late drop shows)
    assert main(["status", "--dataset", "stg_hotel_bookings_daily"]) == 0
    shown = capsys.readouterr().out
    assert any(line.startswith(f"  {day} waiting: ") and "without H2.csv" in line for line in shown.splitlines()), shown
    assert main(["plan", "stg_hotel_bookings_daily"]) == 20
    assert "without H2.csv" in capsys.readouterr().out
    write(hotel_lab, day, "H2", [])  # no booking event at H2 that day: its header only
    assert hotel_lab.range(FIRST, day + DAY, of="StgHotelBookingsDaily") == 0
    assert hotel_lab.luigi("OtbByStayDate") == 0
    manifest = json.loads((hotel_lab.data / "marts/otb_by_stay_date/_manifest.json").read_text())
    assert manifest["stats"]["state_read"] == str(day)


@pytest.mark.system  # 2,190 partitions written: a scale test, out of the fast tier
def test_the_completeness_check_walks_a_three_year_chain_at_the_default_recursion_limit(lab, setting):
    """State d reads state d-1: checking the newest of 3 years of built states walks all 1,095 links
    down to the first, deeper than Python lets a recursive check go (it fails with RecursionError)."""
    import json
    import os
    import sys

    from tasks.freshness.engine import Engine
    from tasks.freshness.inputs import input_line
    from tasks.hotels import HotelBookingState, StgHotelBookingsDaily

    setting("daybreak", "start_date", FIRST)
    days = [FIRST + dt.timedelta(days=k) for k in range(3 * 365)]
    for day in days:  # every extract holds no booking: every date's staging and state is the same empty table
        lab.hotel_extract(day, "H1", [])
    assert lab.range(days[0], days[2], of="HotelBookingState") == 0  # two links built for real
    # the other links: the second one's partitions under their own dates (same data, hard-linked, so the
    # size and mtime its manifest records hold), with their own task ids and upstream links
    raw_zone = Engine()  # one pass over the raw zone for every twin's window
    staging_model = StgHotelBookingsDaily(date=days[1])
    state_model = HotelBookingState(date=days[1])
    for task, dataset in ((staging_model, "staging/hotel_bookings_daily"), (state_model, STATE)):
        model = lab.partition(days[1], dataset)
        manifest = json.loads((model / "_manifest.json").read_text())
        version = {u.task_family: manifest["upstream"][u.task_id] for u in task.upstream()}  # of each upstream
        for day in days[2:]:
            folder = lab.partition(day, dataset)
            folder.mkdir()
            for name in os.listdir(model):  # data.parquet, and the state's _finished.arrow
                if name != "_manifest.json":
                    os.link(model / name, folder / name)
            twin = type(task)(date=day)
            upstream = {u.task_id: version[u.task_family] for u in twin.upstream()}
            fields = {"business_date": day.isoformat(), "task_id": twin.task_id, "upstream": upstream}
            if task is staging_model:  # its own day's extract: the same bytes as the model's, another name
                window = raw_zone.window(twin)
                fields["inputs"] = [input_line(f) for f in window.read]
                fields["input_fingerprint"] = window.fingerprint
                (digest,) = manifest["input_hashes"].values()  # of the model's H1.csv, its header only
                fields["input_hashes"] = {f.relpath: digest for f in window.read}
                # its own day's rules: H1's zone's offset that day (-04:00 or -05:00)
                fields["rules"], fields["rules_fingerprint"] = twin.rules(), twin.rules_fingerprint()
            (folder / "_manifest.json").write_text(json.dumps({**manifest, **fields}))
    assert len(lab.built_at(STATE)) == len(days) == 1095
    assert sys.getrecursionlimit() < len(days)  # Python's default (1,000): no room for one frame a link
    last = HotelBookingState(date=days[-1])
    assert last.complete()  # cold: a fresh cache, every link of the chain checked
    first = lab.partition(days[0], STATE) / "_manifest.json"  # the first link goes stale ...
    first.write_text(first.read_text().replace('"rules_fingerprint": "', '"rules_fingerprint": "x'))
    assert not last.complete()  # ... so the newest one is stale too: the check reached the bottom


def test_one_hotel_through_rangedaily_of_params(hotel_lab, caplog):
    args = ["RangeDaily", "--of", "HotelPickup", "--of-params", '{"hotel": "H2"}']
    with caplog.at_level("INFO", logger="luigi-interface"):
        assert hotel_lab.luigi(*args, "--start", str(FIRST), "--stop", str(FIRST + dt.timedelta(days=4))) == 0
    assert {h for _, h in pickups(hotel_lab)} == {"H2"} and len(pickups(hotel_lab)) == 4
    assert "error" not in caplog.text.lower(), caplog.text  # the dates it leaves out are found without one


def test_status_shows_one_state_per_day_for_the_hotel_pickups_naming_the_hotels(hotel_lab):
    from tasks.reference import hotels
    from tasks.views import status

    stop = FIRST + dt.timedelta(days=4)
    args = ["RangeDaily", "--of", "HotelPickup", "--of-params", '{"hotel": "H2"}']
    assert hotel_lab.luigi(*args, "--start", str(FIRST), "--stop", str(stop)) == 0
    others = ", ".join(h for h in hotels() if h != "H2")
    rows = status.collect(FIRST, stop, ["hotel_pickup"])
    assert {(r.state, r.reason) for r in rows} == {("missing", f"hotel {others}: no partition")}
    assert hotel_lab.luigi("AllHotelsPickup", "--start", str(FIRST), "--stop", str(stop)) == 0
    rows = status.collect(FIRST, stop, ["hotel_pickup"])
    assert [r.state for r in rows] == ["ok"] * 4 and all(r.rows is not None for r in rows)
    last = FIRST + dt.timedelta(days=3)  # H2's newest extract re-sent: that day's H2 pickup is stale
    write(hotel_lab, last, "H2", [f"V9,H2,{last}T23:50:00-07:00,CREATED,2026-10-05,2026-10-06,1,80.00,ota"])
    rows = status.collect(FIRST, stop, ["hotel_pickup"])
    assert [r.state for r in rows] == [
        "ok",
        "ok",
        "ok",
        "pending",
    ]  # staging not rebuilt: H2's file changed, so H2's rows only may change
    assert rows[-1].reason.startswith(
        f"hotel H2: may rebuild once its upstream is rebuilt: staging/hotel_bookings_daily {last} "
        f"(stale: input content changed: hotel_bookings/{last}/H2.csv)"
    )
    chain = status.collect(FIRST, stop, ["hotel_booking_state"])  # the state of that day reads it too
    assert [r.state for r in chain] == ["ok", "ok", "ok", "pending"]
    assert "staging/hotel_bookings_daily" in chain[-1].reason
    assert hotel_lab.luigi("StgHotelBookingsDaily", "--date", str(last)) == 0
    rows = status.collect(FIRST, stop, ["hotel_pickup"])
    assert [r.state for r in rows] == ["ok", "ok", "ok", "stale"]
    assert rows[-1].reason.startswith("hotel H2: upstream staging/hotel_bookings_daily 2026-09-")
    assert "changed" in rows[-1].reason
    # the day after the newest extract: no raw folder yet, so every hotel's pickup waits for it
    later = status.collect(stop, stop + dt.timedelta(days=2), ["hotel_pickup"])
    waits = f"hotel {', '.join(hotels())}: upstream staging/hotel_bookings_daily {stop} waits for raw data"
    assert [(r.state, r.reason) for r in later] == [("waiting", waits)] * 2


def test_status_of_pending_pickups_finds_the_failure_they_wait_on_once_per_partition_of_the_chain(
    hotel_lab, monkeypatch
):
    """Every pickup waits on the nearest failed partition up its chain. Status finds it for each partition of
    the chain once, not by a walk down the chain from every pickup, so the times a partition's upstream is
    asked for do not grow with the chain's length or the number of hotels."""
    from collections import Counter

    from tasks.hotels import HotelBookingState, HotelPickup, StgHotelBookingsDaily
    from tasks.reference import hotels
    from tasks.views import status

    days = 8
    stop = FIRST + days * DAY
    for k in range(4, days):  # the fixture's extracts run to 09-13: up to 09-17
        day = FIRST + k * DAY
        write(hotel_lab, day, "H1", [f"T{k},H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct"])
        write(hotel_lab, day, "H2", [])  # H2 sent every day before: no booking event that day
    assert hotel_lab.luigi("AllHotelsPickup", "--start", str(FIRST), "--stop", str(stop)) == 0
    failing = (FIRST, FIRST + 3 * DAY)  # an extract of a hotel not in the list fails these two dates
    for day in failing:
        write(hotel_lab, day, "H9", [f"N1,H9,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct"])
    assert hotel_lab.luigi("AllHotelsPickup", "--start", str(FIRST), "--stop", str(stop)) != 0
    asked: Counter[str] = Counter()
    for cls in (StgHotelBookingsDaily, HotelBookingState, HotelPickup):

        def counted(self, upstream=cls.upstream):
            asked[self.task_id] += 1
            return upstream(self)

        monkeypatch.setattr(cls, "upstream", counted)
    rows = status.collect(FIRST, stop, ["hotel_pickup"])
    assert [r.state for r in rows] == ["pending"] * days
    for row in rows:  # the nearest failure: the first date's, then the fourth's from that date on
        root = failing[row.date >= failing[1]]
        head = f"hotel {', '.join(hotels())}: may rebuild once its upstream is rebuilt: "
        assert row.reason.startswith(f"{head}staging/hotel_bookings_daily {root} (failed: "), row
        assert f"hotel_bookings/{root}/H9.csv: hotel not in" in row.reason, row
    assert len(asked) == (days - 1) + days + days * len(hotels())  # the states the pickups read, staging, pickups
    # 30 and more before (once per later pickup); once more a pickup: which hotels' rows its upstream may change
    assert max(asked.values()) <= 5, asked.most_common(3)


def test_all_hotels_pickup_asks_for_every_date_of_its_range(hotel_lab):
    from tasks.hotels import AllHotelsPickup
    from tasks.reference import hotels

    ranges = list(AllHotelsPickup(start=FIRST, stop=FIRST + dt.timedelta(days=120)).requires())
    assert len(ranges) == 1 + len(hotels())  # the booking state, then one range per hotel
    assert {r.task_limit for r in ranges} == {120}  # not RangeDaily's default of 50


def test_adding_a_hotel_changes_the_state_of_only_the_dates_that_hold_its_extracts(hotel_lab, tmp_path, setting):
    from tasks import reference
    from tasks.settings import CONFIG_DIR
    from tasks.views import status

    day = FIRST + dt.timedelta(days=2)
    write(hotel_lab, day, "H6", [f"W1,H6,{day}T09:00:00-04:00,CREATED,2026-10-05,2026-10-06,1,80.00,direct"])
    write(hotel_lab, day + DAY, "H6", [])  # from its first extract on, one a day
    stop = FIRST + dt.timedelta(days=4)
    names = ["stg_hotel_bookings_daily", "hotel_booking_state"]
    assert hotel_lab.range(FIRST, stop, of="HotelBookingState") == 30  # H6 is not in config: 09-12, 09-13 fail
    before = {(r.dataset, r.date): r.state for r in status.collect(FIRST, stop, names)}
    mine = tmp_path / "my-hotels.csv"
    mine.write_text((CONFIG_DIR / "hotels.csv").read_text() + "H6,Lakeshore Toronto,America/Toronto,90\n")
    setting("hotels", "reference_file", mine)
    reference.hotels.cache_clear()
    try:
        after = {(r.dataset, r.date): r.state for r in status.collect(FIRST, stop, names)}
        # 09-12 and 09-13 may now be built (their failures were under other rules); no other date changed state
        changed = {("stg_hotel_bookings_daily", d) for d in (day, day + DAY)}
        assert {k for k in after if after[k] != before[k]} == changed
        assert {before[k] for k in changed} == {"failed"} and {after[k] for k in changed} == {"missing"}
        assert hotel_lab.range(FIRST, stop, of="HotelBookingState") == 0
    finally:
        reference.hotels.cache_clear()


def test_staging_manifests_of_an_older_release_rebuild_the_booking_states_once_when_rebuilt(hotel_lab):
    """A staging version of another kind (an older release's: the sha256 of the Parquet bytes) no state
    recorded: once staging is rebuilt, each state over it is rebuilt once, then nothing more."""
    import json
    import os

    stop = FIRST + dt.timedelta(days=4)
    assert hotel_lab.range(FIRST, stop, of="HotelBookingState") == 0
    byte_versions = {}
    for path in (hotel_lab.data / "staging/hotel_bookings_daily").glob("*/_manifest.json"):
        m = json.loads(path.read_text())  # as versions before logical data versions wrote it
        byte_versions[m["task_id"]] = m["data_version"] = m["data_files"][0]["sha256"]
        del m["data_version_kind"], m["input_hashes"], m["inputs_listed_ns"]
        path.write_text(json.dumps(m))
    for path in (hotel_lab.data / STATE).glob("*/_manifest.json"):
        m = json.loads(path.read_text())
        m["upstream"] = {t: byte_versions.get(t, v) for t, v in m["upstream"].items()}
        path.write_text(json.dumps(m))
    for path in (hotel_lab.raw / "hotel_bookings").rglob("*.csv"):
        os.utime(path)  # touched: without recorded hashes, metadata decides and staging is rebuilt
    rebuilt = {}
    states = hotel_lab.rebuilt_by(
        lambda: rebuilt.update(
            staging=hotel_lab.rebuilt_by(
                lambda: hotel_lab.range(FIRST, stop, of="HotelBookingState"), "staging/hotel_bookings_daily"
            )
        ),
        STATE,
    )
    assert rebuilt["staging"] == {FIRST + dt.timedelta(days=k) for k in range(4)}
    assert states == {FIRST + dt.timedelta(days=k) for k in range(4)}
    assert hotel_lab.rebuilt_by(lambda: hotel_lab.range(FIRST, stop, of="HotelBookingState"), STATE) == set()


def test_on_the_books_reads_the_newest_booking_state_and_equals_a_replay_of_all_staging(hotel_lab):
    import json

    import pyarrow.parquet as pq

    from tasks.transforms.hotels import on_the_books

    day = FIRST + dt.timedelta(days=2)  # a modification and a cancellation of bookings made earlier
    write(
        hotel_lab,
        day,
        "H1",
        [
            f"T0,H1,{day}T12:00:00-04:00,MODIFIED,2026-10-01,2026-10-04,2,120.00,direct",
            f"T1,H1,{day}T13:00:00-04:00,CANCELLED,2026-10-01,2026-10-03,1,100.00,direct",
        ],
    )
    write(hotel_lab, day, "H2", [f"T0,H2,{day}T10:00:00-07:00,CREATED,2026-10-02,2026-10-05,1,70.00,ota"])
    assert hotel_lab.luigi("OtbByStayDate") == 0
    manifest = json.loads((hotel_lab.data / "marts/otb_by_stay_date/_manifest.json").read_text())
    assert manifest["stats"]["state_read"] == "2026-09-13"  # one partition: the newest state, not every event
    assert set(hotel_lab.built_at(STATE)) == {FIRST + dt.timedelta(days=k) for k in range(4)}
    staging = sorted((hotel_lab.data / "staging/hotel_bookings_daily").glob("business_date=*/data.parquet"))
    replay = on_the_books([(dt.date.fromisoformat(p.parent.name[-10:]), pq.read_table(p)) for p in staging])
    got = pq.read_table(hotel_lab.data / "marts/otb_by_stay_date/data.parquet")
    assert got.equals(replay)
    assert ("H2", dt.date(2026, 10, 4), 1, "70.00", 1) in otb(hotel_lab)  # T0 of H2 is not T0 of H1


def test_a_reject_share_failure_of_hotel_staging_stops_applying_once_the_share_is_raised(hotel_lab, setting, capsys):
    """[hotels] max_reject_share is part of the failure's identity, as [qsr]'s is for POS."""
    import json

    from tasks.cli import main

    def shown() -> tuple[str, str]:
        capsys.readouterr()
        args = ["--dataset", "stg_hotel_bookings_daily", "--start", str(FIRST), "--stop", str(FIRST + DAY)]
        assert main(["status", *args, "--json"]) == 0
        (row,) = json.loads(capsys.readouterr().out)
        return row["state"], row["reason"]

    path = hotel_lab.raw / "hotel_bookings" / str(FIRST) / "H1.csv"
    path.write_text(path.read_text() + f"X0,H1,{FIRST}T13:00:00-04:00,CREATED,2026-10-01,2026-10-03,x,100.00,direct\n")
    assert hotel_lab.luigi("StgHotelBookingsDaily", "--date", str(FIRST)) == 30  # 1 of 3 rows: 33 % > 5 %
    state, reason = shown()
    assert state == "failed" and "1 of 3 rows rejected (33.3% > max_reject_share 5.0%)" in reason
    setting("hotels", "max_reject_share", 0.5)
    assert shown() == ("missing", "no partition")  # never built: the next run builds it
    assert hotel_lab.luigi("StgHotelBookingsDaily", "--date", str(FIRST)) == 0
    assert shown() == ("ok", "")


def test_a_reject_share_just_over_the_limit_reads_over_it_and_a_misfiled_event_gives_its_local_time(hotel_lab, setting):
    """1 of 3 rows over a limit of 0.333: before, "33.3% > max_reject_share 33.3%", and the example's reason
    said only "event_at is not on the folder's date at the hotel"."""
    from tasks.views import status

    path = hotel_lab.raw / "hotel_bookings" / str(FIRST) / "H1.csv"
    late = f"X0,H1,{FIRST + DAY}T00:30:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct"
    path.write_text(path.read_text() + late + "\n")
    setting("hotels", "max_reject_share", 0.333)
    assert hotel_lab.luigi("StgHotelBookingsDaily", "--date", str(FIRST)) == 30
    (row,) = status.collect(FIRST, FIRST + DAY, ["stg_hotel_bookings_daily"])
    assert row.state == "failed" and "1 of 3 rows rejected (33.33% > max_reject_share 33.30%)" in row.reason
    assert f"{FIRST + DAY} 00:30:00 at the hotel (America/Toronto, -04:00), not {FIRST}" in row.reason, row.reason


def test_a_small_hotels_one_bad_row_is_a_reject_not_a_broken_extract(hotel_lab):
    """H2 sent 4 events, one of them without its offset (25 % of its extract, 1 of 44 rows of the date): a
    reject in the quarantine, under the date's share and under half of the extract, so the date builds."""
    import json

    rows = [f"T{k},H1,{FIRST}T12:{k:02d}:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct" for k in range(40)]
    write(hotel_lab, FIRST, "H1", rows)
    small = [f"V{k},H2,{FIRST}T10:0{k}:00-04:00,CREATED,2026-10-02,2026-10-03,2,50.00,ota" for k in range(3)]
    write(hotel_lab, FIRST, "H2", [*small, f"V9,H2,{FIRST}T10:09:00,CREATED,2026-10-02,2026-10-03,2,50.00,ota"])
    assert hotel_lab.luigi("StgHotelBookingsDaily", "--date", str(FIRST)) == 0
    manifest = json.loads((hotel_lab.partition(FIRST, "staging/hotel_bookings_daily") / "_manifest.json").read_text())
    assert (manifest["row_count"], manifest["rejected_count"]) == (43, 1)


def test_one_hotels_extract_mostly_rejected_fails_the_date_though_all_hotels_rejects_are_under_the_share(
    hotel_lab, setting, capsys
):
    """H2's extract lost every offset (2 of 2 events rejected), a small share of the date's rows (2 of 42, 4.8 %):
    the share is judged per extract as well, so the date fails naming H2's file (exit 30), and on-the-books is
    not built without H2's day. Before, the date was built without H2's events, exit 0, nothing said."""
    import json

    from tasks.cli import main

    rows = [f"T{k},H1,{FIRST}T12:{k:02d}:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct" for k in range(40)]
    write(hotel_lab, FIRST, "H1", rows)
    write(
        hotel_lab,
        FIRST,
        "H2",
        [f"V{k},H2,{FIRST}T10:0{k}:00,CREATED,2026-10-02,2026-10-03,2,50.00,ota" for k in (0, 1)],
    )
    assert hotel_lab.luigi("OtbByStayDate") == 30
    assert FIRST not in hotel_lab.built_at("staging/hotel_bookings_daily")
    assert not (hotel_lab.data / "marts" / "otb_by_stay_date").exists()
    capsys.readouterr()
    args = ["--dataset", "stg_hotel_bookings_daily", "--start", str(FIRST), "--stop", str(FIRST + DAY), "--json"]
    assert main(["status", *args]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["state"] == "failed", row
    assert f"2 of 2 rows of hotel_bookings/{FIRST}/H2.csv rejected (100.0% > 50% of a file's rows" in row["reason"]
    assert "H1.csv" not in row["reason"] and "No partition was written" in row["reason"], row["reason"]
    setting("hotels", "max_reject_share", 1.0)  # taken as it is: H2's rows in the quarantine, the date built
    assert hotel_lab.luigi("StgHotelBookingsDaily", "--date", str(FIRST)) == 0
    manifest = json.loads((hotel_lab.partition(FIRST, "staging/hotel_bookings_daily") / "_manifest.json").read_text())
    assert (manifest["row_count"], manifest["rejected_count"]) == (40, 2)


@pytest.mark.system
def test_the_hotels_list_beside_the_users_luigi_cfg_is_read_and_named(hotel_lab):
    """config/hotels.csv was read from the package's folder only: a user's own list beside their
    luigi.cfg was ignored without a word (H6's extract failed its partition)."""
    import os
    import subprocess
    import sys

    cron = hotel_lab.root / "cron"
    (cron / "config").mkdir(parents=True)
    mine = cron / "config" / "hotels.csv"
    mine.write_text((REPO / "config" / "hotels.csv").read_text() + "H6,Lakeshore Toronto,America/Toronto,90\n")
    write(hotel_lab, FIRST, "H6", [f"W1,H6,{FIRST}T09:00:00-04:00,CREATED,2026-10-05,2026-10-06,1,80.00,direct"])
    cfg = cron / "luigi.cfg"
    cfg.write_text(f"[daybreak]\nraw_root = {hotel_lab.raw}\ndata_root = {hotel_lab.data}\nstart_date = {FIRST}\n")
    env = {k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PATH"}

    def run(*args: str, luigi: bool = True) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "luigi", "--module", "tasks", *args, "--local-scheduler"]
        cmd = cmd if luigi else [sys.executable, "-m", "tasks.cli", *args]
        return subprocess.run(cmd, cwd=cron, env=env, capture_output=True, text=True, timeout=300)

    proc = run("StgHotelBookingsDaily", "--date", str(FIRST))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = duckdb.sql(
        f"select hotel_id from read_parquet('{hotel_lab.partition(FIRST, 'staging/hotel_bookings_daily')}/*.parquet')"
    ).fetchall()
    assert ("H6",) in rows
    proc = run("status", "--dataset", "stg_hotel_bookings_daily", luigi=False)
    assert f"hotels: H1, H2, H3, H4, H5, H6 (from {mine})" in proc.stdout, proc.stdout
    proc = run("HotelOtbExport", "--hotel", "H7")
    assert proc.stderr.splitlines() == [
        f"daybreak: error: --hotel 'H7': not a hotel of {mine} (hotels: H1, H2, H3, H4, H5, H6)"
    ]
    # [hotels] reference_file names another list (relative: the working directory); one that is not there is refused
    (cron / "other.csv").write_text("hotel_id,name,timezone,rooms\nH1,Harbourfront Toronto,America/Toronto,220\n")
    cfg.write_text(cfg.read_text() + "[hotels]\nreference_file = other.csv\n")
    proc = run("HotelOtbExport", "--hotel", "H2")
    assert proc.stderr.splitlines() == [
        f"daybreak: error: --hotel 'H2': not a hotel of {cron / 'other.csv'} (hotels: H1)"
    ]
    cfg.write_text(cfg.read_text().replace("other.csv", "nowhere.csv"))
    proc = run("status", luigi=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"daybreak: error: [hotels] reference_file = 'nowhere.csv' in {cfg}: no such file")


def test_plan_names_every_partition_that_would_go_stale_downstream_through_the_chain(pickups_built, capsys):
    from tasks.cli import main
    from tasks.downstream import stale_downstream
    from tasks.hotels import StgHotelBookingsDaily

    assert pickups_built.luigi("HotelOtbExport", "--hotel", "H1") == 0
    day = FIRST + dt.timedelta(days=2)  # the extract of 09-12 is re-sent with one more booking
    write(
        pickups_built,
        day,
        "H1",
        [
            f"T2,H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct",
            f"T9,H1,{day}T13:00:00-04:00,CREATED,2026-10-04,2026-10-05,1,90.00,direct",
        ],
    )
    capsys.readouterr()
    assert (
        main(["plan", "stg_hotel_bookings_daily", "--start", str(day), "--stop", str(day + dt.timedelta(days=1))]) == 1
    )
    out = capsys.readouterr().out
    named = dict(line.split(": ", 1)[1].split(" ", 1) for line in out.splitlines() if " downstream: " in line)
    pickups = f"hotel_pickup {day} H1, {day + DAY} H1"  # H1's file holds H1's rows only: no H2 pickup changes
    assert f"  then may go stale downstream: {pickups}\n" in out, out
    # the export reads on-the-books, which reads the booking states: stale only through the chain
    assert named["hotel_otb_export"] == "H1" and named["otb_by_stay_date"] == "(all)", out
    assert str(day) in named["hotel_booking_state"] and f"{day} H1" in named["hotel_pickup"], out
    found = stale_downstream(
        [StgHotelBookingsDaily(date=day)], "stg_hotel_bookings_daily", day, day + dt.timedelta(days=1)
    )
    assert sorted(type(t).__name__ for t in found) == sorted(  # the one answer, for the plan and a preview
        {
            "hotel_booking_state": "HotelBookingState",
            "hotel_pickup": "HotelPickup",
            "otb_by_stay_date": "OtbByStayDate",
            "hotel_otb_export": "HotelOtbExport",
        }[name]
        for name, keys in named.items()
        for _ in keys.split(", ")
    )


def test_plan_and_status_of_the_pickups_say_which_may_rebuild_and_the_run_rebuilds_one_hotels(pickups_built, capsys):
    """H1's extract re-sent: only H1's pickups may rebuild, in the plans of the pickups and of the booking
    states, and in status (before: every hotel's, though the plan of the staging named H1's only)."""
    from tasks.cli import main

    stop = FIRST + 4 * DAY
    day = FIRST + DAY  # one rate of H1's extract of 09-11 changed: only H1's rows of 09-11 on can change
    write(pickups_built, day, "H1", [f"T1,H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,120.00,direct"])
    capsys.readouterr()
    assert main(["plan", "hotel_pickup", "--start", str(FIRST), "--stop", str(stop)]) == 1  # the upstream runs
    plan = capsys.readouterr().out
    head = "hotel_pickup: 0 partitions would run, 3 may run once their upstream is rebuilt, 0 wait for raw data"
    assert plan.splitlines()[0] == head, plan
    root = (
        f"may rebuild once its upstream is rebuilt: staging/hotel_bookings_daily {day} (stale: input content changed: "
    )
    assert f"  may   {day} H1 .. {stop - DAY} H1 (3 partitions): {root}" in plan, plan
    # what the run builds first: the staging date, not the booking states that may come out the same
    assert [line for line in plan.splitlines() if line.startswith("  first ")] == [
        f"  first stg_hotel_bookings_daily {day}  stale: input content changed: hotel_bookings/{day}/H1.csv"
    ], plan
    assert "  run:  luigi --module tasks AllHotelsPickup" in plan, plan
    assert main(["status", "--dataset", "hotel_pickup", "--start", str(FIRST), "--stop", str(stop)]) == 0
    shown = capsys.readouterr().out
    assert "\n  #???\n  1 ok, 3 pending\n" in shown, shown  # ? pending: none stale
    assert f"{day} .. {stop - DAY} (3 days) pending: hotel H1: {root}" in shown, shown
    assert main(["plan", "hotel_booking_state", "--start", str(FIRST), "--stop", str(stop)]) == 1
    plan = capsys.readouterr().out
    downstream = [line for line in plan.splitlines() if " downstream: hotel_pickup " in line]
    h1 = f"{day} H1, {day + DAY} H1, {stop - DAY} H1"  # not the other hotels' pickups
    assert downstream == [f"  then may go stale downstream: hotel_pickup {h1}"], plan
    before = pickups(pickups_built)
    assert pickups_built.luigi("AllHotelsPickup", "--start", str(FIRST), "--stop", str(stop)) == 0
    after = pickups(pickups_built)
    assert {k for k in after if after[k] != before[k]} == {(day + k * DAY, "H1") for k in range(3)}
    assert main(["plan", "hotel_pickup", "--start", str(FIRST), "--stop", str(stop)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "hotel_pickup: 0 partitions would run, 0 wait for raw data"


def test_once_the_staging_is_rebuilt_first_plan_and_status_still_name_the_one_hotel_whose_pickups_may_rebuild(
    pickups_built, capsys
):
    """H1's extract re-sent and the staging date rebuilt on its own first: the booking states are stale, and the
    pickups that may rebuild are still H1's only (before: every hotel's, as a booking state's rebuild could
    change any hotel's rows), as the run then rebuilds."""
    from tasks.cli import main

    lab, stop, day = pickups_built, FIRST + 4 * DAY, FIRST + DAY
    write(lab, day, "H1", [f"T1,H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,120.00,direct"])
    assert lab.range(FIRST, stop, of="StgHotelBookingsDaily") == 0
    capsys.readouterr()
    assert main(["plan", "hotel_pickup", "--start", str(FIRST), "--stop", str(stop)]) == 1
    plan = capsys.readouterr().out
    head = "hotel_pickup: 1 partition would run, 2 may run once their upstream is rebuilt, 0 wait for raw data"
    assert plan.splitlines()[0] == head, plan  # H1's of the day read the staging's H1 rows too: they changed
    assert f"  run   {day} H1  stale: upstream staging/hotel_bookings_daily {day} changed" in plan, plan
    assert f"  may   {day + DAY} H1 .. {stop - DAY} H1 (2 partitions): " in plan, plan
    assert main(["status", "--dataset", "hotel_pickup", "--start", str(FIRST), "--stop", str(stop)]) == 0
    assert "\n  1 ok, 1 stale, 2 pending\n" in capsys.readouterr().out
    before = pickups(lab)
    assert lab.luigi("AllHotelsPickup", "--start", str(FIRST), "--stop", str(stop)) == 0
    after = pickups(lab)
    assert {k for k in after if after[k] != before[k]} == {(day + k * DAY, "H1") for k in range(3)}


def test_the_partitions_of_a_hotel_taken_off_the_list_are_left_over_in_status_and_plan(hotel_lab, setting, capsys):
    """A hotel taken off the hotels list keeps its partitions (a typo in the list must not wipe a hotel),
    and readers of the datasets' globs still get its rows: status and plan name them as left over, with
    the command that deletes them; once deleted, all is ok again."""
    import subprocess

    from tasks import reference
    from tasks.cli import main
    from tasks.settings import CONFIG_DIR

    stop = FIRST + 4 * DAY
    span = ["--start", str(FIRST), "--stop", str(stop)]
    listed = hotel_lab.root / "hotels.csv"
    listed.write_text((CONFIG_DIR / "hotels.csv").read_text() + "H6,New Place,America/Toronto,50\n")
    setting("hotels", "reference_file", listed)
    reference.hotels.cache_clear()
    try:
        day = FIRST + 2 * DAY
        extracts = [  # from its first extract on, one a day
            write(hotel_lab, day, "H6", [f"W1,H6,{day}T10:00:00-04:00,CREATED,2026-10-05,2026-10-07,2,150.00,direct"]),
            write(hotel_lab, day + DAY, "H6", []),
        ]
        assert hotel_lab.luigi("AllHotelsPickup", *span) == 0
        assert hotel_lab.luigi("OtbByStayDate") == 0
        assert hotel_lab.luigi("HotelOtbExport", "--hotel", "H6") == 0
        listed.write_text((CONFIG_DIR / "hotels.csv").read_text())  # H6 taken off the list, its extract gone
        reference.hotels.cache_clear()
        for extract in extracts:
            extract.unlink()
        assert hotel_lab.luigi("AllHotelsPickup", *span) == 0
        assert hotel_lab.luigi("OtbByStayDate") == 0
        assert ("H6",) not in duckdb.sql(
            f"select hotel_id from '{hotel_lab.data}/marts/otb_by_stay_date/*.parquet'"
        ).fetchall()
        glob = f"{hotel_lab.data}/marts/hotel_pickup/*/*/*.parquet"
        assert ("H6",) in duckdb.sql(f"select hotel_id from read_parquet('{glob}', hive_partitioning=true)").fetchall()

        folders = [f"marts/hotel_pickup/business_date={FIRST + k * DAY}/hotel_id=H6/" for k in range(4)]
        folders.append("exports/otb/hotel_id=H6/")
        data = hotel_lab.data
        remove = f"rm -r {data}/marts/hotel_pickup/*/hotel_id=H6 {data}/exports/otb/hotel_id=H6"
        head = (
            f"left over: 5 partitions of hotel H6, not in {listed}: readers of the datasets' files still get their "
            f"rows, and no run removes them. If H6 is off the list by mistake, put it back; else delete them: {remove}"
        )
        capsys.readouterr()
        assert main(["status", "--json", *span]) == 0
        rows = json.loads(capsys.readouterr().out)
        left = [r for r in rows if r["state"] == "left_over"]
        assert left == [{**left[0], "dataset": "data_root", "date": None, "reason": head, "not_read": folders}], left
        assert main(["status", *span]) == 0
        text = capsys.readouterr().out
        assert "\n".join([head, *(f"  {f}" for f in folders)]) in text, text
        assert "hotel_pickup  2026-09-10 .. 2026-09-13\n  ####\n  4 ok; 4 left over (above)\n" in text, text
        assert (
            "hotel_otb_export  (unpartitioned)  missing: hotel H1, H2, H3, H4, H5: no partition; 1 left over (above)\n"
            in text
        )
        html = hotel_lab.root / "status.html"
        assert main(["status", "--html", str(html), *span]) == 0
        capsys.readouterr()
        page = html.read_text()
        assert "left over: 5 partitions of hotel H6" in page and folders[0] in page and "rm -r " in page

        pickup = f"{data}/marts/hotel_pickup/*/hotel_id=H6"
        for dataset, mine, one in (("hotel_pickup", folders[:4], pickup), ("hotel_otb_export", folders[4:], None)):
            assert main(["plan", dataset, *span]) == 1  # not "nothing to do"
            plan = capsys.readouterr().out
            assert plan.splitlines()[0].endswith(f", {len(mine)} left over"), plan
            n = f"{len(mine)} partition" + "s" * (len(mine) > 1)
            why = head.replace("5 partitions", n).replace(remove, f"rm -r {one or f'{data}/exports/otb/hotel_id=H6'}")
            assert "\n".join([*(f"  left  {f}" for f in mine), f"  {why}"]) in plan, plan

        assert subprocess.run(remove, shell=True, check=False).returncode == 0  # the command status gave
        assert main(["status", "--json", *span]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert [r for r in rows if r["dataset"] == "data_root"] == []
        assert {r["state"] for r in rows if r["dataset"] in ("hotel_pickup", "hotel_otb_export")} <= {"ok", "missing"}
        assert main(["plan", "hotel_pickup", *span]) == 0
        assert capsys.readouterr().out.splitlines()[0] == "hotel_pickup: 0 partitions would run, 0 wait for raw data"
        assert duckdb.sql(
            f"select count(*) from read_parquet('{glob}', hive_partitioning=true) where hotel_id = 'H6'"
        ).fetchall() == [(0,)]
    finally:
        reference.hotels.cache_clear()


def test_a_hotel_put_back_with_its_extracts_has_pickups_that_may_rebuild_and_the_run_finds_them_up_to_date(
    pickups_built, setting, capsys
):
    """H2 taken off the list and its extracts out of the raw zone, the hotel datasets rebuilt without it, then
    both put back: the staging dates are stale (a new file each) and come back as H2's pickups read them. So
    plan and status say those pickups may rebuild, as every other hotel's (not that a run rebuilds them), and
    the run finds them up to date: their rows still add up to the books."""
    from tasks import reference
    from tasks.cli import main
    from tasks.settings import CONFIG_DIR

    stop = FIRST + 4 * DAY
    span = ["--start", str(FIRST), "--stop", str(stop)]
    built = pickups(pickups_built)
    listed = pickups_built.root / "hotels.csv"
    full = (CONFIG_DIR / "hotels.csv").read_text()
    listed.write_text("".join(line for line in full.splitlines(keepends=True) if not line.startswith("H2,")))
    setting("hotels", "reference_file", listed)
    reference.hotels.cache_clear()
    try:
        moved = pickups_built.root / "moved"
        moved.mkdir()
        for k in range(4):
            (pickups_built.raw / "hotel_bookings" / str(FIRST + k * DAY) / "H2.csv").rename(moved / f"{k}.csv")
        assert pickups_built.luigi("AllHotelsPickup", *span) == 0  # H2's pickups are left over, not rebuilt
        listed.write_text(full)  # H2 was taken off by mistake: back, with its extracts
        reference.hotels.cache_clear()
        for k in range(4):
            (moved / f"{k}.csv").rename(pickups_built.raw / "hotel_bookings" / str(FIRST + k * DAY) / "H2.csv")
        capsys.readouterr()
        assert main(["status", "--dataset", "hotel_pickup", *span]) == 0
        shown = capsys.readouterr().out
        assert "\n  ????\n  4 pending\n" in shown, shown  # none stale: H2's as every other hotel's
        root = f"staging/hotel_bookings_daily {FIRST} (stale: input changed: new file hotel_bookings/{FIRST}/H2.csv"
        assert f"pending: hotel H1, H2, H3, H4, H5: may rebuild once its upstream is rebuilt: {root}" in shown, shown
        assert main(["plan", "hotel_pickup", *span]) == 1
        plan = capsys.readouterr().out
        head = "hotel_pickup: 0 partitions would run, 20 may run once their upstream is rebuilt, 0 wait for raw data"
        assert plan.splitlines()[0] == head, plan
        assert pickups_built.luigi("AllHotelsPickup", *span) == 0
        assert pickups(pickups_built) == built  # H2's too: up to date, not rebuilt
        assert main(["plan", "hotel_pickup", *span]) == 0
        assert capsys.readouterr().out.splitlines()[0] == "hotel_pickup: 0 partitions would run, 0 wait for raw data"
        assert pickups_built.luigi("OtbByStayDate") == 0
        summed = summed_pickups(pickups_built)
        assert summed == [row[:4] for row in otb(pickups_built)] and ("H2",) in {row[:1] for row in summed}, summed
    finally:
        reference.hotels.cache_clear()


def test_a_deleted_day_of_the_chain_is_the_one_partition_plan_and_status_say_would_run(pickups_built, capsys):
    """docs/run-semantics.md: deleting a partition's folder rebuilds that date and nothing else. The days after it
    read it unchanged once it is rebuilt to the same rows: plan and status say they may run, not that they will."""
    from tasks.cli import main

    stop = FIRST + 4 * DAY
    shutil.rmtree(pickups_built.partition(FIRST + DAY, STATE))
    capsys.readouterr()
    assert main(["plan", "hotel_booking_state", "--start", str(FIRST), "--stop", str(stop)]) == 1
    plan = capsys.readouterr().out
    head = "hotel_booking_state: 1 partition would run, 2 may run once their upstream is rebuilt, 0 wait for raw data"
    assert plan.splitlines()[0] == head, plan
    assert f"  run   {FIRST + DAY}  missing: no partition" in plan, plan
    root = f"may rebuild once its upstream is rebuilt: {STATE} {FIRST + DAY} (missing: no partition)"
    assert f"  may   {FIRST + 2 * DAY} .. {stop - DAY} (2 partitions): {root}" in plan, plan
    # what reads the days that may run may go stale too: the later days' pickups (before, the plan named
    # only the pickups of the first day after the gap)
    later = [line for line in plan.splitlines() if line.startswith("  then may go stale downstream: hotel_pickup")]
    assert any(f"{stop - DAY} H1" in line for line in later), plan
    assert main(["status", "--dataset", "hotel_booking_state", "--start", str(FIRST), "--stop", str(stop)]) == 0
    shown = capsys.readouterr().out
    assert "\n  #.??\n  1 ok, 2 pending, 1 missing\n" in shown, shown
    assert f"  {FIRST + 2 * DAY} .. {stop - DAY} (2 days) pending: {root}" in shown, shown
    rebuilt = pickups_built.rebuilt_by(lambda: pickups_built.range(FIRST, stop, of="HotelBookingState"), STATE)
    assert rebuilt == {FIRST + DAY}  # as the plan said: the rest read it unchanged


def test_a_day_of_the_chain_whose_upstream_was_rebuilt_to_other_rows_is_stale_until_that_is_stale_again(pickups_built):
    """A partition whose upstream in place is not the one it read is stale while that upstream is ok: a run
    rebuilds it. Once the upstream is stale again, the run rebuilds the upstream first, and it may come back to
    the rows the partition read (the change undone): pending, and the run finds it up to date."""
    from tasks.views import status

    stop = FIRST + 4 * DAY
    day = FIRST + DAY
    path = pickups_built.raw / "hotel_bookings" / str(day) / "H1.csv"
    read = path.read_bytes()  # what the chain was built from
    write(pickups_built, day, "H1", [f"T1,H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,120.00,direct"])
    assert pickups_built.luigi("StgHotelBookingsDaily", "--date", str(day)) == 0  # other rows: the chain is not rebuilt
    rows = status.collect(FIRST, stop, ["hotel_booking_state"])
    assert [(r.state, r.reason) for r in rows[:2]] == [
        ("ok", ""),
        ("stale", f"upstream staging/hotel_bookings_daily {day} changed"),
    ]
    assert [r.state for r in rows[2:]] == ["pending", "pending"]
    path.write_bytes(read)  # the change undone: the staging day is stale again
    rows = status.collect(FIRST, stop, ["hotel_booking_state"])
    root = f"staging/hotel_bookings_daily {day} (stale: input content changed: hotel_bookings/{day}/H1.csv)"
    assert [(r.state, r.reason) for r in rows] == [
        ("ok", ""),
        *[("pending", f"may rebuild once its upstream is rebuilt: {root}")] * 3,
    ]
    staged = pickups_built.built_at("staging/hotel_bookings_daily")
    rebuilt = pickups_built.rebuilt_by(lambda: pickups_built.range(FIRST, stop, of="HotelBookingState"), STATE)
    assert rebuilt == set()  # the staging day came back to the rows they read
    assert {d for d, t in pickups_built.built_at("staging/hotel_bookings_daily").items() if staged[d] != t} == {day}


def test_a_later_start_date_makes_the_chain_start_there_and_the_books_forget_what_came_before(hotel_lab, setting):
    """start_date moves from 09-10 to 09-12: the state of 09-12 no longer reads the state of 09-11, so it is
    stale (it read an upstream it reads no more), and on-the-books then holds only the bookings from 09-12 on,
    as a build from scratch with that start_date does."""
    from tasks.views import status

    assert hotel_lab.luigi("OtbByStayDate") == 0
    later = FIRST + 2 * DAY
    setting("daybreak", "start_date", later)
    rows = {r.date: r for r in status.collect(later, FIRST + 4 * DAY, ["hotel_booking_state"])}
    assert rows[later].state == "stale" and "reads no more" in rows[later].reason, rows[later]
    assert hotel_lab.luigi("OtbByStayDate") == 0
    assert otb(hotel_lab) == [
        ("H1", dt.date(2026, 10, 1), 2, "200.00", 2),
        ("H1", dt.date(2026, 10, 2), 2, "200.00", 2),
        ("H2", dt.date(2026, 10, 2), 4, "200.00", 2),
    ]


def test_start_date_moved_back_names_the_partitions_the_chain_and_the_books_were_built_without(hotel_lab, setting):
    """start_date moves from 09-10 to 09-12 and back: the state of 09-12 and on-the-books, built meanwhile
    without the days before 09-12, read them again. Their stale reason names what they were built without
    (before: `upstream ... 2026-09-11 changed`, though the state of 09-11 and the staging of 09-10 were kept
    as they were)."""
    from tasks.views import status

    assert hotel_lab.luigi("OtbByStayDate") == 0
    later = FIRST + 2 * DAY
    setting("daybreak", "start_date", later)
    assert hotel_lab.luigi("OtbByStayDate") == 0
    kept = hotel_lab.built_at(STATE)[later - DAY]
    setting("daybreak", "start_date", FIRST)
    rows = {r.date: r for r in status.collect(FIRST, FIRST + 4 * DAY, ["hotel_booking_state"])}
    assert rows[later].state == "stale" and "changed" not in rows[later].reason, rows[later]
    assert f"{STATE} {later - DAY}" in rows[later].reason, rows[later]
    (books,) = status.collect(FIRST, FIRST + 4 * DAY, ["otb_by_stay_date"])
    assert books.state == "stale" and "changed" not in books.reason, books
    assert f"staging/hotel_bookings_daily {FIRST}" in books.reason and "2 upstream partitions" in books.reason, books
    assert hotel_lab.built_at(STATE)[later - DAY] == kept  # what it reads again was not rebuilt
    assert hotel_lab.luigi("OtbByStayDate") == 0
    assert ("H1", dt.date(2026, 10, 1), 4, "400.00", 4) in otb(hotel_lab)  # every booking since 09-10 again


def test_an_extract_taken_away_waits_and_a_late_first_extract_is_named_as_an_input_change_not_a_rules_change(
    hotel_lab,
):
    """A hotel's extract taken away from a date it was built from: the date waits for it again, naming the file.
    A hotel's first extract arriving after its date was built changes which hotels the date reads: status names
    the file, as for a QSR store's file, not the timezones of the hotels list."""
    from tasks.views import status

    assert hotel_lab.luigi("OtbByStayDate") == 0
    day = FIRST + DAY
    path = hotel_lab.raw / "hotel_bookings" / str(day) / "H2.csv"
    kept = path.read_bytes()
    path.unlink()

    def reason(when: dt.date) -> tuple[str, str]:
        (row,) = status.collect(when, when + DAY, ["stg_hotel_bookings_daily"])
        return row.state, row.reason

    state, why = reason(day)
    assert state == "waiting" and f"hotel_bookings/{day} (there, without H2.csv yet: hotel H2 of " in why, why
    assert hotel_lab.luigi("OtbByStayDate") == 20  # never built without it
    path.write_bytes(kept)
    assert hotel_lab.luigi("OtbByStayDate") == 0
    last = FIRST + 3 * DAY
    write(hotel_lab, last, "H3", [])  # H3's first extract, after its date was built
    assert reason(last) == ("stale", f"input changed: new file hotel_bookings/{last}/H3.csv"), reason(last)


def test_plan_of_the_chain_with_two_workers_says_one_process_builds_it(hotel_lab, capsys):
    """A single run builds a chain in one process (each date reads the day before): the plan says so, not
    a process per core."""
    from tasks.cli import main

    args = ["--start", str(FIRST), "--stop", str(FIRST + 4 * DAY), "--workers", "2"]
    assert main(["plan", "hotel_booking_state", *args]) == 1
    out = capsys.readouterr().out
    assert "mode: one run for the range (RangeSingleRun): a chain (each date reads the day before)" in out, out


def test_plan_says_the_dates_with_an_extract_of_a_hotel_taken_off_the_list_would_fail(hotel_lab, setting, capsys):
    """Before: `run  <d>  stale: rules changed: timezones[H2] 'America/Vancouver' -> (none)` only; the run
    then failed each such date: plan says so, from the folder listing it already has."""
    from tasks import reference
    from tasks.cli import main
    from tasks.settings import CONFIG_DIR

    span = ["--start", str(FIRST), "--stop", str(FIRST + 4 * DAY)]
    assert hotel_lab.range(FIRST, FIRST + 4 * DAY, of="StgHotelBookingsDaily") == 0
    listed = hotel_lab.root / "hotels.csv"
    listed.write_text("".join(line for line in (CONFIG_DIR / "hotels.csv").open() if not line.startswith("H2,")))
    setting("hotels", "reference_file", listed)
    reference.hotels.cache_clear()
    try:
        capsys.readouterr()
        assert main(["plan", "stg_hotel_bookings_daily", *span]) == 1
        runs = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  run   ")]
        days = f"{FIRST} .. {FIRST + 3 * DAY}"  # each day's own folder: one line for the four, as status
        assert runs == [
            f"  run   {days} (4 partitions)  stale: rules changed: timezones[H2] 'America/Vancouver' -> (none); "
            f"would fail: raw file hotel_bookings/{days}/H2.csv is of hotel H2, not in {listed}"
        ], runs
        assert main(["status", "--dataset", "stg_hotel_bookings_daily", *span]) == 0  # status says it too
        shown = capsys.readouterr().out
        assert f"would fail: raw file hotel_bookings/{days}/H2.csv is of hotel H2, not in {listed}" in shown, shown
        assert hotel_lab.range(FIRST, FIRST + 4 * DAY, of="StgHotelBookingsDaily") == 30  # as the plan said
    finally:
        reference.hotels.cache_clear()


def test_plan_and_status_of_the_pickups_leave_out_the_days_not_over_as_the_run_does(lab, setting, capsys):
    """AllHotelsPickup's ranges leave out the business day in progress and later: plan leaves them out too (not
    work, nothing waits), and status shows them not over yet for every hotel."""
    from tasks.cli import main
    from tasks.settings import day_in_progress, not_over
    from tasks.views import status

    today = day_in_progress()
    start, stop = today - 3 * DAY, today + 2 * DAY
    setting("daybreak", "start_date", start)
    lab.hotel_days(start, 5)  # extracts start .. today+1
    assert lab.luigi("AllHotelsPickup", "--start", str(start), "--stop", str(stop)) == 0
    capsys.readouterr()
    assert main(["plan", "hotel_pickup", "--start", str(start), "--stop", str(stop)]) == 0
    plan = capsys.readouterr().out
    assert plan.splitlines()[0] == "hotel_pickup: 0 partitions would run, 0 wait for raw data", plan
    assert f"2 of 5 dates left out ({today} .. {today + DAY}): {not_over(today)}" in plan, plan
    rows = status.collect(start, stop, ["hotel_pickup"])
    assert [(r.date, r.state) for r in rows] == [
        *((start + k * DAY, "ok") for k in range(3)),
        (today, "not over yet"),
        (today + DAY, "not over yet"),
    ]
    assert not_over(today) in rows[3].reason


def test_a_state_whose_staging_changed_before_it_ran_is_not_run_not_failed(lab, setting, capsys, caplog):
    """The staging of 09-10 changed after it was built and before the day's state ran: Luigi refuses to run the
    state (a requirement not complete at run time). Before, that was written down as the state's
    failure: status showed it failed ("Unfulfilled dependency at run time") though nothing of it had failed.
    Now it is not run (exit 25), the summary says which partition changed, and status shows it as it is."""
    import shutil

    import luigi

    from tasks.cli import main
    from tasks.hotels import StgHotelBookingsDaily

    setting("daybreak", "start_date", FIRST)
    extracts(lab)

    @StgHotelBookingsDaily.event_handler(luigi.Event.SUCCESS)
    def _resent(task):
        if task.date == FIRST:  # a file left in the partition by hand: it is stale
            folder = lab.data / "staging" / "hotel_bookings_daily" / f"business_date={FIRST}"
            shutil.copy(folder / "data.parquet", folder / "part-1.parquet")

    try:
        with caplog.at_level("INFO", logger="luigi-interface"):
            code = lab.luigi(
                "RangeDaily", "--of", "HotelBookingState", "--start", str(FIRST), "--stop", str(FIRST + DAY)
            )
    finally:
        StgHotelBookingsDaily.remove_event_handler(luigi.Event.SUCCESS, _resent)
    assert code == 25, caplog.text[-3000:]
    summary = caplog.text.split("summary of this run:")[1]
    assert "failed" not in summary, summary
    assert f"StgHotelBookingsDaily {FIRST} changed after this run built it, now stale" in summary, summary
    capsys.readouterr()
    assert main(["status", "--dataset", "hotel_booking_state", "--stop", str(FIRST + DAY)]) == 0
    shown = capsys.readouterr().out
    assert f"{FIRST} missing: no partition" in shown and "Unfulfilled" not in shown, shown
    assert lab.luigi("RangeDaily", "--of", "HotelBookingState", "--start", str(FIRST), "--stop", str(FIRST + DAY)) == 0


def test_the_plan_of_the_pickups_names_the_hotels_list_this_host_reads(lab, setting, tmp_path, capsys):
    from tasks.cli import main
    from tasks.reference import hotels

    mine = tmp_path / "my-hotels.csv"
    mine.write_text("hotel_id,name,timezone,rooms\nH1,One,America/Toronto,10\n")
    setting("hotels", "reference_file", mine)
    setting("daybreak", "start_date", FIRST)
    hotels.cache_clear()
    try:
        extracts(lab)
        capsys.readouterr()
        main(["plan", "hotel_pickup", "--start", str(FIRST), "--stop", str(FIRST + DAY)])
    finally:
        hotels.cache_clear()
    assert f"(AllHotelsPickup): every hotel of the hotels list {mine} over the range" in capsys.readouterr().out


def test_a_range_of_every_hotel_says_each_reason_it_leaves_dates_out_once(lab, setting, caplog):
    """AllHotelsPickup runs one RangeDaily per hotel over the same dates: the dates before start_date it leaves
    out are one warning, not one per hotel (docs/backfills.md: "one warning per reason")."""
    setting("daybreak", "start_date", FIRST + DAY)
    extracts(lab)
    with caplog.at_level("WARNING", logger="luigi-interface"):
        assert lab.luigi("AllHotelsPickup", "--start", str(FIRST), "--stop", str(FIRST + 4 * DAY)) == 0
    said = [r.getMessage() for r in caplog.records if "dates left out" in r.getMessage()]
    pickups = [m for m in said if m.startswith("RangeDaily HotelPickup")]
    assert len(pickups) == 1 and f"before [daybreak] start_date {FIRST + DAY}" in pickups[0], said


def test_a_plan_names_a_day_that_several_hotels_pickups_read_once(pickups_built, capsys):
    """Both hotels' extracts of one day re-sent: the pickups of both hotels may go stale, each day named once
    (``D H1, H2; D+1 H1, H2``, not ``D H1, D H2, D+1 H1, D+1 H2``)."""
    from tasks.cli import main

    day = FIRST + 2 * DAY
    write(pickups_built, day, "H1", [f"T9,H1,{day}T13:00:00-04:00,CREATED,2026-10-04,2026-10-05,1,90.00,direct"])
    write(pickups_built, day, "H2", [f"V9,H2,{day}T13:00:00-07:00,CREATED,2026-10-04,2026-10-05,1,90.00,ota"])
    capsys.readouterr()
    assert main(["plan", "stg_hotel_bookings_daily", "--start", str(day), "--stop", str(day + DAY)]) == 1
    plan = capsys.readouterr().out
    assert f"  then may go stale downstream: hotel_pickup {day} H1, H2; {day + DAY} H1, H2\n" in plan, plan
