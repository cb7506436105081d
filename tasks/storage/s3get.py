"""GETs, HEADs and listings without botocore's per-request machinery (docs/performance.md, "S3 requests"):
signed with SigV4 as botocore signs them, sent on kept connections. Only a plain 200, or a 404 for no such
key, is taken here; anything else returns None, and the caller asks botocore, but a store that does not
answer within the timeout, twice (a kept connection, then a new one): :class:`NoAnswer`."""

from __future__ import annotations

import datetime as dt
import email.utils
import hashlib
import hmac
import http.client
import os
import ssl
import threading
import urllib.request
from urllib.parse import quote, unquote_plus, urlsplit
from xml.etree import ElementTree

import botocore.auth
from botocore.auth import EMPTY_SHA256_HASH
from botocore.parsers import DEFAULT_TIMESTAMP_PARSER

from tasks.storage import s3gone

_lock = threading.Lock()


def _after_fork() -> None:
    """A forked process starts with a lock of its own (a warming thread of the parent may have held this one)."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
_idle: dict[tuple, list[http.client.HTTPConnection]] = {}  # (pid, scheme, host, port) -> connections not in use
CONNECT_S = 5.0  # seconds to connect, as botocore's connect_timeout (tasks/storage/s3client.py)
_IDLE_MAX = 32  # as many as the client's pool (tasks/storage/s3client.py)
_contexts: dict[object, ssl.SSLContext] = {}
ALGORITHM = "AWS4-HMAC-SHA256"


def _verify(client) -> object:
    """What the client verifies TLS with (True, a CA bundle's path, or False); None if it cannot be told."""
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


class NoAnswer(TimeoutError):
    """The store did not answer a request within ``seconds``, on a kept connection nor on a new one."""

    def __init__(self, message: str, seconds: float):
        super().__init__(message)
        self.seconds = seconds


def _connection(scheme: str, host: str, port: int | None, verify: object, timeout: float, fresh: bool = False):
    """(a connection to the store, whether it was kept from an earlier request); ``timeout``: of each read."""
    with _lock:
        idle = _idle.get((os.getpid(), scheme, host, port))
        if idle and not fresh:
            return idle.pop(), True
    if scheme == "https":
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=_context(verify)), False
    return http.client.HTTPConnection(host, port, timeout=timeout), False


def _keep(key: tuple, conn: http.client.HTTPConnection) -> None:
    with _lock:
        idle = _idle.setdefault(key, [])
        if len(idle) < _IDLE_MAX:
            idle.append(conn)
            return
    conn.close()


WARM = 16  # connections opened as a command starts: a range's folders are listed 16 at once
_warmed: set[tuple] = set()


def warm(signer: Signer, count: int = WARM) -> None:
    """Open ``count`` connections to the store on threads of their own (once a process and endpoint), kept for
    the requests to come; one that cannot be made is let go (the requests say why)."""
    where = (os.getpid(), signer.scheme, signer.host, signer.port)
    with _lock:
        if where in _warmed or not signer.usable:
            return
        _warmed.add(where)

    def connect() -> None:
        conn, _ = _connection(signer.scheme, signer.host, signer.port, signer.verify, signer.timeout, fresh=True)
        conn.timeout = CONNECT_S  # nothing waits for it
        try:
            conn.connect()
            conn.sock.settimeout(signer.timeout)
        except OSError:
            conn.close()
            return
        conn.timeout = signer.timeout
        _keep(where, conn)

    for _ in range(count):
        threading.Thread(target=connect, name="s3-warm", daemon=True).start()


class Signer:
    """Requests of one bucket signed with SigV4 with the client's credentials; ``origin`` and ``base``: where its
    keys are (``http://host:port`` and ``/bucket/`` path-style, or ``https://bucket.s3...`` and ``/``);
    ``timeout``: seconds the store may take for each read of an answer (``[s3] timeout``)."""

    def __init__(self, origin: str, base: str, region: str, credentials, verify: object, timeout: float = 60.0):
        self.origin, self.base, self.region, self.credentials, self.verify = origin, base, region, credentials, verify
        self.timeout = timeout
        self.store: str | None = None  # its endpoint, as tasks/storage/s3gone.py names a store it gave up
        url = urlsplit(origin)
        self.scheme, self.host, self.port = url.scheme, url.hostname or "", url.port
        default = {"http": 80, "https": 443}.get(url.scheme)
        self.netloc = self.host if url.port in (None, default) else f"{self.host}:{url.port}"
        self._signing: tuple = (None, None, b"")
        self.usable = (
            credentials is not None
            and self.scheme in ("http", "https")
            and verify is not None
            and not urllib.request.getproxies().get(self.scheme)
        )

    @classmethod
    def of_client(cls, client, credentials, bucket: str, timeout: float = 60.0) -> Signer:
        """A signer whose URLs are the client's own (read from one URL it presigned); unusable without credentials."""
        if credentials is None:
            return cls(f"https://{bucket}.s3.amazonaws.com", "/", client.meta.region_name, None, True, timeout)
        template = urlsplit(client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "k"}))
        verify = _verify(client) if template.scheme == "https" else True
        origin = f"{template.scheme}://{template.netloc}"
        signer = cls(origin, template.path[:-1], client.meta.region_name, credentials, verify, timeout)
        signer.usable = signer.usable and template.path.endswith("/k")
        return signer

    def signed(self, key: str | None, query: dict[str, str] | None = None, method: str = "GET"):
        """(path and query, headers) of a request with no body for ``key`` (None: the bucket), signed as
        botocore's ``S3SigV4Auth`` signs it."""
        path = self.base + quote(key, safe="/~") if key is not None else self.base.rstrip("/") or "/"
        encoded = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted((query or {}).items()))
        credentials = self.credentials.get_frozen_credentials()
        when = botocore.auth.get_current_datetime().strftime(  # botocore's clock, as it signs
            "%Y%m%dT%H%M%SZ"
        )
        scope = f"{when[:8]}/{self.region}/s3/aws4_request"
        headers = {"host": self.netloc, "x-amz-content-sha256": EMPTY_SHA256_HASH, "x-amz-date": when}
        if credentials.token:
            headers["x-amz-security-token"] = credentials.token
        names = ";".join(sorted(headers))
        canonical = "\n".join(
            [
                method,
                path,
                encoded,
                *(f"{n}:{headers[n].strip()}" for n in sorted(headers)),
                "",
                names,
                EMPTY_SHA256_HASH,
            ]
        )
        digest = hashlib.sha256(canonical.encode()).hexdigest()
        signature = hmac.new(
            self._key(credentials.secret_key, when[:8]),
            f"{ALGORITHM}\n{when}\n{scope}\n{digest}".encode(),
            hashlib.sha256,
        ).hexdigest()
        headers["Authorization"] = (
            f"{ALGORITHM} Credential={credentials.access_key}/{scope}, SignedHeaders={names}, Signature={signature}"
        )
        return f"{path}?{encoded}" if encoded else path, headers

    def _key(self, secret: str, day: str) -> bytes:
        """The SigV4 signing key of ``day`` (four HMACs), kept while the day and the secret are the same."""
        if self._signing[:2] != (secret, day):
            key = f"AWS4{secret}".encode()
            for part in (day, self.region, "s3", "aws4_request"):
                key = hmac.new(key, part.encode(), hashlib.sha256).digest()
            self._signing = (secret, day, key)
        return self._signing[2]

    def send(self, key: str | None, query: dict[str, str] | None = None, method: str = "GET"):
        """(status, body, response) of the signed request on a kept connection; None where botocore must send it;
        :class:`NoAnswer` when the store answers nothing within the timeout, on that connection nor a new one."""
        if not self.usable:
            return None
        where = (os.getpid(), self.scheme, self.host, self.port)
        path, headers = self.signed(key, query, method)
        for fresh in (False, True):
            conn, kept = _connection(self.scheme, self.host, self.port, self.verify, self.timeout, fresh)
            try:
                conn.request(method, path, headers=headers)
                response = conn.getresponse()
                body = response.read()
                break
            except TimeoutError as exc:
                conn.close()  # nothing within the timeout: once more on a new connection, then the store is gone
                if fresh or (self.store is not None and s3gone.known(self.store) is not None):
                    raise NoAnswer(
                        f"{method} {path.split('?')[0]}: no answer within {self.timeout:g} s", self.timeout
                    ) from exc
            except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
                conn.close()  # a kept connection the store has closed since: once more on a new one
                if not kept:
                    return None
            except (OSError, http.client.HTTPException):
                conn.close()  # a store that does not answer, or not as HTTP says: botocore's turn
                return None
        else:
            return None
        if response.will_close:
            conn.close()
        else:
            _keep(where, conn)
        if response.status in (301, 307, 400, 403):  # another region, a signature refused: botocore knows
            self.usable = False
        return response.status, body, response


def answers(signer: Signer) -> bool:
    """Whether the bucket answers a HEAD; False also where botocore must ask (it says why)."""
    answer = signer.send(None, method="HEAD")
    return answer is not None and answer[0] == 200


def get(signer: Signer, key: str) -> tuple[bytes, str, int] | None:
    """(body, ETag without quotes, Last-Modified in ns) of ``key``; FileNotFoundError for no such key; None where
    botocore must ask."""
    answer = signer.send(key)
    if answer is None:
        return None
    status, body, response = answer
    if status == 404 and b"<Code>NoSuchKey</Code>" in body:
        raise FileNotFoundError(key)
    modified = response.getheader("Last-Modified")
    if status != 200 or modified is None:
        return None
    return body, (response.getheader("ETag") or "").strip('"'), ns_of(email.utils.parsedate_to_datetime(modified))


def ns_of(when: dt.datetime) -> int:
    """A store's time in nanoseconds, to the microsecond."""
    return int(when.timestamp() * 1_000_000) * 1000


def read_timestamp(value) -> dt.datetime:
    """A timestamp of a response as botocore's own parser gives it (an aware datetime), without dateutil."""
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


def list_page(signer: Signer, prefix: str, token: str | None = None, delimiter: str | None = None):
    """One page of ``ListObjectsV2`` under ``prefix``: ([(key, size, ETag, LastModified in ns)], the next page's
    token or None, [common prefixes]), or None where botocore must ask."""
    query = {"list-type": "2", "prefix": prefix, "max-keys": "1000", "encoding-type": "url"}
    if token is not None:
        query["continuation-token"] = token
    if delimiter is not None:
        query["delimiter"] = delimiter
    answer = signer.send(None, query)
    return None if answer is None or answer[0] != 200 else read_list_page(answer[1])


def read_list_page(body: bytes):
    """What :func:`list_page` returns, from a ``ListBucketResult``; None for anything else or a page lacking a field."""
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        return None
    ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""  # a store may leave it out
    if root.tag != f"{ns}ListBucketResult":
        return None
    encoded = root.findtext(f"{ns}EncodingType") == "url"
    items = []
    for item in root.iter(f"{ns}Contents"):
        key = item.findtext(f"{ns}Key")
        size, etag, modified = (item.findtext(f"{ns}{field}") for field in ("Size", "ETag", "LastModified"))
        if key is None or size is None or etag is None or modified is None:
            return None
        path = unquote_plus(key) if encoded else key
        items.append((path, int(size), etag.strip('"'), ns_of(read_timestamp(modified))))
    prefixes = [root_prefix.text or "" for root_prefix in root.iterfind(f"{ns}CommonPrefixes/{ns}Prefix")]
    more = (root.findtext(f"{ns}IsTruncated") or "").lower() == "true"
    token = root.findtext(f"{ns}NextContinuationToken") if more else None
    if more and not token:
        return None
    return items, token, [unquote_plus(p) if encoded else p for p in prefixes]
