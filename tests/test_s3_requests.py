"""Requests a question about many partitions makes of a bucket (a real radosgw): they do not grow with the
number of dates. ``daybreak status`` asks per dataset (listings, one summary object), never per date; the
manifests that forked workers (``--workers 2``) wrote reach the summaries, so the no-op run after a backfill
reads no manifest."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections import Counter
from urllib.parse import parse_qs, unquote

import pytest

from tasks import cli
from tasks.storage.s3lease import releasing
from tests import latency_proxy, radosgw
from tests.test_s3 import raw_lab

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(not radosgw.installed(), reason=f"radosgw not installed ({radosgw.INSTALL})"),
]

START = dt.date(2026, 9, 10)
DAY = dt.timedelta(days=1)


@pytest.fixture
def counted(rgw, lab, setting, monkeypatch, tmp_path):
    """The lab with its data root in a new bucket, reached through a proxy that sees every request (the latency
    proxy, no delay); ``lab.requests()`` counts them by (operation, key or prefix with the dates taken out),
    whichever process or library made them."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", rgw.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", rgw.secret_key)
    bucket = rgw.make_bucket("req-" + tmp_path.name[-12:].lower().replace("_", "-"))
    with latency_proxy.running("127.0.0.1", rgw.port, delay_s=0) as proxy:
        setting("daybreak", "data_root", f"s3://{bucket}/daybreak")
        setting("daybreak", "start_date", START)
        setting("daybreak", "cache_dir", tmp_path / "cache")
        setting("s3", "endpoint_url", f"http://127.0.0.1:{proxy.port}")
        setting("s3", "region", rgw.region)
        lab.proxy = proxy
        lab.requests = lambda: operations(proxy.requests, bucket)
        yield lab


def operations(requests: list[tuple[str, str, str]], bucket: str) -> Counter:
    """(S3 operation, key or prefix with dates as D) of each request to ``bucket``, as the server got it."""
    found: Counter = Counter()
    for method, path, query in requests:
        key = unquote(path).removeprefix(f"/{bucket}").removeprefix("/")
        asked = parse_qs(query)
        if method == "GET" and "list-type" in asked:
            operation, key = "ListObjectsV2", asked.get("prefix", [""])[0]
        else:
            kind = "Bucket" if not key else "Object"
            operation = {"GET": "Get", "HEAD": "Head", "PUT": "Put", "DELETE": "Delete"}.get(method, method) + kind
        found[(operation, re.sub(r"\d{4}-\d{2}-\d{2}", "D", key))] += 1
    return found


def status_requests(lab, capsys, days: int) -> Counter:
    releasing()  # leases let go by this process's runs so far (on a thread of their own) are not counted
    lab.proxy.requests.clear()
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
    lab.proxy.requests.clear()
    assert lab.range(START, START + 4 * DAY, "--workers", "2") == 0
    asked = lab.requests()
    per_partition = {k: n for k, n in asked.items() if "business_date=" in k[1]}
    assert asked and per_partition == {}, per_partition


def test_a_command_asks_its_two_buckets_at_once(rgw, setting, monkeypatch, tmp_path):
    """The raw zone and the data root in two buckets of a store 50 ms away each way (the latency proxy): the
    checks a command starts with (does each bucket answer) reach the store at once instead of a round trip
    apart; then the probe of whether the store fences writers (three PUTs) is made once."""
    from tasks.storage.partitions import check_roots

    name = uuid.uuid4().hex[:10]
    landing, lake = rgw.make_bucket(f"land-{name}"), rgw.make_bucket(f"lake-{name}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", rgw.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", rgw.secret_key)
    with latency_proxy.running("127.0.0.1", rgw.port, delay_s=0.05) as proxy:
        setting("s3", "endpoint_url", f"http://127.0.0.1:{proxy.port}")
        setting("s3", "region", rgw.region)
        setting("daybreak", "cache_dir", tmp_path / "cache")
        roots = ("data_root", f"s3://{lake}/x"), ("raw_root", f"s3://{landing}/in")
        assert check_roots(*roots, written=("data_root",)) is None
        releasing()  # the probe's key is deleted on a thread of its own
    heads = [when for when, method, path, _ in proxy.timed if method == "HEAD" and path.strip("/") in (landing, lake)]
    puts = [when for when, method, path, _ in proxy.timed if method == "PUT" and "/_state/probes/" in path]
    assert len(heads) == 2 and abs(heads[0] - heads[1]) < 0.05, proxy.timed  # a round trip is 0.1 s
    assert len(puts) == 3, proxy.timed


def test_a_command_opens_its_connections_as_it_starts_and_its_first_requests_at_once_use_them(
    rgw, setting, monkeypatch, tmp_path
):
    """A store 20 ms away: each new connection costs a round trip more. The connections a range's listings use
    at once (16) are opened while the command starts, beside its check of the bucket; those listings, sent at
    once, then open no connection of their own."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from tasks.storage import s3get
    from tasks.storage.partitions import check_roots
    from tasks.storage.s3 import Bucket

    lake = rgw.make_bucket(f"warm-{uuid.uuid4().hex[:10]}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", rgw.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", rgw.secret_key)
    with latency_proxy.running("127.0.0.1", rgw.port, delay_s=0.01) as proxy:
        setting("s3", "endpoint_url", f"http://127.0.0.1:{proxy.port}")
        setting("s3", "region", rgw.region)
        setting("daybreak", "cache_dir", tmp_path / "cache")
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
