"""hotel_pickup backfill benchmark. Run: PYTHONPATH=. python benchmarks/pickup.py [--days 60] [--hotel H3]

Generates the sample raw zone (a few stores, every hotel) for ``days`` + 1 folders, builds the hotel staging
partitions first (not timed), then times ``RangeDaily --of HotelPickup --of-params '{"hotel": H}'`` over
``days`` dates in a fresh process: the one-hotel backfill docs/run-semantics.md quotes, with every
completeness check Luigi makes, and a second, no-op run over the same range.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._luigi import timed_luigi  # noqa: E402

START = dt.date(2025, 9, 1)  # RangeDaily leaves out dates from today on: the whole range in the past


def pickup_args(hotel: str, start: dt.date, stop: dt.date) -> list[str]:
    """The one-hotel backfill: ``RangeDaily --of HotelPickup`` over [start, stop)."""
    span = ["--start", str(start), "--stop", str(stop), "--task-limit", str((stop - start).days)]
    return ["RangeDaily", "--of", "HotelPickup", "--of-params", json.dumps({"hotel": hotel}), *span]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--hotel", default="H3")
    args = parser.parse_args()
    from tasks import sample
    from tasks.settings import write_config

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sample.generate(root / "raw", START, args.days + 1, stores=2, seed=1)
        roots = {"raw_root": root / "raw", "data_root": root / "data", "start_date": START}
        cfg = write_config(root / "luigi.cfg", {"daybreak": roots, "core": {"log_level": "WARNING"}})
        stop = START + dt.timedelta(days=args.days)
        span = ["--start", str(START), "--stop", str(stop)]
        staging = timed_luigi(cfg, "RangeDaily", "--of", "StgHotelBookingsDaily", *span)
        of = pickup_args(args.hotel, START, stop)
        backfill = timed_luigi(cfg, *of)
        built = len(list((root / "data/marts/hotel_pickup").glob(f"*/hotel_id={args.hotel}/_manifest.json")))
        assert built == args.days, built
        noop = timed_luigi(cfg, *of)
        print(
            f"{args.days} dates, hotel {args.hotel}: staging {staging:.1f} s (not counted), "
            f"pickup backfill {backfill:.1f} s, no-op rerun {noop:.1f} s"
        )


if __name__ == "__main__":
    main()
