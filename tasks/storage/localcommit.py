"""How a partition is replaced whole on a local disk (docs/run-semantics.md, "Replace, never append"): files
fsynced under temporary names, renamed in order, the manifest last; a new partition is assembled in
``_state/staging/`` (outside every dataset, which a reader's glob would match) and renamed whole."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
from pathlib import Path

from tasks.storage import tempnames
from tasks.storage.files import fsync_dir, write_bytes_fsynced, write_parquet_fsynced
from tasks.storage.layout import MANIFEST, PartitionWriteError, kept_note, listed_names

logger = logging.getLogger("luigi-interface")


class LocalCommit:
    """The files of one commit, written under temporary names in ``folder``; :meth:`place` renames them."""

    def __init__(self, data_root: Path, rel: str, folder: Path):
        self.data_root, self.rel, self.folder = data_root, rel, folder
        self.pending: list[tuple[Path, Path]] = []
        self.drop: Path | None = None  # an old quarantine the new partition does not have
        self.outside: Path | None = None  # the quarantine, outside the partition's folder
        self.step = "before writing"  # named in the error

    def _target(self, key: str) -> Path:
        if key.startswith(f"{self.rel}/"):
            return self.folder / key[len(self.rel) + 1 :]
        path = self.data_root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        tempnames.sweep(path.parent)
        self.outside = path
        return path

    def _pending(self, key: str, step: str) -> Path:
        """The temporary name ``key`` is written under until :meth:`place`."""
        self.step = step
        path = self._target(key)
        self.pending.append((tempnames.temp_path(path), path))
        return self.pending[-1][0]

    def put(self, key: str, content, label: str, manifest: dict | None = None) -> dict:
        """Write and fsync ``content`` under a temporary name; its size, mtime and sha256 (a rename keeps them)."""
        tmp = self._pending(key, f"while writing {label}")
        write = write_bytes_fsynced if isinstance(content, bytes) else write_parquet_fsynced
        digest = write(tmp, content)
        if manifest is not None:
            return {}
        st = os.stat(tmp)
        return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}

    def put_all(self, named: list) -> list[dict]:
        return [self.put(key, content, label) for key, content, label in named]

    def copy(self, key: str, source, label: str, manifest: dict | None = None) -> None:
        """Hard link ``source``'s file ``key`` (another local data root), so size and mtime stay as recorded."""
        os.link(source.path(key), self._pending(key, f"while linking {label}"))

    def clear(self, key: str, empty) -> None:
        """The old quarantine ``key``: removed just before the manifest (``empty`` is for a bucket)."""
        path = self.data_root / key
        tempnames.sweep(path.parent)
        self.drop = path

    def place(self) -> None:
        self.step = "while renaming the written files into place"
        for tmp, path in self.pending:
            if path.name == MANIFEST and self.drop is not None:
                self.drop.unlink(missing_ok=True)
                remove_empty_folder(self.drop.parent)
            os.replace(tmp, path)
            if path == self.outside:
                fsync_dir(path.parent)
        fsync_dir(self.folder)

    def discard(self) -> None:
        for tmp, _ in self.pending:
            tmp.unlink(missing_ok=True)


def commit(data_root: Path, where: str, rel: str, fill) -> dict:
    """Put the files ``fill(commit)`` hands over in place; return what ``fill`` returned (the manifest)."""
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
    _refuse_links(data_root, rel)
    final.parent.mkdir(parents=True, exist_ok=True)
    tempnames.sweep(final.parent)
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


def _refuse_links(data_root: Path, rel: str) -> None:
    """Refuse a partition's own folder that is a symbolic link: a commit would write wherever it points."""
    path = data_root
    for part in rel.split("/"):
        path = path / part
        if "=" in part and path.is_symlink():
            raise PartitionWriteError(
                f"{path} is a symbolic link (to {os.readlink(path)}); a partition is written only into a folder of "
                "its own: remove the link, then rerun. Nothing was written."
            )


def remove_empty_folder(folder: Path) -> None:
    """Remove a partition's quarantine folder once it holds nothing (no empty folder for a reader's glob)."""
    with contextlib.suppress(OSError):  # not there, or not empty
        folder.rmdir()


def drop_strays(folder: Path, manifest: dict) -> dict:
    """Remove what ``folder`` holds besides ``manifest``'s files, once it is in place (a failure warns)."""
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
    kept = kept_note("files" if any("renaming" in note for note in notes) else None)
    if full:
        fix = f"Free space under {data_root} (or fix the cause)"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        fix = f"Make {data_root} writable"
    else:
        fix = "Fix the cause"
    detail = "; ".join([str(exc), *notes])
    return f"{where}: could not write the partition: {reason} ({detail}). {kept} {fix} and rerun."
