"""Identity by content (issue 14): touched or re-sent identical raw files rebuild nothing, a rebuild
to identical rows stops the cascade, and the reasons say so."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil

import pytest

from tasks import cli
from tasks.views import plan, status

pytestmark = pytest.mark.luigi

START = dt.date(2026, 9, 10)
DAY = dt.timedelta(days=1)
STOP = START + 4 * DAY  # staging 09-10 .. 09-13 reads folders 09-10 .. 09-14


def touch_all(root) -> int:
    """`touch` every raw file (as a re-copy that does not keep mtimes does)."""
    files = [p for p in root.rglob("*") if p.is_file()]
    for p in files:
        before = p.stat().st_mtime_ns
        os.utime(p)
        assert p.stat().st_mtime_ns != before
    return len(files)


def test_touched_and_recopied_identical_files_rebuild_nothing_and_plan_says_why(lab, setting):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4)
    assert lab.range(START, STOP) == 0
    assert touch_all(lab.raw) == 10
    one = lab.raw / "qsr_pos" / "2026-09-12" / "S001.csv"
    shutil.copy(one, one.with_suffix(".tmp"))  # re-copied byte for byte: a new inode and mtime
    os.replace(one.with_suffix(".tmp"), one)
    lab.wait_past_last_raw_change()  # the copy is older than the checks, as it is for the next morning's run

    shown = plan.render(plan.make_plan("stg_qsr_pos", START, STOP))
    assert "0 partitions would run" in shown
    assert f"keep  {START} .. {STOP - DAY}  4 partitions: metadata changed, content identical" in shown
    text = status.render_text(status.collect(START, STOP, ["stg_qsr_pos"]))
    assert "4 ok, metadata changed, content identical" in text
    assert lab.rebuilt_by(lambda: lab.range(START, STOP)) == set()

    # the new metadata is remembered (never in the partition's data or manifest): the next check compares
    # metadata again, as cheap as before, so it misses a change behind the metadata (daybreak verify finds it)
    changed_behind_metadata(one)
    assert "4 ok, metadata changed, content identical" in status.render_text(
        status.collect(START, STOP, ["stg_qsr_pos"])
    )


def test_dates_kept_for_identical_content_that_are_not_in_a_row_are_not_shown_as_a_range(lab, setting):
    """Before: ``keep 2026-09-10 .. 2026-09-13 2 partitions`` for 09-10 and 09-13 alone, and ``(D .. D)``."""
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 5)
    stop = START + 5 * DAY
    assert lab.range(START, stop) == 0
    # folder F is read by dates F-1 and F: touching folders 09-10 and 09-15 concerns dates 09-09 (before
    # start_date), 09-10 and 09-14
    for folder in (START, START + 5 * DAY):
        for p in (lab.raw / "qsr_pos" / str(folder)).iterdir():
            os.utime(p)
    lab.wait_past_last_raw_change()
    shown = plan.render(plan.make_plan("stg_qsr_pos", START, stop))
    assert f"keep  {START}, {START + 4 * DAY} (2 dates)  2 partitions: metadata changed" in shown, shown
    text = status.render_text(status.collect(START, stop, ["stg_qsr_pos"]))
    assert f"2 ok, metadata changed, content identical ({START}, {START + 4 * DAY} (2 dates))" in text, text
    os.utime(next((lab.raw / "qsr_pos" / str(START + 5 * DAY)).iterdir()))
    lab.wait_past_last_raw_change()
    assert lab.range(START, stop) == 0
    for p in (lab.raw / "qsr_pos" / str(START + 5 * DAY)).iterdir():
        os.utime(p)
    lab.wait_past_last_raw_change()
    text = status.render_text(status.collect(START + 4 * DAY, stop, ["stg_qsr_pos"]))
    assert f"1 ok, metadata changed, content identical ({START + 4 * DAY}): nothing" in text, text


def test_a_changed_file_of_the_same_size_rebuilds_exactly_the_dates_that_read_it(lab, setting):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4)
    assert lab.range(START, STOP) == 0
    touch_all(lab.raw)
    path = lab.raw / "qsr_pos" / "2026-09-12" / "S001.csv"
    text = path.read_text()
    path.write_text(text.replace(",COLA,3,", ",COLA,4,"))  # same size, new content
    assert len(path.read_text()) == len(text)
    got = plan.make_plan("stg_qsr_pos", START, STOP).runs
    assert [(d, s) for d, s, _ in got] == [(START + DAY, "stale"), (START + 2 * DAY, "stale")]
    assert "input content changed: qsr_pos/2026-09-12/S001.csv" in got[0][2]
    # folder 09-12 is read by business dates 09-11 (lines before 05:00) and 09-12
    assert lab.rebuilt_by(lambda: lab.range(START, STOP)) == {START + DAY, START + 2 * DAY}


def test_rerunning_the_sample_with_the_same_arguments_rebuilds_nothing(lab, setting):
    setting("daybreak", "start_date", START)
    args = ["sample", "--start", str(START), "--days", "3", "--stores", "3", "--raw-root", str(lab.raw)]
    assert cli.main(args) == 0
    stop = START + 2 * DAY
    assert lab.range(START, stop) == 0
    assert lab.range(START, stop, of="AdsDaily") == 0
    before = {p: p.stat().st_mtime_ns for p in lab.raw.rglob("*.csv")}
    assert cli.main(args) == 0  # run again: every file is there with the same bytes, and left alone
    assert {p: p.stat().st_mtime_ns for p in lab.raw.rglob("*.csv")} == before
    assert lab.rebuilt_by(lambda: lab.range(START, stop)) == set()
    again = lab.root / "again"
    assert cli.main([*args[:-1], str(again)]) == 0  # the same files, written anew elsewhere, copied over
    for path in before:
        shutil.copyfile(again / path.relative_to(lab.raw), path)
    assert all(p.stat().st_mtime_ns != m for p, m in before.items())  # every file written again
    assert lab.rebuilt_by(lambda: lab.range(START, stop)) == set()
    assert lab.rebuilt_by(lambda: lab.range(START, stop, of="AdsDaily"), "staging/ads_daily") == set()


def test_a_rule_change_that_changes_no_row_of_a_store_rebuilds_nothing_of_it_downstream(lab, setting):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S007"))
    path = lab.raw / "qsr_pos" / "2026-09-12" / "S007.csv"
    path.write_text(path.read_text().replace(",COLA,3,", ",COLA,9,"))  # one line of qty 9, store S007 only

    def build() -> None:
        assert lab.range(START, STOP) == 0
        assert lab.luigi("AllStores") == 0

    build()
    stores_before = {s: _finished(lab, s) for s in ("S001", "S007")}
    setting("qsr", "suspicious_qty_threshold", 5)  # from 20: only S007's qty 9 line crosses it
    assert lab.rebuilt_by(build) == {START + d * DAY for d in range(4)}  # the rules of every date changed
    # S001's rows are the same on every date: its store_daily_sales is not rebuilt; S007's is
    assert {s for s, t in stores_before.items() if _finished(lab, s) != t} == {"S007"}


def _finished(lab, store: str) -> str:
    path = lab.data / "marts/store_daily_sales" / f"store_id={store}" / "_manifest.json"
    return json.loads(path.read_text())["finished_at"]


def test_a_failure_record_no_longer_applies_once_the_file_is_fixed_with_its_mtime_kept(lab):
    lab.qsr_days(START, 1, stores=("S001",))
    path = lab.raw / "qsr_pos" / START.isoformat() / "S001.csv"
    good = path.read_text()
    bad = good.replace(",COLA,3,", ",COLA,x,")  # one line of two: over max_reject_share, the partition fails
    path.write_text(bad)
    stamp = path.stat().st_mtime_ns
    assert lab.range(START, START + DAY) == 30
    assert status.collect(START, START + DAY, ["stg_qsr_pos"])[0].state == "failed"
    path.write_text(bad)  # the same bad content again, new mtime: the failure still applies
    assert status.collect(START, START + DAY, ["stg_qsr_pos"])[0].state == "failed"
    path.write_text(good.replace(",COLA,3,", ",COLA,4,"))  # fixed, same size, mtime put back (cp -p, rsync -a)
    os.utime(path, ns=(stamp, stamp))
    row = status.collect(START, START + DAY, ["stg_qsr_pos"])[0]
    assert row.state == "missing"  # the old error is not shown: the next run will build it
    assert lab.range(START, START + DAY) == 0


def backdate(root) -> None:
    """Every raw file written a minute ago: older than any clock resolution of the builds that follow
    (a file modified within it of a build's listing is hashed anyway)."""
    for p in root.rglob("*.csv"):
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns - 60 * 10**9))


def changed_behind_metadata(path) -> None:
    """Change one number of a raw file, keeping its size and putting its mtime back (cp -p, rsync -a)."""
    st = path.stat()
    text = path.read_text()
    path.write_text(text.replace(",COLA,3,", ",COLA,4,"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)


def test_verify_finds_a_change_metadata_misses_and_the_next_run_rebuilds_what_read_it(lab, setting, capsys):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4)
    backdate(lab.raw)
    assert lab.range(START, STOP) == 0
    span = ["--start", str(START), "--stop", str(STOP)]
    assert cli.main(["verify", *span]) == 0
    assert "0 mismatches" in capsys.readouterr().out
    changed_behind_metadata(lab.raw / "qsr_pos" / "2026-09-12" / "S001.csv")
    assert lab.rebuilt_by(lambda: lab.range(START, STOP)) == set()  # metadata alone cannot see it

    assert cli.main(["verify", "--dataset", "stg_qsr_pos", *span]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH raw qsr_pos/2026-09-12/S001.csv: content differs" in out
    assert "stale now: staging/qsr_pos 2026-09-11, staging/qsr_pos 2026-09-12" in out
    assert lab.rebuilt_by(lambda: lab.range(START, STOP)) == {START + DAY, START + 2 * DAY}
    assert cli.main(["verify", *span]) == 0


def test_verify_finds_a_damaged_data_file_and_the_rebuild_rewrites_it(lab, setting, capsys):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 2)
    assert lab.range(START, START + DAY) == 0
    data = lab.partition(START) / "data.parquet"
    st, good = data.stat(), data.read_bytes()
    data.write_bytes(good[:100] + bytes([good[100] ^ 1]) + good[101:])  # one flipped bit, same size and mtime
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert cli.main(["verify", "--start", str(START), "--stop", str(START + DAY)]) == 1
    assert f"MISMATCH data {data}: content differs from its manifest" in capsys.readouterr().out
    assert lab.range(START, START + DAY) == 0
    assert data.read_bytes() == good  # rewritten whole, not kept for having the same rows on record


def test_a_file_stamped_within_the_clock_resolution_of_its_build_is_hashed_not_trusted(lab, setting):
    """An mtime not older than the build's listing (by the zone's resolution: SFTP's whole seconds)
    cannot tell a same-size re-send in that instant: the check hashes such a file."""
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4)
    path = lab.raw / "qsr_pos" / "2026-09-12" / "S001.csv"
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 3600 * 10**9))  # stamped after the build lists it
    assert lab.range(START, STOP) == 0
    assert lab.rebuilt_by(lambda: lab.range(START, STOP)) == set()  # hashed: the same content
    changed_behind_metadata(path)
    assert lab.rebuilt_by(lambda: lab.range(START, STOP)) == {START + DAY, START + 2 * DAY}


def test_the_data_version_is_of_the_rows_not_of_the_writer_the_compression_or_the_chunks(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tasks.freshness.dataversions import logical_version

    table = pa.table(
        {"store_id": ["S1", "S2", None], "qty": pa.array([1, None, 3], pa.int32()), "amount": [1.5, 2.0, None]}
    ).replace_schema_metadata({"pandas": "written by some library version"})
    versions = set()
    for compression in ("zstd", "snappy", "none"):
        pq.write_table(table, tmp_path / f"{compression}.parquet", compression=compression, row_group_size=2)
        read = pq.read_table(tmp_path / f"{compression}.parquet")
        assert read.column("qty").num_chunks == 2  # two row groups: chunked unlike the original
        versions.add(logical_version(read))
    versions.add(logical_version(table))
    assert len(versions) == 1
    assert logical_version(table.slice(1)) == logical_version(table.take([1, 2]))  # a slice is its rows
    changed = table.set_column(1, "qty", pa.array([1, None, 4], pa.int32()))
    assert logical_version(changed) != logical_version(table)


def test_a_version_is_the_xxh3_of_the_rows_ipc_bytes():
    """The kind logical-v2 hashes the Arrow IPC stream of the rows (schema, one batch, no metadata) with
    XXH3-128."""
    import pyarrow as pa
    import xxhash

    from tasks.freshness.dataversions import logical_version

    table = pa.table({"store_id": ["S1", "S2"], "qty": pa.array([1, 2], pa.int32())})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    assert logical_version(table) == xxhash.xxh3_128(sink.getvalue().to_pybytes()).hexdigest()


def test_each_stores_version_is_the_logical_version_of_its_rows_whatever_the_columns_hold():
    """slice_versions hashes each store's run of a sorted copy without copying it out again: every
    store's version must be logical_version of exactly its rows (filtered, in table order), for
    strings (empty, non-ASCII), booleans, ints, decimals, timestamps, nulls, dictionaries, a chunked
    or sliced table, and a store without rows."""
    import decimal

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from tasks.freshness.dataversions import logical_version, slice_versions

    rng = np.random.default_rng(7)
    n = 2_000
    stores = rng.choice(["S1", "S2", "S10", "Ré", "S3"], n)
    text = np.array(["", "a", "héllo", "x" * 37, "0"], dtype=object)[rng.integers(0, 5, n)]
    table = pa.table(
        {
            "store_id": pa.array(stores),
            "order_id": pa.array(text),
            "line_no": pa.array(rng.integers(1, 99, n), pa.int32()),
            "ordered_at": pa.array(rng.integers(0, 2**40, n), pa.timestamp("s", tz="UTC")),
            "net": pa.array([decimal.Decimal(int(v)) / 100 for v in rng.integers(-1e6, 1e6, n)], pa.decimal128(18, 2)),
            "flag": pa.array(rng.random(n) < 0.3),
            "with_nulls": pa.array([None if v < 0.2 else str(v) for v in rng.random(n)]),
            "flag_nulls": pa.array([None if v < 0.1 else v < 0.5 for v in rng.random(n)]),
            "kind": pa.array(rng.choice(["A", "B"], n)).dictionary_encode(),
        }
    )
    plain = table.drop_columns(["kind"])  # no dictionary: each run's batch made over the sorted copy
    chunked = pa.concat_tables([plain.slice(0, 700), plain.slice(700)])  # two chunks a column
    for t in (plain, chunked, plain.slice(13, 1_500), table):  # a slice: every buffer at an offset
        expected = {k: logical_version(t.filter(pc.equal(t["store_id"], k))) for k in set(stores) | {"S9"}}
        assert slice_versions(t, "store_id", set(stores) | {"S9"}) == expected
        assert expected["S9"] == logical_version(t.slice(0, 0))
    one = pc.if_else(pc.equal(table["store_id"], "S2"), pa.scalar(1, pa.int32()), table["line_no"])
    one_changed = table.set_column(2, "line_no", one)
    before, after = slice_versions(table, "store_id", set(stores)), slice_versions(one_changed, "store_id", set(stores))
    assert {k for k in before if before[k] != after[k]} == {"S2"}


def test_deleting_every_cache_between_runs_rebuilds_nothing_and_changes_no_answer(lab, setting):
    """What Daybreak remembers between runs (docs/architecture.md, "What is remembered"): the manifest
    summaries (with the raw files' metadata seen since with the same content), the checked raw folders.
    Each is a cache: deleted, it costs time only; the answers (nothing to rebuild, the same status) stay."""
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4)
    assert lab.range(START, STOP) == 0
    assert touch_all(lab.raw) == 10  # metadata changed: the summaries remember the new metadata
    lab.wait_past_last_raw_change()
    assert lab.rebuilt_by(lambda: lab.range(START, STOP)) == set()
    before = status.render_text(status.collect(START, STOP, ["stg_qsr_pos"]))
    state = lab.data / "_state"
    cached = [state / name for name in ("summaries", "checked")]
    assert [p.name for p in cached if p.exists()] == ["summaries", "checked"]
    for path in cached:
        shutil.rmtree(path)
    assert lab.rebuilt_by(lambda: lab.range(START, STOP)) == set()
    assert status.render_text(status.collect(START, STOP, ["stg_qsr_pos"])) == before


def status_reasons(capsys, start: dt.date, stop: dt.date) -> dict[dt.date, str]:
    """The reason of each date, whole, as ``daybreak status --json`` gives it for stg_qsr_pos."""
    capsys.readouterr()
    assert cli.main(["status", "--dataset", "stg_qsr_pos", "--start", str(start), "--stop", str(stop), "--json"]) == 0
    return {dt.date.fromisoformat(r["date"]): r["reason"] for r in json.loads(capsys.readouterr().out)}


def named(reason: str) -> set[str]:
    """The raw files a stale reason names."""
    return {word.strip(",") for word in reason.split() if word.startswith("qsr_pos/")}


def test_a_stale_reason_names_exactly_the_files_whose_content_changed(lab, setting, capsys):
    """Touched with the same bytes: not named, whether or not a new file makes the date stale. Changed at the
    same size: named beside a file whose size changed."""
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S002", "S003"))
    assert lab.range(START, STOP) == 0
    twelve, thirteen = lab.raw / "qsr_pos" / "2026-09-12", lab.raw / "qsr_pos" / "2026-09-13"
    os.utime(twelve / "S001.csv")  # the same bytes
    same_size = twelve / "S002.csv"
    same_size.write_text(same_size.read_text().replace(",COLA,3,", ",COLA,4,"))
    with (twelve / "S003.csv").open("a") as f:
        f.write("S003-2026-09-12-Z,1,S003,2026-09-12T13:00:00-04:00,WRAP,1,8.00,,COMPLETED\n")
    os.utime(thirteen / "S001.csv")
    shutil.copy(thirteen / "S002.csv", thirteen / "S004.csv")
    lab.wait_past_last_raw_change()

    changed = {"qsr_pos/2026-09-12/S002.csv", "qsr_pos/2026-09-12/S003.csv"}
    new = {"qsr_pos/2026-09-13/S004.csv"}
    reasons = status_reasons(capsys, START, STOP)
    # folder F is read by dates F-1 and F
    assert named(reasons[START + DAY]) == changed, reasons
    assert named(reasons[START + 2 * DAY]) == changed | new, reasons
    assert named(reasons[START + 3 * DAY]) == new, reasons
    runs = {d: reason for d, _, reason in plan.make_plan("stg_qsr_pos", START, STOP).runs}
    assert {d: named(r) for d, r in runs.items()} == {d: named(reasons[d]) for d in runs}


def test_the_json_reason_names_every_file_that_changed(lab, setting, capsys):
    stores = tuple(f"S00{k}" for k in range(1, 7))
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=stores)
    assert lab.range(START, STOP) == 0
    for store in stores:
        with (lab.raw / "qsr_pos" / "2026-09-12" / f"{store}.csv").open("a") as f:
            f.write(f"{store}-2026-09-12-Z,1,{store},2026-09-12T13:00:00-04:00,WRAP,1,8.00,,COMPLETED\n")
    reason = status_reasons(capsys, START + DAY, START + 2 * DAY)[START + DAY]
    assert named(reason) == {f"qsr_pos/2026-09-12/{s}.csv" for s in stores}, reason
    assert "more" not in reason, reason


def test_without_recorded_hashes_a_touched_file_is_named_for_its_time_not_as_changed(lab, setting, capsys):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4)
    assert lab.range(START, STOP) == 0
    for path in (lab.data / "staging/qsr_pos").glob("*/_manifest.json"):  # as an older release wrote them
        m = json.loads(path.read_text())
        del m["input_hashes"]
        path.write_text(json.dumps(m))
    folder = lab.raw / "qsr_pos" / "2026-09-12"
    os.utime(folder / "S001.csv")
    with (folder / "S002.csv").open("a") as f:
        f.write("S002-2026-09-12-Z,1,S002,2026-09-12T13:00:00-04:00,WRAP,1,8.00,,COMPLETED\n")
    items = status_reasons(capsys, START + DAY, START + 2 * DAY)[START + DAY].split(": ", 1)[1].split(", ")
    assert sorted(items) == [
        f"changed {folder.relative_to(lab.raw)}/S002.csv",
        f"modification time changed {folder.relative_to(lab.raw)}/S001.csv",
    ]
