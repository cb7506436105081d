"""GETs and listings without botocore's per-request machinery, for a raw zone's many small objects: the URL
is made as the client makes it, signed by botocore's SigV4 query signer, and sent on a kept ``http.client``
connection (docs/performance.md, "S3 requests"). Only a plain 200 or a 404 for no such key is taken here;
anything else returns None, and the caller asks botocore, with its retries and its errors."""

from __future__ import annotations

import datetime as dt
import email.utils
import http.client
import os
import ssl
import threading
import urllib.request
from urllib.parse import quote, unquote, urlsplit
from xml.etree import ElementTree

from botocore.auth import S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.parsers import DEFAULT_TIMESTAMP_PARSER

_lock = threading.Lock()
_idle: dict[tuple, list[http.client.HTTPConnection]] = {}  # (pid, scheme, host, port) -> connections not in use
_IDLE_MAX = 32  # as many as the client's pool (tasks/storage/s3.py)
_contexts: dict[object, ssl.SSLContext] = {}


def _verify(client) -> object:
    """What the client verifies TLS with (True, a CA bundle's path, or False), as botocore resolved it; None if
    it cannot be told (then no GET is made here)."""
    session = getattr(getattr(client, "_endpoint", None), "http_session", None)
    return getattr(session, "_verify", None)


def _context(verify: object) -> ssl.SSLContext:
    with _lock:
        if verify not in _contexts:
            if verify is False:
                context = ssl._create_unverified_context()  # noqa: S323 - as the client was told (verify=False)
            else:
                from botocore.httpsession import get_cert_path

                context = ssl.create_default_context(cafile=get_cert_path(verify))
            _contexts[verify] = context
        return _contexts[verify]


def _connection(scheme: str, host: str, port: int | None, verify: object) -> http.client.HTTPConnection:
    with _lock:
        idle = _idle.get((os.getpid(), scheme, host, port))
        if idle:
            return idle.pop()
    if scheme == "https":
        return http.client.HTTPSConnection(host, port, timeout=60, context=_context(verify))
    return http.client.HTTPConnection(host, port, timeout=60)


def _keep(key: tuple, conn: http.client.HTTPConnection) -> None:
    with _lock:
        idle = _idle.setdefault(key, [])
        if len(idle) < _IDLE_MAX:
            idle.append(conn)
            return
    conn.close()


class Signer:
    """Presigned GETs of one bucket: URLs made as the client makes them (its endpoint and addressing, read once
    from one URL it presigned), each signed by botocore's SigV4 query signer with the client's credentials,
    without resolving the endpoint again for each request."""

    def __init__(self, client, credentials, bucket: str):
        template = urlsplit(client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "k"}))
        self.credentials, self.region = credentials, client.meta.region_name
        self.scheme, self.host, self.port = template.scheme, template.hostname or "", template.port
        self.origin, self.base = f"{template.scheme}://{template.netloc}", template.path[:-1]  # "/bucket/" or "/"
        self.verify = _verify(client) if template.scheme == "https" else True
        self.usable = (
            credentials is not None
            and template.path.endswith("/k")
            and self.scheme in ("http", "https")
            and self.verify is not None
            and not urllib.request.getproxies().get(self.scheme)
        )

    def url(self, key: str | None, query: dict[str, str] | None = None) -> str:
        """The signed path and query of a GET of ``key``, or of the bucket itself (``key`` None: a listing)."""
        path = self.base + quote(key, safe="/~") if key is not None else self.base.rstrip("/") or "/"
        request = AWSRequest(method="GET", url=self.origin + path, params=query or {})
        S3SigV4QueryAuth(self.credentials, "s3", self.region, expires=900).add_auth(request)
        url = urlsplit(request.prepare().url)
        return f"{url.path}?{url.query}"

    def send(self, key: str | None, query: dict[str, str] | None = None):
        """(status, body, response) of the signed GET, on a kept connection; None where botocore must send it
        (and from then on, for this bucket, after an answer that says the URL was not the right one)."""
        if not self.usable:
            return None
        where = (os.getpid(), self.scheme, self.host, self.port)
        conn = _connection(self.scheme, self.host, self.port, self.verify)
        try:
            conn.request("GET", self.url(key, query))
            response = conn.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException):
            conn.close()  # a connection the server closed, or a store that does not answer: botocore's turn
            return None
        if response.will_close:
            conn.close()
        else:
            _keep(where, conn)
        if response.status in (301, 307, 400, 403):  # another region, a signature refused: botocore knows
            self.usable = False
        return response.status, body, response


def get(signer: Signer, key: str) -> tuple[bytes, str, int] | None:
    """(body, ETag without quotes, Last-Modified in ns) of ``key``; FileNotFoundError when the store says there
    is no such key; None where the request must go through botocore instead (the module's docstring)."""
    answer = signer.send(key)
    if answer is None:
        return None
    status, body, response = answer
    if status == 404 and b"<Code>NoSuchKey</Code>" in body:
        raise FileNotFoundError(key)
    modified = response.getheader("Last-Modified")
    if status != 200 or modified is None:
        return None
    when = email.utils.parsedate_to_datetime(modified)
    return body, (response.getheader("ETag") or "").strip('"'), int(when.timestamp() * 1_000_000) * 1000


def read_timestamp(value) -> dt.datetime:
    """A timestamp of a response, as botocore's own parser gives it (an aware datetime): ISO 8601 (listings)
    by ``datetime.fromisoformat``, an HTTP date (headers) by ``email.utils``, anything else by botocore's."""
    if isinstance(value, str):
        try:
            when = dt.datetime.fromisoformat(value)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)  # an HTTP date: a GET's Last-Modified
            except (TypeError, ValueError):
                return DEFAULT_TIMESTAMP_PARSER(value)
        return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)
    return DEFAULT_TIMESTAMP_PARSER(value)


_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def list_page(signer: Signer, prefix: str, token: str | None = None):
    """One page of ``ListObjectsV2`` under ``prefix``: ([(key, size, ETag, LastModified in ns)], the next page's
    token or None), or None where the request must go through botocore instead (as :func:`get`)."""
    query = {"list-type": "2", "prefix": prefix, "max-keys": "1000", "encoding-type": "url"}
    if token is not None:
        query["continuation-token"] = token
    answer = signer.send(None, query)
    if answer is None or answer[0] != 200:
        return None
    try:
        root = ElementTree.fromstring(answer[1])
    except ElementTree.ParseError:
        return None
    encoded = root.findtext(f"{_NS}EncodingType") == "url"
    items = []
    for item in root.iter(f"{_NS}Contents"):
        key = item.findtext(f"{_NS}Key") or ""
        when = read_timestamp(item.findtext(f"{_NS}LastModified") or "")
        items.append(
            (
                unquote(key) if encoded else key,
                int(item.findtext(f"{_NS}Size") or 0),
                (item.findtext(f"{_NS}ETag") or "").strip('"'),
                int(when.timestamp() * 1_000_000) * 1000,
            )
        )
    more = root.findtext(f"{_NS}IsTruncated") == "true"
    return items, (root.findtext(f"{_NS}NextContinuationToken") if more else None)
