"""A raw_root in a bucket whose whole prefix holds no object (a typo, or a landing zone nothing was sent to yet):
the run, ``daybreak status`` and ``daybreak plan`` say so where they give why a partition waits, naming the
setting's file, from one listing of one key per command; the run still exits 20 (waiting). A real radosgw,
reached through the latency proxy (which sees every request), the commands run as a user runs them."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import uuid
from urllib.parse import parse_qs

import pytest

from tasks.settings import write_config
from tests import radosgw
from tests.conftest import REPO
from tests.latency_proxy import running

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(not radosgw.installed(), reason=f"radosgw not installed ({radosgw.INSTALL})"),
]

START = dt.date(2026, 9, 1)
STOP = START + dt.timedelta(days=3)


def command(rgw, cfg, daybreak: dict, endpoint: str, *args: str, luigi: bool = True) -> subprocess.CompletedProcess:
    """``luigi --module tasks <args>`` (``luigi``), else ``daybreak <args>``, from the folder of ``cfg``, which is
    written first with the settings of ``daybreak`` and the store's endpoint."""
    write_config(cfg, {"daybreak": daybreak, "s3": {"endpoint_url": endpoint, "region": rgw.region}})
    env = {
        **os.environ, "LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(REPO),
        "AWS_ACCESS_KEY_ID": rgw.access_key, "AWS_SECRET_ACCESS_KEY": rgw.secret_key,
    }  # fmt: skip
    head = [sys.executable, "-m", "luigi", "--module", "tasks"] if luigi else [sys.executable, "-m", "tasks.cli"]
    tail = ["--local-scheduler"] if luigi else []
    return subprocess.run([*head, *args, *tail], cwd=cfg.parent, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    ("written", "prefix"),
    [
        ("no-such-prefix/pos", "no-such-prefix/pos"),  # a typo
        ("in%%20box/pos", "in%20box/pos"),  # a space written %20 ('%%' in luigi.cfg): taken as written, no space
    ],
)
def test_a_raw_root_whose_prefix_holds_nothing_is_named_where_each_command_says_why_a_partition_waits(
    rgw, tmp_path, written, prefix
):
    landing = rgw.make_bucket(f"landing-{uuid.uuid4().hex[:8]}")
    lake = rgw.make_bucket(f"lake-{uuid.uuid4().hex[:8]}")
    # the bucket holds raw files, but not under the prefix raw_root names
    for key in (f"pos/qsr_pos/{START}/S001.csv", f"in box/pos/qsr_pos/{START}/S001.csv"):
        rgw.client().put_object(Bucket=landing, Key=key, Body=b"order_id\n")
    cfg = tmp_path / "luigi.cfg"
    typo = f"s3://{landing}/{prefix}"
    daybreak = {
        "raw_root": f"s3://{landing}/{written}",
        "data_root": f"s3://{lake}/d",
        "cache_dir": tmp_path,
        "start_date": START,
    }
    said = f"nothing at all under {typo}: check [daybreak] raw_root in {cfg}"
    span = ("--start", str(START), "--stop", str(STOP))
    with running("127.0.0.1", rgw.port, 0.0) as proxy:
        for args, luigi, code in [
            (("RangeDaily", "--of", "StgQsrPos", *span), True, 20),
            (("status", "--dataset", "stg_qsr_pos", *span), False, 0),
            (("plan", "stg_qsr_pos", *span), False, 20),  # 20: partitions wait
        ]:
            proxy.seen.clear()
            proc = command(rgw, cfg, daybreak, f"http://127.0.0.1:{proxy.port}", *args, luigi=luigi)
            assert proc.returncode == code, proc.stderr[-3000:]
            shown = proc.stdout + proc.stderr
            assert said in shown and "not there yet" not in shown, shown[-3000:]
            one_key = [s for s in proxy.seen if parse_qs(s.query).get("max-keys") == ["1"]]
            assert len(one_key) == 1, proxy.seen
            assert parse_qs(one_key[0].query)["prefix"] == [f"{prefix}/"], one_key

        # a prefix that holds a file: the dates it lacks are not there yet, and nothing is said of the prefix
        daybreak["raw_root"] = f"s3://{landing}/pos"
        proc = command(rgw, cfg, daybreak, f"http://127.0.0.1:{proxy.port}", "RangeDaily", "--of", "StgQsrPos", *span)
    assert proc.returncode == 20, proc.stderr[-3000:]
    assert "not there yet" in proc.stderr and "nothing at all" not in proc.stderr, proc.stderr[-3000:]
