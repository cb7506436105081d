"""``daybreak verify`` (docs/operations.md): re-hash every raw input and data file of the selected
partitions against their manifests, and mark those with a mismatch stale so the next run rebuilds them."""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field

from tasks import catalogue, settings
from tasks.base import MaterializedTask
from tasks.freshness import engine as freshness
from tasks.reporting.names import capped, dates_span
from tasks.storage.partitions import DATA_FILE, MANIFEST, PartitionWriteError
from tasks.storage.rawzone import RawFile, RawFileUnreadable, RawZone, content_hash


@dataclass
class Report:
    partitions: int = 0
    raw_files: int = 0
    data_files: int = 0
    bytes_hashed: int = 0
    unverifiable: int = 0  # manifests written before content hashes: their inputs cannot be checked
    raw_gone: int = 0  # partitions that read raw folders gone since (retention): those inputs cannot be checked
    mismatches: dict[str, list[str]] = field(default_factory=dict)  # "raw <path>: why" -> partitions
    seconds: float = 0.0
    unmarked: list[str] = field(default_factory=list)  # partitions with a mismatch that could not be marked stale
    write_error: str = ""
    restamped: list[str] = field(default_factory=list)  # copied without their files' times: the times recorded
    runs: dict[str, list[str]] = field(default_factory=dict)  # the run that rebuilds them -> datasets marked stale
    missing: dict[str, dict[str, list]] = field(default_factory=dict)  # dataset -> a date's hotel or '' -> keys


def verify(start: dt.date, stop: dt.date, datasets: list[str] | None = None) -> Report:
    """Check every partition of ``datasets`` (default: all) in [start, stop); mark those with a mismatch stale."""
    t0 = time.perf_counter()
    with settings.snapshot(), freshness.view_pass() as engine:
        zone = RawZone.from_uri(settings.raw_root())
        report, raw = Report(), {}
        try:
            for name in datasets or catalogue.names():
                marked = sum(map(len, report.mismatches.values()))
                for task in catalogue.BY_NAME[name].partitions(start, stop):
                    _verify_partition(engine, zone, task, raw, report)
                if sum(map(len, report.mismatches.values())) > marked:
                    run = catalogue.KEYED_RUNS.get(catalogue.BY_NAME[name].partition, ("RangeDaily",))[0]
                    report.runs.setdefault(run, []).append(name)
        finally:
            zone.close()
    report.seconds = time.perf_counter() - t0
    return report


def _verify_partition(engine, zone: RawZone, task: MaterializedTask, raw: dict, report: Report) -> None:
    store = engine.store(task)
    manifest = engine.manifest(store, task.key)
    label = freshness.label(task)
    if not manifest:
        _without_manifest(store, task, label, report)
        return
    report.partitions += 1
    if manifest.get("_corrupt"):  # already stale (the engine cannot read it): the next run rebuilds it
        path = f"{store.uri(task.key)}/{MANIFEST}"
        report.mismatches.setdefault(f"manifest {path}: empty, truncated or not JSON", []).append(label)
        return
    found, raw_changed = [], []  # raw_changed: the raw files that differ, when nothing else does
    stamped = store.stamped_now(task.key, manifest)  # listed before hashing: a file changed since is not taken
    files = [(store.rel(task.key) + "/" + f["name"], f, "data") for f in manifest.get("data_files", [])]
    if manifest.get("quarantine"):
        files.append((manifest["quarantine"]["path"], manifest["quarantine"], "quarantine"))
    for rel, f, kind in files:
        report.data_files += 1
        digest, why, size = store.file_digest(rel)
        report.bytes_hashed += size
        path = f"{store.data_root}/{rel}"
        if digest != f.get("sha256"):
            found.append(f"{kind} {path}: " + (why or "content differs from its manifest"))
    if not found and any(f.get("name") == DATA_FILE for f in manifest.get("data_files", [])):
        rows = store.read_table(task.key, columns=[]).num_rows  # its data file is the one it lists: its count
        if rows != manifest.get("row_count"):
            why = f"row_count {manifest.get('row_count')}, but its data file holds {rows} rows (the manifest edited?)"
            found.append(f"manifest {store.uri(task.key)}/{MANIFEST}: {why}")
    for rel in store.strays_in(task.key, manifest):
        found.append(f"stray {store.data_root}/{rel}: a file its manifest does not list (readers see it)")
    hashes = manifest.get("input_hashes")
    if hashes is None:
        report.unverifiable += bool(manifest.get("inputs"))
    gone = set(engine.gone_folders(task, manifest)) if hashes and task.reads_raw() else set()
    report.raw_gone += bool(gone)
    for relpath, recorded in (hashes or {}).items():
        if relpath.rpartition("/")[0] in gone:  # kept as built: nothing to compare with (docs/raw-zone.md)
            continue
        if relpath not in raw:
            raw[relpath] = _raw_digest(zone, relpath, report)
        digest, why = raw[relpath]
        if digest != recorded:
            found.append(f"raw {relpath}: {why or 'content differs from the one the partition was built from'}")
            raw_changed.append(relpath)
    for mismatch in found:
        report.mismatches.setdefault(mismatch, []).append(label)
    if found:  # stale until rebuilt: the engine reads verify_mismatch (tasks/freshness/engine.py); the files'
        # times are recorded too, so that the reason shown is the mismatch, not a copy without its times
        # the raw files alone differ: plan names what reads their keys (a store's file: that store's partitions)
        raw_only = {"verify_changed_raw": raw_changed} if len(raw_changed) == len(found) else {}
        rewritten = dict(stamped or manifest, verify_mismatch="; ".join(found), **raw_only)
        _rewrite(engine, store, task, rewritten, label, report)
    elif stamped:  # the content recorded under other times (a copy without them): ok again, not rebuilt
        _rewrite(engine, store, task, stamped, label, report)
        report.restamped.append(label)


def _without_manifest(store, task: MaterializedTask, label: str, report: Report) -> None:
    """A partition with no manifest: each file in its folder is a mismatch; an empty one is not verified."""
    strays = store.strays_in(task.key, None)
    if not strays:
        hotel = getattr(task, "hotel", None) if task.key is not None else None  # a date's hotel, else the key
        static = getattr(task, "store_id", None) or getattr(task, "hotel", None)
        keys = report.missing.setdefault(task.dataset, {}).setdefault(hotel or "", [])
        keys.append(task.key if task.key is not None else static)
        return
    report.partitions += 1
    data = f"{store.rel(task.key)}/{DATA_FILE}"
    for rel in strays:
        why = "data file without its manifest" if rel == data else "a file of a partition without its manifest"
        report.mismatches.setdefault(f"stray {store.data_root}/{rel}: {why} (readers see it)", []).append(label)


def _rewrite(engine, store, task: MaterializedTask, manifest: dict, label: str, report: Report) -> None:
    """Replace the partition's manifest alone; a read-only or full data root is reported, not raised."""
    try:
        with engine.replacing(store, task.key):
            store.update_manifest(task.key, manifest)
    except PartitionWriteError as exc:
        report.unmarked.append(label)
        report.write_error = report.write_error or str(exc).splitlines()[0]


def _raw_digest(zone: RawZone, relpath: str, report: Report) -> tuple[str | None, str]:
    """(content hash, "") of a raw file now; (None, why) when it is missing or no regular file."""
    try:
        data = zone.read_bytes(RawFile(relpath, 0, 0))
    except FileNotFoundError:
        return None, "missing"
    except RawFileUnreadable as exc:
        return None, str(exc).removeprefix(f"{relpath}: ")
    report.raw_files += 1
    report.bytes_hashed += len(data)
    return content_hash(data), ""


def render(report: Report) -> str:
    lines = [
        f"MISMATCH {what}\n  {'stale now' if set(parts) - set(report.unmarked) else 'not marked stale'}: "
        + ", ".join(parts)
        for what, parts in report.mismatches.items()
    ]
    mb = report.bytes_hashed / 1e6
    rate = mb / report.seconds if report.seconds else 0.0
    lines.append(
        f"verified {report.partitions} partitions: {report.raw_files} raw files and {report.data_files} data files, "
        f"{mb:.1f} MB in {report.seconds:.1f} s ({rate:.0f} MB/s); {len(report.mismatches)} mismatches"
    )
    if report.restamped:
        n = len(report.restamped)
        lines.append(
            f"{n} partition{'s' if n > 1 else ''} copied without their files' times, the content their manifests "
            "recorded: the times recorded, not rebuilt"
        )
    if report.unverifiable:
        lines.append(
            f"{report.unverifiable} partitions were built before content hashes were recorded: their raw "
            "inputs cannot be verified until they are rebuilt"
        )
    if report.raw_gone:
        lines.append(
            f"{report.raw_gone} partition(s) read raw folders gone since: kept as built, their data files verified, "
            "the raw files that are gone not"
        )
    if report.unmarked:
        lines.append(
            f"{len(report.unmarked)} partition(s) could not be marked stale ({report.write_error}): rebuild them by "
            "hand (delete their folders, rerun) once the data root can be written"
        )
    elif report.mismatches:
        if len(report.runs) > 1:  # the run of each dataset kind
            rebuild = " and ".join(f"{r} ({', '.join(n)})" for r, n in report.runs.items()) + " rebuild"
        else:
            rebuild = f"{next(iter(report.runs), 'run')} rebuilds"
        lines.append(f"the partitions named are marked stale: the next {rebuild} them")
    if report.missing:
        n = sum(len(keys) for hotels in report.missing.values() for keys in hotels.values())
        them = "them" if n > 1 else "it"
        lines.append(
            f"{n} partition{'s' if n > 1 else ''} not verified: no partition there (never built, or its folder "
            f"deleted); daybreak status says what the next run does with {them}"
        )
        lines += capped("  ", [line for name, hotels in report.missing.items() for line in _not_there(name, hotels)])
    return "\n".join(lines)


def _not_there(dataset: str, hotels: dict[str, list]) -> list[str]:
    """``staging/qsr_pos 2026-09-04, 2026-09-06 (2 dates)``; the hotels missing the same dates on one line."""
    by_span: dict[str, list[str]] = {}
    for hotel, keys in hotels.items():
        by_span.setdefault(dates_span(keys), []).append(hotel)
    lines = []
    for span, named in by_span.items():
        which = f"hotel{'s' if len(named) > 1 else ''} {', '.join(named)}" if named[0] else ""
        lines.append(" ".join(filter(None, (dataset, span, which))))
    return lines
