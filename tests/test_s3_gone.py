"""A store that stops answering while a run still schedules (Luigi's completeness checks: RangeDaily's, a
partition's) ends the run as it does once the builds have started (docs/reliability.md): one line naming the
store, then Daybreak's summary, exit 30; never Luigi's summary nor a traceback. Raw files and partitions in
buckets of a real radosgw, reached through the latency proxy (tests/latency_proxy.py), which the test cuts at
one question of the run: the store goes away at that very request."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import uuid
from urllib.parse import parse_qs, unquote

import pytest

from tasks.settings import write_config
from tests import radosgw
from tests.conftest import REPO, qsr_rows
from tests.latency_proxy import running

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(not radosgw.installed(), reason=f"radosgw not installed ({radosgw.INSTALL})"),
]

START = dt.date(2026, 9, 1)
DAY = dt.timedelta(days=1)
DATES = 8
HEADER = "order_id,line_no,store_id,ordered_at,sku,qty,unit_price,discount,status\n"


class Buckets:
    """Raw files in a landing bucket, the data root in another; runs of ``luigi --module tasks RangeDaily``."""

    def __init__(self, rgw, root):
        self.rgw, self.root, self.s3 = rgw, root, rgw.client()
        self.raw = rgw.make_bucket(f"landing-{uuid.uuid4().hex[:8]}")
        self.data = rgw.make_bucket(f"lake-{uuid.uuid4().hex[:8]}")
        for i in range(DATES + 1):
            d = START + i * DAY
            for store in ("S001", "S002"):
                body = HEADER + "\n".join(qsr_rows(store, d)) + "\n"
                self.s3.put_object(Bucket=self.raw, Key=f"pos/qsr_pos/{d}/{store}.csv", Body=body.encode())

    def run(self, endpoint: str, family: str = "RangeDaily") -> subprocess.CompletedProcess:
        daybreak = {"raw_root": f"s3://{self.raw}/pos", "data_root": f"s3://{self.data}/d", "cache_dir": self.root}
        cfg = write_config(
            self.root / "luigi.cfg", {"daybreak": daybreak, "s3": {"endpoint_url": endpoint, "region": self.rgw.region}}
        )
        env = {
            **os.environ, "LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(REPO),
            "AWS_ACCESS_KEY_ID": self.rgw.access_key, "AWS_SECRET_ACCESS_KEY": self.rgw.secret_key,
        }  # fmt: skip
        stop = str(START + DATES * DAY)
        cmd = [sys.executable, "-m", "luigi", "--module", "tasks", family, "--of", "StgQsrPos"]
        cmd += ["--start", str(START), "--stop", stop, "--local-scheduler"]
        return subprocess.run(cmd, cwd=self.root, env=env, capture_output=True, text=True, timeout=300)

    def delete_partition(self, date: dt.date) -> None:
        listed = self.s3.list_objects_v2(Bucket=self.data, Prefix=f"d/staging/qsr_pos/business_date={date}/")
        for obj in listed.get("Contents", ()):
            self.s3.delete_object(Bucket=self.data, Key=obj["Key"])


@pytest.fixture
def buckets(rgw, tmp_path):
    return Buckets(rgw, tmp_path)


def _listing(bucket: str, prefix: str):
    def asked(seen) -> bool:
        return seen.path == f"/{bucket}" and parse_qs(seen.query).get("prefix") == [prefix]

    return asked


def _head(bucket: str, key: str):
    return lambda seen: seen.method == "HEAD" and unquote(seen.path) == f"/{bucket}/{key}"


GONE = "daybreak: error: the object store (endpoint http://127.0.0.1:{port}, "


def named_buckets(line: str) -> set[str]:
    """The buckets an object store's line names: ``bucket B``, or ``buckets A and B``."""
    inside = line.split(", bucket", 1)[1].split(")", 1)[0].removeprefix("s ").strip()
    return set(inside.replace(" and ", ", ").split(", "))


@pytest.mark.parametrize(
    "question",
    [
        "RangeDaily's listing of the data root",  # RangeDaily.complete(), StgQsrPos.bulk_complete()
        "RangeDaily's listing of the raw bucket",
        "a partition's manifest, as Luigi checks it before its run",  # StgQsrPos(date=...).complete()
    ],
)
def test_a_store_that_stops_answering_while_the_run_schedules_is_one_line_the_summary_and_exit_30(buckets, question):
    b = buckets
    assert b.run(b.rgw.endpoint_url).returncode == 0
    gap = START + 4 * DAY
    b.delete_partition(gap)  # work for the run: Luigi checks this partition again as it schedules it
    cuts = {
        "RangeDaily's listing of the data root": _listing(b.data, "d/staging/qsr_pos/"),
        "RangeDaily's listing of the raw bucket": _listing(b.raw, "pos/qsr_pos/"),
        "a partition's manifest, as Luigi checks it before its run": _head(
            b.data, f"d/staging/qsr_pos/business_date={gap}/_manifest.json"
        ),
    }
    with running("127.0.0.1", b.rgw.port, 0.0) as proxy:
        proxy.cut_when = cuts[question]
        run = b.run(f"http://127.0.0.1:{proxy.port}")
        assert proxy._stop.is_set(), "the run never asked that question"
    err = run.stderr
    assert run.returncode == 30, err
    assert "Traceback" not in err and "Luigi Execution Summary" not in err and "Will not run" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("daybreak: error:")]
    after = (
        "(EndpointConnectionError): the partitions it failed are kept as they were, or stale where it stopped "
        "mid-commit; rerun the same command"
    )
    # one line for the endpoint, naming each bucket whose requests failed (both are asked at once)
    assert len(errors) == 1 and errors[0].startswith(GONE.format(port=proxy.port)), err
    assert errors[0].endswith(f") failed during the run {after} once it answers"), err
    assert named_buckets(errors[0]) in ({b.raw}, {b.data}, {b.raw, b.data}), err
    summary = err[err.index(errors[0]) :].splitlines()[1:]
    assert summary[0].startswith("INFO: summary of this run: "), err
    assert any(line.startswith("  not run  StgQsrPos ") for line in summary), err
    assert b.run(b.rgw.endpoint_url).returncode == 0  # the store back, the same command finishes the range


def _put(bucket: str, key: str):
    return lambda seen: seen.method == "PUT" and unquote(seen.path) == f"/{bucket}/{key}"


def test_a_store_that_stops_answering_while_a_single_run_builds_is_one_line_and_the_summary_of_what_it_recorded(
    buckets,
):
    """Before: RangeSingleRun asked the store again after its builds (its check of the range), and printed the
    error of that listing, with no summary and no failed date; as RangeDaily, the summary is made from what the
    run recorded of its builds."""
    b = buckets
    cut = START + 4 * DAY
    with running("127.0.0.1", b.rgw.port, 0.0) as proxy:
        proxy.cut_when = _put(b.data, f"d/staging/qsr_pos/business_date={cut}/_manifest.json")
        run = b.run(f"http://127.0.0.1:{proxy.port}", "RangeSingleRun")
        assert proxy._stop.is_set(), "the run never wrote that manifest"
    err = run.stderr
    assert run.returncode == 30, err
    assert "Traceback" not in err and "Luigi Execution Summary" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("daybreak: error:")]
    # one line for the endpoint, naming each bucket whose requests failed (two processes ask both)
    assert len(errors) == 1 and errors[0].startswith(GONE.format(port=proxy.port)), err
    assert named_buckets(errors[0]) in ({b.raw}, {b.data}, {b.raw, b.data}), err
    summary = err[err.index(errors[0]) :].splitlines()[1:]
    assert summary[0].startswith("INFO: summary of this run: "), err
    assert any(line.startswith(f"  failed   StgQsrPos {cut}") for line in summary), err
    assert b.run(b.rgw.endpoint_url, "RangeSingleRun").returncode == 0
