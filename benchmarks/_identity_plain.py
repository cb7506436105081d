"""benchmarks/identity.py's baselines: plain scripts, standard library only, no Daybreak import, each run
in a fresh process. They read a data root's manifests as files (``staging/qsr_pos/business_date=D/
_manifest.json``) and print one JSON line of counts, which identity.py checks before it uses a time.

    python benchmarks/_identity_plain.py noop RAW DATA START DAYS
    python benchmarks/_identity_plain.py hash RAW DATA START DAYS
    python benchmarks/_identity_plain.py verify RAW DATA START DAYS

noop     the least a correct no-op check does: list the raw zone's qsr_pos folders, stat every file of
         the folders the dates read, json-load the manifest of each date of [START, START + DAYS) and
         compare the inputs it records (path, size, mtime) with folders d and d+1 as they are now
hash     the least a rerun after every raw file was touched does: json-load each date's manifest, read and
         sha256 every raw file of folders START .. START + DAYS (each once), compare with the hashes recorded
verify   what ``daybreak verify`` reads, hashed plainly: each date's manifest, then sha256 of its data files,
         its quarantine file and its raw inputs (each raw file once), compared with the manifest
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import sys

DATASET = "staging/qsr_pos"
SOURCE = "qsr_pos"


def dates(start: str, days: int) -> list[str]:
    first = dt.date.fromisoformat(start)
    return [str(first + dt.timedelta(days=i)) for i in range(days)]


def manifest(data: str, date: str) -> dict:
    with open(f"{data}/{DATASET}/business_date={date}/_manifest.json", "rb") as fh:
        return json.load(fh)


def sha256(path: str) -> tuple[str, int]:
    with open(path, "rb") as fh:
        digest = hashlib.file_digest(fh, "sha256")
        return digest.hexdigest(), fh.tell()


def noop(raw: str, data: str, start: str, days: int) -> dict:
    wanted = set(dates(start, days + 1))  # the folders the dates read: d and d+1
    now, folders = {}, {}  # relpath -> "relpath size mtime_ns" (a manifest's "inputs" entry); folder -> relpaths
    for folder in os.scandir(f"{raw}/{SOURCE}"):
        if folder.name not in wanted or not folder.is_dir():
            continue
        names = folders[folder.name] = []
        for entry in os.scandir(folder.path):
            st = entry.stat()
            rel = f"{SOURCE}/{folder.name}/{entry.name}"
            now[rel] = f"{rel} {st.st_size} {st.st_mtime_ns}"
            names.append(rel)
    complete = manifests = 0
    for d in dates(start, days):
        m = manifest(data, d)
        manifests += 1
        nxt = str(dt.date.fromisoformat(d) + dt.timedelta(days=1))
        current = sorted(now[rel] for f in (d, nxt) for rel in folders.get(f, ()))
        complete += sorted(m["inputs"]) == current
    return {"folders": len(folders), "files": len(now), "manifests": manifests, "complete": complete}


def rehash(raw: str, data: str, start: str, days: int) -> dict:
    first = dt.date.fromisoformat(start)
    by_folder: dict[str, dict[str, str]] = {}  # folder date -> {relpath: sha256}
    files = size = 0
    for i in range(days + 1):
        name = str(first + dt.timedelta(days=i))
        hashes = by_folder[name] = {}
        for entry in os.scandir(f"{raw}/{SOURCE}/{name}"):
            hashes[f"{SOURCE}/{name}/{entry.name}"], n = sha256(entry.path)
            files, size = files + 1, size + n
    unchanged = 0
    for d in dates(start, days):
        nxt = str(dt.date.fromisoformat(d) + dt.timedelta(days=1))
        unchanged += manifest(data, d)["input_hashes"] == {**by_folder[d], **by_folder[nxt]}
    return {"files": files, "bytes": size, "unchanged": unchanged}


def verify(raw: str, data: str, start: str, days: int) -> dict:
    raw_seen: dict[str, str] = {}
    files = size = mismatches = 0
    for d in dates(start, days):
        m = manifest(data, d)
        own = [(f"{data}/{DATASET}/business_date={d}/{f['name']}", f["sha256"]) for f in m["data_files"]]
        if m.get("quarantine"):
            own.append((f"{data}/{m['quarantine']['path']}", m["quarantine"]["sha256"]))
        for path, recorded in own:
            digest, n = sha256(path)
            files, size, mismatches = files + 1, size + n, mismatches + (digest != recorded)
        for rel, recorded in m["input_hashes"].items():
            if rel not in raw_seen:
                raw_seen[rel], n = sha256(f"{raw}/{rel}")
                files, size = files + 1, size + n
            mismatches += raw_seen[rel] != recorded
    return {"files": files, "raw_files": len(raw_seen), "bytes": size, "mismatches": mismatches}


if __name__ == "__main__":
    what, raw, data, start, days = sys.argv[1:]
    print(json.dumps({"noop": noop, "hash": rehash, "verify": verify}[what](raw, data, start, int(days))))
