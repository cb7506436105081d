"""AllStores on a real luigid (tests/luigid.py, ``daybreak scheduler``): each host exits as one host would,
whichever host ran the store sensor, and an exit 25 is named in the summary (docs/scale-out.md,
docs/run-semantics.md)."""

from __future__ import annotations

import datetime as dt
import os
import time

import pytest

from tasks.settings import write_config
from tests import radosgw
from tests.conftest import qsr_rows
from tests.luigid import Luigid
from tests.test_hosts import DAY, START, Site, log, wait

pytestmark = pytest.mark.system

DAYS, STORES = 10, [f"S{k:03}" for k in range(1, 13)]


def land_stores(site) -> None:
    """Folders START .. START+DAYS in the landing prefix, a file of each store in each."""
    for i in range(DAYS + 1):
        d = START + i * DAY
        for store in STORES:
            path = site.lab.qsr_file(d.isoformat(), store, qsr_rows(store, d))
            key = f"landing/{path.relative_to(site.lab.raw)}"
            site.s3.put_object(Bucket=site.bucket, Key=key, Body=path.read_bytes())


@pytest.mark.skipif(not radosgw.installed(), reason=f"radosgw not installed ({radosgw.INSTALL})")
def test_two_hosts_building_all_stores_at_once_both_exit_0(lab, rgw):
    """Both hosts run ``AllStores --workers 2`` at once, a first build: luigid hands the sensor and AllStores
    to one host, the partitions to both. Before, the other host exited 25 with no partition not run: the
    folders the sensor listed were remembered on its host only, so the sensor (and AllStores) stayed
    incomplete on the other one, though every store was registered and built."""
    site = Site(lab, rgw)
    land_stores(site)
    server = site.scheduler()
    try:
        codes = wait([site.host(f"h{k}", "AllStores", "--workers", "2") for k in range(2)])
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert codes == [0, 0], [log(site, f"h{k}") for k in range(2)]
    for k in range(2):
        out = log(site, f"h{k}")
        assert f"StoreDailySales {STORES[0]} .. {STORES[-1]} ({len(STORES)}): " in out, out
        assert "not run" not in out, out
    marts = [k for k in site.objects("lake/marts/store_daily_sales/") if k.endswith("/_manifest.json")]
    assert len(marts) == len(STORES)
    assert "lake/_state/stores_seen.json" in site.objects("lake/_state/")  # in the bucket, for every host


def test_a_sensor_luigid_keeps_from_a_host_for_its_cooldown_is_named_as_not_run(lab):
    """A qsr_pos folder changed just after AllStores ran on luigid, and AllStores runs again at once: luigid
    counts the sensor and AllStores done (stable_done_cooldown_secs) and hands out neither, so the run exits
    25 with every partition up to date. Before, the summary named nothing not run."""
    start = dt.date(2026, 9, 1)
    lab.qsr_days(start, 4, stores=("S001", "S002"))
    lab.wait_past_last_raw_change()
    server = Luigid(lab.root / "luigid", write_config(lab.root / "luigid.cfg", {"scheduler": {
        "stable_done_cooldown_secs": 600}})).start()  # fmt: skip
    try:
        sections = {"raw_root": lab.raw, "data_root": lab.data, "start_date": start}
        core = {"scheduler_host": "127.0.0.1", "scheduler_port": server.port}
        env = {"LUIGI_CONFIG_PATH": str(write_config(lab.root / "host.cfg", {"daybreak": sections, "core": core}))}
        first = lab.cli("AllStores", env=env)
        assert first.returncode == 0, first.stderr[-3000:]
        stamp = time.time_ns() - 5 * 10**9  # a folder changed since the sensor listed it: the sensor is stale
        os.utime(lab.raw / "qsr_pos" / str(start + 2 * dt.timedelta(days=1)), ns=(stamp, stamp))
        again = lab.cli("AllStores", env=env)
    finally:
        server.stop()
    assert again.returncode == 25, again.stderr[-3000:]
    summary = again.stderr[again.stderr.index("summary of this run:") :].splitlines()
    assert summary[1:4] == [
        "  StoreDailySales S001, S002: 2 up to date",
        "  not run  AllStores (luigid counts it done by a run less than [scheduler] stable_done_cooldown_secs ago, "
        "this host's or another's, but this host finds it stale: deleted or changed since, or built under other "
        "rules? Rerun in a few seconds)",
        "  not run  DiscoverStores",
    ], summary
