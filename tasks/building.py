"""The build of one partition, without Luigi (:func:`build`): the one template the Luigi task, a single-run
range and a preview call, what a build hands back (:class:`Built`) and the checks it must pass."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tasks import nextdate
from tasks.cores import start_on_side_thread
from tasks.freshness import dataversions
from tasks.freshness.buildplan import plan_build
from tasks.freshness.engine import Engine, label
from tasks.freshness.inputs import input_line
from tasks.freshness.node import Node
from tasks.reporting import runlog
from tasks.storage.errors import StorageUnavailable
from tasks.storage.store import PartitionStore

if TYPE_CHECKING:
    import pyarrow as pa


logger = logging.getLogger("luigi-interface")


@dataclass(frozen=True)
class Built:
    """What a task's build step hands back to the run() template."""

    table: pa.Table
    rejected: pa.Table | None = None
    stats: dict = field(default_factory=dict)
    extras: dict = field(default_factory=dict)  # file name -> bytes, written beside the data file
    file_rows: dict = field(default_factory=dict)  # raw file -> its rows the partition counts: a share per file


def build(node: Node, engine: Engine) -> dict | None:
    """Build ``node``'s partition under its lock; the manifest written, or None when it was up to date."""
    import tasks

    started, t0 = dt.datetime.now(dt.UTC), time.perf_counter()
    nextdate.next_date()
    listed_ns = time.time_ns()  # a raw file modified after this, within the clock resolution, is hashed
    where = label(node)  # staging/qsr_pos 2026-09-12: the partition as its messages name it
    plan = plan_build(node, engine, where)
    store: PartitionStore = node.store()
    if plan.up_to_date:
        logger.info("%s: up to date now that its upstream is rebuilt; nothing written", where)
        store.clear_failure(node.key)
        return None
    window = plan.window
    if window.refused:
        refused = "; ".join(f"{r['path']} ({r['reason']})" for r in window.refused)
        logger.warning("%s: %d raw file(s) of its window not read: %s", where, len(window.refused), refused)
    built = node.build(window.read)
    plan.check_inputs_unchanged(node)
    plan.check_rejects(node, built)
    plan.check_file_rejects(node, built)
    zone = node.zone()
    manifest = {  # what docs/run-semantics.md says a manifest records; the store adds the files it wrote
        "dataset": node.dataset,
        "business_date": node.key.isoformat() if node.key else None,
        "rules": node.rules(),
        "rules_fingerprint": node.rules_fingerprint(),
        "inputs": [input_line(f) for f in window.read],
        "input_fingerprint": window.fingerprint,
        "input_hashes": {f.relpath: zone.digest(f) for f in window.read},
        "inputs_listed_ns": listed_ns,
        "refused_inputs": window.refused,
        "upstream": plan.upstream,
        **({"upstream_keys": plan.upstream_keys} if plan.upstream_keys else {}),  # which keys' rows it read
        "row_count": built.table.num_rows,
        "rejected_count": 0 if built.rejected is None else built.rejected.num_rows,
        "stats": built.stats,
        "task_id": node.task_id,
        "package_version": tasks.__version__,
        "started_at": started.isoformat(),
        "settings_at": engine.settings_at_text(node),  # a host on settings older than these never replaces it
        "finished_at": dt.datetime.now(dt.UTC).isoformat(),
        "duration_s": round(time.perf_counter() - t0, 4),
        "data_version": start_on_side_thread(dataversions.logical_version, built.table),  # the store waits for it
        "data_version_kind": dataversions.LOGICAL,
        "built_by": built_by(),
    }
    with engine.replacing(store, node.key):
        written = store.commit_build(
            node.key, built.table, manifest, built.extras, rejected=built.rejected, in_place=plan.in_place
        )
    said = set(((plan.in_place or {}).get("stats") or {}).get("warnings") or ())  # by the build it replaced
    runlog.wrote(node.task_id, [w for w in built.stats.get("warnings") or () if w not in said])
    with contextlib.suppress(OSError, StorageUnavailable):  # committed: a failure record left counts for nothing
        store.clear_failure(node.key)
    logger.info(
        "%s: wrote %s rows (%s rejected) in %.2f s",
        node.task_id, manifest["row_count"], manifest["rejected_count"], manifest["duration_s"],
    )  # fmt: skip
    return written


def built_by() -> dict:
    """Who commits a manifest: ``[daybreak] host_name``, the process id and its Luigi worker ('' outside one)."""
    from tasks.luigi_shortcuts import worker_id
    from tasks.settings import host_name

    return {"host": host_name(), "pid": os.getpid(), "worker": worker_id()}
