"""GETs and listings without botocore's per-request machinery: a raw zone's many small objects and folders.

botocore spends about 0.9 ms of Python (the GIL held) on each request: building, resolving the endpoint, signing,
and parsing. A build reading a hundred raw objects a partition spends that alongside its own work on two cores.
Here the URL is signed by botocore itself (a presigned GET: same credentials, endpoint and addressing as the
client) and sent on a plain ``http.client`` connection kept for the next GET: about half the CPU.

Only a plain answer is taken here: a 200 with its body, read whole, or a 404 for no such key. Anything else (an
error status, a connection that fails, a proxy in the environment, a client whose TLS settings cannot be read)
returns None, and the caller makes the request through botocore, with its retries and its errors.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import http.client
import os
import ssl
import threading
import urllib.request
from urllib.parse import unquote, urlsplit
from xml.etree import ElementTree

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


def _send(client, signed: str) -> tuple[int, bytes, http.client.HTTPResponse] | None:
    """(status, body, response) of a presigned GET, on a kept connection; None where botocore must send it."""
    url = urlsplit(signed)
    verify = _verify(client) if url.scheme == "https" else True
    if verify is None or url.scheme not in ("http", "https") or urllib.request.getproxies().get(url.scheme):
        return None
    where = (os.getpid(), url.scheme, url.hostname, url.port)
    conn = _connection(url.scheme, url.hostname or "", url.port, verify)
    try:
        conn.request("GET", f"{url.path}?{url.query}")
        response = conn.getresponse()
        body = response.read()
    except (OSError, http.client.HTTPException):
        conn.close()  # a connection the server closed, or a store that does not answer: botocore's turn
        return None
    if response.will_close:
        conn.close()
    else:
        _keep(where, conn)
    return response.status, body, response


def get(client, bucket: str, key: str) -> tuple[bytes, str, int] | None:
    """(body, ETag without quotes, Last-Modified in ns) of ``bucket``/``key``; FileNotFoundError when the store
    says there is no such key; None where the request must go through botocore instead (the module's docstring)."""
    answer = _send(client, client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key}))
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


_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def list_page(client, bucket: str, prefix: str, token: str | None = None):
    """One page of ``ListObjectsV2`` under ``prefix``: ([(key, size, ETag, LastModified in ns)], the next page's
    token or None), or None where the request must go through botocore instead (as :func:`get`)."""
    params = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": 1000}
    if token is not None:
        params["ContinuationToken"] = token
    answer = _send(client, client.generate_presigned_url("list_objects_v2", Params=params))
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
        when = dt.datetime.fromisoformat(item.findtext(f"{_NS}LastModified") or "")
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
