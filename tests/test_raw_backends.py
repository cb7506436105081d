"""One raw zone over its backends (tasks/storage/rawzone.py): the contract (layout, what is not read and why,
the newest folder, the content hashes a build read) is the zone's, written once; a backend (a local folder,
an SFTP server, a bucket) only lists and reads, and says what it can."""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib
import uuid

import pytest

FIRST = dt.date(2026, 9, 10)
DAY = dt.timedelta(days=1)
BACKENDS = {"tasks.storage.rawlocal": "LocalRaw", "tasks.storage.sftp": "SftpRaw", "tasks.storage.s3raw": "S3Raw"}


@pytest.mark.unit
def test_one_raw_zone_class_over_backends_that_only_list_and_read():
    """Callers see one RawZone whatever the raw root: no subclass of it per place, and a backend has no public
    method the backend interface does not name (what is read, and why not, stays the zone's)."""
    import tasks.storage.s3raw
    import tasks.storage.sftp  # noqa: F401 - the remote places, loaded as a remote raw_root loads them
    from tasks.storage.rawzone import RawZone

    per_place = [c for c in RawZone.__subclasses__() if c.__module__.startswith("tasks.")]  # a test's spy aside
    assert per_place == [], "a raw zone per place: callers would have to know which they have"
    from tasks.storage.rawzone import RawBackend

    interface = {name for name in vars(RawBackend) if not name.startswith("_")}
    for module, name in BACKENDS.items():
        backend = getattr(importlib.import_module(module), name)
        assert RawBackend in backend.__mro__  # its defaults
        public = {n for n, v in vars(backend).items() if callable(v) and not n.startswith("_")}
        assert public <= interface, f"{name}: {sorted(public - interface)} beyond the backend interface"


@pytest.mark.system
def test_a_bucket_and_a_folder_holding_the_same_files_give_the_zone_the_same_answers(rgw, lab, monkeypatch, setting):
    """The same tree as a local folder and as a landing prefix: the same files listed and read (with their
    hashes remembered), the same entries not read and why (a key one level too deep is a folder locally, a
    file directly under the source, a folder whose name is not a date, a file named like a date), the same
    newest folder and dated folders."""
    from tasks.storage.rawzone import RawZone, unread_in_source

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", rgw.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", rgw.secret_key)
    setting("s3", "endpoint_url", rgw.endpoint_url)
    setting("s3", "region", rgw.region)
    lab.qsr_days(FIRST, 2)  # folders 09-10 .. 09-12
    pos = lab.raw / "qsr_pos"
    (pos / str(FIRST) / "late").mkdir()
    (pos / str(FIRST) / "late" / "S009.csv").write_text("one level too deep\n")
    (pos / "20260912").mkdir()
    (pos / "20260912" / "S005.csv").write_text("a folder no partition reads\n")
    (pos / "S007.csv").write_text("beside the date folders\n")
    (pos / "2026-09-30").write_text("a file named like a date\n")
    bucket = rgw.make_bucket(f"same-{uuid.uuid4().hex[:10]}")
    client = rgw.client()
    for path in sorted(p for p in lab.raw.rglob("*") if p.is_file()):
        client.put_object(Bucket=bucket, Key=f"landing/{path.relative_to(lab.raw)}", Body=path.read_bytes())
    local, remote = RawZone(lab.raw), RawZone.from_uri(f"s3://{bucket}/landing")

    def answers(zone: RawZone) -> dict:
        scans = {}
        for d in (FIRST + k * DAY for k in range(4)):
            scan = zone.scan_folder_all("qsr_pos", d)
            scans[d] = scan and ([(name, size) for name, size, _ in scan[0]], scan[1])
        files = zone.list_folder("qsr_pos", FIRST + DAY)
        read = list(zone.read_inputs(files))
        return {
            "scans": scans,
            "there": [zone.folder_exists("qsr_pos", FIRST + k * DAY) for k in range(4)],
            "unread": unread_in_source("qsr_pos", *zone.source_listing("qsr_pos")),
            "newest": zone.newest_folder_date("qsr_pos"),
            "dated": sorted(zone.list_folders("qsr_pos")),
            "read": read,
            "hashes": [zone.known_digest(f) for f in files],
        }

    seen = answers(local)
    assert answers(remote) == seen
    assert seen["scans"][FIRST][1] == [("late", "not a regular file")]
    assert [(r.name, r.reason) for r in seen["unread"]] == [
        ("qsr_pos/2026-09-30", "not a folder"),
        ("qsr_pos/20260912", "not a YYYY-MM-DD folder name"),
        ("qsr_pos/S007.csv", "not a YYYY-MM-DD folder name"),
    ]
    assert seen["newest"] == FIRST + 2 * DAY and seen["scans"][FIRST + 3 * DAY] is None
    assert seen["hashes"] == [hashlib.sha256(data).hexdigest() for data in seen["read"]] and len(seen["read"]) == 2


@pytest.mark.unit
def test_which_raw_zones_are_read_over_one_session_a_process_is_the_backends_to_say():
    """A range on an SFTP raw zone is built by one process over one connection, and its tasks hold a capped
    session while they read; known from the raw root alone, without opening it (no login, no request)."""
    from tasks.storage.rawzone import one_session

    assert one_session("sftp://etl@sftp.internal:22/exports")
    assert not one_session("s3://landing/pos") and not one_session("/srv/raw") and not one_session("raw")
    for module, name in BACKENDS.items():
        assert getattr(importlib.import_module(module), name).one_session == (name == "SftpRaw")


@pytest.mark.system
def test_the_store_sensor_lists_a_bucket_folder_once_though_it_changed_in_the_second_listed(
    rgw, lab, monkeypatch, setting
):
    """A bucket's folder stamp is no time: it sums its keys' names and versions, so a new key changes it
    whenever it lands, and a folder listed in the second it changed is not listed again at every run (the
    clock rule of RawZone.settled is for times)."""
    from tasks import store_marts
    from tasks.storage.rawzone import RawZone

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", rgw.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", rgw.secret_key)
    setting("s3", "endpoint_url", rgw.endpoint_url)
    setting("s3", "region", rgw.region)
    lab.qsr_days(FIRST, 3, stores=("S001", "S002"))
    bucket = rgw.make_bucket(f"sensor-{uuid.uuid4().hex[:10]}")
    client = rgw.client()
    for path in sorted(p for p in lab.raw.rglob("*") if p.is_file()):  # multipart: an ETag that is no MD5
        key = f"landing/{path.relative_to(lab.raw)}"
        upload = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        part = client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=path.read_bytes())
        parts = {"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
        client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload, MultipartUpload=parts)
    zone, stop = RawZone.from_uri(f"s3://{bucket}/landing"), FIRST + 30 * DAY
    assert set(store_marts.discover(zone, FIRST, stop)[0]) == {"S001", "S002"}
    assert store_marts.unseen_folders(zone, FIRST, stop)[0] == {}
    client.put_object(Bucket=bucket, Key=f"landing/qsr_pos/{FIRST + DAY}/S003.csv", Body=b"store_id\n")
    assert list(store_marts.unseen_folders(zone, FIRST, stop)[0]) == [str(FIRST + DAY)]


@pytest.mark.system
def test_a_folder_marker_key_is_no_file_and_alone_is_an_empty_folder(rgw, lab, monkeypatch, setting):
    """A console's "create folder" writes a zero-byte key ``qsr_pos/D/``. Before, it was a file not read (warned
    on every run) and, alone, a folder that had arrived: date D-1 was built without D's small hours. Alone, it
    is an empty folder, as ``mkdir`` makes one: there, holding no file."""
    from tasks.storage.rawzone import RawZone

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", rgw.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", rgw.secret_key)
    setting("s3", "endpoint_url", rgw.endpoint_url)
    setting("s3", "region", rgw.region)
    lab.qsr_days(FIRST, 1)  # folders 09-10 and 09-11
    bucket = rgw.make_bucket(f"marker-{uuid.uuid4().hex[:10]}")
    client = rgw.client()
    for path in sorted(p for p in lab.raw.rglob("*") if p.is_file()):
        client.put_object(Bucket=bucket, Key=f"landing/{path.relative_to(lab.raw)}", Body=path.read_bytes())
    for d in (FIRST, FIRST + 2 * DAY):
        client.put_object(Bucket=bucket, Key=f"landing/qsr_pos/{d}/", Body=b"")
    zone = RawZone.from_uri(f"s3://{bucket}/landing")
    files, unread = zone.scan_folder_all("qsr_pos", FIRST)
    assert sorted(name for name, _, _ in files) == sorted(p.name for p in (lab.raw / "qsr_pos" / str(FIRST)).iterdir())
    assert unread == []
    assert zone.scan_folder_all("qsr_pos", FIRST + 2 * DAY) == ([], [])
    assert zone.folder_exists("qsr_pos", FIRST + 2 * DAY)
    assert zone.scan_folder_all("qsr_pos", FIRST + 3 * DAY) is None


@pytest.mark.system
def test_a_bucket_folder_holding_no_store_file_has_not_arrived_as_a_local_one(rgw, lab, monkeypatch, setting, capsys):
    """On a bucket, a folder "arrived once it holds an object": one holding only its marker key or a key no
    partition reads (an upload's temporary name) let date d-1 be built without d's small hours. It waits, as
    over a local folder, until a store file lands."""
    from tasks.cli import main

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", rgw.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", rgw.secret_key)
    setting("s3", "endpoint_url", rgw.endpoint_url)
    setting("s3", "region", rgw.region)
    lab.qsr_days(FIRST, 2)  # folders 09-10 .. 09-12
    bucket = rgw.make_bucket(f"arrive-{uuid.uuid4().hex[:10]}")
    client = rgw.client()
    last = FIRST + 2 * DAY
    for path in sorted(p for p in lab.raw.rglob("*") if p.is_file() and p.parent.name != str(last)):
        client.put_object(Bucket=bucket, Key=f"landing/{path.relative_to(lab.raw)}", Body=path.read_bytes())
    setting("daybreak", "raw_root", f"s3://{bucket}/landing")
    status = ["status", "--dataset", "stg_qsr_pos", "--start", str(FIRST), "--stop", str(last)]
    marker, part = f"qsr_pos/{last}/", f"qsr_pos/{last}/S001.csv.part"  # a console's folder, an upload under way
    there = " (there, without any <store_id>.csv yet"
    for key, why in ((marker, f"{there})\n"), (part, f"{there}; it holds S001.csv.part)\n")):  # as an empty folder
        client.put_object(Bucket=bucket, Key=f"landing/{key}", Body=b"" if key == marker else b"order_id\n")
        assert lab.range(FIRST, last) == 20
        assert set(lab.built_at()) == {FIRST}
        capsys.readouterr()
        assert main(status) == 0
        shown = capsys.readouterr().out
        assert f"{FIRST + DAY} waiting: raw folder missing: qsr_pos/{last}{why}" in shown, shown
    for path in sorted((lab.raw / "qsr_pos" / str(last)).iterdir()):  # its files land
        client.put_object(Bucket=bucket, Key=f"landing/qsr_pos/{last}/{path.name}", Body=path.read_bytes())
    assert lab.range(FIRST, last) == 0
    setting("daybreak", "raw_root", lab.raw)
    capsys.readouterr()
    assert main(status) == 0  # the same partitions as the same files give over the local folder
    assert "\n  2 ok\n" in capsys.readouterr().out
