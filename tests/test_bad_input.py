"""Hostile input through Luigi (issue 16, docs/reliability.md): rows that would poison a mart, bytes the
contract forbids, files that are not read. Every outcome is read back as a user would (DuckDB, pyarrow)."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from tasks import catalogue

pytestmark = pytest.mark.luigi

REPO = Path(__file__).resolve().parent.parent
FIRST = dt.date(2026, 9, 10)
DAY = dt.timedelta(days=1)


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
    lab.hotel_days(FIRST, 4)
    day = FIRST + dt.timedelta(days=1)  # its H1 extract: 4 poisoned rows of 81, under [hotels] max_reject_share
    poisoned = [f"{b},H1,{day}T13:00:00-04:00,CREATED,{values},direct" for b, (values, _) in POISON.items()]
    fillers = [f"F{k},H1,{day}T15:00:00-04:00,CREATED,2026-11-01,2026-11-02,1,10.00,ota" for k in range(75)]
    edge = f"E1,H1,{day}T14:00:00-04:00,CREATED,2026-10-01,2027-10-01,1000,100000.00,direct"  # every bound, exactly
    first = f"T1,H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct"
    lab.hotel_extract(day, "H1", [first, *poisoned, *fillers, edge])
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
    kept = ["E1", *(f"T{k}" for k in range(4)), *(f"V{k}" for k in range(4)), *(f"F{k}" for k in range(75))]
    assert sorted(b for (b,) in staged) == sorted(kept)
    # the edge booking is on the books for its 365 nights, at 1000 rooms x 100000.00 a night
    otb = read(lab, "marts/otb_by_stay_date/*.parquet", "stay_date, rooms_on_books, room_revenue::varchar")
    h1 = read(lab, "exports/otb/hotel_id=H1/data.parquet", "stay_date, rooms_on_books, room_revenue::varchar")
    assert len(h1) == 365 and h1[0] == (dt.date(2026, 10, 1), 1004, "100000400.00")
    assert h1[31] == (dt.date(2026, 11, 1), 1075, "100000750.00")
    assert h1[-1] == (dt.date(2027, 9, 30), 1000, "100000000.00")
    assert len(otb) == 366  # H1's 365 nights and H2's one
    picked = read(lab, "marts/hotel_pickup/*/*/*.parquet", "sum(rooms_picked_up), sum(revenue_picked_up)::varchar")
    assert picked == [(8 + 365 * 1000 + 75 + 8, "36500001950.00")]  # every day's pickup adds up to the books


def no_control_characters(lab, dataset: str) -> None:
    """Not one control character in any string column of any data file of the dataset."""
    cols = [
        r[0]
        for r in duckdb.execute(f"describe select * from read_parquet('{lab.data}/{dataset}/*/*.parquet')").fetchall()
    ]
    text = " or ".join(f"regexp_matches(coalesce({c}::varchar, ''), '[\\x00-\\x1f\\x7f]')" for c in cols)
    found = duckdb.execute(f"select count(*) from read_parquet('{lab.data}/{dataset}/*/*.parquet') where {text}")
    assert found.fetchall()[0][0] == 0  # fetchall: fetchone leaves the default connection busy


def hostile_pos(lab, day: dt.date, value: str) -> None:
    rows = [f"O1,1,S001,{day}T12:00:00-04:00,BURGER,1,6.50,,COMPLETED"]
    rows.append(f'O2,1,S001,{day}T12:05:00-04:00,"{value}",1,6.50,,COMPLETED')
    rows += [f"O{k},1,S001,{day}T13:00:00-04:00,COLA,1,1.99,,COMPLETED" for k in range(3, 40)]
    lab.qsr_file(str(day), "S001", rows)
    lab.qsr_file(str(day + dt.timedelta(days=1)), "S001", [])


def hostile_bookings(lab, day: dt.date, value: str) -> None:
    rows = [f"B1,H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct"]
    rows.append(f'B2,H1,{day}T12:05:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,"{value}"')
    rows += [f"B{k},H1,{day}T13:00:00-04:00,CREATED,2026-10-01,2026-10-02,1,90.00,ota" for k in range(3, 40)]
    lab.hotel_extract(day, "H1", rows)


def hostile_ads(lab, day: dt.date, value: str) -> None:
    rows = [f"{day - dt.timedelta(days=1)},C1,google,1000,50,10.00,2,10.00"]
    rows.append(f'{day - dt.timedelta(days=1)},"{value}",google,1000,50,10.00,2,10.00')
    rows += [f"{day - dt.timedelta(days=1)},C{k},google,10,1,1.00,0,0.00" for k in range(3, 40)]
    lab.ads_export(day, day, rows)


# source -> (task, dataset, partition of the hostile row, its column, its row number, the writer of day
# 2026-09-15 with 39 good rows and the hostile one, whose field holds the value)
SOURCES = {
    "qsr_pos": ("StgQsrPos", "staging/qsr_pos", dt.date(2026, 9, 15), "sku", 3, hostile_pos),
    "hotel_bookings": (
        "StgHotelBookingsDaily",
        "staging/hotel_bookings_daily",
        dt.date(2026, 9, 15),
        "channel",
        3,
        hostile_bookings,
    ),
    "ads": ("AdsDaily", "staging/ads_daily", dt.date(2026, 9, 14), "campaign_id", 3, hostile_ads),
}


@pytest.mark.parametrize("value", ["TE\x00A", "a\x07b", "x\x7f", "two\nlines", "tab\there", "cr\r"])
@pytest.mark.parametrize("source", catalogue.SOURCES)  # a new source needs its hostile row here
def test_a_control_character_never_reaches_a_partition(lab, source, value):
    task, dataset, date, column, row, hostile_day = SOURCES[source]
    hostile_day(lab, dt.date(2026, 9, 15), value)
    assert lab.luigi(task, "--date", str(date)) == 0
    no_control_characters(lab, dataset)
    manifest = json.loads((lab.partition(date, dataset) / "_manifest.json").read_text())
    # a line break in the quoted field: the row takes two lines of the file, and is one row all the same
    assert (manifest["row_count"], manifest["rejected_count"]) == (38, 1)
    [rejected] = pq.read_table(lab.data / "quarantine" / dataset / f"business_date={date}/rejected.parquet").to_pylist()
    assert rejected["row_number"] == row and rejected["source_file"].endswith(".csv")
    first = next(c for c in value if ord(c) < 0x20 or ord(c) == 0x7F)
    assert rejected["reason"].startswith(f"{column} holds a control character (U+{ord(first):04X} at character")
    for v in rejected.values():  # the quarantine keeps the row's text, its control characters escaped
        assert not isinstance(v, str) or not any(ord(c) < 0x20 or ord(c) == 0x7F for c in v)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b"order_id,line_no,store_id,ordered_at,sku,qty,unit_price,discount,status,qty\n",
            "S002.csv: column 'qty' appears more than once in the header",
        ),
        (
            b"order_id,line_no,store_id,ordered_at,sku,qty,unit_price,discount,status,note\n"
            b"O9,1,S002,2026-09-15T12:00:00-04:00,COLA,1,1.99,,COMPLETED,caf\xe9\n",
            "S002.csv: cannot be read as UTF-8 CSV (invalid UTF-8 at byte 139 (line 2)",
        ),
    ],
)
def test_a_repeated_header_name_or_invalid_utf8_fails_the_partition_and_keeps_the_old_one(lab, content, message):
    day = dt.date(2026, 9, 15)
    lab.qsr_days(day, 1)
    assert lab.luigi("StgQsrPos", "--date", str(day)) == 0
    before = {k: v for k, v in lab.files().items() if k.startswith("data/staging/")}
    (lab.raw / "qsr_pos" / str(day) / "S002.csv").write_bytes(content)
    assert lab.luigi("StgQsrPos", "--date", str(day)) == 30
    failure = json.loads((lab.data / f"_state/failures/staging/qsr_pos/business_date={day}.json").read_text())
    assert f"qsr_pos/{day}/{message}" in failure["error"]
    assert {k: v for k, v in lab.files().items() if k.startswith("data/staging/")} == before  # old partition kept


# -- the quarantine is written in the partition's write protocol ----------------------------------------
def sha256(path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def pos_day(lab, day: dt.date, bad: dict[int, str]) -> None:
    """Store S001 on ``day``: 40 lines, line k replaced by ``bad[k]`` (a row that fails a type rule)."""
    rows = [f"O{k},1,S001,{day}T13:00:00-04:00,COLA,1,1.99,,COMPLETED" for k in range(40)]
    for k, row in bad.items():
        rows[k] = row
    lab.qsr_file(str(day), "S001", rows)
    lab.qsr_file(str(day + dt.timedelta(days=1)), "S001", [])


@pytest.mark.system
def test_a_crash_at_any_write_step_never_pairs_a_partition_with_another_builds_quarantine(lab):
    import shutil
    import subprocess
    import sys

    from tasks.settings import write_config

    day = dt.date(2026, 9, 15)
    runs = lab.root / "runs"  # configs and step counters; never a luigi.cfg in lab.root itself
    runs.mkdir()

    def run(root, at: int = 10**9) -> int:
        """StgQsrPos of ``day`` into data root ``root`` through tests/crash_driver.py: SIGKILLed at write
        step ``at`` of the partition (beyond its last step: a clean run). Returns the partition's steps taken."""
        cfg = write_config(runs / f"{root.name}.cfg", {"daybreak": {"raw_root": lab.raw, "data_root": root}})
        counter = runs / f"{root.name}.steps"
        plan = {"counter": str(counter), "root": str(root), "date": str(day), "at": at, "mode": "kill"}
        env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg), "CRASH_PLAN": json.dumps(plan), "TMPDIR": str(runs)}
        cmd = [sys.executable, str(REPO / "tests" / "crash_driver.py"), "StgQsrPos", "--date", str(day)]
        subprocess.run([*cmd, "--local-scheduler", "--no-lock"], env=env, cwd=runs, capture_output=True, timeout=300)
        return (runs / f"{counter.name}.{day}").stat().st_size  # one byte a step of the partition

    def partition(root) -> tuple[dict, Path]:
        folder = root / f"staging/qsr_pos/business_date={day}"
        return json.loads((folder / "_manifest.json").read_text()), folder / "data.parquet"

    def quarantine(root) -> list[dict]:
        path = root / f"quarantine/staging/qsr_pos/business_date={day}/rejected.parquet"
        return pq.read_table(path).to_pylist() if path.exists() else []

    pos_day(lab, day, {3: f"O3,1,S001,{day}T13:00:00-04:00,COLA,x,1.99,,COMPLETED"})
    old = lab.root / "old"
    run(old)
    pos_day(lab, day, {5: f"O5,1,S001,{day}T13:00:00-04:00,,1,1.99,,COMPLETED"})  # another bad row, another reason
    new = lab.root / "new"
    shutil.copytree(old, new)
    steps = run(new)
    builds = {partition(r)[0]["data_version"]: quarantine(r) for r in (old, new)}
    assert [[q["row_number"] for q in b] for b in builds.values()] == [[5], [7]]  # header = row 1
    manifest, _ = partition(new)
    path = lab.root / "new" / manifest["quarantine"]["path"]
    assert (manifest["quarantine"]["sha256"], manifest["quarantine"]["rows"]) == (sha256(path), 1)

    kept_old = 0
    for at in range(1, steps + 1):
        root = lab.root / f"crash{at}"
        shutil.copytree(old, root)  # keeps mtimes: the old partition matches its manifest
        run(root, at)
        manifest, data = partition(root)
        if sha256(data) == manifest["data_files"][0]["sha256"]:  # the data the manifest describes
            assert quarantine(root) == builds[manifest["data_version"]], f"killed at step {at} of {steps}"
            kept_old += manifest["data_version"] == partition(old)[0]["data_version"]
        shutil.rmtree(root)
    assert kept_old >= 3  # killed before the data was replaced: writing the data file, its fsync, ...


def test_a_build_that_fails_on_too_many_rejects_keeps_the_partition_and_its_quarantine(lab):
    day = dt.date(2026, 9, 15)
    pos_day(lab, day, {3: f"O3,1,S001,{day}T13:00:00-04:00,COLA,x,1.99,,COMPLETED"})
    assert lab.luigi("StgQsrPos", "--date", str(day)) == 0
    kept = {k: v for k, v in lab.files().items() if k.startswith(("data/staging/", "data/quarantine/"))}
    pos_day(lab, day, {k: f"O{k},1,S001,{day}T13:00:00-04:00,COLA,x,1.99,,COMPLETED" for k in range(10)})
    assert lab.luigi("StgQsrPos", "--date", str(day)) == 30
    assert {k: v for k, v in lab.files().items() if k.startswith(("data/staging/", "data/quarantine/"))} == kept
    failure = json.loads((lab.data / f"_state/failures/staging/qsr_pos/business_date={day}.json").read_text())
    failed = lab.data / f"_state/failures/staging/qsr_pos/business_date={day}.rejected.parquet"
    assert "10 of 40 rows rejected (25.0% > max_reject_share 5.0%)" in failure["error"]
    assert f"the previous partition is kept. All rejected rows: {failed}." in failure["error"]
    assert pq.read_table(failed)["row_number"].to_pylist() == list(range(2, 12))
    pos_day(lab, day, {})
    assert lab.luigi("StgQsrPos", "--date", str(day)) == 0
    assert not failed.exists() and not (lab.data / f"quarantine/staging/qsr_pos/business_date={day}").exists()
    assert json.loads((lab.partition(day) / "_manifest.json").read_text())["quarantine"] is None


def test_a_quote_early_in_folder_d_plus_1_fails_partition_d_too_and_keeps_it(lab):
    """Folder d+1's file starts with the small hours of date d. A quote never closed on its second line
    takes every line after it, d's among them: partition d counts them as rejects (their business date
    cannot be read), fails on the share and keeps its previous output, instead of being rebuilt without
    those lines as if nothing had happened."""
    day, after = dt.date(2026, 9, 21), dt.date(2026, 9, 22)
    mine = [f"O{i},1,S001,{day}T12:{i:02d}:00-04:00,SKU,1,1.00,,COMPLETED" for i in range(10, 50)]
    small_hours = [f"N{i},1,S001,{after}T0{i % 5}:{i:02d}:00-04:00,SKU,1,1.00,,COMPLETED" for i in range(10, 34)]
    lab.qsr_file(str(day), "S001", mine)
    lab.qsr_file(str(after), "S001", small_hours)
    assert lab.luigi("StgQsrPos", "--date", str(day)) == 0
    assert pq.read_table(lab.partition(day)).num_rows == 40 + 24
    kept = {k: v for k, v in lab.files().items() if k.startswith(("data/staging/", "data/quarantine/"))}
    lab.qsr_file(str(after), "S001", [small_hours[0], small_hours[1].replace(",SKU,", ',"SKU,'), *small_hours[2:]])
    assert lab.luigi("StgQsrPos", "--date", str(day)) == 30
    assert {k: v for k, v in lab.files().items() if k.startswith(("data/staging/", "data/quarantine/"))} == kept
    failure = json.loads((lab.data / f"_state/failures/staging/qsr_pos/business_date={day}.json").read_text())
    assert "23 of 64 rows rejected" in failure["error"] and f"qsr_pos/{after}/S001.csv" in failure["error"]


def test_one_stores_file_mostly_rejected_fails_the_date_though_all_rejects_are_under_the_share(lab, capsys):
    """S002's file of folder d is re-sent with every ordered_at lacking its offset: its 15 lines are rejects, a
    small share of the date's rows (17 of 435, 3.9 %), but all of that file's: the date fails naming the file,
    its counts, row and reason (exit 30) and keeps its partition, as a hotel's extract does. Before, it was
    built without S002's day, exit 0, nothing said. Folder d+1's S001 file holds 5 lines of d, 2 of them bad:
    rejects of d, which judges only its own folder's files (d+1's hold a few small hours of d)."""
    from tasks.cli import main

    day, after = dt.date(2026, 9, 21), dt.date(2026, 9, 22)
    big = [f"O{i},1,S001,{day}T{6 + i // 60:02d}:{i % 60:02d}:00-04:00,SKU,1,1.00,,COMPLETED" for i in range(400)]
    small = [f"P{i},1,S002,{day}T12:{i:02d}:00-04:00,SKU,1,1.00,,COMPLETED" for i in range(15)]
    hours = [f"N{i},1,S001,{after}T0{i}:10:00-04:00,SKU,{'x' if i < 2 else 1},1.00,,COMPLETED" for i in range(5)]
    lab.qsr_file(str(day), "S001", big)
    lab.qsr_file(str(day), "S002", small)
    noon = [
        f"M1,1,S001,{after}T12:00:00-04:00,SKU,1,1.00,,COMPLETED",
        f"M2,1,S001,{after}T12:30:00,SKU,1,1.00,,COMPLETED",
    ]
    lab.qsr_file(str(after), "S001", [*hours, *noon])  # and one line that cannot be dated
    # S002 opens at noon: its d+1 file has no line of d, and one line that cannot be dated (no offset)
    undated = [
        f"Q1,1,S002,{after}T12:00:00,SKU,1,1.00,,COMPLETED",
        f"Q2,1,S002,{after}T12:05:00-04:00,SKU,1,1.00,,COMPLETED",
    ]
    lab.qsr_file(str(after), "S002", undated)
    assert lab.luigi("StgQsrPos", "--date", str(day)) == 0
    manifest = json.loads((lab.partition(day) / "_manifest.json").read_text())
    # 2 of 5 of d+1's S001 file, and the undated lines of d+1's files: rejects in d's share; d+1 judges those files
    assert (manifest["row_count"], manifest["rejected_count"]) == (418, 4)
    kept = {k: v for k, v in lab.files().items() if k.startswith(("data/staging/", "data/quarantine/"))}
    lab.qsr_file(str(day), "S002", [r.replace("-04:00", "") for r in small])
    assert lab.luigi("StgQsrPos", "--date", str(day)) == 30
    assert {k: v for k, v in lab.files().items() if k.startswith(("data/staging/", "data/quarantine/"))} == kept
    failure = json.loads((lab.data / f"_state/failures/staging/qsr_pos/business_date={day}.json").read_text())
    error = failure["error"]
    assert f"15 of 15 rows of qsr_pos/{day}/S002.csv rejected (100.0% > 50% of a file's rows)" in error, error
    assert "row 2: ordered_at is not ISO 8601 with a UTC offset" in error and "previous partition is kept" in error
    assert "S001.csv" not in error, error  # 2 of 5 rows of d+1's file: not a broken file
    capsys.readouterr()
    assert main(["status", "--dataset", "stg_qsr_pos", "--start", str(day), "--stop", str(after)]) == 0
    shown = capsys.readouterr().out
    assert f"{day} failed: staging/qsr_pos {day}: 15 of 15 rows of qsr_pos/{day}/S002.csv rejected" in shown, shown


def test_a_reject_share_failure_names_the_file_that_made_the_share_in_the_summary_and_status(lab, capsys, caplog):
    """S001 has one bad line, first in read order; S002 re-sent 10 of its 40 lines without their offsets, which
    takes the date over [qsr] max_reject_share (11 of 142 rows). The run's summary and the status view cut long
    messages: both name S002's file, its first reject's row and reason. Before, the summary's line ended in the
    path of all rejected rows, and status gave S001's row as the example."""
    from tasks.cli import main

    day, after = dt.date(2026, 9, 21), dt.date(2026, 9, 22)
    first = [f"O{i},1,S001,{day}T12:{i % 60:02d}:{i // 60:02d}-04:00,SKU,{'x' if i == 0 else 1},1.00,,COMPLETED"
             for i in range(100)]  # fmt: skip
    theirs = [f"P{i},1,S002,{day}T13:{i:02d}:00{'' if i >= 30 else '-04:00'},SKU,1,1.00,,COMPLETED" for i in range(40)]
    lab.qsr_file(str(day), "S001", first)
    lab.qsr_file(str(day), "S002", theirs)
    lab.qsr_file(str(after), "S001", [f"M{i},1,S001,{after}T01:0{i}:00-04:00,SKU,1,1.00,,COMPLETED" for i in range(2)])
    assert lab.luigi("StgQsrPos", "--date", str(day)) == 30
    (line,) = [x for x in caplog.text[caplog.text.rindex("summary of this run") :].splitlines() if "failed   " in x]
    lead = f"11 of 142 rows rejected (7.7% > max_reject_share 5.0%): 10 in qsr_pos/{day}/S002.csv, e.g. row 32: "
    assert lead + "ordered_at is not ISO 8601 with a UTC offset" in line, line
    capsys.readouterr()
    assert main(["status", "--dataset", "stg_qsr_pos", "--start", str(day), "--stop", str(after)]) == 0
    assert lead + "ordered_at is not ISO 8601 with a UTC offset" in capsys.readouterr().out
    failure = json.loads((lab.data / f"_state/failures/staging/qsr_pos/business_date={day}.json").read_text())
    rejects = lab.data / f"_state/failures/staging/qsr_pos/business_date={day}.rejected.parquet"
    assert f"All rejected rows: {rejects}. For example: qsr_pos/{day}/S001.csv row 2: " in failure["error"]


def test_an_unbalanced_quote_rejects_every_line_it_swallows_and_the_share_fails_the_build(lab):
    """A quote opened in S002's second line and never closed takes the rest of the file into one record:
    each of the 40 lines is a reject, so the share (40 of 80 rows) fails the build, naming the file and
    row, and the previous partition stays; the same quote on S002's last line costs one line alone."""
    day, after = dt.date(2026, 9, 21), dt.date(2026, 9, 22)
    good = [f"O{i},1,S001,{day}T12:{i:02d}:00-04:00,SKU,1,1.00,,COMPLETED" for i in range(10, 50)]
    theirs = [f"U{i},1,S002,{day}T12:{i:02d}:00-04:00,SKU,1,1.00,,COMPLETED" for i in range(10, 50)]
    lab.qsr_file(str(day), "S001", good)
    lab.qsr_file(str(day), "S002", theirs)
    lab.qsr_file(str(after), "S001", [])
    assert lab.luigi("StgQsrPos", "--date", str(day)) == 0
    kept = {k: v for k, v in lab.files().items() if k.startswith(("data/staging/", "data/quarantine/"))}
    raw = lab.qsr_file(str(day), "S002", [theirs[0].replace(",SKU,", ',"SKU,'), *theirs[1:]])
    before = raw.read_bytes()
    assert lab.luigi("StgQsrPos", "--date", str(day)) == 30
    assert raw.read_bytes() == before
    assert {k: v for k, v in lab.files().items() if k.startswith(("data/staging/", "data/quarantine/"))} == kept
    failure = json.loads((lab.data / f"_state/failures/staging/qsr_pos/business_date={day}.json").read_text())
    assert "40 of 80 rows rejected (50.0% > max_reject_share 5.0%)" in failure["error"]
    assert f"qsr_pos/{day}/S002.csv" in failure["error"] and "row 2" in failure["error"]
    rejects = pq.read_table(lab.data / f"_state/failures/staging/qsr_pos/business_date={day}.rejected.parquet")
    assert rejects["row_number"].to_pylist() == list(range(2, 42))
    assert (
        rejects["reason"][0].as_py().startswith("row has 5 fields, header has 9; a quoted field runs over lines 2-41")
    )
    assert rejects["raw_line"].to_pylist() == [theirs[0].replace(",SKU,", ',"SKU,'), *theirs[1:]]  # each line's text
    assert rejects["order_id"].null_count == 40  # not split: no field is known

    lab.qsr_file(str(day), "S002", [*theirs[:-1], theirs[-1].replace(",SKU,", ',"SKU,')])
    assert lab.luigi("StgQsrPos", "--date", str(day)) == 0
    manifest = json.loads((lab.partition(day) / "_manifest.json").read_text())
    assert (manifest["row_count"], manifest["rejected_count"]) == (79, 1)


def test_a_refused_name_is_shown_escaped_and_counted_once_over_the_two_dates_that_read_its_folder(lab, caplog):
    """A file name with a terminal escape, a newline or a byte that is not UTF-8 is refused (not a store
    id) and reported with those spelled ``\\xNN``: it cannot drive the terminal or forge a status
    line. Its folder is in the windows of two dates: the status view counts each file once."""
    from tasks.views import status

    lab.qsr_days(FIRST, 2, stores=("S001",))
    second = FIRST + dt.timedelta(days=1)
    folder = lab.raw / "qsr_pos" / str(second)  # read by the partitions of FIRST and second
    hostile = [b"\x1b[2J\x1b[31mS9.csv", b"S8\n  2026-09-03 ok.csv", b"S\xff.csv"]
    for name in hostile:
        with open(os.fsencode(folder) + b"/" + name, "wb") as fh:
            fh.write(b"order_id\n")
    with caplog.at_level("WARNING", logger="luigi-interface"):
        assert lab.range(FIRST, second + dt.timedelta(days=1)) == 0
    shown = [f"qsr_pos/{second}/\\x1b[2J\\x1b[31mS9.csv", f"qsr_pos/{second}/S8\\x0a  2026-09-03 ok.csv"]
    shown.append(f"qsr_pos/{second}/S\\xff.csv")
    for day in (FIRST, second):
        manifest = json.loads((lab.partition(day) / "_manifest.json").read_text())
        assert sorted(r["path"] for r in manifest["refused_inputs"]) == sorted(shown)
    warnings = "\n".join(r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert "\x1b" not in warnings and "\udcff" not in warnings and shown[0] in warnings
    text = status.render_text(status.collect(FIRST, second + dt.timedelta(days=1), ["stg_qsr_pos"]))
    assert "\x1b" not in text and "\udcff" not in text and "\n  2026-09-03 ok" not in text
    assert "2 ok; 3 raw file(s) not read" in text  # three files, each in two dates' windows


# -- every raw file that is not read is reported -------------------------------------------------------
@pytest.fixture
def zone_kind(request, lab, setting, tmp_path):
    """``local``, or ``sftp``: the lab's raw zone served by a real OpenSSH on 127.0.0.1."""
    if request.param == "sftp":
        from tests.sshd import Sshd

        server = Sshd(tmp_path / "sshd").start()
        request.addfinalizer(server.stop)
        setting("daybreak", "raw_root", server.uri(lab.raw))
        setting("sftp", "key_filename", server.client_key)
        setting("sftp", "known_hosts", server.known_hosts)
        setting("sftp", "retries", 1)
    return request.param


@pytest.mark.system
@pytest.mark.parametrize("zone_kind", ["local", "sftp"], indirect=True)
def test_every_file_not_read_is_reported_in_the_manifest_the_log_and_status(lab, zone_kind, caplog):
    from tasks.views import status
    from tests.conftest import QSR_HEADER, qsr_rows

    lab.qsr_days(FIRST, 1, stores=("S001",))
    folder = lab.raw / "qsr_pos" / str(FIRST)
    outside = lab.root / "outside"  # a store file outside the raw zone, linked into it
    outside.mkdir()
    (outside / "S002.csv").write_text("\n".join([QSR_HEADER, *qsr_rows("S002", FIRST)]) + "\n")
    os.symlink(outside / "S002.csv", folder / "S002.csv")
    (folder / "S003.csv").mkdir()
    os.mkfifo(folder / "S004.csv")
    (folder / "S 5.csv").write_text(QSR_HEADER + "\n")
    with caplog.at_level("WARNING", logger="luigi-interface"):
        assert lab.luigi("StgQsrPos", "--date", str(FIRST)) == 0
    names = "name is not <store_id>.csv (store_id matching ^[A-Z0-9][A-Z0-9_-]{0,31}$)"
    expected = [
        (f"qsr_pos/{FIRST}/S 5.csv", names),
        (f"qsr_pos/{FIRST}/S002.csv", "a symbolic link (never followed)"),
        (f"qsr_pos/{FIRST}/S003.csv", "not a regular file"),
        (f"qsr_pos/{FIRST}/S004.csv", "not a regular file"),
    ]
    manifest = json.loads((lab.partition(FIRST) / "_manifest.json").read_text())
    assert [(r["path"], r["reason"]) for r in manifest["refused_inputs"]] == expected
    assert read(lab, "staging/qsr_pos/*/*.parquet", "distinct store_id") == [("S001",)]  # nothing of S002
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("4 raw file(s) of its window not read" in w and "S002.csv (a symbolic link" in w for w in warnings)
    rows = status.collect(FIRST, FIRST + dt.timedelta(days=1), ["stg_qsr_pos"])
    assert rows[0].not_read == tuple(f"{path} ({reason})" for path, reason in expected)
    text = status.render_text(rows)
    assert "1 ok; 4 raw file(s) not read" in text
    assert f"  {FIRST} not read: qsr_pos/{FIRST}/S 5.csv ({names}), qsr_pos/{FIRST}/S002.csv (a symbolic" in text
    assert json.loads(status.render_json(rows))[0]["not_read"][1].endswith(
        "S002.csv (a symbolic link (never followed))"
    )


@pytest.mark.parametrize("zone_kind", ["local", pytest.param("sftp", marks=pytest.mark.system)], indirect=True)
def test_a_file_not_read_that_arrives_after_the_build_is_named_by_each_run_that_finds_it_up_to_date(
    lab, zone_kind, caplog, monkeypatch
):
    """A link and a lower-case copy land in folder 09-11 after 09-10 and 09-11 were built: no rebuild (no
    row changes), but each run warns of them once per partition whose window holds them, until a build
    records them in the manifest; then the runs say nothing."""
    from tasks.freshness.engine import Engine
    from tasks.qsr import StgQsrPos
    from tasks.storage import store as partition_store

    real = partition_store.parse_manifest
    lab.qsr_days(FIRST, 2)
    assert lab.range(FIRST, FIRST + 2 * DAY) == 0
    folder = lab.raw / "qsr_pos" / str(FIRST + DAY)
    os.symlink("S001.csv", folder / "S099.csv")
    shutil.copy(folder / "S002.csv", folder / "s002.csv")
    names = "name is not <store_id>.csv (store_id matching ^[A-Z0-9][A-Z0-9_-]{0,31}$)"
    files = (
        f"2 raw file(s) of its window not read, not in its manifest: qsr_pos/{FIRST + DAY}/S099.csv "
        f"(a symbolic link (never followed)); qsr_pos/{FIRST + DAY}/s002.csv ({names})"
    )

    def warnings_of_a_range() -> list[str]:
        caplog.clear()
        with caplog.at_level("WARNING", logger="luigi-interface"):
            assert lab.rebuilt_by(lambda: lab.range(FIRST, FIRST + 2 * DAY)) == set()
        return [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "not read" in r.getMessage()]

    for _ in range(2):  # the manifest does not name them: every run says so
        assert warnings_of_a_range() == [f"staging/qsr_pos {d}: up to date; {files}" for d in (FIRST, FIRST + DAY)]
    shutil.rmtree(lab.partition(FIRST + DAY))  # rebuilt: its manifest names them, its build warned
    caplog.clear()
    with caplog.at_level("WARNING", logger="luigi-interface"):
        assert lab.rebuilt_by(lambda: lab.range(FIRST, FIRST + 2 * DAY)) == {FIRST + DAY}
    assert any("2 raw file(s) of its window not read: " in r.getMessage() for r in caplog.records)
    assert warnings_of_a_range() == [f"staging/qsr_pos {FIRST}: up to date; {files}"]
    summaries = lab.data / "_state" / "summaries" / "staging" / "qsr_pos.json"
    doc = json.loads(summaries.read_text())
    for _, entry in doc["partitions"].values():
        del entry["refused_inputs"]
    summaries.write_text(json.dumps(doc))  # as an older release wrote them: the manifests say, read once
    reads = []
    monkeypatch.setattr(partition_store, "parse_manifest", lambda data: reads.append(real(data)) or reads[-1])
    for parsed in ([FIRST, FIRST + DAY], []):  # a new process (an Engine), then the next one
        reads.clear()
        caplog.clear()
        with caplog.at_level("WARNING", logger="luigi-interface"):
            engine = Engine()
            assert [engine.state(StgQsrPos(date=d)).ok for d in (FIRST, FIRST + DAY)] == [True, True]
            engine.flush()
        if zone_kind == "local":  # over SFTP (mtimes in seconds) files this recent are hashed, from the manifest
            assert sorted(dt.date.fromisoformat(m["business_date"]) for m in reads) == parsed
        assert [r.getMessage() for r in caplog.records] == [f"staging/qsr_pos {FIRST}: up to date; {files}"]


def test_a_symbolic_link_is_never_followed_out_of_the_raw_zone(lab, tmp_path):
    from tasks.storage.rawzone import RawFile, RawFileUnreadable, RawZone

    outside = tmp_path / "outside"
    (outside / "2026-09-10").mkdir(parents=True)
    (outside / "2026-09-10" / "S001.csv").write_text("secret\n")
    (lab.raw / "qsr_pos").mkdir()
    os.symlink(outside / "2026-09-10", lab.raw / "qsr_pos" / "2026-09-10")  # a linked date folder
    os.symlink(outside, lab.raw / "ads")  # a linked source folder
    zone = RawZone(lab.raw)
    for source in ("qsr_pos", "ads"):
        assert zone.scan_folder_all(source, FIRST) is None and not zone.folder_exists(source, FIRST)
    assert zone.newest_folder_date("ads") is None  # the linked source folder's dates are not listed
    lab.qsr_file("2026-09-11", "S001", [])  # listed as a file, then swapped for a link before it is read
    listed = RawFile("qsr_pos/2026-09-11/S001.csv", 0, 0)
    (lab.raw / listed.relpath).unlink()
    os.symlink(outside / "2026-09-10" / "S001.csv", lab.raw / listed.relpath)
    with pytest.raises(RawFileUnreadable, match="qsr_pos/2026-09-11/S001.csv: became a symbolic link"):
        zone.read_bytes(listed)


@pytest.mark.system
@pytest.mark.parametrize("zone_kind", ["local", "sftp"], indirect=True)
def test_only_a_real_folder_named_yyyy_mm_dd_is_an_export_folder(lab, zone_kind, setting, tmp_path, capsys):
    """Folders 09-10 and 09-11, beside `20260930/` and `2026-W40-1/` (dates to Python's fromisoformat),
    a file named `2026-09-29` and a symbolic link `2026-09-28`: the newest export folder is 09-11, for
    the raw zone (local and over SFTP) and for the default --stop of `daybreak status`."""
    from tasks import settings
    from tasks.cli import main
    from tasks.storage.rawzone import RawZone

    setting("daybreak", "start_date", FIRST)
    lab.qsr_days(FIRST, 1)
    pos = lab.raw / "qsr_pos"
    for name in ("20260930", "2026-W40-1"):
        (pos / name).mkdir()
    (pos / "2026-09-29").write_text("a file, not a folder\n")
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", pos / "2026-09-28")
    os.symlink(pos, lab.raw / "ads")  # a linked source folder: none of its folders counts
    zone = RawZone.from_uri(settings.raw_root())
    try:
        assert zone.newest_folder_date("qsr_pos") == FIRST + DAY
        assert sorted(zone.list_folders("qsr_pos")) == [str(FIRST), str(FIRST + DAY)]
        assert zone.newest_folder_date("ads") is None and zone.list_folders("ads") == {}
    finally:
        zone.close()
    assert main(["status", "--dataset", "stg_qsr_pos", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["date"] for r in rows if r["dataset"] == "stg_qsr_pos"] == [str(FIRST), str(FIRST + DAY)]


SOURCE_LEVEL = "not read by any partition"


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]


@pytest.mark.system
@pytest.mark.parametrize("zone_kind", ["local", "sftp"], indirect=True)
def test_entries_of_a_source_folder_that_no_partition_reads_are_named_in_the_log_and_status(
    lab, zone_kind, setting, caplog, capsys
):
    """A date folder that is a symbolic link, folders whose names are not YYYY-MM-DD, a file beside the
    date folders and a file named like a date (audit item 4): none is read, and each is named with its
    reason in the run's log and in `daybreak status` (text and JSON), the same locally and over SFTP."""
    from tasks.cli import main

    day = dt.date(2026, 9, 20)
    setting("daybreak", "start_date", day)
    lab.qsr_days(day, 3)  # folders 09-20 .. 09-23
    pos = lab.raw / "qsr_pos"
    store_file = pos / "2026-09-22" / "S001.csv"
    outside = lab.root / "elsewhere" / "2026-09-24"
    outside.mkdir(parents=True)
    shutil.copy(store_file, outside / "S001.csv")
    os.symlink(outside, pos / "2026-09-24")
    for name, store in (("20260922", "S005"), ("2026-9-22", "S006")):
        (pos / name).mkdir()
        shutil.copy(store_file, pos / name / f"{store}.csv")
    shutil.copy(store_file, pos / "S007.csv")
    (pos / "2026-09-30").write_text("a file, not a folder\n")
    shown = [
        "qsr_pos/2026-09-24 (a symbolic link (never followed))",
        "qsr_pos/2026-09-30 (not a folder)",
        "qsr_pos/2026-9-22 (not a YYYY-MM-DD folder name)",
        "qsr_pos/20260922 (not a YYYY-MM-DD folder name)",
        "qsr_pos/S007.csv (not a YYYY-MM-DD folder name)",
    ]
    linked = "raw folder missing: qsr_pos/2026-09-24 (a symbolic link (never followed))"

    with caplog.at_level("INFO", logger="luigi-interface"):
        assert lab.range(day, day + 4 * DAY) == 20  # 09-23 waits for folder 09-24: a link, not read
    named = [w for w in warnings_of(caplog) if SOURCE_LEVEL in w]
    assert len(named) == 1, named  # once in the run, not once per date
    assert named[0].endswith(f": 5 entries {SOURCE_LEVEL}: " + "; ".join(shown))
    summary = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("summary of this run"))
    assert "qsr_pos/2026-09-24 is a symbolic link (never followed)): " in summary  # not "(not there yet)"
    assert sorted(read(lab, "staging/qsr_pos/*/*.parquet", "distinct store_id")) == [("S001",), ("S002",)]
    assert sorted(p.name for p in (lab.data / "staging" / "qsr_pos").iterdir()) == [
        f"business_date=2026-09-{d}" for d in (20, 21, 22)
    ]

    assert main(["status", "--dataset", "stg_qsr_pos", "--json"]) == 0  # the default --stop: 09-24
    rows = json.loads(capsys.readouterr().out)
    assert rows[0] == {
        "dataset": "raw_zone",
        "date": None,
        "state": "not_read",
        "reason": "5 entries of the raw zone not read by any partition",
        "rows": None,
        "duration_s": None,
        "not_read": shown,
        "warnings": [],
        "built_by": None,
        "raw_folders": None,
    }
    # the link, the file named 2026-09-30 and 20260922 (a date to Python) do not stretch the range
    assert [(r["date"], r["state"]) for r in rows[1:]] == [
        ("2026-09-20", "ok"),
        ("2026-09-21", "ok"),
        ("2026-09-22", "ok"),
        ("2026-09-23", "waiting"),
    ]
    assert rows[-1]["reason"] == linked
    assert main(["status", "--dataset", "stg_qsr_pos"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:7] == ["5 entries of the raw zone not read by any partition:", *(f"  {e}" for e in shown)]
    assert lines[7:10] == ["stg_qsr_pos  2026-09-20 .. 2026-09-23", "  ###w", "  3 ok, 1 waiting"]
    assert f"  2026-09-23 waiting: {linked}" in lines
    assert not [w for w in warnings_of(caplog) if SOURCE_LEVEL in w][1:]  # the view shows them, says nothing


@pytest.mark.system
@pytest.mark.parametrize("zone_kind", ["local", "sftp"], indirect=True)
def test_a_linked_source_folder_is_named_in_the_log_and_status_as_not_read(lab, zone_kind, caplog, capsys):
    """``raw/qsr_pos -> elsewhere``: a source folder that is a symbolic link is not read (its folders read
    as absent), and the link is named, in the run's log and in status, locally and over SFTP."""
    from tasks.cli import main

    lab.qsr_days(FIRST, 1)
    (lab.root / "elsewhere").mkdir()
    shutil.move(lab.raw / "qsr_pos", lab.root / "elsewhere" / "qsr_pos")
    os.symlink(lab.root / "elsewhere" / "qsr_pos", lab.raw / "qsr_pos")
    with caplog.at_level("WARNING", logger="luigi-interface"):
        assert lab.luigi("StgQsrPos", "--date", str(FIRST)) == 20
    assert [w for w in warnings_of(caplog) if SOURCE_LEVEL in w][0].endswith(
        f": 1 entry {SOURCE_LEVEL}: qsr_pos (a symbolic link (never followed))"
    )
    assert not (lab.data / "staging" / "qsr_pos").exists()

    span = ["--start", str(FIRST), "--stop", str(FIRST + DAY)]
    assert main(["status", "--dataset", "stg_qsr_pos", *span, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["dataset"], r["state"], r["not_read"]) for r in rows] == [
        ("raw_zone", "not_read", ["qsr_pos (a symbolic link (never followed))"]),
        ("stg_qsr_pos", "waiting", []),
    ]
    assert rows[1]["reason"] == (
        "raw folder missing: qsr_pos/2026-09-10 (qsr_pos: a symbolic link (never followed)), "
        "qsr_pos/2026-09-11 (qsr_pos: a symbolic link (never followed))"
    )
    assert main(["status", "--dataset", "stg_qsr_pos", *span, "--html", str(lab.root / "s.html")]) == 0
    assert "<li>qsr_pos (a symbolic link (never followed))</li>" in (lab.root / "s.html").read_text()


@pytest.mark.system
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv to list as nobody")
def test_a_file_the_pipelines_user_cannot_read_is_refused_naming_the_reason(tmp_path):
    import subprocess
    import sys
    import tempfile

    zone = Path(tempfile.mkdtemp(dir="/tmp", prefix="unreadable-"))  # a folder user nobody can reach
    try:
        zone.chmod(0o755)
        folder = zone / "qsr_pos" / str(FIRST)
        folder.mkdir(parents=True)
        (folder / "S001.csv").write_text("x\n")
        (folder / "S002.csv").write_text("y\n")
        (folder / "S002.csv").chmod(0)
        scan = (
            "import datetime as d; from tasks.storage.rawzone import RawZone; "
            f"print(RawZone({str(zone)!r}).scan_folder_all('qsr_pos', d.date(2026, 9, 10)))"
        )
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", scan]
        out = subprocess.run(as_nobody, cwd=REPO, capture_output=True, text=True, check=True).stdout
        assert (
            "[('S001.csv', 2," in out
            and "[Refused(name='S002.csv', reason=\"not readable by the pipeline's user\")]" in out
        )
    finally:
        shutil.rmtree(zone)


@pytest.mark.system
@pytest.mark.parametrize("zone_kind", ["local", "sftp"], indirect=True)
def test_a_file_swapped_for_a_symbolic_link_after_its_listing_is_not_read(lab, zone_kind, tmp_path):
    from tasks import settings
    from tasks.storage.rawzone import RawFileUnreadable, RawZone

    (tmp_path / "secret.csv").write_text("not for the pipeline\n")
    lab.qsr_file(str(FIRST), "S001", [])
    zone = RawZone.from_uri(settings.raw_root())
    [listed] = zone.list_folder("qsr_pos", FIRST)
    (lab.raw / listed.relpath).unlink()
    os.symlink(tmp_path / "secret.csv", lab.raw / listed.relpath)
    try:
        with pytest.raises(RawFileUnreadable, match=f"{listed.relpath}: (became a symbolic link|no longer a regular)"):
            zone.read_bytes(listed)
        assert zone.scan_folder_all("qsr_pos", FIRST)[1] == [("S001.csv", "a symbolic link (never followed)")]
    finally:
        zone.close()
