"""Previews: build what a backfill would change into a shadow root, show the difference, then publish
it (write-audit-publish) or discard it. docs/backfills.md, "Preview, then publish".

A preview of ``DATASET`` over ``[start, stop)`` lives in ``<data_root>/_state/preview/<id>/``:

* ``preview.json``: the range, what was built, the production manifest each built partition would
  replace (its sha256, or null when there is none), the diff, and the state (open, published);
* the shadow root: the same layout as the data root (``staging/...``, ``quarantine/...``,
  ``_state/failures``...), holding only the partitions the preview built.

The builds are the tasks' own (Luigi, the one run template) inside :func:`tasks.storage.partitions.shadowed`:
every store of the production data root writes to the shadow and reads a partition from there when
the shadow holds it, from production otherwise. Production is never written by a preview.
Publishing hard-links each partition's files next to their production place and renames them in,
the manifest last (:meth:`tasks.storage.partitions.PartitionStore.adopt`), upstream datasets first.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import re
import secrets
import sys
import time

from tasks import catalogue, settings
from tasks.calendar import date_range
from tasks.freshness import engine as freshness
from tasks.guard import check_range
from tasks.storage import partitions
from tasks.storage.partitions import MANIFEST, PartitionStore, plain_store
from tasks.storage.roots import open_root
from tasks.transforms.diff import diff_partition, total

RECORD = "preview.json"
PUBLISH_LOCK = "_publish.lock"
HORIZON_DAYS = 7  # downstream dates looked at past the range (a look-back's window)
ID_PATTERN = re.compile(r"^[a-z0-9_]+-\d{8}-\d{8}-[0-9a-f]{6}$")
EXIT_FAILED = 30  # a partition of the preview failed (the others built): Luigi's task_failed
EXIT_NOT_RUN = 25  # a partition of the preview was not built, none failed: Luigi's not_run


class PreviewError(RuntimeError):
    """A preview that does not exist, or that cannot be published; the message says why."""


def previews_root(data_root: str | None = None):
    """``<data_root>/_state/preview`` (:mod:`tasks.storage.roots`: a folder, or a prefix of the bucket)."""
    return open_root(data_root or settings.data_uri()).child("_state/preview")


def folder_of(pid: str, data_root: str | None = None):
    if not ID_PATTERN.match(pid):
        raise PreviewError(f"{pid!r} is not a preview id (see `daybreak previews`)")
    folder = previews_root(data_root).child(pid)
    if not folder.exists(RECORD):
        raise PreviewError(f"no preview {pid} under {previews_root(data_root).uri} (see `daybreak previews`)")
    return folder


def read_record(folder) -> dict:
    return json.loads(folder.read(RECORD))


def write_record(folder, record: dict) -> None:
    folder.write(RECORD, json.dumps(record, indent=1, default=str).encode())


def manifest_sha(store: PartitionStore, date: dt.date | None) -> str | None:
    try:
        return hashlib.sha256(store.read_file(date, MANIFEST)).hexdigest()
    except (FileNotFoundError, NotADirectoryError):
        return None


# -- which partitions ---------------------------------------------------------------------------------
def spec_of(relfolder: str) -> catalogue.DatasetSpec:
    """The dataset a partition folder (relative to a data root) belongs to: the longest path prefix."""
    specs = [d for d in catalogue.DATASETS if relfolder == d.path or relfolder.startswith(d.path + "/")]
    if not specs:
        raise PreviewError(f"{relfolder}: not a folder of any dataset of tasks/catalogue.py")
    return max(specs, key=lambda d: len(d.path))


def task_for(relfolder: str):
    """The task that builds the partition in ``relfolder`` (e.g. ``marts/hotel_pickup/business_date=
    2026-09-01/hotel_id=H1``)."""
    spec = spec_of(relfolder)
    levels = dict(p.split("=", 1) for p in relfolder[len(spec.path) :].strip("/").split("/") if "=" in p)
    params: dict = {}
    if "business_date" in levels and spec.partition in ("date", "date x hotel"):
        params["date"] = dt.date.fromisoformat(levels["business_date"])
    if "hotel_id" in levels:
        params["hotel"] = levels["hotel_id"]
    if "store_id" in levels:
        params["store_id"] = levels["store_id"]
    return spec.task_class()(**params)


def _not_ok(dataset: str, start: dt.date, stop: dt.date) -> tuple[list, list[tuple[dt.date, str]]]:
    """Tasks of the range a RangeDaily would build (missing or stale), and the dates waiting for raw data."""
    from tasks.backfill import before_start, left_out

    cls = catalogue.BY_NAME[dataset].task_class()
    later, why_later = left_out("RangeDaily", cls, start, stop)  # not begun yet: RangeDaily leaves them out
    earlier, _ = before_start(start, stop)  # before start_date: every range leaves them out, kept as built
    engine = freshness.new_pass()
    build, waiting = [], [(day, why_later) for day in later]
    for day in date_range(start, stop):
        if day in later or day in earlier:
            continue
        task = cls(date=day)
        if engine.state(task).ok:
            continue
        why = engine.waiting_for(task)
        if why:
            waiting.append((day, why))
        else:
            build.append(task)
    return build, waiting


def _candidates(dataset: str, start: dt.date, stop: dt.date) -> list:
    """Partitions of the other datasets that may read what the range rebuilds, directly or not."""
    horizon = stop + dt.timedelta(days=HORIZON_DAYS)
    return [task for spec in catalogue.DATASETS if spec.name != dataset for task in spec.partitions(start, horizon)]


def downstream(rebuilt: list, dataset: str, start: dt.date, stop: dt.date, held: list | None = None) -> list:
    """Built partitions that read a rebuilt one, directly or through another: the ones that would go
    stale once the rebuild is published (to a fixed point, within the range and HORIZON_DAYS after).

    One that also reads a partition of ``dataset`` outside ``[start, stop)`` that is not up to date (a
    store's mart reads every date of its store) is not built: Luigi would build those dates too, into
    the preview, and the preview is of the range. It goes to ``held`` as (task, the date it waits on)."""
    ids = {t.task_id for t in rebuilt}
    root = type(rebuilt[0]) if rebuilt else None
    engine = freshness.new_pass()
    pending = [t for t in _candidates(dataset, start, stop) if engine.manifest(engine.store(t), t.key) is not None]
    found, grew = [], True
    while grew:
        grew = False
        for task in list(pending):
            upstream = task.upstream()
            if any(up.task_id in ids for up in upstream):
                pending.remove(task)
                grew = True
                outside = [
                    up
                    for up in upstream
                    if type(up) is root and not start <= up.date < stop and not engine.state(up).ok
                ]
                if outside:
                    if held is not None:
                        held.append((task, outside[0]))
                    continue
                ids.add(task.task_id)
                found.append(task)
    return found


def shadow_partitions(shadow) -> list[str]:
    """Folders (relative to the shadow root) of every partition the shadow holds, upstream datasets
    first (catalogue order), then by folder name (dates in order)."""
    order = {d.path: i for i, d in enumerate(catalogue.DATASETS)}
    found = [
        rel.rpartition("/")[0]
        for rel in shadow.files()
        if rel.endswith(f"/{MANIFEST}") and not rel.startswith(("_", ".", "quarantine/"))
    ]
    return sorted(found, key=lambda rel: (order.get(spec_of(rel).path, 99), rel))


# -- building a preview ----------------------------------------------------------------------------------
def make(dataset: str, start: dt.date, stop: dt.date, workers: int = 1) -> tuple[dict, int]:
    """Build the preview of ``RangeDaily --of <dataset>`` over ``[start, stop)``; return its record and
    the exit code (0 built, 30 a partition failed, 25 one not built). An error that stops the preview
    itself (a full or read-only disk) removes it and is raised."""
    check_range(start, stop, "preview")
    data_root = settings.data_uri()
    sweep(data_root)
    pid = f"{dataset}-{start:%Y%m%d}-{stop:%Y%m%d}-{secrets.token_hex(3)}"
    shadow = previews_root(data_root).child(pid)
    shadow.mkdir()
    try:  # held while it builds: `previews` never sweeps, nor `discard` deletes, a preview being built
        with shadow.exclusive(PUBLISH_LOCK, f"preview {pid}", wait_s=0):
            return _make(dataset, start, stop, workers, data_root, pid, shadow)
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
        roots, waiting = _not_ok(dataset, start, stop)
        held: list = []
        later = downstream(roots, dataset, start, stop, held) if roots else []
        before = {_rel(t.store(), t.key, data_root): manifest_sha(t.store(), t.key) for t in [*roots, *later]}
    not_run: list[dict] = []
    if roots:
        with partitions.shadowed(data_root, shadow.uri), contextlib.redirect_stdout(sys.stderr):
            freshness.new_pass()
            luigi.build([*roots, *later], workers=workers, local_scheduler=True, detailed_summary=True)
            with settings.snapshot():
                not_run = _not_run([*roots, *later], data_root)
        freshness.new_pass()  # what this process remembers of the shadow view is not production's
    built_s = time.perf_counter() - t0
    built = shadow_partitions(shadow)
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
                "replaces": before[rel] if rel in before else _sha_now(rel, data_root),
            }
            for rel in built
        ],
        waiting=[{"date": d.isoformat(), "reason": why} for d, why in waiting],
        not_built=[
            {
                "partition": _rel(t.store(), t.key, data_root),
                "reason": f"also reads {_rel(up.store(), up.key, data_root)}, outside the range and not up to date",
            }
            for t, up in held
        ],
        failed=_failures(shadow),
        not_run=not_run,
        datasets=_by_dataset(built, diffs),
    )
    write_record(shadow, record)
    return record, EXIT_FAILED if record["failed"] else EXIT_NOT_RUN if not_run else 0


def _not_run(tasks: list, data_root: str) -> list[dict]:
    """The partitions the preview was to build that are still not up to date in the shadow view and
    have no failure record there: Luigi left them "not run" (a partition they read failed, no worker).
    Asked of a new pass inside :func:`partitions.shadowed`."""
    engine = freshness.new_pass()
    out = []
    for task in tasks:
        state = engine.state(task)
        if state.ok or task.store().read_failure(task.key) is not None:
            continue
        why = engine.waiting_for(task) or f"not run ({state.state}: {state.reason or 'no partition'})"
        out.append({"partition": _rel(task.store(), task.key, data_root), "reason": why})
    return out


def _rel(store: PartitionStore, date: dt.date | None, data_root: str) -> str:
    return plain_store(data_root, store.dataset, store.sub).rel(date)


def _sha_now(rel: str, data_root: str) -> str | None:
    task = task_for(rel)
    return manifest_sha(task.store(), task.key)


def _diffs(built: list[str], data_root: str, shadow, workers: int) -> dict[str, dict]:
    """The diff of each built partition against production (pyarrow reads and joins outside the GIL:
    one thread per worker)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(rel: str) -> dict:
        spec = spec_of(rel)
        production, date = _production(rel, data_root), _date(rel)
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
            out.append({"task_id": rec.get("task_id"), "error": str(rec.get("error", ""))[:500]})
    return out


# -- publishing --------------------------------------------------------------------------------------------
def problems(record: dict, folder) -> tuple[list[str], list[str]]:
    """(partitions still to publish, reasons the preview cannot be published). A partition whose
    production manifest is the preview's own is published already (a resumed publish skips it)."""
    data_root = record["data_root"]
    if record.get("state") == "published":
        return [], []
    if record.get("state") not in ("open", "publishing"):
        return [], [f"the preview is {record.get('state')}, not open"]
    if record.get("failed"):
        return [], [
            f"{len(record['failed'])} partition(s) failed in the preview, e.g. {record['failed'][0]['task_id']}"
        ]
    if record.get("not_run"):
        first = record["not_run"][0]
        return [], [
            f"{len(record['not_run'])} partition(s) of the preview were not built, e.g. {first['partition']} "
            f"({first['reason']}); make a new preview"
        ]
    todo, reasons = [], []
    for part in record["partitions"]:
        rel = part["folder"]
        now = manifest_sha(_production(rel, data_root), _date(rel))
        mine = manifest_sha(_production(rel, folder.uri), _date(rel))
        if mine is None:
            reasons.append(f"{rel}: the preview's partition is gone")
        elif now == mine:
            continue
        elif now != part["replaces"]:
            reasons.append(f"{rel}: production changed since the preview (its manifest is not the one recorded)")
        else:
            todo.append(rel)
    if reasons:
        return todo, reasons
    with settings.snapshot(), partitions.shadowed(data_root, folder.uri):
        engine = freshness.new_pass()
        for rel in todo:
            task = task_for(rel)
            state = engine.state(task)
            if not state.ok:
                reasons.append(f"{rel}: rules, settings or inputs no longer match the preview ({state.reason})")
    freshness.new_pass()
    return todo, reasons


def _production(rel: str, data_root: str) -> PartitionStore:
    task = task_for(rel)
    store = task.store()
    return plain_store(data_root, store.dataset, store.sub)


def _date(rel: str) -> dt.date | None:
    return task_for(rel).key


def publish(pid: str) -> tuple[int, str]:
    """Put preview ``pid``'s partitions in place, upstream datasets first; (exit code, message).
    Refuses, changing nothing, when :func:`problems` finds any. Resumable: run it again after a crash."""
    folder = folder_of(pid)
    t0 = time.perf_counter()
    try:
        with folder.exclusive(PUBLISH_LOCK, f"preview {pid}", wait_s=0):
            return _publish(folder, t0)
    except partitions.PartitionBusy:
        return 1, f"preview {pid}: another `daybreak publish` is publishing it now"


def _publish(folder, t0: float) -> tuple[int, str]:
    record = read_record(folder)
    pid, data_root = record["id"], record["data_root"]
    if record.get("state") == "published":
        _drop_partitions(folder)
        return 0, f"preview {pid} was published at {record.get('published_at')}; nothing to do"
    with settings.snapshot():
        todo, reasons = problems(record, folder)
    if reasons:
        shown = "\n  ".join(reasons[:10]) + (f"\n  ... {len(reasons) - 10} more" if len(reasons) > 10 else "")
        return 1, f"preview {pid}: refused, nothing was changed:\n  {shown}"
    checked = time.perf_counter()
    wait = settings.daybreak().lock_wait_s
    if todo and record.get("state") != "publishing":  # from here on production holds part of it until done
        record.update(state="publishing", publishing_at=dt.datetime.now(dt.UTC).isoformat())
        write_record(folder, record)
    for rel in todo:
        production = _production(rel, data_root)
        date = _date(rel)
        with production.locked(date, wait):
            if manifest_sha(production, date) != next(
                p["replaces"] for p in record["partitions"] if p["folder"] == rel
            ):
                return 1, f"preview {pid}: {rel} changed in production while publishing; published before it: kept"
            production.adopt(date, plain_store(folder.uri, production.dataset, production.sub))
            production.clear_failure(date)
    record.update(state="published", published_at=dt.datetime.now(dt.UTC).isoformat())
    write_record(folder, record)
    placed = time.perf_counter()
    _drop_partitions(folder)
    return 0, (
        f"preview {pid}: published {len(todo)} partition(s) in {placed - t0:.2f} s (checks {checked - t0:.2f} s, "
        f"renames {placed - checked:.2f} s); its folder removed in {time.perf_counter() - placed:.2f} s"
    )


def _drop_partitions(folder) -> None:
    """Delete the shadow's files (production holds its own names of the published ones), keep the record."""
    for entry in folder.names():
        if entry not in (RECORD, PUBLISH_LOCK):
            folder.remove(entry)


# -- listing, discarding, sweeping -------------------------------------------------------------------------
def discard(pid: str) -> str:
    folder = folder_of(pid)
    try:
        with folder.exclusive(PUBLISH_LOCK, f"preview {pid}", wait_s=0):
            record = read_record(folder)
            placed = in_production(record, folder)
            if record.get("state") == "publishing" or (placed and record.get("state") != "published"):
                raise PreviewError(
                    f"preview {pid} is half published ({len(placed)} of {len(record.get('partitions', []))} "
                    f"partitions are in production, e.g. {placed[0] if placed else '?'}): not discarded. "
                    f"Finish it with `daybreak publish {pid}`"
                )
            folder.remove()
    except partitions.PartitionBusy:
        raise PreviewError(f"preview {pid} is being built or published now; not discarded") from None
    return f"discarded preview {pid}"


def in_production(record: dict, folder) -> list[str]:
    """The partitions of the preview whose production manifest is the preview's own: published."""
    data_root = record["data_root"]
    out = []
    for part in record.get("partitions", []):
        rel = part["folder"]
        mine = manifest_sha(_production(rel, folder.uri), _date(rel))
        if mine is not None and manifest_sha(_production(rel, data_root), _date(rel)) == mine:
            out.append(rel)
    return out


def listing(data_root: str | None = None) -> list[dict]:
    """Every preview: id, dataset, range, age, size, state and whether it can be published now."""
    root = previews_root(data_root)
    out = []
    for name in root.names():
        folder = root.child(name)
        try:
            record = read_record(folder)
        except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError):
            continue
        created = dt.datetime.fromisoformat(record["created_at"])
        age_h = (dt.datetime.now(dt.UTC) - created).total_seconds() / 3600
        size = sum(folder.files().values())  # a file hard-linked from production counts nothing
        state = record.get("state")
        if state in ("open", "publishing"):
            _, reasons = problems(record, folder)
            placed = in_production(record, folder)  # a publish killed half-way (before it recorded so)
            if placed or state == "publishing":
                state = f"half published ({len(placed)} of {len(record.get('partitions', []))} in production)"
                reasons = reasons or []
        else:
            reasons = [state]
        out.append(
            {
                "id": record["id"], "dataset": record["dataset"], "start": record["start"], "stop": record["stop"],
                "age_hours": round(age_h, 1), "size_bytes": size, "state": state,
                "partitions": len(record.get("partitions", [])), "publishable": not reasons,
                "why_not": reasons[:3],
            }
        )  # fmt: skip
    return out


def sweep(data_root: str | None = None, keep_days: float | None = None) -> list[str]:
    """Delete previews older than ``[daybreak] preview_keep_days``; return their ids."""
    keep = settings.daybreak().preview_keep_days if keep_days is None else keep_days
    root, now, gone = previews_root(data_root), dt.datetime.now(dt.UTC), []
    for name in root.names():
        folder = root.child(name)
        try:
            created = dt.datetime.fromisoformat(read_record(folder)["created_at"])
        except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError, KeyError):
            continue
        if now - created > dt.timedelta(days=keep):
            try:  # a preview being built or published holds its lock: never swept
                with folder.exclusive(PUBLISH_LOCK, name, wait_s=0):
                    record = read_record(folder)
                    if record.get("state") == "publishing" or in_production(record, folder):
                        continue  # half published: `daybreak publish` finishes it, nothing deletes it
                    folder.remove()
                gone.append(name)
            except (partitions.PartitionBusy, FileNotFoundError):
                continue
    return gone


def open_for(dataset: str, start: dt.date, stop: dt.date, data_root: str | None = None) -> list[dict]:
    """Open previews of ``dataset`` whose range overlaps ``[start, stop)`` (for `daybreak plan`)."""
    return [
        r
        for r in open_records(data_root)
        if r["dataset"] == dataset and r["start"] < stop.isoformat() and start.isoformat() < r["stop"]
    ]


def open_records(data_root: str | None = None) -> list[dict]:
    """Every open preview's record (the HTML status page shows their diffs)."""
    root = previews_root(data_root)
    out = []
    for name in root.names():
        try:
            record = read_record(root.child(name))
        except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError):
            continue
        if record.get("state") == "open":
            out.append(record)
    return out


# -- rendering ---------------------------------------------------------------------------------------------
def to_json(record: dict) -> str:
    keep = ("id", "dataset", "start", "stop", "state", "datasets", "failed", "not_run", "waiting", "not_built")
    return json.dumps({k: record.get(k) for k in keep}, indent=1, default=str)


def render(record: dict) -> str:
    pid = record["id"]
    parts = len(record.get("partitions", []))
    lines = [
        f"preview {pid}",
        f"  {record['dataset']} {record['start']} .. {record['stop']} (stop exclusive): {parts} partition(s) built "
        f"into {previews_root(record['data_root']).child(pid).uri}; production unchanged",
    ]
    if not parts and not record.get("failed") and not record.get("not_run"):
        lines.append("  nothing to rebuild: every partition of the range is up to date")
    lines += [f"  wait    {w['date']}  {w['reason']}" for w in record.get("waiting", [])]
    lines += [f"  not built  {h['partition']}: {h['reason']}" for h in record.get("not_built", [])]
    lines += [f"  FAILED  {f['task_id']}: {f['error'][:200]}" for f in record.get("failed", [])]
    lines += [f"  NOT BUILT  {n['partition']}: {n['reason'][:200]}" for n in record.get("not_run", [])]
    for name, entry in record.get("datasets", {}).items():
        measure = entry.get("measure") or ""
        lines.append(f"{name} (rows matched on {', '.join(entry['key'])})")
        head = f"  {'partition':<24} {'before':>8} {'after':>8} {'added':>7} {'removed':>7} {'changed':>7}"
        lines.append(head + (f" {measure + ' change':>22}" if measure else "") + "  changed columns")
        for p in [*entry["partitions"], {"date": "total", "partition": "", **entry["totals"]}]:
            label = p["date"] or p["partition"] or "(all)"
            if p["date"] and p["partition"] and "business_date" not in p["partition"].split("/")[-1]:
                label = f"{p['date']} {p['partition'].split('/')[-1]}"
            counts = f"{p['rows_before']:>8} {p['rows_after']:>8} {p['added']:>7} {p['removed']:>7} {p['changed']:>7}"
            row = f"  {label:<24} {counts}"
            if measure:
                change = (p.get("measure") or {}).get("change")
                row += f" {'' if change is None else f'{change:+.2f}':>22}"
            cols = ", ".join(f"{c} {n}" for c, n in p.get("changed_columns", {}).items())
            lines.append(row + ("  " + cols if cols else "") + (f"  ({p['note']})" if p.get("note") else ""))
    lines.append(f"publish: daybreak publish {pid}    discard: daybreak discard {pid}")
    return "\n".join(lines)


def render_listing(rows: list[dict]) -> str:
    if not rows:
        return "no previews"
    lines = [f"{'id':<44} {'range':<24} {'age':>7} {'size':>10} {'state':<10} publishable"]
    for r in rows:
        why = "yes" if r["publishable"] else "no: " + "; ".join(str(x) for x in r["why_not"])[:160]
        lines.append(
            f"{r['id']:<44} {r['start'] + '..' + r['stop']:<24} {r['age_hours']:>6.1f}h "
            f"{r['size_bytes'] / 1e6:>8.1f}MB {r['state']:<10} {why}"
        )
    return "\n".join(lines)
