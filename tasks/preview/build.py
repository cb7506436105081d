"""Building a preview: its partitions through Luigi into the shadow root, then the diff of each against production."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import secrets
import sys
import time

from tasks import settings
from tasks.downstream import stale_downstream
from tasks.freshness import engine as freshness
from tasks.guard import check_range
from tasks.preview.publish import sweep
from tasks.preview.records import (
    EXIT_FAILED,
    EXIT_NOT_RUN,
    HORIZON_DAYS,
    PUBLISH_LOCK,
    manifest_sha,
    manifest_sha_at,
    partition_date,
    partition_rel,
    previews_root,
    shadow_partitions,
    spec_of,
    store_at,
    task_for,
    write_record,
)
from tasks.preview.select import tasks_to_build
from tasks.storage import partitions
from tasks.storage.partitions import plain_store
from tasks.transforms.diff import diff_partition, total


def make(dataset: str, start: dt.date, stop: dt.date, workers: int = 1) -> tuple[dict, int]:
    """Build the preview of ``RangeDaily --of <dataset>`` over ``[start, stop)``; return its record and the
    exit code. An error that stops the preview itself removes it and is raised."""
    check_range(start, stop, "preview")
    data_root = settings.data_uri()
    sweep()
    pid = f"{dataset}-{start:%Y%m%d}-{stop:%Y%m%d}-{secrets.token_hex(3)}"
    shadow = previews_root(data_root).child(pid)
    shadow.mkdir()
    try:  # held while it builds: `previews` never sweeps, nor `discard` deletes, a preview being built
        with shadow.exclusive(PUBLISH_LOCK, f"preview {pid}", wait_s=0):
            record, code = _make(dataset, start, stop, workers, data_root, pid, shadow)
        if not any(record.get(k) for k in ("partitions", "failed", "not_run", "not_built")):
            shadow.remove()  # nothing to publish: no preview is kept, listed, or named by plan
            record["state"] = "not kept"
        return record, code
    except BaseException:  # a crash, a full or read-only disk: no preview is left "building" to be swept later
        with contextlib.suppress(Exception):
            shadow.remove()
        raise


def _make(dataset: str, start: dt.date, stop: dt.date, workers: int, data_root: str, pid: str, shadow):
    import luigi

    record = {
        "id": pid, "dataset": dataset, "start": start.isoformat(), "stop": stop.isoformat(),
        "created_at": dt.datetime.now(dt.UTC).isoformat(), "state": "building", "data_root": str(data_root),
    }  # fmt: skip
    write_record(shadow, record)
    t0 = time.perf_counter()
    with settings.snapshot():
        roots, waiting = tasks_to_build(dataset, start, stop)
        held: list = []
        later = stale_downstream(roots, dataset, start, stop, HORIZON_DAYS, held) if roots else []
        held = [(t, _held_why(up, {h.task_id for h, _ in held}, start, stop, data_root)) for t, up in held]
        before = {partition_rel(t.store(), t.key, data_root): manifest_sha(t.store(), t.key) for t in [*roots, *later]}
    not_run: list[dict] = []
    built: list[str] = []
    if roots:
        with partitions.shadowed(data_root, shadow.uri), contextlib.redirect_stdout(sys.stderr):
            freshness.new_pass()
            luigi.build([*roots, *later], workers=workers, local_scheduler=True, detailed_summary=True)
            built = shadow_partitions(shadow)
            with settings.snapshot():
                not_run = _not_run([*roots, *later], data_root, set(built))
        freshness.new_pass()  # what this process remembers of the shadow view is not production's
        named = {n["partition"] for n in not_run}
        not_run += [  # another run wrote it meanwhile: the preview found it up to date, or compares with it
            {"partition": rel, "reason": "production changed while the preview ran (another run wrote it)"}
            for rel, sha in before.items()
            if rel not in named and manifest_sha_at(rel, data_root) != sha
        ]
    built_s = time.perf_counter() - t0
    with settings.snapshot():
        diffs = _diffs(built, data_root, shadow, workers)
    record.update(
        state="open",
        build_s=round(built_s, 3),
        diff_s=round(time.perf_counter() - t0 - built_s, 3),
        partitions=[
            {
                "folder": rel,
                "dataset": spec_of(rel).name,
                "replaces": before[rel] if rel in before else manifest_sha_at(rel, data_root),
            }
            for rel in built
        ],
        waiting=[{"date": d.isoformat(), "reason": why} for d, why in waiting],
        not_built=[{"partition": partition_rel(t.store(), t.key, data_root), "reason": why} for t, why in held],
        failed=_failures(shadow),
        not_run=not_run,
        datasets=_by_dataset(built, diffs),
    )
    write_record(shadow, record)
    return record, EXIT_FAILED if record["failed"] else EXIT_NOT_RUN if not_run or record["not_built"] else 0


def _held_why(up, held: set[str], start: dt.date, stop: dt.date, data_root: str) -> str:
    """Why a downstream partition that reads ``up`` is not built: ``up`` is not built either, or is
    neither in the preview nor up to date."""
    rel = partition_rel(up.store(), up.key, data_root)
    if up.task_id in held:
        return f"reads {rel}, not built either"
    if why := freshness.process_engine().waiting_for(up):  # the pass that chose the partitions
        return f"also reads {rel}, which waits for raw data: {why}"
    where = "outside the range" if up.key is None or not start <= up.key < stop else "not in the preview"
    return f"also reads {rel}, {where} and not up to date"


def _not_run(tasks: list, data_root: str, built: set[str]) -> list[dict]:
    """The partitions the preview was to build that Luigi left "not run" in the shadow view, or that it
    ``built`` from raw files changed since."""
    engine = freshness.new_pass()
    out = []
    for task in tasks:
        state = engine.state(task)
        if state.ok or task.store().read_failure(task.key) is not None:
            continue
        rel = partition_rel(task.store(), task.key, data_root)
        how = "built, but now" if rel in built else "not run"
        why = engine.waiting_for(task) or f"{how} ({state.state}: {state.reason or 'no partition'})"
        out.append({"partition": rel, "reason": why})
    return out


def _diffs(built: list[str], data_root: str, shadow, workers: int) -> dict[str, dict]:
    """The diff of each built partition against production, a thread per worker."""
    from concurrent.futures import ThreadPoolExecutor

    def one(rel: str) -> dict:
        spec = spec_of(rel)
        production, date = store_at(rel, data_root), partition_date(rel)
        mine = plain_store(shadow.uri, production.dataset, production.sub)
        manifest = mine.read_manifest(date) or {}
        names = [f["name"] for f in manifest.get("data_files", []) if f["name"].endswith(".parquet")]
        after = mine.read_table(date) if names else None
        old = production.read_manifest(date)
        version = None if old is None or old.get("_corrupt") else old.get("data_version", "")
        if version and version == manifest.get("data_version") and after is not None:
            before = after  # the same rows (logical data version): nothing to read twice
        else:
            try:
                before = production.read_table(date) if version is not None else None
            except FileNotFoundError:
                before = None
            except (OSError, ValueError) as exc:  # production's partition is damaged: the preview replaces it
                why = str(exc).splitlines()[0][:160]
                note = f"production's partition could not be read ({why}): every row counted as added"
                return {**diff_partition(None, after, spec.key, spec.measure), "note": note}
        if after is None and before is None:
            return dict.fromkeys(("rows_before", "rows_after", "added", "removed", "changed"), 0)
        return diff_partition(before, after, spec.key, spec.measure)

    with ThreadPoolExecutor(max(1, workers)) as pool:
        return dict(zip(built, pool.map(one, built), strict=True))


def _by_dataset(built: list[str], diffs: dict[str, dict]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for rel in built:
        spec = spec_of(rel)
        task = task_for(rel)
        entry = out.setdefault(spec.name, {"key": list(spec.key), "measure": spec.measure, "partitions": []})
        sub = rel[len(spec.path) :].strip("/")
        date = task.key.isoformat() if task.key else None
        entry["partitions"].append({"date": date, "partition": sub, **diffs[rel]})
    for entry in out.values():
        entry["totals"] = total(entry["partitions"])
    return out


def _failures(shadow) -> list[dict]:
    out = []
    for rel in sorted(shadow.files("_state/failures")):
        if rel.endswith(".json"):
            rec = json.loads(shadow.read(rel))
            partition = rel[len("_state/failures/") : -len(".json")].replace("/business_date=", " ")
            out.append(
                {"task_id": rec.get("task_id"), "partition": partition, "error": str(rec.get("error", ""))[:500]}
            )
    return out
