"""Checked raw folders in a bucket data root (a real radosgw): the entry a build leaves in the bucket serves the
other partition that reads the folder, whatever host builds it; it is stored with a conditional PUT, a damaged
one is a miss, and neither entries read by both partitions nor the folders' leases are left behind."""

from __future__ import annotations

import datetime as dt
import io
import json

import pyarrow.parquet as pq
import pytest

from tasks.checked import CheckedFolders
from tasks.storage.s3lease import releasing
from tasks.storage.store import open_backend
from tests import radosgw
from tests.latency_proxy import operations
from tests.test_checked import checking, put

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(not radosgw.installed(), reason=f"radosgw not installed ({radosgw.INSTALL})"),
]

D = dt.date(2026, 9, 10)
NEXT = D + dt.timedelta(days=1)
CHECKED = "daybreak/_state/checked/staging/qsr_pos/"


@pytest.fixture
def bucketlab(rgw, lab, setting, behind_proxy, tmp_path):
    """The lab with its data root in a new bucket (the raw zone on the lab's disk), reached through a proxy that
    sees every request; ``lab.requests()`` lists them as (operation, key, whether it is a put-if-absent)."""
    lab.bucket = rgw.make_bucket("chk-" + tmp_path.name[-12:].lower().replace("_", "-"))
    lab.uri = f"s3://{lab.bucket}/daybreak"
    lab.s3 = rgw.client()
    with behind_proxy(0) as proxy:
        setting("daybreak", "data_root", lab.uri)
        lab.requests = lambda: [
            (operation, key, request.headers.get("if-none-match") == "*")
            for operation, key, request in operations(proxy.seen, lab.bucket)
        ]
        yield lab


def objects(lab, prefix: str = CHECKED) -> dict[str, bytes]:
    out = {}
    for page in lab.s3.get_paginator("list_objects_v2").paginate(Bucket=lab.bucket, Prefix=prefix):
        for o in page.get("Contents", ()):
            out[o["Key"].removeprefix(prefix)] = lab.s3.get_object(Bucket=lab.bucket, Key=o["Key"])["Body"].read()
    return out


def manifest(lab, date: dt.date) -> dict:
    key = f"daybreak/staging/qsr_pos/business_date={date}/_manifest.json"
    return json.loads(lab.s3.get_object(Bucket=lab.bucket, Key=key)["Body"].read())


def rows(lab, date: dt.date) -> list[dict]:
    key = f"daybreak/staging/qsr_pos/business_date={date}/data.parquet"
    return pq.read_table(io.BytesIO(lab.s3.get_object(Bucket=lab.bucket, Key=key)["Body"].read())).to_pylist()


def build(lab, date: dt.date) -> int:
    """The partition built in this process, and what it stores on threads of its own (a checked folder's
    entry, a lease's release) done, as the ``luigi`` command waits for them before it exits."""
    code = lab.luigi("StgQsrPos", "--date", str(date))
    releasing()
    return code


def test_an_entry_in_the_bucket_serves_the_other_partition_of_its_folder_then_goes(bucketlab):
    lab = bucketlab
    lab.qsr_days(D, 2)
    assert build(lab, D) == 0
    stored = objects(lab)
    assert sorted(k.split("/")[0] for k in stored) == [str(D), str(NEXT)]  # no lease left
    (key,) = [k for k in stored if k.startswith(f"{NEXT}/")]
    puts = [k for k in lab.requests() if k[0] == "PutObject" and k[1].startswith(CHECKED)]
    assert {(k[1].removeprefix(CHECKED), k[2]) for k in puts if k[1].endswith(".arrow")} == {
        (k, True) for k in stored
    }  # each entry one PUT with If-None-Match
    assert manifest(lab, D)["stats"]["raw_folders"] == {str(D): "checked", str(NEXT): "checked"}
    assert build(lab, NEXT) == 0
    assert manifest(lab, NEXT)["stats"]["raw_folders"] == {
        str(NEXT): "shared",
        str(NEXT + dt.timedelta(days=1)): "checked",
    }
    left = objects(lab)
    assert key not in left  # both partitions reading folder D+1 have had it
    assert sorted(k.split("/")[0] for k in left) == [str(D), str(NEXT + dt.timedelta(days=1))]


def test_an_entry_this_process_stored_is_not_fetched_back_by_its_next_build(bucketlab):
    lab = bucketlab
    lab.qsr_days(D, 2)
    assert build(lab, D) == 0
    (key,) = [CHECKED + k for k in objects(lab) if k.startswith(f"{NEXT}/")]
    assert build(lab, NEXT) == 0
    assert manifest(lab, NEXT)["stats"]["raw_folders"][str(NEXT)] == "shared"
    assert [k for k in lab.requests() if k[0] == "PutObject" and k[1] == key]  # the proxy sees its requests
    assert not [k for k in lab.requests() if k[0] == "GetObject" and k[1] == key]


def test_a_damaged_entry_in_the_bucket_is_a_miss(bucketlab):
    lab = bucketlab
    lab.qsr_days(D, 2)
    assert build(lab, D) == 0
    (key,) = [k for k in objects(lab) if k.startswith(f"{NEXT}/")]
    data = bytearray(objects(lab)[key])
    end = len(data) - 8 - int.from_bytes(data[-8:], "little")
    for i in range(end - 24, end - 8):  # the payload's last values; the trailer (key, checksum) intact
        data[i] ^= 0x01
    lab.s3.put_object(Bucket=lab.bucket, Key=CHECKED + key, Body=bytes(data))
    assert build(lab, NEXT) == 0
    assert manifest(lab, NEXT)["stats"]["raw_folders"][str(NEXT)] == "checked"
    got = rows(lab, NEXT)
    assert {r["order_id"] for r in got} == {f"{s}-{NEXT}-{x}" for s in ("S001", "S002") for x in "BC"} | {
        f"{s}-{NEXT + dt.timedelta(days=1)}-A" for s in ("S001", "S002")
    }
    assert objects(lab).get(key) != bytes(data)  # the damaged entry is gone


def test_a_second_writer_of_the_same_content_keeps_the_entry_unless_it_is_the_other_partition(bucketlab):
    """Two processes that checked the same folder at once (a turn waited out) store the same entry: the second
    PUT is refused (412), and that is fine; when the two were the two partitions reading the folder, both have
    had it, and it goes."""
    lab = bucketlab
    shared = CheckedFolders(open_backend(lab.uri), "staging/qsr_pos")
    put(shared, NEXT, "k1", D, lambda sink: sink.write(b"rows"))
    put(shared, NEXT, "k1", D, lambda sink: sink.write(b"rows"))  # a rebuild of D: 412, kept
    releasing()  # a bucket's entry is stored on a thread of its own; a run waits for it before it exits
    assert list(objects(lab)) == [f"{NEXT}/k1.arrow"]
    assert bytes(shared.lookup(NEXT, lambda about: None, lambda: "k1", D)) == b"rows"
    put(shared, NEXT, "k1", NEXT, lambda sink: sink.write(b"rows"))  # the other partition: 412, both had it
    releasing()  # removals run on a thread of their own; a run waits for them before it exits
    assert objects(lab) == {}
    put(shared, NEXT, "k1", D, lambda sink: sink.write(b"old"))
    releasing()
    shared.names(NEXT)  # listed again, as a build does before it stores
    put(shared, NEXT, "k2", NEXT, lambda sink: sink.write(b"new"))  # other files: the old entry goes
    releasing()
    assert list(objects(lab)) == [f"{NEXT}/k2.arrow"]
    assert shared.lookup(NEXT, lambda about: None, lambda: "k1", D) is None
    assert bytes(shared.lookup(NEXT, lambda about: None, lambda: "k2", D)) == b"new"
    releasing()
    assert objects(lab) == {}


def test_a_folder_being_checked_by_another_host_is_waited_for_through_its_lease(bucketlab):
    """The turn at a folder is a lease object in the bucket: a second holder waits for the first, which
    removes it when it lets go."""
    import threading
    import time

    lab = bucketlab
    shared = CheckedFolders(open_backend(lab.uri), "staging/qsr_pos")
    first = shared.turn(NEXT)
    assert first.try_take()
    assert list(objects(lab)) == [f"{NEXT}.lease"]
    assert not shared.turn(NEXT).try_take()
    assert shared.turn(D).try_take()  # another folder: a lease of its own
    threading.Timer(0.5, first.release).start()
    t0 = time.monotonic()
    with checking(shared, NEXT):
        waited = time.monotonic() - t0
    assert waited >= 0.4
    releasing()  # a turn's lease is deleted on a thread of its own
    assert list(objects(lab)) == [f"{D}.lease"]


def test_a_build_waiting_for_its_partition_s_lease_lets_go_of_the_turn_it_took_with_it(bucketlab):
    """A build takes the turn at its window's last folder with its partition's lease. When another holds that
    lease (here one that expires in 2 s), the turn is let go before the wait: the holder may need the folder."""
    lab = bucketlab
    lab.qsr_days(D, 2)
    lease = f"daybreak/_state/leases/staging/qsr_pos/business_date={D}.json"
    held = {"owner": "host-b pid 7", "seconds": 2, "released": False, "host": "host-b", "pid": 7, "start": 1}
    lab.s3.put_object(Bucket=lab.bucket, Key=lease, Body=json.dumps(held).encode())
    assert build(lab, D) == 0
    asked = lab.requests()
    turn = f"{CHECKED}{NEXT}.lease"
    taken_over = min(i for i, (op, key, new) in enumerate(asked) if op == "PutObject" and key == lease and not new)
    let_go = [i for i, (op, key, _) in enumerate(asked) if op == "DeleteObject" and key == turn]
    assert let_go and let_go[0] < taken_over, asked  # let go while the lease was another's
    assert manifest(lab, D)["stats"]["raw_folders"] == {str(D): "checked", str(NEXT): "checked"}
