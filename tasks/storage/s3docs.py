"""What a bucket data root holds besides partitions: documents every host shares (the store registry,
compare-and-swap), this host's state folder for it, a check that it answers, and the bucket as a tree of
files (:class:`S3Root`, for previews)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.storage.files import parquet_bytes
from tasks.storage.s3 import Bucket, Obj, PreconditionFailed, StoreError
from tasks.storage.s3lease import Lease

if TYPE_CHECKING:
    import pyarrow as pa


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


class S3Records:
    """A bucket store's records beside its partitions: failure records (with the rejected rows of a build
    that failed on them) and the dataset's manifest summaries (part of
    :class:`tasks.storage.s3store.S3PartitionStore`, whose bucket, names and listings they use)."""

    def failure_id(self, date: dt.date | None) -> str:
        return f"_state/failures/{self.record_name(date)}"

    def failed_rejects_path(self, date: dt.date | None) -> str:
        return f"{self.data_root}/{self.failure_id(date)[: -len('.json')]}.rejected.parquet"

    def read_summaries(self) -> bytes | None:
        """This dataset's manifest summaries, shared by every host (``_state/summaries/<dataset>.json``)."""
        try:
            return self.bucket.read(self._summaries_rel())
        except FileNotFoundError:
            return None

    def write_summaries(self, data: bytes) -> None:
        self.bucket.put(self._summaries_rel(), data)  # a cache keyed by ETags: the last writer wins, nothing is wrong

    def _summaries_rel(self) -> str:
        return (
            f"_state/summaries/{self.dataset}/{self.sub}.json" if self.sub else f"_state/summaries/{self.dataset}.json"
        )

    def read_failure(self, date: dt.date | None) -> dict | None:
        try:
            return json.loads(self.bucket.read(self.failure_id(date)))
        except FileNotFoundError:
            return None

    def failure_records(self) -> set[str]:
        return set(self._listing("_state/failures/"))

    def record_failure(self, date: dt.date | None, record: dict) -> None:
        rel = self.failure_id(date)
        self.bucket.put(rel, json.dumps(record, indent=1, default=str).encode())
        self._known(rel, Obj(0, "", 0))

    def clear_failure(self, date: dt.date | None) -> None:
        """Remove the failure record and its rejected rows, if this pass's listing has them."""
        records = self._listing("_state/failures/")
        for rel in (self.failure_id(date), self.failed_rejects_path(date)[len(self.data_root) + 1 :]):
            if rel in records:
                self.bucket.delete(rel)
                self._known(rel, None)

    def write_failed_rejects(self, date: dt.date | None, rejected: pa.Table) -> str:
        rel = self.failed_rejects_path(date)[len(self.data_root) + 1 :]
        self.bucket.put(rel, parquet_bytes(rejected))
        self._known(rel, Obj(0, "", 0))
        return f"{self.data_root}/{rel}"
