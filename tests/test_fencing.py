"""A store that cannot fence writers is refused; leases that cannot block; a skewed clock named as such.

A store that ignores conditional writes is a real moto server pinned to 4.2.14 (it answers 200 to
``If-None-Match: *`` on an existing key and to ``If-Match`` on a wrong ETag, as S3 servers did before
2024); one that honours them is a real radosgw (tests/radosgw.py). docs/scale-out.md, docs/reliability.md."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import boto3
import pytest

from tasks.settings import write_config
from tests import radosgw, test_s3
from tests.conftest import REPO
from tests.sshd import free_port
from tests.test_s3 import DAY, START, objects, raw_lab

store_env, s3lab = test_s3.store_env, test_s3.s3lab  # the fixtures: a bucket each (radosgw: tests/conftest.py)

pytestmark = pytest.mark.system
needs_radosgw = pytest.mark.skipif(not radosgw.installed(), reason=f"radosgw not installed ({radosgw.INSTALL})")

MOTO_ENV = {"AWS_ACCESS_KEY_ID": "moto", "AWS_SECRET_ACCESS_KEY": "moto"}


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    """A real moto 4.2.14 server on a free port of 127.0.0.1, with a bucket ``lake``."""
    port = free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-p", str(port), "-H", "127.0.0.1"], stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline and proc.poll() is None, "moto did not start"
            time.sleep(0.1)
        endpoint = f"http://127.0.0.1:{port}"
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **_keys())
        client.create_bucket(Bucket="lake")
        yield endpoint, client
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def _keys() -> dict[str, str]:
    return {"aws_access_key_id": "moto", "aws_secret_access_key": "moto"}


def keys(client, bucket: str = "lake") -> list[str]:
    return [o["Key"] for o in client.list_objects_v2(Bucket=bucket).get("Contents", ())]


def test_moto_4_2_14_ignores_both_conditions_as_the_tests_need(moto):
    _, client = moto
    client.put_object(Bucket="lake", Key="k", Body=b"1", IfNoneMatch="*")
    assert client.put_object(Bucket="lake", Key="k", Body=b"2", IfNoneMatch="*")["ETag"]  # 200: not refused
    assert client.put_object(Bucket="lake", Key="k", Body=b"3", IfMatch='"0123"')["ETag"]
    client.delete_object(Bucket="lake", Key="k")


def _daybreak(*args: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", "import sys; from tasks.cli import main; sys.exit(main(sys.argv[1:]))", *args]
    return subprocess.run(cmd, cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=300)


def test_a_store_that_ignores_conditional_writes_is_refused_before_anything_is_written(lab, moto):
    endpoint, client = moto
    lab.qsr_days(START, 2)
    cfg = write_config(
        lab.root / "moto.cfg",
        {
            "daybreak": {"raw_root": lab.raw, "data_root": "s3://lake/daybreak", "cache_dir": lab.root / "cache"},
            "s3": {"endpoint_url": endpoint, "region": "us-east-1"},
        },
    )
    env = {"LUIGI_CONFIG_PATH": str(cfg), **MOTO_ENV}
    expected = (
        f"daybreak: error: [daybreak] data_root s3://lake/daybreak: the store at {endpoint} (bucket lake) ignores "
        "conditional writes (If-None-Match: * on an existing key and If-Match with a wrong ETag were accepted); "
        "Daybreak cannot fence writers on it: use a store that honours If-None-Match and If-Match (AWS S3, Ceph "
        "radosgw, MinIO)"
    )
    span = ("--start", str(START), "--stop", str(START + 2 * DAY))
    runs = [
        lab.cli("RangeDaily", "--of", "StgQsrPos", *span, "--local-scheduler", env=env),
        lab.cli("RangeDaily", "--of", "StgQsrPos", *span, "--workers", "2", "--local-scheduler", env=env),
        _daybreak("preview", "stg_qsr_pos", *span, cwd=lab.root, env=env),
        _daybreak("publish", "20260910-000000-abcdef", cwd=lab.root, env=env),
        _daybreak("verify", *span, cwd=lab.root, env=env),
    ]
    for proc in runs:
        assert proc.returncode == 2, proc.stderr[-3000:]
        assert proc.stderr.strip().splitlines() == [expected], proc.stderr[-3000:]
        assert keys(client) == []  # nothing written, the probe's key deleted
    assert not (lab.root / "cache/s3/conditional-writes.json").exists()  # a refusal is asked again next time


def test_a_conditional_write_on_such_a_store_is_never_made_whatever_the_path(lab, moto, setting, monkeypatch):
    """A writer that did not come through the command's check (a shared document, a manifest alone) asks the
    store first, too."""
    from tasks.storage import partitions
    from tasks.storage.s3 import Bucket
    from tasks.storage.s3fence import CannotFence
    from tasks.storage.store import PartitionStore

    endpoint, client = moto
    for key, value in MOTO_ENV.items():
        monkeypatch.setenv(key, value)
    setting("daybreak", "cache_dir", lab.root / "cache")
    setting("s3", "endpoint_url", endpoint)
    uri = "s3://lake/daybreak"
    with pytest.raises(CannotFence, match=f"the store at {endpoint} \\(bucket lake\\) ignores conditional writes"):
        Bucket(uri).put("_state/x.json", b"{}", if_none_match=True)
    with pytest.raises(CannotFence):
        partitions.update_document(uri, "stores.json", lambda doc: {"a": 1}, "the store registry")
    with pytest.raises(partitions.PartitionWriteError, match="ignores conditional writes"):
        PartitionStore(uri, "staging/qsr_pos").update_manifest(START, {"dataset": "staging/qsr_pos"})
    assert keys(client) == []


@needs_radosgw
def test_a_store_that_honours_them_is_asked_once_per_host_and_left_clean(s3lab, rgw):
    """radosgw passes the probe; the second run (same host: same cache folder) does not ask again; after the
    runs no probe and no lease object is left in the bucket."""
    lab = s3lab
    raw_lab(lab, days=2)
    cfg = write_config(
        lab.root / "rgw.cfg",
        {
            "daybreak": {"raw_root": lab.raw, "data_root": lab.uri, "cache_dir": lab.root / "cache"},
            "s3": {"endpoint_url": rgw.endpoint_url, "region": rgw.region},
        },
    )
    env = {"LUIGI_CONFIG_PATH": str(cfg)}
    span = ("--start", str(START), "--stop", str(START + 2 * DAY))
    record = lab.root / "cache/s3/conditional-writes.json"
    first = lab.cli("RangeDaily", "--of", "StgQsrPos", *span, "--local-scheduler", env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    asked = json.loads(record.read_text())  # written once the store passed
    assert list(asked) == [f"{rgw.endpoint_url} {lab.bucket}"]
    second = lab.cli("RangeDaily", "--of", "StgQsrPos", *span, "--workers", "2", "--local-scheduler", env=env)
    assert second.returncode == 0, second.stderr[-3000:]
    preview = _daybreak("preview", "stg_qsr_pos", *span, cwd=lab.root, env=env)
    assert preview.returncode == 0, preview.stderr[-3000:]
    assert json.loads(record.read_text()) == asked  # not asked again
    left = [k for k in objects(lab) if "/_state/probes/" in k or "/_state/leases/" in k]
    assert left == [] and any(k.endswith("/_manifest.json") for k in objects(lab))


# -- leases --------------------------------------------------------------------------------------------


@needs_radosgw
@pytest.mark.parametrize(
    "body",
    [b"[]", b'{"owner": "x", "seconds": "abc"}', b"not json", b'{"seconds": 1e999}', b'{"seconds": NaN}', b"\xff"],
)
def test_an_unreadable_lease_counts_as_expired_and_is_named(s3lab, body, caplog):
    from tasks.storage.store import PartitionStore

    key = f"daybreak/_state/leases/marts/demo/business_date={START}.json"
    s3lab.s3.put_object(Bucket=s3lab.bucket, Key=key, Body=body)
    with caplog.at_level("WARNING", logger="luigi-interface"):
        with PartitionStore(s3lab.uri, "marts/demo").locked(START, wait_s=0):
            pass
    assert f"the lease s3://{s3lab.bucket}/{key} is unreadable" in caplog.text


@needs_radosgw
def test_a_holders_seconds_count_for_at_most_this_hosts_lease_seconds(s3lab, setting):
    """A lease written with lease_seconds = 1e9 by a killed host blocked its partition for good."""
    from tasks.storage.partitions import PartitionBusy
    from tasks.storage.s3lease import releasing
    from tasks.storage.store import PartitionStore

    setting("s3", "lease_seconds", 2)
    key = f"daybreak/_state/leases/marts/demo/business_date={START}.json"
    body = {"owner": "a killed host", "seconds": 1e9, "released": False}
    s3lab.s3.put_object(Bucket=s3lab.bucket, Key=key, Body=json.dumps(body).encode())
    store = PartitionStore(s3lab.uri, "marts/demo")
    with pytest.raises(PartitionBusy, match=f"a killed host has held its lease \\(s3://{s3lab.bucket}/{key}\\)"):
        with store.locked(START, wait_s=0):
            pass
    started = time.monotonic()
    with store.locked(START, wait_s=10):  # taken over once 2 s have passed by the store's clock
        pass
    assert time.monotonic() - started < 6
    releasing()  # the release runs on a thread of its own; a run waits for it before it exits
    assert s3lab.s3.list_objects_v2(Bucket=s3lab.bucket, Prefix=key).get("KeyCount") == 0  # released: deleted


@needs_radosgw
def test_a_lease_is_taken_over_at_once_only_by_the_host_name_that_wrote_it(s3lab, setting, tmp_path):
    """Two containers of one image: one machine name, pid namespaces of their own, a host_name each. A lease
    taken by host box-a, whose process is gone here (its pid may be alive in its own namespace), is not
    taken over by box-b before it expires; box-a's rerun takes it over at once."""
    from tasks.storage.partitions import PartitionBusy
    from tasks.storage.store import PartitionStore

    cfg = write_config(
        tmp_path / "box-a.cfg",
        {
            "daybreak": {"data_root": s3lab.uri, "cache_dir": tmp_path / "cache-a", "host_name": "box-a"},
            "s3": {"endpoint_url": s3lab.s3.meta.endpoint_url, "region": s3lab.s3.meta.region_name},
        },
    )
    take = (  # the context kept in a name: a lock object collected at once would release the lease
        "from tasks.storage.store import PartitionStore; import datetime as dt; "
        f"held = PartitionStore({s3lab.uri!r}, 'marts/demo').locked(dt.date.fromisoformat({str(START)!r}), wait_s=0)"
        "; held.__enter__(); import os; os._exit(0)"  # taken, never released: the process ends holding it
    )
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", take], env=env, check=True, timeout=60)
    key = f"daybreak/_state/leases/marts/demo/business_date={START}.json"
    held = json.loads(s3lab.s3.get_object(Bucket=s3lab.bucket, Key=key)["Body"].read())
    assert held["host"] == "box-a" and held["owner"].startswith("box-a pid ")
    setting("s3", "lease_seconds", 60)
    store = PartitionStore(s3lab.uri, "marts/demo")
    setting("daybreak", "host_name", "box-b")
    with pytest.raises(PartitionBusy, match="box-a pid .* has held its lease"):
        with store.locked(START, wait_s=0):
            pass
    setting("daybreak", "host_name", "box-a")
    with store.locked(START, wait_s=0):  # the rerun of box-a: its holder is gone from this host
        pass


@needs_radosgw
@pytest.mark.parametrize("seconds", [1e300, float("inf"), float("nan"), 0.0, -5.0])
def test_no_lease_thread_dies_on_any_value(s3lab, seconds, monkeypatch):
    from tasks.storage.s3 import Bucket
    from tasks.storage.s3lease import Lease

    died = []
    monkeypatch.setattr(threading, "excepthook", died.append)
    lease = Lease(Bucket(s3lab.uri), "_state/leases/x.json", seconds)
    lease.acquire("x", 0)
    with lease.renewing():
        # no condition to wait for: the thread must reach its wait (or renew, for 0 and -5) before the
        # block ends, since a stop set first returns from the wait without using the value under test
        time.sleep(0.2)
    lease.release()
    assert died == []


# -- the clock -----------------------------------------------------------------------------------------


@needs_radosgw
def test_a_clock_off_by_more_than_15_minutes_is_named_not_the_credentials(s3lab, rgw):
    lab = s3lab
    raw_lab(lab, days=1)
    cfg = write_config(
        lab.root / "rgw.cfg",
        {
            "daybreak": {"raw_root": lab.raw, "data_root": lab.uri, "cache_dir": lab.root / "cache"},
            "s3": {"endpoint_url": rgw.endpoint_url, "region": rgw.region},
        },
    )
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg)}
    driver = str(REPO / "tests" / "clock_driver.py")
    span = ["--start", str(START), "--stop", str(START + DAY)]
    for minutes, side in (("-42", "behind it"), ("90", "ahead of it")):
        for command in (
            ["luigi", "RangeDaily", "--of", "StgQsrPos", *span, "--local-scheduler"],
            ["daybreak", "status"],
        ):
            proc = subprocess.run(
                [sys.executable, driver, minutes, *command], cwd=lab.root, env=env, capture_output=True, text=True
            )
            assert proc.returncode == 2, proc.stderr[-3000:]
            [line] = proc.stderr.strip().splitlines()
            assert f"this host's clock is off by {abs(int(minutes))} minutes from the store's ({side};" in line
            assert line.endswith("RequestTimeTooSkewed): fix the clock (NTP)") and "credentials" not in line
    assert objects(lab) == {}
    ok = subprocess.run([sys.executable, driver, "3", "daybreak", "status"], cwd=lab.root, env=env, capture_output=True)
    assert ok.returncode == 0, ok.stderr[-3000:]  # within the store's 15 minutes: nothing to say
