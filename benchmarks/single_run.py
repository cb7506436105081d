"""One Luigi task per date (RangeDaily) against one run for the range (RangeSingleRun), on 60 dates.

Run: python benchmarks/single_run.py [--days 60] [--stores 50] [--rounds 2]

Side by side in one run, each build from an empty data root, on the local raw zone and on the same
files served by a real OpenSSH server on 127.0.0.1 (started here):
  per-date, 1 worker  (the baseline)   RangeDaily --workers 1
  per-date, 2 workers                  RangeDaily --workers 2
  single run                           RangeSingleRun (one task, one process, one SFTP session)
It prints the wall time of each (best of --rounds), its ratio to the baseline, and for SFTP the SSH
connections the server accepted (from its VERBOSE log).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._luigi import timed_luigi  # noqa: E402

START = dt.date(2026, 9, 1)


def build(cfg: Path, family: str, days: int, workers: int) -> float:
    stop = START + dt.timedelta(days=days)
    args = ["--of", "StgQsrPos", "--start", str(START), "--stop", str(stop), "--workers", str(workers)]
    return timed_luigi(cfg, family, *args)


def main() -> None:
    from tasks import sample
    from tasks.settings import write_config
    from tests.sshd import Sshd

    ap = argparse.ArgumentParser()
    ap.add_argument("--days", type=int, default=60)
    ap.add_argument("--stores", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="daybreak-single-run-"))
    raw, data = work / "raw", work / "data"
    sample.generate(raw, START, args.days + 1, stores=args.stores, seed=1, include_late=False)
    server = Sshd(work / "sshd").start()
    modes = [("per-date, 1 worker", "RangeDaily", 1), ("per-date, 2 workers", "RangeDaily", 2)]
    modes.append(("single run", "RangeSingleRun", 1))
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
            results = {}
            for label, family, workers in modes * args.rounds:
                shutil.rmtree(data, ignore_errors=True)
                log_before = (work / "sshd" / "sshd.log").read_text().count("Accepted publickey")
                wall = build(cfg, family, args.days, workers)
                sessions = (work / "sshd" / "sshd.log").read_text().count("Accepted publickey") - log_before
                best = results.get(label)
                results[label] = (min(wall, best[0]) if best else wall, sessions)
            base = results[modes[0][0]][0]
            print(f"\n{zone_name} raw zone, {args.days} dates x {args.stores} stores, best of {args.rounds}:")
            for label, (wall, sessions) in results.items():
                extra = f", {sessions} SSH connections" if zone_name == "sftp" else ""
                print(f"  {label:<22} {wall:6.2f} s  {wall / base:5.2f}x{extra}")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
