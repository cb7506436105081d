"""How a partition is replaced whole on a local disk (:meth:`tasks.storage.localbackend.LocalBackend.commit`).

A write never leaves a reader a mix. Every file, the quarantine of rejected rows included, is first
written under a hidden temporary name (``tempnames``: it names the writer's host and process) and
fsynced; only then are they renamed into place, in the order the store handed them over: data first,
then the quarantine, the manifest last (it records the quarantine's digest, so a partition's quarantine
is always the one of its build). A new partition is assembled that way in a staging folder
(``<data_root>/_state/staging/``, outside every dataset, since DuckDB's ``<dataset>/*/*.parquet`` glob
matches hidden folders too) and renamed into place whole. A crash between two renames leaves a manifest
that no longer describes the data file, so the partition counts as stale and is rebuilt; each file itself
is always whole. Temporary entries of a writer killed mid-write are swept by the next write to the same
folder. A full disk fails the write before anything is renamed (:class:`PartitionWriteError`, naming the
partition). A file the manifest does not list is removed once the manifest is in place."""

from __future__ import annotations

import errno
import logging
import os
import shutil
from pathlib import Path

from tasks.storage import tempnames
from tasks.storage.files import fsync_dir, write_bytes_fsynced, write_parquet_fsynced
from tasks.storage.layout import MANIFEST, PartitionWriteError, listed_names

logger = logging.getLogger("luigi-interface")


class LocalCommit:
    """The files of one commit, written under temporary names in ``folder`` (the partition's folder, or a
    staging folder for a new partition) and renamed into place by :meth:`place`."""

    def __init__(self, data_root: Path, rel: str, folder: Path):
        self.data_root, self.rel, self.folder = data_root, rel, folder
        self.pending: list[tuple[Path, Path]] = []
        self.drop: Path | None = None  # an old quarantine the new partition does not have: removed before the manifest
        self.outside: Path | None = None  # the quarantine, outside the partition's folder: its folder fsynced
        self.step = "before writing"  # named in the error

    def _target(self, key: str) -> Path:
        if key.startswith(f"{self.rel}/"):
            return self.folder / key[len(self.rel) + 1 :]
        path = self.data_root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        tempnames.sweep(path.parent)
        self.outside = path
        return path

    def put(self, key: str, content, label: str, manifest: dict | None = None) -> dict:
        """Write ``content`` (a table as Parquet, or bytes) under a temporary name beside ``key``'s place and
        fsync it; what the manifest records of it (size, mtime, sha256: a rename keeps them)."""
        self.step = f"while writing {label}"
        path = self._target(key)
        tmp = tempnames.temp_path(path)
        self.pending.append((tmp, path))
        write = write_bytes_fsynced if isinstance(content, bytes) else write_parquet_fsynced
        digest = write(tmp, content)
        if manifest is not None:
            return {}
        st = os.stat(tmp)
        return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}

    def put_all(self, named: list) -> list[dict]:
        """:meth:`put` of each (key, content, label), in that order."""
        return [self.put(key, content, label) for key, content, label in named]

    def copy(self, key: str, source, label: str, manifest: dict | None = None) -> None:
        """Hard link ``source``'s file ``key`` (another local data root: a preview's shadow, or production) to
        a temporary name beside ``key``'s place: a name, not a copy, so size and mtime are as recorded."""
        self.step = f"while linking {label}"
        path = self._target(key)
        tmp = tempnames.temp_path(path)
        self.pending.append((tmp, path))
        os.link(source.path(key), tmp)

    def clear(self, key: str, empty) -> None:
        """The partition has no file ``key`` any more (its old quarantine): removed just before the manifest
        (``empty``, the table a bucket would put in its place, is not needed)."""
        path = self.data_root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        tempnames.sweep(path.parent)
        self.drop = path

    def place(self) -> None:
        """Rename each file into place in order (the manifest is last); an old quarantine the new partition
        does not have is removed just before the manifest."""
        self.step = "while renaming the written files into place"
        for tmp, path in self.pending:
            if path.name == MANIFEST and self.drop is not None:
                self.drop.unlink(missing_ok=True)
            os.replace(tmp, path)
            if path == self.outside:
                fsync_dir(path.parent)
        fsync_dir(self.folder)

    def discard(self) -> None:
        for tmp, _ in self.pending:
            tmp.unlink(missing_ok=True)


def commit(data_root: Path, where: str, rel: str, fill) -> dict:
    """``fill(commit)`` hands over the partition's files; they are put in place in the existing partition
    folder, or for a new partition in a staging folder then renamed into place whole. Returns what ``fill``
    returned (the manifest)."""
    try:
        return _into(data_root, rel, fill)
    except OSError as exc:
        raise PartitionWriteError(write_error(data_root, where, exc)) from exc


def _fill(data_root: Path, rel: str, folder: Path, fill) -> dict:
    tempnames.sweep(folder)
    files = LocalCommit(data_root, rel, folder)
    try:
        manifest = fill(files)
        files.place()
    except OSError as exc:
        exc.add_note(files.step)
        raise
    finally:
        files.discard()
    return manifest


def _into(data_root: Path, rel: str, fill) -> dict:
    final = data_root / rel
    final.parent.mkdir(parents=True, exist_ok=True)
    tempnames.sweep(final.parent)  # staging folders an earlier version left here
    if final.is_dir():
        return drop_strays(final, _fill(data_root, rel, final, fill))
    staging_root = data_root / "_state" / "staging"
    staging_root.mkdir(parents=True, exist_ok=True)
    tempnames.sweep(staging_root)
    staging = tempnames.temp_path(staging_root / rel.replace("/", "."))
    staging.mkdir()
    try:
        written = _fill(data_root, rel, staging, fill)
        os.rename(staging, final)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not final.is_dir():
            raise
        return drop_strays(final, _fill(data_root, rel, final, fill))  # a concurrent run created it first
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fsync_dir(final.parent)
    return written


def drop_strays(folder: Path, manifest: dict) -> dict:
    """Remove what ``folder`` holds besides the files ``manifest`` lists (and writers' temporary entries),
    once that manifest is in place: a reader's glob sees only the partition. A file that cannot be
    removed is a warning; the partition counts as stale while it is there. Returns ``manifest``."""
    keep = listed_names(manifest)
    for entry in os.scandir(folder):
        if entry.name in keep or tempnames.is_temp_name(entry.name):
            continue
        try:
            tempnames.remove_entry(entry)
        except FileNotFoundError:
            continue
        except OSError as exc:
            logger.warning(
                "could not remove %s, which the partition's manifest does not list (%s): the partition counts "
                "as stale until it is gone",
                entry.path,
                exc.strerror or exc,
            )
            continue
        logger.info("removed %s: the partition's manifest does not list it", entry.path)
    return manifest


def write_error(data_root: Path, where: str, exc: OSError) -> str:
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
        f"Free space under {data_root} (or fix the cause) and rerun."
    )
