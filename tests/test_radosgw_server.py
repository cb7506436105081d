"""What a real S3 server, Ceph's radosgw 16 (Debian 12), does with the requests an S3 store will make.

Each test pins one behaviour the project relies on or works around; they run against tests/radosgw.py's
server and are skipped where Debian's radosgw, ceph-mon and ceph-osd are not installed."""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.util
import io
import os
import uuid
from pathlib import Path

import pytest

from tests import radosgw

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(
        not radosgw.installed(), reason=f"radosgw not installed ({radosgw.INSTALL}): {', '.join(radosgw.missing())}"
    ),
]
boto3 = pytest.importorskip("boto3")
from botocore.exceptions import ClientError  # noqa: E402


@pytest.fixture(scope="module")
def rgw(tmp_path_factory):
    with radosgw.running(tmp_path_factory.mktemp("radosgw")) as server:
        yield server


@pytest.fixture
def bucket(rgw) -> str:
    return rgw.make_bucket(f"t-{uuid.uuid4().hex[:12]}")


def error(e: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    return e.value.response["Error"]["Code"], e.value.response["ResponseMetadata"]["HTTPStatusCode"]


def body(s3, bucket: str, key: str) -> bytes:
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def arrow_s3(rgw):
    """pyarrow's S3 filesystem on the server; writes need AWS_REQUEST_CHECKSUM_CALCULATION=when_required set
    before it is made (see test_pyarrow_reads_parquet_and_writes_only_with_checksums_when_required)."""
    pafs = pytest.importorskip("pyarrow.fs")
    return pafs.S3FileSystem(
        endpoint_override=f"127.0.0.1:{rgw.port}",
        scheme="http",
        access_key=rgw.access_key,
        secret_key=rgw.secret_key,
        region=rgw.region,
    )


def test_if_none_match_star_creates_a_key_once(rgw, bucket):
    s3 = rgw.client()
    created = s3.put_object(Bucket=bucket, Key="k", Body=b"first", IfNoneMatch="*")
    assert created["ETag"] == f'"{hashlib.md5(b"first").hexdigest()}"'
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="k", Body=b"second", IfNoneMatch="*")
    assert error(e) == ("PreconditionFailed", 412)
    assert body(s3, bucket, "k") == b"first"


def test_if_match_on_put_compares_the_etag_without_its_quotes(rgw, bucket):
    """radosgw 16 compares a PUT's If-Match with the bare MD5: the quoted ETag that S3 returns fails."""
    s3 = rgw.client()
    s3.put_object(Bucket=bucket, Key="k", Body=b"v1")
    etag = s3.head_object(Bucket=bucket, Key="k")["ETag"]
    assert etag == f'"{hashlib.md5(b"v1").hexdigest()}"'
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="k", Body=b"v2", IfMatch=etag)
    assert error(e) == ("PreconditionFailed", 412)
    assert body(s3, bucket, "k") == b"v1"

    replaced = s3.put_object(Bucket=bucket, Key="k", Body=b"v2", IfMatch=etag.strip('"'))
    assert replaced["ETag"] == f'"{hashlib.md5(b"v2").hexdigest()}"'
    assert body(s3, bucket, "k") == b"v2"

    for wrong in (etag, etag.strip('"'), '"0123456789abcdef0123456789abcdef"'):  # v1's ETag is stale now
        with pytest.raises(ClientError) as e:
            s3.put_object(Bucket=bucket, Key="k", Body=b"v3", IfMatch=wrong)
        assert error(e) == ("PreconditionFailed", 412)
    with pytest.raises(ClientError) as e:  # no such key: 412 as well, not 404
        s3.put_object(Bucket=bucket, Key="absent", Body=b"v3", IfMatch=etag.strip('"'))
    assert error(e) == ("PreconditionFailed", 412)
    assert body(s3, bucket, "k") == b"v2"


def test_conditions_radosgw_ignores_or_takes_both_ways(rgw, bucket):
    """GET takes If-Match with or without quotes; PUT's If-None-Match with an ETag, DELETE's If-Match and
    CopyObject's If-None-Match are not checked at all: the write or delete happens."""
    s3 = rgw.client()
    s3.put_object(Bucket=bucket, Key="k", Body=b"v1")
    etag = s3.head_object(Bucket=bucket, Key="k")["ETag"]
    for match in (etag, etag.strip('"')):
        assert s3.get_object(Bucket=bucket, Key="k", IfMatch=match)["Body"].read() == b"v1"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="k", IfMatch='"0123456789abcdef0123456789abcdef"')
    assert error(e) == ("PreconditionFailed", 412)

    s3.put_object(Bucket=bucket, Key="k", Body=b"v2", IfNoneMatch=etag)  # the current ETag, yet written
    assert body(s3, bucket, "k") == b"v2"

    s3.put_object(Bucket=bucket, Key="copy", Body=b"there")
    s3.copy_object(Bucket=bucket, Key="copy", CopySource=f"{bucket}/k", IfNoneMatch="*")
    assert body(s3, bucket, "copy") == b"v2"

    s3.delete_object(Bucket=bucket, Key="k", IfMatch='"0123456789abcdef0123456789abcdef"')
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="k")
    assert error(e) == ("404", 404)


def test_multipart_completion_ignores_conditions_and_returns_no_etag(rgw, bucket):
    """CompleteMultipartUpload with If-None-Match: * or a wrong If-Match still replaces the object, and its
    answer has an empty ETag (head_object has it). A conditional write must be one put_object (up to 5 GB);
    boto3's upload_fileobj does not even take IfNoneMatch."""
    s3 = rgw.client()

    def multipart(data: bytes, **condition) -> str:
        upload = s3.create_multipart_upload(Bucket=bucket, Key="k")["UploadId"]
        part = s3.upload_part(Bucket=bucket, Key="k", UploadId=upload, PartNumber=1, Body=data)
        parts = {"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
        done = s3.complete_multipart_upload(Bucket=bucket, Key="k", UploadId=upload, MultipartUpload=parts, **condition)
        return done["ETag"]

    s3.put_object(Bucket=bucket, Key="k", Body=b"first")
    assert multipart(b"second", IfNoneMatch="*") == ""
    assert body(s3, bucket, "k") == b"second"
    assert (
        s3.head_object(Bucket=bucket, Key="k")["ETag"]
        == f'"{hashlib.md5(hashlib.md5(b"second").digest()).hexdigest()}-1"'
    )
    multipart(b"third", IfMatch="0123456789abcdef0123456789abcdef")
    assert body(s3, bucket, "k") == b"third"
    with pytest.raises(ValueError, match="Invalid extra_args key 'IfNoneMatch'"):
        s3.upload_fileobj(io.BytesIO(b"x"), bucket, "k", ExtraArgs={"IfNoneMatch": "*"})


def test_list_objects_v2_gives_etag_size_and_time_of_every_key_page_by_page(rgw, bucket):
    s3 = rgw.client()
    written = {f"d/part-{i}.bin": os.urandom(100 + i) for i in range(7)}
    before = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(seconds=1)
    for key, data in written.items():
        s3.put_object(Bucket=bucket, Key=key, Body=data)
    s3.put_object(Bucket=bucket, Key="elsewhere", Body=b"x")

    pages, listed, token = [], {}, {}
    while True:
        page = s3.list_objects_v2(Bucket=bucket, Prefix="d/", MaxKeys=3, **token)
        pages.append((page["KeyCount"], page["IsTruncated"]))
        for item in page["Contents"]:
            listed[item["Key"]] = item
        if not page["IsTruncated"]:
            break
        token = {"ContinuationToken": page["NextContinuationToken"]}
    assert pages == [(3, True), (3, True), (1, False)]
    assert sorted(listed) == sorted(written)
    for key, data in written.items():
        item = listed[key]
        assert item["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'
        assert item["ETag"] == s3.head_object(Bucket=bucket, Key=key)["ETag"]
        assert item["Size"] == len(data)
        assert item["LastModified"].tzinfo is not None
        assert before <= item["LastModified"] <= dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)


def test_any_region_signs_but_a_bucket_is_made_in_default_only(rgw):
    """radosgw's zonegroup is "default": SigV4 works with any region name, a LocationConstraint must be
    "default" or absent. Making a bucket one already owns answers 200."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    for region in ("us-east-1", "eu-west-1"):
        s3 = boto3.client(
            "s3",
            endpoint_url=rgw.endpoint_url,
            aws_access_key_id=rgw.access_key,
            aws_secret_access_key=rgw.secret_key,
            region_name=region,
        )
        with pytest.raises(ClientError) as e:
            s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": region})
        assert error(e) == ("InvalidLocationConstraint", 400)
        s3.create_bucket(Bucket=name)
        s3.put_object(Bucket=name, Key=region, Body=b"x")
        assert s3.get_bucket_location(Bucket=name)["LocationConstraint"] == "default"
    rgw.client().create_bucket(Bucket=f"{name}-lc", CreateBucketConfiguration={"LocationConstraint": "default"})
    assert sorted(o["Key"] for o in rgw.client().list_objects_v2(Bucket=name)["Contents"]) == ["eu-west-1", "us-east-1"]


def test_a_5_mb_put_is_one_request_with_or_without_botocores_default_checksums(rgw, bucket):
    """Over plain HTTP botocore sends its CRC32 in a header (no aws-chunked body): radosgw 16 takes it and
    ignores it (no checksum comes back), so boto3 needs no when_required setting here. The client() helper sets
    it all the same: over HTTPS botocore sends an aws-chunked body with a trailing checksum, and radosgw 16
    answers 411 MissingContentLength (seen with beast's ssl_endpoint)."""
    data = os.urandom(5 << 20)
    sent = []
    for mode in ("when_supported", "when_required"):
        s3 = rgw.client(request_checksum_calculation=mode, response_checksum_validation=mode)
        s3.meta.events.register("before-send.s3.PutObject", lambda request, **_: sent.append(dict(request.headers)))
        put = s3.put_object(Bucket=bucket, Key=mode, Body=data)
        assert put["ETag"] == f'"{hashlib.md5(data).hexdigest()}"'  # one part: no "-N" suffix
        assert "ChecksumCRC32" not in put
        got = s3.get_object(Bucket=bucket, Key=mode)
        assert got["ContentLength"] == len(data) and got["Body"].read() == data
    default, required = sent
    assert default["x-amz-checksum-crc32"] and default["Content-Length"] == str(len(data))
    assert "Content-Encoding" not in default and not default["X-Amz-Content-SHA256"].startswith(b"STREAMING")
    assert "x-amz-checksum-crc32" not in required


def test_pyarrow_reads_parquet_and_writes_only_with_checksums_when_required(rgw, bucket, monkeypatch):
    """pyarrow's AWS SDK (C++) sends its checksums in an aws-chunked body, and radosgw 16 answers 411
    MissingContentLength: a write needs AWS_REQUEST_CHECKSUM_CALCULATION=when_required in the environment when
    the S3FileSystem is made. Reads work either way."""
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    table = pa.table({"n": list(range(1000)), "s": [f"row {i}" for i in range(1000)]})
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    rgw.client().put_object(Bucket=bucket, Key="t/data.parquet", Body=buffer.getvalue())

    monkeypatch.delenv("AWS_REQUEST_CHECKSUM_CALCULATION", raising=False)
    fs = arrow_s3(rgw)
    assert pq.read_table(f"{bucket}/t/data.parquet", filesystem=fs).equals(table)
    assert fs.get_file_info(f"{bucket}/t/data.parquet").size == len(buffer.getvalue())
    with pytest.raises(OSError, match="HTTP status 411.*MissingContentLength"):
        pq.write_table(table, f"{bucket}/t/written.parquet", filesystem=fs)

    monkeypatch.setenv("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
    fs = arrow_s3(rgw)
    pq.write_table(table, f"{bucket}/t/written.parquet", filesystem=fs)
    assert pq.read_table(f"{bucket}/t/written.parquet", filesystem=fs).equals(table)


def duckdb_with_httpfs():
    """A DuckDB connection with httpfs loaded from this machine (never downloaded), or None."""
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    try:
        con.sql("LOAD httpfs")
        return con
    except duckdb.Error:
        pass
    spec = importlib.util.find_spec("duckdb_ext")  # PyPI's duckdb-ext-httpfs (a third party's packaging)
    for folder in spec.submodule_search_locations if spec else ():
        for path in Path(folder).glob(f"extensions/v{duckdb.__version__}/*/httpfs.duckdb_extension"):
            con.sql(f"LOAD '{path}'")
            return con
    return None


def test_duckdb_reads_parquet_through_httpfs(rgw, bucket):
    """Seen with duckdb 1.4.4 and PyPI's duckdb-ext-httpfs 1.4.4.20260205; DuckDB's own INSTALL httpfs
    downloads the extension, which this machine cannot, and no package ships it for duckdb 2.0."""
    con = duckdb_with_httpfs()
    if con is None:
        pytest.skip("DuckDB's httpfs extension is not on this machine (INSTALL httpfs downloads it)")
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    buffer = io.BytesIO()
    pq.write_table(pa.table({"n": list(range(1000))}), buffer)
    rgw.client().put_object(Bucket=bucket, Key="t/data.parquet", Body=buffer.getvalue())
    con.sql(
        f"CREATE SECRET rgw (TYPE s3, KEY_ID '{rgw.access_key}', SECRET '{rgw.secret_key}', REGION '{rgw.region}', "
        f"ENDPOINT '127.0.0.1:{rgw.port}', URL_STYLE 'path', USE_SSL false)"
    )
    assert con.sql(f"SELECT count(*), sum(n) FROM read_parquet('s3://{bucket}/t/data.parquet')").fetchall() == [
        (1000, 499500)
    ]


def test_duckdb_reads_parquet_through_a_pyarrow_dataset(rgw, bucket):
    """Without httpfs, DuckDB queries the object through pyarrow's S3 filesystem."""
    duckdb = pytest.importorskip("duckdb")
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    pads = pytest.importorskip("pyarrow.dataset")
    buffer = io.BytesIO()
    pq.write_table(pa.table({"n": list(range(1000))}), buffer)
    rgw.client().put_object(Bucket=bucket, Key="t/data.parquet", Body=buffer.getvalue())
    dataset = pads.dataset(f"{bucket}/t/data.parquet", filesystem=arrow_s3(rgw), format="parquet")
    con = duckdb.connect(config={"autoinstall_known_extensions": False})
    con.register("data", dataset)
    assert con.sql("SELECT count(*), sum(n) FROM data").fetchall() == [(1000, 499500)]


def test_restart_keeps_the_objects(rgw, bucket):
    s3 = rgw.client()
    data = os.urandom(300_000)
    etag = s3.put_object(Bucket=bucket, Key="kept", Body=data)["ETag"]
    rgw.restart()
    assert s3.head_object(Bucket=bucket, Key="kept")["ETag"] == etag  # the same client: its old connection is gone
    assert body(s3, bucket, "kept") == data
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["kept"]
    s3.put_object(Bucket=bucket, Key="after", Body=b"x", IfNoneMatch="*")
    assert body(rgw.client(), bucket, "after") == b"x"
