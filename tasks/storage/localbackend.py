"""A data root on a local disk: keys are paths below the folder, every question looks at the disk anew,
a file's identity is its size and mtime, a lock is an flock. Commits: :mod:`tasks.storage.localcommit`."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.storage import localcommit, tempnames
from tasks.storage.files import atomic_write_bytes, atomic_write_parquet, atomic_write_text, exclusive
from tasks.storage.layout import PartitionWriteError
from tasks.storage.tempnames import is_temp_name

if TYPE_CHECKING:
    import pyarrow as pa


class _Stats:
    """A folder's files as a listing: ``get(key)`` stats the file now (None when it is not there)."""

    def __init__(self, prefix: str):
        self.prefix = prefix

    def get(self, key: str) -> os.stat_result | None:
        try:
            return os.stat(self.prefix + key)  # a string path: a status view stats thousands
        except (FileNotFoundError, NotADirectoryError):
            return None


class LocalBackend:
    """Keys under a local folder (``data_root``)."""

    differs_by = "an interrupted write, or a copy without its times"  # a file's identity: its size and mtime

    def __init__(self, data_root: str | os.PathLike):
        self.data_root = Path(data_root)
        top = os.fspath(self.data_root)
        self.prefix = "" if top == "." else f"{top}/"
        self._stats = _Stats(self.prefix)

    def at(self, rel: str) -> Path:
        return self.data_root / rel

    def path(self, key: str) -> str:
        return self.prefix + key

    def uri(self, rel: str) -> str:
        return self.path(rel)

    @property
    def state_dir(self) -> Path:
        return self.data_root / "_state"

    # -- listing -------------------------------------------------------------------------------------
    def folders(self, rel: str) -> list[str]:
        try:
            return os.listdir(self.path(rel))
        except FileNotFoundError:
            return []

    def list_ahead(self, prefixes: list[str]) -> None:
        """Nothing: a folder is listed when it is asked for."""

    def listing(self, prefix: str) -> _Stats:
        return self._stats

    def forget_listings(self, prefixes: list[str]) -> bool:
        """Nothing: a file is looked at when it is asked for."""
        return False

    @staticmethod
    def same(found: os.stat_result, recorded: dict) -> bool:
        """The same size and mtime as the manifest recorded (a rename keeps both)."""
        return found.st_size == recorded["size"] and found.st_mtime_ns == recorded["mtime_ns"]

    @staticmethod
    def stamp_of(found: os.stat_result) -> dict:
        """What a manifest records of a file beside its hash (:meth:`same` compares it)."""
        return {"size": found.st_size, "mtime_ns": found.st_mtime_ns}

    def files_in(self, dataset: str, folder: str, levels: int) -> list[str]:
        """Every file under ``folder``, relative to it, writers' temporary entries left out."""
        top = self.path(folder)
        try:
            entries = list(os.scandir(top))
        except (FileNotFoundError, NotADirectoryError):
            return []
        out = []
        for entry in entries:
            if is_temp_name(entry.name):
                continue
            if not entry.is_dir(follow_symlinks=False):
                out.append(entry.name)
                continue
            for dirpath, dirnames, filenames in os.walk(entry.path):
                dirnames[:] = [d for d in dirnames if not is_temp_name(d)]
                inner = os.path.relpath(dirpath, top).replace(os.sep, "/")
                out += [f"{inner}/{n}" for n in filenames if not is_temp_name(n)]
        return out

    def dataset_strays(self, dataset: str, levels: Sequence[Callable[[str], bool]]) -> list[str]:
        out = []
        for dirpath, dirnames, filenames in os.walk(self.path(dataset)):
            rel = os.path.relpath(dirpath, self.path(dataset))
            level = 0 if rel == "." else rel.count(os.sep) + 1
            prefix = dataset if level == 0 else f"{dataset}/{rel}"
            out += [f"{prefix}/{name}" for name in filenames if not name.startswith(".")]
            folders = [d for d in dirnames if not is_temp_name(d)]  # a commit's folder being written
            out += [f"{prefix}/{name}" for name in folders if not levels[level](name)]
            dirnames[:] = [d for d in folders if level + 1 < len(levels) and levels[level](d)]
        return sorted(out)

    def keys(self, prefix: str) -> set[str]:
        start = len(self.prefix)
        walk = os.walk(self.path(prefix.rstrip("/")))
        return {f"{folder[start:]}/{name}" for folder, _, names in walk for name in names}

    def holds(self, dataset: str, folder: str) -> bool:
        return os.path.isdir(self.path(folder))

    def refresh(self, dataset: str, folder: str, quarantine: str) -> None:
        """Nothing to do: a folder's files are looked at anew by every question."""

    # -- reading -------------------------------------------------------------------------------------
    def stamp(self, dataset: str, key: str, fresh: bool = False) -> tuple | None:
        """(device, inode, size, mtime_ns, ctime_ns), or None; the ctime cannot be set back, and a rename sets it."""
        try:
            st = os.stat(self.path(key))
        except (FileNotFoundError, NotADirectoryError):
            return None
        return _stat_stamp(st)

    def read_stamped(self, dataset: str, key: str, known: tuple | None, parse: Callable) -> tuple:
        """(stamp, parsed content), ``known`` when its stamp still holds, (None, None) when absent; the stamp
        of the open file, so of the content read."""
        try:
            fh = open(self.path(key), "rb")
        except (FileNotFoundError, NotADirectoryError):
            return None, None
        with fh:
            stamp = _stat_stamp(os.fstat(fh.fileno()))
            if known is not None and known[0] == stamp:
                return known
            return stamp, parse(fh.read())

    def read(self, key: str) -> bytes:
        with open(self.path(key), "rb") as fh:
            return fh.read()

    def exists(self, key: str) -> bool:
        return os.path.isfile(self.path(key))

    def read_table(self, key: str, columns: list[str] | None) -> pa.Table:
        import pyarrow.parquet as pq

        return pq.read_table(self.path(key), columns=columns)

    def digest(self, key: str) -> tuple[str | None, str, int]:
        """(sha256, "", bytes read); (None, why, 0) when missing or not a regular file (a FIFO is not waited on)."""
        from tasks.storage.rawbackend import RawFileUnreadable, open_regular

        path = self.data_root / key
        try:
            fd = open_regular(path)
        except FileNotFoundError:
            return None, "missing", 0
        except RawFileUnreadable as exc:
            return None, str(exc).removeprefix(f"{path}: "), 0
        with os.fdopen(fd, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest(), "", fh.tell()

    # -- locks and records ---------------------------------------------------------------------------
    def lock_path(self, record_name: str) -> Path:
        """One lock file per partition, ``_state/locks/`` mirroring ``_state/failures/``."""
        return self.state_dir / "locks" / f"{record_name.removesuffix('.json')}.lock"

    @contextmanager
    def locked(self, record_name: str, folder: str, quarantine: str, what: str, wait_s: float | None) -> Iterator[None]:
        with exclusive(self.lock_path(record_name), what, wait_s):
            yield

    def put_record(self, key: str, data: bytes) -> None:
        path = self.data_root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data)

    def put_document(self, key: str, data: bytes) -> None:
        """:meth:`put_record`, unless the data root itself is gone (a test's temporary folder)."""
        if self.data_root.is_dir():
            self.put_record(key, data)

    def update_document(self, key: str, merge: Callable, what: str) -> dict:
        """Replace the JSON document ``key`` with ``merge(current or None)`` under an flock."""
        path = self.data_root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        with exclusive(path.with_suffix(".lock"), what):
            try:
                current = json.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                current = None
            doc = merge(current)
            atomic_write_text(path, json.dumps(doc, indent=1, sort_keys=True))
            return doc

    def remove_records(self, keys: list[str], prefix: str) -> None:
        for key in keys:
            (self.data_root / key).unlink(missing_ok=True)

    # -- commits -------------------------------------------------------------------------------------
    def commit(self, where: str, label: str, rel: str, quarantine: str, fill: Callable) -> dict:
        return localcommit.commit(self.data_root, where, rel, fill)

    def commit_one(self, where: str, label: str, rel: str, quarantine: str, key: str, data: bytes, manifest: dict):
        try:
            atomic_write_text(self.data_root / key, data.decode())
        except OSError as exc:
            raise PartitionWriteError(localcommit.write_error(self.data_root, where, exc)) from exc

    def drop_strays(self, rel: str, quarantine: str, manifest: dict) -> None:
        localcommit.drop_strays(self.data_root / rel, manifest)
        if not manifest.get("quarantine"):
            localcommit.remove_empty_folder((self.data_root / quarantine).parent)

    def put_rejects(self, key: str, rejected: pa.Table, where: str) -> Path:
        path = self.data_root / key
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_parquet(path, rejected)
        except OSError as exc:
            raise PartitionWriteError(
                "rejected rows of " + localcommit.write_error(self.data_root, where, exc)
            ) from exc
        return path

    # -- the root as a tree of files (tasks/storage/roots.py) -------------------------------------------
    def tree_exists(self, rel: str) -> bool:
        return (self.data_root / rel).exists() if rel else self.data_root.is_dir()

    def make_root(self) -> None:
        self.data_root.mkdir(parents=True)

    def names_now(self) -> list[str]:
        return sorted(os.listdir(self.data_root)) if self.data_root.is_dir() else []

    def sizes(self, rel: str) -> dict[str, int]:
        """{key: size (0 when hard-linked elsewhere)} of every file below ``rel``, temporaries left out."""
        out = {}
        for dirpath, dirnames, filenames in os.walk(self.data_root / rel):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                if tempnames.is_temp_name(name):
                    continue
                try:
                    st = os.lstat(os.path.join(dirpath, name))
                except FileNotFoundError:
                    continue
                out[str(Path(dirpath, name).relative_to(self.data_root))] = st.st_size if st.st_nlink == 1 else 0
        return out

    def remove_tree(self, rel: str) -> None:
        path = self.data_root / rel
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)

    def exclusive(self, rel: str, what: str, wait_s: float | None) -> AbstractContextManager:
        return exclusive(self.data_root / rel, what, wait_s)


def _stat_stamp(st: os.stat_result) -> tuple:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
