"""What a build asks freshness once, under its partition's lock (:func:`plan_build`), and the checks before
its commit; a build that would undo a rollout (docs/scale-out.md) is refused before anything is read."""

from __future__ import annotations

from dataclasses import dataclass, field

from tasks.freshness.engine import Engine
from tasks.freshness.inputs import Window, diff_inputs, input_line
from tasks.freshness.node import Node
from tasks.freshness.rules import ROLL_BACK, diff_rules, newer_version


class NotReplaced(RuntimeError):
    """The partition is another rollout's to build; the run counts it as superseded (exit 10), not failed."""

    superseded = True


class RawInputChanged(RuntimeError):
    """A raw file of the window changed between the listing and the end of the read."""


class RejectShareExceeded(RuntimeError):
    """Too many rows failed the type rules; ``decided_by``, the limit, is part of the failure's identity."""

    def __init__(self, message: str, decided_by: dict | None = None):
        super().__init__(message)
        self.decided_by = decided_by or {}


FILE_REJECT_SHARE = 0.5  # a raw file with more of its rows rejected is broken: it fails its date (a hotel's)


@dataclass(frozen=True)
class BuildPlan:
    """What a build needs to decide, found before it reads anything."""

    up_to_date: bool  # another process built it, or its upstream was rebuilt to the same rows
    window: Window | None = None
    upstream: dict = field(default_factory=dict)  # each upstream partition's version now
    upstream_keys: dict = field(default_factory=dict)  # of each upstream with a version per key, those versions
    in_place: dict | None = None  # the manifest in place: its files may hold this build already
    list_again: bool = False  # the raw zone does not check reads against its listing

    def check_inputs_unchanged(self, node: Node) -> None:
        """Fail, writing nothing, when a fresh listing no longer gives the fingerprint taken before reading."""
        if not self.list_again:
            return
        after = Engine(stores_too=False).window(node)  # the raw zone anew; the data root as this pass listed it
        if after is None or after.fingerprint != self.window.fingerprint:
            changed = (
                "a raw folder disappeared"
                if after is None
                else diff_inputs([input_line(f) for f in self.window.read], after.read)
            )
            raise RawInputChanged(
                f"raw input changed while it was read ({changed}); nothing was written, "
                "the previous partition is kept. Rerun once the upload is complete."
            )

    def check_rejects(self, node: Node, built) -> None:
        """Fail the build when its rejected rows pass ``max_reject_share``, keeping them beside its failure record."""
        limit = node.max_reject_share()
        rejected = 0 if built.rejected is None else built.rejected.num_rows
        attributed = built.stats.get("attributed_rows")
        if limit is None or not attributed or rejected / attributed <= limit:
            return
        rows = built.rejected.slice(0, 5).to_pylist()
        examples = "; ".join(f"{r['source_file']} row {r['row_number']}: {r['reason']}" for r in rows)
        where = f"{node.dataset} {node.key}" if node.key else node.dataset
        share, limit_shown = percents(rejected / attributed, limit)
        kept = "the previous partition is kept" if self.in_place else "no partition was written"
        # the file of the most rejects first: the summary and the status view cut long messages
        raise RejectShareExceeded(
            f"{where}: {rejected} of {attributed} rows rejected ({share} > max_reject_share {limit_shown}): "
            f"{most_rejects(built.rejected)}; {kept}. All rejected rows: "
            f"{node.store().write_failed_rejects(node.key, built.rejected)}. For example: {examples}",
            decided_by=node.acceptance_settings(),
        )

    def check_file_rejects(self, node: Node, built) -> None:
        """Fail the build when the rejected rows of one raw file pass half of its rows (or ``max_reject_share``
        where higher), naming each such file (docs/datasets.md)."""
        share = node.max_reject_share()
        if share is None or not built.file_rows or built.rejected is None or not built.rejected.num_rows:
            return
        limit = max(share, FILE_REJECT_SHARE)
        import pyarrow.compute as pc

        rejected, rows = built.rejected, built.file_rows
        counts = {c["values"]: c["counts"] for c in pc.value_counts(rejected["source_file"]).to_pylist()}
        over = sorted(f for f, n in counts.items() if rows.get(f) and n / rows[f] > limit)
        if not over:
            return
        firsts = {f: rejected.filter(pc.equal(rejected["source_file"], f)).slice(0, 1).to_pylist()[0] for f in over}
        shares = [
            f"{counts[f]} of {rows[f]} rows of {f} rejected ({counts[f] / rows[f]:.1%}"
            + (f" > {limit:.0%} of a file's rows" if not k else "")
            + f"), e.g. row {firsts[f]['row_number']}: {firsts[f]['reason']}"
            for k, f in enumerate(over)
        ]
        where = f"{node.dataset} {node.key}" if node.key else node.dataset
        kept = "The previous partition is kept." if self.in_place else "No partition was written."
        raise RejectShareExceeded(
            f"{where}: {'; '.join(shares)}. All rejected rows: "
            f"{node.store().write_failed_rejects(node.key, rejected)}. {kept}",
            decided_by=node.acceptance_settings(),
        )


def most_rejects(rejected) -> str:
    """``697 in qsr_pos/2026-09-05/S004.csv, e.g. row 2: ...``: the file with the most rejects (the first tied)."""
    import pyarrow.compute as pc

    counts = pc.value_counts(rejected["source_file"]).to_pylist()  # in order of first appearance
    top = max(counts, key=lambda c: c["counts"])
    first = rejected.filter(pc.equal(rejected["source_file"], top["values"])).slice(0, 1).to_pylist()[0]
    return f"{top['counts']} in {top['values']}, e.g. row {first['row_number']}: {first['reason']}"


def percents(share: float, limit: float) -> tuple[str, str]:
    """``share`` and ``limit`` as percentages with as many decimals as it takes to tell them apart (``5.03%``)."""
    for places in range(1, 16):
        shown = f"{share:.{places}%}", f"{limit:.{places}%}"
        if shown[0] != shown[1]:
            return shown
    return f"{share:%}", f"{limit:%}"


def plan_build(node: Node, engine: Engine, where: str) -> BuildPlan:
    """The plan of ``node``'s build, under its lock, from its manifests and raw folders read again; ``where``
    names the partition in its messages."""
    engine.refresh(node)
    if engine.state(node).ok:
        return BuildPlan(up_to_date=True)
    store = node.store()
    in_place = engine.manifest(store, node.key)
    check_replaceable(node, engine, in_place, where)
    window = engine.window(node)
    if window is None:
        raise RuntimeError("a raw folder of its dependency window disappeared; rerun later")
    upstream = engine.upstream_versions(node)
    engine.fetch_next(node, window)
    keys = engine.upstream_key_versions(node)
    return BuildPlan(False, window, upstream, keys, in_place, list_again=not node.zone().reads_checked)


def check_replaceable(node: Node, engine: Engine, manifest: dict | None, where: str) -> None:
    """:class:`NotReplaced` for a partition built by newer code, committed by another writer with other rules
    since this run first looked, or built under other rules set later than this host's settings."""
    if not manifest or manifest.get("_corrupt"):
        return
    why = _newer_code(node, manifest, where)
    if why:
        raise NotReplaced(why)
    if manifest.get("rules_fingerprint") == node.rules_fingerprint():
        return  # the same rules: another writer read older inputs; replacing it undoes no rollout
    if engine.changed_since_first_look(node.store(), node.key):
        other = diff_rules(manifest.get("rules") or {}, node.rules(), node.key)
        raise NotReplaced(
            f"another host committed {where} (other rules: {other}) "
            "since this run began; not replaced. Rerun on the host with the rules you mean to keep"
        )
    why = _newer_settings(node, engine, manifest, where)
    if why:
        raise NotReplaced(why)


def left_to_newer(node: Node, engine: Engine, manifest: dict | None, where: str) -> str:
    """Why no build on this host may replace the partition in place (``manifest``, or its summary); ''."""
    if not manifest or manifest.get("_corrupt"):
        return ""
    if manifest.get("rules_fingerprint") == node.rules_fingerprint():
        return ""
    return _newer_code(node, manifest, where) or _newer_settings(node, engine, manifest, where)


def _newer_code(node: Node, manifest: dict, where: str) -> str:
    theirs, ours = (manifest.get("rules") or {}).get("version"), node.rules().get("version")
    if not newer_version(theirs, ours):
        return ""
    return (
        f"{where}: built by version {theirs}, newer than this host's {ours}: upgrade this host. Not replaced "
        "(nothing written by this run)"
    )


def _newer_settings(node: Node, engine: Engine, manifest: dict, where: str) -> str:
    newer = engine.newer_settings(node, manifest)
    return f"{where}: {newer}. Not replaced (nothing written by this run); to roll back, {ROLL_BACK}" if newer else ""
