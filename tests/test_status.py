"""The partition status view reads manifests, failure records and raw listings: one state per day."""

from __future__ import annotations

import datetime as dt
import json
import shutil

import pytest

from tasks.cli import main
from tasks.views import status, status_html

pytestmark = pytest.mark.luigi

START = dt.date(2026, 9, 10)


def test_each_state_with_its_reason(lab, qsr_setting, capsys):
    lab.qsr_days(START, 6)
    lab.range(START, START + dt.timedelta(days=5))
    shutil.rmtree(lab.partition(START + dt.timedelta(days=1)))  # missing
    lab.qsr_file((START + dt.timedelta(days=3)).isoformat(), "S042", [])  # stale: days 2 and 3
    lab.qsr_file(START.isoformat(), "S001", ["Q,1,S001,2026-09-10T12:00:00-04:00,COLA,zero,1.00,,COMPLETED"])
    assert lab.range(START, START + dt.timedelta(days=1)) == 30  # day 0 fails: 1 of 3 rows rejected
    shutil.rmtree(lab.raw / "qsr_pos" / (START + dt.timedelta(days=6)).isoformat())  # day 5 waits for raw

    rows = status.collect(START, START + dt.timedelta(days=6), ["stg_qsr_pos"])
    got = {(r.date - START).days: (r.state, r.reason) for r in rows}
    assert got[0][0] == "failed" and "row 2: qty is not an integer >= 1" in got[0][1]
    assert got[1] == ("missing", "no partition")
    assert got[2] == ("stale", "input changed: new file qsr_pos/2026-09-13/S042.csv")
    assert got[3] == ("stale", "input changed: new file qsr_pos/2026-09-13/S042.csv")
    assert got[4] == ("ok", "")
    assert got[5] == ("waiting", "raw folder missing: qsr_pos/2026-09-16")

    qsr_setting("suspicious_qty_threshold", 7)
    assert status.collect(START + dt.timedelta(days=4), START + dt.timedelta(days=5), ["stg_qsr_pos"])[0].reason == (
        "rules changed: suspicious_qty_threshold 20 -> 7"
    )
    # the failure of day 0 was under the old rules: under the new ones it no longer applies
    assert status.collect(START, START + dt.timedelta(days=1), ["stg_qsr_pos"])[0].state == "stale"
    qsr_setting("suspicious_qty_threshold", 20)  # back to the rules of the failed attempt

    assert (
        main(
            [
                "status",
                "--dataset",
                "stg_qsr_pos",
                "--start",
                str(START),
                "--stop",
                str(START + dt.timedelta(days=6)),
                "--json",
            ]
        )
        == 0
    )
    as_json = json.loads(capsys.readouterr().out)
    assert [r["state"] for r in as_json] == ["failed", "missing", "stale", "stale", "ok", "waiting"]

    assert (
        main(["status", "--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(START + dt.timedelta(days=6))])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    legend = "legend: # ok  p provisional  s stale  ? pending  n newer  . missing  w waiting  F failed  - not over yet"
    assert lines[0] == legend
    assert lines[1:4] == [
        "stg_qsr_pos  2026-09-10 .. 2026-09-15",
        "  F.ss#w",  # one character per day, in date order
        "  1 ok, 2 stale, 1 missing, 1 waiting, 1 failed",
    ]
    # then a line per day that needs attention, with its reason; a reason over 300 characters (the
    # failure names the quarantine's full path) is cut at a word boundary for display, ` ...` after it
    attention = [r for r in as_json if r["state"] != "ok"]
    assert attention[2]["reason"] == attention[3]["reason"]  # 09-12 and 09-13: one line
    assert [line.split(":", 1)[0] for line in lines[4:]] == [
        f"  {attention[0]['date']} failed",
        f"  {attention[1]['date']} missing",
        f"  {attention[2]['date']} .. {attention[3]['date']} (2 days) stale",
        f"  {attention[4]['date']} waiting",
    ]
    for line, r in zip(lines[4:], [attention[0], attention[1], attention[2], attention[4]], strict=True):
        shown = line.split(": ", 1)[1]
        if len(r["reason"]) <= 300:
            assert shown == r["reason"]
        else:
            assert len(shown) <= 300 and shown.endswith(" ...")
            kept = shown.removesuffix(" ...")
            assert r["reason"].startswith(kept) and r["reason"][len(kept)] == " "
    assert len(as_json[0]["reason"]) > 300  # the failed day's reason, whole in JSON, is shortened here


def test_missing_days_get_a_reason_line_each_run_of_them_one_line(lab, setting, capsys):
    """Three years never built (their raw folders there), then days deleted here and there: one line per
    run of consecutive missing days, not one per day; days before start_date say no run builds them."""
    first = START - 3 * 365 * DAY
    setting("daybreak", "start_date", first)
    lab.qsr_days(first, (START - first).days + 6, stores=("S001",))
    assert lab.range(START, START + 6 * DAY) == 0
    for day in (START + DAY, START + 3 * DAY, START + 4 * DAY):
        shutil.rmtree(lab.partition(day))
    capsys.readouterr()
    assert main(["status", "--dataset", "stg_qsr_pos", "--start", str(first), "--stop", str(START + 6 * DAY)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-4:] == [
        f"  3 ok, {3 * 365 + 3} missing",
        f"  {first} .. {START - DAY} ({3 * 365} days) missing: no partition",
        f"  {START + DAY} missing: no partition",
        f"  {START + 3 * DAY} .. {START + 4 * DAY} (2 days) missing: no partition",
    ]
    assert len(lines) < 30
    setting("daybreak", "start_date", START)
    assert main(["status", "--dataset", "stg_qsr_pos", "--start", str(first), "--stop", str(START + 2 * DAY)]) == 0
    assert capsys.readouterr().out.splitlines()[-3:] == [
        f"  1 ok, {3 * 365 + 1} missing",
        f"  {first} .. {START - DAY} ({3 * 365} days) missing: before [daybreak] start_date {START}: not built; "
        "a run builds no date before it",
        f"  {START + DAY} missing: no partition",
    ]


def test_a_later_success_clears_the_failure(lab):
    lab.qsr_days(START, 1, stores=("S001",))
    good = (lab.raw / "qsr_pos" / START.isoformat() / "S001.csv").read_text()
    lab.qsr_file(START.isoformat(), "S001", ["Q,1,S001,2026-09-10T12:00:00-04:00,COLA,zero,1.00,,COMPLETED"])
    assert lab.range(START, START + dt.timedelta(days=1)) == 30
    assert status.collect(START, START + dt.timedelta(days=1), ["stg_qsr_pos"])[0].state == "failed"
    (lab.raw / "qsr_pos" / START.isoformat() / "S001.csv").write_text(good)
    assert lab.range(START, START + dt.timedelta(days=1)) == 0
    assert [r.state for r in status.collect(START, START + dt.timedelta(days=1), ["stg_qsr_pos"])] == ["ok"]
    assert not (lab.data / "_state/failures/staging/qsr_pos/business_date=2026-09-10.json").exists()


def test_the_json_view_is_json_dumps_with_indent_one():
    from dataclasses import asdict

    rows = [
        status.DayStatus("stg_qsr_pos", START, "ok", "", 12, 0.25),
        status.DayStatus(
            "stg_qsr_pos", START, "stale", 'input "changed": caf\u00e9 \u2192 \U0001f600\n\ttab', None, None
        ),
        status.DayStatus("stg_qsr_pos", START, "ok", "", 0, 1e-05, ("qsr_pos/x.txt (name)", 'b"\\.csv (r\u00e9)')),
        status.DayStatus("otb_by_stay_date", None, "missing", "no partition", 10**12, 123456.789),
        status.DayStatus(
            "stg_qsr_pos", START, "ok", "", 3, 0.5, raw_folders={"2026-09-10": "shared", "2026-09-11": "checked"}
        ),
    ]
    for some in ([], rows[:1], rows):
        expected = json.dumps([{**asdict(r), "date": r.date and r.date.isoformat()} for r in some], indent=1)
        assert status.render_json(some) == expected


DAY = dt.timedelta(days=1)
REPEATED_QTY = "order_id,line_no,store_id,ordered_at,sku,qty,unit_price,discount,status,qty"


def status_json(capsys, start: dt.date, stop: dt.date) -> dict[dt.date, tuple[str, str]]:
    """(state, reason) by date, as ``daybreak status --json`` gives them for stg_qsr_pos."""
    capsys.readouterr()
    assert main(["status", "--dataset", "stg_qsr_pos", "--start", str(start), "--stop", str(stop), "--json"]) == 0
    return {dt.date.fromisoformat(r["date"]): (r["state"], r["reason"]) for r in json.loads(capsys.readouterr().out)}


def test_a_built_partition_whose_raw_folder_is_gone_is_kept_as_built_and_says_so(lab, capsys):
    """Partition d reads folders d and d+1: with d+1 gone (an archive job), no run can check or rebuild d, and
    the one in place is the best data there is: it is ok, kept as built, and status and plan say which folder
    is gone; the run builds nothing and exits 0 (before: it waited for the folder, exit 20, and so did every
    partition that read it)."""
    lab.qsr_days(START, 2)  # folders START .. START+2
    assert lab.range(START, START + 2 * DAY) == 0
    shutil.rmtree(lab.raw / "qsr_pos" / str(START + 2 * DAY))
    got = status_json(capsys, START, START + 2 * DAY)
    assert got[START] == ("ok", "")
    state, reason = got[START + DAY]
    assert state == "ok" and f"raw folder gone: qsr_pos/{START + 2 * DAY}" in reason and "kept as built" in reason
    assert main(["plan", "stg_qsr_pos", "--start", str(START), "--stop", str(START + 2 * DAY)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "stg_qsr_pos: 0 partitions would run, 0 wait for raw data"
    built = lab.built_at()
    assert lab.range(START, START + 2 * DAY) == 0
    assert lab.built_at() == built  # nothing built


def test_a_failure_stops_applying_when_a_folder_of_its_window_is_gone(lab, capsys):
    """Audit item 6: partitions d-1 and d fail on a bad file in folder d; with folder d+1 gone, d's
    failure attempt read files that can no longer be seen, so d shows what the run does (it keeps d as
    built: no run can check or rebuild it), not the old error; d-1, whose window is whole and holds the
    same bad file, still fails."""
    bad = START + DAY
    lab.qsr_days(START, 3)  # folders START .. START+3
    assert lab.range(START, START + 3 * DAY) == 0
    lab.qsr_file(str(bad), "S003", ["Q,1,S003,2026-09-11T12:00:00-04:00,COLA,1,1.00,,COMPLETED,1"], REPEATED_QTY)
    assert lab.range(START, START + 3 * DAY) == 30
    got = status_json(capsys, START, START + 3 * DAY)
    assert [got[d][0] for d in (START, bad, bad + DAY)] == ["failed", "failed", "ok"]
    assert got[bad][1].startswith(f"qsr_pos/{bad}/S003.csv: column 'qty' appears more than once")

    gone = lab.raw / "qsr_pos" / str(bad + DAY)
    shutil.copytree(gone, lab.root / "kept")  # copy2: sizes and mtimes kept, for putting it back
    shutil.rmtree(gone)

    def kept(got: dict, day: dt.date) -> bool:
        return got[day][0] == "ok" and got[day][1].startswith(f"raw folder gone: qsr_pos/{bad + DAY}: kept as built")

    got = status_json(capsys, START, START + 3 * DAY)
    assert got[START][0] == "failed"  # its window (folders START, START+1) is exactly the failed attempt's
    assert kept(got, bad) and kept(got, bad + DAY), got

    (lab.raw / "qsr_pos" / str(bad) / "S003.csv").unlink()  # the audit's order: the bad file goes too
    got = status_json(capsys, START, START + 3 * DAY)
    assert got[START] == ("ok", "") and kept(got, bad) and kept(got, bad + DAY), got
    built = lab.built_at()
    assert lab.range(START, START + 3 * DAY) == 0  # nothing the run can build: it builds nothing, as status said
    assert lab.built_at() == built

    shutil.copytree(lab.root / "kept", gone)  # the folder is back as it was: nothing to do
    assert {s for s, _ in status_json(capsys, START, START + 3 * DAY).values()} == {"ok"}
    assert lab.range(START, START + 3 * DAY) == 0
    assert lab.built_at() == built


def test_a_failure_still_applies_when_the_folder_gone_held_nothing_it_read(lab, capsys, monkeypatch):
    """The exception to the rule above: when every file the failed attempt read is still there as it
    was (the folder gone held nothing it read: an attempt of a Daybreak that took a folder holding no
    store file as arrived), the failure is still what a run would meet."""
    from tasks import contract

    lab.qsr_days(START, 1)  # folders START, START+1
    (lab.raw / "qsr_pos" / str(START + 2 * DAY)).mkdir()  # folder START+2, no store file
    (lab.raw / "qsr_pos" / str(START + 2 * DAY) / "notes.txt").write_text("not a store file\n")
    lab.qsr_file(
        str(START + DAY), "S003", ["Q,1,S003,2026-09-11T12:00:00-04:00,COLA,1,1.00,,COMPLETED,1"], REPEATED_QTY
    )
    monkeypatch.setitem(contract.ARRIVES_WITH, "qsr_pos", ("any file", lambda name: True))  # the rule before
    assert lab.range(START + DAY, START + 2 * DAY) == 30
    monkeypatch.undo()
    shutil.rmtree(lab.raw / "qsr_pos" / str(START + 2 * DAY))
    state, reason = status_json(capsys, START + DAY, START + 2 * DAY)[START + DAY]
    assert state == "failed" and reason.startswith(f"qsr_pos/{START + DAY}/S003.csv: column 'qty' appears")


def test_a_reject_share_failure_stops_applying_once_the_share_is_raised(lab, qsr_setting, capsys):
    """Audit item 6, second case: the limit a partition exceeded is part of its failure's identity."""
    lab.qsr_days(START, 1, stores=("S001",))  # partition START: 2 lines of folder START, 2 of START+1
    assert lab.range(START, START + DAY) == 0
    path = lab.raw / "qsr_pos" / str(START) / "S001.csv"
    path.write_text(path.read_text() + "Q,1,S001,2026-09-10T12:00:00-04:00,COLA,zero,1.00,,COMPLETED\n")
    assert lab.range(START, START + DAY) == 30  # 1 of 5 rows rejected: 20 % > 5 %
    state, reason = status_json(capsys, START, START + DAY)[START]
    assert state == "failed" and "1 of 5 rows rejected (20.0% > max_reject_share 5.0%)" in reason

    qsr_setting("max_reject_share", 0.5)
    changed = ("stale", f"input content changed: qsr_pos/{START}/S001.csv")  # what the next run builds
    assert status_json(capsys, START, START + DAY) == {START: changed}
    assert main(["plan", "stg_qsr_pos", "--start", str(START), "--stop", str(START + DAY)]) == 1
    assert f"  run   {START}  stale: input content changed: qsr_pos/{START}/S001.csv" in capsys.readouterr().out
    qsr_setting("max_reject_share", 0.05)  # the limit of the failed attempt: its record applies again
    assert status_json(capsys, START, START + DAY)[START][0] == "failed"

    qsr_setting("max_reject_share", 0.5)
    assert lab.range(START, START + DAY) == 0  # the run builds it, as status said
    assert status_json(capsys, START, START + DAY) == {START: ("ok", "")}
    manifest = json.loads((lab.partition(START) / "_manifest.json").read_text())
    assert (manifest["row_count"], manifest["rejected_count"]) == (4, 1)


def test_a_failure_the_reject_share_did_not_decide_still_applies_when_the_share_changes(lab, qsr_setting, capsys):
    lab.qsr_days(START, 1)
    lab.qsr_file(str(START), "S003", ["Q,1,S003,2026-09-10T12:00:00-04:00,COLA,1,1.00,,COMPLETED,1"], REPEATED_QTY)
    assert lab.range(START, START + DAY) == 30
    qsr_setting("max_reject_share", 0.5)
    state, reason = status_json(capsys, START, START + DAY)[START]
    assert state == "failed" and reason.startswith(f"qsr_pos/{START}/S003.csv: column 'qty' appears more than once")
    assert lab.range(START, START + DAY) == 30  # and the run fails again, as status said


# -- the default --stop: the day after the newest raw folder of any source (audit item 3) -----------------


def dates_by_dataset(out: str) -> dict[str, list[str]]:
    dates: dict[str, list[str]] = {}
    for row in json.loads(out):
        if row["date"] is not None:
            dates.setdefault(row["dataset"], []).append(row["date"])
    return dates


def test_status_runs_to_the_newest_folder_of_any_source_when_pos_is_behind(lab, setting, capsys):
    """POS folders 09-10 .. 09-11, ad exports .. 09-13, hotel extracts .. 09-15 (the POS drop is late):
    every dataset's bar runs to 09-15, the day before the default --stop, and the hotel days are shown."""
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 1)
    for export in (START + DAY, START + 2 * DAY, START + 3 * DAY):
        lab.ads_export(export, START)
    lab.hotel_days(START, 6)
    assert lab.range(START, START + 6 * DAY, of="StgHotelBookingsDaily") == 0

    assert main(["status", "--json"]) == 0
    out = capsys.readouterr().out
    six_days = [str(START + k * DAY) for k in range(6)]  # 09-10 .. 09-15
    dates = dates_by_dataset(out)
    assert set(dates) == set(status.DATASETS) | set(status.MULTI)
    assert all(days == six_days for days in dates.values()), dates
    hotel = {r["date"]: r["state"] for r in json.loads(out) if r["dataset"] == "stg_hotel_bookings_daily"}
    assert hotel == dict.fromkeys(six_days, "ok")  # 09-12 .. 09-15 were not shown before
    pos = {r["date"]: (r["state"], r["reason"]) for r in json.loads(out) if r["dataset"] == "stg_qsr_pos"}
    assert pos["2026-09-15"] == ("waiting", "raw folder missing: qsr_pos/2026-09-15, qsr_pos/2026-09-16")

    assert main(["status", "--dataset", "stg_hotel_bookings_daily"]) == 0
    assert "stg_hotel_bookings_daily  2026-09-10 .. 2026-09-15\n  ######\n  6 ok" in capsys.readouterr().out


def test_status_of_a_zone_of_ad_exports_only_shows_their_days(lab, capsys):
    """No POS folder at all, exports 09-02 and 09-03 (audit item 3's zone): ads_daily 09-01 and 09-02
    can be built and show, up to 09-03 (waiting for export 09-04)."""
    for export in (dt.date(2026, 9, 2), dt.date(2026, 9, 3)):
        lab.ads_export(export, dt.date(2026, 9, 1))
    assert main(["status", "--dataset", "ads_daily", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["date"], r["state"]) for r in rows] == [
        ("2026-09-01", "missing"),
        ("2026-09-02", "missing"),
        ("2026-09-03", "waiting"),
    ]


def test_verify_by_default_finds_a_change_in_a_hotel_extract_after_the_newest_pos_folder(lab, setting, capsys):
    """A hotel extract of 09-14, after the newest POS folder (09-11), changed in place: same size, its
    mtime set back. Plain `daybreak verify` finds it, marks the partition stale, and the next run
    rebuilds that partition alone."""
    import os

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 1)
    lab.hotel_days(START, 6)
    assert lab.range(START, START + 6 * DAY, of="StgHotelBookingsDaily") == 0
    assert main(["verify"]) == 0
    capsys.readouterr()

    path = lab.raw / "hotel_bookings" / "2026-09-14" / "H1.csv"
    before = path.stat()
    path.write_bytes(path.read_bytes().replace(b",100.00,", b",900.00,"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert lab.range(START, START + 6 * DAY, of="StgHotelBookingsDaily") == 0  # metadata alone: unchanged

    assert main(["verify"]) == 1
    out = capsys.readouterr().out
    assert (
        "MISMATCH raw hotel_bookings/2026-09-14/H1.csv: content differs from the one the partition was built from\n"
        "  stale now: staging/hotel_bookings_daily 2026-09-14\n"
    ) in out
    assert "verified 6 partitions" in out and "; 1 mismatches" in out  # 09-10 .. 09-15
    rebuilt = lab.rebuilt_by(
        lambda: lab.range(START, START + 6 * DAY, of="StgHotelBookingsDaily"), "staging/hotel_bookings_daily"
    )
    assert rebuilt == {dt.date(2026, 9, 14)}


def test_days_in_a_row_with_the_same_state_and_reason_are_one_line_and_json_keeps_every_day():
    """A setting change over three years printed 5,343 lines, one a day."""
    from dataclasses import replace

    from tasks.views.rows import DayStatus
    from tasks.views.status import render_json, render_text

    first = dt.date(2026, 9, 1)
    days = [first + dt.timedelta(days=k) for k in range(100)]
    changed = "rules changed: [qsr] suspicious_qty_threshold 20 -> 15"
    rows = [DayStatus("stg_qsr_pos", d, "stale", changed) for d in days]
    rows[40] = DayStatus("stg_qsr_pos", days[40], "failed", "qsr_pos/2026-10-11/S001.csv: row 2: qty")
    rows[41] = DayStatus("stg_qsr_pos", days[41], "ok", "", 10)
    rows[99] = DayStatus("stg_qsr_pos", days[99], "waiting", "raw folder qsr_pos/2026-12-10 is not there yet")
    rows[98] = replace(rows[98], not_read=("qsr_pos/2026-12-09/x.txt (name)",))
    lines = render_text(rows).splitlines()
    assert lines[4] == "  1 ok, 97 stale, 1 waiting, 1 failed; 1 raw file(s) not read"  # after two lines of bar
    assert lines[5:] == [
        f"  2026-09-01 .. 2026-10-10 (40 days) stale: {changed}",
        "  2026-10-11 failed: qsr_pos/2026-10-11/S001.csv: row 2: qty",
        f"  2026-10-13 .. 2026-12-08 (57 days) stale: {changed}",  # 10-12 is ok: a run ends there
        "  2026-12-09 waiting: raw folder qsr_pos/2026-12-10 is not there yet",
        "  2026-12-08 not read: qsr_pos/2026-12-09/x.txt (name)",
    ]
    assert [r["date"] for r in json.loads(render_json(rows))] == [d.isoformat() for d in days]


def test_days_in_a_row_waiting_each_for_its_own_folder_are_one_line():
    """A source that stopped sending: each day waits for its own next folder, so no two reasons are equal;
    a month of them is one line naming the first and last folder, not thirty lines."""
    from tasks.views.rows import DayStatus
    from tasks.views.status import render_text

    first = dt.date(2026, 9, 1)
    days = [first + dt.timedelta(days=k) for k in range(40)]
    rows = [DayStatus("ads_daily", d, "ok", "") for d in days[:10]]
    rows += [DayStatus("ads_daily", d, "waiting", f"raw folder missing: ads/{d + DAY}") for d in days[10:39]]
    rows.append(DayStatus("ads_daily", days[39], "waiting", f"raw folder missing: ads/{days[39] + DAY}, qsr_pos/x"))
    assert render_text(rows).splitlines()[-2:] == [
        "  2026-09-11 .. 2026-10-09 (29 days) waiting: raw folder missing: ads/2026-09-12 .. 2026-10-10",
        "  2026-10-10 waiting: raw folder missing: ads/2026-10-11, qsr_pos/x",
    ]


@pytest.mark.unit
def test_days_whose_dates_do_not_move_with_the_day_are_not_one_span():
    """Before: ``2026-09-01 .. 2026-09-03 (3 days) stale: input content changed: qsr_pos/2026-09-02 ..
    2026-09-04/S001.csv`` although qsr_pos/2026-09-03/S001.csv did not change, and ``waiting: raw folder
    missing: qsr_pos/2026-09-03 .. 2026-09-05`` although folder 2026-09-04 is there."""
    from tasks.views.rows import DayStatus
    from tasks.views.status import render_text

    first = dt.date(2026, 9, 1)
    changed = ["2026-09-02", "2026-09-02", "2026-09-04"]  # a day reads its own folder and the next one
    stale = [
        DayStatus("stg_qsr_pos", first + k * DAY, "stale", f"input content changed: qsr_pos/{c}/S001.csv")
        for k, c in enumerate(changed)
    ]
    assert render_text(stale).splitlines()[4:] == [
        "  2026-09-01 .. 2026-09-02 (2 days) stale: input content changed: qsr_pos/2026-09-02/S001.csv",
        "  2026-09-03 stale: input content changed: qsr_pos/2026-09-04/S001.csv",
    ]
    missing = ["2026-09-03", "2026-09-03", "2026-09-05"]
    waiting = [DayStatus("stg_qsr_pos", first, "ok", "")] + [
        DayStatus("stg_qsr_pos", first + (k + 1) * DAY, "waiting", f"raw folder missing: qsr_pos/{m}")
        for k, m in enumerate(missing)
    ]
    assert render_text(waiting).splitlines()[4:] == [
        "  2026-09-02 .. 2026-09-03 (2 days) waiting: raw folder missing: qsr_pos/2026-09-03",
        "  2026-09-04 waiting: raw folder missing: qsr_pos/2026-09-05",
    ]
    moving = [  # each day its own file, then one date that stays: one span would name a file twice
        DayStatus("stg_qsr_pos", first + k * DAY, "stale", f"input content changed: qsr_pos/{d}/S001.csv")
        for k, d in enumerate(["2026-09-01", "2026-09-02", "2026-09-02"])
    ]
    assert render_text(moving).splitlines()[4:] == [
        "  2026-09-01 .. 2026-09-02 (2 days) stale: input content changed: qsr_pos/2026-09-01 .. 2026-09-02/S001.csv",
        "  2026-09-03 stale: input content changed: qsr_pos/2026-09-02/S001.csv",
    ]


@pytest.mark.unit
def test_failed_days_in_a_row_name_their_rejected_rows_by_a_glob_that_finds_them():
    """Before: ``All rejected rows: .../business_date=2026-10-07 .. 2026-10-09.rejected.parquet``, a file that
    does not exist (there is one a day)."""
    from tasks.views.rows import DayStatus
    from tasks.views.status import render_text

    first = dt.date(2026, 10, 7)
    failures = "data/_state/failures/staging/ads_daily"
    failed = [
        DayStatus(
            "ads_daily",
            first + k * DAY,
            "failed",
            f"staging/ads_daily {first + k * DAY}: 1 of 9 rows rejected; no partition was written. All rejected "
            f"rows: {failures}/business_date={first + k * DAY}.rejected.parquet. For example: ads/2026-10-14/ads.csv",
        )
        for k in range(3)
    ]
    assert render_text(failed).splitlines()[4:] == [
        "  2026-10-07 .. 2026-10-09 (3 days) failed: staging/ads_daily 2026-10-07 .. 2026-10-09: 1 of 9 rows "
        f"rejected; no partition was written. All rejected rows: {failures}/business_date=*.rejected.parquet. "
        "For example: ads/2026-10-14/ads.csv"
    ]


def test_a_chain_pending_day_after_day_is_one_line():
    """A look-back chain (hotel_booking_state): the first day is stale for its own upstream, each later day
    pending on that root; the later days are one line, not one a day."""
    from tasks.views.rows import DayStatus
    from tasks.views.status import render_text

    first = dt.date(2026, 9, 2)
    days = [first + dt.timedelta(days=k) for k in range(30)]
    root = "may rebuild once its upstream is rebuilt: marts/hotel_booking_state 2026-09-02 (stale: upstream x changed)"
    rows = [DayStatus("hotel_booking_state", days[0], "stale", "upstream x changed")]
    rows += [DayStatus("hotel_booking_state", d, "pending", root) for d in days[1:]]
    assert render_text(rows).splitlines()[-2:] == [
        "  2026-09-02 stale: upstream x changed",
        f"  2026-09-03 .. 2026-10-01 (29 days) pending: {root}",
    ]


def test_an_entry_under_a_dataset_folder_that_is_no_partition_is_named_by_status_and_never_read(lab, capsys):
    """A file beside the partitions, a folder whose name is not business_date=YYYY-MM-DD, a file where a
    pickup's hotel folders are: each named in the status view (text and JSON), none read as data."""
    import json

    from tasks.cli import main

    start = dt.date(2026, 9, 10)
    lab.qsr_days(start, 2)
    assert lab.range(start, start + dt.timedelta(days=2)) == 0
    staging = lab.data / "staging" / "qsr_pos"
    (staging / "notes.txt").write_text("left here by hand\n")
    (staging / "business_date=2026-9-10").mkdir()
    pickup = lab.data / "marts" / "hotel_pickup" / f"business_date={start}"
    pickup.mkdir(parents=True)
    (pickup / "stray.parquet").write_bytes(b"not a partition")
    stop = str(start + dt.timedelta(days=2))
    capsys.readouterr()
    assert main(["status", "--start", str(start), "--stop", stop, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    stray = next(r for r in rows if r["dataset"] == "data_root")
    assert stray["not_read"] == [
        f"marts/hotel_pickup/business_date={start}/stray.parquet",
        "staging/qsr_pos/business_date=2026-9-10",
        "staging/qsr_pos/notes.txt",
    ]
    assert [r["state"] for r in rows if r["dataset"] == "stg_qsr_pos"] == ["ok", "ok"]
    assert main(["status", "--dataset", "stg_qsr_pos", "--start", str(start), "--stop", stop]) == 0
    text = capsys.readouterr().out
    assert "2 entries under the datasets' folders that no partition is (never read):" in text
    assert "  staging/qsr_pos/notes.txt" in text


def test_an_empty_range_is_no_error(lab, capsys):
    """``--start`` equal to ``--stop`` is an empty range (docs/operations.md): no date to show, exit 0."""
    lab.qsr_days(START, 2, stores=("S001",))
    for args in ([], ["--json"], ["--dataset", "stg_qsr_pos"], ["--dataset", "hotel_pickup"]):
        assert main(["status", "--start", str(START), "--stop", str(START), *args]) == 0, args
        assert "Traceback" not in capsys.readouterr().err


@pytest.mark.unit
def test_plan_lines_group_only_dates_in_a_row():
    """Before: ``first ads_daily 2026-09-10 .. 2026-09-20 (2 partitions)`` for 09-10 and 09-20 alone."""
    from tasks.views import plan as views_plan

    day = dt.date(2026, 9, 10)
    shown = views_plan.render(
        views_plan.Plan(
            dataset="ads_rolling_7d",
            runs=[],
            blocked=[],
            same_content=[],
            downstream={},
            seconds_each=None,
            workers=1,
            start=day,
            stop=day + 15 * DAY,
            first=[("ads_daily", str(d), "missing", "no partition") for d in (day, day + 10 * DAY, day + 11 * DAY)],
            maybe=[(day + k * DAY, "may rebuild once its upstream is rebuilt") for k in (0, 1, 5)],
        )  # fmt: skip
    )
    assert f"  first ads_daily {day}  missing: no partition" in shown, shown
    assert f"  first ads_daily {day + 10 * DAY} .. {day + 11 * DAY} (2 partitions)  missing" in shown, shown
    assert f"  may   {day} .. {day + DAY} (2 partitions): may rebuild" in shown, shown
    assert f"  may   {day + 5 * DAY}: may rebuild" in shown, shown


@pytest.mark.unit
def test_plan_runs_of_dates_in_a_row_with_the_same_reason_are_one_line_each():
    """A first build of two years printed a ``run`` line per date (735): one per run of dates in a row with the
    same state and reason, as the plan's first, may and newer lines; the plan itself keeps every date."""
    from tasks.views import plan as views_plan

    day = dt.date(2024, 12, 1)
    runs = [(day + k * DAY, "missing", "no partition") for k in range(735)]
    runs += [(day + 736 * DAY, "missing", "no partition"), (day + 737 * DAY, "stale", "input changed")]
    made = views_plan.Plan("stg_qsr_pos", runs, [], [], {}, None, 1, day, day + 738 * DAY)
    shown = [line for line in views_plan.render(made).splitlines() if line.startswith("  run   ")]
    assert shown == [
        f"  run   {day} .. {day + 734 * DAY} (735 partitions)  missing: no partition",
        f"  run   {day + 736 * DAY}  missing: no partition",  # not in a row with them
        f"  run   {day + 737 * DAY}  stale: input changed",
    ]
    assert len(made.runs) == 737


@pytest.mark.unit
def test_plan_groups_days_whose_reasons_differ_by_a_date_that_moves_with_the_day_as_status_does():
    """A source that stopped sending: each day waits for its next day's folder. Before: one wait line a day
    (31 for a month), where status shows one line."""
    from tasks.views import plan as views_plan

    day = dt.date(2026, 10, 1)
    blocked = [(str(day + k * DAY), f"raw folder missing: qsr_pos/{day + (k + 1) * DAY}") for k in range(31)]
    made = views_plan.Plan("stg_qsr_pos", [], blocked, [], {}, None, 1, day, day + 31 * DAY)
    shown = [line for line in views_plan.render(made).splitlines() if line.startswith("  wait  ")]
    last = day + 30 * DAY
    assert shown == [
        f"  wait  {day} .. {last} (31 partitions)  raw folder missing: qsr_pos/{day + DAY} .. {last + DAY}"
    ]


def test_a_failed_day_whose_partition_is_kept_shows_its_rows(lab, capsys):
    """The previous build stays in place when a rebuild fails, and readers still get its rows: --json gives
    them (and its build time), as for a stale day; a day never built has none."""
    lab.qsr_days(START, 2, stores=("S001",))
    assert lab.range(START, START + DAY) == 0
    kept = json.loads((lab.partition(START) / "_manifest.json").read_text())
    path = lab.raw / "qsr_pos" / str(START) / "S001.csv"
    path.write_text(path.read_text() + "Q,1,S001,2026-09-10T12:00:00-04:00,COLA,zero,1.00,,COMPLETED\n")
    assert lab.range(START, START + 2 * DAY) == 30  # START: 1 of 5 rows rejected; START+1: built
    capsys.readouterr()
    args = ["--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(START + DAY), "--json"]
    assert main(["status", *args]) == 0
    (day,) = json.loads(capsys.readouterr().out)
    assert day["state"] == "failed" and (day["rows"], day["duration_s"]) == (kept["row_count"], kept["duration_s"])


def test_a_start_past_the_newest_raw_folder_says_there_is_no_date_to_show(lab, setting, capsys):
    """--start after the newest raw folder (the default stop): an empty range, exit 0, and a line saying the
    dated datasets have no day there, not their lines dropped without a word."""
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 3, stores=("S001",))
    later = START + 30 * DAY
    capsys.readouterr()
    assert main(["status", "--start", str(later)]) == 0
    err = capsys.readouterr().err
    assert f"no date from {later} to {later} (stop exclusive): the dated datasets have none" in err, err


@pytest.mark.unit
def test_dates_kept_apart_are_shown_as_their_runs_not_as_one_span():
    """Before: ``keep  2026-09-09 .. 2026-09-25 (4 dates)`` for 09-09, 09-10, 09-24 and 09-25: read as 17 days."""
    from tasks.freshness.identity import SAME_CONTENT
    from tasks.views import plan as views_plan
    from tasks.views.rows import DayStatus

    first, later = dt.date(2026, 9, 9), dt.date(2026, 9, 24)
    kept = [first, first + DAY, later, later + DAY]
    runs = f"{first} .. {first + DAY}, {later} .. {later + DAY} (4 dates)"
    shown = views_plan.render(views_plan.Plan("stg_qsr_pos", [], [], kept, {}, None, 1, first, later + 2 * DAY))
    assert f"  keep  {runs}  4 partitions: {SAME_CONTENT}, nothing to rebuild" in shown, shown
    rows = [DayStatus("stg_qsr_pos", first + k * DAY, "ok", "") for k in range(17)]
    rows = [DayStatus(r.dataset, r.date, "ok", SAME_CONTENT) if r.date in kept else r for r in rows]
    text = status.render_text(rows)
    assert f"  4 ok, {SAME_CONTENT} ({runs}): nothing to rebuild" in text, text
    many = [first + 2 * k * DAY for k in range(8)]  # 8 dates a day apart: the first runs, then how many more
    text = status.render_text([DayStatus("stg_qsr_pos", d, "ok", SAME_CONTENT) for d in many])
    assert f"({first}, {first + 2 * DAY}, {first + 4 * DAY} and 5 more runs to {many[-1]} (8 dates))" in text, text


def test_a_day_not_over_is_not_over_yet_as_plan_leaves_it_out_and_a_built_one_keeps_its_state(lab, setting, capsys):
    """A sample that reaches two days past the business day in progress: RangeDaily builds the days that are
    over. Status shows the day in progress and the one after the next drop (which waits for a folder) as
    not over yet, with plan's reason, not as missing or waiting; a day not over built with --date keeps its
    state. Plan leaves out the same days and has nothing to do."""
    from tasks.settings import day_in_progress, not_over
    from tasks.views import plan

    day = dt.timedelta(days=1)
    today = day_in_progress()
    start, stop = today - 10 * day, today + 3 * day  # status's default stop: the day after the newest folder
    setting("daybreak", "start_date", start)
    lab.qsr_days(start, 12)  # folders start .. today+2
    assert lab.range(start, stop) == 0
    assert lab.luigi("StgQsrPos", "--date", str(today + day)) == 0  # built, though not over

    rows = {r.date: r for r in status.collect(start, stop, ["stg_qsr_pos"])}
    states = {d: r.state for d, r in rows.items()}
    assert states == {**{start + i * day: "ok" for i in range(10)}, today: "not over yet", today + day: "ok",
                      today + 2 * day: "not over yet"}  # fmt: skip
    assert rows[today].reason == rows[today + 2 * day].reason == not_over(today)

    made = plan.make_plan("stg_qsr_pos", start, stop)  # the same days left out, nothing to run or wait for
    assert set(made.left_out) == {today, today + day, today + 2 * day}
    assert {d for d, s in states.items() if s == "not over yet"} < set(made.left_out)
    assert (made.runs, made.blocked, made.exit_code) == ([], [], 0)

    assert main(["status", "--dataset", "stg_qsr_pos", "--start", str(start), "--stop", str(stop)]) == 0
    out = capsys.readouterr().out
    body = out.split("\n", 1)[1]  # after the legend
    assert "11 ok, 2 not over yet" in body and "missing" not in body and "waiting" not in body
    assert f"{today} not over yet: " in body and f"{today + 2 * day} not over yet: " in body
    assert f"today is {today}" in body
    assert main(["status", "--dataset", "stg_qsr_pos", "--start", str(today), "--stop", str(stop), "--json"]) == 0
    assert [r["state"] for r in json.loads(capsys.readouterr().out)] == ["not over yet", "ok", "not over yet"]
    page = status_html.render(status.collect(today, stop, ["stg_qsr_pos"]), previews=[])
    assert f'data-d="{today}" data-state="not over yet"' in page and f'data-d="{today + day}" data-state="ok"' in page
