"""On-the-books rebuild benchmark (issue 3). Run: python benchmarks/otb.py [--days 365] [--workdir DIR]

365 days x 5 hotels x 200 events per hotel-day. Side by side in one run:
 (1) the I/O floor: every staging partition read in one pyarrow.dataset call;
 (2) a full OtbByStayDate rebuild (since issue 12: from the newest hotel_booking_state, built first);
 (3) a no-op completeness check of OtbByStayDate, in process and as the luigi command;
 and the rebuild's peak Arrow allocation. Targets: (2) under 3 s, (3) under 0.5 s.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
START = dt.date(2025, 9, 1)
HOTELS = ["H1", "H2", "H3", "H4", "H5"]
HEADER = "booking_id,hotel_id,event_at,event,arrival_date,departure_date,rooms,rate,channel\n"


def write_raw(raw: Path, days: int, per_day: int) -> None:
    rng = np.random.default_rng(7)
    for k in range(days):
        day = START + dt.timedelta(days=k)
        folder = raw / "hotel_bookings" / day.isoformat()
        if folder.exists():
            continue
        folder.mkdir(parents=True)
        for hotel in HOTELS:
            rows = []
            for i in range(per_day):
                modify = k > 0 and rng.random() < 0.3
                booking = (
                    f"{hotel}-{rng.integers(0, k) if modify else k:04d}-{rng.integers(0, per_day) if modify else i:03d}"
                )
                event = ("MODIFIED" if rng.random() < 0.7 else "CANCELLED") if modify else "CREATED"
                arrival = day + dt.timedelta(days=int(rng.integers(1, 120)))
                departure = arrival + dt.timedelta(days=int(rng.integers(1, 7)))
                at = f"{day}T{10 + i % 10:02d}:{i % 60:02d}:00Z"  # 10:00-19:59 UTC: the same local date everywhere
                rooms, rate = rng.integers(1, 4), rng.integers(120, 450)
                rows.append(f"{booking},{hotel},{at},{event},{arrival},{departure},{rooms},{rate}.00,direct")
            (folder / f"{hotel}.csv").write_text(HEADER + "\n".join(rows) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--per-day", type=int, default=200)
    ap.add_argument("--workdir", default=str(REPO / "data" / "bench-otb"))
    args = ap.parse_args()
    work = Path(args.workdir)
    raw, data = work / "raw", work / "data"
    write_raw(raw, args.days, args.per_day)

    import luigi.configuration

    from tasks.settings import write_config

    cfg = write_config(work / "luigi.cfg", {"daybreak": {"raw_root": raw, "data_root": data, "start_date": START}})
    luigi.configuration.get_config().add_config_path(str(cfg))
    import pyarrow as pa
    import pyarrow.dataset as ds

    from tasks.freshness.engine import Engine
    from tasks.hotels import HotelBookingState, OtbByStayDate, StgHotelBookingsDaily

    for d in (START + dt.timedelta(days=k) for k in range(args.days)):
        for task in (StgHotelBookingsDaily(date=d), HotelBookingState(date=d)):  # OTB reads the newest state
            if not task.complete():
                task.run()
    staging = data / "staging" / "hotel_bookings_daily"
    t0 = time.perf_counter()
    floor = ds.dataset(staging, format="parquet", partitioning="hive").to_table()
    io_floor = time.perf_counter() - t0

    shutil.rmtree(data / "marts" / "otb_by_stay_date", ignore_errors=True)
    OtbByStayDate.prepare_to_run()
    pool = pa.default_memory_pool()
    before = pool.max_memory()
    t0 = time.perf_counter()
    OtbByStayDate().run()
    rebuild = time.perf_counter() - t0
    arrow_peak = pool.max_memory()

    t0 = time.perf_counter()
    ok = OtbByStayDate().state(Engine()).ok
    noop = time.perf_counter() - t0
    cmd = [sys.executable, "-m", "luigi", "--module", "tasks", "OtbByStayDate", "--local-scheduler", "--no-lock"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env={**os.environ, "LUIGI_CONFIG_PATH": str(cfg)}, capture_output=True, text=True)
    cli_noop = time.perf_counter() - t0

    otb = ds.dataset(data / "marts" / "otb_by_stay_date", format="parquet").to_table()
    print(f"{args.days} days x {len(HOTELS)} hotels x {args.per_day} events: {floor.num_rows:,} staged events")
    print(f"(1) read every staging partition (pyarrow.dataset):     {io_floor:6.2f} s")
    print(
        f"(2) full OtbByStayDate rebuild:                         {rebuild:6.2f} s   target < 3 s   "
        f"{'ok' if rebuild < 3 else 'MISSED'}   ({rebuild / io_floor:.1f}x the read alone)"
    )
    print(f"    Arrow peak during the rebuild: {max(arrow_peak, before) / 1e6:.0f} MB; output {otb.num_rows:,} rows")
    print(
        f"(3) no-op check in process (complete: {ok}):             {noop:6.2f} s   target < 0.5 s "
        f"{'ok' if noop < 0.5 else 'MISSED'}"
    )
    print(f"    the luigi command, no-op (exit {proc.returncode}):              {cli_noop:6.2f} s")


if __name__ == "__main__":
    main()
