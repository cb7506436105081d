"""AllStores on two hosts at once, on one luigid and one bucket (a real radosgw, a real luigid): each host
exits as one host would, whichever host ran the store sensor (docs/scale-out.md, docs/run-semantics.md)."""

from __future__ import annotations

import pytest

from tests import radosgw
from tests.conftest import qsr_rows
from tests.test_hosts import DAY, START, Site, log, wait

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(not radosgw.installed(), reason=f"radosgw not installed ({radosgw.INSTALL})"),
]

DAYS, STORES = 10, [f"S{k:03}" for k in range(1, 13)]


@pytest.fixture
def site(lab, rgw):
    return Site(lab, rgw)


def land_stores(site) -> None:
    """Folders START .. START+DAYS in the landing prefix, a file of each store in each."""
    for i in range(DAYS + 1):
        d = START + i * DAY
        for store in STORES:
            path = site.lab.qsr_file(d.isoformat(), store, qsr_rows(store, d))
            key = f"landing/{path.relative_to(site.lab.raw)}"
            site.s3.put_object(Bucket=site.bucket, Key=key, Body=path.read_bytes())


def test_two_hosts_building_all_stores_at_once_both_exit_0(site):
    """Both hosts run ``AllStores --workers 2`` at once, a first build: luigid hands the sensor and AllStores
    to one host, the partitions to both. Before, the other host exited 25 with no partition not run: the
    folders the sensor listed were remembered on its host only, so the sensor (and AllStores) stayed
    incomplete on the other one, though every store was registered and built."""
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
