"""Identity by content (issue 14), side by side in one run. Run on demand (not in CI):

    python benchmarks/identity.py [--quick] [--workdir DIR] [--baseline DIR] [--repeat 3]

  no-op check    RangeDaily over 1,095 complete dates (benchmarks/backfill.py's tiny zone), nothing to
                 do; with --baseline, the same command with that checkout's package on the same raw
                 zone and a data root it built itself, alternated --repeat times; wall and CPU time
                 (target: no slower than the baseline)
  touch + run    60 days x 100 stores (benchmarks/backfill.py's sample) built, every raw file touched,
                 RangeDaily again: it hashes instead of parsing (target < 0.5x the full build)
  verify         ``daybreak verify`` over the same 60 days: MB/s hashed (target >= 300 MB/s)

--quick: 20 days x 30 stores and 300 dates for the no-op check. Medians are printed with the spread
of the repeats: the machine is shared, and its load moves every figure.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._luigi import timed_luigi  # noqa: E402
from benchmarks.backfill import NOOP_START, START, tiny_zone, write_cfg  # noqa: E402


def range_args(start: dt.date, days: int) -> list[str]:
    return ["RangeDaily", "--of", "StgQsrPos", "--start", str(start), "--stop", str(start + dt.timedelta(days=days))]


def noop(work: Path, days: int, baseline: Path | None, repeat: int) -> dict[str, list[tuple[float, float]]]:
    """(wall s, CPU s) of each no-op run. Each checkout checks partitions it built itself, in a data root
    of its own: another version's manifests may not be what it expects, and a check that rebuilt them
    would not be a no-op. The baseline's config also sets the range options the package sets today
    (an older checkout left Luigi's defaults: 100 days back)."""
    raw = work / "noop-raw"
    tiny_zone(raw, days, 100)
    cfgs = {"this": write_cfg(work / "noop.cfg", raw, work / "noop-data")}
    if baseline:
        base = write_cfg(work / "noop-baseline.cfg", raw, work / "noop-data-baseline")
        with open(base, "a") as fh:
            for section in ("RangeDaily", "RangeDailyBase"):
                fh.write(f"\n[{section}]\ndays_back = 36500\ntask_limit = 100000\n")
        cfgs["baseline"] = base
    repos = {"this": REPO, "baseline": baseline}
    for name, cfg in cfgs.items():
        timed_luigi(cfg, *range_args(NOOP_START, days), repo=repos[name])  # builds what is missing (not timed)
        timed_luigi(cfg, *range_args(NOOP_START, days), repo=repos[name])  # a first check may keep summaries
    out: dict[str, list[tuple[float, float]]] = {name: [] for name in cfgs}
    for _ in range(repeat):  # alternated, so that a change of load hits both
        for name, cfg in cfgs.items():
            out[name].append(cpu_luigi(cfg, *range_args(NOOP_START, days), repo=repos[name]))
    return out


def cpu_luigi(cfg: Path, *args: str, repo: Path) -> tuple[float, float]:
    """(wall s, user + system CPU s) of the luigi command: CPU time moves less with the machine's load."""
    cmd = [sys.executable, "-m", "luigi", "--module", "tasks", *args, "--local-scheduler", "--no-lock"]
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(repo)}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cfg.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args[:3])} failed ({os.waitstatus_to_exitcode(status)})")
    return wall, usage.ru_utime + usage.ru_stime


def touch_and_run(work: Path, days: int, stores: int, repeat: int) -> dict:
    from tasks import sample

    raw = work / f"raw-{days}x{stores}"
    if not (raw / "qsr_pos" / str(START + dt.timedelta(days=days))).exists():
        sample.generate(raw, START, days, stores=stores, seed=1, mean_lines_per_store=1200)
    cfg = write_cfg(work / "identity.cfg", raw, work / "data-identity")
    files = [p for p in raw.rglob("*.csv")]
    out = {"mb": sum(p.stat().st_size for p in files if "qsr_pos" in p.parts) / 1e6, "build": [], "touched": []}
    for _ in range(repeat):
        subprocess.run(["rm", "-rf", str(work / "data-identity")], check=True)
        out["build"].append(timed_luigi(cfg, *range_args(START, days)))
        now = time.time()
        for p in files:
            os.utime(p, (now, now))
        out["touched"].append(timed_luigi(cfg, *range_args(START, days)))
    out["verify"] = verify(cfg, days, repeat)
    return out


def verify(cfg: Path, days: int, repeat: int) -> list[tuple[float, float, float]]:
    """(wall s, MB/s over the wall time, MB/s as verify reports it: hashing alone, without the
    interpreter's start and imports) of ``daybreak verify`` as a new process."""
    out = []
    stop = START + dt.timedelta(days=days)
    cmd = [sys.executable, "-m", "tasks.cli", "verify", "--dataset", "stg_qsr_pos", "--start", str(START)]
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(REPO)}
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.run([*cmd, "--stop", str(stop)], env=env, capture_output=True, text=True, cwd=cfg.parent)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"verify failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        mb, own = re.search(r"([\d.]+) MB in [\d.]+ s \((\d+) MB/s\)", proc.stdout).groups()
        out.append((wall, float(mb) / wall, float(own)))
    return out


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f}, n={len(values)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default=str(REPO / "data" / "bench"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--baseline", help="another checkout (e.g. git worktree add /tmp/base engine) for the no-op")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--noop-only", action="store_true", help="only the no-op check")
    args = ap.parse_args()
    days, stores, noop_days = (20, 30, 300) if args.quick else (60, 100, 1095)
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    baseline = Path(args.baseline).resolve() if args.baseline else None

    n = noop(work, noop_days, baseline, args.repeat)
    walls = {name: [w for w, _ in runs] for name, runs in n.items()}
    cpus = {name: [c for _, c in runs] for name, runs in n.items()}
    print(f"\nno-op RangeDaily over {noop_days} complete dates: this {spread(walls['this'])}")
    print(f"                                      CPU  {spread(cpus['this'])}   target < 1 s")
    if baseline:
        print(f"                                  baseline {spread(walls['baseline'])}")
        print(f"                                      CPU  {spread(cpus['baseline'])}")
        for what, values in (("wall", walls), ("CPU", cpus)):
            ratio = statistics.median(values["this"]) / statistics.median(values["baseline"])
            print(f"  this / baseline ({what}) = {ratio:.2f}x   target <= 1.00x (+ noise)")
    if args.noop_only:
        return
    t = touch_and_run(work, days, stores, args.repeat)
    build, touched = statistics.median(t["build"]), statistics.median(t["touched"])
    print(f"{days} days x {stores} stores ({t['mb']:.0f} MB of POS files): full build {spread(t['build'])}")
    print(f"  every raw file touched, RangeDaily again: {spread(t['touched'])}")
    print(f"  touched / full build = {touched / build:.2f}x   target < 0.5x")
    walls, rates, own = ([v[i] for v in t["verify"]] for i in range(3))
    print(
        f"daybreak verify over the {days} dates: {spread(walls)}, {statistics.median(rates):.0f} MB/s over the "
        f"wall time (min {min(rates):.0f}, max {max(rates):.0f}), {statistics.median(own):.0f} MB/s hashing "
        "alone   target >= 300 MB/s"
    )
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
