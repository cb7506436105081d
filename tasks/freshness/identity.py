"""Identity by content: what makes two builds of a partition the same (docs/run-semantics.md, "Identity").

* **Raw inputs.** A manifest records each input's name, size and mtime, and its content hash
  (``input_hashes``, taken from the bytes the build read). A check compares the metadata first.
  Where it differs, or where a file's mtime lies within the raw zone's clock resolution of the time
  the build listed it (SFTP: one second), the file is hashed: unchanged content keeps the partition
  up to date ("metadata changed, content identical"), and the new metadata is remembered in the
  manifest's summary (:mod:`tasks.freshness.summaries`, ``seen_inputs``), so the next check is as
  cheap as before. The data and its manifest are never rewritten for that.
* **Failure records** carry the identity of the failed attempt and no longer apply once it differs.

A partition's own content is identified by its data version (:mod:`tasks.freshness.dataversions`).
No Luigi here; the engine (:mod:`tasks.freshness.engine`) asks these functions.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from tasks.freshness.dataversions import logical_version, slice_versions  # noqa: F401  (imported from here: tests)

if TYPE_CHECKING:
    from collections.abc import Callable

    from tasks.freshness.inputs import Window
    from tasks.storage.rawzone import RawFile, RawZone

SAME_CONTENT = "metadata changed, content identical"
SEEN_KEYS = frozenset({"input_fingerprint", "inputs", "checked_ns"})  # what a check remembers of files it hashed


# -- raw inputs by content -------------------------------------------------------------------------
def newest_mtime(files: list[RawFile]) -> int:
    return max((f.mtime_ns for f in files), default=0)


def parse_inputs(lines: list) -> dict[str, tuple[int, int]]:
    """A manifest's ``inputs`` as {path: (size, mtime_ns)}; old manifests hold ``[path, size, mtime_ns]``."""
    out = {}
    for line in lines:
        path, size, mtime_ns = line if isinstance(line, list) else line.rsplit(" ", 2)
        out[path] = (int(size), int(mtime_ns))
    return out


def check_inputs(
    zone: RawZone, manifest: dict, window: Window, digest: Callable, seen: dict | None = None
) -> tuple[bool, str, dict | None]:
    """Compare the window's files now with the ones the manifest was built from, by content where the
    metadata cannot be trusted; ``seen``: what an earlier check of this manifest remembered (the
    summary's ``seen_inputs``). Returns ``(ok, reason, seen now)``: ``(True, SAME_CONTENT, ...)`` when only
    metadata changed, ``(True, "", ...)`` when nothing did, ``(False, what changed, None)`` otherwise;
    ``seen now`` is what to remember of files hashed now (the metadata that differs from the manifest's,
    the window's fingerprint, when they were hashed), or None."""
    fingerprint, files = window.fingerprint, window.read
    side = seen if isinstance(seen, dict) and SEEN_KEYS <= seen.keys() else None  # a summary is only a cache
    resolution = zone.mtime_resolution_ns
    metadata_same = manifest.get("input_fingerprint") == fingerprint
    trusted = side is not None and newest_mtime(files) + resolution <= side["checked_ns"]
    if trusted and side["input_fingerprint"] == fingerprint:
        return True, "" if metadata_same else SAME_CONTENT, None
    hashes = manifest.get("input_hashes")
    if hashes is None:  # a manifest of a version before content hashes: metadata decides
        return metadata_same, "" if metadata_same else "input changed: " + describe_changes(manifest, files), None
    if set(hashes) != {f.relpath for f in files}:
        return False, "input changed: " + describe_changes(manifest, files), None
    recorded = parse_inputs(manifest.get("inputs", []))
    known = dict(recorded)
    trusted_until = manifest.get("inputs_listed_ns", 0)
    if side is not None:
        known.update(parse_inputs(side["inputs"]))
        trusted_until = side["checked_ns"]
    suspects = [
        f for f in files if known.get(f.relpath) != (f.size, f.mtime_ns) or f.mtime_ns + resolution > trusted_until
    ]
    if not suspects:
        return True, "", None
    resized = [f.relpath for f in suspects if known.get(f.relpath, (None,))[0] != f.size]
    if resized:
        return False, "input changed: " + ", ".join(f"changed {p}" for p in resized[:3]) + _more(resized), None
    checked_ns = time.time_ns()
    changed = [f.relpath for f in suspects if digest(zone, f) != hashes[f.relpath]]
    if changed:
        return False, "input content changed: " + ", ".join(changed[:3]) + _more(changed), None
    note = "" if metadata_same else SAME_CONTENT
    if newest_mtime(files) + resolution > checked_ns:  # re-sent in this instant: hashed again next time
        return True, note, None
    lines = [f"{f.relpath} {f.size} {f.mtime_ns}" for f in files if recorded.get(f.relpath) != (f.size, f.mtime_ns)]
    return True, note, {"input_fingerprint": fingerprint, "inputs": lines, "checked_ns": checked_ns}


def _more(items: list) -> str:
    return f" (+{len(items) - 3} more)" if len(items) > 3 else ""


def describe_changes(manifest: dict, files: list[RawFile]) -> str:
    from tasks.freshness.inputs import diff_inputs

    return diff_inputs(manifest.get("inputs", []), files)


# -- failure records -------------------------------------------------------------------------------
def attempt(engine, node, decided_by: dict | None = None) -> dict:
    """The identity of a build attempt, recorded with its failure: rules, inputs (metadata, and the
    content hashes of the files it read before failing), upstream versions, and the settings that
    decided the failure without being rules (``decided_by``: the reject share a build exceeded)."""
    window = engine.window(node)
    zone = engine.zone(node)
    read = [] if window is None else window.read  # a folder gone mid-build: what it read is not known
    return {
        "rules_fingerprint": node.rules_fingerprint(),
        "inputs": [f"{f.relpath} {f.size} {f.mtime_ns}" for f in read],
        "input_hashes": {f.relpath: h for f in read if (h := zone.known_digest(f)) is not None},
        "upstream": engine.upstream_versions(node),
        "decided_by": dict(decided_by or {}),
    }


def failure_applies(engine, node, failure: dict) -> bool:
    """Whether a failure record still describes the partition: same rules, same settings that decided
    it (``decided_by``), same upstream versions, and the raw files it can see now (those of the
    window's folders that are there) exactly the attempt's, with the same content (hashed: a file
    fixed with its mtime kept is seen). A folder of the window gone since takes the files it held out
    of sight, so the record stops applying (the partition waits for the folder, as a run does),
    unless that folder held none the attempt read.
    A record written before identities were recorded always applies."""
    if "rules_fingerprint" not in failure:
        return True
    if failure["rules_fingerprint"] != node.rules_fingerprint():
        return False
    decided = failure.get("decided_by") or {}
    if decided and any(node.acceptance_settings().get(k) != v for k, v in decided.items()):
        return False
    if failure.get("upstream") != engine.upstream_versions(node):
        return False
    seen = engine.window(node, partial=True).read
    before, hashes, zone = parse_inputs(failure.get("inputs", [])), failure.get("input_hashes", {}), engine.zone(node)
    if set(before) != {f.relpath for f in seen}:
        return False
    for f in seen:
        if f.relpath in hashes:
            if zone.digest_now(f) != hashes[f.relpath]:
                return False
        elif before[f.relpath] != (f.size, f.mtime_ns):
            return False
    return True
