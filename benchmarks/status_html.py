"""The HTML status page against a plain HTML table of the same rows. Run on demand (not in CI):

    python benchmarks/status_html.py [--days 1095] [--workdir DIR] [--repeat 3]

Uses the days that benchmarks/status.py builds (it runs that first when DIR has no data; give a small
--days with a --workdir of its own for a short run). Then, side by side:
  json        `daybreak status --json` as a user runs it (new process): the command's own time
  html        `daybreak status --json --html FILE`: the same, plus the page
  plain page  the baseline: a tiny script (a fresh process, no Daybreak import) writes the rows that
              --json printed as one static <table>, a line a dataset, a cell a date (its state as the
              cell's class, its reason, rows and duration in the cell's title); no script, no styles
              beyond a colour a state
  Chromium    both pages in the same headless Chromium (1366 x 768), alternating: time to the load event
              and the file's size; for the status page also its scroll size (no scrolling wanted) and a
              click on a day until the detail panel shows it
Each command and page --repeat times; medians, and the ratios of each repetition, are printed. A
screenshot of the status page is left in DIR/status.png.
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
COLOURS = {"ok": "#2e7d32", "provisional": "#81c784", "stale": "#a15c00", "missing": "#bdbdbd",
           "waiting": "#1565c0", "failed": "#c62828"}  # fmt: skip


def plain_page(rows_json: str, out: str) -> None:
    """(in a fresh process, no Daybreak import) ``daybreak status --json``'s rows as one static table."""
    import html
    import json

    with open(rows_json, encoding="utf-8") as fh:
        rows = json.load(fh)
    dates = sorted({r["date"] for r in rows if r["date"]})
    lines: dict[str, dict] = {}
    for r in rows:
        lines.setdefault(r["dataset"], {})[r["date"]] = r

    def cell(r: dict | None, span: str = "") -> str:
        if r is None:
            return "<td></td>"
        about = [r["state"], r["reason"], f"{r['rows']} rows" if r["rows"] is not None else ""]
        about += [f"{r['duration_s']} s" if r["duration_s"] is not None else "", *r["not_read"], *r["warnings"]]
        title = html.escape(" - ".join(a for a in about if a), quote=True)
        return f'<td class="{r["state"]}"{span} title="{title}"></td>'

    style = "".join(f".{state}{{background:{colour}}}" for state, colour in COLOURS.items())
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Partition status</title><style>",
        f"body{{font:12px sans-serif}}td{{min-width:4px;height:14px}}{style}</style></head><body><table>",
        "<tr><th>dataset</th>" + "".join(f"<th>{d}</th>" for d in dates) + "</tr>",
    ]
    for dataset, by_date in lines.items():
        cells = (
            cell(by_date[None], f' colspan="{len(dates)}"')
            if None in by_date
            else "".join(cell(by_date.get(d)) for d in dates)
        )
        parts.append(f"<tr><th>{html.escape(dataset)}</th>{cells}</tr>")
    parts.append("</table></body></html>\n")
    with open(out, "w", encoding="utf-8") as fh:
        fh.write("".join(parts))


def timed(cmd: list[str], **kwargs) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, check=True, capture_output=True, text=True, **kwargs)
    return time.perf_counter() - t0, proc.stdout


def ratios(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values) + f"; median {statistics.median(values):.2f}x"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", default=str(REPO / "data" / "bench" / "status"), help="as benchmarks/status.py's")
    ap.add_argument("--days", type=int, default=DAYS, help="days of data (benchmarks/status.py's --days)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--plain-page", nargs=2, metavar=("ROWS_JSON", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.plain_page:
        return plain_page(*args.plain_page)
    from benchmarks.status import START
    from tests.browser import Browser

    work, days = Path(args.workdir), args.days
    if not (work / "data").exists():
        cmd = [sys.executable, str(REPO / "benchmarks" / "status.py"), "--workdir", str(work), "--days", str(days)]
        subprocess.run(cmd, check=True)
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(work / "luigi.cfg"), "PYTHONPATH": str(REPO)}
    stop = START + dt.timedelta(days=days)
    page, rows_json, plain = work / "status.html", work / "status.json", work / "plain.html"
    base = [sys.executable, "-m", "tasks.cli", "status", "--start", str(START), "--stop", str(stop), "--json"]
    took: dict[str, list[float]] = {"json": [], "html": [], "plain": []}
    for rep in range(args.repeat):
        for label in ("json", "html", "plain")[rep % 3 :] + ("json", "html", "plain")[: rep % 3]:
            if label == "plain":  # from the rows of the last --json run, as a user would pipe them
                cmd = [sys.executable, __file__, "--plain-page", str(rows_json), str(plain)]
                took[label].append(timed(cmd)[0])
                continue
            seconds, out = timed(base if label == "json" else [*base, "--html", str(page)], env=env, cwd=work)
            took[label].append(seconds)
            if label == "json":
                rows_json.write_text(out[out.index("[") :], encoding="utf-8")

    click_day = START + dt.timedelta(days=min(502, days // 2))  # 2025-01-15 at three years
    loads: dict[str, list[float]] = {"status": [], "plain": []}
    clicks = []
    with Browser(work / "chromium-profile") as browser:
        for rep in range(args.repeat):
            for label in ("status", "plain")[:: 1 if rep % 2 == 0 else -1]:
                tab = browser.open((page if label == "status" else plain).as_uri(), 1366, 768)
                loads[label].append(tab.eval("performance.getEntriesByType('navigation')[0].loadEventEnd") / 1000)
                if label == "plain":
                    continue
                t0 = time.perf_counter()
                tab.click_on(f'.bar[data-line="2"] i[data-d="{click_day}"]')
                shown = tab.eval("document.querySelector('#detail strong').textContent")
                assert shown == f"ads_daily  {click_day}", shown
                clicks.append(time.perf_counter() - t0)
                size = tab.eval("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
                tab.screenshot(work / "status.png")

    cells = rows_json.read_text(encoding="utf-8").count('"dataset"')
    median = {k: statistics.median(v) for k, v in (took | loads).items()}
    print(f"\n{days} days, every dataset ({cells:,} rows of --json), medians of {args.repeat}")
    print(f"  daybreak status --json (new process)          {median['json']:6.2f} s")
    extra = median["html"] - median["json"]
    print(f"  daybreak status --json --html (new process)   {median['html']:6.2f} s   +{extra:.2f} s")
    print(f"  the plain page's script (new process)         {median['plain']:6.2f} s")
    status_mb, plain_mb = page.stat().st_size / 1e6, plain.stat().st_size / 1e6
    print(f"  page size: status {status_mb:.2f} MB, plain table {plain_mb:.2f} MB, {status_mb / plain_mb:.2f}x")
    print(f"  Chromium, load event: status {median['status']:.3f} s, plain table {median['plain']:.3f} s")
    same_run = [a / b for a, b in zip(loads["status"], loads["plain"], strict=True)]
    print(f"    status / plain table, same run: {ratios(same_run)}")
    print(f"  status page: {size[0]} x {size[1]} px in a 1366 x 768 window; click to detail "
          f"{statistics.median(clicks):.3f} s (DevTools round trips included)")  # fmt: skip


if __name__ == "__main__":
    main()
