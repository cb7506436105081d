"""A listing page read outside botocore (tasks/storage/s3get.py): what stores send is read as botocore reads it,
and anything else hands the request back to botocore (None) rather than passing for an empty listing. Against a
real store: tests/test_s3.py::test_a_listing_outside_botocore_equals_botocores_over_pages_and_odd_names."""

from __future__ import annotations

import datetime as dt

import pytest

from tasks.storage.s3get import read_list_page

pytestmark = pytest.mark.unit

NS = ' xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'
OBJECT = (
    "<Contents><Key>{key}</Key><LastModified>2026-12-06T11:30:00.123Z</LastModified>"
    "<ETag>&quot;9dd4e461268c8034f5c8564e155c67a6&quot;</ETag><Size>48</Size></Contents>"
)


def page(ns: str = NS, keys=("pos%2FS001%20a%2Bb.csv",), truncated: str = "false", token: str = "", encoded=True):
    body = "".join(OBJECT.format(key=k) for k in keys)
    more = f"<NextContinuationToken>{token}</NextContinuationToken>" if token else ""
    encoding = "<EncodingType>url</EncodingType>" if encoded else ""
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult{ns}>{encoding}<Name>b</Name>'
        f"<IsTruncated>{truncated}</IsTruncated>{body}{more}</ListBucketResult>"
    ).encode()


def test_a_page_with_or_without_the_namespace_reads_the_same_keys_sizes_etags_and_times():
    when = int(dt.datetime(2026, 12, 6, 11, 30, 0, 123000, tzinfo=dt.UTC).timestamp() * 10**6) * 1000
    expected = ([("pos/S001 a+b.csv", 48, "9dd4e461268c8034f5c8564e155c67a6", when)], None, [])
    assert read_list_page(page()) == expected
    assert read_list_page(page(ns="")) == expected  # a store that leaves the namespace out
    assert read_list_page(page(keys=("pos/S001 a+b.csv",), encoded=False)) == expected
    assert read_list_page(page(keys=())) == ([], None, [])
    folders = page(keys=()).replace(
        b"</ListBucketResult>",
        b"<CommonPrefixes><Prefix>qsr_pos%2F2026-09-01%2F</Prefix></CommonPrefixes></ListBucketResult>",
    )
    assert read_list_page(folders) == ([], None, ["qsr_pos/2026-09-01/"])  # a /-delimited listing's folders


def _botocores_reading(body: bytes) -> tuple[list[str], list[str]]:
    """The keys and folders botocore makes of a ListObjectsV2 page: its parser, then its handler that decodes what
    the client asked to be url-encoded."""
    import botocore.session
    from botocore.handlers import decode_list_object_v2
    from botocore.parsers import RestXMLParser

    model = botocore.session.get_session().get_service_model("s3")
    shape = model.operation_model("ListObjectsV2").output_shape
    parsed = RestXMLParser().parse({"body": body, "headers": {}, "status_code": 200}, shape)
    decode_list_object_v2(parsed, context={"encoding_type_auto_set": True})
    return [o["Key"] for o in parsed.get("Contents", [])], [p["Prefix"] for p in parsed.get("CommonPrefixes", [])]


def test_amazons_encoding_of_a_space_as_a_plus_reads_as_botocore_reads_it():
    # what Amazon S3 sends for keys "run books/a b.csv" and "run books/a+b.csv" (a space as "+", a "+" as "%2B"),
    # where radosgw sends "%20" for a space
    body = page(keys=("run+books/a+b.csv", "run+books/a%2Bb.csv", "%ED%95%9C%EA%B8%80/100%25.csv")).replace(
        b"</ListBucketResult>",
        b"<CommonPrefixes><Prefix>run+books/</Prefix></CommonPrefixes></ListBucketResult>",
    )
    keys, folders = _botocores_reading(body)
    assert keys == ["run books/a b.csv", "run books/a+b.csv", "\ud55c\uae00/100%.csv"]
    items, _, prefixes = read_list_page(body)
    assert [item[0] for item in items] == keys and prefixes == folders == ["run books/"]


def test_a_truncated_page_gives_its_token_and_one_without_a_token_is_not_taken():
    assert read_list_page(page(truncated="true", token="abc"))[1] == "abc"
    assert read_list_page(page(truncated="true")) is None


@pytest.mark.parametrize(
    "body",
    [
        b"<Error><Code>AccessDenied</Code></Error>",
        b"<ListAllMyBucketsResult/>",
        b"not xml",
        page().replace(b"<Size>48</Size>", b""),
        page().replace(b"<Key>", b"<Name>").replace(b"</Key>", b"</Name>"),
    ],
)
def test_anything_but_a_whole_listing_is_handed_back_to_botocore(body):
    assert read_list_page(body) is None


@pytest.mark.parametrize("origin", ["http://127.0.0.1:7480", "https://s3.example.com", "http://store:80"])
@pytest.mark.parametrize("token", [None, "session/token+=="])
@pytest.mark.parametrize(
    ("key", "query", "method"),
    [
        ("landing/qsr_pos/2026-09-01/S001.csv", None, "GET"),
        ("odd/S0001 a+b&c%d é~(x).csv", None, "GET"),
        (None, {"list-type": "2", "prefix": "pos/qsr pos/", "max-keys": "1000", "encoding-type": "url"}, "GET"),
        (None, {"list-type": "2", "prefix": "p/", "continuation-token": "1/a+B=/=c", "delimiter": "/"}, "GET"),
        (None, None, "HEAD"),
    ],
)
def test_a_request_is_signed_as_botocore_signs_it(monkeypatch, origin, token, key, query, method):
    """The signer's headers (its own SigV4, its signing key kept for the day) are the ones botocore's
    S3SigV4Auth gives the same request at the same time: the same Authorization, to the signature."""
    import botocore.auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from tasks.storage.s3get import Signer

    now = dt.datetime(2026, 12, 6, 13, 5, 9)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: now)
    credentials = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    signer = Signer(origin, "/lake/", "eu-central-1", credentials, True)
    for _ in range(2):  # the second with the signing key kept
        path, headers = signer.signed(key, query, method)
        request = AWSRequest(
            method=method, url=origin + path, headers={"X-Amz-Content-SHA256": headers["x-amz-content-sha256"]}
        )
        botocore.auth.S3SigV4Auth(credentials, "s3", "eu-central-1").add_auth(request)
        assert headers["Authorization"] == request.headers["Authorization"]
        assert headers["x-amz-date"] == request.headers["X-Amz-Date"]
        assert headers.get("x-amz-security-token") == request.headers.get("X-Amz-Security-Token")
