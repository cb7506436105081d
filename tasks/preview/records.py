"""A preview's folder, record and names: where it lives, what partitions it holds, and which task builds each."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re

from tasks import catalogue, settings
from tasks.storage.partitions import MANIFEST, PartitionStore, plain_store
from tasks.storage.roots import Root

RECORD = "preview.json"
PUBLISH_LOCK = "_publish.lock"
HORIZON_DAYS = 7  # downstream dates looked at past the range (a look-back's window)
ID_PATTERN = re.compile(r"^[a-z0-9_]+-\d{8}-\d{8}-[0-9a-f]{6}$")
EXIT_FAILED = 30  # a partition of the preview failed (the others built): Luigi's task_failed
EXIT_NOT_RUN = 25  # a partition of the preview was not built, none failed: Luigi's not_run


class PreviewError(RuntimeError):
    """A preview that does not exist, or that cannot be published; the message says why."""


def previews_root(data_root: str | None = None):
    """``<data_root>/_state/preview`` (:mod:`tasks.storage.roots`: a folder, or a prefix of the bucket)."""
    return Root(data_root or settings.data_uri()).child("_state/preview")


def folder_of(pid: str):
    if not ID_PATTERN.match(pid):
        raise PreviewError(f"{pid!r} is not a preview id (see `daybreak previews`)")
    folder = previews_root().child(pid)
    if not folder.exists(RECORD):
        raise PreviewError(f"no preview {pid} under {previews_root().uri} (see `daybreak previews`)")
    return folder


def read_record(folder) -> dict:
    return json.loads(folder.read(RECORD))


def readable_records():
    """(name, folder, record) of each preview under the data root whose record can be read."""
    root = previews_root()
    for name in root.names():
        folder = root.child(name)
        try:
            yield name, folder, read_record(folder)
        except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError):
            continue


def write_record(folder, record: dict) -> None:
    folder.write(RECORD, json.dumps(record, indent=1, default=str).encode())


def manifest_sha(store: PartitionStore, date: dt.date | None) -> str | None:
    try:
        return hashlib.sha256(store.read_file(date, MANIFEST)).hexdigest()
    except (FileNotFoundError, NotADirectoryError):
        return None


# -- which partitions ---------------------------------------------------------------------------------
def spec_of(relfolder: str) -> catalogue.Dataset:
    """The dataset a partition folder (relative to a data root) belongs to: the longest path prefix."""
    specs = [d for d in catalogue.DATASETS if relfolder == d.path or relfolder.startswith(d.path + "/")]
    if not specs:
        raise PreviewError(f"{relfolder}: not a folder of any dataset of tasks/catalogue.py")
    return max(specs, key=lambda d: len(d.path))


def task_for(relfolder: str):
    """The task that builds the partition in ``relfolder``."""
    spec = spec_of(relfolder)
    levels = dict(p.split("=", 1) for p in relfolder[len(spec.path) :].strip("/").split("/") if "=" in p)
    params: dict = {}
    if "business_date" in levels and spec.partition in ("date", "date x hotel"):
        params["date"] = dt.date.fromisoformat(levels["business_date"])
    if "hotel_id" in levels:
        params["hotel"] = levels["hotel_id"]
    if "store_id" in levels:
        params["store_id"] = levels["store_id"]
    return spec.task(**params)


def shadow_partitions(shadow) -> list[str]:
    """Folders of every partition the shadow holds, upstream datasets first, then dates in order."""
    order = {d.path: i for i, d in enumerate(catalogue.DATASETS)}
    found = [
        rel.rpartition("/")[0]
        for rel in shadow.files()
        if rel.endswith(f"/{MANIFEST}") and not rel.startswith(("_", ".", "quarantine/"))
    ]
    return sorted(found, key=lambda rel: (order.get(spec_of(rel).path, 99), rel))


def partition_rel(store: PartitionStore, date: dt.date | None, data_root: str) -> str:
    """The path of ``store``'s partition ``date`` under ``data_root`` (the data root or a preview's folder)."""
    return plain_store(data_root, store.dataset, store.sub).rel(date)


def store_at(rel: str, data_root: str) -> PartitionStore:
    """The store under ``data_root`` of the partition at path ``rel`` (a path under a data root)."""
    task = task_for(rel)
    store = task.store()
    return plain_store(data_root, store.dataset, store.sub)


def manifest_sha_at(rel: str, data_root: str) -> str | None:
    return manifest_sha(store_at(rel, data_root), partition_date(rel))


def partition_date(rel: str) -> dt.date | None:
    return task_for(rel).key
