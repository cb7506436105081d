"""Raw files in a landing bucket and partitions in a bucket, the store put "in another zone" by a latency proxy
(tests/latency_proxy.py: 10 ms each way, a round trip per new connection) in front of a real radosgw: requests
made one after another show up here, as they would against a real store. A backfill equals the local build file
for file, and every raw object is fetched once per run."""

from __future__ import annotations

import datetime as dt
import hashlib
from collections import Counter
from concurrent.futures import wait

import pytest

from tasks import sample
from tasks.storage import s3
from tests import radosgw
from tests.latency_proxy import operations
from tests.test_s3 import objects

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(not radosgw.installed(), reason=f"radosgw not installed ({radosgw.INSTALL})"),
]

START = dt.date(2026, 9, 1)
DAY = dt.timedelta(days=1)
DAYS = 5


@pytest.fixture
def far(lab, in_buckets):
    """The lab with the sample's raw files in a landing prefix and the data root in one bucket, both reached
    through the latency proxy, which sees every request (:func:`gets`, :func:`lists`)."""
    sample.generate(lab.raw, START, DAYS + 1, stores=6, seed=5, mean_lines_per_store=40)
    with in_buckets("far", 0.010, (lab.raw / "qsr_pos").rglob("*.csv"), START) as lab:
        yield lab


def gets(lab) -> Counter:
    """The GETs of each key of the lab's bucket that went through the proxy (the server's view)."""
    return Counter(key for operation, key, _ in operations(lab.proxy.seen, lab.bucket) if operation == "GetObject")


def lists(lab) -> Counter:
    """The listings of each prefix of the lab's bucket that went through the proxy."""
    return Counter(key for operation, key, _ in operations(lab.proxy.seen, lab.bucket) if operation == "ListObjectsV2")


def stored_files(lab) -> dict[str, str]:
    """sha256 of each data and quarantine object of the lab's data root, by its key below the root."""
    return {
        k.removeprefix("daybreak/"): hashlib.sha256(
            lab.s3.get_object(Bucket=lab.bucket, Key=k)["Body"].read()
        ).hexdigest()
        for k in objects(lab)
        if not k.endswith("_manifest.json") and "/_state/" not in k
    }


def local_files(local) -> dict[str, str]:
    """sha256 of each data and quarantine file of a local data root, by its path below the root."""
    return {
        str(p.relative_to(local)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in local.rglob("*")
        if p.is_file() and p.name != "_manifest.json" and "_state" not in p.parts and not p.name.startswith(".")
    }


def test_a_backfill_from_a_landing_bucket_through_a_far_store_equals_the_local_build_file_for_file(far, setting):
    lab = far
    assert lab.range(START, START + DAYS * DAY) == 0
    stored = stored_files(lab)
    fetched, listed = gets(lab), lists(lab)
    raw_keys = [k for k in fetched if k.startswith("landing/")]
    window = [START + i * DAY for i in range(DAYS + 1)]  # partition d reads folders d and d+1
    in_window = [p for d in window for p in (lab.raw / "qsr_pos" / str(d)).glob("*.csv")]
    assert sorted(raw_keys) == sorted(f"landing/{p.relative_to(lab.raw)}" for p in in_window)
    assert {fetched[k] for k in raw_keys} == {1}, fetched.most_common(3)  # ... fetched once in the run
    # each raw folder listed once for the run, and once more under the lease of each partition that reads it
    # (two for the folders of the range's inside): never again for Luigi's own checks of the folder
    folders = {
        f"landing/qsr_pos/{d}/": 1 + sum(1 for p in (d - DAY, d) if START <= p < START + DAYS * DAY) for d in window
    }
    assert {f: listed[f] for f in folders} == folders, listed
    local = lab.root / "local"
    setting("daybreak", "raw_root", lab.raw)
    setting("daybreak", "data_root", local)
    assert lab.range(START, START + DAYS * DAY) == 0
    files = local_files(local)
    assert stored == files and len(files) >= 2 * DAYS


def test_an_object_re_sent_while_a_build_reads_it_fails_that_build_and_the_next_run_reads_the_new_one(far):
    """A raw object replaced between the listing and the read: the build fails naming it (the GET says which
    version it read), nothing is written, and the next run builds from the new object."""
    lab = far
    day = START + DAY
    key = next(k for k in sorted(objects(lab, f"landing/qsr_pos/{day}/")))
    real_get = s3.Bucket.get
    resent = []

    def get(self, rel):
        if rel == key.removeprefix("landing/") and not resent:
            body = lab.s3.get_object(Bucket=lab.bucket, Key=key)["Body"].read()
            lab.s3.put_object(Bucket=lab.bucket, Key=key, Body=body + body.splitlines(keepends=True)[-1])
            resent.append(key)
        return real_get(self, rel)

    s3.Bucket.get = get
    try:
        assert lab.range(day, day + DAY) == 30
    finally:
        s3.Bucket.get = real_get
    assert resent and not objects(lab, f"daybreak/staging/qsr_pos/business_date={day}/")
    assert lab.range(day, day + DAY) == 0
    assert objects(lab, f"daybreak/staging/qsr_pos/business_date={day}/")


def test_an_object_fetched_ahead_then_re_sent_is_read_as_listed_when_its_build_reads_it(far):
    """The next partition's objects are fetched while the current one builds; one re-sent in between is read
    again, as the build's own listing gives it, and the build does not fail."""
    from tasks.storage.rawzone import RawZone

    lab = far
    zone = RawZone.from_uri(f"s3://{lab.bucket}/landing")
    day = START + DAY
    files = zone.list_folder("qsr_pos", day)
    started = zone.fetch_ahead(files)
    assert len(started) == len(files)
    wait(started, timeout=30)  # every object fetched ahead is here
    key = f"landing/{files[0].relpath}"
    new = lab.s3.get_object(Bucket=lab.bucket, Key=key)["Body"].read() + b"\n"
    lab.s3.put_object(Bucket=lab.bucket, Key=key, Body=new)
    listed = {f.relpath: f for f in zone.list_folder("qsr_pos", day)}
    lab.proxy.seen.clear()
    read = list(zone.read_inputs([listed[f.relpath] for f in files]))
    assert read[0] == new and len(read) == len(files) > 1
    assert dict(gets(lab)) == {key: 1}, gets(lab)  # the re-sent one read again; the others fetched ahead, once


def test_a_single_run_range_on_buckets_fetches_each_raw_object_once_and_equals_the_local_build(far, setting):
    """Each process of a single-run range fetches the next date of its stretch while one builds, and the folder
    two stretches read is checked by one of them (left for the other in the data root): every raw object of
    the window fetched once in the run; the partitions those of a local single run, file for file."""
    lab = far
    stop = str(START + DAYS * DAY)
    assert lab.luigi("RangeSingleRun", "--of", "StgQsrPos", "--start", str(START), "--stop", stop) == 0
    fetched = gets(lab)
    raw_keys = [k for k in fetched if k.startswith("landing/")]
    window = [START + i * DAY for i in range(DAYS + 1)]
    in_window = [p for d in window for p in (lab.raw / "qsr_pos" / str(d)).glob("*.csv")]
    assert sorted(raw_keys) == sorted(f"landing/{p.relative_to(lab.raw)}" for p in in_window)
    assert {fetched[k] for k in raw_keys} == {1}, fetched.most_common(3)
    assert len([k for k in objects(lab) if k.startswith("daybreak/staging/") and k.endswith("_manifest.json")]) == DAYS
    local = lab.root / "local"
    setting("daybreak", "raw_root", lab.raw)
    setting("daybreak", "data_root", local)
    assert lab.luigi("RangeSingleRun", "--of", "StgQsrPos", "--start", str(START), "--stop", stop) == 0
    assert stored_files(lab) == local_files(local)


def rounds(times: list[float], delay_s: float) -> int:
    """How many requests made one after another ``times`` (when each was sent) hold at least. A round starts
    with its first request; a request sent less than a round trip (two delays) after that could not have waited
    for any answer of the round, so it belongs to it, however late a busy CPU sent it. One sent later starts
    the next round."""
    count, start = 0, None
    for t in sorted(times):
        if start is None or t - start >= 1.9 * delay_s:
            count, start = count + 1, t
    return count


def test_a_partition_asks_a_far_store_three_times_in_series(lab, in_buckets):
    """A store 200 ms away each way. Past the first date, a partition asks it three times in series: its
    lease, sent with the turn at its new raw folder and the listings it builds from; its data objects, at once;
    its manifest. Nothing else of its build (an entry stored, a turn or lease let go, the next date's raw
    objects) waits for an answer in between. A new connection's handshake is not counted: it is a cost of the
    command's first requests."""
    delay, days = 0.2, 3
    sample.generate(lab.raw, START, days + 1, stores=3, seed=5, mean_lines_per_store=20)
    with in_buckets("rounds", delay, (lab.raw / "qsr_pos").rglob("*.csv"), START) as lab:
        assert lab.range(START, START + days * DAY) == 0
        # when each request was sent, a delay on: a new connection's first one waited for its handshake too
        asked = [
            (op, key, r.when - 2 * delay * r.opened, "if-none-match" in r.headers)
            for op, key, r in operations(lab.proxy.seen, lab.bucket)
        ]
    for day in (START + DAY, START + 2 * DAY):  # the first date checks both its folders
        lease = f"daybreak/_state/leases/staging/qsr_pos/business_date={day}.json"
        partition = (
            f"daybreak/staging/qsr_pos/business_date={day}/",
            f"daybreak/quarantine/staging/qsr_pos/business_date={day}/",
        )
        read = (*partition, f"landing/qsr_pos/{day}/", f"landing/qsr_pos/{day + DAY}/", "daybreak/_state/checked/")
        taken = next(when for op, key, when, new in asked if op == "PutObject" and key == lease and new)
        committed = next(
            when for op, key, when, _ in asked if op == "PutObject" and key == f"{partition[0]}_manifest.json"
        )
        mine = [
            (op, key, round(when - taken, 2))
            for op, key, when, new in asked
            if taken <= when <= committed
            and (
                (op == "PutObject" and (key.startswith(partition) or new and (key == lease or key.endswith(".lease"))))
                or (op in ("ListObjectsV2", "GetObject", "HeadObject") and key.startswith(read))
            )
        ]
        assert rounds([taken + t for *_, t in mine], delay) == 3, (day, mine)
