"""A partition's prefix in a bucket holds what its manifest lists and nothing else (tests/test_strays.py for a
local data root): a stray object is named by `daybreak status` and `daybreak verify` and deleted by the next
run once the manifest is committed; a data object without its manifest, or a manifest without its data
object, is stale and rebuilt. A real S3 server (radosgw), through Luigi."""

from __future__ import annotations

import datetime as dt
import json
import os

import duckdb
import pytest

from tasks import cli
from tests import radosgw
from tests.conftest import qsr_rows
from tests.test_s3 import objects, raw_lab, s3lab, store_env  # noqa: F401 - s3lab, store_env: fixtures

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(not radosgw.installed(), reason=f"radosgw not installed ({radosgw.INSTALL})"),
]

START = dt.date(2026, 9, 10)
DAY = dt.timedelta(days=1)
STOP = START + 3 * DAY
PREFIX = "daybreak/staging/qsr_pos"


def status(capsys) -> dict[str, dict]:
    capsys.readouterr()
    span = ["--start", str(START), "--stop", str(STOP)]
    assert cli.main(["status", "--json", "--dataset", "stg_qsr_pos", *span]) == 0
    return {row["date"]: row for row in json.loads(capsys.readouterr().out)}


def rows_by_date(lab) -> list[tuple]:
    """Rows per business date as a hive read of the dataset's prefix counts them (pyarrow's S3 filesystem,
    every Parquet object under it, as DuckDB's ``*/*.parquet`` glob and Spark read a folder)."""
    from pyarrow import dataset as ds
    from pyarrow import fs

    s3 = fs.S3FileSystem(
        endpoint_override=lab.s3.meta.endpoint_url.removeprefix("http://"),
        scheme="http",
        access_key=os.environ["AWS_ACCESS_KEY_ID"],  # the store_env fixture's keys, as a user sets them
        secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        region="default",
    )
    con = duckdb.connect()
    con.register("lines", ds.dataset(f"{lab.bucket}/{PREFIX}", filesystem=s3, partitioning="hive"))
    got = con.execute("select business_date, count(*) from lines group by all order by 1").fetchall()
    return [(str(d), n) for d, n in got]


def put(lab, key: str, body: bytes) -> None:
    lab.s3.put_object(Bucket=lab.bucket, Key=key, Body=body)


def data(lab, day: dt.date) -> bytes:
    return lab.s3.get_object(Bucket=lab.bucket, Key=f"{PREFIX}/business_date={day}/data.parquet")["Body"].read()


def test_a_stray_object_in_a_partition_is_stale_a_mismatch_and_deleted_after_the_rerun_commits(s3lab, capsys):  # noqa: F811
    lab = s3lab
    raw_lab(lab, days=3)
    assert lab.range(START, STOP) == 0
    once = [(str(START + i * DAY), 38) for i in range(3)]
    assert rows_by_date(lab) == once
    copy = f"{PREFIX}/business_date={START + DAY}/part-00000.parquet"
    nested = f"{PREFIX}/business_date={START + 2 * DAY}/old/data.parquet"
    put(lab, copy, data(lab, START))
    put(lab, nested, data(lab, START))
    assert rows_by_date(lab) != once  # read twice
    # a late file: the rebuild of START+2 writes new data (the rebuild of START+1 its manifest alone)
    lab.qsr_file((START + 3 * DAY).isoformat(), "S003", qsr_rows("S003", START + 3 * DAY))

    got = status(capsys)
    assert got[str(START)]["state"] == "ok"
    assert (got[str(START + DAY)]["state"], got[str(START + DAY)]["reason"]) == (
        "stale",
        f"stray file in the partition: {copy.removeprefix('daybreak/')}",
    )
    assert got[str(START + 2 * DAY)]["reason"] == f"stray file in the partition: {nested.removeprefix('daybreak/')}"
    assert cli.main(["verify", "--start", str(START), "--stop", str(STOP)]) == 1
    out = capsys.readouterr().out
    assert f"MISMATCH stray s3://{lab.bucket}/{copy}: a file its manifest does not list (readers see it)" in out
    assert "2 mismatches" in out

    assert lab.range(START, STOP) == 0
    left = objects(lab, f"{PREFIX}/")
    assert copy not in left and nested not in left
    assert rows_by_date(lab) == [*once[:2], (str(START + 2 * DAY), 40)]  # each row once
    assert {r["state"] for r in status(capsys).values()} == {"ok"}
    assert lab.range(START, STOP) == 0
    assert objects(lab, f"{PREFIX}/") == left  # the next run changes nothing


def test_a_data_object_without_its_manifest_and_a_manifest_without_its_data_object_are_rebuilt(s3lab, capsys):  # noqa: F811
    lab = s3lab
    raw_lab(lab, days=3)
    assert lab.range(START, STOP) == 0
    lab.s3.delete_object(Bucket=lab.bucket, Key=f"{PREFIX}/business_date={START}/_manifest.json")
    lab.s3.delete_object(Bucket=lab.bucket, Key=f"{PREFIX}/business_date={START + DAY}/data.parquet")
    got = status(capsys)
    assert (got[str(START)]["state"], got[str(START)]["reason"]) == (
        "stale",
        "data file without its manifest: readers see it",
    )
    assert (got[str(START + DAY)]["state"], got[str(START + DAY)]["reason"]) == ("stale", "data file missing")
    assert lab.range(START, STOP) == 0
    assert {r["state"] for r in status(capsys).values()} == {"ok"}
    assert rows_by_date(lab) == [(str(START + i * DAY), 38) for i in range(3)]


def test_a_data_object_replaced_by_a_plain_put_is_stale_and_named_so_not_as_a_copy_without_times(s3lab, capsys):  # noqa: F811
    """An object's identity in a bucket is its ETag, not a time a copy could lose: the reason status gives
    for a data object replaced by hand says so, and the next run rebuilds the partition."""
    lab = s3lab
    raw_lab(lab, days=3)
    assert lab.range(START, STOP) == 0
    put(lab, f"{PREFIX}/business_date={START}/data.parquet", data(lab, START + DAY))
    state, reason = (status(capsys)[str(START)][k] for k in ("state", "reason"))
    assert (state, reason.split(" (")[0]) == ("stale", "data file does not match its manifest"), reason
    assert "replaced by hand" in reason and "times" not in reason, reason
    assert lab.range(START, STOP) == 0
    assert {r["state"] for r in status(capsys).values()} == {"ok"}


def test_a_hotel_taken_off_the_list_leaves_prefixes_named_until_deleted_as_status_says(s3lab, setting, capsys):  # noqa: F811
    """tests/test_hotels.py for a local data root: in a bucket, status names each left-over partition
    prefix once (not each object), and the command it gives deletes those and nothing else."""
    import subprocess

    from tasks import reference
    from tasks.settings import CONFIG_DIR
    from tasks.storage.s3lease import releasing

    lab = s3lab
    setting("daybreak", "start_date", START)
    lab.hotel_days(START, 3)
    span = ["--start", str(START), "--stop", str(STOP)]
    listed = lab.root / "hotels.csv"
    listed.write_text((CONFIG_DIR / "hotels.csv").read_text() + "H6,New Place,America/Toronto,50\n")
    setting("hotels", "reference_file", listed)
    reference.hotels.cache_clear()
    try:
        day = START + DAY
        extract = lab.hotel_extract(day, "H6", [f"W1,H6,{day}T10:00:00-04:00,CREATED,2026-10-05,2026-10-07,2,150.00,x"])
        quiet = lab.hotel_extract(day + DAY, "H6", [])  # a listed hotel that sent before sends every day
        assert lab.luigi("AllHotelsPickup", *span) == 0
        assert lab.luigi("OtbByStayDate") == 0
        assert lab.luigi("HotelOtbExport", "--hotel", "H6") == 0
        listed.write_text((CONFIG_DIR / "hotels.csv").read_text())
        reference.hotels.cache_clear()
        extract.unlink()
        quiet.unlink()
        assert lab.luigi("AllHotelsPickup", *span) == 0
        assert lab.luigi("OtbByStayDate") == 0
        releasing()
        kept = {k: e for k, e in objects(lab).items() if "hotel_id=H6" not in k or "/_state/" in k}
        assert len(kept) < len(objects(lab))

        capsys.readouterr()
        assert cli.main(["status", "--json", *span]) == 0
        (left,) = [r for r in json.loads(capsys.readouterr().out) if r["dataset"] == "data_root"]
        folders = [f"marts/hotel_pickup/business_date={START + k * DAY}/hotel_id=H6/" for k in range(3)]
        assert (left["state"], left["not_read"]) == ("left_over", [*folders, "exports/otb/hotel_id=H6/"])
        endpoint = f"--endpoint-url {lab.s3.meta.endpoint_url}"
        remove = (
            f"aws s3 rm --recursive {endpoint} {lab.uri}/marts/hotel_pickup/ --exclude '*' --include '*/hotel_id=H6/*'"
            f" && aws s3 rm --recursive {endpoint} {lab.uri}/exports/otb/hotel_id=H6/"
        )
        assert left["reason"].endswith(f"else delete them: {remove}"), left["reason"]
        assert cli.main(["plan", "hotel_pickup", *span]) == 1
        assert capsys.readouterr().out.splitlines()[0].endswith(", 0 wait for raw data, 3 left over")

        env = {**os.environ, "AWS_DEFAULT_REGION": lab.s3.meta.region_name}
        done = subprocess.run(remove, shell=True, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert objects(lab) == kept  # the left-over prefixes, and nothing else
        assert cli.main(["status", "--json", *span]) == 0
        assert [r for r in json.loads(capsys.readouterr().out) if r["dataset"] == "data_root"] == []
        assert cli.main(["plan", "hotel_pickup", *span]) == 0
    finally:
        reference.hotels.cache_clear()
