"""A data root in a bucket (``s3://BUCKET/PREFIX``): one listing per dataset prefix per pass, kept up to date by
this process's writes; an object's identity is its ETag and size; a partition's lock is a lease, under which
its objects are listed once: the commit's conditions."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.cores import process_pool
from tasks.storage import s3commit
from tasks.storage.files import parquet_bytes
from tasks.storage.layout import MANIFEST, PASS_HOOKS
from tasks.storage.s3 import Bucket, Obj, PreconditionFailed
from tasks.storage.s3docs import ask_at_once, check, state_dir
from tasks.storage.s3lease import Lease, sweep_later
from tasks.storage.tempnames import is_temp_name

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["S3Backend", "ask_at_once", "backend_for", "check", "state_dir"]

_BACKENDS: dict[tuple, S3Backend] = {}


def stamp_of(obj: Obj | None) -> tuple | None:
    return None if obj is None else ("etag", obj.etag, obj.size)


def backend_for(uri: str) -> S3Backend:
    """The backend of the bucket prefix ``uri`` at the configured endpoint, one per process."""
    bucket = Bucket(uri)
    key = (bucket.uri, bucket.endpoint, bucket.region)
    backend = _BACKENDS.get(key)
    if backend is None:
        backend = _BACKENDS[key] = S3Backend(bucket.uri, bucket)
    return backend


def _new_pass() -> None:
    for backend in _BACKENDS.values():
        backend.new_pass()


PASS_HOOKS.append(_new_pass)


def folder_of(rel: str, prefix: str, levels: int) -> str | None:
    """The partition folder (``levels`` deep under ``prefix``) of key ``rel``; None for a key above them."""
    if levels == 0:
        return prefix.rstrip("/")
    parts = rel[len(prefix) :].split("/", levels)
    return prefix + "/".join(parts[:levels]) if len(parts) > levels else None


class S3Backend:
    """Keys under ``s3://BUCKET/PREFIX``, and what this process has seen of them."""

    differs_by = "an interrupted write, or an object replaced by hand"  # an object's identity: its ETag and size

    def __init__(self, data_root: str, bucket: Bucket):
        self.data_root = data_root.rstrip("/")
        self.bucket = bucket
        # This pass's listings: prefix -> {key: Obj}, and (prefix, levels) -> {partition folder: its keys}
        self.listings: dict[str, dict[str, Obj]] = {}
        self.by_folder: dict[tuple[str, int], dict[str, set[str]]] = {}
        # key -> (stamp, content) of manifests written or read, so a check after a build parses nothing again
        self.manifests: dict[str, tuple[tuple, dict]] = {}
        # folder -> its objects (None: absent) as listed when the build took its lease, and their ETags
        self.listed_at_lease_of: dict[str, dict[str, Obj | None] | Future] = {}
        self.etags_at_lease: dict[str, dict[str, str]] = {}
        self.swept: set[str] = set()  # datasets whose free lease objects this pass deletes (one listing each)

    def new_pass(self) -> None:
        self.listings.clear()
        self.by_folder.clear()
        self.swept.clear()

    def at(self, rel: str) -> str:
        return f"{self.data_root}/{rel}"

    def uri(self, rel: str) -> str:
        return f"{self.data_root}/{rel}"

    @property
    def state_dir(self) -> Path:
        return state_dir(self.data_root)

    # -- listing -------------------------------------------------------------------------------------
    def listing(self, prefix: str) -> dict[str, Obj]:
        listing = self.listings.get(prefix)
        if listing is None:
            listing = self.listings[prefix] = self.bucket.list(prefix)
        return listing

    def forget_listings(self, prefixes: list[str]) -> bool:
        """Drop this pass's listings of ``prefixes``: the next question lists them anew."""
        for prefix in prefixes:
            self.listings.pop(prefix, None)
        for key in [k for k in self.by_folder if k[0] in prefixes]:
            del self.by_folder[key]
        return True

    def list_ahead(self, prefixes: list[str]) -> None:
        """List at once the prefixes this pass has not listed."""
        todo = [p for p in dict.fromkeys(prefixes) if p not in self.listings]
        if len(todo) < 2:
            return
        with ThreadPoolExecutor(len(todo), thread_name_prefix="s3-list") as pool:
            listed = {p: pool.submit(self.bucket.list, p) for p in todo}
        for prefix, listing in listed.items():
            self.listings.setdefault(prefix, listing.result())

    def known(self, rel: str, obj: Obj | None) -> None:
        """This process wrote ``rel`` (``obj``) or found it gone (None): the listings follow."""
        for prefix, listing in self.listings.items():
            if rel.startswith(prefix):
                if obj is None:
                    listing.pop(rel, None)
                else:
                    listing[rel] = obj
        for (prefix, levels), folders in self.by_folder.items():
            folder = folder_of(rel, prefix, levels) if rel.startswith(prefix) else None
            if folder is not None:
                keys = folders.setdefault(folder, set())
                keys.add(rel) if obj is not None else keys.discard(rel)

    def folders(self, rel: str) -> list[str]:
        """The folders one level below ``rel`` that hold an object, from the pass's listing of ``rel``."""
        start = len(rel) + 1
        return list({k[start:].split("/", 1)[0] for k in self.listing(f"{rel}/") if "/" in k[start:]})

    @staticmethod
    def same(found: Obj, recorded: dict) -> bool:
        """The same ETag and size as the manifest recorded."""
        return found.etag == recorded.get("etag") and found.size == recorded.get("size")

    @staticmethod
    def stamp_of(found: Obj) -> dict:
        """What a manifest records of an object beside its hash (:meth:`same` compares it)."""
        return {"size": found.size, "etag": found.etag}

    def files_in(self, dataset: str, folder: str, levels: int) -> list[str]:
        """Every key under ``folder``, relative to it, from this pass's listing; temporary entries left out."""
        keys = self._by_folder(f"{dataset}/", levels).get(folder, ())
        start = len(folder) + 1
        return [k[start:] for k in keys if not is_temp_name(k.rsplit("/", 1)[-1])]

    def _by_folder(self, prefix: str, levels: int) -> dict[str, set[str]]:
        folders = self.by_folder.get((prefix, levels))
        if folders is None:
            folders = self.by_folder[(prefix, levels)] = {}
            for rel in self.listing(prefix):
                folder = folder_of(rel, prefix, levels)
                if folder is not None:
                    folders.setdefault(folder, set()).add(rel)
        return folders

    def dataset_strays(self, dataset: str, levels: Sequence[Callable[[str], bool]]) -> list[str]:
        out = []
        for rel in self.listing(f"{dataset}/"):
            parts = rel[len(dataset) + 1 :].split("/")
            if len(parts) <= len(levels) or not all(named(part) for named, part in zip(levels, parts, strict=False)):
                out.append(rel)
        return sorted(out)

    def keys(self, prefix: str) -> set[str]:
        return set(self.listing(prefix))

    def holds(self, dataset: str, folder: str) -> bool:
        """Whether the pass's listing has the partition's manifest."""
        return self.stamp(dataset, f"{folder}/{MANIFEST}") is not None

    def refresh(self, dataset: str, folder: str, quarantine: str) -> None:
        """List the partition's objects again (under the lease, the listing taken with it)."""
        now = self.listed_at_lease(folder, quarantine)
        for rel in [r for r in self.listing(f"{dataset}/") if r.startswith(f"{folder}/")]:
            self.known(rel, None)
        for rel, obj in now.items():
            self.known(rel, obj)

    def objects_now(self, folder: str, quarantine: str) -> dict[str, Obj | None]:
        """The partition's objects and its quarantine (None: absent) now: one listing and one HEAD, at once."""
        with ThreadPoolExecutor(1, thread_name_prefix="s3-head") as pool:
            head = pool.submit(self.bucket.head, quarantine)
            found: dict[str, Obj | None] = dict(self.bucket.list(f"{folder}/"))
            found[quarantine] = head.result()
        return found

    # -- reading -------------------------------------------------------------------------------------
    def stamp(self, dataset: str, key: str, fresh: bool = False) -> tuple | None:
        """("etag", ETag, size) from the pass's listing (``fresh``: a HEAD)."""
        if fresh:
            obj = self.bucket.head(key)
            self.known(key, obj)
            return stamp_of(obj)
        return stamp_of(self.listing(f"{dataset}/").get(key))

    def read_stamped(self, dataset: str, key: str, known: tuple | None, parse: Callable) -> tuple:
        listed = stamp_of(self.listing(f"{dataset}/").get(key))
        if listed is None:
            return None, None
        if known is not None and known[0] == listed:
            return known
        mine = self.manifests.get(key)
        if mine is not None and mine[0] == listed:
            return mine
        try:
            data, obj = self.bucket.get(key)
        except FileNotFoundError:
            self.known(key, None)
            return None, None
        stamp, content = stamp_of(obj), parse(data)
        self.known(key, obj)
        self.manifests[key] = (stamp, content)
        return stamp, content

    def read(self, key: str) -> bytes:
        return self.bucket.read(key)

    def exists(self, key: str) -> bool:
        obj = self.bucket.head(key)
        self.known(key, obj)
        return obj is not None

    def read_table(self, key: str, columns: list[str] | None) -> pa.Table:
        import pyarrow as pa
        import pyarrow.parquet as pq

        return pq.read_table(pa.BufferReader(self.bucket.read(key)), columns=columns)

    def digest(self, key: str) -> tuple[str | None, str, int]:
        try:
            data = self.bucket.read(key)
        except FileNotFoundError:
            return None, "missing", 0
        return hashlib.sha256(data).hexdigest(), "", len(data)

    # -- leases and records --------------------------------------------------------------------------
    @contextmanager
    def locked(self, record_name: str, folder: str, quarantine: str, what: str, wait_s: float | None) -> Iterator[None]:
        """Hold the partition's lease for the block, and its objects' ETags as the build found them: the
        commit's conditions."""
        from tasks import settings

        lease = Lease(self.bucket, f"_state/leases/{record_name}", settings.s3().lease_seconds)
        # listed while the lease is taken (a commit in between fails its conditions); again after a wait
        listed = process_pool("s3-at-lease", 1).submit(self.objects_now, folder, quarantine)
        if not lease.acquire(what, wait_s):
            listed = process_pool("s3-at-lease", 1).submit(self.objects_now, folder, quarantine)
        self.listed_at_lease_of[folder] = listed
        with lease.holding():
            try:
                yield
            finally:
                self.etags_at_lease.pop(folder, None)
                self.listed_at_lease_of.pop(folder, None)
        dataset = record_name.split("=", 1)[0].rpartition("/")[0]  # <dataset>/<levels>.json
        if "=" in record_name and dataset not in self.swept:  # once a pass: what runs killed after a commit left
            self.swept.add(dataset)
            sweep_later(self.bucket, f"_state/leases/{dataset}/", lease.seconds, after=lease.rel)

    def listed_at_lease(self, folder: str, quarantine: str) -> dict[str, Obj | None]:
        """The partition's objects as listed with this build's lease, or now without one."""
        seen = self._at_lease(folder)
        return seen if seen is not None else self.objects_now(folder, quarantine)

    def _at_lease(self, folder: str) -> dict[str, Obj | None] | None:
        seen = self.listed_at_lease_of.get(folder)
        if isinstance(seen, Future):
            seen = self.listed_at_lease_of[folder] = seen.result()
            self.etags_at_lease[folder] = _etags(seen)
        return seen

    def put_record(self, key: str, data: bytes) -> None:
        self.bucket.put(key, data)
        self.known(key, Obj(0, "", 0))

    def put_document(self, key: str, data: bytes) -> None:
        self.bucket.put(key, data)

    def update_document(self, key: str, merge: Callable, what: str) -> dict:
        """Compare-and-swap the JSON document ``key`` with ``merge(current)``, again on a lost race."""
        while True:
            try:
                data, obj = self.bucket.get(key)
                current, etag = json.loads(data), obj.etag
            except FileNotFoundError:
                current, etag = None, None
            doc = merge(current)
            data = json.dumps(doc, indent=1, sort_keys=True).encode()
            try:
                self.bucket.put(key, data, if_match=etag, if_none_match=etag is None)
                return doc
            except PreconditionFailed:
                continue

    def remove_records(self, keys: list[str], prefix: str) -> None:
        listed = self.listing(prefix)
        for key in keys:
            if key in listed:
                self.bucket.delete(key)
                self.known(key, None)

    def put_rejects(self, key: str, rejected: pa.Table, where: str) -> str:
        self.bucket.put(key, parquet_bytes(rejected))
        self.known(key, Obj(0, "", 0))
        return f"{self.data_root}/{key}"

    # -- commits -------------------------------------------------------------------------------------
    def etags_now(self, folder: str, quarantine: str) -> dict[str, str]:
        return _etags(self.objects_now(folder, quarantine))

    def _base(self, folder: str, quarantine: str) -> dict[str, str]:
        """A commit's conditions: the ETags found under the lease, or as they are now."""
        self._at_lease(folder)
        base = self.etags_at_lease.get(folder)
        return self.etags_now(folder, quarantine) if base is None else base

    def commit(self, where: str, label: str, folder: str, quarantine: str, fill: Callable) -> dict:
        """Commit what ``fill(commit)`` hands over (:mod:`tasks.storage.s3commit`), then delete the keys its
        manifest does not list; the manifest."""
        manifest = s3commit.commit(self, where, label, self._base(folder, quarantine), fill)
        self.drop_strays(folder, quarantine, manifest)
        return manifest

    def commit_one(self, where: str, label: str, folder: str, quarantine: str, key: str, data: bytes, manifest: dict):
        """Replace the partition's manifest ``key`` alone, conditionally."""
        s3commit.commit(
            self, where, label, self._base(folder, quarantine), lambda c: c.put(key, data, manifest=manifest)
        )

    def drop_strays(self, folder: str, quarantine: str, manifest: dict) -> None:
        s3commit.drop_strays(self, folder, self.listed_at_lease(folder, quarantine), manifest)

    def empty_like(self, key: str) -> pa.Table:
        import pyarrow as pa
        import pyarrow.parquet as pq

        return pq.read_schema(pa.BufferReader(self.bucket.read(key))).empty_table()

    # -- the prefix as a tree of files (tasks/storage/roots.py) ------------------------------------------
    def tree_exists(self, rel: str) -> bool:
        if rel and self.bucket.head(rel) is not None:
            return True
        return bool(self.bucket.list(_under(rel)))

    def make_root(self) -> None:
        """Nothing: a prefix exists once it holds an object."""

    def names_now(self) -> list[str]:
        return sorted(self.bucket.folders(""))

    def sizes(self, rel: str) -> dict[str, int]:
        return {key: obj.size for key, obj in self.bucket.list(_under(rel)).items()}

    def remove_tree(self, rel: str) -> None:
        if rel and self.bucket.head(rel) is not None:
            self.bucket.delete(rel)
        for key in self.bucket.list(_under(rel)):
            self.bucket.delete(key)

    @contextmanager
    def exclusive(self, rel: str, what: str, wait_s: float | None) -> Iterator[None]:
        from tasks import settings

        lease = Lease(self.bucket, rel, settings.s3().lease_seconds)
        lease.acquire(what, wait_s)
        with lease.holding():
            yield


def _etags(objects: dict[str, Obj | None]) -> dict[str, str]:
    return {rel: obj.etag for rel, obj in objects.items() if obj is not None}


def _under(rel: str) -> str:
    """The listing prefix of everything under ``rel`` ('' for the whole prefix)."""
    return f"{rel.rstrip('/')}/" if rel else ""
