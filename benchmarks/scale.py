"""Issue 12's scale targets, side by side in one run. Run on demand (not in CI):

    python benchmarks/scale.py [--days 1095] [--short 90] [--baseline DIR] [--baseline-days 360] [--single-run]

Three years of sample data (benchmarks/status.py's: 2 stores, 5 hotels, one ad account), every
staging dataset and the ads marts built first (not timed; kept in --workdir for reruns). Then:

  pickup chain   a one-hotel HotelPickup backfill (benchmarks/pickup.py's command, booking state
                 included) over --short dates and over --days dates, each from no pickups and no
                 booking state; the per-date cost of the long one over the short one (target <= 1.25x)
  no-op rerun    the long backfill again, nothing to do (target < 1 s)
  status         ``daybreak status --json`` over --days days of every dataset, as a new process,
                 with the long backfill's pickups in place (target < 2 s)

With ``--baseline DIR`` (another checkout, e.g. ``git archive main | tar -x -C DIR``), the same
commands run with that package too, on copies of the same staging; its long backfill covers
--baseline-days dates (the engine before issue 12 grows with the square of the dates: 1,095 would
take about ten minutes for one hotel).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._luigi import LAST_CPU, timed_luigi  # noqa: E402
from benchmarks.pickup import pickup_args  # noqa: E402
from benchmarks.status import START, prepare, status_cli  # noqa: E402

HOTEL = "H3"
BUILT = ("marts/hotel_pickup", "marts/hotel_booking_state")


def pickup_root(work: Path, name: str, days: int) -> Path:
    """A data root for one backfill: the prepared staging, no pickups, no booking state."""
    from tasks.settings import write_config

    root = work / name
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(work / "data" / "staging" / "hotel_bookings_daily", root / "data/staging/hotel_bookings_daily")
    daybreak = {"raw_root": work / "raw", "data_root": root / "data", "start_date": START}
    write_config(root / "luigi.cfg", {"daybreak": daybreak, "core": {"log_level": "WARNING"}})
    return root / "luigi.cfg"


def backfill(cfg: Path, days: int, repo: Path, single: bool = False) -> float:
    args = pickup_args(HOTEL, START, START + dt.timedelta(days=days))
    if single:  # the same range as one Luigi task per dataset (RangeSingleRun takes no task limit)
        args = ["RangeSingleRun", *args[1 : args.index("--task-limit")]]
    return timed_luigi(cfg, *args, repo=repo)


def measure(
    work: Path, repo: Path, label: str, short: int, long: int, env: dict, days: int, single: bool
) -> dict[str, float]:
    """The three measurements with the package of ``repo``; the long backfill in the main data root
    (so that status sees its pickups), the short one beside it."""
    short_cfg = pickup_root(work, f"pickup-{label}-{short}", short)
    for dataset in BUILT:
        shutil.rmtree(work / "data" / dataset, ignore_errors=True)
    out = {"short": backfill(short_cfg, short, repo, single)}
    out["short_cpu"] = LAST_CPU[0]
    out["long"] = backfill(work / "luigi.cfg", long, repo, single)
    out["long_cpu"] = LAST_CPU[0]
    out["noop"] = backfill(work / "luigi.cfg", long, repo, single)
    out["status"], rows = status_cli({**env, "PYTHONPATH": str(repo)}, work, START + dt.timedelta(days=days))
    out["status_rows"] = len(rows)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=1095)
    ap.add_argument("--short", type=int, default=90)
    ap.add_argument("--baseline", help="another checkout of the repository to measure side by side")
    ap.add_argument("--baseline-days", type=int, default=360)
    ap.add_argument("--workdir", default=str(REPO / "data" / "bench" / "scale"))
    ap.add_argument("--single-run", action="store_true", help="RangeSingleRun instead of RangeDaily")
    args = ap.parse_args()
    work = Path(args.workdir)
    _, env, _ = prepare(work, args.days)
    runs = [("new", REPO, args.days)]
    if args.baseline:
        runs.insert(0, ("baseline", Path(args.baseline).resolve(), args.baseline_days))
    results = {}
    for label, repo, long in runs:
        t0 = time.perf_counter()
        results[label] = measure(work, repo, label, args.short, long, env, args.days, args.single_run)
        print(f"measured {label} ({repo}) in {time.perf_counter() - t0:.0f} s", flush=True)
    family = "RangeSingleRun" if args.single_run else "RangeDaily"
    print(f"\n{os.cpu_count()} cores; one hotel ({HOTEL}), {family}; staging built beforehand, not counted")
    for label, _, long in runs:
        r = results[label]
        per_short, per_long = r["short"] / args.short, r["long"] / long
        ratio = per_long / per_short
        verdict = "ok" if ratio <= 1.25 else "MISSED"
        print(f"{label}:")
        print(f"  pickup backfill {args.short} dates {r['short']:7.1f} s  ({1000 * per_short:5.0f} ms a date)")
        print(f"  pickup backfill {long} dates {r['long']:7.1f} s  ({1000 * per_long:5.0f} ms a date)")
        print(f"  per-date cost, {long} / {args.short} dates      {ratio:5.2f}x   target <= 1.25x  {verdict}")
        cpu = (r["long_cpu"] / long) / (r["short_cpu"] / args.short)
        cpus = f"({r['short_cpu']:.1f} s, {r['long_cpu']:.1f} s)"
        print(f"    in CPU seconds (steadier on a busy machine)   {cpu:5.2f}x   {cpus}")
        verdict = "ok" if r["noop"] < 1 else "MISSED"
        print(f"  no-op rerun over {long} dates       {r['noop']:7.2f} s    target < 1 s      {verdict}")
        verdict = "ok" if r["status"] < 2 else "MISSED"
        print(
            f"  daybreak status --json, {args.days} days  {r['status']:7.2f} s    target < 2 s      {verdict}"
            f"  ({r['status_rows']} rows)"
        )


if __name__ == "__main__":
    main()
