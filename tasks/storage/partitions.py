"""Partition storage: hive paths, atomic whole replacement, manifests, failure records.

The only module that writes Parquet and manifests. Layout of one dataset::

    <data_root>/<dataset>/business_date=YYYY-MM-DD/data.parquet
    <data_root>/<dataset>/business_date=YYYY-MM-DD/_manifest.json
    <data_root>/quarantine/<dataset>/business_date=YYYY-MM-DD/rejected.parquet
    <data_root>/_state/failures/<dataset>/business_date=YYYY-MM-DD.json
    <data_root>/_state/failures/<dataset>/business_date=YYYY-MM-DD.rejected.parquet  (a build failed on them)
    <data_root>/_state/locks/<dataset>/business_date=YYYY-MM-DD.lock

A write never leaves a reader a mix. Every file, the quarantine of rejected rows included, is first
written under a hidden temporary name (``tempnames``: it names the writer's host and process) and
fsynced; only then are they renamed into place, data first, then the quarantine, the manifest last
(it records the quarantine's digest, so a partition's quarantine is always the one of its build).
A new partition is assembled that way in a staging folder
(``<data_root>/_state/staging/``, outside every dataset) and renamed into place whole. A crash
between two renames leaves a manifest that no longer describes the data file, so the partition counts
as stale and is rebuilt; each file itself is always whole. Temporary entries of a writer killed
mid-write are swept by the next write to the same folder. A full disk fails the write before
anything is renamed (:class:`PartitionWriteError`, naming the partition).
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import hashlib
import importlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.storage import tempnames

if TYPE_CHECKING:  # pyarrow is imported where data is written: a completeness check never needs it
    import pyarrow as pa

MANIFEST = "_manifest.json"
DATA_FILE = "data.parquet"
PARTITION_PREFIX = "business_date="
# Called with (store, date) after every write of a partition, done or failed half-way: the freshness
# engine drops what it remembers of that partition (tasks/freshness/engine.py registers itself).
WRITE_HOOKS: list = []
# (kind, function of the table) that versions the rows of a manifest written without a data_version:
# tasks/freshness/identity.py sets it when imported (a data version is a freshness rule, not storage's).
DATA_VERSION: list = []


def partition_name(date: dt.date) -> str:
    if not isinstance(date, dt.date):
        raise TypeError(f"partition key must be a date, got {date!r}")
    return f"{PARTITION_PREFIX}{date.isoformat()}"


def parse_partition_name(name: str) -> dt.date | None:
    if not name.startswith(PARTITION_PREFIX):
        return None
    try:
        return dt.date.fromisoformat(name[len(PARTITION_PREFIX) :])
    except ValueError:
        return None


def _safe_relpath(dataset: str) -> str:
    parts = dataset.split("/")
    if not dataset or any(p in ("", ".", "..") or p.startswith(".") or "\\" in p for p in parts):
        raise ValueError(f"dataset path {dataset!r} could escape the data root")
    return dataset


def parse_manifest(data: bytes) -> dict:
    """A manifest's content; ``{"_corrupt": True}`` for bytes that are not a JSON object."""
    try:
        content = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {"_corrupt": True}
    return content if isinstance(content, dict) else {"_corrupt": True}


class PartitionStore:
    """One dataset's partitions under a local ``data_root`` (:func:`open_store` makes the store of any data
    root; while a preview builds, :func:`shadowed`, a store of the production data root is a
    :class:`ShadowStore`: it writes to the preview's shadow root)."""

    def __init__(self, data_root: str | os.PathLike, dataset: str, subpartition: str | None = None):
        """``subpartition`` is a second hive level under each date, e.g. ``hotel_id=H1``."""
        self.data_root = Path(data_root)
        self.dataset = _safe_relpath(dataset)
        self.root = self.data_root / dataset
        if subpartition is not None and ("/" in subpartition or _safe_relpath(subpartition) != subpartition):
            raise ValueError(f"subpartition {subpartition!r} could escape its folder")
        self.sub = subpartition
        self._paths: dict[dt.date | None, Path] = {}
        self._strs: dict[dt.date | None, str] = {}

    def _levels(self, date: dt.date | None) -> list[str]:
        return [] if date is None else [partition_name(date), *([self.sub] if self.sub else [])]

    def rel(self, date: dt.date | None) -> str:
        """The partition's folder, relative to the data root (``staging/qsr_pos/business_date=D``)."""
        return "/".join([self.dataset, *self._levels(date)])

    def path(self, date: dt.date | None) -> Path:
        """The partition's folder; the dataset folder itself for an unpartitioned dataset (None)."""
        if date not in self._paths:  # a status view asks for each of a thousand folders several times
            self._paths[date] = self.root.joinpath(*self._levels(date))
        return self._paths[date]

    def quarantine_path(self, date: dt.date | None) -> Path:
        return (self.data_root / "quarantine" / self.dataset).joinpath(*self._levels(date)) / "rejected.parquet"

    def record_name(self, date: dt.date | None) -> str:
        """The partition's name under ``_state/failures``, ``_state/identity``...: ``<dataset>/<levels>.json``
        (``<dataset>.json`` for an unpartitioned dataset)."""
        if date is None:
            return f"{self.dataset}.json"
        return "/".join([self.dataset, *self._levels(date)]) + ".json"

    def failure_path(self, date: dt.date | None) -> Path:
        return self.data_root / "_state" / "failures" / self.record_name(date)

    def lock_path(self, date: dt.date | None) -> Path:
        """``_state/locks/`` mirrors ``_state/failures/``: one lock file per partition."""
        state = self.data_root / "_state"
        return (state / "locks" / self.failure_path(date).relative_to(state / "failures")).with_suffix(".lock")

    @contextmanager
    def locked(self, date: dt.date | None, wait_s: float | None = None) -> Iterator[None]:
        """Hold partition ``date``'s lock: two runs that would build the same partition at once (two
        backfills of one range, started by hand and by cron) take turns instead of both writing."""
        with exclusive(self.lock_path(date), f"{self.dataset} {date or ''}".strip(), wait_s):
            yield

    # -- reading -------------------------------------------------------------------------------
    def listed_dates(self) -> set[dt.date]:
        """Dates that have a partition folder, from one listing of the dataset folder."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return set()
        return {d for d in map(parse_partition_name, names) if d is not None}

    def folder(self, date: dt.date | None) -> str:
        """:meth:`path` as a string: a status view opens and stats files of thousands of folders, and
        a ``Path`` join and its conversion back to a string cost more than the system call."""
        if date not in self._strs:
            self._strs[date] = os.fspath(self.path(date))
        return self._strs[date]

    def read_manifest(self, date: dt.date | None) -> dict | None:
        try:
            with open(os.path.join(self.folder(date), MANIFEST), "rb") as fh:
                return parse_manifest(fh.read())
        except FileNotFoundError:
            return None

    def data_matches(self, date: dt.date | None, manifest: dict) -> bool:
        """True when every data file the manifest lists, and its quarantine if it lists one, is there
        with the recorded size and mtime."""
        folder = self.folder(date)
        quarantine = manifest.get("quarantine")
        files = [(os.path.join(folder, f["name"]), f) for f in manifest.get("data_files", [])]
        files += [(self.data_root / quarantine["path"], quarantine)] if quarantine else []
        for path, f in files:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                return False
            if st.st_size != f["size"] or st.st_mtime_ns != f["mtime_ns"]:
                return False
        return bool(manifest.get("data_files"))

    def read_table(self, date: dt.date | None, columns: list[str] | None = None) -> pa.Table:
        """The data of one partition, as written (without the hive column); ``columns``: only these."""
        import pyarrow.parquet as pq

        return pq.read_table(self.path(date) / DATA_FILE, columns=columns)

    def read_file(self, date: dt.date | None, name: str) -> bytes:
        """A file of the partition's folder (``finished.arrow``, ``_store_totals.arrow``); FileNotFoundError."""
        with open(os.path.join(self.folder(date), name), "rb") as fh:
            return fh.read()

    def file_digest(self, rel: str) -> tuple[str | None, str, int]:
        """(sha256, "", bytes read) of a file of the data root (``rel`` below it) as it is now; (None, why, 0)
        when it is missing or not a regular file (a FIFO put in its place is refused, not waited on)."""
        from tasks.storage.rawzone import RawFileUnreadable, open_regular

        path = self.data_root / rel
        try:
            fd = open_regular(path)
        except FileNotFoundError:
            return None, "missing", 0
        except RawFileUnreadable as exc:
            return None, str(exc).removeprefix(f"{path}: "), 0
        h, size = hashlib.sha256(), 0
        with os.fdopen(fd, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
                size += len(block)
        return h.hexdigest(), "", size

    def has_manifest(self, date: dt.date | None) -> bool:
        return os.path.isfile(os.path.join(self.folder(date), MANIFEST))

    def uri(self, date: dt.date | None = None) -> str:
        """The partition's folder as a user names it (messages, the status page's commands)."""
        return self.folder(date)

    @property
    def state_dir(self) -> Path:
        """Where this data root's own state lives (summaries, identity sidecars, the folder cache)."""
        return self.data_root / "_state"

    def manifest_stamp(self, date: dt.date | None, fresh: bool = False) -> tuple | None:
        """(device, inode, size, mtime_ns, ctime_ns) of the partition's manifest; None when it has none. The
        ctime cannot be set back (a restore that keeps mtimes, a reused inode), and a rename sets it."""
        try:
            st = os.stat(os.path.join(self.folder(date), MANIFEST))  # a string path: a view stats thousands
        except (FileNotFoundError, NotADirectoryError):
            return None
        return _stat_stamp(st)

    def read_manifest_stamped(self, date: dt.date | None, known: tuple | None) -> tuple[tuple | None, dict | None]:
        """(stamp, content) of the manifest, ``known`` when it has that stamp still; the stamp is taken from
        the open file, so it is the stamp of the content read. (None, None) when there is none."""
        try:
            fh = open(os.path.join(self.folder(date), MANIFEST), "rb")
        except (FileNotFoundError, NotADirectoryError):
            return None, None
        with fh:
            stamp = _stat_stamp(os.fstat(fh.fileno()))
            if known is not None and known[0] == stamp:
                return known
            return stamp, parse_manifest(fh.read())

    def failure_id(self, date: dt.date | None) -> str:
        return str(self.failure_path(date))

    def failure_records(self) -> set[str]:
        """:meth:`failure_id` of every failure record under the data root (one walk; most days have none)."""
        top = os.path.join(self.data_root, "_state", "failures")
        return {os.path.join(folder, name) for folder, _, names in os.walk(top) for name in names}

    def read_failure(self, date: dt.date | None) -> dict | None:
        try:
            return json.loads(self.failure_path(date).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None

    # -- writing -------------------------------------------------------------------------------
    def write_path(self, date: dt.date | None) -> Path:
        """Where :meth:`write` puts partition ``date``: its folder (a preview's store: the shadow's)."""
        return self.path(date)

    def staging_root(self) -> Path:
        """Where new partitions are assembled before their rename into place: outside every dataset,
        since DuckDB's ``<dataset>/*/*.parquet`` glob matches hidden folders too."""
        return self.data_root / "_state" / "staging"

    def write(
        self,
        date: dt.date | None,
        table: pa.Table,
        manifest: dict,
        extras: dict[str, bytes] | None = None,
        rejected: pa.Table | None = None,
    ) -> dict:
        """Replace partition ``date`` with ``table`` and return the manifest as written.

        ``rejected`` (when not None) replaces the partition's quarantine in the same write: written
        and fsynced under a temporary name with the data, renamed into place before the manifest,
        which records its path, rows, size, mtime and sha256; with no rows, the old one is removed.
        Raises :class:`PartitionWriteError`, naming the partition, when the disk is full (or another
        OS error stops the write) before anything was replaced."""
        for name in extras or {}:  # e.g. a CSV copy for a system that cannot read Parquet
            if name in (DATA_FILE, MANIFEST) or "/" in name or name.startswith(".") or name.endswith(".parquet"):
                raise ValueError(f"extra file name {name!r} is not allowed in a partition folder")
        quarantine = None if rejected is None else (self.quarantine_path(date), rejected)
        with self._replacing(date):
            return self._write(self.write_path(date), table, manifest, extras or {}, quarantine)

    @contextmanager
    def _replacing(self, date: dt.date | None) -> Iterator[None]:
        """Around every replacement of partition ``date``: an OS error becomes a
        :class:`PartitionWriteError` naming the partition, and the write hooks (the freshness engine)
        hear of it whether it succeeded or failed half-way."""
        try:
            yield
        except OSError as exc:
            raise PartitionWriteError(self._write_error(date, exc)) from exc
        finally:
            for hook in WRITE_HOOKS:
                hook(self, date)

    def update_manifest(self, date: dt.date | None, manifest: dict) -> None:
        """Replace the manifest alone, atomically: the data files it lists are kept as they are (a
        rebuild that produced the same rows; ``daybreak verify`` marking a partition stale)."""
        with self._replacing(date):
            atomic_write_text(self.path(date) / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True, default=str))

    def adopt(self, date: dt.date | None, source: PartitionStore) -> dict:
        """Replace partition ``date`` with the one ``source`` (a preview's shadow root) holds, by the
        same protocol as :meth:`write`: every file of the source folder, and its quarantine, is hard
        linked to a temporary name beside its target (no byte is copied; the source stays whole, so an
        interrupted adoption is simply done again), then renamed into place, data first, the manifest
        last; a new partition is assembled in the staging folder and renamed into place whole.
        Returns the adopted manifest."""
        manifest = source.read_manifest(date)
        if not manifest or manifest.get("_corrupt"):
            raise ValueError(f"{source.path(date)}: no readable manifest to adopt")
        with self._replacing(date):
            return self._into(self.path(date), lambda folder: self._adopt_files(folder, date, source, manifest))

    def _adopt_files(self, folder: Path, date: dt.date | None, source: PartitionStore, manifest: dict) -> dict:
        tempnames.sweep(folder)
        src = source.path(date)
        names = sorted(n for n in os.listdir(src) if n != MANIFEST and not tempnames.is_temp_name(n))
        pending: list[tuple[Path, Path]] = []
        quarantine, recorded = self.quarantine_path(date), manifest.get("quarantine")
        links = [(src / n, folder / n) for n in names]
        if recorded:
            quarantine.parent.mkdir(parents=True, exist_ok=True)
            tempnames.sweep(quarantine.parent)
            links.append((source.data_root / recorded["path"], self.data_root / recorded["path"]))
        try:
            for origin, path in [*links, (src / MANIFEST, folder / MANIFEST)]:
                tmp = tempnames.temp_path(path)
                pending.append((tmp, path))
                os.link(origin, tmp)  # a name, not a copy: rename keeps size and mtime, as the manifest says
            _place(folder, pending, None if recorded else quarantine, quarantine)
        except OSError as exc:
            exc.add_note("while linking and renaming the adopted files into place")
            raise
        finally:
            for tmp, _ in pending:
                tmp.unlink(missing_ok=True)
        return manifest

    def _write(self, final: Path, table: pa.Table, manifest: dict, extras: dict[str, bytes], quarantine=None) -> dict:
        return self._into(final, lambda folder: self._write_files(folder, table, manifest, extras, quarantine))

    def _into(self, final: Path, fill) -> dict:
        """``fill(folder)`` puts the partition's files in place in ``folder``: the existing partition
        folder, or for a new partition a staging folder then renamed into place whole."""
        final.parent.mkdir(parents=True, exist_ok=True)
        tempnames.sweep(final.parent)  # staging folders an earlier version left here
        if final.is_dir():
            return fill(final)
        self.staging_root().mkdir(parents=True, exist_ok=True)
        tempnames.sweep(self.staging_root())
        staging = tempnames.temp_path(self.staging_root() / str(final.relative_to(self.data_root)).replace("/", "."))
        staging.mkdir()
        try:
            written = fill(staging)
            os.rename(staging, final)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if not final.is_dir():
                raise
            return fill(final)  # a concurrent run created it first
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        _fsync_dir(final.parent)
        return written

    def _write_files(
        self, folder: Path, table: pa.Table, manifest: dict, extras: dict[str, bytes], quarantine=None
    ) -> dict:
        """Write every file under a temporary name and fsync it, then rename them into place, data first,
        then the quarantine (``(path, rejected rows)`` or None), the manifest last: a disk that fills up
        fails the write before anything is replaced, and a crash between the renames leaves a manifest
        that no longer describes the data (stale)."""
        tempnames.sweep(folder)
        pending: list[tuple[Path, Path]] = []
        step = "before writing"  # named in the error
        # the rows' version is hashed on another core while the files are written (both release the GIL)
        versioned = "data_version" in manifest or not DATA_VERSION
        version = None if versioned else ThreadPoolExecutor(1, thread_name_prefix="data-version")
        try:
            if version is not None:
                kind, versioner = DATA_VERSION[0]
                data_version = version.submit(versioner, table)
            files = []
            for name, content in [(DATA_FILE, table), *extras.items()]:
                step = f"while writing {name}"
                tmp = tempnames.temp_path(folder / name)
                pending.append((tmp, folder / name))
                digest = _write_parquet(tmp, content) if name == DATA_FILE else _write_bytes(tmp, content)
                st = os.stat(tmp)  # a rename keeps size and mtime
                files.append({"name": name, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest})
            manifest = dict(manifest, data_files=files)
            if version is not None:  # the rows, not the bytes: see tasks/freshness/identity.py
                manifest.update(data_version=data_version.result(), data_version_kind=kind)
            drop = None  # an old quarantine the new build does not replace: removed before the manifest
            if quarantine is not None:
                step = "while writing the quarantine"
                path, rejected = quarantine
                path.parent.mkdir(parents=True, exist_ok=True)
                tempnames.sweep(path.parent)
                manifest["quarantine"] = None
                if rejected.num_rows:
                    tmp = tempnames.temp_path(path)
                    pending.append((tmp, path))
                    digest, st = _write_parquet(tmp, rejected), os.stat(tmp)
                    where = str(path.relative_to(self.data_root))
                    manifest["quarantine"] = {
                        "path": where, "rows": rejected.num_rows, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                        "sha256": digest,
                    }  # fmt: skip
                else:
                    drop = path
            step = f"while writing {MANIFEST}"
            tmp = tempnames.temp_path(folder / MANIFEST)
            pending.append((tmp, folder / MANIFEST))
            _write_bytes(tmp, json.dumps(manifest, indent=1, sort_keys=True, default=str).encode())
            step = "while renaming the written files into place"
            _place(folder, pending, drop, quarantine[0] if quarantine is not None else None)
        except OSError as exc:
            exc.add_note(step)
            raise
        finally:
            if version is not None:
                version.shutdown(cancel_futures=True)
            for tmp, _ in pending:
                tmp.unlink(missing_ok=True)
        return manifest

    def _write_error(self, date: dt.date | None, exc: OSError) -> str:
        where = self.dataset if date is None else f"{self.dataset} {'/'.join(self._levels(date))}"
        full = exc.errno == errno.ENOSPC or "no space left on device" in str(exc).lower()
        reason = "no space left on device" if full else (exc.strerror or type(exc).__name__).lower()
        notes = getattr(exc, "__notes__", [])
        kept = (
            "Some files may be replaced already: the partition counts as stale until a run rebuilds it."
            if any("renaming" in note for note in notes)
            else "Nothing was replaced: the previous partition, if any, is kept."
        )
        return (
            f"{where}: could not write the partition: {reason} ({'; '.join([str(exc), *notes])}). {kept} "
            f"Free space under {self.data_root} (or fix the cause) and rerun."
        )

    def failed_rejects_path(self, date: dt.date | None) -> Path:
        """Rejected rows of a build that failed on them (too many), beside its failure record."""
        return self.failure_path(date).with_suffix(".rejected.parquet")

    def write_failed_rejects(self, date: dt.date | None, rejected: pa.Table) -> Path:
        """Keep the rejected rows of a build that failed on them for a person to read; the partition and
        its quarantine are left as they were. Removed with the failure record."""
        path = self.failed_rejects_path(date)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_parquet(path, rejected)
        except OSError as exc:
            raise PartitionWriteError("rejected rows of " + self._write_error(date, exc)) from exc
        return path

    def record_failure(self, date: dt.date | None, record: dict) -> None:
        path = self.failure_path(date)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(record, indent=1, default=str))

    def clear_failure(self, date: dt.date | None) -> None:
        self.failure_path(date).unlink(missing_ok=True)
        self.failed_rejects_path(date).unlink(missing_ok=True)


# -- previews: writes to a shadow root, reads of what it does not hold from production -----------------
_shadow: tuple[str, str] | None = None  # (production data root, as _root_key gives it; the preview's shadow root)


def _root_key(data_root: str | os.PathLike) -> str:
    return data_root.rstrip("/") if _remote(data_root) else os.path.abspath(data_root)


@contextmanager
def shadowed(production: str | os.PathLike, shadow: str | os.PathLike) -> Iterator[None]:
    """For the duration of the block (and in the worker processes forked in it), every store of the
    ``production`` data root that :func:`open_store` makes writes to ``shadow`` and reads a partition
    there when the shadow holds it (:class:`ShadowStore`): nothing under production is written.
    tasks/preview.py builds previews this way."""
    global _shadow
    previous, _shadow = _shadow, (_root_key(production), str(shadow))
    try:
        yield
    finally:
        _shadow = previous


def plain_store(data_root: str | os.PathLike, dataset: str, subpartition: str | None = None):
    """A store of ``data_root`` as it is, whether or not a preview is being built."""
    return open_store(data_root, dataset, subpartition, plain=True)


class ShadowStore(PartitionStore):
    """A dataset's partitions as a preview sees them: a partition the shadow root holds is read there,
    any other from production; every write (data, manifest, quarantine, failure record, lock, staging)
    goes to the shadow. A manifest-only update of a partition the shadow does not hold yet (a rebuild
    that gave production's rows again) links production's data files into the shadow: no copy."""

    def __init__(self, data_root: str | os.PathLike, dataset: str, subpartition: str | None = None):
        assert _shadow is not None
        super().__init__(_shadow[1], dataset, subpartition)
        self.production = PartitionStore(data_root, dataset, subpartition)
        self.own = PartitionStore(_shadow[1], dataset, subpartition)

    def _side(self, date: dt.date | None) -> PartitionStore:
        return self.own if self.own.path(date).is_dir() else self.production

    def folder(self, date: dt.date | None) -> str:
        """Not remembered, as :meth:`path` is not: the partition is read from the shadow once the preview
        has written it there, from production before."""
        return os.fspath(self.path(date))

    def path(self, date: dt.date | None) -> Path:
        return self._side(date).path(date)

    def write_path(self, date: dt.date | None) -> Path:
        return self.own.path(date)

    def listed_dates(self) -> set[dt.date]:
        return self.production.listed_dates() | self.own.listed_dates()

    def data_matches(self, date: dt.date | None, manifest: dict) -> bool:
        return self._side(date).data_matches(date, manifest)

    def update_manifest(self, date: dt.date | None, manifest: dict) -> None:
        if self.own.path(date).is_dir():
            return super().update_manifest(date, manifest)
        origin = self.production.path(date)
        quarantine = manifest.get("quarantine")

        def fill(folder: Path) -> dict:
            for f in manifest.get("data_files", []):
                os.link(origin / f["name"], folder / f["name"])
            if quarantine:  # the manifest names it: the shadow's partition is whole only with it
                target = self.own.data_root / quarantine["path"]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.unlink(missing_ok=True)
                os.link(self.production.data_root / quarantine["path"], target)
            _write_bytes(folder / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True, default=str).encode())
            return manifest

        with self._replacing(date):
            self._into(self.own.path(date), fill)


def _place(folder: Path, pending: list[tuple[Path, Path]], drop: Path | None, quarantine: Path | None) -> None:
    """Rename each (temporary, final) of ``pending`` into place in order (the manifest is last); an old
    quarantine the new partition does not have (``drop``) is removed just before the manifest."""
    for tmp, path in pending:
        if path.name == MANIFEST and drop is not None:
            drop.unlink(missing_ok=True)
        os.replace(tmp, path)
        if quarantine is not None and path == quarantine:
            _fsync_dir(path.parent)
    _fsync_dir(folder)


class PartitionWriteError(RuntimeError):
    """A partition (or its quarantine) could not be written: disk full, permissions. Names the partition."""


def _stat_stamp(st: os.stat_result) -> tuple:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def open_store(data_root: str | os.PathLike, dataset: str, subpartition: str | None = None, plain: bool = False):
    """The store of ``dataset`` under ``data_root``: a local folder (:class:`PartitionStore`) or
    ``s3://BUCKET/PREFIX`` (:class:`tasks.storage.s3store.S3PartitionStore`, loaded only then); while a
    preview builds (:func:`shadowed`), its shadow store, unless ``plain``."""
    remote = _remote(data_root)
    shadow = not plain and _shadow is not None and _root_key(data_root) == _shadow[0]
    if remote is not None:
        return (remote.S3ShadowStore if shadow else remote.S3PartitionStore)(data_root, dataset, subpartition)
    return (ShadowStore if shadow else PartitionStore)(data_root, dataset, subpartition)


# Data roots other than a local folder, by URI scheme: the module that stores them
REMOTE = {"s3": "tasks.storage.s3store"}


def _remote(data_root):
    """The module of a data root that is not a local folder (loaded by name, only when configured: it
    builds on this one); None for a local folder."""
    scheme = data_root.split("://", 1)[0] if isinstance(data_root, str) and "://" in data_root else ""
    if scheme and scheme not in REMOTE:
        raise ValueError(f"data_root {data_root}: scheme {scheme!r} is not supported (a local folder or s3://)")
    return importlib.import_module(REMOTE[scheme]) if scheme else None


def check_roots(*roots: tuple[str, str]) -> str | None:
    """Ask each ``(setting, uri)`` that is a bucket for its bucket (credentials, endpoint, name): one line
    naming the setting, the endpoint, the bucket and the store's error code for the first that fails."""
    for setting, uri in roots:
        remote = _remote(uri) if str(uri).startswith("s3://") else None
        if remote is not None:
            error = remote.check(uri)
            if error:
                return f"{setting} {uri}: {error}"
    return None


def state_dir(data_root: str | os.PathLike) -> Path:
    """This host's state folder for ``data_root`` (a local data root's own ``_state``)."""
    remote = _remote(data_root)
    return remote.state_dir(data_root) if remote else Path(data_root) / "_state"


def read_document(data_root: str | os.PathLike, name: str) -> dict | None:
    """A JSON document every host shares (``_state/<name>``, e.g. the store registry); None when absent."""
    remote = _remote(data_root)
    if remote:
        return remote.read_document(data_root, name)
    try:
        return json.loads((Path(data_root) / "_state" / name).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def update_document(data_root: str | os.PathLike, name: str, merge, what: str) -> dict:
    """Replace the shared document ``name`` with ``merge(current or None)``, atomically with respect to every
    other writer (an flock locally; a compare-and-swap in a bucket, merged again when it lost); the result."""
    remote = _remote(data_root)
    if remote:
        return remote.update_document(data_root, name, merge)
    path = Path(data_root) / "_state" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(path.with_suffix(".lock"), what):
        doc = merge(read_document(data_root, name))
        atomic_write_text(path, json.dumps(doc, indent=1, sort_keys=True))
        return doc


# Called when a freshness pass begins (tasks/freshness/engine.py): a backend that remembers listings
# for a pass (tasks/storage/s3store.py) forgets them.
PASS_HOOKS: list = []


def new_pass() -> None:
    for hook in PASS_HOOKS:
        hook()


def warm_up() -> None:
    """Initialise the Parquet writer and its zstd codec (in memory), so forked workers inherit them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": [1]}), pa.BufferOutputStream(), compression="zstd")


def atomic_write_parquet(path: Path, table: pa.Table) -> str:
    """Write ``table`` to a hidden temporary name beside ``path``, fsync, ``os.replace``; return its sha256."""
    return _replace(path, lambda tmp: _write_parquet(tmp, table))


def atomic_write_text(path: Path, text: str) -> None:
    _replace(path, lambda tmp: _write_bytes(tmp, text.encode("utf-8")))


def _replace(path: Path, write) -> str:
    """``write(tmp)`` to a temporary name (see tempnames), rename it over ``path``, fsync the folder.
    Orphaned temporary files of dead writers in the folder are swept first."""
    tempnames.sweep(path.parent)
    tmp = tempnames.temp_path(path)
    try:
        digest = write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(path.parent)
    return digest


# A column's dictionary is given up (the rest of the column written plain) once it passes 64 KiB, not
# Arrow's 1 MiB: a high-cardinality column (order ids, timestamps) then costs no dictionary, and zstd
# packs its plain values better; low-cardinality ones (stores, SKUs, statuses, file names) keep theirs.
# A stg_qsr_pos partition: 30 % smaller, 4 ms faster to write (docs/performance.md, "Parquet").
DICTIONARY_PAGE_LIMIT = 64 << 10
# Decimals of precision up to 18 (every amount Daybreak writes) are stored as Parquet INT64 (INT32 up
# to 9) with the DECIMAL logical type, as the format recommends, instead of fixed-length byte arrays:
# readers get the same decimal columns back, and the writer's encoding and statistics cost a third
# less (a stg_qsr_pos partition's three decimal columns: 25 to 17 ms; docs/performance.md, "Parquet").


def _write_parquet(path: Path, table: pa.Table) -> str:
    _parquet_to(path, table)
    return _sha256(path, fsync=True)


def _parquet_to(where, table: pa.Table) -> None:
    """``table`` as every Parquet file of a partition is written (to a path or a buffer)."""
    import pyarrow.parquet as pq

    pq.write_table(
        table,
        where,
        compression="zstd",
        dictionary_pagesize_limit=DICTIONARY_PAGE_LIMIT,
        store_decimal_as_integer=True,
    )


def parquet_sha256(table: pa.Table) -> str:
    """The sha256 of the Parquet file :meth:`PartitionStore.write` would write for ``table`` (in memory:
    whether a quarantine in place already holds exactly these rows)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    _parquet_to(sink, table)
    return hashlib.sha256(sink.getvalue()).hexdigest()


def _write_bytes(path: Path, content: bytes) -> str:
    """Write and fsync ``content`` unbuffered (a buffered file would raise a full disk twice: on
    flush, then again on close)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    return hashlib.sha256(content).hexdigest()


def _sha256(path: Path, fsync: bool = False) -> str:
    """sha256 of a file; with ``fsync``, its content is also flushed to disk before this returns."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
        if fsync:
            os.fsync(fh.fileno())
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class PartitionBusy(RuntimeError):
    """Another live run held a partition's lock for longer than ``[daybreak] lock_wait_s``."""


@contextmanager
def exclusive(path: Path, what: str = "", wait_s: float | None = None) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created if needed) for the duration of the block.

    The kernel releases it when its holder exits, ``kill -9`` included. A holder that is alive but
    stuck (stopped, hung on a mount) is waited for ``wait_s`` seconds (None: for ever), then
    :class:`PartitionBusy` names it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b", buffering=0) as fh:  # an empty file: taking the lock writes nothing (a full disk)
        if not flock_within(fh, 0):
            holder = _lock_holder(os.fstat(fh.fileno()))
            logging.getLogger("luigi-interface").info("%s: %s holds it, waiting", what or path, holder)
            if not flock_within(fh, wait_s, poll_s=0.1):
                raise PartitionBusy(
                    f"{what or path}: {holder} has been writing it for over {wait_s:.0f} s (lock {path}); "
                    "nothing was written by this run. Rerun once that run has finished."
                )
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def flock_within(fh, wait_s: float | None, poll_s: float = 0.1) -> bool:
    """Take an exclusive ``flock`` on the open file ``fh``, trying every ``poll_s`` seconds for at most
    ``wait_s`` seconds (None: for ever; 0: once); whether it was taken."""
    deadline = None if wait_s is None else time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)


def _lock_holder(st: os.stat_result) -> str:
    """Who holds the flock of this file, from ``/proc/locks`` (this host's locks; Linux)."""
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == inode:
                    return f"pid {fields[4]} on {tempnames.host()}"
    except OSError:
        pass
    return "another run"
