"""The sample data at its default dirt builds: a backfill over the benchmark's sample (100 stores, 1,200 lines a
store and day, seed 1) builds every date, its malformed rows in the quarantine, none failing the reject rules."""

from __future__ import annotations

import datetime as dt
import json

import duckdb
import pytest

from tasks import sample

pytestmark = pytest.mark.system

START, DAYS = dt.date(2026, 9, 1), 3


def test_the_benchmarks_sample_builds_every_date_with_its_malformed_rows_quarantined(lab):
    sample.generate(lab.raw, START, DAYS + 1, stores=100, seed=1, mean_lines_per_store=1200)
    dates = [START + dt.timedelta(days=i) for i in range(DAYS)]
    assert lab.range(START, START + dt.timedelta(days=DAYS), "--workers", "2") == 0
    con = duckdb.connect()
    for d in dates:
        manifest = json.loads((lab.partition(d) / "_manifest.json").read_text())
        assert manifest["row_count"] > 100 * 1000, d
        assert manifest["rejected_count"] > 0, d  # the sample's malformed rows reach every date
        quarantine = list((lab.data / "quarantine").rglob(f"*{d.isoformat()}*/*.parquet"))
        assert quarantine, d
        rows = con.execute(f"select count(*) from read_parquet({[str(p) for p in quarantine]})").fetchall()
        assert rows[0][0] == manifest["rejected_count"], d
