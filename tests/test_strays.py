"""A partition's folder holds what its manifest lists and nothing else: a stray file (a copy of another day,
an old folder), a data file without its manifest or a manifest without its data file makes the partition
stale in `daybreak status` (and a MISMATCH in `daybreak verify`), and the next run leaves only what its
manifest lists. A local data root, through Luigi (the bucket's: tests/test_s3_strays.py)."""

from __future__ import annotations

import datetime as dt
import json
import shutil

import duckdb
import pytest

from tasks import cli
from tests.conftest import qsr_rows
from tests.test_hotels import write

pytestmark = pytest.mark.luigi

START = dt.date(2026, 9, 10)
DAY = dt.timedelta(days=1)
STOP = START + 3 * DAY


def status(capsys, *args: str) -> dict[str, dict]:
    """``daybreak status --json`` of stg_qsr_pos over START .. STOP, by date."""
    capsys.readouterr()
    assert cli.main(["status", "--json", "--start", str(START), "--stop", str(STOP), *args]) == 0
    return {row["date"]: row for row in json.loads(capsys.readouterr().out)}


def rows_read(lab, glob: str = "staging/qsr_pos/*/*.parquet") -> int:
    """Rows a reader of the README's hive glob counts."""
    return duckdb.execute(f"select count(*) from read_parquet('{lab.data}/{glob}')").fetchall()[0][0]


def rows_built(lab) -> int:
    """Rows the partitions' manifests record."""
    manifests = (lab.data / "staging/qsr_pos").glob("business_date=*/_manifest.json")
    return sum(json.loads(p.read_text())["row_count"] for p in manifests)


@pytest.fixture
def built(lab, setting):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4)
    assert lab.range(START, STOP) == 0
    return lab


def test_a_stray_parquet_file_in_a_partition_is_stale_a_mismatch_and_removed_by_the_rerun(built, capsys):
    lab = built
    rows = rows_read(lab)
    copy = lab.partition(START + DAY) / "part-00000.parquet"  # a copy of another day
    shutil.copy(lab.partition(START) / "data.parquet", copy)
    (lab.partition(START + 2 * DAY) / "old").mkdir()
    shutil.copy(lab.partition(START) / "data.parquet", lab.partition(START + 2 * DAY) / "old" / "data.parquet")
    temp = lab.partition(START) / ".data.parquet.tmp-otherhost-1-0-abcdef123456"  # a live writer's: not a stray
    temp.write_bytes(b"being written")
    assert rows_read(lab) > rows == rows_built(lab)  # what readers see
    # a late file: the rebuild of START+2 writes new data (the rebuild of START+1 its manifest alone)
    lab.qsr_file((START + 3 * DAY).isoformat(), "S003", qsr_rows("S003", START + 3 * DAY))

    got = status(capsys, "--dataset", "stg_qsr_pos")
    assert got[str(START)]["state"] == "ok"
    key = f"staging/qsr_pos/business_date={START + DAY}/part-00000.parquet"
    assert (got[str(START + DAY)]["state"], got[str(START + DAY)]["reason"]) == (
        "stale",
        f"stray file in the partition: {key}",
    )
    nested = f"staging/qsr_pos/business_date={START + 2 * DAY}/old/data.parquet"
    assert got[str(START + 2 * DAY)]["reason"] == f"stray file in the partition: {nested}"
    assert cli.main(["status", "--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(STOP)]) == 0
    assert f"{START + DAY} stale: stray file in the partition: {key}" in capsys.readouterr().out

    assert cli.main(["verify", "--start", str(START), "--stop", str(STOP)]) == 1
    out = capsys.readouterr().out
    assert f"MISMATCH stray {lab.data}/{key}: a file its manifest does not list (readers see it)" in out
    assert f"MISMATCH stray {lab.data}/{nested}" in out and "2 mismatches" in out

    assert lab.rebuilt_by(lambda: lab.range(START, STOP)) == {START + DAY, START + 2 * DAY}
    assert not copy.exists() and not (lab.partition(START + 2 * DAY) / "old").exists()
    assert temp.exists()
    assert rows_read(lab) == rows_built(lab) == rows + 2  # each row once
    assert {r["state"] for r in status(capsys, "--dataset", "stg_qsr_pos").values()} == {"ok"}
    assert lab.rebuilt_by(lambda: lab.range(START, STOP)) == set()  # and the next run changes nothing


def test_a_data_file_without_its_manifest_and_a_manifest_without_its_data_file_are_stale_and_rebuilt(built, capsys):
    lab = built
    rows = rows_read(lab)
    (lab.partition(START) / "_manifest.json").unlink()
    (lab.partition(START + DAY) / "data.parquet").unlink()
    got = status(capsys, "--dataset", "stg_qsr_pos")
    assert (got[str(START)]["state"], got[str(START)]["reason"]) == (
        "stale",
        "data file without its manifest: readers see it",
    )
    assert (got[str(START + DAY)]["state"], got[str(START + DAY)]["reason"]) == ("stale", "data file missing")
    assert lab.range(START, STOP) == 0
    assert (lab.partition(START) / "_manifest.json").exists() and (lab.partition(START + DAY) / "data.parquet").exists()
    assert {r["state"] for r in status(capsys, "--dataset", "stg_qsr_pos").values()} == {"ok"}
    assert rows_read(lab) == rows
    # a partition whose folder holds nothing is missing, as before
    shutil.rmtree(lab.partition(START))
    assert status(capsys, "--dataset", "stg_qsr_pos")[str(START)]["state"] == "missing"


def test_strays_in_a_hotel_partition_and_in_the_snapshot_dataset(lab, setting, capsys):
    """The two-level layout (``business_date=D/hotel_id=H``) and the unpartitioned otb_by_stay_date."""
    setting("daybreak", "start_date", START)
    for k in range(3):
        day = START + k * DAY
        write(lab, day, "H1", [f"T{k},H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct"])
        write(lab, day, "H2", [f"V{k},H2,{day}T23:30:00-07:00,CREATED,2026-10-02,2026-10-03,2,50.00,ota"])
    assert lab.luigi("AllHotelsPickup", "--start", str(START), "--stop", str(STOP)) == 0
    assert lab.luigi("OtbByStayDate") == 0
    pickup = lab.data / "marts/hotel_pickup" / f"business_date={START}" / "hotel_id=H2"
    otb = lab.data / "marts/otb_by_stay_date"
    shutil.copy(pickup / "data.parquet", pickup / "part-1.parquet")
    shutil.copy(otb / "data.parquet", otb / "copy.parquet")

    got = status(capsys, "--dataset", "hotel_pickup")
    key = f"marts/hotel_pickup/business_date={START}/hotel_id=H2/part-1.parquet"
    assert (got[str(START)]["state"], got[str(START)]["reason"]) == (
        "stale",
        f"hotel H2: stray file in the partition: {key}",
    )
    snapshot = status(capsys, "--dataset", "otb_by_stay_date")[None]
    assert snapshot["reason"] == "stray file in the partition: marts/otb_by_stay_date/copy.parquet"

    assert lab.luigi("AllHotelsPickup", "--start", str(START), "--stop", str(STOP)) == 0
    assert lab.luigi("OtbByStayDate") == 0
    assert not (pickup / "part-1.parquet").exists() and not (otb / "copy.parquet").exists()
    for dataset in ("hotel_pickup", "otb_by_stay_date"):
        assert {r["state"] for r in status(capsys, "--dataset", dataset).values()} == {"ok"}


def test_a_partition_folder_that_is_a_link_is_refused_and_nothing_it_points_to_changes(built, tmp_path):
    """Before, the rerun wrote the partition through the link and removed, as strays, the files where it
    pointed: outside the data root, or another day's partition (which then held this day's rows)."""
    lab = built
    outside = tmp_path / "victim"
    outside.mkdir()
    (outside / "notes.txt").write_text("precious")
    day = lab.partition(START + DAY)
    shutil.rmtree(day)
    day.symlink_to(outside)
    other = lab.partition(START + 2 * DAY)
    before = {p.name: p.read_bytes() for p in other.iterdir()}
    shutil.rmtree(other)
    other.symlink_to(lab.partition(START))  # a link to a sibling partition
    kept = {p.name: p.read_bytes() for p in lab.partition(START).iterdir()}
    assert lab.range(START, STOP) == 30
    assert [p.name for p in outside.iterdir()] == ["notes.txt"] and (outside / "notes.txt").read_text() == "precious"
    assert {p.name: p.read_bytes() for p in lab.partition(START).iterdir()} == kept
    error = json.loads((lab.data / f"_state/failures/staging/qsr_pos/business_date={START + DAY}.json").read_text())
    assert f"{day} is a symbolic link (to {outside})" in error["error"], error
    other.unlink()
    day.unlink()
    assert lab.range(START, STOP) == 0
    assert {p.name for p in other.iterdir()} == set(before)


def test_verify_names_a_data_file_without_its_manifest_and_a_partition_not_there(built, capsys):
    """A restore that missed a manifest leaves a data file readers see and no manifest to check it against:
    a mismatch (exit 1), as status calls it stale. A partition folder deleted whole has nothing to hash: it
    is named as not verified, and alone does not change the exit code (status shows it missing)."""
    lab = built
    (lab.partition(START) / "_manifest.json").unlink()
    shutil.rmtree(lab.partition(START + 2 * DAY))
    span = ["--start", str(START), "--stop", str(STOP)]
    assert cli.main(["verify", "--dataset", "stg_qsr_pos", *span]) == 1
    out = capsys.readouterr().out
    data = f"{lab.data}/staging/qsr_pos/business_date={START}/data.parquet"
    assert f"MISMATCH stray {data}: data file without its manifest (readers see it)" in out, out
    assert f"stale now: staging/qsr_pos {START}\n" in out, out
    assert "verified 2 partitions" in out and "; 2 mismatches" in out, out  # data.parquet, _store_totals.arrow
    assert "1 partition not verified: no partition there" in out, out
    assert f"  staging/qsr_pos {START + 2 * DAY}\n" in out + "\n", out
    assert f"{START}" not in out.split("not verified")[1], out  # the one with files is a mismatch, not missing

    assert lab.rebuilt_by(lambda: lab.range(START, STOP)) == {START, START + 2 * DAY}
    assert cli.main(["verify", "--dataset", "stg_qsr_pos", *span]) == 0
    out = capsys.readouterr().out
    assert "verified 3 partitions" in out and "not verified" not in out, out

    shutil.rmtree(lab.partition(START + DAY))  # missing alone: named, exit 0 (every hash there matches)
    assert cli.main(["verify", "--dataset", "stg_qsr_pos", *span]) == 0
    out = capsys.readouterr().out
    assert "1 partition not verified" in out and f"  staging/qsr_pos {START + DAY}" in out, out
