"""What a bucket data root holds besides partitions: documents every host shares (the store registry,
compare-and-swap), this host's state folder for it, and a check that it answers."""

from __future__ import annotations

import json
from pathlib import Path

from tasks.storage.s3 import Bucket, PreconditionFailed, StoreError


def check(uri: str, fence: bool = False) -> str | None:
    """None when the bucket answers (and, with ``fence``, honours conditional writes: asked once per host,
    :mod:`tasks.storage.s3fence`); else what the store said (endpoint, bucket, error code)."""
    from tasks.storage.s3fence import ensure

    try:
        bucket = Bucket(uri)
        bucket.check()
        if fence:
            ensure(bucket)
    except StoreError as exc:
        return str(exc)
    return None


def state_dir(data_root: str) -> Path:
    """This host's state for a bucket data root: ``<cache_dir>/s3/<bucket>/<prefix>/_state``."""
    from tasks import settings

    bucket = Bucket(data_root)
    return settings.cache_dir() / "s3" / bucket.bucket / bucket.prefix / "_state"


def read_document(data_root: str, name: str) -> dict | None:
    try:
        return json.loads(Bucket(data_root).read(f"_state/{name}"))
    except FileNotFoundError:
        return None


def update_document(data_root: str, name: str, merge) -> dict:
    """Compare-and-swap: read the document and its ETag, merge, put on that ETag; on a lost race, again."""
    bucket, rel = Bucket(data_root), f"_state/{name}"
    while True:
        try:
            data, obj = bucket.get(rel)
            current, etag = json.loads(data), obj.etag
        except FileNotFoundError:
            current, etag = None, None
        doc = merge(current)
        try:
            bucket.put(
                rel, json.dumps(doc, indent=1, sort_keys=True).encode(), if_match=etag, if_none_match=etag is None
            )
            return doc
        except PreconditionFailed:
            continue
