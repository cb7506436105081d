"""Partitions in an S3-compatible bucket: ``[daybreak] data_root = s3://BUCKET/PREFIX`` (docs/scale-out.md).

The layout under the prefix is the local one, so pyarrow, DuckDB and Spark read it with the same globs.
A commit holds across hosts: every object of a partition is one conditional PUT, data first, the manifest
last (``If-None-Match: *`` for a key that did not exist when the build started, ``If-Match`` on the ETag
it had then); the manifest records every object's ETag and counts only while the listing still shows
them; a writer whose condition fails stops (:class:`OtherWriterCommitted`). No multipart upload and no
delete is part of a commit: the keys under a partition's folder that its manifest does not list are deleted
after it (:mod:`tasks.storage.s3folders`). A lease per partition (:mod:`tasks.storage.s3lease`) keeps hosts from
building it twice; correctness rests on the conditional commit, not on the lease. One listing per
dataset prefix per freshness pass: a check needs no request per partition.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.storage import s3folders
from tasks.storage.files import parquet_bytes
from tasks.storage.layout import (
    DATA_FILE,
    DATA_VERSION,
    MANIFEST,
    PASS_HOOKS,
    WRITE_HOOKS,
    PartitionWriteError,
    check_extra_names,
    differing_file,
    manifest_bytes,
    missing_file,
    parse_manifest,
    parse_partition_name,
    partition_name,
    safe_relpath,
)
from tasks.storage.s3 import Bucket, Obj, PreconditionFailed, StoreError
from tasks.storage.s3docs import S3Records, state_dir
from tasks.storage.s3folders import S3Folders
from tasks.storage.s3lease import Lease

if TYPE_CHECKING:
    import pyarrow as pa

logger = logging.getLogger("luigi-interface")

# What this process listed in the current freshness pass: (data_root, prefix) -> {relative key: Obj}.
# Writes of this process keep it up to date; a new pass (tasks/freshness/engine.py) empties it.
_LISTINGS: dict[tuple[str, str], dict[str, Obj]] = {}
# Manifests this process wrote or read, by (data_root, key): (stamp, content), so a check after a build
# parses nothing again.
_MANIFESTS: dict[tuple[str, str], tuple[tuple, dict]] = {}


def _forget_listings() -> None:
    _LISTINGS.clear()
    s3folders.forget()


PASS_HOOKS.append(_forget_listings)


class OtherWriterCommitted(RuntimeError):
    """A conditional write failed: another writer committed the partition since this build started. The run
    counts it as a partition another worker ran (exit 10: tasks/luigi_shortcuts/, SUPERSEDED)."""

    superseded = True


def _stamp(obj: Obj | None) -> tuple | None:
    return None if obj is None else ("etag", obj.etag, obj.size)


class S3PartitionStore(S3Records, S3Folders):
    """One dataset's partitions under ``s3://BUCKET/PREFIX`` (the interface of
    :class:`tasks.storage.local.PartitionStore`)."""

    def __init__(self, data_root: str, dataset: str, subpartition: str | None = None):
        self.data_root = data_root.rstrip("/")
        self.bucket = Bucket(self.data_root)
        self.dataset = safe_relpath(dataset)
        self.root = f"{self.data_root}/{dataset}"
        if subpartition is not None and ("/" in subpartition or safe_relpath(subpartition) != subpartition):
            raise ValueError(f"subpartition {subpartition!r} could escape its folder")
        self.sub = subpartition

    # -- names -----------------------------------------------------------------------------------
    def _levels(self, date: dt.date | None) -> list[str]:
        return [] if date is None else [partition_name(date), *([self.sub] if self.sub else [])]

    def rel(self, date: dt.date | None) -> str:
        """The partition's folder, relative to the data root (``staging/qsr_pos/business_date=D``)."""
        return "/".join([self.dataset, *self._levels(date)])

    def uri(self, date: dt.date | None = None) -> str:
        return f"{self.data_root}/{self.rel(date)}"

    def record_name(self, date: dt.date | None) -> str:
        return f"{self.rel(date)}.json"

    def quarantine_rel(self, date: dt.date | None) -> str:
        return "/".join(["quarantine", self.dataset, *self._levels(date), "rejected.parquet"])

    @property
    def state_dir(self) -> Path:
        return state_dir(self.data_root)

    # -- listings --------------------------------------------------------------------------------
    def _listing(self, prefix: str) -> dict[str, Obj]:
        key = (self.data_root, prefix)
        if key not in _LISTINGS:
            _LISTINGS[key] = self.bucket.list(prefix)
        return _LISTINGS[key]

    def _objects(self) -> dict[str, Obj]:
        return self._listing(f"{self.dataset}/")

    def _quarantined(self) -> dict[str, Obj]:
        return self._listing(f"quarantine/{self.dataset}/")

    def _known(self, rel: str, obj: Obj | None) -> None:
        """This process wrote ``rel`` (``obj``) or found it gone: its listings say so from now on."""
        for (root, prefix), listing in _LISTINGS.items():
            if root == self.data_root and rel.startswith(prefix):
                if obj is None:
                    listing.pop(rel, None)
                else:
                    listing[rel] = obj
        s3folders.noted(self.data_root, rel, obj is not None)

    def refresh(self, date: dt.date | None) -> None:
        """List the partition's objects and its quarantine again into this pass's listings (another host
        may have committed it): one listing and one HEAD, or none under the lease (taken as it was taken)."""
        folder = self.rel(date)
        now = _SEEN.get((self.data_root, folder)) or self._objects_now(date)
        for rel in [r for r in self._objects() if r.startswith(f"{folder}/")]:
            self._known(rel, None)
        for rel, obj in now.items():
            self._known(rel, obj)

    def listed_dates(self) -> set[dt.date]:
        dates = set()
        for rel in self._objects():
            parts = rel[len(self.dataset) + 1 :].split("/", 1)
            date = parse_partition_name(parts[0])
            if date is not None and len(parts) == 2:
                dates.add(date)
        return dates

    # -- reading ---------------------------------------------------------------------------------
    def manifest_stamp(self, date: dt.date | None, fresh: bool = False) -> tuple | None:
        rel = f"{self.rel(date)}/{MANIFEST}"
        if fresh:
            obj = self.bucket.head(rel)
            self._known(rel, obj)
            return _stamp(obj)
        return _stamp(self._objects().get(rel))

    def read_manifest_stamped(self, date: dt.date | None, known: tuple | None) -> tuple[tuple | None, dict | None]:
        rel = f"{self.rel(date)}/{MANIFEST}"
        listed = _stamp(self._objects().get(rel))
        if listed is None:
            return None, None
        if known is not None and known[0] == listed:
            return known
        mine = _MANIFESTS.get((self.data_root, rel))
        if mine is not None and mine[0] == listed:
            return mine
        try:
            data, obj = self.bucket.get(rel)
        except FileNotFoundError:
            self._known(rel, None)
            return None, None
        stamp, content = _stamp(obj), parse_manifest(data)
        self._known(rel, obj)
        _MANIFESTS[(self.data_root, rel)] = (stamp, content)
        return stamp, content

    def read_manifest(self, date: dt.date | None) -> dict | None:
        try:
            return parse_manifest(self.bucket.read(f"{self.rel(date)}/{MANIFEST}"))
        except FileNotFoundError:
            return None

    def has_manifest(self, date: dt.date | None) -> bool:
        return self.manifest_stamp(date, fresh=True) is not None

    def data_matches(self, date: dt.date | None, manifest: dict) -> bool:
        """Every object the manifest names is listed with the recorded ETag and size."""
        return not self.data_problem(date, manifest)

    def data_problem(self, date: dt.date | None, manifest: dict) -> str:
        """Why the objects the manifest names are not the ones it records (ETag and size); '' when they are."""
        objects, folder = self._objects(), self.rel(date)
        files = [(objects.get(f"{folder}/{f['name']}"), f) for f in manifest.get("data_files", [])]
        quarantine = manifest.get("quarantine")
        if quarantine:
            files.append((self._quarantined().get(quarantine["path"]), quarantine))
        for obj, f in files:
            if obj is None:
                return missing_file(f)
            if obj.etag != f.get("etag") or obj.size != f.get("size"):
                return differing_file(f)
        return "" if manifest.get("data_files") else "its manifest lists no data file"

    def read_file(self, date: dt.date | None, name: str) -> bytes:
        return self.bucket.read(f"{self.rel(date)}/{name}")

    def read_table(self, date: dt.date | None, columns: list[str] | None = None) -> pa.Table:
        import pyarrow as pa
        import pyarrow.parquet as pq

        return pq.read_table(pa.BufferReader(self.read_file(date, DATA_FILE)), columns=columns)

    def file_digest(self, rel: str) -> tuple[str | None, str, int]:
        """(sha256, "", bytes read) of an object of the data root now; (None, "missing", 0) without one."""
        try:
            data = self.bucket.read(rel)
        except FileNotFoundError:
            return None, "missing", 0
        return hashlib.sha256(data).hexdigest(), "", len(data)

    # -- leases ----------------------------------------------------------------------------------
    @contextmanager
    def locked(self, date: dt.date | None, wait_s: float | None = None) -> Iterator[None]:
        """Hold the partition's lease for the block (waiting at most ``wait_s`` for a live holder), and
        remember the ETags of its objects as they were when the build started: its commit's conditions."""
        from tasks import settings

        lease = Lease(self.bucket, f"_state/leases/{self.record_name(date)}", settings.s3().lease_seconds)
        lease.acquire(f"{self.dataset} {date or ''}".strip(), wait_s)
        key = (self.data_root, self.rel(date))
        _SEEN[key] = self._objects_now(date)  # what the build's re-check reads (refresh), no request more
        _BASES[key] = {rel: obj.etag for rel, obj in _SEEN[key].items() if obj is not None}
        try:
            with lease.renewing():
                yield
        finally:
            _BASES.pop(key, None)
            _SEEN.pop(key, None)
            lease.release()

    def _listed_at_lease(self, date: dt.date | None) -> dict[str, Obj | None]:
        """The partition's objects as listed when this build took its lease; listed now without a lease."""
        seen = _SEEN.get((self.data_root, self.rel(date)))
        return seen if seen is not None else self._objects_now(date)

    def _snapshot(self, date: dt.date | None) -> dict[str, str]:
        """{key: ETag} of the partition's objects and its quarantine now."""
        return {rel: obj.etag for rel, obj in self._objects_now(date).items() if obj is not None}

    def _objects_now(self, date: dt.date | None) -> dict[str, Obj | None]:
        """The partition's objects and its quarantine (None: there is none) now: one listing, one HEAD."""
        found: dict[str, Obj | None] = dict(self.bucket.list(f"{self.rel(date)}/"))
        found[self.quarantine_rel(date)] = self.bucket.head(self.quarantine_rel(date))
        return found

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

    @contextmanager
    def _committing(self, date: dt.date | None):
        """A ``put(key, bytes)`` that writes conditionally on the ETags of the build's start; an error of the
        store names the partition; the freshness engine hears of the write whether it succeeded or not."""
        base = _BASES.get((self.data_root, self.rel(date)))
        put = _ConditionalPut(self, date, self._snapshot(date) if base is None else base)
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


_BASES: dict[tuple[str, str], dict[str, str]] = {}  # (data_root, partition) -> {key: ETag} at the build's start
_SEEN: dict[tuple[str, str], dict[str, Obj | None]] = {}  # the same, as listed: {key: Obj, or None when absent}


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
            _MANIFESTS[(store.data_root, rel)] = (_stamp(obj), parse_manifest(content))  # as a reader parses it
        return new
