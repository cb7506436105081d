"""StgQsrPos through Luigi on a temporary raw zone: what runs, what is skipped, what is kept."""

from __future__ import annotations

import datetime as dt
import os
import shutil

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tasks.freshness.engine import Engine
from tasks.qsr import StgQsrPos
from tests.conftest import qsr_rows

pytestmark = pytest.mark.luigi

START = dt.date(2026, 9, 10)
DAY = dt.timedelta(days=1)


def dates(start: dt.date, n: int) -> set[dt.date]:
    return {start + dt.timedelta(days=i) for i in range(n)}


def test_partition_content_worked_by_hand(lab):
    lab.qsr_days(START, 2, stores=("S001",))
    assert lab.range(START, START + dt.timedelta(days=1)) == 0
    got = duckdb.sql(
        f"select order_id, line_no, net_amount::varchar, business_date from read_parquet("
        f"'{lab.data}/staging/qsr_pos/*/*.parquet', hive_partitioning=true) order by order_id, line_no"
    ).fetchall()
    # business date 09-10: B and C from folder 09-10 (after 05:00), A lines from folder 09-11 (01:15)
    assert got == [
        ("S001-2026-09-10-B", 1, "5.97", START),
        ("S001-2026-09-10-C", 1, "-6.50", START),
        ("S001-2026-09-11-A", 1, "6.50", START),
        ("S001-2026-09-11-A", 2, "4.00", START),
    ]


def test_complete_range_reruns_nothing_and_touches_no_file(lab):
    lab.qsr_days(START, 5)
    assert lab.range(START, START + dt.timedelta(days=5)) == 0
    before = lab.files()
    assert lab.range(START, START + dt.timedelta(days=5)) == 0
    assert lab.files() == before
    table = ds.dataset(
        lab.data / "staging/qsr_pos",
        format="parquet",
        partitioning=ds.partitioning(pa.schema([("business_date", pa.date32())]), flavor="hive"),
    ).to_table()
    assert table.num_rows == 5 * 2 * 4  # five dates, two stores, four lines each: nothing appended twice
    assert table.schema.field("business_date").type == pa.date32()


def test_deleting_a_partition_rebuilds_only_that_date(lab):
    lab.qsr_days(START, 6)
    lab.range(START, START + dt.timedelta(days=6))
    victim = START + dt.timedelta(days=3)
    shutil.rmtree(lab.partition(victim))
    assert lab.rebuilt_by(lambda: lab.range(START, START + dt.timedelta(days=6))) == {victim}


def test_changing_the_suspicious_threshold_rebuilds_every_partition(lab, qsr_setting):
    lab.qsr_days(START, 4)
    lab.range(START, START + dt.timedelta(days=4))
    qsr_setting("suspicious_qty_threshold", 2)
    assert lab.rebuilt_by(lambda: lab.range(START, START + dt.timedelta(days=4))) == dates(START, 4)
    flagged = pq.read_table(lab.partition(START) / "data.parquet").to_pylist()
    assert {(r["sku"], r["is_suspicious"]) for r in flagged} == {("COLA", True), ("BURGER", False), ("FRIES", False)}


def test_a_rule_change_that_moves_no_row_of_a_date_rewrites_only_its_manifest(lab, qsr_setting):
    """Threshold 20 to 25: no line has a qty from 21 to 25 except on one date, so every date is rebuilt
    (its rules changed) but only that date's data, store totals and quarantine are rewritten; the
    others keep their files byte for byte, inode and mtime, quarantine included (a bad line each)."""
    lab.qsr_days(START, 3)
    qsr_setting("max_reject_share", 0.5)  # a small day: its one bad line is 1 of 9
    changed = START + dt.timedelta(days=1)
    for i in range(3):  # one rejected line a date, so each date has a quarantine to keep or replace
        d = START + dt.timedelta(days=i)
        good = [r.replace(",COLA,3,", ",COLA,22,") if d == changed else r for r in qsr_rows("S001", d)]
        lab.qsr_file(d.isoformat(), "S001", [f"X{i},1,S001,{d}T13:00:00-04:00,COLA,x,1.99,,COMPLETED", *good])
    assert lab.range(START, START + dt.timedelta(days=3)) == 0

    def files(day):
        folder, quarantine = lab.partition(day), lab.data / f"quarantine/staging/qsr_pos/business_date={day}"
        paths = [*sorted(folder.glob("[!_]*")), folder / "_store_totals.arrow", quarantine / "rejected.parquet"]
        return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in paths}

    before = {d: files(d) for d in dates(START, 3)}
    qsr_setting("suspicious_qty_threshold", 25)
    assert lab.rebuilt_by(lambda: lab.range(START, START + dt.timedelta(days=3))) == dates(START, 3)
    after = {d: files(d) for d in dates(START, 3)}
    assert {d for d in after if after[d] != before[d]} == {changed}
    assert all(set(after[d]) == {"data.parquet", "_store_totals.arrow", "rejected.parquet"} for d in after)
    flagged = pq.read_table(lab.partition(changed) / "data.parquet").to_pylist()
    assert not any(r["is_suspicious"] for r in flagged)  # qty 22 is not above 25


def test_late_store_file_rebuilds_exactly_the_two_partitions_that_read_its_folder(lab):
    lab.qsr_days(START, 8)
    lab.range(START, START + dt.timedelta(days=8))
    late = START + dt.timedelta(days=4)
    lab.qsr_file(late.isoformat(), "S777", [r.replace("S001", "S777") for r in lab_rows("S001", late)])
    rebuilt = lab.rebuilt_by(lambda: lab.range(START, START + dt.timedelta(days=8)))
    assert rebuilt == {late - dt.timedelta(days=1), late}
    stores = pq.read_table(lab.partition(late) / "data.parquet")["store_id"].unique().to_pylist()
    assert sorted(stores) == ["S001", "S002", "S777"]


def test_resent_file_with_new_content_rebuilds_its_window(lab):
    lab.qsr_days(START, 4)
    lab.range(START, START + dt.timedelta(days=4))
    folder = START + dt.timedelta(days=2)
    path = lab.raw / "qsr_pos" / folder.isoformat() / "S002.csv"
    path.write_text(path.read_text().replace(",COLA,3,", ",COLA,4,"))
    assert lab.rebuilt_by(lambda: lab.range(START, START + dt.timedelta(days=4))) == {
        folder - dt.timedelta(days=1),
        folder,
    }


def test_more_dates_than_the_task_limit_with_gaps_past_it_are_filled(lab):
    lab.qsr_days(START, 20, stores=("S001",))
    stop = START + dt.timedelta(days=20)
    assert lab.range(START, stop) == 0
    gaps = {START + dt.timedelta(days=n) for n in (12, 15, 19)}
    for g in gaps:
        shutil.rmtree(lab.partition(g))
    # a cap of 10 tasks (Luigi's default: 50): with a correct bulk_complete only the 3 gaps are missing
    assert lab.rebuilt_by(lambda: lab.range(START, stop, "--task-limit", "10")) == gaps


def test_bad_rows_are_quarantined_and_the_partition_succeeds(lab):
    lab.qsr_days(START, 1, stores=("S001",))
    rows = lab_rows("S001", START) + [
        f"X{i},1,S001,2026-09-10T12:00:00-04:00,COLA,{q},1.00,,COMPLETED" for i, q in enumerate("1" * 40)
    ]
    rows.append("BAD,1,S001,2026-09-10T12:00:00-04:00,COLA,abc,1.00,,COMPLETED")
    lab.qsr_file(START.isoformat(), "S001", rows)
    assert lab.range(START, START + dt.timedelta(days=1)) == 0
    quarantine = lab.data / "quarantine/staging/qsr_pos/business_date=2026-09-10/rejected.parquet"
    got = duckdb.sql(f"select source_file, row_number, reason, qty from '{quarantine}'").fetchall()
    assert got == [("qsr_pos/2026-09-10/S001.csv", 46, "qty is not an integer >= 1", "abc")]
    manifest = StgQsrPos(date=START).store().read_manifest(START)
    assert manifest["rejected_count"] == 1


@pytest.mark.system
@pytest.mark.parametrize("kind", ["too_many_rejects", "missing_column"])
def test_a_failing_partition_exits_non_zero_names_the_problem_and_keeps_the_old_partition(lab, kind):
    lab.qsr_days(START, 2, stores=("S001",))
    lab.range(START, START + dt.timedelta(days=2))
    old = {p.name: p.read_bytes() for p in lab.partition(START).iterdir()}
    folder = START.isoformat()
    if kind == "too_many_rejects":
        lab.qsr_file(
            folder, "S001", lab_rows("S001", START) + ["Q,1,S001,2026-09-10T12:00:00-04:00,COLA,zero,1.00,,COMPLETED"]
        )
        expected = r"qsr_pos/2026-09-10/S001.csv row 6: qty is not an integer >= 1"
        shown = (
            f"All rejected rows: {lab.data}/_state/failures/staging/qsr_pos/business_date=2026-09-10.rejected.parquet"
        )
    else:
        header = "order_id,line_no,store_id,ordered_at,sku,quantity,unit_price,discount,status"
        lab.qsr_file(folder, "S001", lab_rows("S001", START), header=header)
        expected = shown = r"qsr_pos/2026-09-10/S001.csv: missing column 'qty'"
    cfg = lab.write_cfg(lab.root / "luigi.cfg")
    proc = lab.cli("StgQsrPos", "--date", folder, "--local-scheduler", env={"LUIGI_CONFIG_PATH": str(cfg)})
    assert proc.returncode == 30, proc.stderr[-2000:]
    assert shown in proc.stderr  # the summary: where all the rejected rows are, the first ones in the record
    assert {p.name: p.read_bytes() for p in lab.partition(START).iterdir()} == old
    failure = StgQsrPos(date=START).store().read_failure(START)
    assert expected in failure["error"]


def test_missing_next_folder_is_missing_data_not_half_a_day(lab):
    lab.qsr_days(START, 3)
    shutil.rmtree(lab.raw / "qsr_pos" / (START + dt.timedelta(days=3)).isoformat())
    assert lab.range(START, START + dt.timedelta(days=3)) == 20  # [retcode] missing_data
    assert set(lab.built_at()) == dates(START, 2)


def test_a_folder_made_before_its_store_files_has_not_arrived_the_day_before_waits(lab, capsys, caplog):
    """The POS makes folder d+1 before it uploads its files: a run in between built partition d without its
    00:00-04:59 lines (they are in folder d+1) and said ok, exit 0. The folder, empty or holding only files
    no partition reads (an upload's temporary file), has not arrived: d waits (exit 20), and says why."""
    from tasks.cli import main

    lab.qsr_days(START, 2)  # folders START .. START+2
    last = lab.raw / "qsr_pos" / str(START + 2 * DAY)
    shutil.move(last, lab.root / "held")
    last.mkdir()  # the folder, not its files yet
    with caplog.at_level("INFO", logger="luigi-interface"):
        assert lab.range(START, START + 2 * DAY) == 20  # [retcode] missing_data
    assert set(lab.built_at()) == {START}
    assert f"for raw folder {last}/ (there, without any <store_id>.csv yet): StgQsrPos {START + DAY}" in caplog.text
    capsys.readouterr()
    assert main(["status", "--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(START + 2 * DAY)]) == 0
    shown = capsys.readouterr().out
    why = "there, without any <store_id>.csv yet"
    assert f"{START + DAY} waiting: raw folder missing: qsr_pos/{START + 2 * DAY} ({why})" in shown, shown
    (last / "S001.csv.part").write_bytes((lab.root / "held" / "S001.csv").read_bytes())  # an upload under way
    assert lab.range(START, START + 2 * DAY) == 20
    assert set(lab.built_at()) == {START}
    assert main(["status", "--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(START + 2 * DAY)]) == 0
    assert f"({why}; it holds S001.csv.part)" in capsys.readouterr().out  # what is there instead
    (last / "S001.csv.part").unlink()
    for path in (lab.root / "held").iterdir():  # its files land
        shutil.copy2(path, last)
    assert lab.range(START, START + 2 * DAY) == 0
    orders = set(pq.read_table(lab.partition(START + DAY) / "data.parquet")["order_id"].to_pylist())
    assert {f"S001-{START + 2 * DAY}-A", f"S002-{START + 2 * DAY}-A"} <= orders  # its small hours


def test_the_run_summary_tells_a_folder_there_without_its_files_from_one_not_there(lab, caplog):
    """Of the folders a run waits for, one is there without its store files and the next is not there at all:
    the summary's line names the one that is there as such, not both as "not there yet"."""
    lab.qsr_days(START, 2)  # folders START .. START+2
    empty = lab.raw / "qsr_pos" / str(START + 2 * DAY)
    shutil.rmtree(empty)
    empty.mkdir()
    with caplog.at_level("INFO", logger="luigi-interface"):
        assert lab.range(START, START + 3 * DAY) == 20  # [retcode] missing_data
    line = next(x for x in caplog.text.splitlines() if "for raw folders" in x)
    assert f"(not there yet; {START + 2 * DAY}/ there, without any <store_id>.csv yet): StgQsrPos" in line, line


def test_a_partition_built_from_a_folder_without_store_files_is_stale_once_they_land(lab, monkeypatch, capsys):
    """A partition built, as Daybreak used to, while folder d+1 held no store file (its small hours absent)
    waits while it still holds none, is stale once d+1's files land, and the next run rebuilds it whole."""
    from tasks import contract
    from tasks.cli import main

    def status() -> str:
        capsys.readouterr()
        assert main(["status", "--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(START + DAY)]) == 0
        return capsys.readouterr().out

    lab.qsr_days(START, 1)  # folders START, START+1
    nxt = lab.raw / "qsr_pos" / str(START + DAY)
    shutil.move(nxt, lab.root / "held")
    nxt.mkdir()
    (nxt / "notes.txt").write_text("uploading\n")
    monkeypatch.setitem(contract.ARRIVES_WITH, "qsr_pos", ("any file", lambda name: True))  # the rule before
    assert lab.range(START, START + DAY) == 0
    assert pq.read_table(lab.partition(START) / "data.parquet").num_rows == 4  # without folder d+1's lines
    monkeypatch.undo()
    held = "there, without any <store_id>.csv yet; it holds notes.txt"
    waiting = f"{START} waiting: raw folder missing: qsr_pos/{START + DAY} ({held})"
    assert waiting in status()
    assert lab.range(START, START + DAY) == 20
    for path in (lab.root / "held").iterdir():
        shutil.copy2(path, nxt)
    shown = status()
    new = f"new file qsr_pos/{START + DAY}/S001.csv, new file qsr_pos/{START + DAY}/S002.csv"
    assert f"{START} stale: input changed: {new}" in shown, shown
    assert lab.rebuilt_by(lambda: lab.range(START, START + DAY)) == {START}
    assert pq.read_table(lab.partition(START) / "data.parquet").num_rows == 8


def test_crash_between_data_and_manifest_reads_whole_and_counts_stale(lab, monkeypatch):
    lab.qsr_days(START, 1)
    lab.range(START, START + dt.timedelta(days=1))
    path = lab.raw / "qsr_pos" / START.isoformat() / "S001.csv"
    path.write_text(path.read_text().replace(",COLA,3,", ",COLA,5,"))

    real_replace = os.replace

    def crash(src, dst, **kwargs):
        if os.path.basename(dst) == "_manifest.json":
            raise KeyboardInterrupt("simulated crash before the manifest")
        return real_replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        StgQsrPos(date=START).run()
    monkeypatch.undo()
    table = pq.read_table(lab.partition(START) / "data.parquet")  # whole: the new content
    assert 5 in table["qty"].to_pylist()
    assert StgQsrPos(date=START).state(Engine()).reason.startswith("data file does not match its manifest")
    assert lab.rebuilt_by(lambda: lab.range(START, START + dt.timedelta(days=1))) == {START}
    assert StgQsrPos(date=START).complete()


def test_bulk_complete_agrees_with_complete(lab, qsr_setting):
    lab.qsr_days(START, 8)
    lab.range(START, START + dt.timedelta(days=8))
    shutil.rmtree(lab.partition(START + dt.timedelta(days=1)))  # missing
    lab.qsr_file((START + dt.timedelta(days=4)).isoformat(), "S009", [])  # stale inputs for days 3 and 4
    os.utime(lab.partition(START + dt.timedelta(days=6)) / "data.parquet", ns=(1, 1))  # data/manifest mismatch
    candidates = sorted(dates(START, 8))
    single = [d for d in candidates if StgQsrPos(date=d).complete()]
    assert single == [START + dt.timedelta(days=n) for n in (0, 2, 5, 7)]
    assert StgQsrPos.bulk_complete(iter(candidates)) == single
    qsr_setting("suspicious_qty_threshold", 99)
    assert StgQsrPos.bulk_complete(iter(candidates)) == [d for d in candidates if StgQsrPos(date=d).complete()] == []


def test_invalid_store_file_names_are_never_read(lab):
    lab.qsr_days(START, 1, stores=("S001",))
    lab.range(START, START + dt.timedelta(days=1))
    folder = lab.raw / "qsr_pos" / START.isoformat()
    for name in ("s001.csv", "S001 copy.csv", "S002.txt", ".S003.csv", "S00%.csv"):
        (folder / name).write_text("not,a,pos,file\n")
    assert lab.rebuilt_by(lambda: lab.range(START, START + dt.timedelta(days=1))) == set()
    shutil.rmtree(lab.partition(START))
    lab.range(START, START + dt.timedelta(days=1))
    manifest = StgQsrPos(date=START).store().read_manifest(START)
    assert sorted(r["path"].rsplit("/", 1)[1] for r in manifest["refused_inputs"]) == sorted(
        [".S003.csv", "S00%.csv", "S001 copy.csv", "S002.txt", "s001.csv"]
    )
    assert [line.split(" ")[0] for line in manifest["inputs"]] == [
        "qsr_pos/2026-09-10/S001.csv",
        "qsr_pos/2026-09-11/S001.csv",
    ]


@pytest.mark.system
def test_cli_from_another_working_directory(lab, tmp_path):
    lab.qsr_days(START, 2)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cfg = lab.write_cfg(elsewhere / "luigi.cfg")
    args = ["RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + dt.timedelta(days=2))]
    proc = lab.cli(*args, "--local-scheduler", cwd=elsewhere, env={"LUIGI_CONFIG_PATH": str(cfg)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert set(lab.built_at()) == dates(START, 2)


def lab_rows(store: str, folder: dt.date) -> list[str]:
    from tests.conftest import qsr_rows

    return qsr_rows(store, folder)


def test_a_manifest_in_the_earlier_inputs_format_reads_as_stale_with_a_reason(lab):
    import json

    lab.qsr_days(START, 1, stores=("S001",))
    lab.range(START, START + dt.timedelta(days=1))
    path = lab.partition(START) / "_manifest.json"
    manifest = json.loads(path.read_text())
    manifest["inputs"] = [line.rsplit(" ", 2) for line in manifest["inputs"]]
    manifest["inputs"][0][1] = "1"  # the size the earlier build saw
    manifest["input_fingerprint"] = "from-an-earlier-format"
    path.write_text(json.dumps(manifest))
    state = StgQsrPos(date=START).state(Engine())
    assert (state.state, state.reason) == ("stale", "input content changed: qsr_pos/2026-09-10/S001.csv")


def test_a_raw_file_changing_while_read_fails_without_writing(lab, monkeypatch):
    from tasks.freshness.buildplan import RawInputChanged
    from tasks.storage.rawlocal import LocalRaw

    lab.qsr_days(START, 1, stores=("S001", "S002"))
    lab.range(START, START + dt.timedelta(days=1))
    old = {p.name: p.read_bytes() for p in lab.partition(START).iterdir()}
    path = lab.raw / "qsr_pos" / START.isoformat() / "S002.csv"
    path.write_text(path.read_text().replace(",COLA,3,", ",COLA,4,"))  # stale: it will be rebuilt
    real_read = LocalRaw.read

    def read_while_uploading(zone, raw):
        data = real_read(zone, raw)
        if raw.relpath.endswith("S001.csv"):  # meanwhile, S002.csv is still being written
            with open(path, "a") as fh:
                fh.write("S002-X,1,S002,2026-09-10T12:00:00-04:00,COLA,1,1.99,,COMPLETED\n")
        return data

    monkeypatch.setattr(LocalRaw, "read", read_while_uploading)
    with pytest.raises(RawInputChanged, match="changed qsr_pos/2026-09-10/S002.csv"):
        StgQsrPos(date=START).run()
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in lab.partition(START).iterdir()} == old  # nothing written
    assert lab.rebuilt_by(lambda: lab.range(START, START + dt.timedelta(days=1))) == {START}
