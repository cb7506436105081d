"""The sample's ad exports: ``ads/<E>/ads.csv``, each restating the 7 dates before it for 8 campaigns
(conversions grow with newer exports; one campaign-day has spend 0)."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import numpy as np

from tasks.sample.common import ADS, DOW_FACTOR, Request, create_file
from tasks.transforms.ads import RAW_COLUMNS as ADS_COLUMNS


def planned(req: Request) -> list[str]:
    """Every file :func:`write` writes, below the raw root."""
    return [f"ads/{(req.start + timedelta(days=e)).isoformat()}/ads.csv" for e in range(1, req.days + 1)]


def write(req: Request) -> dict:
    """Exports ``start+1 .. start+days``; the counts written."""
    files, rows = _ads(req.root, req.start, req.days, req.seed)
    return {"ads_files": files, "ads_rows": rows}


_CAMPAIGNS = [  # id, channel, daily impressions, ctr, cpc (CAD), conversion rate, value per conversion (CAD)
    ("C01", "google", 40000, 0.035, 0.85, 0.060, 18.0),
    ("C02", "google", 25000, 0.042, 1.10, 0.050, 22.0),
    ("C03", "google", 12000, 0.028, 0.70, 0.045, 15.0),
    ("C04", "meta", 60000, 0.012, 0.55, 0.030, 16.0),
    ("C05", "meta", 35000, 0.015, 0.60, 0.035, 20.0),
    ("C06", "meta", 20000, 0.010, 0.45, 0.025, 14.0),
    ("C07", "tiktok", 80000, 0.008, 0.30, 0.020, 12.0),
    ("C08", "tiktok", 30000, 0.009, 0.35, 0.020, 13.0),
]
_REPORTED = [0.6, 0.78, 0.88, 0.94, 0.97, 0.99, 1.0]  # share of final conversions reported at export age 1..7


def _ads_truth(seed: int, start: date, days: int) -> dict[tuple[date, int], tuple[int, int, int, int, int]]:
    """Final (impressions, clicks, spend cents, conversions, value cents) per (date, campaign index)."""
    zero = (start + timedelta(days=days // 2), len(_CAMPAIGNS) - 1)  # paused campaign-day: spend 0
    truth = {}
    for i in range(days):
        d = start + timedelta(days=i)
        for ci, (_, _, impr, ctr, cpc, cvr, aov) in enumerate(_CAMPAIGNS):
            rng = np.random.default_rng([seed, ADS, ci, d.toordinal()])
            shown = int(impr * rng.lognormal(0, 0.25) * DOW_FACTOR[d.weekday()])
            clicks = int(rng.binomial(shown, ctr))
            spend = int(round(clicks * cpc * rng.lognormal(0, 0.1) * 100))
            conv = int(rng.binomial(clicks, cvr))
            value = int(round(conv * aov * rng.lognormal(0, 0.2) * 100))
            truth[(d, ci)] = (0, 0, 0, 0, 0) if (d, ci) == zero else (shown, clicks, spend, conv, value)
    return truth


def _ads(root: Path, start: date, days: int, seed: int) -> tuple[int, int]:
    """Write exports start+1 .. start+days, each restating E-7 .. E-1 (not before start); return (files, rows)."""
    truth = _ads_truth(seed, start, days)
    files = total = 0
    for e in range(1, days + 1):
        export = start + timedelta(days=e)
        rows = [",".join(ADS_COLUMNS)]
        for age in range(min(7, e), 0, -1):
            d = export - timedelta(days=age)
            for ci, (cid, channel, *_) in enumerate(_CAMPAIGNS):
                shown, clicks, spend, conv, value = truth[(d, ci)]
                conv_now = int(np.floor(conv * _REPORTED[age - 1] + 1e-9))
                value_now = value * conv_now // conv if conv else 0
                money = f"{spend // 100}.{spend % 100:02d}", f"{value_now // 100}.{value_now % 100:02d}"
                rows.append(f"{d},{cid},{channel},{shown},{clicks},{money[0]},{conv_now},{money[1]}")
        path = root / "ads" / export.isoformat() / "ads.csv"
        create_file(path, ("\n".join(rows) + "\n").encode())
        files, total = files + 1, total + len(rows) - 1
    return files, total
