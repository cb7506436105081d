"""A raw object of a landing bucket re-sent between the listing that names it and the GET that reads it: the
bytes of one version are never filed under another's ETag, by a check (its content hash, remembered in the
summaries every host trusts) or by a build (its manifest). Raw zone and data root in a real radosgw, reached
through a proxy that lets the test put another version just before a GET of the object reaches the server."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from urllib.parse import unquote

import pytest

from tasks import cli
from tasks.freshness.inputs import parse_inputs
from tests import radosgw
from tests.test_s3 import local_tables, store_tables

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(not radosgw.installed(), reason=f"radosgw not installed ({radosgw.INSTALL})"),
]

START = dt.date(2026, 9, 10)
DAY = dt.timedelta(days=1)
STOP = START + 3 * DAY  # partitions START .. START+2; folder START+2 is read by START+1 and START+2
RESENT = f"qsr_pos/{START + 2 * DAY}/S002.csv"


@pytest.fixture
def landing(lab, in_buckets):
    """The lab's raw files in a landing prefix and the data root in the same bucket, both reached through a
    proxy (no delay) that sees every request; ``lab.s3`` a client of the server's own, not through it."""
    lab.qsr_days(START, 3)
    with in_buckets("resent", 0, lab.raw.rglob("*.csv"), START) as lab:
        yield lab


def version(original: bytes, qty: int) -> bytes:
    """The re-sent file with the quantity of its first line (1) set to ``qty``."""
    body = original.replace(b",BURGER,1,", f",BURGER,{qty},".encode(), 1)
    assert (body == original) == (qty == 1)
    return body


def send(lab, body: bytes) -> None:
    """``body`` uploaded as the re-sent object, and written to the lab's local raw folder (the local build)."""
    lab.s3.put_object(Bucket=lab.bucket, Key=f"landing/{RESENT}", Body=body)
    (lab.raw / RESENT).write_bytes(body)


def resent_at_its_get(lab, body: bytes) -> list:
    """At the next GET of the re-sent object, ``body`` is put first (by another client, straight to the
    server): the GET reads it, whatever the listing before it showed. The list returned holds that GET once
    it was made."""
    got: list = []

    def before(request) -> None:
        if not got and request.method == "GET" and unquote(request.path) == f"/{lab.bucket}/landing/{RESENT}":
            lab.s3.put_object(Bucket=lab.bucket, Key=f"landing/{RESENT}", Body=body)
            got.append(request)

    lab.proxy.before = before
    return got


def built(lab) -> dict[dt.date, dict]:
    """The manifest of every partition of stg_qsr_pos in the bucket, by date."""
    out = {}
    for day in (START + i * DAY for i in range(3)):
        key = f"daybreak/staging/qsr_pos/business_date={day}/_manifest.json"
        out[day] = json.loads(lab.s3.get_object(Bucket=lab.bucket, Key=key)["Body"].read())
    return out


def as_read(manifests: dict[dt.date, dict], *versions: bytes) -> dict[dt.date, bytes]:
    """The version of the re-sent object each manifest that reads it records, checked to be one version: the
    size and ETag it lists those of the bytes whose hash it records."""
    from tasks.storage.s3 import Obj
    from tasks.storage.s3raw import version_stamp

    out = {}
    for day, manifest in manifests.items():
        if RESENT in manifest["input_hashes"]:
            body = next(v for v in versions if hashlib.sha256(v).hexdigest() == manifest["input_hashes"][RESENT])
            listed = parse_inputs(manifest["inputs"])[RESENT]
            assert listed == (len(body), version_stamp(Obj(len(body), hashlib.md5(body).hexdigest(), 0))), day
            out[day] = body
    return out


def status(capsys) -> str:
    capsys.readouterr()
    assert cli.main(["status", "--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(STOP)]) == 0
    return capsys.readouterr().out


def equals_a_local_build(lab, setting) -> None:
    """The partitions in the bucket are those a local build of the local raw folder gives, row for row."""
    local = lab.root / "local"
    setting("daybreak", "raw_root", lab.raw)
    setting("daybreak", "data_root", local)
    assert lab.range(START, STOP) == 0
    assert store_tables(lab) == local_tables(local)


def test_an_object_re_sent_between_a_checks_listing_and_its_get_leaves_its_partitions_stale(landing, setting, capsys):
    """Built from B; A put (listed by the check), B put again just before the check's GET, then A for good: the
    check that read B while A was listed cannot say A's content is B's. The two partitions that read it are
    stale at each check until a run rebuilds them from A."""
    lab = landing
    original = (lab.raw / RESENT).read_bytes()
    a, b = version(original, 1), version(original, 7)  # the same size: the check hashes A
    send(lab, b)
    assert lab.range(START, STOP) == 0
    assert as_read(built(lab), a, b) == {START + DAY: b, START + 2 * DAY: b}
    send(lab, a)
    got = resent_at_its_get(lab, b)
    raced = status(capsys)
    assert len(got) == 1  # the check read the object, B put just before
    both = f"{START + DAY} .. {START + 2 * DAY}"
    assert f"{both} (2 days) stale" in raced and RESENT in raced and "content identical" not in raced, raced
    lab.proxy.before = None
    send(lab, a)  # A for good
    after = status(capsys)
    assert f"{both} (2 days) stale" in after and RESENT in after and "content identical" not in after, after
    before = {d: m["finished_at"] for d, m in built(lab).items()}
    assert lab.range(START, STOP) == 0
    now = built(lab)
    assert {d for d, m in now.items() if m["finished_at"] != before[d]} == {START + DAY, START + 2 * DAY}
    assert as_read(now, a, b) == {START + DAY: a, START + 2 * DAY: a}
    assert "\n  3 ok\n" in status(capsys)
    equals_a_local_build(lab, setting)


def test_an_object_re_sent_between_a_builds_listing_and_its_get_fails_the_build_and_the_next_run_reads_it(
    landing, setting, capsys
):
    """Built from A; B put (listed by the run), C put just before the build's GET: the build that read C while
    B was listed writes nothing (no manifest records B's ETag with C's rows); the next run builds from C."""
    lab = landing
    original = (lab.raw / RESENT).read_bytes()
    # B of another size than A: the run's check knows it changed without reading it; the build reads it first
    a, b, c = version(original, 1), version(original, 17), version(original, 13)
    assert lab.range(START, STOP) == 0
    before = {d: m["finished_at"] for d, m in built(lab).items()}
    assert as_read(built(lab), a) == {START + DAY: a, START + 2 * DAY: a}
    send(lab, b)
    got = resent_at_its_get(lab, c)
    assert lab.range(START, STOP) != 0  # the build that read it first fails
    assert len(got) == 1
    assert built(lab)[START + DAY]["finished_at"] == before[START + DAY]  # it wrote nothing
    assert set(as_read(built(lab), a, b, c).values()) <= {a, c}  # a later build listed C anew, or none
    lab.proxy.before = None
    send(lab, c)  # what the bucket holds: the local raw folder too
    assert lab.range(START, STOP) == 0
    assert as_read(built(lab), a, b, c) == {START + DAY: c, START + 2 * DAY: c}
    assert "\n  3 ok\n" in status(capsys)
    equals_a_local_build(lab, setting)
