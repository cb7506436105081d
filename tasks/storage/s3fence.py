"""Whether a store honours conditional writes, asked once before anything is written to it.

Every commit, lease and shared document in a bucket is a conditional PUT (``If-None-Match: *`` for a key
that must be new, ``If-Match`` for a key that must not have changed). A store that accepts such a PUT
whatever the key holds (S3 servers before 2024, moto 4) lets a frozen host overwrite a newer commit
without a word, so Daybreak refuses it. The probe, on a key of its own under ``_state/probes/``: a
put-if-absent (accepted), a second one (must fail with 412), a PUT with ``If-Match`` on a wrong ETag
(must fail with 412), then a delete. A store that ignores either condition is refused: a commit needs both
(``If-None-Match`` for a partition's new objects and its lease, ``If-Match`` for the objects it replaces).

The answer is remembered per endpoint and bucket: in this process, and on this host for
:data:`REMEMBER_S` in ``<cache_dir>/s3/conditional-writes.json`` (a store that passed; one that failed is
asked again by the next command, so a store upgraded in between is used at once).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid

from botocore.exceptions import BotoCoreError, ClientError

from tasks.storage import tempnames
from tasks.storage.s3 import Bucket, StoreError, precondition_failed

REMEMBER_S = 24 * 3600.0
RECORD = "conditional-writes.json"
WRONG_ETAG = '"00000000000000000000000000000000"'

_passed: set[tuple[str, str]] = set()  # (endpoint, bucket) that honour both conditions, in this process
_lock = threading.Lock()


class CannotFence(StoreError):
    """The store ignores conditional writes: nothing may be written to it."""


def _key(bucket: Bucket) -> tuple[str, str]:
    return (bucket.endpoint or "AWS", bucket.bucket)


def _record_path():
    from tasks import settings

    return settings.cache_dir() / "s3" / RECORD


def _remembered(key: tuple[str, str]) -> bool:
    try:
        record = json.loads(_record_path().read_text(encoding="utf-8"))
        checked = float(record[" ".join(key)])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return 0 <= time.time() - checked < REMEMBER_S


def _remember(key: tuple[str, str]) -> None:
    """Best effort: a host that cannot write its cache folder asks the store again next time."""
    from tasks.storage.files import atomic_write_text

    path = _record_path()
    try:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            record = record if isinstance(record, dict) else {}
        except (OSError, ValueError):
            record = {}
        record[" ".join(key)] = time.time()
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(record, indent=1, sort_keys=True))
    except OSError:
        pass


def ensure(bucket: Bucket) -> None:
    """Return when the store of ``bucket`` honours both conditions (asked at most once per process and,
    while :data:`REMEMBER_S` lasts, per host); :class:`CannotFence` when it does not, :class:`StoreError`
    when it cannot be asked."""
    key = _key(bucket)
    with _lock:
        if key in _passed:
            return
        if not _remembered(key):
            probe(bucket)
            _remember(key)
        _passed.add(key)


def probe(bucket: Bucket) -> None:
    """Ask the store (about 4 requests); :class:`CannotFence` naming the endpoint, the bucket and the
    condition it ignored."""
    rel = f"_state/probes/{tempnames.host()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    args = {"Bucket": bucket.bucket, "Key": bucket.prefix + rel}
    ignored = []
    try:
        bucket.client.put_object(**args, Body=b"1", IfNoneMatch="*")
        try:
            for condition, extra in (
                ("If-None-Match: * on an existing key", {"IfNoneMatch": "*"}),
                ("If-Match with a wrong ETag", {"IfMatch": WRONG_ETAG}),
            ):
                try:
                    bucket.client.put_object(**args, Body=b"2", **extra)
                    ignored.append(condition)
                except ClientError as exc:
                    if not precondition_failed(exc):
                        raise
        finally:
            try:
                bucket.client.delete_object(**args)
            except (ClientError, BotoCoreError):
                pass  # a stray probe object: harmless, under _state/
    except (ClientError, BotoCoreError) as exc:
        raise bucket.store_error(exc, "conditional-write probe PUT", rel) from None
    if ignored:
        raise CannotFence(
            f"the store at {bucket.endpoint or 'AWS'} (bucket {bucket.bucket}) ignores conditional writes "
            f"({' and '.join(ignored)} {'were' if len(ignored) > 1 else 'was'} accepted); Daybreak cannot fence "
            "writers on it: use a store that honours If-None-Match and If-Match (AWS S3, Ceph radosgw, MinIO)",
            "ConditionsIgnored",
        )
