"""A store that stops answering while a run still schedules (Luigi's completeness checks: RangeDaily's, a
partition's) ends the run as it does once the builds have started (docs/reliability.md): one line naming the
store, then Daybreak's summary, exit 30; never Luigi's summary nor a traceback. Raw files and partitions in
buckets of a real radosgw, reached through the latency proxy (tests/latency_proxy.py), which the test cuts at
one question of the run: the store goes away at that very request."""

from __future__ import annotations

import datetime as dt
import io
import os
import subprocess
import sys
import time
import uuid
from urllib.parse import parse_qs, unquote

import pyarrow.parquet as pq
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

    def run(
        self,
        endpoint: str,
        family: str = "RangeDaily",
        *args: str,
        s3: dict | None = None,
        data: str = "d",
        timeout: float = 300,
    ) -> subprocess.CompletedProcess:
        daybreak = {"raw_root": f"s3://{self.raw}/pos", "data_root": f"s3://{self.data}/{data}", "cache_dir": self.root}
        s3 = {"endpoint_url": endpoint, "region": self.rgw.region, **(s3 or {})}
        cfg = write_config(self.root / "luigi.cfg", {"daybreak": daybreak, "s3": s3})
        env = {
            **os.environ, "LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(REPO),
            "AWS_ACCESS_KEY_ID": self.rgw.access_key, "AWS_SECRET_ACCESS_KEY": self.rgw.secret_key,
        }  # fmt: skip
        stop = str(START + DATES * DAY)
        cmd = [sys.executable, "-m", "luigi", "--module", "tasks", family, "--of", "StgQsrPos"]
        cmd += ["--start", str(START), "--stop", stop, "--local-scheduler", *args]
        return subprocess.run(cmd, cwd=self.root, env=env, capture_output=True, text=True, timeout=timeout)

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


TIMEOUT_S = 2  # [s3] timeout of the runs against a frozen store


def test_a_store_that_freezes_mid_run_is_given_up_after_its_timeout_and_a_rerun_builds_the_rest(buckets):
    """A store that keeps its connections open but answers nothing (radosgw stopped with ``kill -STOP``) as a
    partition is written, under two workers. Before: each request waited 60 s a read, tried 4 times, and
    every date after it did the same: a run of minutes per date, no line for minutes. Now the request that
    gets no answer within [s3] timeout, past its retries, gives the store up for the run and its workers:
    the dates left fail at once, one line names the store and the timeout, exit 30; once the store answers
    again the same command builds the rest, as a run that never saw the freeze builds it."""
    b = buckets
    frozen = START + 2 * DAY
    setting = {"timeout": TIMEOUT_S}
    with running("127.0.0.1", b.rgw.port, 0.0) as proxy:
        endpoint = f"http://127.0.0.1:{proxy.port}"
        proxy.freeze_when = _put(b.data, f"d/staging/qsr_pos/business_date={frozen}/data.parquet")
        run = b.run(endpoint, "RangeDaily", "--workers", "2", s3=setting, timeout=120)
        ended = time.monotonic()
        assert proxy.frozen_at is not None, "the run never wrote that partition"
        proxy.thaw()  # the store answers again, and what it held goes through now
        again = b.run(endpoint, s3=setting)
    err = run.stderr
    assert run.returncode == 30, err
    assert ended - proxy.frozen_at < 40, err  # its timeouts and retries, then nothing more is waited for
    assert "Traceback" not in err and "Luigi Execution Summary" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("daybreak: error:")]
    assert len(errors) == 1, err
    assert f"endpoint {endpoint}" in errors[0] and f"within {TIMEOUT_S} s" in errors[0], err
    assert any(f"bucket {bucket}" in errors[0] for bucket in (b.raw, b.data)), err
    summary = err[err.index(errors[0]) :].splitlines()[1:]
    assert summary[0].startswith("INFO: summary of this run: "), err
    assert any(line.startswith(f"  failed   StgQsrPos {frozen}") for line in summary), err
    assert again.returncode == 0, again.stderr
    assert b.run(b.rgw.endpoint_url, data="ref").returncode == 0  # what a run that never saw the freeze builds
    assert _tables(b, "d") == _tables(b, "ref")


def _tables(b: Buckets, data: str) -> dict[str, list]:
    """The rows of every partition of staging/qsr_pos under the data root ``data``, by date."""
    prefix = f"{data}/staging/qsr_pos/"
    listed = b.s3.list_objects_v2(Bucket=b.data, Prefix=prefix)
    keys = [o["Key"] for o in listed.get("Contents", ()) if o["Key"].endswith("/data.parquet")]
    body = lambda key: io.BytesIO(b.s3.get_object(Bucket=b.data, Key=key)["Body"].read())  # noqa: E731
    return {key.removeprefix(prefix): pq.read_table(body(key)).to_pylist() for key in sorted(keys)}


def test_a_store_frozen_before_the_run_starts_is_one_line_and_exit_2_naming_the_timeout(buckets):
    """Frozen from the command's first request on: one line and exit 2 as for a store that cannot be reached
    (docs/operations.md), naming the endpoint and the timeout; nothing in it of a run that was under way."""
    b = buckets
    with running("127.0.0.1", b.rgw.port, 0.0) as proxy:
        endpoint = f"http://127.0.0.1:{proxy.port}"
        proxy.freeze_when = lambda seen: True
        run = b.run(endpoint, s3={"timeout": TIMEOUT_S}, timeout=120)
        proxy.thaw()
    err = run.stderr
    assert run.returncode == 2, err
    errors = [line for line in err.splitlines() if line.startswith("daybreak: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert f"endpoint {endpoint}" in errors[0] and f"no answer within {TIMEOUT_S} s" in errors[0], err
    assert "rest of the run" not in errors[0] and "not tried again" not in errors[0], err
    assert not list(b.rgw.client().list_objects_v2(Bucket=b.data).get("Contents", ()))  # nothing written


def test_a_host_whose_store_went_away_says_what_another_host_built_was_written_by_another_run(buckets, tmp_path):
    """Two hosts on one luigid: host B built every date but the last under other settings; host A's store goes
    away as it writes the last. Before, A's summary said of each date B had built `luigid counts it done ...
    but this host finds it stale: deleted or changed since ...? Rerun in a few seconds`, though the store was
    never asked: they are `written by another run`, as luigid says."""
    from tests.luigid import Luigid

    b, last = buckets, START + (DATES - 1) * DAY
    server = Luigid(tmp_path / "luigid").start()

    def host(name: str, endpoint: str, stop: dt.date, **qsr) -> subprocess.CompletedProcess:
        home = tmp_path / name
        home.mkdir()
        daybreak = {"raw_root": f"s3://{b.raw}/pos", "data_root": f"s3://{b.data}/d", "cache_dir": home}
        cfg = write_config(
            home / "luigi.cfg",
            {
                "daybreak": {**daybreak, "host_name": name},
                "s3": {"endpoint_url": endpoint, "region": b.rgw.region},
                "qsr": qsr,
                "core": {"scheduler_host": "127.0.0.1", "scheduler_port": server.port},
            },
        )
        env = {
            **os.environ, "LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(REPO), "TMPDIR": str(home),
            "AWS_ACCESS_KEY_ID": b.rgw.access_key, "AWS_SECRET_ACCESS_KEY": b.rgw.secret_key,
        }  # fmt: skip
        cmd = [sys.executable, "-m", "luigi", "--module", "tasks", "RangeDaily", "--of", "StgQsrPos"]
        cmd += ["--start", str(START), "--stop", str(stop)]
        return subprocess.run(cmd, cwd=home, env=env, capture_output=True, text=True, timeout=300)

    try:
        assert host("host-b", b.rgw.endpoint_url, last).returncode == 0
        with running("127.0.0.1", b.rgw.port, 0.0) as proxy:  # at once: luigid counts B's dates done (cooldown)
            proxy.cut_when = _put(b.data, f"d/staging/qsr_pos/business_date={last}/data.parquet")
            run = host("host-a", f"http://127.0.0.1:{proxy.port}", last + DAY, suspicious_qty_threshold=2)
            assert proxy._stop.is_set(), "host A never wrote the last date"
    finally:
        server.stop()
    err = run.stderr
    assert run.returncode == 30, err
    summary = err[err.index("summary of this run:") :]
    assert f"StgQsrPos {START} .. {last}: {DATES - 1} written by another run, 1 failed" in summary, summary
    assert "finds it stale" not in summary, summary
