"""Requests a question about many partitions makes of a bucket (a real radosgw): they do not grow with the
number of dates. ``daybreak status`` asks per dataset (listings, one summary object), never per date; the
manifests that forked workers (``--workers 2``) wrote reach the summaries, so the no-op run after a backfill
reads no manifest."""

from __future__ import annotations

import datetime as dt
import math
import re
import uuid
from collections import Counter
from urllib.parse import parse_qs, unquote

import pytest

from tasks import cli
from tasks.storage import s3
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


def test_a_command_asks_its_two_buckets_at_once_and_the_store_its_two_conditions_at_once(
    rgw, setting, monkeypatch, tmp_path
):
    """The raw zone and the data root in two buckets of a store 50 ms away (the latency proxy): the checks a
    command starts with (does each bucket answer) overlap instead of following each other, and so do the two
    conditional PUTs of the probe of whether the store fences writers."""
    import threading
    import time

    from tasks.storage.partitions import check_roots

    name = uuid.uuid4().hex[:10]
    landing, lake = rgw.make_bucket(f"land-{name}"), rgw.make_bucket(f"lake-{name}")
    spans: dict[tuple, list[list[float]]] = {}
    lock = threading.Lock()

    def asked(model, params, context, **_):  # what is asked, by the call's own parameters
        context["what"] = (model.name, params.get("Bucket"), "IfNoneMatch" in params, "IfMatch" in params)

    def started(context, **_):
        context["span"] = [time.monotonic(), math.inf]
        with lock:
            spans.setdefault(context["what"], []).append(context["span"])

    def ended(context, **_):
        context["span"][1] = time.monotonic()

    events = {"before-parameter-build.s3": asked, "before-call.s3": started, "after-call.s3": ended}
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", rgw.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", rgw.secret_key)
    with latency_proxy.running("127.0.0.1", rgw.port, delay_s=0.025) as proxy:
        setting("s3", "endpoint_url", f"http://127.0.0.1:{proxy.port}")
        setting("s3", "region", rgw.region)
        setting("daybreak", "cache_dir", tmp_path / "cache")
        client = s3.Bucket(f"s3://{lake}/x").client
        for event, handler in events.items():
            client.meta.events.register(event, handler)
        try:
            roots = ("data_root", f"s3://{lake}/x"), ("raw_root", f"s3://{landing}/in")
            assert check_roots(*roots, written=("data_root",)) is None
        finally:
            for event, handler in events.items():
                client.meta.events.unregister(event, handler)

    def overlap(first: list[float], second: list[float]) -> bool:
        return max(first[0], second[0]) < min(first[1], second[1])

    heads = [spans[("HeadBucket", bucket, False, False)] for bucket in (landing, lake)]
    assert [len(h) for h in heads] == [1, 1] and overlap(heads[0][0], heads[1][0]), spans
    first, second = spans[("PutObject", lake, True, False)]  # the new key, then the one that must fail
    wrong_etag = spans[("PutObject", lake, False, True)][0]
    assert first[1] <= second[0] and overlap(second, wrong_etag), spans
