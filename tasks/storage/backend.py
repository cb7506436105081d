"""The storage interface of a data root, a folder or a bucket prefix, for :class:`~tasks.storage.store.PartitionStore`
and :class:`~tasks.storage.roots.Root`; keys are paths relative to the data root."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pyarrow as pa


class Commit(Protocol):
    """The objects of one partition's commit, handed over in order: data first, the manifest last."""

    def put(self, key: str, content: bytes | pa.Table, label: str, manifest: dict | None = None) -> dict:
        """Write ``content`` (a table as Parquet); what a manifest records of it (size, sha256, mtime or etag)."""

    def put_all(self, named: list[tuple[str, bytes | pa.Table, str]]) -> list[dict]:
        """:meth:`put` of each (key, content, label), in that order on a disk, all at once on a bucket."""

    def copy(self, key: str, source: Backend, label: str, manifest: dict | None = None) -> None:
        """``source``'s file ``key`` as it is (a hard link; a byte-for-byte copy)."""

    def clear(self, key: str, empty: Callable[[], pa.Table]) -> None:
        """The partition no longer has ``key`` (its old quarantine): removed, or replaced by ``empty()``."""


class Backend(Protocol):
    data_root: Any  # as the user gave it: a Path, or ``s3://BUCKET/PREFIX``
    differs_by: str  # how a file may come to differ from its manifest, as a reason names it

    # -- names
    def at(self, rel: str) -> Any: ...  # the data root of a folder below this one (a Path or a URI)
    def uri(self, rel: str) -> str: ...  # a key as a user names it in a message
    @property
    def state_dir(self) -> Any: ...  # this host's state for the data root (a local folder)

    # -- listing (a bucket's: once per freshness pass, kept up to date by this process's writes)
    def folders(self, rel: str) -> list[str]: ...  # names one level below
    def list_ahead(self, prefixes: list[str]) -> None: ...  # a bucket lists them at once
    def listing(self, prefix: str) -> Mapping[str, Any]: ...  # key -> what identifies it (stat, Obj)
    def same(self, found: Any, recorded: dict) -> bool: ...  # found is what a manifest recorded
    def files_in(self, dataset: str, folder: str, levels: int) -> list[str]: ...  # relative to folder
    def dataset_strays(self, dataset: str, levels: Sequence[Callable[[str], bool]]) -> list[str]: ...
    def keys(self, prefix: str) -> set[str]: ...
    def holds(self, dataset: str, folder: str) -> bool: ...
    def refresh(self, dataset: str, folder: str, quarantine: str) -> None: ...

    # -- reading
    def stamp(self, dataset: str, key: str, fresh: bool = False) -> tuple | None: ...
    def read_stamped(self, dataset: str, key: str, known: tuple | None, parse: Callable) -> tuple: ...
    def read(self, key: str) -> bytes: ...  # FileNotFoundError
    def exists(self, key: str) -> bool: ...
    def read_table(self, key: str, columns: list[str] | None) -> pa.Table: ...
    def digest(self, key: str) -> tuple[str | None, str, int]: ...

    # -- commits, and what is written beside them
    def commit(self, where: str, label: str, folder: str, quarantine: str, fill: Callable[[Commit], dict]) -> dict: ...
    def commit_one(
        self, where: str, label: str, folder: str, quarantine: str, key: str, data: bytes, manifest: dict
    ) -> None: ...
    def drop_strays(self, folder: str, quarantine: str, manifest: dict) -> None: ...
    def locked(
        self, record_name: str, folder: str, quarantine: str, what: str, wait_s: float | None
    ) -> AbstractContextManager[None]: ...
    def put_record(self, key: str, data: bytes) -> None: ...
    def update_document(self, key: str, merge: Callable[[dict | None], dict], what: str) -> dict: ...  # atomic
    def put_document(self, key: str, data: bytes) -> None: ...
    def put_rejects(self, key: str, rejected: pa.Table, where: str) -> Any: ...
    def remove_records(self, keys: list[str], prefix: str) -> None: ...

    # -- the data root as a tree of files (tasks/storage/roots.py)
    def tree_exists(self, rel: str) -> bool: ...
    def make_root(self) -> None: ...
    def names_now(self) -> list[str]: ...
    def sizes(self, rel: str) -> dict[str, int]: ...
    def remove_tree(self, rel: str) -> None: ...
    def exclusive(self, rel: str, what: str, wait_s: float | None) -> AbstractContextManager[None]: ...
