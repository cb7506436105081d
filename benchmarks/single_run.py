"""One Luigi task per date (RangeDaily) against one run for the range (RangeSingleRun), against a plain loop.

Run: python benchmarks/single_run.py [--days 60] [--stores 50] [--rounds 3]

On a local raw zone, then on the same files served by a real OpenSSH server on 127.0.0.1 (started here),
each system in a fresh process, each build from an empty data root, the order rotating over --rounds:
  baseline             local: the yardstick (benchmarks/yardstick.py, no Daybreak import) looped over
                       the dates; SFTP: OpenSSH's own client (`sftp -b`, `get -r` of each raw folder the
                       dates read) fetching them into a temporary folder, then the same loop on that copy
                       (its time is the fetch plus the loop)
  per-date, 1 worker   RangeDaily --workers 1
  per-date, 2 workers  RangeDaily --workers 2
  single run           RangeSingleRun (one task, one process, one SFTP session)
It prints each system's median wall time, the median of its ratios to the baseline and to RangeDaily
--workers 1 (ratios taken within a round), and over SFTP the SSH connections the server accepted
(from its VERBOSE log).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._luigi import rotated, timed_luigi  # noqa: E402
from benchmarks.backfill import START, timed_yardstick  # noqa: E402  (no Daybreak import)
from benchmarks.sftp import openssh_batch  # noqa: E402

YARDSTICK = REPO / "benchmarks" / "yardstick.py"
SYSTEMS = ("base", "w1", "w2", "single")
LABELS = {"w1": "per-date, 1 worker", "w2": "per-date, 2 workers", "single": "single run"}
BASELINES = {"local": "yardstick loop", "sftp": "sftp -b, then yardstick loop"}


def build(cfg: Path, family: str, days: int, workers: int) -> float:
    stop = START + dt.timedelta(days=days)
    args = ["--of", "StgQsrPos", "--start", str(START), "--stop", str(stop), "--workers", str(workers)]
    return timed_luigi(cfg, family, *args)


def fetched_then_looped(server, raw: Path, copy: Path, data: Path, days: int) -> tuple[float, float]:
    """(wall s, of which the fetch) of the SFTP baseline: ``sftp -b`` fetching raw folders d and d+1 of
    every date (``get -r`` a folder) into ``copy``, then the yardstick loop on that copy."""
    shutil.rmtree(copy, ignore_errors=True)
    (copy / "qsr_pos").mkdir(parents=True)
    batch = copy.parent / "fetch.batch"
    folders = [START + dt.timedelta(days=i) for i in range(days + 1)]
    batch.write_text("".join(f"get -r {raw}/qsr_pos/{d} {copy}/qsr_pos\n" for d in folders))
    t0 = time.perf_counter()
    openssh_batch(server, batch)
    fetch = time.perf_counter() - t0
    return fetch + timed_yardstick(YARDSTICK, copy, data, days), fetch


def main() -> None:
    from tasks import sample
    from tasks.settings import write_config
    from tests.sshd import Sshd

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=int, default=60)
    ap.add_argument("--stores", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of every system (the order rotates)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="daybreak-single-run-"))
    raw, data, copy = work / "raw", work / "data", work / "copy"
    sample.generate(raw, START, args.days + 1, stores=args.stores, seed=1, include_late=False)
    server = Sshd(work / "sshd").start()
    log = work / "sshd" / "sshd.log"
    modes = {"w1": ("RangeDaily", 1), "w2": ("RangeDaily", 2), "single": ("RangeSingleRun", 1)}
    try:
        for zone_name, raw_root in (("local", raw), ("sftp", server.uri(raw))):
            sftp = {"key_filename": server.client_key, "known_hosts": server.known_hosts}
            cfg = write_config(
                work / f"{zone_name}.cfg",
                {
                    "daybreak": {"raw_root": raw_root, "data_root": data, "start_date": START},
                    "sftp": sftp,
                    "core": {"log_level": "WARNING"},
                },
            )
            runs: list[dict[str, float]] = []
            fetches: list[float] = []
            sessions: dict[str, int] = {}
            for rnd in range(args.rounds):
                order = rotated(SYSTEMS, rnd)
                times: dict[str, float] = {}
                for name in order:
                    shutil.rmtree(data, ignore_errors=True)
                    before = log.read_text().count("Accepted publickey")
                    if name != "base":
                        family, workers = modes[name]
                        times[name] = build(cfg, family, args.days, workers)
                    elif zone_name == "local":
                        times[name] = timed_yardstick(YARDSTICK, raw, data, args.days)
                    else:
                        times[name], fetch = fetched_then_looped(server, raw, copy, data, args.days)
                        fetches.append(fetch)
                    sessions[name] = log.read_text().count("Accepted publickey") - before
                runs.append(times)
                print(
                    f"{zone_name} round {rnd + 1} ({', '.join(order)}): "
                    + ", ".join(f"{n} {times[n]:.2f} s" for n in SYSTEMS),
                    flush=True,
                )
            report(zone_name, runs, fetches, sessions, args)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def report(zone: str, runs: list[dict], fetches: list[float], sessions: dict[str, int], args) -> None:
    def median_ratio(name: str, to: str) -> float:
        return statistics.median(r[name] / r[to] for r in runs)

    baseline = f"baseline: {BASELINES[zone]}"
    print(f"\n{zone} raw zone, {args.days} dates x {args.stores} stores, {len(runs)} round(s), medians:")
    print(f"  {'system':<38} {'wall':>8}  {'/ baseline':>10}  {'/ RangeDaily w1':>15}")
    for name in SYSTEMS:
        wall = statistics.median(r[name] for r in runs)
        extra = f"  {sessions[name]} SSH connection(s)" if zone == "sftp" else ""
        label = baseline if name == "base" else LABELS[name]
        print(
            f"  {label:<38} {wall:6.2f} s  {median_ratio(name, 'base'):9.2f}x  {median_ratio(name, 'w1'):14.2f}x{extra}"
        )
    if fetches:
        print(f"  (the baseline's fetch alone: {statistics.median(fetches):.2f} s, median)")
    if len(runs) > 1:
        for name in SYSTEMS[1:]:
            each = ", ".join(f"{r[name] / r['base']:.2f}" for r in runs)
            print(f"  {LABELS[name]} / baseline, each round: {each}")


if __name__ == "__main__":
    main()
