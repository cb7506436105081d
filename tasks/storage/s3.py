"""An S3-compatible object store (AWS S3, radosgw, MinIO), its client made by tasks/storage/s3client.py: a
:class:`Bucket` is ``s3://BUCKET/PREFIX``, keys relative to the prefix; every write one ``PutObject``,
conditional where it must be; errors name endpoint, bucket, key and the store's code."""

from __future__ import annotations

import datetime as dt
import email.utils
import os
import time
from dataclasses import dataclass

from botocore.exceptions import BotoCoreError, ClientError, ConnectTimeoutError, ReadTimeoutError

from tasks.storage import s3client, s3get, s3gone
from tasks.storage.s3errors import PreconditionFailed, StoreError, StoreNotAnswering, clock_skew, precondition_failed

SCHEME = "s3://"


@dataclass(frozen=True)
class Obj:
    """What a listing says of one object."""

    size: int
    etag: str  # without quotes
    mtime_ns: int


def split_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> (``bucket``, ``some/prefix/``); the prefix may be empty."""
    rest = uri[len(SCHEME) :]
    bucket, _, prefix = rest.partition("/")
    prefix = prefix.strip("/")
    if not bucket or any(part in (".", "..") for part in prefix.split("/") if prefix):
        raise ValueError(f"{uri!r} is not s3://BUCKET/PREFIX")
    return bucket, f"{prefix}/" if prefix else ""


_answered: set[tuple] = set()  # buckets that answered Bucket.check in this process
_quoted_if_match: dict[str, bool] = {}  # endpoint -> the server compares If-Match with the quoted ETag


def _no_such_key(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound")


def _etag(value: str | None) -> str:
    return (value or "").strip('"')


class Bucket:
    """``s3://BUCKET/PREFIX`` and the requests Daybreak makes of it, keys relative to the prefix."""

    def __init__(self, uri: str, endpoint: str | None = None, region: str | None = None):
        self.uri = uri.rstrip("/")
        self.bucket, self.prefix = split_uri(uri)
        if endpoint is None or region is None:
            from tasks import settings

            configured = settings.s3()
            endpoint = (configured.endpoint_url or None) if endpoint is None else endpoint
            region = configured.region if region is None else region
        self.endpoint, self.region = endpoint, region
        self.store = endpoint or f"AWS bucket {self.bucket}"  # what is given up when it does not answer (s3gone)

    @property
    def client(self):
        return s3client.client(self.endpoint, self.region)

    @property
    def signer(self) -> s3get.Signer:
        """This process's signer of GETs of the bucket outside botocore (:mod:`tasks.storage.s3get`)."""
        return s3client.signer(self.endpoint, self.region, self.bucket)

    def describe(self, rel: str = "") -> str:
        return f"s3://{self.bucket}/{self.prefix}{rel}"

    def _where(self) -> str:
        return f"endpoint {self.endpoint or 'AWS'}, bucket {self.bucket}"

    def store_error(self, exc: Exception, action: str, rel: str = "") -> StoreError:
        """One line: what was asked, of which key, the endpoint, the bucket and the store's error code. A store
        that did not answer within its timeout, past the retries, is given up for the run (:meth:`_asking`)."""
        key = f" {self.describe(rel)}" if rel else ""
        if isinstance(exc, s3gone.GivenUp):
            return s3gone.refusal(self.store, self._where(), f"{action}{key}") or StoreError(str(exc), "NoAnswer")
        if isinstance(exc, ReadTimeoutError | ConnectTimeoutError | s3get.NoAnswer):
            seconds = getattr(exc, "seconds", None) or (
                s3get.CONNECT_S if isinstance(exc, ConnectTimeoutError) else self.client.meta.config.read_timeout
            )
            return s3gone.not_answered(self.store, self._where(), f"{action}{key}", type(exc).__name__, seconds)
        if isinstance(exc, ClientError):
            error = exc.response.get("Error", {})
            code = str(error.get("Code") or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "?"))
            why = f"{code}: {error.get('Message') or code}"
            if code == "RequestTimeTooSkewed":
                skew, side = clock_skew(exc)
                return StoreError(f"object store: {skew} ({side}{self._where()}; {code}): fix the clock (NTP)", code)
        else:
            code = type(exc).__name__
            why = f"{code}: {exc}"
        return StoreError(f"object store: {action}{key} failed ({self._where()}): {why}", code, self._where())

    def _asking(self, action: str, rel: str = "") -> None:
        """``StoreNotAnswering`` at once when this run gave up on the store (in any of its processes)."""
        refused = s3gone.refusal(self.store, self._where(), f"{action} {self.describe(rel)}" if rel else action)
        if refused is not None:
            raise refused

    # -- reading ---------------------------------------------------------------------------------
    def check(self, quick: bool = False) -> None:
        """A request to the bucket, once per process: :class:`StoreError` if it fails. ``quick``: one HEAD, and
        nothing more when it fails (a later check says why)."""
        answered = (os.getpid(), self.endpoint, self.region, self.bucket, os.environ.get("AWS_ACCESS_KEY_ID"))
        if answered in _answered:
            return
        try:
            self._asking("HEAD bucket")
            answers = s3get.answers(self.signer)
        except (s3get.NoAnswer, StoreNotAnswering) as exc:
            self.store_error(exc, "HEAD bucket")  # the store given up, quick or not (if this request went unanswered)
            if quick:
                return
            raise s3gone.at_start(self._where(), exc.seconds) from None
        if not answers:
            if quick:
                return
            self._check()  # through botocore: what went wrong, said in one line
        _answered.add(answered)

    def _check(self) -> None:
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except (ClientError, BotoCoreError) as exc:
            error = self.store_error(exc, "HEAD bucket")
            if error.code == "403":  # a HEAD's answer has no body: a LIST says why (a clock, the credentials)
                try:
                    self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.prefix, MaxKeys=1)
                except (ClientError, BotoCoreError) as listed:
                    error = self.store_error(listed, "LIST")
            if error.code == "NoCredentialsError":  # botocore found none: nothing was sent
                missing = (
                    f"object store: no credentials for bucket {self.bucket} ({self._where()}): set "
                    "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, ~/.aws/credentials or an instance role"
                )
                error = StoreError(missing, error.code)
            elif error.code in ("404", "NoSuchBucket"):
                missing = f"object store: bucket {self.bucket} does not exist ({self._where()})"
                error = StoreError(missing, "NoSuchBucket")
            elif error.code in CREDENTIAL_CODES:
                refused = (
                    f"object store: access to bucket {self.bucket} refused ({self._where()}): {error.code}: the "
                    "credentials of the AWS chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, ~/.aws/credentials) "
                    "are wrong or not allowed on this bucket"
                )
                error = StoreError(refused, error.code)
            raise error from None

    def _pages(self, rel_prefix: str, delimiter: str | None = None) -> list[tuple[list[tuple[str, Obj]], list[str]]]:
        """Every page of the listing under ``rel_prefix``: ([(key, Obj)], [common prefixes]), by :mod:`s3get`,
        else by botocore's paginator."""
        self._asking("LIST", rel_prefix)
        pages, token = [], None
        try:
            while (page := s3get.list_page(self.signer, self.prefix + rel_prefix, token, delimiter)) is not None:
                pages.append(([(key, Obj(size, etag, when)) for key, size, etag, when in page[0]], page[2]))
                if (token := page[1]) is None:
                    return pages
        except s3get.NoAnswer as exc:
            raise self.store_error(exc, "LIST", rel_prefix) from None
        asked = {"Bucket": self.bucket, "Prefix": self.prefix + rel_prefix}
        if delimiter:
            asked["Delimiter"] = delimiter
        try:
            return [
                (
                    [
                        (i["Key"], Obj(i["Size"], _etag(i.get("ETag")), s3get.ns_of(i["LastModified"])))
                        for i in page.get("Contents", [])
                    ],
                    [p["Prefix"] for p in page.get("CommonPrefixes", ())],
                )
                for page in self.client.get_paginator("list_objects_v2").paginate(**asked)
            ]
        except (ClientError, BotoCoreError) as exc:
            raise self.store_error(exc, "LIST", rel_prefix) from None

    def list(self, rel_prefix: str = "") -> dict[str, Obj]:
        """Every object under ``rel_prefix`` (relative keys)."""
        start = len(self.prefix)
        return {key[start:]: obj for items, _ in self._pages(rel_prefix) for key, obj in items}

    def children(self, rel_prefix: str) -> tuple[list[str], list[str]]:
        """(folders, objects) one level below ``rel_prefix``: a ``/``-delimited listing, names without it."""
        start, pages = len(self.prefix + rel_prefix), self._pages(rel_prefix, "/")
        folders = [prefix[start:].rstrip("/") for _, prefixes in pages for prefix in prefixes]
        return folders, [key[start:] for items, _ in pages for key, _ in items]

    def any_key(self) -> bool:
        """Whether any object is under the prefix: one listing of at most one key."""
        self._asking("LIST")
        try:
            return bool(self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.prefix, MaxKeys=1).get("Contents"))
        except (ClientError, BotoCoreError) as exc:
            raise self.store_error(exc, "LIST") from None

    def folders(self, rel_prefix: str) -> list[str]:
        """Every name one level below ``rel_prefix``, folders and objects."""
        folders, objects = self.children(rel_prefix)
        return folders + objects

    def head(self, rel: str) -> Obj | None:
        self._asking("HEAD", rel)
        try:
            got = self.client.head_object(Bucket=self.bucket, Key=self.prefix + rel)
        except ClientError as exc:
            if _no_such_key(exc):
                return None
            raise self.store_error(exc, "HEAD", rel) from None
        except BotoCoreError as exc:
            raise self.store_error(exc, "HEAD", rel) from None
        return Obj(got["ContentLength"], _etag(got.get("ETag")), s3get.ns_of(got["LastModified"]))

    def get(self, rel: str) -> tuple[bytes, Obj]:
        """The object's bytes and what they are (ETag, size, time); FileNotFoundError when there is none."""
        self._asking("GET", rel)
        try:
            fast = s3get.get(self.signer, self.prefix + rel)
        except FileNotFoundError:
            raise FileNotFoundError(self.describe(rel)) from None
        except s3get.NoAnswer as exc:
            raise self.store_error(exc, "GET", rel) from None
        if fast is not None:
            return fast[0], Obj(len(fast[0]), fast[1], fast[2])
        data, got = self._get_object(rel)
        return data, Obj(len(data), _etag(got.get("ETag")), s3get.ns_of(got["LastModified"]))

    def _get_object(self, rel: str) -> tuple[bytes, dict]:
        """(the body, botocore's answer) of a GetObject; FileNotFoundError when there is no such key."""
        self._asking("GET", rel)
        try:
            got = self.client.get_object(Bucket=self.bucket, Key=self.prefix + rel)
            return got["Body"].read(), got
        except ClientError as exc:
            if _no_such_key(exc):
                raise FileNotFoundError(self.describe(rel)) from None
            raise self.store_error(exc, "GET", rel) from None
        except BotoCoreError as exc:
            raise self.store_error(exc, "GET", rel) from None

    def read(self, rel: str) -> bytes:
        return self.get(rel)[0]

    def get_with_date(self, rel: str) -> tuple[bytes, Obj, float]:
        """:meth:`get`, and the store's own time of the answer (its ``Date``, epoch seconds), for a lease's age."""
        data, got = self._get_object(rel)
        date = got.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
        now = email.utils.parsedate_to_datetime(date).timestamp() if date else dt.datetime.now(dt.UTC).timestamp()
        return data, Obj(len(data), _etag(got.get("ETag")), s3get.ns_of(got["LastModified"])), now

    # -- writing ---------------------------------------------------------------------------------
    def put(self, rel: str, data: bytes, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        """One PutObject of ``data``; its ETag. :class:`PreconditionFailed` when a condition fails. ``If-Match``
        is sent bare (radosgw), then quoted (AWS) on a 412 while the key still has that ETag."""
        self._asking("PUT", rel)
        if if_none_match or if_match is not None:
            from tasks.storage.s3fence import ensure

            ensure(self)
        args = {"Bucket": self.bucket, "Key": self.prefix + rel, "Body": data}
        if if_none_match:
            args["IfNoneMatch"] = "*"
        if if_match is not None:
            quoted = _quoted_if_match.get(self.endpoint or "", False)
            args["IfMatch"] = f'"{if_match}"' if quoted else if_match
        try:
            try:
                return _etag(self._put_object(args)["ETag"])
            except ClientError as exc:
                if not precondition_failed(exc):
                    raise
                if if_match is not None and not _quoted_if_match.get(self.endpoint or "") and self._is(rel, if_match):
                    _quoted_if_match[self.endpoint or ""] = True  # the server compares quoted ETags
                    return _etag(self._put_object({**args, "IfMatch": f'"{if_match}"'})["ETag"])
                raise
        except ClientError as exc:
            # If-Match on a key deleted since: 404, not 412, but the condition failed all the same
            gone = if_match is not None and exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404")
            if precondition_failed(exc) or gone:
                raise PreconditionFailed(f"{self.describe(rel)} changed (another writer)") from None
            raise self.store_error(exc, "PUT", rel) from None
        except BotoCoreError as exc:
            raise self.store_error(exc, "PUT", rel) from None

    def _put_object(self, args: dict) -> dict:
        """PutObject, sent again while Amazon S3 answers 409 ConditionalRequestConflict (botocore does not retry)."""
        for attempt in range(4):
            try:
                return self.client.put_object(**args)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ConditionalRequestConflict":
                    raise
            time.sleep(0.05 * 2**attempt)
        return self.client.put_object(**args)

    def _is(self, rel: str, etag: str) -> bool:
        found = self.head(rel)
        return found is not None and found.etag == etag

    def delete(self, rel: str) -> None:
        """Remove a key (never part of a commit: failure records, leases released, swept previews)."""
        self._asking("DELETE", rel)
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self.prefix + rel)
        except (ClientError, BotoCoreError) as exc:
            raise self.store_error(exc, "DELETE", rel) from None


CREDENTIAL_CODES = ("403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken")
