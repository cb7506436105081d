"""Status view speed over 3 years (issue 7). Run: python benchmarks/status.py [--days 1095] [--workdir DIR]

Builds 3 years of sample data (2 stores, 5 hotels, one ad account) with single-run ranges: every
stg_qsr_pos, stg_hotel_bookings_daily, ads_daily and ads_rolling_7d partition; the other datasets
(the hotel and store marts) are left unbuilt, so they show as missing. Then, side by side:
  baseline   list every manifest of the four built datasets and json-load it (the least a view that
             reads manifests must do)
  status     `daybreak status` as a user runs it (a new process; imports included), every dataset
  in-process status.collect() of every dataset, and of the four date-only datasets
The target (issue 7): 3 years x 6 datasets in under 2 s. The workdir is kept for reruns.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
START = dt.date(2023, 9, 1)


def prepare(work: Path, days: int) -> tuple[Path, dict, dt.date]:
    """The sample raw zone and every date-partitioned staging dataset and ads mart over ``days`` days
    under ``work`` (kept for reruns): (luigi.cfg, environment for a subprocess, stop date)."""
    from tasks import sample
    from tasks.settings import write_config

    raw, data = work / "raw", work / "data"
    work.mkdir(parents=True, exist_ok=True)
    stop = START + dt.timedelta(days=days)
    cfg = write_config(
        work / "luigi.cfg",
        {"daybreak": {"raw_root": raw, "data_root": data, "start_date": START}, "core": {"log_level": "WARNING"}},
    )
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(REPO)}
    if not raw.exists():
        print(f"writing {days + 8} days of sample raw data to {raw} ...", flush=True)
        sample.generate(raw, START, days + 8, stores=2, seed=1, mean_lines_per_store=20)
    t0 = time.perf_counter()
    for family in ("StgQsrPos", "StgHotelBookingsDaily", "AdsRolling7d"):  # AdsRolling7d builds AdsDaily first
        cmd = [sys.executable, "-m", "luigi", "--module", "tasks", "RangeSingleRun", "--of", family]
        cmd += ["--start", str(START), "--stop", str(stop), "--local-scheduler", "--no-lock"]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=work)
        if proc.returncode != 0:
            raise SystemExit(f"{family} failed ({proc.returncode}): {proc.stderr[-3000:]}")
    print(f"built (or checked) 4 x {days} partitions in {time.perf_counter() - t0:.0f} s")
    return cfg, env, stop


def status_cli(env: dict, work: Path, stop: dt.date) -> tuple[float, list[dict]]:
    """``daybreak status --json`` over [START, stop) as a user runs it (a new process): (seconds, rows)."""
    cmd = [sys.executable, "-m", "tasks.cli", "status", "--start", str(START), "--stop", str(stop), "--json"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=work)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    return took, json.loads(proc.stdout[proc.stdout.index("[") :])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=1095)
    ap.add_argument("--workdir", default=str(REPO / "data" / "bench" / "status"))
    args = ap.parse_args()
    work = Path(args.workdir)
    data = work / "data"
    cfg, env, stop = prepare(work, args.days)

    t0 = time.perf_counter()
    manifests = 0
    for dataset in ("staging/qsr_pos", "staging/hotel_bookings_daily", "staging/ads_daily", "marts/ads_rolling_7d"):
        folder = data / dataset
        for name in os.listdir(folder) if folder.exists() else []:
            with open(folder / name / "_manifest.json", encoding="utf-8") as fh:
                json.load(fh)
                manifests += 1
    baseline = time.perf_counter() - t0

    cli, rows = status_cli(env, work, stop)
    states: dict[str, dict[str, int]] = {}
    for r in rows:
        states.setdefault(r["dataset"], {}).setdefault(r["state"], 0)
        states[r["dataset"]][r["state"]] += 1

    import luigi.configuration

    luigi.configuration.get_config().add_config_path(str(cfg))
    from tasks.views import status

    timings = {}
    for label, names in (("all datasets", None), ("date-only datasets", list(status.DATASETS))):
        t0 = time.perf_counter()
        status.collect(START, stop, names)
        timings[label] = time.perf_counter() - t0

    print(f"\n{args.days} days; states per dataset: {json.dumps(states)}")
    print(f"  baseline: json-load {manifests} manifests          {baseline:6.2f} s   1.00x")
    print(f"  daybreak status --json (new process, all)  {cli:6.2f} s  {cli / baseline:5.2f}x   target < 2 s")
    for label, took in timings.items():
        print(f"  status.collect, {label:<24}  {took:6.2f} s  {took / baseline:5.2f}x")


if __name__ == "__main__":
    main()
