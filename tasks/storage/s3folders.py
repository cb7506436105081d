"""A bucket dataset's listing by partition folder, made once per freshness pass from the pass's listing of
the dataset (:class:`tasks.storage.s3backend.S3Backend`): what a partition's folder holds, strays included,
without a request per partition."""

from __future__ import annotations

# The pass's listings by partition folder: (data_root, dataset prefix, levels of folders under it) ->
# {partition folder: its keys at any depth}; kept up to date by :func:`noted`, emptied by :func:`forget`.
_FOLDERS: dict[tuple[str, str, int], dict[str, set[str]]] = {}


def forget() -> None:
    """A new freshness pass: the listings are taken again."""
    _FOLDERS.clear()


def folder_of(rel: str, prefix: str, levels: int) -> str | None:
    """The partition folder (``levels`` folders under ``prefix``) that key ``rel`` is in; None for a key
    above the partitions' folders (a dataset's own stray)."""
    if levels == 0:
        return prefix.rstrip("/")
    parts = rel[len(prefix) :].split("/", levels)
    return prefix + "/".join(parts[:levels]) if len(parts) > levels else None


def by_folder(data_root: str, prefix: str, levels: int, listing) -> dict[str, set[str]]:
    """The listing of ``prefix`` (``listing(prefix)``, the pass's) by partition folder (``levels`` folders
    deep), made once per pass."""
    key = (data_root, prefix, levels)
    if key not in _FOLDERS:
        folders: dict[str, set[str]] = {}
        for rel in listing(prefix):
            folder = folder_of(rel, prefix, levels)
            if folder is not None:
                folders.setdefault(folder, set()).add(rel)
        _FOLDERS[key] = folders
    return _FOLDERS[key]


def noted(data_root: str, rel: str, present: bool) -> None:
    """Key ``rel`` was written (``present``) or found gone: the folders' listings say so from now on."""
    for (root, prefix, levels), folders in _FOLDERS.items():
        folder = folder_of(rel, prefix, levels) if root == data_root and rel.startswith(prefix) else None
        if folder is not None:
            keys = folders.setdefault(folder, set())
            keys.add(rel) if present else keys.discard(rel)
