"""Hosts that add up: two hosts on one luigid, on one bucket (a real radosgw and a real luigid), check each raw
folder once in all. Partition d reads raw folders d and d+1; luigid hands the two hosts dates d and d+1 at
once, so without a check shared through the data root each host checks again the folders the other checked.
Every partition's manifest says, per raw folder it read, whether its build checked it or read it checked
(``stats.raw_folders``)."""

from __future__ import annotations

import collections
import json

import pytest

from tests import radosgw
from tests.test_hosts import DAY, START, Site, log, wait

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(not radosgw.installed(), reason=f"radosgw not installed ({radosgw.INSTALL})"),
]

DAYS = 8


@pytest.fixture
def site(lab, rgw):
    return Site(lab, rgw)


def manifests(site) -> dict[str, dict]:
    out = {}
    for i in range(DAYS):
        key = f"lake/staging/qsr_pos/business_date={START + i * DAY}/_manifest.json"
        out[str(START + i * DAY)] = json.loads(site.s3.get_object(Bucket=site.bucket, Key=key)["Body"].read())
    return out


def test_two_hosts_on_one_luigid_check_each_raw_folder_once_in_all(site):
    site.land(DAYS)
    server = site.scheduler()
    try:
        hosts = [site.host(f"h{k}", *site.range_args(DAYS)) for k in range(2)]
        assert wait(hosts) == [0, 0], [log(site, f"h{k}") for k in range(2)]
    finally:
        server.terminate()
        server.wait(timeout=10)
    built = manifests(site)
    by_host = collections.Counter(m["built_by"]["worker"] for m in built.values())
    assert len(by_host) == 2 and min(by_host.values()) >= 2, by_host  # both hosts built partitions
    checks = collections.Counter()
    for i in range(DAYS):
        folders = built[str(START + i * DAY)]["stats"]["raw_folders"]
        assert sorted(folders) == [str(START + i * DAY), str(START + (i + 1) * DAY)]
        assert set(folders.values()) <= {"checked", "shared"}
        checks.update(f for f, how in folders.items() if how == "checked")
    seen = {d: m["stats"]["raw_folders"] for d, m in built.items()}
    assert checks == {str(START + i * DAY): 1 for i in range(DAYS + 1)}, seen
