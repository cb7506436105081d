"""A raw zone in a bucket (``raw_root = s3://BUCKET/PREFIX``), with the local contract (docs/raw-zone.md).

An object's version stamp takes the place of a file's mtime: the ETag when it is the content's MD5 (a
single PUT, so an identical upload rebuilds nothing), else its Last-Modified time (a multipart ETag says
nothing of the content; a new time makes its readers hash it, as for a touched local file)."""

from __future__ import annotations

import os
import re
import threading
import zlib
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future

from tasks.cores import process_pool
from tasks.storage.rawbackend import FILE, FOLDER, RawBackend, RawFile, RawFileChanged
from tasks.storage.s3 import Bucket, Obj

_MD5 = re.compile(r"^[0-9a-f]{32}$")
# GETs at once, so round trips overlap; at most the client's connection pool, each object held in memory
IN_FLIGHT = 32
AHEAD = 16  # objects of the next partition fetched while the current one builds
_ahead_lock = threading.Lock()
# per process (a fork has none of its parent's threads): (zone, key) -> (its GET, fetch_ahead's generation)
_ahead: dict[int, dict[tuple[str, str], tuple[Future, int]]] = {}
_generation = 0


def _fetched_ahead() -> dict[tuple[str, str], tuple[Future, int]]:
    return _ahead.setdefault(os.getpid(), {})


def _is_listed(raw: RawFile, obj: Obj) -> bool:
    """Whether ``obj`` (what a GET returned) is the version of ``raw`` listed: size, and MD5 or time to the second."""
    stamp = version_stamp(obj)
    same = stamp == raw.mtime_ns if raw.mtime_ns < _MD5_STAMPS else stamp // 10**9 == raw.mtime_ns // 10**9
    return obj.size == raw.size and same


_MD5_STAMPS = 1 << 52  # a version stamp below this is an MD5's (version_stamp), above it a time in ns


def version_stamp(obj: Obj) -> int:
    """The first 52 bits of the ETag when it is an MD5 (below any time in ns, so never a recent write), else
    Last-Modified in ns."""
    return int(obj.etag[:13], 16) if _MD5.match(obj.etag) else obj.mtime_ns


def backend_for(uri: str) -> S3Raw:
    """``s3://BUCKET/PREFIX`` as a raw zone's backend, its bucket checked."""
    backend = S3Raw(uri)
    backend.bucket.check()
    return backend


class S3Raw(RawBackend):
    """The objects below ``s3://BUCKET/PREFIX``."""

    mtime_resolution_ns = 1_000_000_000  # Last-Modified has whole seconds
    folder_stamps_are_times = False  # a folder's stamp sums its keys' names and versions: a new key changes it
    reads_checked = True
    local_lookups = False
    lists_at_once = True

    def __init__(self, uri: str):
        self.bucket = Bucket(uri)
        self.uri = uri.rstrip("/")

    def describe(self) -> str:
        return self.uri

    def folder(self, source: str, name: str) -> tuple[list[tuple[str, int, int]], list[tuple[str, str]]] | None:
        """Each object of ``<source>/<name>/`` with its version stamp, and each name holding keys one level too
        deep (a FOLDER, never read); None when the folder holds nothing, an empty folder when only its marker."""
        folder = f"{source}/{name}/"
        # the folder's own key (``qsr_pos/D/``, a console's "create folder"): a marker, neither a file nor data
        keys = self.bucket.list(folder)
        listed = {rel[len(folder) :]: obj for rel, obj in keys.items() if rel != folder}
        if not listed:
            return ([], []) if keys else None
        deeper = [(key, FOLDER) for key in {key.split("/", 1)[0] for key in listed if "/" in key}]
        return [(key, obj.size, version_stamp(obj)) for key, obj in listed.items() if "/" not in key], deeper

    def source(self, source: str) -> tuple[str | None, list[tuple[str, str]]]:
        folders, objects = self.bucket.children(f"{source}/")
        if not folders and not objects:
            return None, []
        return FOLDER, sorted([(name, FOLDER) for name in folders] + [(name, FILE) for name in objects])

    def folder_stamps(self, source: str) -> dict[str, int]:
        """A stamp per folder from one listing of the source's keys (a bucket has no folder times)."""
        stamps: dict[str, list[int]] = {}
        for rel, obj in self.bucket.list(f"{source}/").items():
            name, _, rest = rel[len(source) + 1 :].partition("/")
            if rest:
                stamps.setdefault(name, []).append(version_stamp(obj) ^ zlib.crc32(rest.encode()))
        return {name: sum(values) % (1 << 62) for name, values in stamps.items()}

    def file_identity(self, raw: RawFile) -> list[int] | None:
        """Size and MD5 stamp, so a recorded content hash is taken unread; None when the stamp is a time."""
        return [0, raw.size, raw.mtime_ns, 0] if 0 <= raw.mtime_ns < _MD5_STAMPS else None

    def read(self, raw: RawFile) -> bytes:
        return self.bucket.read(raw.relpath)

    def holds_nothing(self) -> bool:
        """Whether not one object is under the prefix: one listing of one key."""
        return not self.bucket.any_key()

    def fetch_ahead(self, files: list[RawFile]) -> list[Future]:
        """Start fetching the next partition's inputs; what the next build does not read is let go then."""
        global _generation
        with _ahead_lock:
            _generation += 1
            ahead = _fetched_ahead()
            for key in [k for k, (_, generation) in ahead.items() if generation < _generation - 1]:
                ahead.pop(key)[0].cancel()
            started = []
            for raw in files:
                if (self.uri, raw.relpath) not in ahead:
                    started.append(process_pool("s3-ahead", AHEAD).submit(self.bucket.get, raw.relpath))
                    ahead[(self.uri, raw.relpath)] = (started[-1], _generation)
        return started

    def read_listed(self, raw: RawFile) -> bytes:
        """The object, checked to be the version listed (a PUT replaces it whole): else :class:`RawFileChanged`.
        One fetched ahead is taken when it is still that version."""
        with _ahead_lock:
            ahead, _ = _fetched_ahead().pop((self.uri, raw.relpath), (None, 0))
        got = None
        if ahead is not None:
            try:
                got = ahead.result()
            except Exception:  # noqa: BLE001 - fetched again below, where its error is the read's
                got = None
            if got is not None and not _is_listed(raw, got[1]):
                got = None  # re-sent since
        if got is None:
            return self.read_checked(raw)
        return got[0]

    def read_checked(self, raw: RawFile) -> bytes:
        """The object now (one GET), checked to be the version listed: else :class:`RawFileChanged`. The bytes of
        another version are never taken for the listed one's (a check would file their hash under its ETag)."""
        data, obj = self.bucket.get(raw.relpath)
        if not _is_listed(raw, obj):
            raise RawFileChanged(
                f"{self.uri}/{raw.relpath}: re-sent while it was read ({raw.size} bytes listed, {obj.size} read); "
                "nothing was written, the previous partition is kept. The next run reads the new one."
            )
        return data

    def read_many(self, files: list[RawFile]) -> Iterator[bytes]:
        """:data:`IN_FLIGHT` objects fetched at once ahead of the one asked for."""
        pool = process_pool("s3-read", IN_FLIGHT)  # kept: a partition's reads start no threads
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


BACKEND = S3Raw  # the class of this place's backend (rawzone.one_session)
