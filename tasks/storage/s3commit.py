"""How a partition is committed to a bucket: one PUT per object, conditional on what the key held when the
build started, the manifest last (docs/scale-out.md, "How a partition is committed in a bucket")."""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait

from tasks.storage.files import parquet_bytes
from tasks.storage.layout import PartitionWriteError, kept_note, listed_names, parse_manifest
from tasks.storage.s3 import Obj, PreconditionFailed, StoreError
from tasks.storage.tempnames import is_temp_name

logger = logging.getLogger("luigi-interface")


class OtherWriterCommitted(RuntimeError):
    """Another writer committed the partition since this build started; the run counts it as superseded."""

    superseded = True


class S3Commit:
    """The objects of one commit, each PUT conditional on ``base`` (``{key: ETag}`` as the build found them)."""

    def __init__(self, backend, label: str, base: dict[str, str]):
        self.backend, self.label, self.base, self.done = backend, label, base, 0
        self._lock = threading.Lock()

    def put(self, key: str, content, label: str = "", manifest: dict | None = None) -> dict:
        """Put ``content``; its size, ETag and sha256."""
        data = content if isinstance(content, bytes) else parquet_bytes(content)
        etag = self._put(key, data, manifest)
        return {"size": len(data), "etag": etag, "sha256": hashlib.sha256(data).hexdigest()}

    def put_all(self, named: list) -> list[dict]:
        """:meth:`put` of each (key, content, label) at once; the first error raised once all are done."""
        if len(named) < 2:
            return [self.put(key, content, label) for key, content, label in named]
        with ThreadPoolExecutor(len(named), thread_name_prefix="s3-commit") as pool:
            futures = [pool.submit(self.put, key, content, label) for key, content, label in named]
            wait(futures)
        return [f.result() for f in futures]

    def copy(self, key: str, source, label: str = "", manifest: dict | None = None) -> None:
        """Copy ``source``'s object ``key`` byte for byte (its ETag, an MD5, stays what a manifest recorded)."""
        self._put(key, source.read(key), manifest)

    def clear(self, key: str, empty: Callable) -> None:
        """The old quarantine ``key``, if any, replaced by ``empty()`` (no delete is part of a commit)."""
        if key in self.base:
            self._put(key, parquet_bytes(empty()), None)

    def _put(self, key: str, data: bytes, manifest: dict | None) -> str:
        backend, etag = self.backend, self.base.get(key)
        try:
            new = (
                backend.bucket.put(key, data, if_match=etag)
                if etag
                else backend.bucket.put(key, data, if_none_match=True)
            )
        except PreconditionFailed:
            raise OtherWriterCommitted(
                f"another writer committed {self.label} since this build started ({backend.bucket.describe(key)} "
                "changed); nothing more is written by this run, the partition is the other writer's"
            ) from None
        obj = Obj(len(data), new, time.time_ns())
        with self._lock:  # put_all's threads
            self.done += 1
            backend.known(key, obj)
            if manifest is not None:
                backend.manifests[key] = (("etag", obj.etag, obj.size), parse_manifest(data))
        return new


def commit(backend, where: str, label: str, base: dict[str, str], fill: Callable) -> dict:
    """Put what ``fill(commit)`` hands over; what ``fill`` returned (the manifest)."""
    objects = S3Commit(backend, label, base)
    try:
        return fill(objects)
    except StoreError as exc:
        raise PartitionWriteError(
            f"{where}: could not write the partition: {exc}. {kept_note('objects' if objects.done else None)}"
        ) from None


def drop_strays(backend, folder: str, listed: dict, manifest: dict) -> None:
    """Delete the keys of ``listed`` under ``folder`` that the committed manifest does not list (a failure warns)."""
    keep = {f"{folder}/{name}" for name in listed_names(manifest)}
    bucket, uri = backend.bucket, backend.uri(folder)
    for rel in sorted(listed):
        if not rel.startswith(f"{folder}/") or rel in keep or is_temp_name(rel.rsplit("/", 1)[-1]):
            continue
        try:
            bucket.delete(rel)
        except StoreError as exc:
            logger.warning(
                "could not delete %s, which the manifest of %s does not list (%s): the partition counts as "
                "stale until it is gone",
                bucket.describe(rel),
                uri,
                exc,
            )
            continue
        backend.known(rel, None)
        logger.info("deleted %s: the manifest of %s does not list it", bucket.describe(rel), uri)
