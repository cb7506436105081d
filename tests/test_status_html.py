"""The HTML status grid, opened in a real headless Chromium (Debian's chromium; bin/test installs it)."""

from __future__ import annotations

import datetime as dt
import re
import shutil
import subprocess

import pytest

from tasks.cli import main

START = dt.date(2026, 9, 10)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium(*args: str, profile) -> subprocess.CompletedProcess:
    if CHROMIUM is None:
        pytest.fail("chromium not found: install Debian's chromium (bin/test does)")
    cmd = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_the_html_grid_in_a_real_browser(lab, tmp_path):
    lab.qsr_days(START, 4)
    assert lab.range(START, START + dt.timedelta(days=3)) == 0
    shutil.rmtree(lab.partition(START + dt.timedelta(days=1)))  # missing
    lab.qsr_file((START + dt.timedelta(days=2)).isoformat(), "S042", [])  # days 1 and 2 stale inputs; 1 is gone
    page = tmp_path / "status.html"
    stop = START + dt.timedelta(days=5)
    assert (
        main(["status", "--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(stop), "--html", str(page)])
        == 0
    )
    shot = tmp_path / "status.png"
    chromium(f"--screenshot={shot}", "--window-size=900,500", page.as_uri(), profile=tmp_path / "p1")
    assert shot.stat().st_size > 5_000  # a rendered page, not an empty canvas
    dom = chromium("--dump-dom", page.as_uri(), profile=tmp_path / "p2").stdout
    cells = dict(re.findall(r'data-date="([\d-]+)" data-state="(\w+)"', dom))
    assert cells == {  # worked out from the steps above
        "2026-09-10": "ok",
        "2026-09-11": "missing",  # deleted
        "2026-09-12": "stale",  # reads folder 09-12, where S042 arrived
        "2026-09-13": "missing",  # never built; both its folders are there
        "2026-09-14": "waiting",  # folder 09-15 has not arrived
    }
    assert 'title="stg_qsr_pos 2026-09-12: stale - input changed: new file qsr_pos/2026-09-12/S042.csv' in dom
