"""A raw zone in a bucket: ``[daybreak] raw_root = s3://BUCKET/PREFIX`` (a landing bucket).

The contract is the local one (docs/raw-zone.md): ``<source>/<YYYY-MM-DD>/<file>``, the same names rule,
every key that no partition reads reported with its reason (a key directly under a source, a folder whose
name is not a date, a key one level too deep). Nothing here writes to the raw zone.

An object is identified by its name, its size and its version stamp: the ETag when it is the MD5 of the
content (a single PUT: an identical file uploaded again keeps it, so nothing is rebuilt and nothing is read
again), else its Last-Modified time (a multipart upload's ETag does not say what the content is: a change
of time makes the partitions that read it hash its content, as for a touched local file). The stamp takes
the place of a local file's mtime in manifests and input fingerprints.
"""

from __future__ import annotations

import os
import re
import threading
import zlib
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from tasks.cores import process_pool
from tasks.storage.rawzone import FILE, FOLDER, RawBackend, RawFile, RawFileChanged
from tasks.storage.s3 import Bucket, Obj

_MD5 = re.compile(r"^[0-9a-f]{32}$")
# Objects of a window fetched at once: a store is 5-50 ms away, and each GET in series would wait that long.
# At most the client's connection pool (tasks/storage/s3.py), each object whole in memory until yielded.
IN_FLIGHT = 32
AHEAD = 16  # objects of the next partition fetched at once while the current one builds (S3Raw.fetch_ahead)
_ahead_lock = threading.Lock()
# per process: (zone, key) -> its GET started by fetch_ahead, and the call's generation (a count of them)
_ahead: dict[int, dict[tuple[str, str], tuple[Future, int]]] = {}
_generation = 0


def _fetched_ahead() -> dict[tuple[str, str], tuple[Future, int]]:
    """This process's GETs started ahead (a forked process has none of its parent's threads: none of theirs)."""
    return _ahead.setdefault(os.getpid(), {})


def _is_listed(raw: RawFile, obj: Obj) -> bool:
    """Whether ``obj`` (what a GET returned) is the version of ``raw`` the listing gave: its size, and its MD5
    (a plain upload) or its time to the second (a multipart upload's stamp)."""
    stamp = version_stamp(obj)
    same = stamp == raw.mtime_ns if raw.mtime_ns < _MD5_STAMPS else stamp // 10**9 == raw.mtime_ns // 10**9
    return obj.size == raw.size and same


_MD5_STAMPS = 1 << 52  # a version stamp below this is an MD5's (version_stamp), above it a time in ns


def version_stamp(obj: Obj) -> int:
    """What stands for an object's mtime: its content's MD5 (the ETag of a single PUT, first 52 bits: smaller
    than any time in ns, so never taken for a recent write), else its Last-Modified time in ns."""
    return int(obj.etag[:13], 16) if _MD5.match(obj.etag) else obj.mtime_ns


def backend_for(uri: str) -> S3Raw:
    """``s3://BUCKET/PREFIX`` as a raw zone's backend; a missing bucket or wrong credentials: one line, exit 2."""
    backend = S3Raw(uri)
    backend.bucket.check()  # once a process
    return backend


class S3Raw(RawBackend):
    """The objects below ``s3://BUCKET/PREFIX``."""

    mtime_resolution_ns = 1_000_000_000  # Last-Modified has whole seconds
    reads_checked = True  # read_listed: the object read is the version listed
    local_lookups = False  # a folder is a LIST request: Luigi asks the run's listings
    lists_at_once = True  # boto3's client is thread-safe, with a pool of connections

    def __init__(self, uri: str):
        self.bucket = Bucket(uri)
        self.uri = uri.rstrip("/")

    def describe(self) -> str:
        return self.uri

    def folder(self, source: str, name: str) -> tuple[list[tuple[str, int, int]], list[tuple[str, str]]] | None:
        """Each object of ``<source>/<name>/`` with its version stamp, and each name below it that holds keys
        one level too deep (a FOLDER, never read); None when the folder holds nothing."""
        folder = f"{source}/{name}/"
        listed = {rel[len(folder) :]: obj for rel, obj in self.bucket.list(folder).items()}
        if not listed:
            return None
        deeper = [(key, FOLDER) for key in {key.split("/", 1)[0] for key in listed if "/" in key}]
        return [(key, obj.size, version_stamp(obj)) for key, obj in listed.items() if "/" not in key], deeper

    def source(self, source: str) -> tuple[str | None, list[tuple[str, str]]]:
        folders, objects = self.bucket.children(f"{source}/")
        if not folders and not objects:
            return None, []
        return FOLDER, sorted([(name, FOLDER) for name in folders] + [(name, FILE) for name in objects])

    def folder_stamps(self, source: str) -> dict[str, int]:
        """A stamp from one listing of the source's keys (there are no folder times in a bucket)."""
        stamps: dict[str, list[int]] = {}
        for rel, obj in self.bucket.list(f"{source}/").items():
            name, _, rest = rel[len(source) + 1 :].partition("/")
            if rest:
                stamps.setdefault(name, []).append(version_stamp(obj) ^ zlib.crc32(rest.encode()))
        return {name: sum(values) % (1 << 62) for name, values in stamps.items()}

    def file_identity(self, raw: RawFile) -> list[int] | None:
        """What tells this very object again: its size and the MD5 of its content (the stamp of a plain
        upload's ETag), so a content hash recorded for it is taken without reading it again; None for a
        stamp that is a time (a multipart upload: its content must be read to be known)."""
        return [0, raw.size, raw.mtime_ns, 0] if 0 <= raw.mtime_ns < _MD5_STAMPS else None

    def read(self, raw: RawFile) -> bytes:
        return self.bucket.read(raw.relpath)

    def fetch_ahead(self, files: list[RawFile]) -> list[Future]:
        """Start fetching ``files`` (the next partition's inputs, :data:`AHEAD` at once) while the current
        partition builds; what is not read by the next build is let go then (one partition ahead at most).
        Returns the fetches started."""
        global _generation
        with _ahead_lock:
            _generation += 1
            ahead = _fetched_ahead()
            for key in [k for k, (_, generation) in ahead.items() if generation < _generation - 1]:
                ahead.pop(key)[0].cancel()  # fetched for a build before the current one, and not read
            started = []
            for raw in files:
                if (self.uri, raw.relpath) not in ahead:
                    started.append(process_pool("s3-ahead", AHEAD).submit(self.bucket.get, raw.relpath))
                    ahead[(self.uri, raw.relpath)] = (started[-1], _generation)
        return started

    def read_listed(self, raw: RawFile) -> bytes:
        """Checked to be the version listed (its size, and its MD5 or its time): :class:`RawFileChanged` for
        an object re-sent since (a PUT replaces an object whole, so a read is always one version, the listed
        one or a newer). An object fetched ahead (:meth:`fetch_ahead`) is taken when it is the version
        listed, else fetched again."""
        with _ahead_lock:
            ahead, _ = _fetched_ahead().pop((self.uri, raw.relpath), (None, 0))
        got = None
        if ahead is not None:
            try:
                got = ahead.result()
            except Exception:  # noqa: BLE001 - fetched again below, where its error is the read's
                got = None
            if got is not None and not _is_listed(raw, got[1]):
                got = None  # re-sent since it was fetched ahead: the listed version is read now
        data, obj = got if got is not None else self.bucket.get(raw.relpath)
        if not _is_listed(raw, obj):
            raise RawFileChanged(
                f"{self.uri}/{raw.relpath}: re-sent while it was read ({raw.size} bytes listed, {obj.size} read); "
                "nothing was written, the previous partition is kept. The next run reads the new one."
            )
        return data

    def read_many(self, files: list[RawFile]) -> Iterator[bytes]:
        """:data:`IN_FLIGHT` objects fetched at once ahead of the one asked for (the store's round trips overlap
        instead of adding up)."""
        with ThreadPoolExecutor(max_workers=max(1, min(IN_FLIGHT, len(files))), thread_name_prefix="s3-read") as pool:
            ahead: deque = deque()
            pending = iter(files)
            for raw in pending:
                ahead.append(pool.submit(self.read_listed, raw))
                if len(ahead) >= IN_FLIGHT:
                    break
            try:
                while ahead:
                    data = ahead.popleft().result()
                    nxt = next(pending, None)
                    if nxt is not None:
                        ahead.append(pool.submit(self.read_listed, nxt))
                    yield data
            finally:
                for future in ahead:
                    future.cancel()
