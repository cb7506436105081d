"""Publishing a preview (the checks, then one rename protocol per partition), discarding it, listing and sweeping
previews."""

from __future__ import annotations

import datetime as dt
import time

from tasks import settings
from tasks.freshness import engine as freshness
from tasks.preview.records import (
    PUBLISH_LOCK,
    RECORD,
    PreviewError,
    folder_of,
    manifest_sha,
    manifest_sha_at,
    partition_date,
    read_record,
    readable_records,
    store_at,
    task_for,
    write_record,
)
from tasks.storage import partitions
from tasks.storage.partitions import plain_store


# -- publishing --------------------------------------------------------------------------------------------
def problems(record: dict, folder) -> tuple[list[str], list[str]]:
    """(partitions still to publish, reasons the preview cannot be published)."""
    data_root = record["data_root"]
    if record.get("state") == "published":
        return [], []
    if record.get("state") == "building":  # asked under the lock its builder holds while it builds: it stopped
        return [], [f"its build stopped before the end (killed?): discard it with daybreak discard {record['id']}"]
    if record.get("state") not in ("open", "publishing"):
        return [], [f"the preview is {record.get('state')}, not open"]
    if record.get("failed"):
        return [], [
            f"{len(record['failed'])} partition(s) failed in the preview, e.g. "
            f"{record['failed'][0].get('partition', record['failed'][0]['task_id'])}"
        ]
    if record.get("not_run"):
        first = record["not_run"][0]
        return [], [
            f"{len(record['not_run'])} partition(s) of the preview were not built, e.g. {first['partition']} "
            f"({first['reason']}); make a new preview"
        ]
    if record.get("not_built"):
        first = record["not_built"][0]
        return [], [
            f"{len(record['not_built'])} downstream partition(s) were not built (preview the whole stale range, "
            f"or bring its dates up to date first, then make a new preview), e.g. {first['partition']}: "
            f"{first['reason']}"
        ]
    todo, reasons = [], []
    for part in record["partitions"]:
        rel = part["folder"]
        now, mine = manifest_sha_at(rel, data_root), manifest_sha_at(rel, folder.uri)
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
    fresh = record.get("state") != "publishing"  # none of it in production yet
    if todo and fresh:  # from here on production holds part of it until done
        record.update(state="publishing", publishing_at=dt.datetime.now(dt.UTC).isoformat())
        write_record(folder, record)
    for i, rel in enumerate(todo):
        production = store_at(rel, data_root)
        date = partition_date(rel)
        with production.locked(date, wait):
            if manifest_sha(production, date) != next(
                p["replaces"] for p in record["partitions"] if p["folder"] == rel
            ):
                if fresh and i == 0:  # a run got there first: nothing of it is in production, it stays open
                    record.update(state="open")
                    record.pop("publishing_at", None)
                    write_record(folder, record)
                    return 1, f"preview {pid}: refused, nothing was changed:\n  {rel} changed in production meanwhile"
                return 1, f"preview {pid}: {rel} changed in production while publishing; published before it: kept"
            with freshness.process_engine().replacing(production, date):
                production.copy_partition_from(date, plain_store(folder.uri, production.dataset, production.sub))
            production.clear_failure(date)
    record.update(state="published", published_at=dt.datetime.now(dt.UTC).isoformat())
    write_record(folder, record)
    placed = time.perf_counter()
    _drop_partitions(folder)
    keep = settings.daybreak().preview_keep_days
    return 0, (
        f"preview {pid}: published {len(todo)} partition(s) in {placed - t0:.2f} s (checks {checked - t0:.2f} s, "
        f"renames {placed - checked:.2f} s); the preview's partitions removed in {time.perf_counter() - placed:.2f} s"
        f", its record kept: daybreak previews lists it as published until it is swept, {keep:g} days after it was "
        "made ([daybreak] preview_keep_days)"
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
            half = record.get("state") == "publishing" or (placed and record.get("state") != "published")
            with settings.snapshot():
                stuck = half and problems(record, folder)[1]  # it can no longer be finished: discarded
            if half and not stuck:
                raise PreviewError(
                    f"preview {pid} is half published ({len(placed)} of {len(record.get('partitions', []))} "
                    f"partitions are in production, e.g. {placed[0] if placed else '?'}): not discarded. "
                    f"Finish it with `daybreak publish {pid}`"
                )
            folder.remove()
    except partitions.PartitionBusy:
        raise PreviewError(f"preview {pid} is being built or published now; not discarded") from None
    if stuck:
        return (
            f"discarded preview {pid}, half published and no longer publishable ({stuck[0]}); the partitions it "
            "put in production stay, the others are as production had them: see daybreak status"
        )
    return f"discarded preview {pid}"


def in_production(record: dict, folder) -> list[str]:
    """The partitions of the preview whose production manifest is the preview's own: published."""
    data_root = record["data_root"]
    out = []
    for part in record.get("partitions", []):
        rel = part["folder"]
        mine = manifest_sha_at(rel, folder.uri)
        if mine is not None and manifest_sha_at(rel, data_root) == mine:
            out.append(rel)
    return out


def _being_built(folder) -> bool:
    """Whether a preview recorded as building still has its builder: it holds the lock while it builds."""
    try:
        with folder.exclusive(PUBLISH_LOCK, "previews", wait_s=0):
            return read_record(folder).get("state") != "building"  # it finished meanwhile
    except partitions.PartitionBusy:
        return True


def listing() -> list[dict]:
    """Every preview: id, dataset, range, age, size, state and whether it can be published now."""
    out = []
    for _, folder, record in readable_records():
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
        elif state == "building" and not _being_built(folder):
            state, reasons = "stopped", [f"its build stopped before the end (killed?); daybreak discard {record['id']}"]
        elif state == "published":  # its record only, until swept
            swept = created + dt.timedelta(days=settings.daybreak().preview_keep_days)
            at = dt.datetime.fromisoformat(record["published_at"]).strftime("%Y-%m-%d %H:%M")
            reasons = [f"published at {at} UTC; swept after {swept.date()}"]
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


def sweep() -> list[str]:
    """Delete previews older than ``[daybreak] preview_keep_days``; return their ids."""
    keep = settings.daybreak().preview_keep_days
    now, gone = dt.datetime.now(dt.UTC), []
    for name, folder, record in readable_records():
        if "created_at" not in record:
            continue
        created = dt.datetime.fromisoformat(record["created_at"])
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


def open_for(dataset: str, start: dt.date, stop: dt.date) -> list[dict]:
    """Open or half published previews of ``dataset`` overlapping ``[start, stop)``, oldest first, each
    with ``why_not``, the reasons `publish` would refuse it now."""
    out = []
    for _, folder, r in readable_records():
        if r.get("state") in ("open", "publishing") and r["dataset"] == dataset:
            if r["start"] < stop.isoformat() and start.isoformat() < r["stop"]:
                out.append({**r, "why_not": problems(r, folder)[1]})
    return sorted(out, key=lambda r: r.get("created_at", ""))


def open_records() -> list[dict]:
    """Every open preview's record (the HTML status page shows their diffs)."""
    return [record for _, _, record in readable_records() if record.get("state") == "open"]
