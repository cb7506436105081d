"""Whether a store honours conditional writes, asked by a probe under ``_state/probes/`` before anything is
written to it (docs/scale-out.md, "A store must honour conditional writes")."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid

from botocore.exceptions import BotoCoreError, ClientError

from tasks.storage import tempnames
from tasks.storage.s3errors import StoreError, precondition_failed

REMEMBER_S = 24 * 3600.0
RECORD = "conditional-writes.json"
WRONG_ETAG = '"00000000000000000000000000000000"'

_passed: set[tuple[str, str]] = set()  # (endpoint, bucket)
_lock = threading.Lock()


class CannotFence(StoreError):
    """The store ignores conditional writes: nothing may be written to it."""


def _key(bucket) -> tuple[str, str]:
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


def ensure(bucket) -> None:
    """Return when ``bucket``'s store honours both conditions; :class:`CannotFence` when it does not."""
    key = _key(bucket)
    with _lock:
        if key in _passed:
            return
        if not _remembered(key):
            probe(bucket)
            _remember(key)
        _passed.add(key)


def probe(bucket) -> None:
    """Ask the store; :class:`CannotFence` naming endpoint, bucket and the condition it ignored."""
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
