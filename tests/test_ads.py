"""AdsDaily and AdsRolling7d through Luigi: restatements, the look-back, and what a new export rebuilds."""

from __future__ import annotations

import datetime as dt
import json
import shutil

import duckdb
import pyarrow.parquet as pq
import pytest

from tasks.settings import write_config
from tests.conftest import ads_rows

pytestmark = pytest.mark.luigi

FIRST = dt.date(2026, 9, 20)  # [daybreak] start_date in these tests
DAY = dt.timedelta(days=1)


def days(a: dt.date, b: dt.date) -> set[dt.date]:
    """a .. b inclusive."""
    return {a + k * DAY for k in range((b - a).days + 1)}


def exports(lab) -> None:
    for k in range(1, 15):  # exports 09-21 .. 10-04
        lab.ads_export(FIRST + k * DAY, FIRST)


@pytest.fixture
def ads_lab(lab, setting):
    setting("daybreak", "start_date", FIRST)
    exports(lab)
    return lab


def build_windows(lab) -> None:
    exports(lab)
    assert lab.range(FIRST, dt.date(2026, 10, 4), of="AdsRolling7d") == 0


@pytest.fixture
def ads_built(ads_lab, built_once):
    """ads_lab with ads_rolling_7d built 09-20 .. 10-03 and the ads_daily dates it reads, by a run before the test."""
    return built_once(ads_lab, "ads-rolling", build_windows)


def build_windows_to_10_05(lab) -> None:
    exports(lab)
    lab.ads_export(dt.date(2026, 10, 5), FIRST)
    assert lab.range(FIRST, dt.date(2026, 10, 5), of="AdsRolling7d") == 0


@pytest.fixture
def ads_to_10_05(ads_lab, built_once):
    """ads_built one export later: export 10-05 too, and the look-back built 09-20 .. 10-04 (10-04 needs it)."""
    return built_once(ads_lab, "ads-rolling-10-05", build_windows_to_10_05)


def snapshot(lab) -> dict:
    return {ds: lab.built_at(ds) for ds in ("staging/ads_daily", "marts/ads_rolling_7d")}


def changed(before: dict, after: dict) -> dict:
    return {ds: {d for d, t in after[ds].items() if before[ds].get(d) != t} for ds in after}


def day_rows(lab, dataset: str, columns: str, date: dt.date) -> list[tuple]:
    """``columns`` of the dataset's rows of ``date``, read with DuckDB as a user would, by campaign."""
    glob = f"{lab.data}/{dataset}/*/*.parquet"
    return duckdb.execute(
        f"select {columns} from read_parquet('{glob}', hive_partitioning=true) where business_date = ? "
        "order by campaign_id",
        [date],
    ).fetchall()


def rolling(lab, date: dt.date) -> list[tuple]:
    columns = (
        "campaign_id, spend_7d::varchar, conversions_7d, conversion_value_7d::varchar, roas_7d, cpa_7d, days_in_window"
    )
    return day_rows(lab, "marts/ads_rolling_7d", columns, date)


def test_look_back_across_a_month_end_worked_by_hand(ads_built):
    # window 09-27 .. 10-03; the newest export is min(d+7, 10-04): conversions 7,6,5,4,3,2,1 = 28
    assert rolling(ads_built, dt.date(2026, 10, 3)) == [
        ("C1", "70.00", 28, "140.00", 2.0, 2.5, 7),
        ("C2", "0.00", 28, "140.00", None, 0.0, 7),  # zero spend: no ROAS
    ]
    # before start_date nothing exists: the window of 09-22 holds 3 days, and says so
    assert rolling(ads_built, dt.date(2026, 9, 22)) == [
        ("C1", "30.00", 21, "105.00", 3.5, 30 / 21, 3),
        ("C2", "0.00", 21, "105.00", None, 0.0, 3),
    ]


def test_restatement_takes_the_newest_export_and_knows_when_it_is_final(ads_lab):
    assert ads_lab.range(FIRST, dt.date(2026, 10, 4), of="AdsDaily") == 0
    glob = f"{ads_lab.data}/staging/ads_daily/*/*.parquet"
    got = duckdb.execute(
        f"select business_date, source_export_date, conversions from read_parquet('{glob}', hive_partitioning=true) "
        f"where campaign_id = 'C1' and business_date in (DATE '2026-09-25', DATE '2026-10-01') order by 1"
    ).fetchall()
    assert got == [(dt.date(2026, 9, 25), dt.date(2026, 10, 2), 7), (dt.date(2026, 10, 1), dt.date(2026, 10, 4), 3)]
    final = {
        d: _manifest(ads_lab, "staging/ads_daily", d)["stats"]["is_final"] for d in days(FIRST, dt.date(2026, 10, 3))
    }
    assert {d for d, f in final.items() if f} == days(FIRST, dt.date(2026, 9, 27))  # export d+7 is in


def test_a_new_export_rebuilds_its_7_dates_then_the_windows_that_read_them(ads_to_10_05):
    stop = dt.date(2026, 10, 5)  # rolling built for 09-20 .. 10-04 (needs export 10-05 for 10-04)
    before = snapshot(ads_to_10_05)
    ads_to_10_05.ads_export(dt.date(2026, 10, 6), FIRST)  # restates 09-29 .. 10-05 with more conversions
    assert ads_to_10_05.range(FIRST, stop, of="AdsRolling7d") == 0
    assert changed(before, snapshot(ads_to_10_05)) == {
        "staging/ads_daily": days(dt.date(2026, 9, 29), dt.date(2026, 10, 4)),  # 10-05 was never built
        "marts/ads_rolling_7d": days(dt.date(2026, 9, 29), dt.date(2026, 10, 4)),
    }
    before = snapshot(ads_to_10_05)
    assert ads_to_10_05.range(FIRST, stop, of="AdsRolling7d") == 0
    assert changed(before, snapshot(ads_to_10_05)) == {"staging/ads_daily": set(), "marts/ads_rolling_7d": set()}


def test_a_resent_export_with_the_same_numbers_rebuilds_nothing(ads_built):
    stop = dt.date(2026, 10, 4)
    before = snapshot(ads_built)
    path = ads_built.ads_export(dt.date(2026, 10, 1), FIRST)  # the same content, written again (new mtime)
    assert path.exists()
    assert ads_built.range(FIRST, stop, of="AdsRolling7d") == 0
    got = changed(before, snapshot(ads_built))
    # its content hash is the one recorded: no date that reads it is rebuilt, so no window either
    assert got["staging/ads_daily"] == set()
    assert got["marts/ads_rolling_7d"] == set()


def test_an_export_missing_in_the_middle(ads_lab):
    shutil.rmtree(ads_lab.raw / "ads" / "2026-10-04")
    shutil.rmtree(ads_lab.raw / "ads" / "2026-10-02")
    assert ads_lab.range(FIRST, dt.date(2026, 10, 1), of="AdsDaily") == 0
    m = _manifest(ads_lab, "staging/ads_daily", dt.date(2026, 9, 28))
    assert m["stats"]["source_export_date"] == "2026-10-03"  # 10-04 missing: the newest present wins
    assert m["stats"]["exports_read"] == ["2026-09-29", "2026-09-30", "2026-10-01", "2026-10-03"]
    # 10-01: export 10-02 is missing, but 10-03 holds the date (contract section 4: the newest export of
    # d+1 .. d+7 that exists), so it is built from 10-03, the only one of its window present
    assert ads_lab.range(dt.date(2026, 10, 1), dt.date(2026, 10, 2), of="AdsDaily") == 0
    m = _manifest(ads_lab, "staging/ads_daily", dt.date(2026, 10, 1))
    assert m["stats"]["source_export_date"] == "2026-10-03"
    assert m["stats"]["exports_read"] == ["2026-10-03"]
    assert m["stats"]["is_final"] is False


def test_bad_ad_rows_are_quarantined(ads_lab, setting):
    setting("ads", "max_reject_share", 1)  # 2 of the 4 rows of 09-30 in export 10-04 are bad: kept, not failed
    rows = ads_rows(dt.date(2026, 10, 4), FIRST) + [
        "2026-09-30,C3,google,-5,1,1.00,1,1.00",
        "yesterday,C4,meta,1,1,1.00,1,1.00",
    ]
    ads_lab.ads_export(dt.date(2026, 10, 4), FIRST, rows)
    assert ads_lab.range(dt.date(2026, 9, 30), dt.date(2026, 10, 1), of="AdsDaily") == 0
    q = ads_lab.data / "quarantine/staging/ads_daily/business_date=2026-09-30/rejected.parquet"
    got = duckdb.execute(f"select source_file, row_number, reason from '{q}' order by row_number").fetchall()
    assert got == [
        ("ads/2026-10-04/ads.csv", 16, "impressions is not an integer >= 0"),
        ("ads/2026-10-04/ads.csv", 17, "date is not an ISO date"),  # unparseable: every date the export restates
    ]
    assert ads_lab.range(dt.date(2026, 9, 27), dt.date(2026, 9, 28), of="AdsDaily") == 0
    q = ads_lab.data / "quarantine/staging/ads_daily/business_date=2026-09-27/rejected.parquet"
    got = duckdb.execute(f"select source_file, row_number, reason from '{q}' order by row_number").fetchall()
    assert got == [("ads/2026-10-04/ads.csv", 17, "date is not an ISO date")]  # 09-27 is one it restates too


def test_a_row_over_two_lines_is_one_reject_of_its_own_date_alone(ads_lab, setting):
    """Export 10-04 holds C1's row of 10-03 with a line break inside its quoted channel: one row over lines
    14-15, rejected for that control character with its values, so 10-03's alone (1 of 2 rows: over
    max_reject_share until it allows it). The six other dates the export restates build without a reject."""
    export = dt.date(2026, 10, 4)
    rows = [r.replace(",google,", ',"goo\ngle",') if r.startswith("2026-10-03,C1,") else r for r in ads_rows(
        export, FIRST)]  # fmt: skip
    ads_lab.ads_export(export, FIRST, rows)
    assert ads_lab.range(dt.date(2026, 9, 27), export, of="AdsDaily") == 30  # the stop date excluded
    others = days(dt.date(2026, 9, 27), dt.date(2026, 10, 2))
    assert set(ads_lab.built_at("staging/ads_daily")) == others
    assert {d: _manifest(ads_lab, "staging/ads_daily", d)["rejected_count"] for d in others} == dict.fromkeys(others, 0)
    failure = json.loads((ads_lab.data / "_state/failures/staging/ads_daily/business_date=2026-10-03.json").read_text())
    assert "1 of 2 rows rejected" in failure["error"] and "ads/2026-10-04/ads.csv row 14: channel" in failure["error"]
    setting("ads", "max_reject_share", 0.5)
    assert ads_lab.range(dt.date(2026, 10, 3), export, of="AdsDaily") == 0
    q = ads_lab.data / "quarantine/staging/ads_daily/business_date=2026-10-03/rejected.parquet"
    got = duckdb.execute(f"select row_number, campaign_id, channel, spend from '{q}'").fetchall()
    assert got == [(14, "C1", "goo\\x0agle", "10.00")]
    assert [r[0] for r in day_rows(ads_lab, "staging/ads_daily", "campaign_id", dt.date(2026, 10, 3))] == ["C2"]


def test_a_date_the_newest_export_got_wrong_fails_and_is_never_taken_from_an_older_export(ads_lab, setting, caplog):
    """The newest export holding 09-30 (10-04) has C2's row of 09-30 mistyped: the date fails (exit 30), naming
    the file, row and reason, and keeps its previous partition, rather than lose C2 or go back to 10-03's
    numbers without a word. Allowed by ``[ads] max_reject_share``, the date is 10-04's valid rows."""
    assert ads_lab.range(dt.date(2026, 9, 30), dt.date(2026, 10, 1), of="AdsDaily") == 0
    before = ads_daily(ads_lab, dt.date(2026, 9, 30))
    rows = [r.replace(",0.00,4,", ",0.00,four,") if r.startswith("2026-09-30,C2,") else r for r in ads_rows(
        dt.date(2026, 10, 4), FIRST)]  # fmt: skip
    ads_lab.ads_export(dt.date(2026, 10, 4), FIRST, rows)
    with caplog.at_level("INFO", logger="luigi-interface"):
        assert ads_lab.luigi("AdsDaily", "--date", "2026-09-30") == 30, caplog.text[-3000:]
    assert "staging/ads_daily 2026-09-30: 1 of 2 rows rejected (50.0% > max_reject_share 5.0%)" in caplog.text
    rejects = ads_lab.data / "_state/failures/staging/ads_daily/business_date=2026-09-30.rejected.parquet"
    assert f"the previous partition is kept. All rejected rows: {rejects}" in caplog.text, caplog.text[-3000:]
    failure = json.loads(rejects.with_name("business_date=2026-09-30.json").read_text())
    assert "ads/2026-10-04/ads.csv row 9: conversions is not an integer >= 0" in failure["error"]
    assert ads_daily(ads_lab, dt.date(2026, 9, 30)) == before
    setting("ads", "max_reject_share", 0.5)
    assert ads_lab.range(dt.date(2026, 9, 30), dt.date(2026, 10, 1), of="AdsDaily") == 0
    after = ads_daily(ads_lab, dt.date(2026, 9, 30))
    assert [(r[0], r[-1]) for r in after] == [("C1", dt.date(2026, 10, 4))], after  # C2 is in the quarantine


def test_an_export_re_sent_with_its_header_only_is_warned_of_for_each_date_it_gave_rows(ads_lab, caplog, capsys):
    """Export 10-04 re-sent with its header only: 10-03 has no rows now and 09-27 .. 10-02 go back to export
    10-03's numbers, as the rules say (the newest export holding a date), and the run says so for each date,
    as status does until the export holds the dates again."""
    from tasks.cli import main

    start, stop, export = dt.date(2026, 9, 27), dt.date(2026, 10, 4), dt.date(2026, 10, 4)
    assert ads_lab.range(start, stop, of="AdsDaily") == 0
    path = ads_lab.ads_export(export, FIRST, rows=[])
    with caplog.at_level("INFO", logger="luigi-interface"):
        assert ads_lab.range(start, stop, of="AdsDaily") == 0
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "gives none now" in r.getMessage()]
    assert len(said) == 7, caplog.text[-3000:]
    assert any("2026-10-03" in w and f"{path.relative_to(ads_lab.raw)}" in w and "no rows now" in w for w in said), said
    assert any("2026-09-30" in w and "export 2026-10-03's now" in w for w in said), said
    assert ads_daily(ads_lab, dt.date(2026, 10, 3)) == []
    capsys.readouterr()
    assert main(["status", "--dataset", "ads_daily", "--json"]) == 0
    rows = {r["date"]: r for r in json.loads(capsys.readouterr().out)}
    assert all(any("gives none now" in w for w in rows[str(start + k * DAY)]["warnings"]) for k in range(7)), rows
    ads_lab.ads_export(export, FIRST)  # re-sent again, whole
    assert ads_lab.range(start, stop, of="AdsDaily") == 0
    assert main(["status", "--dataset", "ads_daily", "--json"]) == 0
    assert not any(r["warnings"] for r in json.loads(capsys.readouterr().out)), "the warnings stay once it is whole"


def _manifest(lab, dataset: str, date: dt.date) -> dict:
    return json.loads((lab.partition(date, dataset) / "_manifest.json").read_text())


def morning_of(lab, today: dt.date) -> None:
    """Yesterday's POS and hotel extract folders, which the morning refresh of ``today`` also builds."""
    lab.qsr_days(today - 2 * DAY, 2)  # POS folders today-2 .. today
    booking = f"B1,H1,{today - DAY}T12:00:00-04:00,CREATED,{today + 6 * DAY},{today + 7 * DAY},1,100.00,direct"
    lab.hotel_extract(today - DAY, "H1", [booking])


def test_morning_refresh_builds_the_last_days_and_then_runs_nothing(ads_lab):
    today = dt.date(2026, 10, 4)
    morning_of(ads_lab, today)
    assert ads_lab.luigi("MorningRefresh", "--today", str(today)) == 0
    # the last 7 ads_daily dates, the windows over each ads_daily date they read (from 09-21), and on a first
    # morning the ads_daily dates those read (from start_date, 09-20)
    assert set(ads_lab.built_at("staging/ads_daily")) == days(FIRST, dt.date(2026, 10, 3))
    assert set(ads_lab.built_at("marts/ads_rolling_7d")) == days(dt.date(2026, 9, 21), dt.date(2026, 10, 3))
    assert set(ads_lab.built_at("staging/qsr_pos")) == {dt.date(2026, 10, 3)}  # yesterday
    assert set(ads_lab.built_at("staging/hotel_bookings_daily")) == {dt.date(2026, 10, 3)}
    datasets = ("staging/ads_daily", "marts/ads_rolling_7d", "staging/qsr_pos", "staging/hotel_bookings_daily")
    before = {ds: ads_lab.built_at(ds) for ds in datasets}
    files = ads_lab.files()
    assert ads_lab.luigi("MorningRefresh", "--today", str(today)) == 0
    assert ads_lab.files() == files  # an unchanged morning runs nothing and writes nothing
    assert {ds: ads_lab.built_at(ds) for ds in before} == before


def test_morning_refresh_rebuilds_every_window_a_resent_or_late_export_changes(ads_lab):
    """Export 10-03 is re-sent with more conversions for 09-26, and export 10-02 lands two days late (the
    newest for 09-25): the refresh of 10-04 rebuilds those ads_daily dates, and every window that reads
    them (09-25 .. 10-03), not only the last 7; nothing is left stale."""
    from tasks.views import status

    today = dt.date(2026, 10, 4)
    late = ads_lab.raw / "ads" / "2026-10-02"
    shutil.rmtree(late)
    assert ads_lab.range(FIRST, today, of="AdsRolling7d") == 0
    morning_of(ads_lab, today)
    resent, day = ads_lab.raw / "ads" / "2026-10-03" / "ads.csv", dt.date(2026, 9, 26)
    resent.write_text(
        resent.read_text().replace(f"{day},C1,google,1000,50,10.00,7,", f"{day},C1,google,1000,50,10.00,107,")
    )
    ads_lab.ads_export(dt.date(2026, 10, 2), FIRST)
    assert ads_lab.luigi("MorningRefresh", "--today", str(today)) == 0
    rows = status.collect(FIRST, today, ["ads_daily", "ads_rolling_7d"])
    assert [(r.dataset, r.date, r.reason) for r in rows if r.state not in ("ok", "provisional")] == []
    daily = {
        d: dict((c, n) for c, n in day_rows(ads_lab, "staging/ads_daily", "campaign_id, conversions", d))
        for d in days(FIRST, today - DAY)
    }
    assert daily[day]["C1"] == 107 and daily[dt.date(2026, 9, 25)]["C1"] == 7
    for window in days(FIRST, today - DAY):  # each window sums its ads_daily days as they are now
        expected = sum(daily[d]["C1"] for d in days(max(FIRST, window - 6 * DAY), window))
        assert rolling(ads_lab, window)[0][:3:2] == ("C1", expected), window


def test_status_shows_a_window_waiting_for_its_upstream(ads_built):
    from tasks.views import status

    rows = status.collect(FIRST, dt.date(2026, 10, 5), ["ads_daily", "ads_rolling_7d"])
    got = {(r.dataset, r.date): (r.state, r.reason) for r in rows}
    assert got[("ads_daily", dt.date(2026, 10, 4))] == ("waiting", "raw folder missing: ads/2026-10-05")
    assert got[("ads_rolling_7d", dt.date(2026, 10, 4))] == (
        "waiting",
        "upstream staging/ads_daily 2026-10-04 waits for raw data",
    )
    # final once export d+7 is in (exports run to 10-04): ads_daily up to 09-27, and the windows of
    # only final days; later ones are up to date but provisional
    assert got[("ads_daily", dt.date(2026, 9, 27))] == ("ok", "")
    assert got[("ads_daily", dt.date(2026, 9, 28))] == ("provisional", "later exports may still restate it")
    assert got[("ads_rolling_7d", dt.date(2026, 9, 27))] == ("ok", "")
    assert got[("ads_rolling_7d", dt.date(2026, 10, 3))] == ("provisional", "later exports may still restate it")
    assert [r.state for r in rows].count("provisional") == 2 * 6  # 09-28 .. 10-03 of each


def test_plan_exits_20_when_nothing_would_run_but_a_date_waits_for_its_export(ads_built, capsys):
    """ads_daily 10-04 waits for export 10-05, and the window 10-04 for it: nothing to do but wait, the code
    of a run that waits for raw data (20), not 1 (work to do); with a partition to rebuild as well, 1."""
    from tasks.cli import main

    stop = dt.date(2026, 10, 5)
    capsys.readouterr()
    for dataset in ("ads_daily", "ads_rolling_7d"):
        assert main(["plan", dataset, "--start", str(FIRST), "--stop", str(stop)]) == 20, dataset
        out = capsys.readouterr().out
        assert out.startswith(f"{dataset}: 0 partitions would run, 1 waits for raw data\n"), out
        assert "  wait  2026-10-04  " in out, out
    shutil.rmtree(ads_built.partition(dt.date(2026, 9, 25), "staging/ads_daily"))
    assert main(["plan", "ads_daily", "--start", str(FIRST), "--stop", str(stop)]) == 1
    assert capsys.readouterr().out.startswith("ads_daily: 1 partition would run, 1 waits for raw data\n")


def test_plan_says_what_a_new_export_would_rebuild_and_what_it_makes_stale(ads_to_10_05, capsys):
    from tasks.cli import DATASET_NAMES, main
    from tasks.views import status

    assert set(status.DATASETS) <= set(DATASET_NAMES)
    stop = dt.date(2026, 10, 5)
    assert main(["plan", "ads_daily", "--start", str(FIRST), "--stop", str(stop)]) == 0  # nothing to do
    ads_to_10_05.ads_export(dt.date(2026, 10, 6), FIRST)
    capsys.readouterr()
    assert main(["plan", "ads_daily", "--start", str(FIRST), "--stop", str(stop), "--workers", "2"]) == 1
    out = capsys.readouterr().out
    assert "ads_daily: 6 partitions would run, 0 wait for raw data" in out  # 09-29 .. 10-04
    assert "run   2026-09-29 .. 2026-10-04 (6 partitions)  stale: input changed: new file ads/2026-10-06/ads.csv" in out
    # the built windows that read them: 09-29 .. 10-04 (10-05 reads 10-04 too, but was never built)
    days_listed = "2026-09-29, 2026-09-30, 2026-10-01, 2026-10-02, 2026-10-03, 2026-10-04"
    assert f"then stale downstream: ads_rolling_7d {days_listed}\n" in out
    assert "/ 2 workers" in out
    assert "mode: one run for the range (RangeSingleRun): a process per core" in out
    assert f"run:  luigi --module tasks RangeSingleRun --of AdsDaily --start {FIRST} --stop {stop} --local" in out
    capsys.readouterr()
    assert main(["plan", "ads_daily", "--start", str(FIRST), "--stop", str(stop)]) == 1
    assert "mode: one run for the range (RangeSingleRun): one worker" in capsys.readouterr().out


def test_an_export_with_one_changed_number_rewrites_that_date_and_its_windows(ads_built):
    stop = dt.date(2026, 10, 4)
    data = {
        ds: {d: (ads_built.partition(d, ds) / "data.parquet").stat().st_mtime_ns for d in days(FIRST, stop - DAY)}
        for ds in ("staging/ads_daily", "marts/ads_rolling_7d")
    }
    rows = ads_rows(dt.date(2026, 10, 4), FIRST)  # the newest export of 09-27 .. 10-03
    rows = [
        r.replace(",C1,google,1000,50,10.00,", ",C1,google,1000,50,12.00,") if r.startswith("2026-09-30") else r
        for r in rows
    ]
    ads_built.ads_export(dt.date(2026, 10, 4), FIRST, rows)
    assert ads_built.range(FIRST, stop, of="AdsRolling7d") == 0
    rewritten = {
        ds: {d for d, m in by_date.items() if (ads_built.partition(d, ds) / "data.parquet").stat().st_mtime_ns != m}
        for ds, by_date in data.items()
    }
    # the 7 dates that read the export are rebuilt; only 09-30's rows changed, so only its data file is
    # rewritten, and only the windows that hold 09-30
    assert rewritten == {
        "staging/ads_daily": {dt.date(2026, 9, 30)},
        "marts/ads_rolling_7d": days(dt.date(2026, 9, 30), dt.date(2026, 10, 3)),
    }
    assert rolling(ads_built, dt.date(2026, 9, 30))[0][1] == "72.00"


def test_a_version_of_an_older_kind_rebuilds_the_readers_once_when_its_partition_is_rebuilt(ads_built):
    """Manifests as an older release wrote them (data_version = the sha256 of the Parquet bytes, no kind, no
    input hashes) and windows that recorded those versions: nothing is rebuilt while they stand. Once an
    export is touched, its dates are rebuilt with versions of today's kind, which no window recorded: each
    window over them is rebuilt once, and the next run rebuilds nothing (docs/run-semantics.md)."""
    stop = dt.date(2026, 10, 4)
    byte_versions = {}
    for path in (ads_built.data / "staging/ads_daily").glob("*/_manifest.json"):
        m = json.loads(path.read_text())
        byte_versions[m["task_id"]] = m["data_version"] = m["data_files"][0]["sha256"]
        del m["data_version_kind"], m["input_hashes"], m["inputs_listed_ns"]
        path.write_text(json.dumps(m))
    for path in (ads_built.data / "marts/ads_rolling_7d").glob("*/_manifest.json"):
        m = json.loads(path.read_text())
        m["upstream"] = {task_id: byte_versions[task_id] for task_id in m["upstream"]}
        path.write_text(json.dumps(m))
    before = snapshot(ads_built)
    assert ads_built.range(FIRST, stop, of="AdsRolling7d") == 0
    assert changed(before, snapshot(ads_built)) == {"staging/ads_daily": set(), "marts/ads_rolling_7d": set()}
    touched = ads_built.ads_export(dt.date(2026, 10, 1), FIRST)  # same content, new mtime: no hashes to compare
    assert touched.exists()
    assert ads_built.range(FIRST, stop, of="AdsRolling7d") == 0
    got = changed(before, snapshot(ads_built))
    assert got["staging/ads_daily"] == days(dt.date(2026, 9, 24), dt.date(2026, 9, 30))  # rebuilt once
    assert got["marts/ads_rolling_7d"] == days(dt.date(2026, 9, 24), dt.date(2026, 10, 3))  # their readers once
    again = snapshot(ads_built)
    assert ads_built.range(FIRST, stop, of="AdsRolling7d") == 0
    assert changed(again, snapshot(ads_built)) == {"staging/ads_daily": set(), "marts/ads_rolling_7d": set()}


# -- contract section 4: the newest export of d+1 .. d+7 that exists, whichever those are ---------------
def ads_daily(lab, date: dt.date) -> list[tuple]:
    columns = "campaign_id, channel, impressions, clicks, spend::varchar, conversions, conversion_value::varchar"
    columns += ", source_export_date"
    return day_rows(lab, "staging/ads_daily", columns, date)


@pytest.fixture
def sparse_lab(lab, setting):
    """start_date 09-20 and one export only, 09-23 (it restates 09-20 .. 09-22: 09-16 .. 09-19 are before
    start_date): exports d+1 and d+2 of 09-20 are missing."""
    setting("daybreak", "start_date", FIRST)
    lab.ads_export(dt.date(2026, 9, 23), FIRST)
    return lab


def test_a_date_is_built_from_a_later_export_when_d_plus_1_and_d_plus_2_are_missing(sparse_lab):
    lab, export = sparse_lab, dt.date(2026, 9, 23)
    assert lab.luigi("AdsDaily", "--date", str(FIRST)) == 0  # the audit's repro: it used to wait for 09-21
    # export 09-23 reports date 09-20 with 3 conversions (its conversions are export - date), 5.00 each
    assert ads_daily(lab, FIRST) == [
        ("C1", "google", 1000, 50, "10.00", 3, "15.00", export),
        ("C2", "google", 1000, 50, "0.00", 3, "15.00", export),
    ]
    stats = _manifest(lab, "staging/ads_daily", FIRST)["stats"]
    assert (stats["source_export_date"], stats["exports_read"]) == ("2026-09-23", ["2026-09-23"])
    assert stats["is_final"] is False  # export 09-27 (d+7) has not arrived
    assert lab.range(FIRST, dt.date(2026, 9, 23), of="AdsRolling7d") == 0  # 09-21 (d+2) and 09-22 (d+1) too
    assert [r[5] for r in ads_daily(lab, dt.date(2026, 9, 21))] == [2, 2]
    # 09-20 .. 09-22: C1 10.00 a day, 3 + 2 + 1 conversions of 5.00; ROAS 30 / 30, CPA 30 / 6
    assert rolling(lab, dt.date(2026, 9, 22)) == [
        ("C1", "30.00", 6, "30.00", 1.0, 5.0, 3),
        ("C2", "0.00", 6, "30.00", None, 0.0, 3),
    ]


def test_an_older_export_arriving_late_rebuilds_the_date_to_the_same_rows_and_nothing_downstream(sparse_lab):
    lab = sparse_lab
    stop = dt.date(2026, 9, 23)
    assert lab.range(FIRST, stop, of="AdsRolling7d") == 0
    data_file = lab.partition(FIRST, "staging/ads_daily") / "data.parquet"
    rows, written = ads_daily(lab, FIRST), data_file.stat().st_mtime_ns
    before = snapshot(lab)
    lab.ads_export(dt.date(2026, 9, 21), FIRST)  # d+1 of 09-20, late: it holds only 09-20 (1 conversion)
    assert lab.range(FIRST, stop, of="AdsRolling7d") == 0
    # 09-20 reads the new export, so it is rebuilt; 09-23 is newer and still wins: the same rows, so its
    # data file is not rewritten and no window is rebuilt (early cutoff); 09-21 and 09-22 never read it
    assert changed(before, snapshot(lab)) == {"staging/ads_daily": {FIRST}, "marts/ads_rolling_7d": set()}
    assert ads_daily(lab, FIRST) == rows
    assert data_file.stat().st_mtime_ns == written
    stats = _manifest(lab, "staging/ads_daily", FIRST)["stats"]
    assert (stats["source_export_date"], stats["exports_read"]) == ("2026-09-23", ["2026-09-21", "2026-09-23"])


@pytest.mark.system
def test_a_date_with_no_export_in_d_plus_1_to_d_plus_7_waits_for_d_plus_1(lab, setting):
    setting("daybreak", "start_date", FIRST)
    day = dt.date(2026, 9, 21)
    lab.ads_export(day, FIRST)  # export d: it restates the days before d, not d
    lab.ads_export(day + 8 * DAY, FIRST)  # export d+8: 09-22 .. 09-28, not d
    cfg = write_config(lab.root / "ads.cfg", {"daybreak": {"raw_root": lab.raw, "data_root": lab.data}})
    proc = lab.cli("AdsDaily", "--date", str(day), "--local-scheduler", env={"LUIGI_CONFIG_PATH": str(cfg)})
    assert proc.returncode == 20, proc.stderr[-3000:]
    assert f"waiting  for raw folder {lab.raw}/ads/2026-09-22/ (not there yet): AdsDaily 2026-09-21" in proc.stderr
    assert not lab.partition(day, "staging/ads_daily").exists()
    # a range: 09-21 still waits; 09-20 is built from 09-21 (its d+1), 09-22 from 09-29 (its d+7: final)
    assert lab.range(FIRST, day + 2 * DAY, of="AdsDaily") == 20
    assert set(lab.built_at("staging/ads_daily")) == {FIRST, day + DAY}
    assert [r[5:] for r in ads_daily(lab, FIRST)] == [(1, "5.00", day)] * 2
    assert [r[5:] for r in ads_daily(lab, day + DAY)] == [(7, "35.00", day + 8 * DAY)] * 2
    assert _manifest(lab, "staging/ads_daily", day + DAY)["stats"]["is_final"] is True


def test_status_plan_and_both_checks_agree_on_a_window_with_gaps(sparse_lab, capsys):
    from tasks.ads import AdsDaily
    from tasks.cli import main
    from tasks.views import status

    lab, stop = sparse_lab, dt.date(2026, 9, 25)
    dates = sorted(days(FIRST, stop - DAY))

    def states() -> dict:
        return {r.date: (r.state, r.reason) for r in status.collect(FIRST, stop, ["ads_daily"])}

    waiting = {
        dt.date(2026, 9, 23): ("waiting", "raw folder missing: ads/2026-09-24"),  # 09-24 .. 09-30: none yet
        dt.date(2026, 9, 24): ("waiting", "raw folder missing: ads/2026-09-25"),
    }
    buildable = {dt.date(2026, 9, 20) + k * DAY: ("missing", "no partition") for k in range(3)}
    assert states() == {**buildable, **waiting}
    assert main(["plan", "ads_daily", "--start", str(FIRST), "--stop", str(stop)]) == 1
    assert "ads_daily: 3 partitions would run, 2 wait for raw data" in capsys.readouterr().out
    assert lab.range(FIRST, stop, of="AdsDaily") == 20  # the two waiting dates
    provisional = ("provisional", "later exports may still restate it")
    assert states() == {**{d: provisional for d in buildable}, **waiting}
    done = [d for d in dates if AdsDaily(date=d).complete()]
    assert AdsDaily.bulk_complete(iter(dates)) == done == sorted(buildable)
    lab.ads_export(dt.date(2026, 9, 27), FIRST)  # d+7 of 09-20: it becomes final; 09-23 and 09-24 buildable
    got = states()
    assert got[FIRST] == ("stale", "input changed: new file ads/2026-09-27/ads.csv")
    assert got[dt.date(2026, 9, 23)] == got[dt.date(2026, 9, 24)] == ("missing", "no partition")
    assert lab.range(FIRST, stop, of="AdsDaily") == 0
    got = states()
    assert got[FIRST] == ("ok", "")
    assert {got[d][0] for d in dates[1:]} == {"provisional"}
    assert [r[5:] for r in ads_daily(lab, FIRST)] == [(7, "35.00", dt.date(2026, 9, 27))] * 2


def test_a_deleted_ads_daily_date_is_what_plan_says_runs_and_its_windows_may_run(ads_lab, capsys):
    """The windows that read a deleted ads_daily date read it unchanged once it is rebuilt: the plan of the windows
    names that date as the upstream that runs, and says the windows may run; status calls them pending."""
    from tasks.cli import main
    from tasks.views import status

    stop = FIRST + 10 * DAY
    assert ads_lab.range(FIRST, stop, of="AdsRolling7d") == 0
    gone = FIRST + 3 * DAY
    shutil.rmtree(ads_lab.partition(gone, "staging/ads_daily"))
    capsys.readouterr()
    assert main(["plan", "ads_rolling_7d", "--start", str(FIRST), "--stop", str(stop)]) == 1
    plan = capsys.readouterr().out
    head = "ads_rolling_7d: 0 partitions would run, 7 may run once their upstream is rebuilt, 0 wait for raw data"
    assert plan.splitlines()[0] == head, plan
    assert f"  first ads_daily {gone}  missing: no partition" in plan, plan
    root = f"may rebuild once its upstream is rebuilt: staging/ads_daily {gone} (missing: no partition)"
    assert f"  may   {gone} .. {gone + 6 * DAY} (7 partitions): {root}" in plan, plan
    rows = status.collect(FIRST, stop, ["ads_rolling_7d"])
    assert {r.date for r in rows if r.state == "pending"} == days(gone, gone + 6 * DAY)
    assert not [r for r in rows if r.state == "stale"]
    before = snapshot(ads_lab)
    assert ads_lab.range(FIRST, stop, of="AdsRolling7d") == 0
    assert changed(before, snapshot(ads_lab)) == {"staging/ads_daily": {gone}, "marts/ads_rolling_7d": set()}


def test_an_export_folder_without_its_file_yet_is_no_export_the_date_waits(lab, setting, capsys, caplog):
    """Folder ads/d+1 made before its ads.csv is written: no export holds date d yet, so d waits (exit 20) and
    status says so, instead of building d with no rows (and a 7-day window that silently misses a day)."""
    from tasks.cli import main

    setting("daybreak", "start_date", FIRST)
    lab.ads_export(FIRST + DAY, FIRST)  # export 09-21: restates 09-20
    day = FIRST + DAY
    (lab.raw / "ads" / str(day + DAY)).mkdir()  # export 09-22 on its way: the folder, not its file
    with caplog.at_level("INFO", logger="luigi-interface"):
        assert lab.range(FIRST, day + DAY, of="AdsDaily") == 20
    assert f"for raw folder {lab.raw}/ads/{day + DAY}/ (there, without its ads.csv yet)" in caplog.text
    assert set(lab.built_at("staging/ads_daily")) == {FIRST}
    assert main(["status", "--dataset", "ads_daily", "--start", str(FIRST), "--stop", str(day + DAY)]) == 0
    shown = capsys.readouterr().out
    assert f"{day} waiting: raw folder missing: ads/{day + DAY} (there, without its ads.csv yet)" in shown, shown
    lab.ads_export(day + DAY, FIRST)  # its file lands
    assert lab.range(FIRST, day + DAY, of="AdsDaily") == 0
    assert [r[5:] for r in ads_daily(lab, day)] == [(1, "5.00", day + DAY)] * 2


def test_plan_of_the_windows_names_the_later_windows_the_upstream_it_rebuilds_first_may_make_stale(ads_built, capsys):
    """A changed row of 09-24 in export 10-01, the newest that holds it: planning the windows 09-22 .. 09-25
    rebuilds ads_daily 09-24 and 09-25 (export 10-01 restates it too) first, which the windows up to 10-01 also
    read. Those past the range are named as ones that may go stale; the run makes the ones that read 09-24,
    whose numbers changed, stale."""
    from tasks.cli import main

    day = dt.date(2026, 9, 24)
    newest = day + 7 * DAY  # 10-01: the newest export that holds 09-24
    path = ads_built.raw / "ads" / str(newest) / "ads.csv"
    path.write_text(path.read_text().replace(f"{day},C1,google,1000,50,10.00,", f"{day},C1,google,1000,50,99.00,"))
    capsys.readouterr()
    args = ["--start", str(day - 2 * DAY), "--stop", str(day + 2 * DAY)]  # windows 09-22 .. 09-25
    assert main(["plan", "ads_rolling_7d", *args]) == 1
    plan = capsys.readouterr().out
    later = ", ".join(str(day + k * DAY) for k in range(2, 8))  # 09-26 .. 10-01 read 09-24 or 09-25
    assert f"  then may go stale downstream: ads_rolling_7d {later}" in plan, plan
    assert ads_built.range(day - 2 * DAY, day + 2 * DAY, of="AdsRolling7d") == 0
    from tasks.views import status

    rows = status.collect(day + 2 * DAY, day + 7 * DAY, ["ads_rolling_7d"])
    assert {r.date for r in rows if r.state == "stale"} == {day + k * DAY for k in range(2, 7)}


def test_a_later_start_date_rebuilds_only_the_windows_it_cuts(ads_built, setting):
    """start_date moves from 09-20 to 09-22: the windows up to 09-27 lose a day or two and are rebuilt; those
    from 09-28 on (09-22 .. 09-28 and later) read the same days as before and are kept. A window records
    start_date only where it cuts it: the reason says the new value, and does not call the old one none."""
    stop = dt.date(2026, 10, 4)
    before = snapshot(ads_built)
    later = FIRST + 2 * DAY
    setting("daybreak", "start_date", later)
    from tasks.views import status

    reasons = {r.date: r.reason for r in status.collect(later, stop, ["ads_rolling_7d"])}
    assert f"its window now cut by start_date '{later}'" in reasons[dt.date(2026, 9, 27)], reasons
    assert "(none)" not in reasons[dt.date(2026, 9, 27)], reasons
    assert ads_built.range(later, stop, of="AdsRolling7d") == 0
    assert changed(before, snapshot(ads_built))["marts/ads_rolling_7d"] == days(later, dt.date(2026, 9, 27))
    assert [r[-1] for r in rolling(ads_built, dt.date(2026, 9, 27))] == [6, 6]  # 09-22 .. 09-27
    setting("daybreak", "start_date", FIRST)  # back: 09-27's window is whole again
    reasons = {r.date: r.reason for r in status.collect(FIRST, stop, ["ads_rolling_7d"])}
    assert f"its window no longer cut by start_date '{later}'" in reasons[dt.date(2026, 9, 27)], reasons
    assert "(none)" not in reasons[dt.date(2026, 9, 27)], reasons


def test_a_window_over_a_failed_day_says_the_day_failed_in_status_and_plan(ads_built, capsys):
    """The newest export (10-04) loses its spend column: the days it is the newest for fail, and the windows
    that read them say their day failed, with the error, not that it is merely stale."""
    from tasks.cli import main

    stop = dt.date(2026, 10, 4)
    path = ads_built.raw / "ads" / "2026-10-04" / "ads.csv"  # the newest export: it alone holds 10-03
    path.write_text(path.read_text().replace("spend", "spent", 1))
    assert ads_built.range(FIRST, stop, of="AdsRolling7d") == 30
    error = "ads/2026-10-04/ads.csv: missing column 'spend'"
    capsys.readouterr()
    assert main(["status", "--dataset", "ads_rolling_7d", "--start", str(FIRST), "--stop", str(stop)]) == 0
    shown = capsys.readouterr().out
    pending = f"pending: may rebuild once its upstream is rebuilt: staging/ads_daily 2026-09-27 (failed: {error} ("
    assert f"2026-09-27 .. 2026-10-03 (7 days) {pending}" in shown, shown
    assert main(["plan", "ads_rolling_7d", "--start", str(FIRST), "--stop", str(stop)]) == 1
    plan = capsys.readouterr().out
    assert f"failed: {error}" in plan and "stale: input content changed" not in plan, plan
    shutil.rmtree(ads_built.partition(stop - DAY, "marts/ads_rolling_7d"))  # a window never built: missing
    assert main(["status", "--dataset", "ads_rolling_7d", "--start", str(FIRST), "--stop", str(stop)]) == 0
    missing = f"{stop - DAY} missing: no partition; upstream staging/ads_daily 2026-09-27 (failed: {error} ("
    assert missing in capsys.readouterr().out


def test_a_touched_export_is_kept_for_every_date_that_reads_it_provisional_ones_included(ads_built, capsys):
    """Export 10-01 touched (same content) is read by 09-24 .. 09-30, six of them still provisional: plan and
    status count all seven as same content, nothing to rebuild."""
    import os

    from tasks.cli import main

    stop = dt.date(2026, 10, 4)
    path = ads_built.raw / "ads" / "2026-10-01" / "ads.csv"
    os.utime(path, (path.stat().st_atime + 60, path.stat().st_mtime + 60))
    capsys.readouterr()
    assert main(["plan", "ads_daily", "--start", str(FIRST), "--stop", str(stop)]) == 0
    plan = capsys.readouterr().out
    assert "  keep  2026-09-24 .. 2026-09-30  7 partitions: metadata changed, content identical" in plan, plan
    assert main(["status", "--dataset", "ads_daily", "--start", str(FIRST), "--stop", str(stop)]) == 0
    shown = capsys.readouterr().out
    assert "  7 up to date, metadata changed, content identical (2026-09-24 .. 2026-09-30)" in shown, shown


@pytest.mark.system
def test_a_file_of_a_window_not_read_is_warned_of_once_a_run(ads_built):
    """Export 10-05 still uploading (ads.csv.part): each up-to-date date whose window holds it is warned of
    once. Before, each warning came twice: once from the run's check, again while its summary was made."""
    part = ads_built.raw / "ads" / "2026-10-05" / "ads.csv.part"
    part.parent.mkdir()
    part.write_text("date,campaign_id\n")
    sections = {"daybreak": {"raw_root": ads_built.raw, "data_root": ads_built.data, "start_date": FIRST}}
    cfg = write_config(ads_built.root / "ads.cfg", sections)
    args = ("RangeDaily", "--of", "AdsRolling7d", "--start", "2026-09-28", "--stop", "2026-10-05", "--local-scheduler")
    proc = ads_built.cli(*args, env={"LUIGI_CONFIG_PATH": str(cfg)})
    assert proc.returncode == 20, proc.stderr[-3000:]  # 10-04 waits for its export
    warned = [line.split(":")[1].strip() for line in proc.stderr.splitlines() if "not in its manifest" in line]
    assert warned == [f"staging/ads_daily {d}" for d in sorted(days(dt.date(2026, 9, 28), dt.date(2026, 10, 3)))]


def test_no_quarantine_folder_is_left_for_a_date_without_rejects(ads_lab, setting):
    """A reader's glob of the quarantine finds no empty folder: a date without rejects makes none, and a
    date whose rejects are gone, or that an older release left an empty folder for, loses it."""
    setting("ads", "max_reject_share", 1)
    quarantine = ads_lab.data / "quarantine" / "staging" / "ads_daily"
    assert ads_lab.range(FIRST, dt.date(2026, 10, 4), of="AdsDaily") == 0
    assert not quarantine.exists()
    (quarantine / "business_date=2026-10-02").mkdir(parents=True)  # as an older release left it
    rows = ads_rows(dt.date(2026, 10, 4), FIRST)
    ads_lab.ads_export(dt.date(2026, 10, 4), FIRST, [*rows, "2026-10-03,C3,google,x,1,1.00,1,1.00"])
    # 10-02 rebuilt to the same rows (its manifest alone is written), 10-03 with a reject
    assert ads_lab.range(dt.date(2026, 10, 2), dt.date(2026, 10, 4), of="AdsDaily") == 0
    assert [p.name for p in quarantine.iterdir()] == ["business_date=2026-10-03"]
    ads_lab.ads_export(dt.date(2026, 10, 4), FIRST, rows)
    assert ads_lab.range(dt.date(2026, 10, 3), dt.date(2026, 10, 4), of="AdsDaily") == 0
    assert list(quarantine.iterdir()) == []  # rewritten without rejects


def test_a_start_date_moved_back_in_luigi_cfg_rebuilds_the_windows_it_had_cut(ads_built, tmp_path, capsys):
    """start_date moved to 09-22 in luigi.cfg, then back to 09-20: before, the windows it had cut were called
    'built by a newer version or settings' and kept cut (a window's rules name start_date only where it cuts
    it, so moving it back was not seen as a change of this host's settings). Now they are rebuilt whole."""
    import os
    import time

    from tasks.cli import main
    from tasks.settings import write_config

    stop, later, now = dt.date(2026, 10, 4), FIRST + 2 * DAY, time.time()
    cfg, folder = tmp_path / "host.cfg", tmp_path / "host"
    folder.mkdir()

    def start_date(day: dt.date, age_s: float) -> None:
        write_config(cfg, {"daybreak": {"raw_root": ads_built.raw, "data_root": ads_built.data, "start_date": day}})
        os.utime(cfg, (now - age_s, now - age_s))

    start_date(FIRST, 300)  # as built: this host sees its settings
    with ads_built.host(cfg, folder):
        assert ads_built.range(FIRST, stop, of="AdsRolling7d") == 0
    start_date(later, 200)
    with ads_built.host(cfg, folder):
        assert ads_built.range(later, stop, of="AdsRolling7d") == 0
    assert [r[-1] for r in rolling(ads_built, dt.date(2026, 9, 27))] == [6, 6]
    start_date(FIRST, 100)  # back
    capsys.readouterr()
    with ads_built.host(cfg, folder):
        assert main(["plan", "ads_rolling_7d", "--start", str(FIRST), "--stop", str(stop)]) == 1
        plan = capsys.readouterr().out
        assert f"its window no longer cut by start_date '{later}'" in plan, plan
        assert ads_built.range(FIRST, stop, of="AdsRolling7d") == 0
    assert [r[-1] for r in rolling(ads_built, dt.date(2026, 9, 27))] == [7, 7]


def test_an_exports_rejects_are_in_file_order_and_its_failure_names_the_first(ads_lab, setting):
    """A row the reader takes out (a line break in a quoted field) above a row a rule rejects: before, the
    failure named the lower row as its first reject and the quarantine held it first."""
    export = dt.date(2026, 10, 4)
    rows = ads_rows(export, FIRST)
    first = rows.index(next(r for r in rows if r.startswith("2026-09-30,C1,")))
    rows[first] = rows[first].replace(",google,", ',"goo\ngle",')
    rows.append("2026-09-30,C3,google,-5,1,1.00,1,1.00")
    ads_lab.ads_export(export, FIRST, rows)
    assert ads_lab.range(dt.date(2026, 9, 30), dt.date(2026, 10, 1), of="AdsDaily") == 30
    failure = json.loads((ads_lab.data / "_state/failures/staging/ads_daily/business_date=2026-09-30.json").read_text())
    row = first + 2  # the header is row 1
    assert f"ads/2026-10-04/ads.csv row {row}: channel" in failure["error"], failure["error"]
    setting("ads", "max_reject_share", 1)
    assert ads_lab.range(dt.date(2026, 9, 30), dt.date(2026, 10, 1), of="AdsDaily") == 0
    q = ads_lab.data / "quarantine/staging/ads_daily/business_date=2026-09-30/rejected.parquet"
    assert [r["row_number"] for r in pq.read_table(q).to_pylist()] == [row, len(rows) + 2]
