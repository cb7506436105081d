"""stg_qsr_pos backfill benchmark. Run: python benchmarks/backfill.py [--quick] [--repeat N]

Side by side in one run, each system in its own process, from an empty data root, the order rotating
over the repetitions:
 (1) the yardstick: the team's plain vectorised pyarrow transform (benchmarks/yardstick.py, a copy of
     shared/bench/reference.py, no Daybreak import), looped over the dates; the shared original beside
     it when it is found (--shared), and the ratio of the two; the yardstick in two processes at once,
     each on half the dates (what this machine gives two processes: the limit two workers meet); and a
     plain pyarrow loop that follows Daybreak's own rules (quarantine and manifest included, no
     Daybreak import), whose rows and rejects are checked identical to Daybreak's;
 (2) `luigi ... RangeDaily` with 1 and with 2 workers, and `RangeSingleRun`, over the same dates, as
     ratios to the yardstick in the same run (targets: 1.10x, 0.70x, 0.80x), and each system's
     first-build throughput: the raw lines its partitions read (folders d and d+1 of each date) per
     second of the range's wall time;
 (3) a no-op RangeDaily over 1,095 complete dates (every staleness check included);
 (4) peak memory of one partition's build against the partition's in-memory table size, and (for
     information) raw lines per second through read, clean and write of that one partition alone,
     in a process of its own: as in a backfill (folder d checked by the build of d-1, in the folder
     cache) and cold (no cache).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._luigi import children_cpu, rotated, timed_luigi  # noqa: E402

# jemalloc's settings as this process was started: importing tasks sets Daybreak's (tasks/__init__.py),
# which the yardstick must not inherit (it runs with Arrow's own, unless the caller chose some)
JEMALLOC_CONF = os.environ.get("JE_ARROW_MALLOC_CONF")
START = dt.date(2026, 9, 1)
NOOP_START = dt.date(2023, 9, 1)  # 1,095 dates that all lie before today: RangeDaily drops dates from today on


def write_cfg(path: Path, raw: Path, data: Path, start: dt.date = START) -> Path:
    """A config for a range from ``start`` (its ``start_date``: a range leaves out the dates before it)."""
    from tasks.settings import write_config

    roots = {"raw_root": raw, "data_root": data, "start_date": start}
    return write_config(path, {"daybreak": roots, "core": {"log_level": "WARNING"}})


def luigi_range(cfg: Path, days: int, workers: int, start: dt.date = START) -> float:
    stop = start + dt.timedelta(days=days)
    args = ["RangeDaily", "--of", "StgQsrPos", "--start", str(start), "--stop", str(stop), "--workers", str(workers)]
    return timed_luigi(cfg, *args)


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
    cfg = write_cfg(work / "noop.cfg", raw, data, NOOP_START)
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
    # three runs, the median judged: one run on a shared machine can catch a neighbour's burst
    result["cli_noop_runs"] = [luigi_range(cfg, days, 1, NOOP_START) for _ in range(3)]
    result["cli_noop_s"] = statistics.median(result["cli_noop_runs"])
    if [p.stat().st_mtime_ns for p in manifests] != before or len(manifests) != days:
        raise SystemExit("the no-op RangeDaily rebuilt something: the measurement is void")
    # and it did check the dates: the same command rebuilds a partition whose folder was deleted
    gone = manifests[len(manifests) // 2].parent
    shutil.rmtree(gone)
    luigi_range(cfg, days, 1, NOOP_START)
    if not (gone / "_manifest.json").exists():
        raise SystemExit(f"the no-op RangeDaily did not rebuild the deleted {gone.name}: it checked nothing")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import luigi.tools.range, tasks"], check=True)
    result["python_import_s"] = time.perf_counter() - t0
    return result


def one_partition(cfg: Path, date: dt.date, mode: str) -> dict:
    """Peak memory and throughput of one partition build, measured in a fresh process."""
    cmd = [sys.executable, __file__, "--measure-one", str(cfg), date.isoformat(), mode]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_one(cfg: str, date: str, mode: str) -> None:
    """(in the child) Build one partition twice, after the same warm-up a scheduling process does.

    ``mode`` "cold": no checked folders in the data root, both raw folders of the window are parsed and
    checked; "backfill": as in a per-date backfill, the build of the day before (in another process, as a
    Luigi worker would) checked folder d and left it in the data root (``_state/checked``), folder d+1 is
    checked.
    Memory is the first build's: Arrow's own peak allocation (its pool) and the peak RSS growth
    (VmHWM, reset just before the build, against the RSS then).
    """
    import os
    import resource

    import luigi.configuration

    import tasks  # noqa: F401  (first, as the luigi command imports it: it chooses Arrow's allocator)

    luigi.configuration.get_config().add_config_path(cfg)
    import pyarrow as pa

    from tasks import settings
    from tasks.cores import start_on_side_thread
    from tasks.freshness.dataversions import logical_version
    from tasks.freshness.engine import Engine
    from tasks.qsr import StgQsrPos

    StgQsrPos.prepare_to_run()  # what the scheduling process does before Luigi forks a task
    task = StgQsrPos(date=dt.date.fromisoformat(date))
    before = StgQsrPos(date=task.date - dt.timedelta(days=1))
    inputs = Engine().window(task).read
    inputs_before = Engine().window(before).read

    def setup() -> None:
        shutil.rmtree(Path(settings.data_root()) / "_state" / "checked", ignore_errors=True)
        if mode == "backfill":
            pid = os.fork()
            if pid == 0:
                built = before.build(inputs_before)
                version = start_on_side_thread(logical_version, built.table)  # as a build hashes it
                before.store().write(before.date, built.table, {"data_version": version})
                os._exit(0)
            os.waitpid(pid, 0)

    def rss() -> int:
        return int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize()

    def hwm() -> int:
        return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM"))

    pool = pa.default_memory_pool()
    arrow_before = pool.max_memory()
    timings, cpu, out = [], [], {}
    for _ in range(2):
        setup()
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # the peak RSS (VmHWM) starts again from the RSS now
        base = rss()
        t0, c0 = time.perf_counter(), time.process_time()
        built = task.build(inputs)
        version = start_on_side_thread(logical_version, built.table)
        task.store().write(task.date, built.table, {"data_version": version})
        timings.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        if not out:
            out.update(base_rss=base, peak_rss=hwm(), arrow_peak=pool.max_memory())
            out.update(table_bytes=built.table.nbytes, rows=built.table.num_rows)
        del built
    raw_lines = sum(task.zone().read_bytes(f).count(b"\n") - 1 for f in inputs)
    out.update(arrow_before=arrow_before, raw_lines=raw_lines, first_s=timings[0], again_s=timings[1], mode=mode)
    out.update(first_cpu_s=cpu[0], again_cpu_s=cpu[1])
    print(json.dumps(out))


def timed_plain(raw: Path, out: Path, days: int) -> float:
    """Wall seconds of :func:`plain_loop` in a fresh process (as the luigi commands are)."""
    cmd = [sys.executable, __file__, "--plain-loop", str(raw), str(out), str(days)]
    env = {k: v for k, v in os.environ.items() if k != "JE_ARROW_MALLOC_CONF"}
    env.update({} if JEMALLOC_CONF is None else {"JE_ARROW_MALLOC_CONF": JEMALLOC_CONF})
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def single_run(cfg: Path, days: int) -> float:
    stop = START + dt.timedelta(days=days)
    return timed_luigi(cfg, "RangeSingleRun", "--of", "StgQsrPos", "--start", str(START), "--stop", str(stop))


def same_rows(plain: Path, daybreak: Path, days: int) -> str:
    """Stop the benchmark unless the plain loop wrote the same rows and rejects as Daybreak, date by date."""
    import pyarrow.parquet as pq

    keys = [("store_id", "ascending"), ("order_id", "ascending"), ("line_no", "ascending")]
    rows = rejected = 0
    for i in range(days):
        d = START + dt.timedelta(days=i)
        ours = pq.read_table(plain / f"business_date={d}").sort_by(keys)
        theirs = pq.read_table(daybreak / "staging" / "qsr_pos" / f"business_date={d}").select(ours.column_names)
        if not ours.equals(theirs.sort_by(keys).cast(ours.schema)):
            raise SystemExit(f"{d}: the plain loop's rows differ from Daybreak's: the measurement is void")
        q = daybreak / "quarantine" / "staging" / "qsr_pos" / f"business_date={d}" / "rejected.parquet"
        mine = plain / "_quarantine" / f"business_date={d}" / "rejected.parquet"
        theirs_q = pq.read_table(q).select(["source_file", "row_number", "reason"]) if q.exists() else None
        mine_q = pq.read_table(mine).select(["source_file", "row_number", "reason"]) if mine.exists() else None
        pos = [("source_file", "ascending"), ("row_number", "ascending")]
        if (theirs_q is None) != (mine_q is None) or (mine_q and not mine_q.sort_by(pos).equals(theirs_q.sort_by(pos))):
            raise SystemExit(f"{d}: the plain loop's quarantine differs from Daybreak's: the measurement is void")
        rows, rejected = rows + ours.num_rows, rejected + (0 if mine_q is None else mine_q.num_rows)
    return f"{rows:,} rows and {rejected:,} rejects over {days} dates, identical"


SYSTEMS = ("yard", "yard2", "plain", "w1", "single", "w2")
SHARED = REPO.parent / "shared" / "bench" / "reference.py"  # the team's yardstick, where a checkout has it


def yardstick_loop(
    module: str, raw: str, out: str, days: int, suspicious_qty: int | None = None, first: int = 0
) -> None:
    """(in a fresh process) The yardstick's transform, ``stage_partition`` of ``module`` (a file: the copy
    in benchmarks/yardstick.py or the shared original), looped over the dates as the shared benchmark's
    ``runners.py limit`` does: no Daybreak import. ``suspicious_qty``: its threshold, when not its default;
    ``first``: the number of the first date (0: START)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("yardstick_under_test", module)
    yardstick = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = yardstick  # its dataclasses look their module up
    spec.loader.exec_module(yardstick)
    options = {} if suspicious_qty is None else {"suspicious_qty": suspicious_qty}
    for i in range(first, first + days):
        yardstick.stage_partition(raw, out, START + dt.timedelta(days=i), **options)


def _yardstick_env() -> dict[str, str]:
    """The environment of a yardstick process: Arrow's own allocator settings, or the caller's."""
    env = {k: v for k, v in os.environ.items() if k not in ("JE_ARROW_MALLOC_CONF", "ARROW_DEFAULT_MEMORY_POOL")}
    env.update({} if JEMALLOC_CONF is None else {"JE_ARROW_MALLOC_CONF": JEMALLOC_CONF})
    return env


def timed_yardstick(module: Path, raw: Path, out: Path, days: int, suspicious_qty: int | None = None) -> float:
    """Wall seconds of :func:`yardstick_loop` in a fresh process, with Arrow's own allocator settings."""
    cmd = [sys.executable, __file__, "--yardstick-loop", str(module), str(raw), str(out), str(days)]
    cmd += [] if suspicious_qty is None else ["--suspicious-qty", str(suspicious_qty)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=_yardstick_env())
    return time.perf_counter() - t0


def timed_yardstick_pair(module: Path, raw: Path, out: Path, days: int) -> float:
    """Wall seconds of the yardstick in two fresh processes started together, one on the first half of the
    dates and one on the rest, until both end: the most two processes get out of this machine on this
    transform, against which two workers are judged (each does one date after another, as a worker does)."""
    half = days // 2
    loop = [sys.executable, __file__, "--yardstick-loop", str(module), str(raw), str(out)]
    env = _yardstick_env()
    t0 = time.perf_counter()
    pair = [
        subprocess.Popen([*loop, str(half)], stdout=subprocess.DEVNULL, env=env),
        subprocess.Popen([*loop, str(days - half), "--first-day", str(half)], stdout=subprocess.DEVNULL, env=env),
    ]
    codes = [p.wait() for p in pair]
    if any(codes):
        raise SystemExit(f"the yardstick in two processes failed: exit codes {codes}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default=str(REPO / "data" / "bench"))
    ap.add_argument("--quick", action="store_true", help="20 days x 30 stores, 300 dates for the no-op check")
    ap.add_argument("--repeat", type=int, default=2, help="repetitions of the side-by-side runs (order rotates)")
    ap.add_argument("--no-noop", action="store_true", help="skip the no-op check (3)")
    ap.add_argument(
        "--one-only",
        action="store_true",
        help="only (4), one partition's memory and throughput, on the data the last full run left in --workdir",
    )
    ap.add_argument("--measure-one", nargs=3, metavar=("CFG", "DATE", "MODE"), help=argparse.SUPPRESS)
    ap.add_argument("--plain-loop", nargs=3, metavar=("RAW", "OUT", "DAYS"), help=argparse.SUPPRESS)
    ap.add_argument("--yardstick-loop", nargs=4, metavar=("MODULE", "RAW", "OUT", "DAYS"), help=argparse.SUPPRESS)
    ap.add_argument("--suspicious-qty", type=int, help=argparse.SUPPRESS)  # the yardstick loop's threshold
    ap.add_argument("--first-day", type=int, default=0, help=argparse.SUPPRESS)  # the yardstick loop's first date
    ap.add_argument(
        "--shared",
        default=str(SHARED),
        help="the shared yardstick's reference.py, timed beside the copy in benchmarks/yardstick.py when it "
        "exists (default: %(default)s)",
    )
    ap.add_argument("--floor", nargs=2, metavar=("RAW", "DATE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure_one:
        return measure_one(*args.measure_one)
    if args.floor:
        return print(floor_rate(Path(args.floor[0]), dt.date.fromisoformat(args.floor[1])))
    if args.plain_loop:
        raw, out, days = args.plain_loop
        return print(plain_loop(Path(raw), Path(out), START, int(days)))
    if args.yardstick_loop:
        module, raw, out, days = args.yardstick_loop
        return yardstick_loop(module, raw, out, int(days), args.suspicious_qty, args.first_day)
    days, stores, mean, noop_days = (20, 30, 1200, 300) if args.quick else (60, 100, 1200, 1095)
    work = Path(args.workdir)
    raw = work / f"raw-{days}x{stores}"
    if args.one_only:
        return one_only(work, raw, days)
    from tasks import sample

    if not (raw / "qsr_pos" / str(START + dt.timedelta(days=days))).exists():
        t0 = time.perf_counter()
        info = sample.generate(raw, START, days, stores=stores, seed=1, mean_lines_per_store=mean)
        print(f"sample: {info['qsr_lines']:,} POS lines, {time.perf_counter() - t0:.1f} s")
    per_folder: dict[str, int] = {}
    for f in (raw / "qsr_pos").glob("*/*.csv"):
        per_folder[f.parent.name] = per_folder.get(f.parent.name, 0) + sum(1 for _ in open(f, "rb")) - 1
    lines = sum(per_folder.values())
    # what the partitions read: folders d and d+1 for each date d (the plain loop reads each twice)
    window = [str(START + dt.timedelta(days=i + k)) for i in range(days) for k in (0, 1)]
    window_lines = sum(per_folder.get(name, 0) for name in window)
    runs: list[dict] = []
    cpus: list[dict] = []
    shared = Path(args.shared) if Path(args.shared).is_file() else None
    systems = SYSTEMS + (("shared",) if shared else ())
    for rep in range(args.repeat):
        order = rotated(systems, rep)
        times, cpu = {}, {}
        for name in order:
            data = work / f"data-{name}"
            shutil.rmtree(data, ignore_errors=True)
            cfg = write_cfg(work / f"{name}.cfg", raw, data)
            before = children_cpu()
            if name in ("yard", "shared"):
                times[name] = timed_yardstick(
                    shared if name == "shared" else REPO / "benchmarks" / "yardstick.py", raw, data, days
                )
            elif name == "yard2":
                times[name] = timed_yardstick_pair(REPO / "benchmarks" / "yardstick.py", raw, data, days)
            elif name == "plain":
                times[name] = timed_plain(raw, data, days)
            elif name == "single":
                times[name] = single_run(cfg, days)
            else:
                times[name] = luigi_range(cfg, days, int(name[1:]))
            cpu[name] = children_cpu() - before
        print(
            f"run {rep + 1} ({', '.join(order)}), wall (CPU): "
            + ", ".join(f"{n} {times[n]:.2f} s ({cpu[n]:.2f})" for n in systems),
            flush=True,
        )
        runs.append(times)
        cpus.append(cpu)
    check = same_rows(work / "data-plain", work / "data-w1", days)
    noop = None if args.no_noop else noop_check(work, noop_days, 100)
    parts = [one_partition(work / "w1.cfg", START + dt.timedelta(days=days // 2), m) for m in ("backfill", "cold")]
    floor = timed_floor(raw, START + dt.timedelta(days=days // 2))
    report(runs, cpus, lines, days, check, noop, noop_days, parts, window_lines, floor)


def one_only(work: Path, raw: Path, days: int) -> None:
    """(4) alone, on the raw zone and w1.cfg a previous run of the same size left in ``work``."""
    cfg = work / "w1.cfg"
    if not cfg.exists():
        raise SystemExit(f"{cfg} does not exist: run the benchmark once with the same --workdir and size first")
    parts = [one_partition(cfg, START + dt.timedelta(days=days // 2), m) for m in ("backfill", "cold")]
    report_parts(parts, floor=timed_floor(raw, START + dt.timedelta(days=days // 2)))


def report(
    runs: list[dict],
    cpus: list[dict],
    raw_lines: int,
    days: int,
    check: str,
    noop: dict | None,
    noop_days: int,
    parts: list[dict],
    window_lines: int,
    floor: float,
) -> None:
    def row(label: str, value: str, target: str, ok: bool) -> None:
        print(f"{label:<58} {value:>16}   target {target:<10} {'ok' if ok else 'MISSED'}")

    def ratios(a: str, b: str) -> list[float]:
        return [r[a] / r[b] for r in runs]

    def spread(values: list[float]) -> str:
        return f"{min(values):.3f}-{max(values):.3f}x" if len(values) > 1 else f"{values[0]:.3f}x"

    systems = [n for n in runs[0] if all(n in r for r in runs)]
    best = {n: min(r[n] for r in runs) for n in systems}
    median = {n: statistics.median(r[n] for r in runs) for n in systems}
    print(
        f"\n(1) the yardstick (benchmarks/yardstick.py) over {days} dates: best {best['yard']:.2f} s "
        f"({raw_lines:,} raw lines)"
    )
    if "shared" in best:
        row("    the copy / the shared original, same runs", spread(ratios("yard", "shared")), "~ 1.00x", True)
    row("    plain loop (Daybreak's rules) / the yardstick", spread(ratios("plain", "yard")), "info", True)
    print(f"    the plain loop's rows and rejects against Daybreak's: {check}")
    print("    best of " + f"{len(runs)}: " + ", ".join(f"{n} {best[n]:.2f} s" for n in systems))
    print("    ratios to the yardstick per run, same run's times (min-max over runs; median):")
    for a, target in (("w1", 1.10), ("w2", 0.70), ("single", 0.80)):
        values = ratios(a, "yard")
        row(f"(2) {a} / yardstick", f"{spread(values)}; {statistics.median(values):.3f}", f"<= {target:.2f}x",
            statistics.median(values) <= target)  # fmt: skip
    values = ratios("w2", "yard2")
    row("    w2 / the yardstick in two processes", f"{spread(values)}; {statistics.median(values):.3f}", "info", True)
    values = ratios("yard2", "yard")
    print(f"    the yardstick in two processes / in one (what this machine gives two): {spread(values)}")
    values = [c["w1"] / c["yard"] for c in cpus]
    print(f"    CPU seconds, w1 / yardstick (less sensitive to the machine's load): {spread(values)}")
    values = [c["w2"] / c["w1"] for c in cpus]
    print(f"    CPU seconds, w2 / w1 (what two workers cost over one: 1.00 is nothing): {spread(values)}")
    print("    median wall: " + ", ".join(f"{n} {median[n]:.2f} s" for n in systems))
    # each system's first build of the range: raw lines read (folders d and d+1 of each date) a second
    rates = {n: [window_lines / r[n] for r in runs] for n in systems}
    print(
        f"    first build of the range, raw lines read a second (folders d and d+1 of each date, {window_lines:,} "
        "lines, over each system's wall time): "
        + "; ".join(f"{n} " + ", ".join(f"{rate:,.0f}" for rate in rates[n]) for n in systems)
    )
    if noop is not None:
        row(
            f"(3) no-op RangeDaily CLI over {noop_days} complete dates, median of 3",
            f"{noop['cli_noop_s']:.2f} s",
            "< 1 s",
            noop["cli_noop_s"] < 1,
        )
        print(
            f"    runs: {', '.join(f'{t:.2f}' for t in noop['cli_noop_runs'])} s; "
            f"of which python + luigi + tasks import: {noop['python_import_s']:.2f} s; "
            f"bulk_complete alone: {noop['bulk_complete_s']:.3f} s ({noop['complete']} complete)"
        )
    report_parts(parts, max(rates["plain"]), floor)


def report_parts(parts: list[dict], plain_rate: float | None = None, floor: float | None = None) -> None:
    def row(label: str, value: str, target: str, ok: bool) -> None:
        print(f"{label:<58} {value:>16}   target {target:<10} {'ok' if ok else 'MISSED'}")

    for part in parts:
        extra = part["peak_rss"] - part["base_rss"]
        what = {"backfill": "folder d from the cache, as in a backfill", "cold": "no cache: both folders checked"}
        print(f"(4) one partition's first build, {what[part['mode']]}:")
        row(
            "    peak RSS growth / its table size",
            f"{extra / part['table_bytes']:.2f}x",
            "<= 3x",
            extra <= 3 * part["table_bytes"],
        )
        arrow = part["arrow_peak"]
        print(f"    Arrow's peak allocation / table size: {arrow / part['table_bytes']:.2f}x")
        table = f"table {part['table_bytes'] / 1e6:.1f} MB ({part['rows']:,} rows)"
        print(f"    {table}, peak RSS growth {extra / 1e6:.1f} MB")
        rate = part["raw_lines"] / part["first_s"]
        # one core, one partition, in a process of its own: the range's throughput is (2)'s
        print(f"    raw lines/s through read, clean, write, this partition alone: {rate:,.0f}")
        if plain_rate:
            print(f"    against the plain loop's best rate in this run ({plain_rate:,.0f}): {rate / plain_rate:.2f}x")
        if floor:
            print(f"    against this machine's floor for one partition ({floor:,.0f}, see below): {rate / floor:.2f}x")
        print(
            f"    (first build after warm-up, as a forked task; the same build again: "
            f"{part['raw_lines'] / part['again_s']:,.0f} raw lines/s)"
        )
        print(
            f"    per CPU second of the process (less sensitive to the machine's load): first build "
            f"{part['raw_lines'] / part['first_cpu_s']:,.0f}, again {part['raw_lines'] / part['again_cpu_s']:,.0f}"
        )
    if floor:
        print(
            f"    this machine's floor for one partition: {floor:,.0f} raw lines/s (read, hash, Arrow's threaded CSV "
            "parse, the date's rows written as zstd Parquet; no rule checked, no quarantine, no de-duplication)"
        )


# -- the plain loop: Daybreak's rules in plain pyarrow (no Daybreak import), for the rows check ---------
# Not the yardstick: benchmarks/yardstick.py is, and this loop runs 1.45-1.62x slower than it.

PLAIN_COLUMNS = ["order_id", "line_no", "store_id", "ordered_at", "sku", "qty", "unit_price", "discount", "status"]
PLAIN_NOT_CONTROL = bytes(range(32, 127)) + b"\n" + bytes(range(128, 256))  # what translate deletes
PLAIN_REASONS = [
    "",
    "order_id is empty",
    "line_no is not an integer >= 1",
    "store_id does not match the file name",
    "ordered_at is not ISO 8601 with a UTC offset",
    "ordered_at is not on a business date its folder holds (folder date or the day before): misfiled",
    "sku is empty",
    "qty is not an integer >= 1",
    "unit_price is not a decimal >= 0 (2 dp)",
    "discount is not blank or a decimal >= 0 (2 dp)",
    "status is not COMPLETED, VOIDED or REFUNDED",
    "net_amount (qty x unit_price) does not fit decimal(18,2)",
]


def plain_loop(raw: Path, out: Path, start: dt.date, days: int) -> int:
    """Stage ``days`` dates of qsr_pos with plain pyarrow, the contract's rules, no Luigi and no Daybreak
    import: per date, read folders d and d+1 (one read_csv call per folder), check, de-duplicate, drop
    VOIDED, compute net_amount, write the Parquet file, the quarantine and a manifest (fsync, rename).
    Kept to check Daybreak's rows and rejects (:func:`same_rows`), not as a baseline: it is slower than
    the yardstick. Returns the raw lines read."""
    lines = 0
    for i in range(days):
        d = start + dt.timedelta(days=i)
        window = [_plain_folder(raw / "qsr_pos" / str(f), f, d) for f in (d, d + dt.timedelta(days=1))]
        lines += sum(w["read"] for w in window)
        _plain_write(out, d, *_plain_clean(window, d))
    return lines


def floor_rate(raw: Path, d: dt.date, repeat: int = 5) -> float:
    """(in a fresh process) This machine's floor for one partition, no Daybreak import: read and hash
    folders d and d+1, parse each with Arrow's threaded CSV reader (both cores), keep the rows of
    business date d by the timestamp alone, write them as zstd Parquet. None of the contract's checks,
    no quarantine, no de-duplication: what any partition build costs at least. Best raw lines a
    second of ``repeat`` runs after a warm one."""
    import hashlib
    import tempfile
    import zoneinfo

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    tz = zoneinfo.ZoneInfo("America/New_York")
    lo = dt.datetime(d.year, d.month, d.day, 5, tzinfo=tz)
    bounds = pa.array([lo, lo + dt.timedelta(days=1)], pa.timestamp("s", tz="UTC"))
    best = 0.0
    with tempfile.TemporaryDirectory() as out:
        for i in range(repeat + 1):
            t0, lines, tables = time.perf_counter(), 0, []
            for f in (d, d + dt.timedelta(days=1)):
                datas = [p.read_bytes() for p in sorted((raw / "qsr_pos" / str(f)).glob("*.csv"))]
                for data in datas:
                    hashlib.sha256(data).digest()
                buf = datas[0] + b"".join(x[x.find(b"\n") + 1 :] for x in datas[1:])
                t = pcsv.read_csv(
                    pa.BufferReader(buf),
                    read_options=pcsv.ReadOptions(use_threads=True),
                    convert_options=pcsv.ConvertOptions(column_types={c: pa.string() for c in PLAIN_COLUMNS}),
                )
                lines += t.num_rows
                ts = pc.strptime(t["ordered_at"], format="%Y-%m-%dT%H:%M:%S%z", unit="s", error_is_null=True)
                tables.append(t.filter(pc.and_(pc.greater_equal(ts, bounds[0]), pc.less(ts, bounds[1]))))
            pq.write_table(pa.concat_tables(tables), f"{out}/data.parquet", compression="zstd")
            if i:  # the first run warms the page cache and the libraries
                best = max(best, lines / (time.perf_counter() - t0))
    return best


def timed_floor(raw: Path, d: dt.date) -> float:
    """:func:`floor_rate` in a fresh process, with Arrow's own allocator settings (as the plain loop)."""
    cmd = [sys.executable, __file__, "--floor", str(raw), d.isoformat()]
    env = {k: v for k, v in os.environ.items() if k != "JE_ARROW_MALLOC_CONF"}
    env.update({} if JEMALLOC_CONF is None else {"JE_ARROW_MALLOC_CONF": JEMALLOC_CONF})
    return float(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout.split()[-1])


def _plain_folder(folder: Path, fdate: dt.date, d: dt.date) -> dict:
    import re

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    names = sorted(p.name for p in folder.iterdir() if re.fullmatch(r"[A-Z0-9][A-Z0-9_-]{0,31}\.csv", p.name))
    datas = [(folder / n).read_bytes() for n in names]
    header = datas[0].split(b"\n", 1)[0]
    bodies, counts = [header + b"\n"], []
    for n, data in zip(names, datas, strict=True):
        head, _, body = data.partition(b"\n")
        if head != header or header.decode().split(",") != PLAIN_COLUMNS:
            raise ValueError(f"{folder / n}: header {head!r} is not the contract's")
        body = body if body.endswith(b"\n") or not body else body + b"\n"
        bodies.append(body)
        counts.append(body.count(b"\n"))
    bad: list[tuple[int, str, str]] = []

    def invalid(row):
        bad.append((row.number, f"row has {row.actual_columns} fields, header has {row.expected_columns}", row.text))
        return "skip"

    buf = b"".join(bodies)
    t = pcsv.read_csv(
        pa.BufferReader(buf),
        parse_options=pcsv.ParseOptions(invalid_row_handler=invalid),
        convert_options=pcsv.ConvertOptions(
            column_types={c: pa.string() for c in PLAIN_COLUMNS}, strings_can_be_null=False
        ),
    )
    starts = np.concatenate([[0], np.cumsum(counts)])  # body lines before each file
    line = np.arange(2, starts[-1] + 2)
    line = line[~np.isin(line, [b[0] for b in bad])]  # header = 1: line - 2 is the 0-based body line
    file_i = np.searchsorted(starts, line - 2, side="right") - 1
    files = pa.array([f"qsr_pos/{fdate}/{n}" for n in names])
    t = t.append_column("source_file", pc.take(files, pa.array(file_i))).append_column(
        "row_number", pa.array(line - starts[file_i])
    )
    control = []
    if buf.translate(None, PLAIN_NOT_CONTROL):  # a control byte somewhere: find the fields that hold one
        control = [pc.match_substring_regex(t[c], r"[\x00-\x1f\x7f]") for c in PLAIN_COLUMNS]
    mal_file = np.searchsorted(starts, np.array([b[0] for b in bad], dtype=np.int64) - 2, side="right") - 1
    malformed = [
        (f"qsr_pos/{fdate}/{names[f]}", n - starts[f], r, s) for f, (n, r, s) in zip(mal_file, bad, strict=True)
    ]
    return {"t": t, "date": fdate, "stems": pa.array(n[:-4] for n in names), "file_i": file_i,
            "control": control, "malformed": malformed, "read": sum(counts)}  # fmt: skip


def _plain_clean(window: list[dict], d: dt.date):
    import functools

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    def blank(c):
        return pc.or_(pc.equal(pc.utf8_length(c), 0), pc.utf8_is_space(c))

    def int_ge1(c):  # 1 to 9 ASCII digits, not all zeros
        short = pc.and_(pc.ascii_is_decimal(c), pc.less_equal(pc.binary_length(c), 9))
        return pc.and_(short, pc.not_equal(pc.utf8_ltrim(c, "0"), ""))

    def money(c):
        return pc.match_substring_regex(c, r"^[0-9]{1,15}(\.[0-9]{1,2})?$")

    money_t, seq0, parts = pa.decimal128(18, 2), 0, []
    for f in window:
        t, fdate = f["t"], f["date"]
        ts = pc.strptime(t["ordered_at"], format="%Y-%m-%dT%H:%M:%S%z", unit="s", error_is_null=True)
        if ts.null_count:  # fractional seconds: floored, as the contract's instants are whole seconds
            ts, retry = ts.combine_chunks(), pc.is_null(ts).combine_chunks()
            cut = pc.replace_substring_regex(
                t["ordered_at"].filter(retry), r"(T[0-9]{2}:[0-9]{2}:[0-9]{2})\.[0-9]+", r"\1"
            )
            again = pc.strptime(cut, format="%Y-%m-%dT%H:%M:%S%z", unit="s", error_is_null=True)
            ts = pc.replace_with_mask(ts, retry, again.combine_chunks())
        ts = _plain_real_days(t["ordered_at"], ts)
        local = pc.local_timestamp(ts.cast(pa.timestamp("s", tz="America/Toronto")))
        bdate = (
            pc.subtract(local, pa.scalar(dt.timedelta(hours=5), pa.duration("s")))
            .cast(pa.timestamp("s"))
            .cast(pa.date32())
        )
        held = pa.array([fdate - dt.timedelta(days=1), fdate], pa.date32())
        misfiled = pc.fill_null(pc.invert(pc.is_in(bdate, held)), False)
        qty_ok, price_ok = int_ge1(t["qty"]), money(t["unit_price"])
        typed = pc.and_(qty_ok, price_ok)
        gross = pc.multiply(
            pc.cast(pc.if_else(typed, t["qty"], "0"), pa.decimal128(10, 0)),
            pc.cast(pc.if_else(typed, t["unit_price"], "0"), pa.decimal128(17, 2)),
        )
        failed = [
            blank(t["order_id"]), pc.invert(int_ge1(t["line_no"])),
            pc.not_equal(t["store_id"], pc.take(f["stems"], pa.array(f["file_i"]))), pc.is_null(ts), misfiled,
            blank(t["sku"]), pc.invert(qty_ok), pc.invert(price_ok),
            pc.invert(pc.or_(blank(t["discount"]), money(t["discount"]))),
            pc.invert(pc.is_in(t["status"], pa.array(["COMPLETED", "VOIDED", "REFUNDED"]))),
            pc.greater_equal(gross, pa.scalar(10**16, pa.decimal128(28, 2))),
        ]  # fmt: skip
        code = np.zeros(t.num_rows, np.int8)
        for i in range(len(failed), 0, -1):
            code[np.asarray(failed[i - 1])] = i
        reason = pc.take(pa.array(PLAIN_REASONS), pa.array(code))
        if f["control"]:
            has = functools.reduce(pc.or_, f["control"])
            reason = pc.if_else(has, "a field holds a control character", reason)
            code[np.asarray(has)] = 99
        valid = pa.array(code == 0)
        # a line whose business date cannot be read is a reject of every partition that reads its folder;
        # a misfiled one (a date neither partition holds) of the folder's date's
        known = pc.if_else(misfiled, fdate == d, pc.equal(bdate, pa.scalar(d)))
        mine = pc.if_else(pc.is_null(bdate), True, known)
        seq = pa.array(np.arange(seq0, seq0 + t.num_rows))
        seq0 += t.num_rows
        good = t.select(["store_id", "order_id", "line_no"]).filter(valid)
        keys = pa.table({"s": good["store_id"], "o": good["order_id"], "l": good["line_no"], "seq": seq.filter(valid)})
        keep = pc.and_(valid, mine)
        rows = t.filter(keep).select(
            ["store_id", "order_id", "line_no", "sku", "qty", "unit_price", "discount", "status", "source_file"]
        )
        rows = rows.append_column("ordered_at", ts.filter(keep)).append_column("seq", seq.filter(keep))
        bad = pc.and_(pc.invert(valid), mine)
        rej = (
            t.filter(bad)
            .append_column("reason", reason.filter(bad))
            .select(["source_file", "row_number", "reason", *PLAIN_COLUMNS])
        )
        mal = f["malformed"]  # a row the parser cannot split: no date to read, so every partition's
        if mal:
            cols = {
                "source_file": [m[0] for m in mal],
                "row_number": [int(m[1]) for m in mal],
                "reason": [m[2] for m in mal],
            }
            cols.update({c: [m[3][:200] if c == "order_id" else "" for m in mal] for c in PLAIN_COLUMNS})
            rej = pa.concat_tables([rej, pa.table(cols, schema=rej.schema)])
        parts.append((keys, rows, rej, pc.sum(mine).as_py() + len(mal), t.num_rows + len(f["malformed"])))
    keys = pa.concat_tables([p[0] for p in parts])
    rows = pa.concat_tables([p[1] for p in parts])
    rejected = pa.concat_tables([p[2] for p in parts])
    attributed = sum(p[3] for p in parts)
    if rejected.num_rows > 0.05 * attributed:
        raise ValueError(
            f"{d}: {rejected.num_rows} of {attributed} rows rejected, first {rejected.slice(0, 1).to_pylist()}"
        )
    last = keys.group_by(["s", "o", "l"], use_threads=False).aggregate([("seq", "max")])["seq_max"]
    latest = np.zeros(seq0, bool)
    latest[np.asarray(last)] = True  # seq numbers the rows of the window 0, 1, ...: a flag per row
    is_last = pa.array(latest[np.asarray(rows["seq"])])
    voided = pc.equal(rows["status"], "VOIDED")
    kept = rows.filter(pc.and_(is_last, pc.invert(voided)))
    qty, price = pc.cast(kept["qty"], pa.int32()), pc.cast(kept["unit_price"], money_t)
    discount = pc.cast(pc.if_else(blank(kept["discount"]), "0", kept["discount"]), money_t)
    net = pc.cast(pc.subtract(pc.multiply(pc.cast(qty, pa.decimal128(10, 0)), price), discount), money_t)
    table = pa.table({
        "store_id": kept["store_id"], "order_id": kept["order_id"], "line_no": pc.cast(kept["line_no"], pa.int32()),
        "ordered_at": kept["ordered_at"], "sku": kept["sku"], "qty": qty, "unit_price": price, "discount": discount,
        "net_amount": pc.if_else(pc.equal(kept["status"], "REFUNDED"), pc.negate(net), net),
        "status": kept["status"], "is_suspicious": pc.greater(qty, 20), "source_file": kept["source_file"],
    })  # fmt: skip
    voided_dropped = pc.sum(pc.and_(is_last, voided)).as_py()
    counts = {"rows": table.num_rows, "rejected": rejected.num_rows, "attributed_rows": attributed,
              "voided_dropped": voided_dropped, "rows_read": sum(p[4] for p in parts)}  # fmt: skip
    return table, rejected, counts


def _plain_real_days(text, ts):
    """``ts`` with null where the text names a day its month does not have (2026-09-31: strptime rolls it
    over to the next month)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    late = np.flatnonzero(
        pc.fill_null(pc.and_(pc.is_valid(ts), pc.greater_equal(pc.utf8_slice_codeunits(text, 8, 10), "29")), False)
    )
    if not len(late):
        return ts
    few = pc.take(text, pa.array(late))
    y, m, d = (pc.cast(pc.utf8_slice_codeunits(few, i, j), pa.int64()).to_numpy() for i, j in ((0, 4), (5, 7), (8, 10)))
    leap = (m == 2) & (y % 4 == 0) & ((y % 100 != 0) | (y % 400 == 0))
    bad = np.zeros(len(ts), bool)
    bad[late[d > np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[m] + leap]] = True
    return pc.if_else(pa.array(bad), pa.scalar(None, ts.type), ts)


def _plain_write(out: Path, d: dt.date, table, rejected, counts: dict) -> None:
    import hashlib
    import json
    import os

    import pyarrow.parquet as pq

    folder, quarantine = out / f"business_date={d}", out / "_quarantine" / f"business_date={d}"
    folder.mkdir(parents=True, exist_ok=True)
    quarantine.mkdir(parents=True, exist_ok=True)
    files = [(folder / "part-0.parquet", table)] + (
        [(quarantine / "rejected.parquet", rejected)] if rejected.num_rows else []
    )
    manifest = dict(counts, business_date=str(d))
    for path, t in files:
        pq.write_table(t, path.with_name("." + path.name))
        with open(path.with_name("." + path.name), "rb") as fh:
            manifest[path.name] = hashlib.sha256(fh.read()).hexdigest()
            os.fsync(fh.fileno())
    with open(folder / "._manifest.json", "w") as fh:
        json.dump(manifest, fh)
        fh.flush()
        os.fsync(fh.fileno())
    for path, _ in [*files, (folder / "_manifest.json", None)]:
        os.replace(path.with_name("." + path.name), path)
    fd = os.open(folder, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


if __name__ == "__main__":
    main()
