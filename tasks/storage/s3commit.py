"""How a partition is committed to an S3-compatible bucket (:meth:`tasks.storage.s3backend.S3Backend.commit`;
``[daybreak] data_root = s3://BUCKET/PREFIX``, docs/scale-out.md).

The layout under the prefix is the local one, so pyarrow, DuckDB and Spark read it with the same globs.
A commit holds across hosts: every object of a partition is one conditional PUT, data first, the manifest
last (``If-None-Match: *`` for a key that did not exist when the build started, ``If-Match`` on the ETag
it had then); the manifest records every object's ETag and counts only while the listing still shows
them; a writer whose condition fails stops (:class:`OtherWriterCommitted`). No multipart upload and no
delete is part of a commit: the keys under a partition's folder that its manifest does not list are deleted
after it. A lease per partition (:class:`tasks.storage.s3backend.S3Backend`) keeps hosts from building it
twice; correctness rests on the conditional commit, not on the lease.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait

from tasks.storage.files import parquet_bytes
from tasks.storage.layout import PartitionWriteError, listed_names, parse_manifest
from tasks.storage.s3 import Obj, PreconditionFailed, StoreError
from tasks.storage.tempnames import is_temp_name

logger = logging.getLogger("luigi-interface")


class OtherWriterCommitted(RuntimeError):
    """A conditional write failed: another writer committed the partition since this build started. The run
    counts it as a partition another worker ran (exit 10: tasks/luigi_shortcuts/, SUPERSEDED)."""

    superseded = True


class S3Commit:
    """The objects of one commit, each written at once by a PUT conditional on the ETags the partition's
    objects had when the build started (``base``: ``{key: ETag}``)."""

    def __init__(self, backend, label: str, base: dict[str, str]):
        self.backend, self.label, self.base, self.done = backend, label, base, 0
        self._lock = threading.Lock()

    def put(self, key: str, content, label: str = "", manifest: dict | None = None) -> dict:
        """Put ``content`` (a table as Parquet, or bytes); what the manifest records of it (size, ETag, sha256)."""
        data = content if isinstance(content, bytes) else parquet_bytes(content)
        etag = self._put(key, data, manifest)
        return {"size": len(data), "etag": etag, "sha256": hashlib.sha256(data).hexdigest()}

    def put_all(self, named: list) -> list[dict]:
        """:meth:`put` of each (key, content, label), all at once (threads: each serialised and sent while the
        others are); the first error raised once all are done. The manifest, put after, is the commit."""
        if len(named) < 2:
            return [self.put(key, content, label) for key, content, label in named]
        with ThreadPoolExecutor(len(named), thread_name_prefix="s3-commit") as pool:
            futures = [pool.submit(self.put, key, content, label) for key, content, label in named]
            wait(futures)
        return [f.result() for f in futures]

    def copy(self, key: str, source, label: str = "", manifest: dict | None = None) -> None:
        """Copy ``source``'s object ``key`` (a preview's shadow, or production) byte for byte: an object's ETag
        is the MD5 of its bytes, so a manifest still describes it."""
        self._put(key, source.read(key), manifest)

    def clear(self, key: str, empty: Callable) -> None:
        """The partition has no object ``key`` any more (its old quarantine): replaced by ``empty()`` written
        as Parquet, when there is one (no delete is part of a commit)."""
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
            if manifest is not None:  # as a reader parses it
                backend.manifests[key] = (("etag", obj.etag, obj.size), parse_manifest(data))
        return new


def commit(backend, where: str, label: str, base: dict[str, str], fill: Callable) -> dict:
    """``fill(commit)`` hands over the partition's objects, each put at once, conditionally; an error of the
    store names the partition. Returns what ``fill`` returned (the manifest)."""
    objects = S3Commit(backend, label, base)
    try:
        return fill(objects)
    except StoreError as exc:
        raise PartitionWriteError(
            f"{where}: could not write the partition: {exc}. "
            + (
                "Some objects may be replaced already: the partition counts as stale until a run rebuilds it."
                if objects.done
                else "Nothing was replaced: the previous partition, if any, is kept."
            )
        ) from None


def drop_strays(backend, folder: str, listed: dict, manifest: dict) -> None:
    """Delete the keys under the partition's ``folder`` that its manifest, now committed, does not list (as
    ``listed`` when the build took the lease): not part of the commit. A delete that fails is a warning; the
    partition counts as stale while the key is there."""
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
