"""Identity by content, side by side in one run. Run on demand (not in CI):

    python benchmarks/identity.py [--quick] [--repeat 3] [--noop-only] [--baseline DIR] [--workdir DIR]

Each system in a fresh process, the order rotating over --repeat repetitions, ratios taken within one
repetition, medians printed. The baselines are plain scripts (benchmarks/_identity_plain.py: standard
library only, no Daybreak import) that read the same manifests and files:

  no-op check    RangeDaily over 1,095 complete dates (benchmarks/backfill.py's tiny zone: 100 stores, one
                 line a file), nothing to do, against the plain no-op check: list the raw zone's folders,
                 stat every file the dates read, json-load every partition's manifest and compare; wall and
                 CPU time (target: Daybreak < 1 s). With --baseline DIR, also another checkout's package on
                 the same raw zone and a data root it built itself
  touch + run    60 days x 100 stores (benchmarks/backfill.py's sample) built, every raw file touched,
                 RangeDaily again, against the hashing floor: read and sha256 every raw file the dates read;
                 and against the full build (target < 0.5x: it hashes instead of parsing)
  verify         ``daybreak verify`` over the same 60 days against sha256 (hashlib) over the same files:
                 each partition's data files, its quarantine file and its raw inputs (target >= 300 MB/s)

--quick: 20 days x 30 stores and 300 dates for the no-op check; --days, --stores and --noop-days set
each size. Medians are printed with the spread of the repeats: the machine is shared, and its load
moves every figure.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._luigi import LAST_CPU, children_cpu, rotated, timed_luigi  # noqa: E402
from benchmarks.backfill import NOOP_START, START, tiny_zone, write_cfg  # noqa: E402

PLAIN = REPO / "benchmarks" / "_identity_plain.py"


def range_args(start: dt.date, days: int) -> list[str]:
    return ["RangeDaily", "--of", "StgQsrPos", "--start", str(start), "--stop", str(start + dt.timedelta(days=days))]


def luigi_run(cfg: Path, *args: str, repo: Path = REPO) -> tuple[float, float]:
    """(wall s, user + system CPU s) of the luigi command: CPU time moves less with the machine's load."""
    wall = timed_luigi(cfg, *args, repo=repo)
    return wall, LAST_CPU[0]


def plain(what: str, raw: Path, data: Path, start: dt.date, days: int) -> tuple[float, float, dict]:
    """(wall s, CPU s, its counts) of one of benchmarks/_identity_plain.py's checks in a fresh process."""
    cmd = [sys.executable, str(PLAIN), what, str(raw), str(data), str(start), str(days)]
    t0, cpu0 = time.perf_counter(), children_cpu()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if proc.returncode != 0:
        raise SystemExit(f"the plain {what} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, cpu, json.loads(proc.stdout)


def noop_cfg(path: Path, raw: Path, data: Path) -> Path:
    """A config whose [daybreak] start_date is the no-op range's first date: a range leaves out (and
    never checks) the dates before start_date."""
    return write_cfg(path, raw, data, NOOP_START)


def manifest_mtimes(data: Path) -> list[int]:
    return sorted(p.stat().st_mtime_ns for p in (data / "staging" / "qsr_pos").glob("*/_manifest.json"))


def noop(work: Path, days: int, baseline: Path | None, repeat: int) -> dict[str, list[tuple[float, float]]]:
    """(wall s, CPU s) of each no-op run: Daybreak, the plain check and (with ``baseline``) the other
    checkout. Each checkout checks partitions it built itself, in a data root of its own: another
    version's manifests may not be what it expects, and a check that rebuilt them would not be a no-op.
    The baseline's config also sets the range options the package sets today (an older checkout left
    Luigi's defaults: 100 days back)."""
    raw = work / "noop-raw"
    tiny_zone(raw, days, 100)
    data = work / "noop-data-identity"
    cfgs = {"daybreak": noop_cfg(work / "noop-identity.cfg", raw, data)}
    if baseline:
        base = noop_cfg(work / "noop-baseline.cfg", raw, work / "noop-data-baseline")
        with open(base, "a") as fh:
            for section in ("RangeDaily", "RangeDailyBase"):
                fh.write(f"\n[{section}]\ndays_back = 36500\ntask_limit = 100000\n")
        cfgs["baseline"] = base
    repos = {"daybreak": REPO, "baseline": baseline}
    for name, cfg in cfgs.items():
        t0 = time.perf_counter()
        timed_luigi(cfg, *range_args(NOOP_START, days), "--workers", "2", repo=repos[name])  # builds what is missing
        timed_luigi(cfg, *range_args(NOOP_START, days), repo=repos[name])  # a first check may keep summaries
        print(f"{name}: {days} partitions built (or checked) in {time.perf_counter() - t0:.0f} s", flush=True)
    counts = plain("noop", raw, data, NOOP_START, days)[2]
    if counts["complete"] != days:
        raise SystemExit(f"the plain no-op check finds {counts}, not {days} complete dates: the measurement is void")
    before = manifest_mtimes(data)
    out: dict[str, list[tuple[float, float]]] = {name: [] for name in ("daybreak", "plain", *cfgs)}
    for rep in range(repeat):
        for name in rotated(list(out), rep):
            if name == "plain":
                out[name].append(plain("noop", raw, data, NOOP_START, days)[:2])
            else:
                out[name].append(luigi_run(cfgs[name], *range_args(NOOP_START, days), repo=repos[name]))
    if manifest_mtimes(data) != before:
        raise SystemExit("the no-op RangeDaily rewrote a manifest: the measurement is void")
    print(f"the plain check: {counts['folders']} folders listed, {counts['files']:,} files stat'ed, "
          f"{counts['manifests']} manifests read, {counts['complete']} dates complete")  # fmt: skip
    return out


def touch_and_run(work: Path, days: int, stores: int, repeat: int) -> dict[str, list]:
    """Per repetition, from an empty data root: the full build; every raw file touched; Daybreak's rerun
    and the plain hashing floor (rotating); ``daybreak verify`` and the plain verify (rotating)."""
    from tasks import sample

    raw = work / f"raw-{days}x{stores}"
    if not (raw / "qsr_pos" / str(START + dt.timedelta(days=days))).exists():
        sample.generate(raw, START, days, stores=stores, seed=1, mean_lines_per_store=1200)
    data = work / "data-identity"
    cfg = write_cfg(work / "identity.cfg", raw, data)
    files = list(raw.rglob("*.csv"))
    out: dict[str, list] = {k: [] for k in ("build", "rerun", "hash", "rebuilt", "verify", "verify_plain")}
    for rep in range(repeat):
        shutil.rmtree(data, ignore_errors=True)
        out["build"].append(luigi_run(cfg, *range_args(START, days)))
        read = read_by_dates(data, days)
        parquet = data_mtimes(data)
        now = time.time()
        for p in files:
            os.utime(p, (now, now))
        for name in rotated(["rerun", "hash"], rep):
            if name == "rerun":
                out["rerun"].append(luigi_run(cfg, *range_args(START, days)))
                out["rebuilt"].append(sum(a != b for a, b in zip(parquet, data_mtimes(data), strict=True)))
            else:
                wall, cpu, counts = plain("hash", raw, data, START, days)
                if counts["unchanged"] != days or (counts["files"], counts["bytes"]) != read:
                    raise SystemExit(f"the hashing floor found {counts}, not {days} dates and {read}: void")
                out["hash"].append((wall, cpu))
                out["mb"] = counts["bytes"] / 1e6
        for name in rotated(["verify", "verify_plain"], rep):
            if name == "verify":
                out["verify"].append(verify(cfg, days))
            else:
                wall, cpu, counts = plain("verify", raw, data, START, days)
                if counts["mismatches"]:
                    raise SystemExit(f"the plain verify found {counts['mismatches']} mismatches: the run is void")
                out["verify_plain"].append((wall, counts["bytes"] / 1e6))
        mb = out["verify"][-1][1]
        if abs(mb - out["verify_plain"][-1][1]) > 0.05 + mb / 1000:  # verify prints MB to 0.1
            raise SystemExit(f"verify hashed {mb} MB, the plain verify {out['verify_plain'][-1][1]:.1f} MB: void")
    return out


def read_by_dates(data: Path, days: int) -> tuple[int, int]:
    """(files, bytes) of the raw files the dates' manifests record, each once."""
    sizes = {}
    for i in range(days):
        d = START + dt.timedelta(days=i)
        manifest = json.loads((data / "staging" / "qsr_pos" / f"business_date={d}" / "_manifest.json").read_text())
        for entry in manifest["inputs"]:
            rel, size, _ = entry.rsplit(" ", 2)
            sizes[rel] = int(size)
    return len(sizes), sum(sizes.values())


def data_mtimes(data: Path) -> list[int]:
    return [p.stat().st_mtime_ns for p in sorted((data / "staging" / "qsr_pos").glob("*/data.parquet"))]


def verify(cfg: Path, days: int) -> tuple[float, float, float]:
    """(wall s, MB hashed, MB/s as verify reports it: hashing alone, without the interpreter's start and
    imports) of ``daybreak verify`` as a new process."""
    stop = START + dt.timedelta(days=days)
    cmd = [sys.executable, "-m", "tasks.cli", "verify", "--dataset", "stg_qsr_pos", "--start", str(START)]
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(REPO)}
    t0 = time.perf_counter()
    proc = subprocess.run([*cmd, "--stop", str(stop)], env=env, capture_output=True, text=True, cwd=cfg.parent)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"verify failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    mb, own = re.search(r"([\d.]+) MB in [\d.]+ s \((\d+) MB/s\)", proc.stdout).groups()
    return wall, float(mb), float(own)


def spread(values: list[float], unit: str = "s") -> str:
    return f"{statistics.median(values):.2f} {unit} (min {min(values):.2f}, max {max(values):.2f}, n={len(values)})"


def same_run(a: list[float], b: list[float]) -> list[float]:
    return [x / y for x, y in zip(a, b, strict=True)]


def row(label: str, value: str, target: str = "") -> None:
    print(f"    {label:<52} {value}{'   ' + target if target else ''}")


def ratios(values: list[float]) -> str:
    """Each repetition's ratio, then their median."""
    return ", ".join(f"{v:.2f}" for v in values) + f"; median {statistics.median(values):.2f}x"


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def report_noop(n: dict[str, list[tuple[float, float]]], days: int) -> None:
    walls = {name: [w for w, _ in runs] for name, runs in n.items()}
    cpus = {name: [c for _, c in runs] for name, runs in n.items()}
    print(f"\n(1) no-op RangeDaily over {days} complete dates, wall (CPU below)")
    row(f"the plain check (list, stat, json-load {days} manifests)", spread(walls["plain"]))
    row("  CPU", spread(cpus["plain"]))
    median = statistics.median(walls["daybreak"])
    row("Daybreak RangeDaily", spread(walls["daybreak"]), f"target < 1 s  {verdict(median < 1)}")
    row("  CPU", spread(cpus["daybreak"]))
    row("Daybreak / the plain check, same run, wall", ratios(same_run(walls["daybreak"], walls["plain"])))
    row("                                      CPU", ratios(same_run(cpus["daybreak"], cpus["plain"])))
    if "baseline" in walls:
        row("the other checkout (--baseline)", spread(walls["baseline"]))
        row("  CPU", spread(cpus["baseline"]))
        row("Daybreak / the other checkout, same run, wall", ratios(same_run(walls["daybreak"], walls["baseline"])))
        row("                                         CPU", ratios(same_run(cpus["daybreak"], cpus["baseline"])))


def report_touched(t: dict[str, list], days: int, stores: int) -> None:
    build, rerun, hashed = ([w for w, _ in t[k]] for k in ("build", "rerun", "hash"))
    print(f"\n(2) {days} days x {stores} stores built, every raw file touched, RangeDaily again")
    row(f"the hashing floor (sha256 of {t['mb']:.0f} MB of raw files)", spread(hashed))
    row("Daybreak's rerun", spread(rerun))
    row("Daybreak's rerun / the hashing floor, same run", ratios(same_run(rerun, hashed)))
    cpu = same_run([c for _, c in t["rerun"]], [c for _, c in t["hash"]])
    row("  in CPU seconds (steadier on a busy machine)", ratios(cpu))
    row("the full build", spread(build))
    to_build = same_run(rerun, build)
    row("Daybreak's rerun / the full build, same run", ratios(to_build),
        f"target < 0.5x  {verdict(statistics.median(to_build) < 0.5)}")  # fmt: skip
    row("partitions the rerun rewrote (0 expected)", ", ".join(str(n) for n in t["rebuilt"]))

    walls, mbs, own = ([v[i] for v in t["verify"]] for i in range(3))
    rates = [mb / w for w, mb in zip(walls, mbs, strict=True)]
    floor = [mb / w for w, mb in t["verify_plain"]]
    print(f"\n(3) daybreak verify over the {days} dates: {statistics.median(mbs):.0f} MB (data files, quarantine, raw)")
    row("sha256 of the same files (hashlib, a plain script)", spread(floor, "MB/s"))
    median = statistics.median(rates)
    row("daybreak verify, over its wall time", spread(rates, "MB/s"), f"target >= 300 MB/s  {verdict(median >= 300)}")
    row("daybreak verify / sha256 of the same files, same run", ratios(same_run(rates, floor)))
    row("verify's own rate (hashing alone, no start-up)", spread(own, "MB/s"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default=str(REPO / "data" / "bench"))
    ap.add_argument("--quick", action="store_true", help="20 days x 30 stores, 300 dates for the no-op check")
    ap.add_argument("--days", type=int, help="dates built, touched and verified (default 60, --quick 20)")
    ap.add_argument("--stores", type=int, help="stores of the sample (default 100, --quick 30)")
    ap.add_argument("--noop-days", type=int, help="dates of the no-op check (default 1095, --quick 300)")
    ap.add_argument("--baseline", help="another checkout (e.g. git worktree add /tmp/base REV), beside the no-op")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--noop-only", action="store_true", help="only the no-op check")
    args = ap.parse_args()
    days, stores, noop_days = (20, 30, 300) if args.quick else (60, 100, 1095)
    days, stores, noop_days = args.days or days, args.stores or stores, args.noop_days or noop_days
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    baseline = Path(args.baseline).resolve() if args.baseline else None

    n = noop(work, noop_days, baseline, args.repeat)
    if not args.noop_only:
        t = touch_and_run(work, days, stores, args.repeat)
    report_noop(n, noop_days)
    if not args.noop_only:
        report_touched(t, days, stores)
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
