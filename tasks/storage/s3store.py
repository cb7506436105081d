"""Partitions in an S3-compatible bucket: ``[daybreak] data_root = s3://BUCKET/PREFIX`` (docs/scale-out.md).

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

import datetime as dt
import hashlib
import logging
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tasks.storage.files import parquet_bytes
from tasks.storage.layout import (
    DATA_FILE,
    DATA_VERSION,
    MANIFEST,
    WRITE_HOOKS,
    PartitionWriteError,
    check_extra_names,
    listed_names,
    manifest_bytes,
    parse_manifest,
)
from tasks.storage.s3 import Obj, PreconditionFailed, StoreError
from tasks.storage.s3backend import ETAGS_AT_LEASE, MANIFESTS, stamp_of
from tasks.storage.store import PartitionStore
from tasks.storage.tempnames import is_temp_name

if TYPE_CHECKING:
    import pyarrow as pa

logger = logging.getLogger("luigi-interface")


class OtherWriterCommitted(RuntimeError):
    """A conditional write failed: another writer committed the partition since this build started. The run
    counts it as a partition another worker ran (exit 10: tasks/luigi_shortcuts/, SUPERSEDED)."""

    superseded = True


class S3PartitionStore(PartitionStore):
    """One dataset's partitions under ``s3://BUCKET/PREFIX``: :class:`tasks.storage.store.PartitionStore` with
    the bucket's commit."""

    @property
    def bucket(self):
        return self.backend.bucket

    def _known(self, rel: str, obj: Obj | None) -> None:
        self.backend.known(rel, obj)

    # -- writing ---------------------------------------------------------------------------------
    def write(
        self,
        date: dt.date | None,
        table: pa.Table,
        manifest: dict,
        extras: dict[str, bytes] | None = None,
        rejected: pa.Table | None = None,
    ) -> dict:
        """Commit partition ``date``: each object one conditional PUT, data first, the quarantine, the
        manifest last (:class:`OtherWriterCommitted` when a condition fails)."""
        check_extra_names(extras)
        if "data_version" not in manifest and DATA_VERSION:
            kind, versioner = DATA_VERSION[0]
            manifest = dict(manifest, data_version=versioner(table), data_version_kind=kind)
        with self._committing(date) as put:
            folder = self.rel(date)
            files = []
            for name, content in [(DATA_FILE, parquet_bytes(table)), *(extras or {}).items()]:
                etag = put(f"{folder}/{name}", content)
                files.append(
                    {"name": name, "size": len(content), "etag": etag, "sha256": hashlib.sha256(content).hexdigest()}
                )
            manifest = dict(manifest, data_files=files)
            if rejected is not None:
                manifest["quarantine"] = None
                rel = self.quarantine_rel(date)
                if rejected.num_rows or rel in put.base:  # an old one is replaced by an empty one: no delete
                    content = parquet_bytes(rejected)
                    etag = put(rel, content)
                    if rejected.num_rows:
                        manifest["quarantine"] = {
                            "path": rel, "rows": rejected.num_rows, "size": len(content), "etag": etag,
                            "sha256": hashlib.sha256(content).hexdigest(),
                        }  # fmt: skip
            put(f"{folder}/{MANIFEST}", manifest_bytes(manifest), manifest=manifest)
        self.drop_strays(date, manifest)
        return manifest

    def adopt(self, date: dt.date | None, source: S3PartitionStore) -> dict:
        """Replace partition ``date`` with the one ``source`` (a preview's shadow) holds, by the same
        protocol as :meth:`write`: each object copied with a conditional PUT, data first, the manifest
        last, byte for byte (an object's ETag is the MD5 of its bytes, so the manifest still describes
        them). Returns the adopted manifest."""
        manifest = source.read_manifest(date)
        if not manifest or manifest.get("_corrupt"):
            raise ValueError(f"{source.uri(date)}: no readable manifest to adopt")
        with self._committing(date) as put:
            folder = self.rel(date)
            for f in manifest.get("data_files", []):
                put(f"{folder}/{f['name']}", source.read_file(date, f["name"]))
            quarantine, rel = manifest.get("quarantine"), self.quarantine_rel(date)
            if quarantine:
                put(rel, source.bucket.read(quarantine["path"]))
            elif rel in put.base:  # the old quarantine, emptied (no delete in a commit)
                import pyarrow as pa
                import pyarrow.parquet as pq

                old = pq.read_schema(pa.BufferReader(self.bucket.read(rel)))
                put(rel, parquet_bytes(old.empty_table()))
            put(f"{folder}/{MANIFEST}", source.read_file(date, MANIFEST), manifest=manifest)
        self.drop_strays(date, manifest)
        return manifest

    def update_manifest(self, date: dt.date | None, manifest: dict) -> None:
        """Replace the manifest alone (conditionally, as a commit)."""
        with self._committing(date) as put:
            put(f"{self.rel(date)}/{MANIFEST}", manifest_bytes(manifest), manifest=manifest)

    def drop_strays(self, date: dt.date | None, manifest: dict) -> None:
        """Delete the keys under the partition's folder that its manifest, now committed, does not list (as
        listed when the build took the lease): not part of the commit. A delete that fails is a warning; the
        partition counts as stale while the key is there."""
        folder = self.rel(date)
        keep = {f"{folder}/{name}" for name in listed_names(manifest)}
        for rel in sorted(self.backend.listed_at_lease(folder, self.quarantine_rel(date))):
            if not rel.startswith(f"{folder}/") or rel in keep or is_temp_name(rel.rsplit("/", 1)[-1]):
                continue
            try:
                self.bucket.delete(rel)
            except StoreError as exc:
                logger.warning(
                    "could not delete %s, which the manifest of %s does not list (%s): the partition counts as "
                    "stale until it is gone",
                    self.bucket.describe(rel),
                    self.uri(date),
                    exc,
                )
                continue
            self._known(rel, None)
            logger.info("deleted %s: the manifest of %s does not list it", self.bucket.describe(rel), self.uri(date))

    def etags_now(self, date: dt.date | None) -> dict[str, str]:
        """{key: ETag} of the partition's objects and its quarantine now (one listing, one HEAD)."""
        now = self.backend.objects_now(self.rel(date), self.quarantine_rel(date))
        return {rel: obj.etag for rel, obj in now.items() if obj is not None}

    def failed_rejects_path(self, date: dt.date | None) -> str:
        return f"{self.data_root}/{self.failed_rejects_rel(date)}"

    def write_failed_rejects(self, date: dt.date | None, rejected: pa.Table) -> str:
        rel = self.failed_rejects_rel(date)
        self.bucket.put(rel, parquet_bytes(rejected))
        self._known(rel, Obj(0, "", 0))
        return f"{self.data_root}/{rel}"

    @contextmanager
    def _committing(self, date: dt.date | None):
        """A ``put(key, bytes)`` that writes conditionally on the ETags of the build's start; an error of the
        store names the partition; the freshness engine hears of the write whether it succeeded or not."""
        base = ETAGS_AT_LEASE.get((self.data_root, self.rel(date)))
        put = _ConditionalPut(self, date, self.etags_now(date) if base is None else base)
        try:
            yield put
        except StoreError as exc:
            raise PartitionWriteError(
                f"{self.dataset} {'/'.join(self._levels(date))}: could not write the partition: {exc}. "
                + (
                    "Some objects may be replaced already: the partition counts as stale until a run rebuilds it."
                    if put.done
                    else "Nothing was replaced: the previous partition, if any, is kept."
                )
            ) from None
        finally:
            for hook in WRITE_HOOKS:
                hook(self, date)


class _ConditionalPut:
    def __init__(self, store: S3PartitionStore, date: dt.date | None, base: dict[str, str]):
        self.store, self.date, self.base, self.done = store, date, base, 0

    def __call__(self, rel: str, content: bytes, manifest: dict | None = None) -> str:
        store = self.store
        etag = self.base.get(rel)
        try:
            new = (
                store.bucket.put(rel, content, if_match=etag)
                if etag
                else store.bucket.put(rel, content, if_none_match=True)
            )
        except PreconditionFailed:
            where = f"{store.dataset} {self.date}" if self.date else store.dataset
            raise OtherWriterCommitted(
                f"another writer committed {where} since this build started ({store.bucket.describe(rel)} "
                "changed); nothing more is written by this run, the partition is the other writer's"
            ) from None
        self.done += 1
        obj = Obj(len(content), new, time.time_ns())
        store._known(rel, obj)
        if manifest is not None:
            MANIFESTS[(store.data_root, rel)] = (stamp_of(obj), parse_manifest(content))  # as a reader parses it
        return new
