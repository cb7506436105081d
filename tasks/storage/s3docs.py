"""What a bucket data root holds besides partitions: documents every host shares (the store registry,
compare-and-swap), this host's state folder for it, a check that it answers, and the bucket as a tree of
files (:class:`S3Root`, for previews)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tasks.storage.s3 import Bucket, PreconditionFailed, StoreError
from tasks.storage.s3lease import Lease


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


class S3Root:
    """A bucket prefix as a tree of files (:class:`tasks.storage.roots.LocalRoot`'s interface)."""

    def __init__(self, uri: str):
        self.bucket = Bucket(uri)
        self.uri = uri.rstrip("/")

    def child(self, rel: str) -> S3Root:
        return S3Root(f"{self.uri}/{rel.strip('/')}")

    def exists(self, rel: str = "") -> bool:
        if rel and self.bucket.head(rel) is not None:
            return True
        return bool(self.bucket.list(f"{rel.rstrip('/')}/" if rel else ""))

    def read(self, rel: str) -> bytes:
        return self.bucket.read(rel)

    def write(self, rel: str, data: bytes) -> None:
        self.bucket.put(rel, data)

    def mkdir(self) -> None:
        """Nothing to make: a prefix exists once it holds an object."""

    def names(self) -> list[str]:
        return sorted(self.bucket.folders(""))

    def files(self, rel: str = "") -> dict[str, int]:
        prefix = f"{rel.rstrip('/')}/" if rel else ""
        return {key: obj.size for key, obj in self.bucket.list(prefix).items()}

    def remove(self, rel: str = "") -> None:
        prefix = f"{rel.rstrip('/')}/" if rel else ""
        if rel and self.bucket.head(rel) is not None:
            self.bucket.delete(rel)
        for key in self.bucket.list(prefix):
            self.bucket.delete(key)

    @contextmanager
    def exclusive(self, rel: str, what: str, wait_s: float | None = 0) -> Iterator[None]:
        from tasks import settings

        lease = Lease(self.bucket, rel, settings.s3().lease_seconds)
        lease.acquire(what, wait_s)
        try:
            with lease.renewing():
                yield
        finally:
            lease.release()
