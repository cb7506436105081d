"""A bucket data root's check (does it answer, does it honour conditions) and this host's state for it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tasks.storage import s3get
from tasks.storage.s3 import Bucket, StoreError


def ask_at_once(uris: list[str]) -> None:
    """Ask the buckets of ``uris`` at once whether they answer; :func:`check` asks one that did not again. The
    signers are made in this thread: a thread must not import while ``tasks`` is being imported."""
    buckets = list({(bucket.endpoint, bucket.bucket): bucket for bucket in map(Bucket, uris)}.values())
    for bucket in buckets:
        s3get.warm(bucket.signer)  # the signer made in this thread
    with ThreadPoolExecutor(len(buckets), thread_name_prefix="s3-check") as pool:
        for asked in [pool.submit(bucket.check, quick=True) for bucket in buckets]:
            asked.exception()  # an error is the later check's to say


def check(uri: str, fence: bool = False) -> str | None:
    """None when the bucket answers (and, with ``fence``, honours conditional writes); else what the store said."""
    from tasks.storage.s3fence import ensure

    try:
        bucket = Bucket(uri)
        s3get.warm(bucket.signer)
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
