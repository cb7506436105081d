"""stg_qsr_pos backfill benchmark (issue 2). Run: python benchmarks/backfill.py [--quick] [--workdir DIR]

Side by side in one run:
 (1) the bare read + transform + Parquet write, in a plain Python loop over the dates (the baseline);
 (2) `luigi ... RangeDaily` over the same dates with 1 and with 2 workers;
 (3) a no-op RangeDaily over 1,095 complete dates (every staleness check included);
 (4) peak memory of one partition's build against the partition's in-memory table size,
     and raw lines per second through read, clean and write of one partition.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._luigi import timed_luigi  # noqa: E402

START = dt.date(2026, 9, 1)
NOOP_START = dt.date(2023, 9, 1)  # 1,095 dates that all lie before today: RangeDaily drops dates from today on


def write_cfg(path: Path, raw: Path, data: Path) -> Path:
    from tasks.settings import write_config

    roots = {"raw_root": raw, "data_root": data, "start_date": START}
    return write_config(path, {"daybreak": roots, "core": {"log_level": "WARNING"}})


def luigi_range(cfg: Path, days: int, workers: int, start: dt.date = START) -> float:
    stop = start + dt.timedelta(days=days)
    args = ["RangeDaily", "--of", "StgQsrPos", "--start", str(start), "--stop", str(stop), "--workers", str(workers)]
    return timed_luigi(cfg, *args)


def bare_loop(raw: Path, out: Path, days: int) -> tuple[float, int]:
    """The baseline: list, read, parse, clean and write each date, no Luigi, no manifest, no fingerprint."""
    import pyarrow.parquet as pq

    from tasks.calendar import qsr_dependency_window
    from tasks.rawzone import RawZone, split_store_files
    from tasks.transforms.qsr_pos import RAW_COLUMNS, QsrRules, clean_pos_lines
    from tasks.transforms.rawcsv import parse_csv_many

    zone, rules, lines = RawZone(raw), QsrRules(), 0
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    for i in range(days):
        d = START + dt.timedelta(days=i)
        folders = []
        for w in qsr_dependency_window(d):  # the same read path as StgQsrPos: one parser call per folder
            files = split_store_files(zone.list_folder("qsr_pos", w))[0]
            folders.append((w, parse_csv_many(((zone.read_bytes(f), f.relpath) for f in files), RAW_COLUMNS)))
        lines += sum(p.table.num_rows for _, parsed in folders for p in parsed)
        result = clean_pos_lines(folders, d, rules)
        pq.write_table(result.table, out / f"{d}.parquet", compression="zstd")
    return time.perf_counter() - t0, lines


def tiny_zone(raw: Path, days: int, stores: int) -> None:
    """days+1 folders x stores files of one valid line each: enough to build and check 1,095 partitions."""
    header = "order_id,line_no,store_id,ordered_at,sku,qty,unit_price,discount,status\n"
    for i in range(days + 1):
        d = NOOP_START + dt.timedelta(days=i)
        folder = raw / "qsr_pos" / d.isoformat()
        folder.mkdir(parents=True, exist_ok=True)
        for s in range(1, stores + 1):
            sid = f"S{s:03d}"
            if (folder / f"{sid}.csv").exists():  # never rewrite: that would make every partition stale
                continue
            (folder / f"{sid}.csv").write_text(f"{header}{sid}-{d},1,{sid},{d}T12:00:00-04:00,COLA,1,1.99,,COMPLETED\n")


def noop_check(work: Path, days: int, stores: int) -> dict:
    raw, data = work / "noop-raw", work / "noop-data"
    if not (raw / "qsr_pos" / str(NOOP_START + dt.timedelta(days=days))).exists():
        tiny_zone(raw, days, stores)
    cfg = write_cfg(work / "noop.cfg", raw, data)
    code = f"""
import datetime as dt, json, time, luigi.configuration
luigi.configuration.get_config().add_config_path({str(cfg)!r})
from tasks.qsr import StgQsrPos
dates = [dt.date.fromisoformat({NOOP_START.isoformat()!r}) + dt.timedelta(days=i) for i in range({days})]
complete = set(StgQsrPos.bulk_complete(iter(dates)))
missing = [d for d in dates if d not in complete]
for d in missing:
    StgQsrPos(date=d).run()
t0 = time.perf_counter(); done = StgQsrPos.bulk_complete(iter(dates)); t1 = time.perf_counter()
print(json.dumps({{"built": len(missing), "complete": len(done), "bulk_complete_s": t1 - t0}}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"building the no-op range failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    in_range = {f"business_date={NOOP_START + dt.timedelta(days=i)}" for i in range(days)}
    manifests = sorted(p for p in (data / "staging" / "qsr_pos").glob("*/_manifest.json") if p.parent.name in in_range)
    before = [p.stat().st_mtime_ns for p in manifests]
    result["cli_noop_s"] = luigi_range(cfg, days, 1, NOOP_START)
    if [p.stat().st_mtime_ns for p in manifests] != before or len(manifests) != days:
        raise SystemExit("the no-op RangeDaily rebuilt something: the measurement is void")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import luigi.tools.range, tasks"], check=True)
    result["python_import_s"] = time.perf_counter() - t0
    return result


def one_partition(cfg: Path, date: dt.date) -> dict:
    """Peak memory and throughput of one partition build, measured in a fresh process."""
    cmd = [sys.executable, __file__, "--measure-one", str(cfg), date.isoformat()]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_one(cfg: str, date: str) -> None:
    """(in the child) Build one partition twice, after the same warm-up a scheduling process does.

    Memory is the first build's: Arrow's own peak allocation (its pool) and the peak RSS growth.
    """
    import resource

    import luigi.configuration
    import pyarrow as pa

    luigi.configuration.get_config().add_config_path(cfg)
    from tasks.base import CheckCache
    from tasks.qsr import StgQsrPos

    StgQsrPos.prepare_to_run()  # what the scheduling process does before Luigi forks a task
    task = StgQsrPos(date=dt.date.fromisoformat(date))
    inputs = task.input_files(CheckCache()).read
    base = int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize()
    pool = pa.default_memory_pool()
    arrow_before = pool.max_memory()
    timings, out = [], {}
    for _ in range(2):
        t0 = time.perf_counter()
        built = task.build(inputs)
        task.store().write(task.date, built.table, {})
        timings.append(time.perf_counter() - t0)
        if not out:
            out.update(peak_rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, arrow_peak=pool.max_memory())
            out.update(table_bytes=built.table.nbytes, rows=built.table.num_rows)
        del built
    raw_lines = sum(sum(1 for _ in open(task.zone().root / f.relpath, "rb")) - 1 for f in inputs)
    out.update(base_rss=base, arrow_before=arrow_before, raw_lines=raw_lines, first_s=timings[0], again_s=timings[1])
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default=str(REPO / "data" / "bench"))
    ap.add_argument("--quick", action="store_true", help="20 days x 30 stores, 300 dates for the no-op check")
    ap.add_argument("--measure-one", nargs=2, metavar=("CFG", "DATE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure_one:
        return measure_one(*args.measure_one)
    days, stores, mean, noop_days = (20, 30, 1200, 300) if args.quick else (60, 100, 1200, 1095)
    work = Path(args.workdir)
    raw = work / f"raw-{days}x{stores}"
    from tasks import sample

    if not (raw / "qsr_pos" / str(START + dt.timedelta(days=days))).exists():
        t0 = time.perf_counter()
        info = sample.generate(raw, START, days, stores=stores, seed=1, mean_lines_per_store=mean)
        print(f"sample: {info['qsr_lines']:,} POS lines, {time.perf_counter() - t0:.1f} s")

    results = {}
    for name in ("bare", "w1", "w2"):
        shutil.rmtree(work / f"data-{name}", ignore_errors=True)
    bare_s, lines_read = bare_loop(raw, work / "data-bare", days)
    results["bare"] = bare_s
    results["w1"] = luigi_range(write_cfg(work / "w1.cfg", raw, work / "data-w1"), days, 1)
    results["w2"] = luigi_range(write_cfg(work / "w2.cfg", raw, work / "data-w2"), days, 2)
    noop = noop_check(work, noop_days, 100)
    part = one_partition(work / "w1.cfg", START + dt.timedelta(days=days // 2))
    report(results, lines_read, days, noop, noop_days, part)


def report(r: dict, lines_read: int, days: int, noop: dict, noop_days: int, part: dict) -> None:
    def row(label: str, value: str, target: str, ok: bool) -> None:
        print(f"{label:<58} {value:>16}   target {target:<10} {'ok' if ok else 'MISSED'}")

    print(f"\n(1) bare loop over {days} dates: {r['bare']:.2f} s ({lines_read / r['bare']:,.0f} raw lines/s)")
    print(f"(2) RangeDaily 1 worker {r['w1']:.2f} s, 2 workers {r['w2']:.2f} s")
    overhead_ms = (r["w1"] - r["bare"]) / days * 1000
    row("(2) 1 worker / bare loop", f"{r['w1'] / r['bare']:.3f}x", "<= 1.10x", r["w1"] / r["bare"] <= 1.10)
    row(
        "    orchestration + fingerprints + manifests per partition",
        f"{overhead_ms:.1f} ms",
        "< 20 ms",
        overhead_ms < 20,
    )
    row("(2) 2 workers / 1 worker", f"{r['w2'] / r['w1']:.3f}x", "< 0.80x", r["w2"] / r["w1"] < 0.80)
    row(
        f"(3) no-op RangeDaily CLI over {noop_days} complete dates",
        f"{noop['cli_noop_s']:.2f} s",
        "< 1 s",
        noop["cli_noop_s"] < 1,
    )
    print(
        f"    of which python + luigi + tasks import: {noop['python_import_s']:.2f} s; "
        f"bulk_complete alone: {noop['bulk_complete_s']:.3f} s ({noop['complete']} complete)"
    )
    extra = part["peak_rss"] - part["base_rss"]
    row(
        "(4) peak memory of one build / its table size",
        f"{extra / part['table_bytes']:.2f}x",
        "< 3x",
        extra < 3 * part["table_bytes"],
    )
    arrow = part["arrow_peak"]
    row(
        "    Arrow's peak allocation / table size",
        f"{arrow / part['table_bytes']:.2f}x",
        "< 3x",
        arrow < 3 * part["table_bytes"],
    )
    print(f"    table {part['table_bytes'] / 1e6:.1f} MB ({part['rows']:,} rows), peak RSS growth {extra / 1e6:.1f} MB")
    rate = part["raw_lines"] / part["first_s"]
    row("    raw lines/s through read, clean, write", f"{rate:,.0f}", ">= 800,000", rate >= 800_000)
    print(
        f"    (first build after warm-up, as a forked task; the same build again: "
        f"{part['raw_lines'] / part['again_s']:,.0f} raw lines/s)"
    )


if __name__ == "__main__":
    main()
