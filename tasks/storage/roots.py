"""A data root as a tree of files, for what is not a partition: a preview's folder and record, its shadow
partitions' files, its publish lock. A local folder (:class:`LocalRoot`) or a bucket prefix
(:class:`tasks.storage.s3docs.S3Root`); :func:`open_root` takes either URI."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tasks.storage import files, tempnames
from tasks.storage.layout import remote


def open_root(uri: str | os.PathLike):
    backend = remote(uri)
    return backend.S3Root(str(uri)) if backend else LocalRoot(uri)


class LocalRoot:
    """A local folder."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.uri = str(self.path)

    def child(self, rel: str) -> LocalRoot:
        return LocalRoot(self.path / rel)

    def exists(self, rel: str = "") -> bool:
        return (self.path / rel).exists() if rel else self.path.is_dir()

    def read(self, rel: str) -> bytes:
        """FileNotFoundError (or NotADirectoryError) when it is not there."""
        return (self.path / rel).read_bytes()

    def write(self, rel: str, data: bytes) -> None:
        """Whole or not at all (a temporary name, fsync, rename)."""
        path = self.path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        files.atomic_write_bytes(path, data)

    def mkdir(self) -> None:
        self.path.mkdir(parents=True)

    def names(self) -> list[str]:
        """The entries one level down (folders and files), sorted; [] when the root is not there."""
        return sorted(os.listdir(self.path)) if self.path.is_dir() else []

    def files(self, rel: str = "") -> dict[str, int]:
        """{path relative to this root: bytes only this root holds} of every file below ``rel`` (hidden
        temporary files left out; a file hard-linked elsewhere, production's, counts 0)."""
        out = {}
        top = self.path / rel
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                if tempnames.is_temp_name(name):
                    continue
                try:
                    st = os.lstat(os.path.join(dirpath, name))
                except FileNotFoundError:  # removed meanwhile (a preview built or swept now)
                    continue
                out[str(Path(dirpath, name).relative_to(self.path))] = st.st_size if st.st_nlink == 1 else 0
        return out

    def remove(self, rel: str = "") -> None:
        """Remove the file or tree ``rel`` (the whole root when empty); nothing when it is not there."""
        path = self.path / rel
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)

    @contextmanager
    def exclusive(self, rel: str, what: str, wait_s: float | None = 0) -> Iterator[None]:
        """An exclusive lock named ``rel`` (:class:`tasks.storage.files.PartitionBusy` when held past ``wait_s``)."""
        with files.exclusive(self.path / rel, what, wait_s):
            yield
