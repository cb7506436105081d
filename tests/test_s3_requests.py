"""Requests a question about many partitions makes of a bucket (a real radosgw): they do not grow with the
number of dates. ``daybreak status`` asks per dataset (listings, one summary object), never per date; the
manifests that forked workers (``--workers 2``) wrote reach the summaries, so the no-op run after a backfill
reads no manifest."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections import Counter

import pytest

from tasks import cli
from tasks.storage.s3lease import releasing
from tests import radosgw
from tests.latency_proxy import operations
from tests.test_s3 import raw_lab

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(not radosgw.installed(), reason=f"radosgw not installed ({radosgw.INSTALL})"),
]

START = dt.date(2026, 9, 10)
DAY = dt.timedelta(days=1)


@pytest.fixture
def counted(rgw, lab, setting, behind_proxy, tmp_path):
    """The lab with its data root in a new bucket, reached through a proxy that sees every request (the latency
    proxy, no delay); ``lab.requests()`` counts them by (operation, key or prefix with the dates taken out),
    whichever process or library made them."""
    bucket = rgw.make_bucket("req-" + tmp_path.name[-12:].lower().replace("_", "-"))
    with behind_proxy(0) as proxy:
        setting("daybreak", "data_root", f"s3://{bucket}/daybreak")
        setting("daybreak", "start_date", START)
        lab.proxy = proxy
        lab.requests = lambda: Counter(
            (operation, re.sub(r"\d{4}-\d{2}-\d{2}", "D", key)) for operation, key, _ in operations(proxy.seen, bucket)
        )
        yield lab


def status_requests(lab, capsys, days: int) -> Counter:
    releasing()  # leases let go by this process's runs so far (on a thread of their own) are not counted
    lab.proxy.seen.clear()
    assert cli.main(["status", "--start", str(START), "--stop", str(START + days * DAY)]) == 0
    capsys.readouterr()
    return lab.requests()


def test_status_over_300_dates_makes_the_requests_it_makes_over_30(counted, capsys):
    lab = counted
    raw_lab(lab, 3)
    lab.hotel_days(START, 4)
    assert lab.range(START, START + 3 * DAY) == 0
    assert lab.range(START, START + 3 * DAY, of="HotelBookingState") == 0
    status_requests(lab, capsys, 1)  # a process asks a bucket whether it answers once, at its first command
    short, long = status_requests(lab, capsys, 30), status_requests(lab, capsys, 300)
    assert short and short == long, set(long.items()) - set(short.items())
    assert not [k for k in long if k[0] == "HeadObject" or "business_date=" in k[1]]


def test_the_no_op_after_a_two_worker_backfill_reads_no_manifest(counted):
    lab = counted
    raw_lab(lab, 4)
    assert lab.range(START, START + 4 * DAY, "--workers", "2") == 0
    releasing()  # leases let go by this process's runs so far (on a thread of their own) are not counted
    lab.proxy.seen.clear()
    assert lab.range(START, START + 4 * DAY, "--workers", "2") == 0
    asked = lab.requests()
    per_partition = {k: n for k, n in asked.items() if "business_date=" in k[1]}
    assert asked and per_partition == {}, per_partition


def test_a_single_run_range_asks_the_bucket_about_its_dates_a_listing_at_a_time_not_a_request_a_date(counted):
    """RangeSingleRun's checks (Luigi's before and after the run, the single run's own) look at a bucket with a
    listing of the dataset each: not a HEAD of each date's manifest, nor a listing and a GET of each one a
    worker process built (before: 5 HEADs, a listing and a GET a date, in series); and a build does not list
    the whole dataset again (before: one listing of it per date built, from a local raw zone)."""
    lab = counted
    raw_lab(lab, 13)

    def single_run(first: dt.date, days: int) -> Counter:
        releasing()  # leases let go by the run before (on a thread of their own) are not counted
        lab.proxy.seen.clear()
        stop = str(first + days * DAY)
        assert lab.luigi("RangeSingleRun", "--of", "StgQsrPos", "--start", str(first), "--stop", stop) == 0
        return lab.requests()

    single_run(START, 1)  # a process asks a bucket whether it answers once, at its first command
    few, many = single_run(START + DAY, 4), single_run(START + 5 * DAY, 8)
    for asked in (few, many):
        manifests = {k: n for k, n in asked.items() if k[1].endswith("=D/_manifest.json") and k[0] != "PutObject"}
        assert manifests == {}, manifests
    # each build lists its own partition once, as it takes its lease; the rest does not grow with the dates
    assert many[("ListObjectsV2", "daybreak/staging/qsr_pos/business_date=D/")] == 8, many

    def per_run(asked: Counter) -> Counter:
        named = {(op, re.sub(r"/[0-9a-f]{32}\.", "/H.", key)): n for (op, key), n in asked.items()}
        return Counter({k: n for k, n in named.items() if "=D" not in k[1]})

    def handover(asked: Counter) -> Counter:  # the checked raw folder between the two processes' stretches
        return Counter({k: n for k, n in per_run(asked).items() if "/_state/checked/" in k[1]})

    assert per_run(few) - handover(few) == per_run(many) - handover(many)
    # the folder between the stretches is checked by one process and read by the other, once each; how often
    # the other looks at the first one's turn meanwhile depends on which of them gets there first
    entry = "daybreak/_state/checked/staging/qsr_pos/D/H.arrow"
    for asked in (few, many):
        assert handover(asked)[("PutObject", entry)] == 1 and handover(asked)[("GetObject", entry)] == 1, asked


def test_a_no_op_names_files_not_read_that_came_after_the_build_and_still_reads_no_manifest(counted, caplog):
    """A link and a lower-case copy land in folder START+1 after the backfill: the no-op run warns of them for
    the two partitions that read the folder, from the listings and summaries it makes anyway."""
    lab = counted
    raw_lab(lab, 4)
    assert lab.range(START, START + 4 * DAY, "--workers", "2") == 0
    folder = lab.raw / "qsr_pos" / str(START + DAY)
    (folder / "S099.csv").symlink_to("S001.csv")
    (folder / "s002.csv").write_bytes((folder / "S002.csv").read_bytes())
    releasing()
    lab.proxy.seen.clear()
    with caplog.at_level("WARNING", logger="luigi-interface"):
        assert lab.range(START, START + 4 * DAY, "--workers", "2") == 0
    asked = lab.requests()
    per_partition = {k: n for k, n in asked.items() if "business_date=" in k[1]}
    assert asked and per_partition == {}, per_partition
    warned = sorted(r.getMessage().split(":")[0] for r in caplog.records if "not in its manifest" in r.getMessage())
    assert warned == [f"staging/qsr_pos {START}", f"staging/qsr_pos {START + DAY}"]


def test_a_command_asks_its_two_buckets_at_once(rgw, behind_proxy):
    """The raw zone and the data root in two buckets of a store 100 ms away each way (the latency proxy): the
    checks a command starts with (does each bucket answer) reach the store at once instead of a round trip
    apart; then the probe of whether the store fences writers (three PUTs) is made once."""
    from tasks.storage.partitions import check_roots

    name = uuid.uuid4().hex[:10]
    landing, lake = rgw.make_bucket(f"land-{name}"), rgw.make_bucket(f"lake-{name}")
    with behind_proxy(0.1) as proxy:  # a round trip of 0.2 s: two HEADs in series are that far apart
        roots = ("data_root", f"s3://{lake}/x"), ("raw_root", f"s3://{landing}/in")
        assert check_roots(*roots, written=("data_root",)) is None
        releasing()  # the probe's key is deleted on a thread of its own
    heads = [r.when for r in proxy.seen if r.method == "HEAD" and r.path.strip("/") in (landing, lake)]
    puts = [r.when for r in proxy.seen if r.method == "PUT" and "/_state/probes/" in r.path]
    assert len(heads) == 2 and abs(heads[0] - heads[1]) < 0.1, proxy.seen  # at once: well under a round trip
    assert len(puts) == 3, proxy.seen


def test_a_command_opens_its_connections_as_it_starts_and_its_first_requests_at_once_use_them(rgw, behind_proxy):
    """A store 20 ms away: each new connection costs a round trip more. The connections a range's listings use
    at once (16) are opened while the command starts, beside its check of the bucket; those listings, sent at
    once, then open no connection of their own."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from tasks.storage import s3get
    from tasks.storage.partitions import check_roots
    from tasks.storage.s3 import Bucket

    lake = rgw.make_bucket(f"warm-{uuid.uuid4().hex[:10]}")
    with behind_proxy(0.01) as proxy:
        assert check_roots(("raw_root", f"s3://{lake}/landing")) is None
        deadline = time.monotonic() + 10
        while proxy.connections < s3get.WARM and time.monotonic() < deadline:  # opened on threads of their own
            time.sleep(0.01)
        opened = proxy.connections
        assert opened >= s3get.WARM
        bucket = Bucket(f"s3://{lake}/landing")
        with ThreadPoolExecutor(s3get.WARM) as pool:
            assert list(pool.map(lambda day: bucket.list(f"qsr_pos/2026-09-{day:02d}/"), range(1, 17))) == [{}] * 16
        assert proxy.connections == opened


def test_a_build_lists_the_checked_folders_while_it_takes_its_lease(rgw, lab, setting, behind_proxy, tmp_path):
    """A store 100 ms away each way: each partition's lease (a PUT) and the listing of the checked raw folders
    its build then reads reach the store at once, not a round trip apart."""
    bucket = rgw.make_bucket(f"early-{uuid.uuid4().hex[:10]}")
    with behind_proxy(0.1) as proxy:
        setting("daybreak", "data_root", f"s3://{bucket}/daybreak")
        setting("daybreak", "start_date", START)
        raw_lab(lab, 3)
        assert lab.range(START, START + DAY) == 0  # the first command also asks whether the store fences writers
        releasing()
        proxy.seen.clear()
        assert lab.range(START + DAY, START + 3 * DAY) == 0
    asked = operations(proxy.seen, bucket)
    leases = {}  # the lease's first PUT takes it (a release rewrites it, then deletes it)
    for op, key, r in asked:
        if op == "PutObject" and "/_state/leases/" in key:
            leases.setdefault(key, r.when)
    surveys = [
        r.when for op, key, r in asked if op == "ListObjectsV2" and key.endswith("_state/checked/staging/qsr_pos/")
    ]
    assert len(leases) == 2 and len(surveys) >= 2, asked
    for lease in leases.values():  # at once: well under a round trip (0.2 s) from a listing
        assert min(abs(lease - survey) for survey in surveys) < 0.1, (leases, surveys)
