"""A partition's file names under any data root, manifests as bytes, and the hooks by which a backend hears
that a freshness pass begins."""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib
import json
from concurrent.futures import Future

from tasks.storage.files import parquet_sha256

MANIFEST = "_manifest.json"
DATA_FILE = "data.parquet"
PARTITION_PREFIX = "business_date="


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


def safe_relpath(dataset: str) -> str:
    parts = dataset.split("/")
    if not dataset or any(p in ("", ".", "..") or p.startswith(".") or "\\" in p for p in parts):
        raise ValueError(f"dataset path {dataset!r} could escape the data root")
    return dataset


def check_extra_names(extras: dict | None) -> None:
    """ValueError for an extra file name that could pass for the data or manifest, or leave the folder."""
    for name in extras or {}:
        if name in (DATA_FILE, MANIFEST) or "/" in name or name.startswith(".") or name.endswith(".parquet"):
            raise ValueError(f"extra file name {name!r} is not allowed in a partition folder")


def listed_names(manifest: dict | None) -> set[str]:
    """The names a partition's folder holds when ``manifest`` describes it: the manifest and its data files."""
    return {MANIFEST, *(f["name"] for f in (manifest or {}).get("data_files", []))}


def missing_file(f: dict) -> str:
    """The reason for a file a manifest lists (a ``data_files`` entry, or its quarantine) that is not there."""
    if "path" in f:
        return "quarantine file missing"
    return "data file missing" if f["name"] == DATA_FILE else f"file missing: {f['name']}"


def differing_file(f: dict, how: str) -> str:
    """The reason for a file a manifest lists that is there but is not the one it describes; ``how`` it may
    have come to differ on its backend (:attr:`~tasks.storage.backend.Backend.differs_by`)."""
    what = "quarantine file" if "path" in f else "data file" if f["name"] == DATA_FILE else f["name"]
    return f"{what} does not match its manifest ({how}: daybreak verify)"


def same_files(in_place: dict, extras: dict[str, bytes], rejected) -> bool:
    """Whether ``in_place`` lists exactly the files a write of ``extras`` and quarantine ``rejected`` would make."""
    recorded = {f["name"]: f.get("sha256") for f in in_place.get("data_files", [])}
    if set(recorded) != {DATA_FILE, *extras}:
        return False
    if any(recorded[name] != hashlib.sha256(content).hexdigest() for name, content in extras.items()):
        return False
    quarantine = in_place.get("quarantine")
    if rejected is None or rejected.num_rows == 0:
        return not quarantine
    return (
        bool(quarantine)
        and quarantine.get("rows") == rejected.num_rows
        and quarantine.get("sha256") == parquet_sha256(rejected)
    )


def strays_reason(strays: list[str]) -> str:
    """A partition's reason for files in its folder that its manifest does not list (keys under the data root)."""
    more = f" (and {len(strays) - 1} more)" if len(strays) > 1 else ""
    return f"stray file in the partition: {strays[0]}{more}"


def manifest_bytes(manifest: dict) -> bytes:
    """A manifest as every store writes it (indented JSON, keys sorted), its futures resolved."""
    return json.dumps(resolve_futures(manifest), indent=1, sort_keys=True, default=str).encode()


def resolve_futures(manifest: dict) -> dict:
    """``manifest`` with every :class:`~concurrent.futures.Future` in it (nested too) replaced by its result."""
    for name, value in manifest.items():
        if isinstance(value, Future):
            manifest[name] = value.result()
        elif isinstance(value, dict):
            resolve_futures(value)
    return manifest


def parse_manifest(data: bytes) -> dict:
    """A manifest's content; ``{"_corrupt": True}`` for bytes that are not a JSON object."""
    try:
        content = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {"_corrupt": True}
    return content if isinstance(content, dict) else {"_corrupt": True}


REMOTE = {"s3": "tasks.storage.s3backend"}


def remote(data_root):
    """The backend module of a URI data root, imported only when configured; None for a local folder."""
    scheme = data_root.split("://", 1)[0] if isinstance(data_root, str) and "://" in data_root else ""
    if scheme and scheme not in REMOTE:
        raise ValueError(f"data_root {data_root}: scheme {scheme!r} is not supported (a local folder or s3://)")
    return importlib.import_module(REMOTE[scheme]) if scheme else None


class PartitionWriteError(RuntimeError):
    """A partition (or its quarantine) could not be written: disk full, permissions. Names the partition."""


def kept_note(replaced: str | None) -> str:
    """What a failed commit left: ``replaced`` names what it may have replaced already (None: nothing)."""
    if replaced:
        return f"Some {replaced} may be replaced already: the partition counts as stale until a run rebuilds it."
    return "Nothing was replaced: the previous partition, if any, is kept."


PASS_HOOKS: list = []  # called when a freshness pass begins: a backend forgets the last pass's listings


def new_pass() -> None:
    for hook in PASS_HOOKS:
        hook()
