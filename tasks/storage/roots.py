"""A data root as a tree of files, for what is not a partition: a preview's folder, record, shadow
partitions and publish lock, over a local folder or a bucket prefix."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager

from tasks.storage.store import open_backend


class Root:
    """A folder (or a bucket prefix) and the files below it, keys relative to it."""

    def __init__(self, uri: str | os.PathLike):
        self.backend = open_backend(uri)
        self.uri = os.fspath(self.backend.data_root)

    def child(self, rel: str) -> Root:
        return Root(self.backend.at(rel.strip("/")))

    def exists(self, rel: str = "") -> bool:
        return self.backend.tree_exists(rel)

    def read(self, rel: str) -> bytes:
        return self.backend.read(rel)

    def write(self, rel: str, data: bytes) -> None:
        """Whole or not at all."""
        self.backend.put_record(rel, data)

    def mkdir(self) -> None:
        """Make the root (FileExistsError when it is there; nothing for a bucket prefix)."""
        self.backend.make_root()

    def names(self) -> list[str]:
        return self.backend.names_now()

    def files(self, rel: str = "") -> dict[str, int]:
        """{key: bytes only this root holds} of every file below ``rel`` (one hard-linked elsewhere counts 0)."""
        return self.backend.sizes(rel)

    def remove(self, rel: str = "") -> None:
        """Remove the file or tree ``rel`` (the whole root when empty), if there."""
        self.backend.remove_tree(rel)

    def exclusive(self, rel: str, what: str, wait_s: float | None = 0) -> AbstractContextManager[Iterator[None]]:
        """An exclusive lock named ``rel`` (an flock, or a lease in a bucket); PartitionBusy past ``wait_s``."""
        return self.backend.exclusive(rel, what, wait_s)
