"""A bucket data root's check (does it answer, does it honour conditional writes) and this host's state
folder for it."""

from __future__ import annotations

from pathlib import Path

from tasks.storage.s3 import Bucket, StoreError, check_at_once


def ask_at_once(uris: list[str]) -> None:
    """Ask the buckets of ``uris`` at once (:func:`check`, then, finds each one answered)."""
    check_at_once([Bucket(uri) for uri in uris])


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
