"""The one door to the partitions of a data root, a local folder or a bucket: :func:`open_store` gives a
dataset's store (a preview's shadow store while one builds), the only writer of Parquet and manifests.
The other names are re-exported from the modules that own them."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tasks.storage.files import (  # noqa: F401 - the door's names
    PartitionBusy,
    atomic_write_text,
    exclusive,
    flock_within,
    warm_up,
)
from tasks.storage.layout import (  # noqa: F401 - the door's names
    DATA_FILE,
    MANIFEST,
    PARTITION_PREFIX,
    PartitionWriteError,
    new_pass,
    partition_name,
    remote,
)
from tasks.storage.shadow import ShadowStore, shadow_of, shadowed  # noqa: F401 - the door's names
from tasks.storage.store import PartitionStore, open_backend


def open_store(data_root: str | os.PathLike, dataset: str, subpartition: str | None = None):
    """The store of ``dataset`` under ``data_root``; while a preview builds, its shadow store."""
    shadow = shadow_of(data_root)
    if shadow is not None:
        return ShadowStore(data_root, shadow, dataset, subpartition)
    return PartitionStore(data_root, dataset, subpartition)


def plain_store(data_root: str | os.PathLike, dataset: str, subpartition: str | None = None) -> PartitionStore:
    """A store of ``data_root`` as it is, whether or not a preview is being built."""
    return PartitionStore(data_root, dataset, subpartition)


def check_roots(*roots: tuple[str, str], written: tuple[str, ...] = ()) -> str | None:
    """Check each bucket of ``(setting, uri)`` (and conditional writes, for one in ``written``); the first
    failure as one line naming the setting, endpoint and bucket, or None."""
    buckets = [uri for _, uri in roots if str(uri).startswith("s3://")]
    if len(buckets) > 1:
        remote(buckets[0]).ask_at_once(buckets)  # one round trip for all
    for setting, uri in roots:
        backend = remote(uri) if str(uri).startswith("s3://") else None
        if backend is not None:
            error = backend.check(uri, fence=setting in written)
            if error:
                return f"{setting} {uri}: {error}"
    return None


def state_dir(data_root: str | os.PathLike) -> Path:
    """This host's state folder for ``data_root``."""
    return open_backend(data_root).state_dir


def read_document(data_root: str | os.PathLike, name: str) -> dict | None:
    """A JSON document every host shares (``_state/<name>``, e.g. the store registry); None when absent."""
    try:
        return json.loads(open_backend(data_root).read(f"_state/{name}"))
    except FileNotFoundError:
        return None


def update_document(data_root: str | os.PathLike, name: str, merge, what: str) -> dict:
    """Replace the shared document ``name`` with ``merge(current or None)``, atomically against every other
    writer (an flock; in a bucket a compare-and-swap, merged again when it lost)."""
    return open_backend(data_root).update_document(f"_state/{name}", merge, what)
