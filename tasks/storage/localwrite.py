"""How a local partition is replaced whole (:class:`LocalWrites`, a part of
:class:`tasks.storage.local.LocalPartitionStore`): every file written under a temporary name and fsynced,
then renamed into place, data first, the quarantine, the manifest last; a new partition assembled in a
staging folder and renamed into place whole; failure records beside the data root's state."""

from __future__ import annotations

import datetime as dt
import errno
import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.cores import in_background
from tasks.storage import tempnames
from tasks.storage.files import _fsync_dir, _write_bytes, _write_parquet, atomic_write_parquet, atomic_write_text
from tasks.storage.layout import (
    DATA_FILE,
    DATA_VERSION,
    MANIFEST,
    WRITE_HOOKS,
    PartitionWriteError,
    check_extra_names,
    listed_names,
    manifest_bytes,
)

if TYPE_CHECKING:
    import pyarrow as pa

logger = logging.getLogger("luigi-interface")


class LocalWrites:
    """The writing half of a local partition store (its ``path``, ``quarantine_path``, ``data_root`` and
    ``dataset`` come from :class:`tasks.storage.local.LocalPartitionStore`)."""

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
        check_extra_names(extras)
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
            atomic_write_text(self.path(date) / MANIFEST, manifest_bytes(manifest).decode())

    def adopt(self, date: dt.date | None, source: LocalWrites) -> dict:
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

    def _adopt_files(self, folder: Path, date: dt.date | None, source: LocalWrites, manifest: dict) -> dict:
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
            return self._drop_strays(final, fill(final))
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
            return self._drop_strays(final, fill(final))  # a concurrent run created it first
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        _fsync_dir(final.parent)
        return written

    def drop_strays(self, date: dt.date | None, manifest: dict) -> None:
        """Remove the files of partition ``date`` that its manifest, in place, does not list (a rebuild whose
        files were already in place: only its manifest was replaced)."""
        self._drop_strays(self.write_path(date), manifest)

    def _drop_strays(self, folder: Path, manifest: dict) -> dict:
        """Remove what ``folder`` holds besides the files ``manifest`` lists (and writers' temporary entries),
        once that manifest is in place: a reader's glob sees only the partition. A file that cannot be
        removed is a warning; the partition counts as stale while it is there. Returns ``manifest``."""
        keep = listed_names(manifest)
        for entry in os.scandir(folder):
            if entry.name in keep or tempnames.is_temp_name(entry.name):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
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
        data_version = None
        try:
            if not versioned:
                kind, versioner = DATA_VERSION[0]
                data_version = in_background(versioner, table)
            files = []
            for name, content in [(DATA_FILE, table), *extras.items()]:
                step = f"while writing {name}"
                tmp = tempnames.temp_path(folder / name)
                pending.append((tmp, folder / name))
                digest = _write_parquet(tmp, content) if name == DATA_FILE else _write_bytes(tmp, content)
                st = os.stat(tmp)  # a rename keeps size and mtime
                files.append({"name": name, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest})
            manifest = dict(manifest, data_files=files)
            if data_version is not None:  # the rows, not the bytes: see tasks/freshness/dataversions.py
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
            _write_bytes(tmp, manifest_bytes(manifest))
            step = "while renaming the written files into place"
            _place(folder, pending, drop, quarantine[0] if quarantine is not None else None)
        except OSError as exc:
            exc.add_note(step)
            raise
        finally:
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
        return self.data_root / self.failed_rejects_rel(date)

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
