"""The build of one partition, without Luigi: the run template the Luigi task, a single-run range and a
preview all call (:func:`build`), what a build hands back (:class:`Built`), the checks a build must pass, and
the memory a single-run range keeps across consecutive dates (:func:`kept_for_next_date`)."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tasks.cores import start_on_side_thread
from tasks.freshness import dataversions
from tasks.freshness.engine import Engine, diff_rules
from tasks.freshness.inputs import Window, diff_inputs, input_line
from tasks.reporting import runlog
from tasks.storage import partitions
from tasks.storage.errors import StorageUnavailable
from tasks.storage.partitions import PartitionStore

if TYPE_CHECKING:
    import pyarrow as pa

logger = logging.getLogger("luigi-interface")


class RawInputChanged(RuntimeError):
    """A raw file of the window changed between the listing and the end of the read."""


class NotReplaced(RuntimeError):
    """A build that must not replace the partition in place: another host committed it since this run first
    looked at it, with other rules, or a newer version of the dataset's code built it. The run counts it as
    superseded (exit 10), not failed (tasks/luigi_shortcuts/hosts.py)."""

    superseded = True


class RejectShareExceeded(RuntimeError):
    """Too many rows of a partition failed the type rules: the partition fails, the old one is kept.
    ``decided_by`` holds the limit exceeded: part of the failure's identity (a raised limit ends it)."""

    def __init__(self, message: str, decided_by: dict | None = None):
        super().__init__(message)
        self.decided_by = decided_by or {}


class KeptForNextDate:
    """What one date of a single-run range read and parsed, offered to the next date.

    Consecutive dates share raw folders (StgQsrPos reads folders d and d+1, so d+1 is read again for
    date d+1). Inside :class:`keeping_for_next_date`, :func:`kept_for_next_date` keeps each value for the
    date that computed it and the next one, keyed by what it was computed from (file names, sizes and
    mtimes): two generations, so memory holds at most two dates' worth. Outside it,
    :func:`kept_for_next_date` just computes.
    """

    def __init__(self):
        self.previous: dict = {}
        self.current: dict = {}

    def next_date(self) -> None:
        self.previous, self.current = self.current, {}


_kept: KeptForNextDate | None = None


def kept_for_next_date(key, compute):
    """``compute()``, or its value from the previous date of a single-run range (same key)."""
    if _kept is None:
        return compute()
    if key not in _kept.current:
        _kept.current[key] = _kept.previous.pop(key) if key in _kept.previous else compute()
    return _kept.current[key]


def keeps_for_next_date() -> bool:
    """Whether this process is inside :class:`keeping_for_next_date` (a single-run range)."""
    return _kept is not None


class keeping_for_next_date:
    """Context manager for a single-run range: :func:`kept_for_next_date` remembers across consecutive dates."""

    def __enter__(self) -> KeptForNextDate:
        global _kept
        _kept = KeptForNextDate()
        return _kept

    def __exit__(self, *exc) -> None:
        global _kept
        _kept = None


@dataclass(frozen=True)
class Built:
    """What a task's build step hands back to the run() template."""

    table: pa.Table
    rejected: pa.Table | None = None
    stats: dict = field(default_factory=dict)
    extras: dict = field(default_factory=dict)  # file name -> bytes, written beside the data file


def check_built(node, built: Built) -> None:
    """Fail the build when its rejected rows pass the node's ``max_reject_share`` (the previous partition and
    its quarantine are kept; the rejected rows of the failed build are kept beside its failure record)."""
    limit = node.max_reject_share()
    rejected = 0 if built.rejected is None else built.rejected.num_rows
    attributed = built.stats.get("attributed_rows")
    if limit is None or not attributed or rejected / attributed <= limit:
        return
    rows = built.rejected.slice(0, 5).to_pylist()
    examples = "; ".join(f"{r['source_file']} row {r['row_number']}: {r['reason']}" for r in rows)
    where = f"{node.dataset} {node.key}" if node.key else node.dataset
    raise RejectShareExceeded(
        f"{where}: {rejected} of {attributed} rows rejected ({rejected / attributed:.1%} > "
        f"max_reject_share {limit:.1%}), e.g. {examples}. All rejected rows: "
        f"{node.store().write_failed_rejects(node.key, built.rejected)}. The previous partition is kept.",
        decided_by=node.acceptance_settings(),
    )


@dataclass
class Manifest:
    """What a partition's manifest records of its build (docs/run-semantics.md): its rules, the raw files it
    read (with their content hashes) and refused, the upstream versions it read, counts and times. The store
    adds the files it wrote (``data_files``, ``quarantine``) when it writes it."""

    dataset: str
    business_date: str | None
    rules: dict
    rules_fingerprint: str
    inputs: list[str]
    input_fingerprint: str
    input_hashes: dict[str, str]
    inputs_listed_ns: int
    refused_inputs: list[dict]
    upstream: dict
    row_count: int
    rejected_count: int
    stats: dict
    task_id: str
    package_version: str
    started_at: str
    finished_at: str = ""
    duration_s: float = 0.0
    data_version: str = ""
    data_version_kind: str = ""
    built_by: dict = field(default_factory=dict)  # host, pid and Luigi worker of the process that commits it

    def as_dict(self) -> dict:
        """The manifest as stores write it."""
        return dict(self.__dict__)


def build(node, engine: Engine) -> dict | None:
    """The build of ``node``'s partition, under its lock: re-check it (another process may have built it),
    read its window, run its transform and the checks, then write the partition and its manifest through
    its store (only the manifest when the files in place already hold this build). The manifest written,
    or None when the partition was up to date."""
    import tasks

    started, t0 = dt.datetime.now(dt.UTC), time.perf_counter()
    listed_ns = time.time_ns()  # a raw file modified after this, within the clock resolution, is hashed
    engine.refresh(node)  # under the lock: what this build reads, as it is now (not the memo)
    store = node.store()
    if engine.state(node).ok:
        # Luigi scheduled this because an upstream partition was stale; rebuilt, its data came out
        # the same (or another worker got here first). Nothing to recompute, nothing to rewrite.
        logger.info("%s: up to date now that its upstream is rebuilt; nothing written", node.task_id)
        store.clear_failure(node.key)
        return None
    check_replaceable(node, engine, store)
    window = engine.window(node)
    if window is None:
        raise RuntimeError(f"{node.task_id}: a raw folder of its dependency window disappeared; rerun later")
    inputs = window.read
    if window.refused:  # also in the manifest (refused_inputs) and in `daybreak status`
        refused = "; ".join(f"{r['path']} ({r['reason']})" for r in window.refused)
        logger.warning("%s: %d raw file(s) of its window not read: %s", node.task_id, len(window.refused), refused)
    upstream = engine.upstream_versions(node)
    engine.fetch_next(node, window)  # a bucket: the next date's new inputs come in while this one builds
    built = node.build(inputs)
    if not node.zone().reads_checked:  # a bucket's reads checked each object against its listing
        check_inputs_unchanged(node, window)
    zone, previous = node.zone(), engine.manifest(store, node.key)
    node.check_built(built)
    manifest = Manifest(
        dataset=node.dataset,
        business_date=node.key.isoformat() if node.key else None,
        rules=node.rules(),
        rules_fingerprint=node.rules_fingerprint(),
        inputs=[input_line(f) for f in inputs],
        input_fingerprint=window.fingerprint,
        input_hashes={f.relpath: zone.digest(f) for f in inputs},
        inputs_listed_ns=listed_ns,
        refused_inputs=window.refused,
        upstream=upstream,
        row_count=built.table.num_rows,
        rejected_count=0 if built.rejected is None else built.rejected.num_rows,
        stats=built.stats,
        task_id=node.task_id,
        package_version=tasks.__version__,
        started_at=started.isoformat(),
        built_by=built_by(),
    )
    manifest.finished_at = dt.datetime.now(dt.UTC).isoformat()
    manifest.duration_s = round(time.perf_counter() - t0, 4)
    # the rows' version, hashed on another core while the files are written; a partition in place
    # needs it first (are its files this build already?)
    version = start_on_side_thread(dataversions.logical_version, built.table)
    manifest.data_version, manifest.data_version_kind = version.result() if previous else version, dataversions.LOGICAL
    written = manifest.as_dict()
    if previous and files_in_place(store, node.key, previous, built, manifest.data_version):
        # the data, the files beside it and the quarantine already hold this build: kept as they are,
        # the manifest alone is replaced
        written.update(data_files=previous["data_files"], quarantine=previous.get("quarantine"))
        store.update_manifest(node.key, written)
        store.drop_strays(node.key, written)  # a write of the files does it after its manifest
    else:  # the store waits for what is still being hashed (layout.resolve_futures) before it writes the manifest
        written = store.write(node.key, built.table, written, built.extras, rejected=built.rejected)
    runlog.wrote(node.task_id, manifest.stats.get("warnings"))
    # committed: nothing after this fails the partition (a failure record that cannot be removed now is
    # older than the manifest, and counts for nothing)
    with contextlib.suppress(OSError, StorageUnavailable):
        store.clear_failure(node.key)
    logger.info(
        "%s: wrote %s rows (%s rejected) in %.2f s",
        node.task_id, manifest.row_count, manifest.rejected_count, manifest.duration_s,
    )  # fmt: skip
    return written


def check_replaceable(node, engine: Engine, store: PartitionStore) -> None:
    """Refuse (:class:`NotReplaced`) to replace a partition that a newer version of the dataset's code built,
    or that another writer committed with other rules since this run first looked at it: a host left on
    old rules or old code must never undo a rollout (docs/scale-out.md). Called under the partition's lock
    (or lease), after the re-check found the partition not up to date."""
    manifest = engine.manifest(store, node.key)
    if not manifest or manifest.get("_corrupt"):
        return
    where = f"{node.dataset} {node.key}" if node.key else node.dataset
    theirs, ours = (manifest.get("rules") or {}).get("version"), node.rules().get("version")
    if _newer(theirs, ours):
        raise NotReplaced(
            f"{where}: built by version {theirs}; this host has {ours}: upgrade it. Not replaced "
            "(nothing written by this run)"
        )
    looked, stamp = engine.seen_first(store, node.key)
    if not looked or stamp == store.manifest_stamp(node.key):
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


def built_by() -> dict:
    """Who commits a manifest: ``[daybreak] host_name`` (the machine's host name by default), this process's
    id and the Luigi worker it runs for ('' outside a Luigi run)."""
    from tasks.luigi_shortcuts import worker_id
    from tasks.settings import host_name

    return {"host": host_name(), "pid": os.getpid(), "worker": worker_id()}


def check_inputs_unchanged(node, before: Window) -> None:
    """Fail, writing nothing, when a raw file changed while the partition read it (still being
    uploaded, re-sent mid-read): a fresh listing must give the fingerprint taken before reading."""
    after = Engine().window(node)
    if after is None or after.fingerprint != before.fingerprint:
        changed = (
            "a raw folder disappeared"
            if after is None
            else diff_inputs([input_line(f) for f in before.read], after.read)
        )
        raise RawInputChanged(
            f"{node.task_id}: raw input changed while it was read ({changed}); nothing was written, "
            "the previous partition is kept. Rerun once the upload is complete."
        )


def files_in_place(store: PartitionStore, key, previous: dict | None, built: Built, version: str) -> bool:
    """Whether the partition's files in place hold exactly ``built``: its rows (the data version, the
    files intact), each file beside the data byte for byte (stg_qsr_pos's store totals), and its
    quarantine as it would be written (none when there are no rejects). Then a rebuild that changed
    nothing (a rule change that moves no row of this date) writes nothing but its manifest."""
    import hashlib

    if not dataversions.same_rows(store, key, previous, version):
        return False
    recorded = {f["name"]: f.get("sha256") for f in previous.get("data_files", [])}
    if set(recorded) != {partitions.DATA_FILE, *built.extras}:
        return False
    if any(recorded[name] != hashlib.sha256(content).hexdigest() for name, content in built.extras.items()):
        return False
    quarantine, rejected = previous.get("quarantine"), built.rejected
    if rejected is None or rejected.num_rows == 0:
        return not quarantine
    return (
        bool(quarantine)
        and quarantine.get("rows") == rejected.num_rows
        and quarantine.get("sha256") == partitions.parquet_sha256(rejected)
    )
