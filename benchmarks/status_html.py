"""The HTML status page over 3 years (1,095 days). Run: python benchmarks/status_html.py [--workdir DIR]

Uses the 3 years that benchmarks/status.py builds (it runs that first when DIR has no data). Then:
  json       `daybreak status --json` as a user runs it (new process), the baseline
  html       `daybreak status --json --html FILE`: the same, plus the page
  page       its size; in headless Chromium (1366 x 768): time to the load event, the scroll size
             (no scrolling wanted), and a click on a day until the detail panel shows it
Each command three times; the median is printed. A screenshot is left in DIR/status.png.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DAYS = 1095


def main() -> None:
    from benchmarks.status import START
    from tests.browser import Browser

    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", default=str(REPO / "data" / "bench" / "status"), help="as benchmarks/status.py's")
    work = Path(ap.parse_args().workdir)
    if not (work / "data").exists():
        subprocess.run([sys.executable, str(REPO / "benchmarks" / "status.py"), "--workdir", str(work)], check=True)
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(work / "luigi.cfg"), "PYTHONPATH": str(REPO)}
    stop = START + dt.timedelta(days=DAYS)
    page = work / "status.html"
    base = [sys.executable, "-m", "tasks.cli", "status", "--start", str(START), "--stop", str(stop), "--json"]
    took = {}
    for label, cmd in (("json", base), ("html", [*base, "--html", str(page)])):
        runs = []
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run(cmd, env=env, cwd=work, check=True, capture_output=True)
            runs.append(time.perf_counter() - t0)
        took[label] = statistics.median(runs)

    loads, clicks = [], []
    with Browser(work / "chromium-profile") as browser:
        for _ in range(3):
            tab = browser.open(page.as_uri(), 1366, 768)
            loads.append(tab.eval("performance.getEntriesByType('navigation')[0].loadEventEnd") / 1000)
            t0 = time.perf_counter()
            tab.click_on('.bar[data-line="2"] i[data-d="2025-01-15"]')
            assert tab.eval("document.querySelector('#detail strong').textContent") == "ads_daily  2025-01-15"
            clicks.append(time.perf_counter() - t0)
        size = tab.eval("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
        tab.screenshot(work / "status.png")

    print(f"\n{DAYS} days, every dataset (medians of 3)")
    print(f"  daybreak status --json (new process)          {took['json']:6.2f} s")
    print(
        f"  daybreak status --json --html (new process)   {took['html']:6.2f} s   +{took['html'] - took['json']:.2f} s"
    )
    print(f"  page: {page.stat().st_size / 1e6:.2f} MB, {size[0]} x {size[1]} px in a 1366 x 768 window")
    print(f"  Chromium: load event {statistics.median(loads):.2f} s, click to detail {statistics.median(clicks):.3f} s")


if __name__ == "__main__":
    main()
