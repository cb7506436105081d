"""What a build asks freshness, once, under its partition's lock (:func:`plan_build`): is there anything to
build, which raw files to read, which upstream versions to record, the manifest in place, and what to check
before the partition is replaced. A build that must not replace the partition in place is refused here,
before anything is read (docs/scale-out.md, "A rollout cannot be undone")."""

from __future__ import annotations

from dataclasses import dataclass, field

from tasks.freshness.engine import Engine, diff_rules
from tasks.freshness.inputs import Window, diff_inputs, input_line
from tasks.freshness.node import Node


class NotReplaced(RuntimeError):
    """A build that must not replace the partition in place: another host committed it since this run first
    looked at it, with other rules, or a newer version of the dataset's code built it. The run counts it as
    superseded (exit 10), not failed (tasks/luigi_shortcuts/hosts.py)."""

    superseded = True


class RawInputChanged(RuntimeError):
    """A raw file of the window changed between the listing and the end of the read."""


@dataclass(frozen=True)
class BuildPlan:
    """What a build needs to decide, found before it reads anything."""

    up_to_date: bool  # nothing to build: another process built it, or its upstream was rebuilt to the same rows
    window: Window | None = None  # the raw files to read, and those refused
    upstream: dict = field(default_factory=dict)  # each upstream partition's version now (for the manifest)
    in_place: dict | None = None  # the manifest of the partition in place: its files may hold this build already
    list_again: bool = False  # the raw zone does not check a read against its listing: list the window again

    def check_inputs_unchanged(self, node: Node) -> None:
        """Fail, writing nothing, when a raw file changed while the partition read it (still being uploaded,
        re-sent mid-read): a fresh listing must give the fingerprint taken before reading. (A bucket checks
        each object it reads against its listing: nothing to do.)"""
        if not self.list_again:
            return
        after = Engine().window(node)
        if after is None or after.fingerprint != self.window.fingerprint:
            changed = (
                "a raw folder disappeared"
                if after is None
                else diff_inputs([input_line(f) for f in self.window.read], after.read)
            )
            raise RawInputChanged(
                f"{node.task_id}: raw input changed while it was read ({changed}); nothing was written, "
                "the previous partition is kept. Rerun once the upload is complete."
            )


def plan_build(node: Node, engine: Engine) -> BuildPlan:
    """The plan of ``node``'s build, under its lock: its own manifest, raw folders and upstream manifests read
    again (another process may have built it), its state; when not up to date, whether it may be replaced
    (:class:`NotReplaced`), its window (a folder gone: RuntimeError), and the next date's inputs fetched ahead
    on a bucket while this one builds."""
    engine.refresh(node)  # what this build reads, as it is now (not the memo)
    if engine.state(node).ok:
        return BuildPlan(up_to_date=True)
    store = node.store()
    in_place = engine.manifest(store, node.key)
    check_replaceable(node, engine, in_place)
    window = engine.window(node)
    if window is None:
        raise RuntimeError(f"{node.task_id}: a raw folder of its dependency window disappeared; rerun later")
    upstream = engine.upstream_versions(node)
    engine.fetch_next(node, window)
    return BuildPlan(False, window, upstream, in_place, list_again=not node.zone().reads_checked)


def check_replaceable(node: Node, engine: Engine, manifest: dict | None) -> None:
    """Refuse (:class:`NotReplaced`) to replace a partition (its ``manifest``) that a newer version of the
    dataset's code built, or that another writer committed with other rules since this run first looked at
    it: a host left on old rules or old code must never undo a rollout (docs/scale-out.md)."""
    if not manifest or manifest.get("_corrupt"):
        return
    where = f"{node.dataset} {node.key}" if node.key else node.dataset
    theirs, ours = (manifest.get("rules") or {}).get("version"), node.rules().get("version")
    if _newer(theirs, ours):
        raise NotReplaced(
            f"{where}: built by version {theirs}; this host has {ours}: upgrade it. Not replaced "
            "(nothing written by this run)"
        )
    if not engine.changed_since_first_look(node.store(), node.key):
        return
    if manifest.get("rules_fingerprint") == node.rules_fingerprint():
        return  # the same rules: the other writer read older inputs; replacing it undoes no rollout
    raise NotReplaced(
        f"another host committed {where} (other rules: {diff_rules(manifest.get('rules') or {}, node.rules())}) "
        "since this run began; not replaced. Rerun on the host with the rules you mean to keep"
    )


def _newer(theirs, ours) -> bool:
    """Whether transform version ``theirs`` (``stg_qsr_pos/7``) is newer than ``ours`` (``stg_qsr_pos/6``)."""
    (name_a, a), (name_b, b) = str(theirs).rpartition("/")[::2], str(ours).rpartition("/")[::2]
    return name_a == name_b and a.isdigit() and b.isdigit() and int(a) > int(b)
