"""The sample's hotel extracts: ``hotel_bookings/<D>/<hotel_id>.csv`` for every hotel of the hotels list,
20-60 CREATED / MODIFIED / CANCELLED events a day, local date ``D`` at the hotel (some at the day's edges)."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from tasks.sample.common import HOTEL, Request, create_file
from tasks.transforms.hotels import RAW_COLUMNS as HOTEL_COLUMNS


def planned(req: Request) -> list[str]:
    """Every file :func:`write` writes, below the raw root."""
    hotels = pd.read_csv(req.hotels_csv, dtype=str)["hotel_id"]
    days = [req.start + timedelta(days=i) for i in range(req.days)]
    return [f"hotel_bookings/{d.isoformat()}/{h}.csv" for h in hotels for d in days]


def write(req: Request) -> dict:
    """Every hotel's extract of every date; the counts written."""
    files, events = _hotels(req.root, req.start, req.days, req.seed, req.hotels_csv)
    return {"hotel_files": files, "hotel_events": events}


def _hotels(root: Path, start: date, days: int, seed: int, hotels_csv: Path) -> tuple[int, int]:
    """Write every hotel's extract for every date (the hotels of ``hotels_csv``); return (files, events)."""
    hotels = pd.read_csv(hotels_csv, dtype=str)
    files = events = 0
    for hi, (hotel_id, tz) in enumerate(zip(hotels["hotel_id"], hotels["timezone"], strict=True)):
        books: dict[str, list] = {}  # booking_id -> [arrival, departure, rooms, rate_cents, channel]
        counter = [0]
        for i in range(days):
            day = start + timedelta(days=i)
            rows = _hotel_day(seed, hi, hotel_id, tz, day, books, counter)
            path = root / "hotel_bookings" / day.isoformat() / f"{hotel_id}.csv"
            create_file(path, ("\n".join([",".join(HOTEL_COLUMNS), *rows]) + "\n").encode())
            files, events = files + 1, events + len(rows)
    return files, events


def _hotel_times(rng: np.random.Generator, tz: str, day: date, n: int) -> list[str]:
    """Sorted local event times of ``day`` in ``tz`` with offsets; sometimes one at 00:00:xx and one at 23:59:xx."""
    secs = np.sort(rng.integers(60, 86340, n))
    if rng.random() < 0.5:
        secs[0] = rng.integers(0, 60)
    if rng.random() < 0.5:
        secs[-1] = 86340 + rng.integers(0, 60)
    naive = pd.DatetimeIndex(np.datetime64(day, "s") + secs.astype("timedelta64[s]"))
    local = naive.tz_localize(tz, ambiguous=rng.random(n) < 0.5, nonexistent="shift_forward")
    local = local[np.argsort(local.asi8, kind="stable")]
    return [ts.isoformat() for ts in local]


def _hotel_day(seed: int, hi: int, hotel_id: str, tz: str, day: date, books: dict, counter: list) -> list[str]:
    """Event rows of one hotel and local date; updates ``books`` (the bookings on the books) in place."""
    rng = np.random.default_rng([seed, HOTEL, hi, day.toordinal()])
    n = int(rng.integers(20, 61))
    times = _hotel_times(rng, tz, day, n)
    kind = rng.choice(3, n, p=[0.65, 0.22, 0.13])
    lead, nights, shift = rng.integers(0, 121, n), rng.integers(1, 8, n), rng.integers(-3, 4, n)
    rooms, rate = rng.choice([1, 2, 3], n, p=[0.75, 0.18, 0.07]), rng.integers(12000, 45001, n)
    channel, rescale = rng.choice(["direct", "ota", "gds"], n, p=[0.4, 0.45, 0.15]), rng.uniform(0.9, 1.1, n)
    pool = [bid for bid, b in books.items() if b[0] > day]  # earlier bookings with a future arrival
    targets = list(rng.permutation(pool)) if pool else []
    rows = []
    for j in range(n):
        if kind[j] == 0 or not targets:
            counter[0] += 1
            bid, event = f"{hotel_id}-{counter[0]:06d}", "CREATED"
            arrival = day + timedelta(days=int(lead[j]))
            books[bid] = [arrival, arrival + timedelta(days=int(nights[j])), int(rooms[j]), int(rate[j]), channel[j]]
        elif kind[j] == 1:
            bid, event = str(targets.pop()), "MODIFIED"
            old = books[bid]
            arrival = max(day, old[0] + timedelta(days=int(shift[j])))
            new_rate = int(np.clip(round(old[3] * rescale[j]), 12000, 45000))
            books[bid] = [arrival, arrival + timedelta(days=int(nights[j])), int(rooms[j]), new_rate, old[4]]
        else:
            bid, event = str(targets.pop()), "CANCELLED"
        b = books[bid] if event != "CANCELLED" else books.pop(bid)
        rows.append(f"{bid},{hotel_id},{times[j]},{event},{b[0]},{b[1]},{b[2]},{b[3] // 100}.{b[3] % 100:02d},{b[4]}")
    return rows
