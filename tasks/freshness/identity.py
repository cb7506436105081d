"""Identity by content (docs/run-semantics.md, "Identity by content"): raw inputs compared by metadata, hashed
where it differs, and the identity of a failed attempt, which its failure record holds."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from tasks.freshness.inputs import describe_changes, diff_inputs, input_line, parse_inputs
from tasks.storage.rawzone import RawFileChanged

if TYPE_CHECKING:
    from collections.abc import Callable

    from tasks.freshness.inputs import Window
    from tasks.storage.rawzone import RawFile, RawZone

SAME_CONTENT = "metadata changed, content identical"
SEEN_KEYS = frozenset({"input_fingerprint", "inputs", "checked_ns"})  # of ``seen_inputs``


# -- raw inputs by content -------------------------------------------------------------------------
def newest_mtime(files: list[RawFile]) -> int:
    return max((f.mtime_ns for f in files), default=0)


def check_inputs(
    zone: RawZone, manifest: dict, window: Window, digest: Callable, seen: dict | None = None
) -> tuple[bool, str, dict | None]:
    """``(ok, reason, seen now)`` of the window's files against the manifest's, by content where metadata
    cannot be trusted; ``seen``: an earlier check's ``seen_inputs``; ``seen now``: what to remember, or None."""
    fingerprint, files = window.fingerprint, window.read
    side = seen if isinstance(seen, dict) and SEEN_KEYS <= seen.keys() else None  # a summary is only a cache
    resolution = zone.mtime_resolution_ns
    metadata_same = manifest.get("input_fingerprint") == fingerprint
    trusted = side is not None and newest_mtime(files) + resolution <= side["checked_ns"]
    if trusted and side["input_fingerprint"] == fingerprint:
        return True, "" if metadata_same else SAME_CONTENT, None
    hashes = manifest.get("input_hashes")
    if hashes is None:  # built without content hashes: metadata decides
        return (
            metadata_same,
            "" if metadata_same else "input changed: " + diff_inputs(manifest.get("inputs", []), files),
            None,
        )
    recorded = parse_inputs(manifest.get("inputs", []))
    known = dict(recorded)
    trusted_until = manifest.get("inputs_listed_ns", 0)
    if side is not None:
        known.update(parse_inputs(side["inputs"]))
        trusted_until = side["checked_ns"]
    names = {f.relpath for f in files}
    added, removed = names - set(recorded), set(recorded) - names
    suspects = [
        f
        for f in files
        if f.relpath in recorded
        and (known[f.relpath] != (f.size, f.mtime_ns) or f.mtime_ns + resolution > trusted_until)
    ]
    if not suspects and not added and not removed:
        return True, "", None
    checked_ns = time.time_ns()
    resized = {f.relpath for f in suspects if known[f.relpath][0] != f.size}
    same_size = [f for f in suspects if f.relpath not in resized]
    content, resent = set(), set()
    for f in same_size:
        if f.relpath in hashes:
            try:
                if digest(zone, f) != hashes[f.relpath]:
                    content.add(f.relpath)
            except RawFileChanged:  # what was read is not the version listed: its hash is not the listed one's
                resent.add(f.relpath)
    retimed = {f.relpath for f in same_size if f.relpath not in hashes and known[f.relpath] != (f.size, f.mtime_ns)}
    if added or removed or retimed or resent:  # every file whose content changed, or cannot be compared
        changes = describe_changes(added, removed, resized | content, retimed, resent)
        return False, "input changed: " + changes, None
    if content or resized:  # the same files, other bytes: said alike whether the size tells or the hash
        return False, "input content changed: " + ", ".join(sorted(content | resized)), None
    note = "" if metadata_same else SAME_CONTENT
    if newest_mtime(files) + resolution > checked_ns:  # re-sent in this instant: hashed again next time
        return True, note, None
    lines = [input_line(f) for f in files if recorded.get(f.relpath) != (f.size, f.mtime_ns)]
    return True, note, {"input_fingerprint": fingerprint, "inputs": lines, "checked_ns": checked_ns}


# -- failure records -------------------------------------------------------------------------------
def attempt(engine, node, decided_by: dict | None = None) -> dict:
    """The identity of a failed build attempt; ``decided_by``: settings that decided it without being rules."""
    window = engine.window(node)
    zone = engine.zone(node)
    read = [] if window is None else window.read  # a folder gone mid-build: what it read is not known
    return {
        "rules_fingerprint": node.rules_fingerprint(),
        "inputs": [input_line(f) for f in read],
        "input_hashes": {f.relpath: h for f in read if (h := zone.known_digest(f)) is not None},
        "upstream": engine.upstream_versions(node),
        "decided_by": dict(decided_by or {}),
    }


def failure_applies(engine, node, failure: dict) -> bool:
    """Whether a failure record still describes the partition: same rules, ``decided_by``, upstream versions
    and raw files by content; a record without an identity always applies."""
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
            try:
                if zone.digest_now(f) != hashes[f.relpath]:
                    return False
            except RawFileChanged:  # re-sent while it was read: not the attempt's file as far as anyone can tell
                return False
        elif before[f.relpath] != (f.size, f.mtime_ns):
            return False
    return True
