"""Partitions and raw files in a real S3 server (Ceph's radosgw, tests/radosgw.py): every command on the store
equals a local build, the commit is conditional (a stale writer commits nothing), leases, store errors.

Each test gets a bucket of its own on one server per module; boto3 reads what the store holds, and DuckDB
and pyarrow read the outputs as a user would (pyarrow's S3 filesystem)."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import time
import uuid

import duckdb
import pyarrow.parquet as pq
import pytest

from tasks import cli
from tests import radosgw
from tests.conftest import qsr_rows

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(not radosgw.installed(), reason=f"radosgw not installed ({radosgw.INSTALL})"),
]

START = dt.date(2026, 9, 10)
DAY = dt.timedelta(days=1)


@pytest.fixture
def store_env(rgw, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", rgw.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", rgw.secret_key)
    return rgw


@pytest.fixture
def s3lab(lab, store_env, setting, tmp_path):
    """The lab with data_root in a new bucket of the server (raw files local)."""
    bucket = store_env.make_bucket(f"lab-{uuid.uuid4().hex[:10]}")
    lab.bucket = bucket
    lab.uri = f"s3://{bucket}/daybreak"
    lab.s3 = store_env.client()
    setting("daybreak", "data_root", lab.uri)
    setting("daybreak", "cache_dir", tmp_path / "cache")
    setting("s3", "endpoint_url", store_env.endpoint_url)
    setting("s3", "region", store_env.region)
    return lab


def objects(lab, prefix: str = "daybreak/") -> dict[str, str]:
    """{key: ETag} of every object under the prefix (what a rerun must not change), but the manifest summaries
    (``_state/summaries/``: a cache of what checks read, which a check that learned something writes)."""
    out = {}
    for page in lab.s3.get_paginator("list_objects_v2").paginate(Bucket=lab.bucket, Prefix=prefix):
        out.update({o["Key"]: o["ETag"] for o in page.get("Contents", ()) if "/_state/summaries/" not in o["Key"]})
    return out


def store_tables(lab, dataset: str = "staging/qsr_pos") -> dict[str, list]:
    """Every partition of ``dataset`` in the bucket, read with pyarrow's S3 filesystem as a user would."""
    from pyarrow import fs

    s3 = fs.S3FileSystem(
        endpoint_override=lab.s3.meta.endpoint_url.removeprefix("http://"),
        scheme="http",
        access_key=os.environ["AWS_ACCESS_KEY_ID"],  # the store_env fixture's keys, as a user sets them
        secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        region="default",
    )
    out = {}
    for info in s3.get_file_info(fs.FileSelector(f"{lab.bucket}/daybreak/{dataset}", recursive=True)):
        if info.path.endswith("/data.parquet"):
            table = pq.read_table(info.path, filesystem=s3)
            out[info.path.split("/")[-2]] = table.sort_by([(table.column_names[0], "ascending")]).to_pylist()
    return out


def local_tables(root, dataset: str = "staging/qsr_pos") -> dict[str, list]:
    out = {}
    for path in sorted((root / dataset).glob("business_date=*/data.parquet")):
        table = pq.read_table(path)
        out[path.parent.name] = table.sort_by([(table.column_names[0], "ascending")]).to_pylist()
    return out


def built_at(lab, dataset: str = "staging/qsr_pos") -> dict[dt.date, str]:
    """finished_at of every manifest of ``dataset`` in the bucket, by date."""
    out = {}
    for key in objects(lab, f"daybreak/{dataset}/"):
        if key.endswith("/_manifest.json"):
            manifest = json.loads(lab.s3.get_object(Bucket=lab.bucket, Key=key)["Body"].read())
            out[dt.date.fromisoformat(key.split("business_date=")[1][:10])] = manifest["finished_at"]
    return out


def rebuilt(lab, action, dataset: str = "staging/qsr_pos") -> set[dt.date]:
    before = built_at(lab, dataset)
    action()
    return {d for d, t in built_at(lab, dataset).items() if before.get(d) != t}


def bad_line(day: dt.date) -> str:
    d = day.isoformat()
    return f"S001-{d}-X,1,S001,{d}T12:30:00-04:00,BURGER,abc,6.50,,COMPLETED"


def raw_lab(lab, days: int = 4) -> None:
    """Folders START .. START+days. Partition d: S001's 4 lines and 30 more COLA x3 lines, S002's 4 lines and
    one rejected (qty abc): 38 rows, 1 rejected (under max_reject_share)."""
    for i in range(days + 1):
        d = START + i * DAY
        cola = qsr_rows("S001", d)[2]
        more = [cola.replace("-B,", f"-B{k},") for k in range(30)]  # 30 lines of business date d
        lab.qsr_file(d.isoformat(), "S001", [*qsr_rows("S001", d), *more])
        lab.qsr_file(d.isoformat(), "S002", [*qsr_rows("S002", d), bad_line(d)])


def test_a_backfill_on_the_store_equals_a_local_build_and_a_rerun_changes_no_object(s3lab, setting):
    lab = s3lab
    raw_lab(lab)
    assert lab.range(START, START + 4 * DAY, "--workers", "2") == 0
    stored = store_tables(lab)
    before = objects(lab)
    assert lab.range(START, START + 4 * DAY, "--workers", "2") == 0
    assert objects(lab) == before  # nothing rewritten
    assert sorted(k for k in before if k.endswith("data.parquet")) == [
        f"daybreak/staging/qsr_pos/business_date={START + i * DAY}/data.parquet" for i in range(4)
    ]
    quarantined = {
        k: pq.read_table(io.BytesIO(lab.s3.get_object(Bucket=lab.bucket, Key=k)["Body"].read()))
        for k in before
        if k.startswith("daybreak/quarantine/")
    }
    setting("daybreak", "data_root", lab.root / "local")
    assert lab.range(START, START + 4 * DAY) == 0
    assert stored == local_tables(lab.root / "local") and len(stored) == 4
    local_q = {
        str(p.relative_to(lab.root / "local")): pq.read_table(p)
        for p in sorted((lab.root / "local" / "quarantine").rglob("*.parquet"))
    }
    assert {k.removeprefix("daybreak/"): t.to_pylist() for k, t in quarantined.items()} == {
        k: t.to_pylist() for k, t in local_q.items()
    }
    assert len(local_q) == 4


def test_duckdb_reads_the_store_through_pyarrow_as_a_user_would(s3lab):
    from pyarrow import dataset as ds
    from pyarrow import fs

    lab = s3lab
    raw_lab(lab, days=2)
    assert lab.range(START, START + 2 * DAY) == 0
    s3 = fs.S3FileSystem(
        endpoint_override=lab.s3.meta.endpoint_url.removeprefix("http://"),
        scheme="http",
        access_key=os.environ["AWS_ACCESS_KEY_ID"],  # the store_env fixture's keys, as a user sets them
        secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        region="default",
    )
    con = duckdb.connect()
    con.register("lines", ds.dataset(f"{lab.bucket}/daybreak/staging/qsr_pos", filesystem=s3, partitioning="hive"))
    got = con.sql("select business_date, count(*) from lines group by all order by 1").fetchall()
    assert [(str(d), n) for d, n in got] == [(str(START), 38), (str(START + DAY), 38)]


def test_a_late_raw_file_rebuilds_exactly_its_two_dates_and_status_and_plan_name_them(s3lab, capsys):
    lab = s3lab
    raw_lab(lab, days=5)
    assert lab.range(START, START + 5 * DAY) == 0
    late = (START + 3 * DAY).isoformat()
    lab.qsr_file(late, "S003", qsr_rows("S003", START + 3 * DAY))  # folder d+3: partitions d+2 and d+3
    capsys.readouterr()
    assert cli.main(["plan", "stg_qsr_pos", "--start", str(START), "--stop", str(START + 5 * DAY)]) == 1  # work to do
    plan = capsys.readouterr().out
    assert "2 partitions would run" in plan, plan
    assert cli.main(["status", "--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(START + 5 * DAY)]) == 0
    status = capsys.readouterr().out
    both = f"{START + 2 * DAY} .. {START + 3 * DAY} (2 days) stale: input changed: new file qsr_pos/{late}/S003.csv"
    assert both in status, status  # the two days it makes stale, on one line
    assert rebuilt(lab, lambda: lab.range(START, START + 5 * DAY)) == {START + 2 * DAY, START + 3 * DAY}


def test_a_writer_whose_condition_fails_commits_nothing_and_says_so(s3lab):
    """Two writers of one partition: the first commits; the second, whose build started before that commit,
    writes nothing (every object keeps the first writer's ETag) and names the partition."""
    import pyarrow as pa

    from tasks.storage.s3commit import OtherWriterCommitted
    from tasks.storage.store import PartitionStore

    store = PartitionStore(s3lab.uri, "marts/demo")
    first = PartitionStore(s3lab.uri, "marts/demo")
    store.write(START, pa.table({"x": [1]}), {"n": 0})  # the partition as both builds found it
    started = first.backend.etags_now(first.rel(START), first.quarantine_rel(START))
    store.write(START, pa.table({"x": [2]}), {"n": 1})  # the other writer commits meanwhile
    committed = objects(s3lab)
    first.backend.etags_at_lease[first.rel(START)] = started
    try:
        with pytest.raises(OtherWriterCommitted, match=f"another writer committed marts/demo {START}"):
            first.write(START, pa.table({"x": [3]}), {"n": 2})
    finally:
        first.backend.etags_at_lease.clear()
    assert objects(s3lab) == committed
    assert PartitionStore(s3lab.uri, "marts/demo").read_table(START).column("x").to_pylist() == [2]
    with pytest.raises(OtherWriterCommitted):  # a new partition another writer created first
        first.backend.etags_at_lease[first.rel(START + DAY)] = {}
        try:
            store.write(START + DAY, pa.table({"x": [1]}), {"n": 0})
            first.write(START + DAY, pa.table({"x": [9]}), {"n": 0})
        finally:
            first.backend.etags_at_lease.clear()
    assert PartitionStore(s3lab.uri, "marts/demo").read_table(START + DAY).column("x").to_pylist() == [1]


def test_a_writer_that_waited_for_the_lease_commits_over_what_was_committed_meanwhile(s3lab, setting):
    """A partition's objects are listed as its lease is asked for, at the same time; a writer that had to wait
    for the lease lists them again once it holds it, and commits over what the holder committed meanwhile
    (not refused as if another writer had slipped in)."""
    import threading

    import pyarrow as pa

    from tasks.storage.store import PartitionStore

    setting("s3", "lease_seconds", 5)
    holder, waiter = PartitionStore(s3lab.uri, "marts/demo"), PartitionStore(s3lab.uri, "marts/demo")
    listed = threading.Event()
    objects_now = waiter.backend.objects_now

    def listing(*args):
        try:
            return objects_now(*args)
        finally:
            listed.set()

    waiter.backend.objects_now = listing
    written: list = []

    def wait_then_write() -> None:
        try:
            with waiter.locked(START, wait_s=30):
                written.append(waiter.write(START, pa.table({"x": [2]}), {"n": 1}))
        except Exception as exc:  # noqa: BLE001 - the assertion below shows it
            written.append(exc)

    with holder.locked(START, wait_s=0):
        thread = threading.Thread(target=wait_then_write)
        thread.start()
        assert listed.wait(30)  # the waiter listed the partition (empty) as it asked for the lease
        holder.write(START, pa.table({"x": [1]}), {"n": 0})
    thread.join(60)
    assert len(written) == 1 and isinstance(written[0], dict), written
    assert PartitionStore(s3lab.uri, "marts/demo").read_table(START).column("x").to_pylist() == [2]


def test_a_manifest_counts_only_while_the_listing_shows_its_etags(s3lab):
    """An object of a partition replaced behind Daybreak's back (not by a commit): the partition is stale,
    and the next run rebuilds it."""
    lab = s3lab
    raw_lab(lab, days=2)
    assert lab.range(START, START + 2 * DAY) == 0
    key = f"daybreak/staging/qsr_pos/business_date={START}/data.parquet"
    body = lab.s3.get_object(Bucket=lab.bucket, Key=key)["Body"].read()
    lab.s3.put_object(Bucket=lab.bucket, Key=key, Body=body + b"\0")
    assert rebuilt(lab, lambda: lab.range(START, START + 2 * DAY)) == {START}
    assert lab.s3.get_object(Bucket=lab.bucket, Key=key)["Body"].read() == body


def test_a_live_lease_makes_another_host_wait_then_fail_and_an_expired_one_is_taken_over(s3lab, setting):
    from tasks.storage.partitions import PartitionBusy
    from tasks.storage.s3lease import releasing
    from tasks.storage.store import PartitionStore

    setting("s3", "lease_seconds", 2)
    store = PartitionStore(s3lab.uri, "marts/demo")
    other = PartitionStore(s3lab.uri, "marts/demo")
    lease_key = f"daybreak/_state/leases/marts/demo/business_date={START}.json"
    with store.locked(START, wait_s=0):
        assert json.loads(s3lab.s3.get_object(Bucket=s3lab.bucket, Key=lease_key)["Body"].read())["released"] is False
        with pytest.raises(PartitionBusy, match="holds its lease|has held its lease"):
            with other.locked(START, wait_s=0.5):
                pass
        # renewed while held: still not free after more than its time
        with pytest.raises(PartitionBusy):
            with other.locked(START, wait_s=2.5):
                pass
    with other.locked(START, wait_s=0):  # released: free at once
        pass
    releasing()  # the release runs on a thread of its own; a run waits for it before it exits
    held = s3lab.s3.put_object(
        Bucket=s3lab.bucket,
        Key=lease_key,
        Body=json.dumps({"owner": "a frozen host", "seconds": 2, "released": False}).encode(),
    )
    assert held["ETag"]
    with pytest.raises(PartitionBusy, match="a frozen host"):
        with other.locked(START, wait_s=0):
            pass
    with other.locked(START, wait_s=5):  # taken over once 2 s have passed by the store's clock
        pass


def test_preview_then_publish_on_the_store_equals_a_local_build_with_the_new_rules(s3lab, setting, capsys):
    lab = s3lab
    raw_lab(lab, days=3)
    assert lab.range(START, START + 3 * DAY) == 0
    setting("qsr", "suspicious_qty_threshold", 1)  # COLA x3 and FRIES x2 lines become suspicious
    before = objects(lab)
    capsys.readouterr()
    assert cli.main(["preview", "stg_qsr_pos", "--start", str(START), "--stop", str(START + 3 * DAY), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in objects(lab).items() if "/_state/" not in k} == {
        k: v for k, v in before.items() if "/_state/" not in k
    }  # production untouched
    changed = {p["date"]: p["changed"] for p in report["datasets"]["stg_qsr_pos"]["partitions"]}
    assert changed == {str(START + i * DAY): 34 for i in range(3)}  # every COLA x3 (32) and FRIES x2 (2) line
    assert cli.main(["publish", report["id"]]) == 0
    assert rebuilt(lab, lambda: lab.range(START, START + 3 * DAY)) == set()
    published = store_tables(lab)
    setting("daybreak", "data_root", lab.root / "local")
    assert lab.range(START, START + 3 * DAY) == 0
    assert published == local_tables(lab.root / "local")


def test_a_missing_bucket_refused_credentials_and_a_dead_endpoint_are_one_line_and_exit_2(s3lab, monkeypatch):
    lab = s3lab
    raw_lab(lab, days=1)
    cfg = lab.root / "s3.cfg"
    endpoint = lab.s3.meta.endpoint_url

    def run(data_root: str, endpoint_url: str, secret: str | None = None):
        from tasks.settings import write_config

        write_config(
            cfg,
            {
                "daybreak": {"raw_root": lab.raw, "data_root": data_root},
                "s3": {"endpoint_url": endpoint_url, "region": "default"},
            },
        )
        env = {"LUIGI_CONFIG_PATH": str(cfg), **({"AWS_SECRET_ACCESS_KEY": secret} if secret else {})}
        return lab.cli(
            "RangeDaily",
            "--of",
            "StgQsrPos",
            "--start",
            str(START),
            "--stop",
            str(START + DAY),
            "--local-scheduler",
            env=env,
        )

    cases = [
        (run("s3://no-such-bucket/x", endpoint), "bucket no-such-bucket does not exist"),
        (run(lab.uri, endpoint, secret="wrong"), "access to bucket"),
        (run(lab.uri, "http://127.0.0.1:9"), "EndpointConnectionError"),
    ]
    for proc, expected in cases:
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0] and "Traceback" not in proc.stderr, proc.stderr
        assert "data_root" in lines[0] and ("127.0.0.1" in lines[0])
    assert objects(lab) == {}  # nothing ran


@pytest.mark.parametrize("command", [["daybreak", "status"], ["luigi", "--module", "tasks", "MorningRefresh"]])
def test_no_credentials_for_aws_itself_are_one_line_and_exit_2_before_any_request(tmp_path, command):
    """``[s3] endpoint_url`` empty (AWS) and no credentials in the chain: one line naming the data root and
    where credentials come from, exit 2. Every request would go through HTTPS_PROXY, a listener here that
    counts the connections: none is made."""
    import socket
    import subprocess
    import sys
    import threading

    from tasks.settings import write_config
    from tests.conftest import REPO

    cfg = write_config(
        tmp_path / "luigi.cfg",
        {"daybreak": {"data_root": "s3://lake/daybreak", "raw_root": tmp_path}, "s3": {"endpoint_url": ""}},
    )
    proxy, connections = socket.create_server(("127.0.0.1", 0)), []
    threading.Thread(target=lambda: connections.append(proxy.accept()), daemon=True).start()
    (tmp_path / "home").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {
        "HOME": str(tmp_path / "home"), "LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(REPO),
        "AWS_EC2_METADATA_DISABLED": "true",  # no instance role on loopback: not asked
        "HTTPS_PROXY": f"http://127.0.0.1:{proxy.getsockname()[1]}", "HTTP_PROXY": f"http://127.0.0.1:{proxy.getsockname()[1]}",
    }  # fmt: skip
    bin_dir = os.path.dirname(sys.executable)
    proc = subprocess.run(
        [os.path.join(bin_dir, command[0]), *command[1:]], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    proxy.close()
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0] == (
        "daybreak: error: [daybreak] data_root s3://lake/daybreak: object store: no credentials for bucket lake "
        "(endpoint AWS, bucket lake): set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, ~/.aws/credentials or an "
        "instance role"
    )
    assert connections == []


def test_every_dataset_and_a_single_run_on_the_store_equal_a_local_build_file_for_file(s3lab, setting):
    """The sample's three sources; every dataset built on the bucket (staging, the look-back, booking states,
    pickups per hotel, on-the-books, the exports per hotel, the marts per store) and a single-run range:
    every data, extra and quarantine file equals the local build's byte for byte."""
    import hashlib

    from tasks import sample
    from tasks.reference import hotels

    lab = s3lab
    first = dt.date(2026, 9, 1)
    setting("daybreak", "start_date", first)
    sample.generate(lab.raw, first, 5, stores=3, seed=3, mean_lines_per_store=60)
    stop = str(first + 4 * DAY)

    def build() -> None:
        assert lab.luigi("RangeSingleRun", "--of", "StgQsrPos", "--start", str(first), "--stop", stop) == 0
        assert lab.range(first, first + 4 * DAY, of="AdsRolling7d") == 0
        assert lab.luigi("AllHotelsPickup", "--start", str(first), "--stop", stop) == 0
        assert lab.luigi("OtbByStayDate") == 0
        for hotel in hotels():
            assert lab.luigi("HotelOtbExport", "--hotel", hotel) == 0
        assert lab.luigi("AllStores") == 0

    build()
    stored = {
        k.removeprefix("daybreak/"): hashlib.sha256(
            lab.s3.get_object(Bucket=lab.bucket, Key=k)["Body"].read()
        ).hexdigest()
        for k in objects(lab)
        if not k.endswith("_manifest.json") and "/_state/" not in k
    }
    local = lab.root / "local"
    setting("daybreak", "data_root", local)
    build()
    files = {
        str(p.relative_to(local)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in local.rglob("*")
        if p.is_file() and p.name != "_manifest.json" and "_state" not in p.parts and not p.name.startswith(".")
    }
    assert stored == files
    folders = {k.rsplit("/", 1)[0] for k in files}
    datasets = {f.split("/business_date=")[0].split("/hotel_id=")[0].split("/store_id=")[0] for f in folders}
    assert {
        "staging/qsr_pos", "staging/ads_daily", "staging/hotel_bookings_daily", "marts/ads_rolling_7d",
        "marts/hotel_booking_state", "marts/hotel_pickup", "marts/otb_by_stay_date", "exports/otb",
        "marts/store_daily_sales",
    } <= datasets  # fmt: skip


def test_a_key_under_a_dataset_prefix_that_is_no_partition_is_named_by_status_and_never_read(s3lab, capsys):
    lab = s3lab
    raw_lab(lab, days=2)
    assert lab.range(START, START + 2 * DAY) == 0
    for key in ("daybreak/staging/qsr_pos/junk.csv", "daybreak/staging/qsr_pos/business_date=soon/data.parquet"):
        lab.s3.put_object(Bucket=lab.bucket, Key=key, Body=b"not a partition")
    capsys.readouterr()
    assert cli.main(["status", "--start", str(START), "--stop", str(START + 2 * DAY), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert next(r for r in rows if r["dataset"] == "data_root")["not_read"] == [
        "staging/qsr_pos/business_date=soon/data.parquet",
        "staging/qsr_pos/junk.csv",
    ]
    assert [r["state"] for r in rows if r["dataset"] == "stg_qsr_pos"] == ["ok", "ok"]
    assert rebuilt(lab, lambda: lab.range(START, START + 2 * DAY)) == set()


def test_a_put_is_sent_at_once_without_waiting_for_the_stores_go_ahead(s3lab):
    """botocore asks for "Expect: 100-continue" before a PUT's body: a round trip more per PUT (a commit, a
    lease), which a store in another zone makes 20 ms or more."""
    from tasks.storage.s3 import Bucket

    bucket = Bucket(s3lab.uri)
    sent = []
    bucket.client.meta.events.register("before-send.s3", lambda request, **kw: sent.append(dict(request.headers)))
    bucket.put("_state/x.json", b"{}")
    bucket.put("_state/x.json", b"{}", if_match=bucket.head("_state/x.json").etag)
    assert len(sent) >= 2 and not [h for h in sent if "Expect" in h]


@pytest.mark.parametrize(
    "value",
    [
        "2026-12-06T11:30:00.123Z",
        "2026-12-06T11:30:00Z",
        "2026-12-06T11:30:00.123000+00:00",
        "Sun, 06 Dec 2026 11:30:00 GMT",
        "Sun, 06 Dec 2026 11:30:00 +0000",
        1733480000,
        "1733480000",
        "1733480000.5",
    ],
)
def test_a_stores_timestamps_read_as_botocore_reads_them(value):
    """Daybreak reads a response's timestamps without dateutil (half the CPU of a listing); what it reads is
    what botocore's own parser gives, or a listing's times and a lease's age would differ."""
    from botocore.parsers import DEFAULT_TIMESTAMP_PARSER

    from tasks.storage.s3get import read_timestamp

    assert read_timestamp(value) == DEFAULT_TIMESTAMP_PARSER(value)
    assert read_timestamp(value).tzinfo is not None


def test_a_raw_objects_get_outside_botocore_reads_what_botocore_reads_and_leaves_errors_to_it(s3lab):
    """The raw zone's GETs (tasks/storage/s3get.py): a presigned GET on a kept connection gives the bytes, ETag
    and time botocore's get_object gives; a missing key is FileNotFoundError; any other refusal goes through
    botocore and is its one-line StoreError, naming the bucket."""
    from tasks.storage import s3get
    from tasks.storage.s3 import Bucket, StoreError

    bucket = Bucket(s3lab.uri)
    body = b"store_id,amount\n" * 3000
    bucket.put("landing/S001.csv", body)
    fast = s3get.get(bucket.signer, bucket.prefix + "landing/S001.csv")
    assert fast is not None  # taken here, not handed to botocore
    again = bucket.client.get_object(Bucket=bucket.bucket, Key=bucket.prefix + "landing/S001.csv")
    assert fast == (again["Body"].read(), again["ETag"].strip('"'), int(again["LastModified"].timestamp()) * 10**9)
    assert bucket.get("landing/S001.csv") == (body, bucket.head("landing/S001.csv"))
    with pytest.raises(FileNotFoundError, match="S002.csv"):
        bucket.get("landing/S002.csv")
    gone = Bucket(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/x")
    assert s3get.get(gone.signer, "x/landing/S001.csv") is None
    with pytest.raises(StoreError, match="no-such-bucket"):
        gone.get("landing/S001.csv")


def test_a_listing_outside_botocore_equals_botocores_over_pages_and_odd_names(s3lab):
    """Bucket.list reads ListObjectsV2 pages itself (tasks/storage/s3get.py): the same keys, sizes, ETags and
    times as botocore's paginator, over more than one page (1,000 keys a page) and keys that need encoding."""
    from concurrent.futures import ThreadPoolExecutor

    from tasks.storage import s3get
    from tasks.storage.s3 import Bucket

    bucket = Bucket(s3lab.uri)
    names = [f"odd/S{i:04d} a+b&c%d é.csv" for i in range(5)] + [f"many/{i:05d}" for i in range(1203)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: bucket.put(n, n.encode() * (len(n) % 7)), names))
    first = s3get.list_page(bucket.signer, bucket.prefix + "many/")  # each read here, not by botocore:
    assert first is not None and first[1] and s3get.list_page(bucket.signer, bucket.prefix + "many/", first[1])
    assert s3get.get(bucket.signer, bucket.prefix + names[0]) is not None and bucket.signer.usable
    paginator = bucket.client.get_paginator("list_objects_v2")
    for prefix in ("odd/", "many/", "none/"):
        expected = {
            item["Key"][len(bucket.prefix) :]: (
                item["Size"],
                item["ETag"].strip('"'),
                int(item["LastModified"].timestamp() * 10**6) * 1000,
            )
            for page in paginator.paginate(Bucket=bucket.bucket, Prefix=bucket.prefix + prefix)
            for item in page.get("Contents", ())
        }
        assert {k: (o.size, o.etag, o.mtime_ns) for k, o in bucket.list(prefix).items()} == expected
    assert len(bucket.list("many/")) == 1203 and sorted(bucket.list("odd/")) == sorted(names[:5])


def test_a_lease_left_by_a_run_killed_after_its_commit_is_deleted_by_the_next_run_that_builds(s3lab, setting):
    """A run killed between a commit and its lease's delete leaves the lease object of an up-to-date partition
    (expired, or marked released); the next run that builds a partition of the dataset deletes it (one listing
    of the dataset's leases), and keeps a lease another host holds."""
    from tasks.storage.s3lease import releasing

    lab = s3lab
    setting("s3", "lease_seconds", 600)
    raw_lab(lab, days=3)
    assert lab.range(START, START + 2 * DAY) == 0
    leases = "daybreak/_state/leases/staging/qsr_pos/business_date="
    holder = {"host": "another-host", "pid": 1, "start": 1}
    bodies = {
        START: {"owner": "a killed run", "seconds": 1, "released": False, **holder},  # expired in 1 s
        START + DAY: {"owner": "a killed run", "seconds": 600, "released": True, **holder},
        START + 9 * DAY: {"owner": "a live run", "seconds": 600, "released": False, **holder},
    }
    for day, body in bodies.items():
        lab.s3.put_object(Bucket=lab.bucket, Key=f"{leases}{day}.json", Body=json.dumps(body).encode())
    time.sleep(3)  # the store's clock counts whole seconds
    assert lab.range(START, START + 3 * DAY) == 0  # builds START + 2 days, finds the others up to date
    releasing()  # on the releases' thread, which a run waits for before it exits
    assert sorted(k for k in objects(lab) if "/_state/leases/" in k) == [f"{leases}{START + 9 * DAY}.json"]


def test_a_lease_of_a_process_of_this_host_that_is_gone_is_taken_over_at_once(s3lab, setting):
    """A run killed here (kill -9) left its lease: the rerun on this host takes it at once, not after
    lease_seconds; a live process's lease, or another host's, is still waited for."""
    import subprocess
    import sys

    from tasks.storage import tempnames
    from tasks.storage.partitions import PartitionBusy
    from tasks.storage.s3lease import releasing
    from tasks.storage.store import PartitionStore

    setting("s3", "lease_seconds", 600)
    store = PartitionStore(s3lab.uri, "marts/demo")
    lease_key = f"daybreak/_state/leases/marts/demo/business_date={START}.json"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)

    def held_by(host: str, pid: int, start: int) -> None:
        body = {"owner": f"{host} pid {pid}", "seconds": 600, "released": False, "host": host, "pid": pid}
        s3lab.s3.put_object(Bucket=s3lab.bucket, Key=lease_key, Body=json.dumps({**body, "start": start}).encode())

    held_by(tempnames.host(), dead_pid, 1)
    with store.locked(START, wait_s=0):  # taken over at once
        pass
    releasing()  # the release runs on a thread of its own; a run waits for it before it exits
    me = os.getpid()
    held_by(tempnames.host(), me, tempnames.start_of(me))  # a live process of this host
    with pytest.raises(PartitionBusy), store.locked(START, wait_s=0):
        pass
    held_by("another-host", dead_pid, 1)  # its processes cannot be seen from here
    with pytest.raises(PartitionBusy), store.locked(START, wait_s=0):
        pass


CONFLICT = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>ConditionalRequestConflict</Code>'
    b"<Message>A conflicting operation occurred.</Message></Error>"
)


def test_a_conditional_put_amazon_answers_with_a_conflict_is_sent_again_and_then_holds_or_fails(s3lab):
    """Amazon S3 answers a conditional write that meets another write of the key under way with 409
    ConditionalRequestConflict, to be sent again (botocore does not): sent again, it succeeds, or fails its
    condition (412) if the other write made the key. radosgw never answers so: the first answer is made here, in
    botocore's before-send event; the second attempt goes to the server."""
    from botocore.awsrequest import AWSResponse

    from tasks.storage.s3 import Bucket, PreconditionFailed

    bucket = Bucket(s3lab.uri)
    bucket.put("_state/first", b"1", if_none_match=True)  # the conditional-write probe, before any answer here
    conflicts, meanwhile = [], []

    class Raw:
        def stream(self, **kwargs):
            yield CONFLICT

    def conflict(request, **kw):
        if "If-None-Match" in request.headers and len(conflicts) < 1:
            conflicts.append(request.url)
            for write in meanwhile:
                write()  # the other writer's PUT lands while this one is answered 409
            return AWSResponse(request.url, 409, {"Content-Type": "application/xml"}, Raw())
        return None

    bucket.client.meta.events.register_first("before-send.s3.PutObject", conflict)
    assert bucket.put("_state/lease-a", b"mine", if_none_match=True)
    assert len(conflicts) == 1 and bucket.get("_state/lease-a")[0] == b"mine"
    conflicts.clear()
    meanwhile.append(lambda: s3lab.s3.put_object(Bucket=s3lab.bucket, Key=bucket.prefix + "_state/lease-b", Body=b"x"))
    with pytest.raises(PreconditionFailed, match="lease-b"):
        bucket.put("_state/lease-b", b"mine", if_none_match=True)
    assert len(conflicts) == 1 and bucket.get("_state/lease-b")[0] == b"x"
