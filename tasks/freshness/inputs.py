"""What a partition reads of the raw zone: its window's files as (name, size, mtime), and how two lists differ."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from tasks.contract import printable
from tasks.storage.rawzone import RawFile

Entries = list[tuple[str, int, int]]  # (name, size, mtime_ns) of the files of one raw folder


def input_line(f: RawFile) -> str:
    """How a manifest lists one input: ``"<path> <size> <mtime_ns>"``."""
    return f"{f.relpath} {f.size} {f.mtime_ns}"


@dataclass(frozen=True)
class FolderInputs:
    """One raw folder as a partition sees it: the entries it reads, the names it refuses, a digest."""

    relpath: str  # <source>/<date>
    read: Entries
    refused: list[tuple[str, str]]  # (name, reason): never read
    digest: str  # over the read entries' names, sizes and mtimes
    newest: int = 0  # the newest mtime_ns of the read entries


@dataclass(frozen=True)
class Window:
    """The raw files a partition reads (and refuses) now, and the input fingerprint over them."""

    folders: list[FolderInputs]

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256("\n".join(f.digest for f in self.folders).encode()).hexdigest()[:32]

    @property
    def read(self) -> list[RawFile]:
        return [RawFile(f"{f.relpath}/{n}", size, mtime) for f in self.folders for n, size, mtime in f.read]

    @property
    def refused(self) -> list[dict[str, str]]:
        """Every file of the window that is not read, and why (the manifest's ``refused_inputs``)."""
        return [
            {"path": printable(f"{f.relpath}/{name}"), "reason": why} for f in self.folders for name, why in f.refused
        ]


def parse_inputs(lines: list) -> dict[str, tuple[int, int]]:
    """A manifest's ``inputs`` as {path: (size, mtime_ns)}; a line may also be ``[path, size, mtime_ns]``."""
    out = {}
    for line in lines:
        path, size, mtime_ns = line if isinstance(line, list) else line.rsplit(" ", 2)
        out[path] = (int(size), int(mtime_ns))
    return out


def diff_inputs(old: list[str], new: list[RawFile]) -> str:
    """How the files ``new`` differ from the manifest lines ``old`` by their metadata alone."""
    before = parse_inputs(old)
    after = {f.relpath: (f.size, f.mtime_ns) for f in new}
    common = set(after) & set(before)
    return describe_changes(
        added=set(after) - set(before),
        removed=set(before) - set(after),
        changed={p for p in common if after[p][0] != before[p][0]},
        retimed={p for p in common if after[p][0] == before[p][0] and after[p] != before[p]},
    )


def describe_changes(added=(), removed=(), changed=(), retimed=(), resent=()) -> str:
    """``new file a, removed b, changed c, modification time changed d, re-sent while checked e``."""
    kinds = (
        ("new file", added),
        ("removed", removed),
        ("changed", changed),
        ("modification time changed", retimed),
        ("re-sent while checked", resent),
    )
    return ", ".join(f"{what} {p}" for what, paths in kinds for p in sorted(paths))


def changed_paths(manifest: dict, now: list[RawFile], resolution_ns: int) -> set[str]:
    """The paths of raw files that may differ from the build's: new, removed, of another size or time, or
    stamped within ``resolution_ns`` of the build's listing."""
    before = parse_inputs(manifest.get("inputs", []))
    after = {f.relpath: (f.size, f.mtime_ns) for f in now}
    listed = manifest.get("inputs_listed_ns")
    recent = {f.relpath for f in now if listed is not None and f.mtime_ns + resolution_ns > listed}
    return {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)} | recent
