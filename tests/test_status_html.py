"""The HTML status page, opened in a real headless Chromium (Debian's chromium; bin/test installs it)
and driven as a person would: real mouse clicks and key presses over the DevTools protocol."""

from __future__ import annotations

import datetime as dt
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasks.cli import main
from tasks.views import status, status_html
from tests.browser import Browser

pytestmark = pytest.mark.luigi

START = dt.date(2026, 9, 10)
HOTELS = [f"hotel_pickup H{k}" for k in range(1, 6)]  # config/hotels.csv
LINES = ["stg_qsr_pos", "stg_hotel_bookings_daily", "ads_daily", "ads_rolling_7d", "hotel_booking_state", *HOTELS]

# For each line, [date, state] of every cell in date order.
CELLS_JS = """[...document.querySelectorAll('.bar')].reduce((acc, bar) => {
  const label = bar.querySelector('.lbl').textContent;
  acc[label] = (acc[label] || []).concat([...bar.querySelectorAll('i')].map((c) => [c.dataset.d, c.dataset.state]));
  return acc; }, {})"""
DETAIL_JS = """(() => {
  const q = (s) => { const e = document.querySelector('#detail ' + s); return e && e.textContent; };
  return {title: q('strong'), state: q('.state'), reason: q('.reason'), rows: q('.rows'), took: q('.took'),
          cmd: q('.cmd'), by: q('.by'), focused: document.activeElement.id}; })()"""
# Every visible element with text of its own: its colour, the colour behind it (the nearest
# ancestor with a background), its font size and weight.
TEXT_PAIRS_JS = """(() => { const out = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (el.tagName === 'SCRIPT' || el.tagName === 'STYLE' || !el.getClientRects().length) continue;
    if (![...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
    let bg = el, back;
    while (bg) { back = getComputedStyle(bg).backgroundColor;
      if (!/rgba\\(.*, 0\\)$/.test(back) && back !== 'transparent') break; bg = bg.parentElement; }
    const st = getComputedStyle(el);
    out.push({text: el.textContent.trim().slice(0, 40), fg: st.color, bg: bg ? back : 'rgb(255, 255, 255)',
              size: parseFloat(st.fontSize), weight: +st.fontWeight});
  } return out; })()"""


def luminance(rgb: str) -> float:
    channels = [int(v) / 255 for v in re.findall(r"\d+", rgb)[:3]]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two CSS colours (rgb(...) or #rrggbb)."""
    a, b = (_rgb(c) for c in (a, b))
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _rgb(colour: str) -> str:
    if colour.startswith("#"):
        return ",".join(str(int(colour[k : k + 2], 16)) for k in (1, 3, 5))
    assert not colour.startswith("rgba") or colour.endswith(", 1)"), f"translucent colour {colour}"
    return colour


def test_contrast_ratio_is_the_wcag_formula():
    assert round(contrast("#ffffff", "#000000"), 2) == 21.0
    assert round(contrast("rgb(118, 118, 118)", "#ffffff"), 2) == 4.54  # the classic AA grey
    assert round(contrast("#777777", "#ffffff"), 2) == 4.48  # ... and the one just below


def five_states(lab) -> Path:
    """Days 09-10 .. 09-15 of stg_qsr_pos in five states (worked out by hand, step by step)."""
    lab.qsr_days(START, 5)  # raw folders 09-10 .. 09-15; a business date reads its folder and the next
    assert lab.range(START, START + dt.timedelta(days=4)) == 0  # 09-10 .. 09-13 built
    shutil.rmtree(lab.partition(START + dt.timedelta(days=1)))  # 09-11: missing (deleted)
    lab.qsr_file("2026-09-12", "S042", [])  # 09-12: stale (09-11 reads that folder too, but is gone)
    lab.qsr_file("2026-09-10", "S001", ["Q,1,S001,2026-09-10T12:00:00-04:00,COLA,zero,1.00,,COMPLETED"])
    assert lab.range(START, START + dt.timedelta(days=1)) == 30  # 09-10: failed (a bad qty)
    # 09-13 ok; 09-14 missing (never built, both its folders there); 09-15 waiting (no folder 09-16)
    page = lab.root / "status.html"
    stop = START + dt.timedelta(days=6)
    assert main(["status", "--start", str(START), "--stop", str(stop), "--html", str(page)]) == 0
    return page


@pytest.mark.system
def test_the_page_in_a_real_browser(lab, tmp_path):
    page_file = five_states(lab)
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", page_file.read_text()), "an external asset"
    with Browser(tmp_path / "profile") as browser:
        page = browser.open(page_file.as_uri(), 1366, 768)
        page.screenshot(tmp_path / "five-states.png")
        cells = page.eval(CELLS_JS)
        assert list(cells) == LINES  # one bar per dataset, one per hotel for hotel_pickup
        assert dict(cells["stg_qsr_pos"]) == {
            "2026-09-10": "failed",
            "2026-09-11": "missing",
            "2026-09-12": "stale",
            "2026-09-13": "ok",
            "2026-09-14": "missing",
            "2026-09-15": "waiting",
        }
        assert page.eval("document.querySelector('.months').textContent") == "Sep 2026"

        stale = '.bar[data-line="0"] i[data-d="2026-09-12"]'
        page.hover(stale)  # hovering: a tooltip
        assert page.eval(f"document.querySelector('{stale}').title") == (
            "stg_qsr_pos 2026-09-12: stale - input changed: new file qsr_pos/2026-09-12/S042.csv"
        )
        page.click_on(stale)  # a real mouse click on the day
        shown = page.eval(DETAIL_JS)
        assert shown["state"] == "stale" and shown["title"] == "stg_qsr_pos  2026-09-12"
        assert shown["reason"] == "input changed: new file qsr_pos/2026-09-12/S042.csv"
        built = lab.partition(START + dt.timedelta(days=2))
        assert shown["rows"] == str(pq.read_table(built / "data.parquet").num_rows)  # of the last build
        took = json.loads((built / "_manifest.json").read_text())["duration_s"]
        assert shown["took"] == f"{took} s"
        by = json.loads((built / "_manifest.json").read_text())["built_by"]  # the process that committed it
        assert shown["by"] == f"{by['host']}, pid {by['pid']}, {by['worker']}" and by["worker"].startswith("Worker(")
        assert shown["cmd"] == "luigi --module tasks StgQsrPos --date 2026-09-12 --local-scheduler"
        page.screenshot(tmp_path / "clicked.png")

        page.key("ArrowLeft")  # the grid has the focus after the click; the arrow moves one day back
        shown = page.eval(DETAIL_JS)
        assert (shown["title"], shown["state"], shown["rows"]) == ("stg_qsr_pos  2026-09-11", "missing", "-")
        assert shown["by"] == "-"
        page.key("ArrowLeft")
        shown = page.eval(DETAIL_JS)
        assert (shown["state"], shown["focused"]) == ("failed", "grid")
        assert "S001.csv row 2: qty is not an integer >= 1" in shown["reason"]
        page.key("ArrowDown")  # the same day of the next bar
        assert page.eval(DETAIL_JS)["title"] == "stg_hotel_bookings_daily  2026-09-10"
        assert page.eval("location.hash") == "#stg_hotel_bookings_daily%2F2026-09-10"

        for label, day in [("stg_qsr_pos", "2026-09-13"), ("hotel_pickup H3", "2026-09-14")]:
            shown = browser.open(f"{page_file.as_uri()}#{label}/{day}", 1366, 768).eval(DETAIL_JS)  # a link to a day
            assert shown["title"] == f"{label}  {day}"
        assert shown["cmd"] == "luigi --module tasks HotelPickup --date 2026-09-14 --hotel H3 --local-scheduler"

        fresh = browser.open(page_file.as_uri(), 1366, 768)
        fresh.key("Tab")  # the keyboard alone: Tab to the grid, End, arrows
        fresh.key("ArrowRight")  # from no selection: the last day of the first bar
        assert fresh.eval(DETAIL_JS)["title"] == "stg_qsr_pos  2026-09-15"
        fresh.key("Home")
        assert fresh.eval(DETAIL_JS)["state"] == "failed"
        fresh.click_on(".snap")
        shown = fresh.eval(DETAIL_JS)
        assert shown["title"] == "otb_by_stay_date  (unpartitioned)"
        assert shown["cmd"] == "luigi --module tasks OtbByStayDate --local-scheduler"


@pytest.mark.system
def test_the_commands_shown_rebuild_the_day(lab, tmp_path):
    """The commands the page shows, run as written in a shell: the stale day's, then the ok day's
    (delete it and run it), each from a folder whose luigi.cfg points at the lab."""
    page_file = five_states(lab)
    run_dir = lab.root / "ops"
    run_dir.mkdir()
    lab.write_cfg(run_dir / "luigi.cfg")
    before = lab.built_at()
    with Browser(tmp_path / "profile") as browser:
        commands = {}
        for day in ("2026-09-12", "2026-09-13"):
            page = browser.open(f"{page_file.as_uri()}#stg_qsr_pos/{day}", 1366, 768)
            commands[day] = page.eval(DETAIL_JS)["cmd"]
    assert commands["2026-09-13"].startswith(
        f"rm -r {shlex.quote(str(lab.partition(START + dt.timedelta(days=3))))} && luigi "
    )
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    for cmd in commands.values():
        proc = subprocess.run(["bash", "-c", cmd], cwd=run_dir, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
    after = lab.built_at()
    assert {d for d in after if after[d] != before.get(d)} == {dt.date(2026, 9, 12), dt.date(2026, 9, 13)}
    days = status.collect(dt.date(2026, 9, 12), dt.date(2026, 9, 14), ["stg_qsr_pos"])
    assert [r.state for r in days] == ["ok", "ok"]


@pytest.mark.system
def test_text_contrast_meets_wcag_aa(lab, tmp_path):
    page_file = five_states(lab)
    with Browser(tmp_path / "profile") as browser:
        page = browser.open(f"{page_file.as_uri()}#stg_qsr_pos/2026-09-12", 1366, 768)  # the detail panel filled
        pairs = page.eval(TEXT_PAIRS_JS)
        swatches = page.eval(
            "[...document.querySelectorAll('.key i')]"
            ".map((i) => [i.dataset.state, getComputedStyle(i).backgroundImage, getComputedStyle(i).backgroundSize])"
        )
        page_bg = page.eval("getComputedStyle(document.body).backgroundColor")
    for p in pairs:
        large = p["size"] >= 24 or (p["size"] >= 18.66 and p["weight"] >= 700)
        ratio = contrast(p["fg"], p["bg"])
        assert ratio >= (3 if large else 4.5), f"{p['text']!r}: {p['fg']} on {p['bg']} is {ratio:.2f}:1"
    # ... and every pair was measured: each state's letter badge, the detail panel, the labels
    assert len({(p["fg"], p["bg"]) for p in pairs}) >= 8
    assert {p["text"] for p in pairs} >= {"S", "F", "O", "W", "M", "P", "stale", "stg_qsr_pos", "reason:"}
    # The bars are graphics: 3:1 against the page (WCAG 1.4.11), in every state.
    assert len(swatches) == len(status_html.STATES)
    for state, image, _ in swatches:
        colour = re.search(r"rgb\([^)]*\)", image).group(0)
        assert contrast(colour, page_bg) >= 3, f"{state} bar {colour} on {page_bg}"
    # ... and no two states are told apart by colour alone: each has its own height or stripes
    shapes = {(size, re.sub(r"rgb\([^)]*\)", "", image)) for _, image, size in swatches}
    assert len(shapes) == len(status_html.STATES), swatches


@pytest.mark.system
def test_three_years_fit_one_screen(lab, tmp_path, setting):
    """1,095 days of every dataset (nothing built: waiting for raw data) in a 1366 x 768 window, a
    1920 x 1080 one and a 1280 x 800 one, with no scrolling, one cell per day and bar."""
    first = dt.date(2023, 9, 1)
    setting("daybreak", "start_date", first)  # a date before start_date is never built: it would not wait
    stop = first + dt.timedelta(days=1095)
    page_file = tmp_path / "three-years.html"
    assert main(["status", "--start", str(first), "--stop", str(stop), "--html", str(page_file)]) == 0
    with Browser(tmp_path / "profile") as browser:
        for width, height in [(1366, 768), (1920, 1080), (1280, 800)]:
            page = browser.open(page_file.as_uri(), width, height)
            page.screenshot(tmp_path / f"three-years-{width}.png")
            size = page.eval("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            assert size[0] <= width and size[1] <= height, f"{size} in a {width} x {height} window"
            cells = page.eval(CELLS_JS)
            assert list(cells) == LINES
            assert all(len(days) == 1095 for days in cells.values())
            assert cells["stg_qsr_pos"][0] == ["2023-09-01", "waiting"] and cells["ads_daily"][-1][0] == "2026-08-30"
            months = page.eval("[...document.querySelectorAll('.months')].map((m) => m.textContent.slice(0, 8))")
            assert months == ["Sep 2023", "Sep 2024", "Sep 2025"]  # twelve months to a band
            widths = page.eval(
                "[...document.querySelectorAll('.bar i')].slice(0, 3).map((i) => i.getBoundingClientRect().width)"
            )
            assert min(widths) >= (3 if width >= 1366 else 2)  # a day is a target a mouse can hit


@pytest.mark.system
def test_a_bar_per_hotel_with_its_own_state(lab, setting, tmp_path):
    """The text view's hotel_pickup day is the worst of the hotels (missing here: H2 alone is
    built); the page has a bar per hotel, each with its own state."""
    from tests.test_hotels import FIRST, write

    setting("daybreak", "start_date", FIRST)
    for k in range(4):  # extracts 09-10 .. 09-13 for H1 and H2
        day = FIRST + dt.timedelta(days=k)
        write(lab, day, "H1", [f"T{k},H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct"])
        write(lab, day, "H2", [f"V{k},H2,{day}T23:30:00-07:00,CREATED,2026-10-02,2026-10-03,2,50.00,ota"])
    stop = FIRST + dt.timedelta(days=4)
    h2 = ["RangeDaily", "--of", "HotelPickup", "--of-params", '{"hotel": "H2"}', "--start", str(FIRST)]
    assert lab.luigi(*h2, "--stop", str(stop)) == 0
    assert {r.state for r in status.collect(FIRST, stop, ["hotel_pickup"])} == {"missing"}
    page_file = tmp_path / "pickup.html"
    argv = ["status", "--dataset", "hotel_pickup", "--start", str(FIRST), "--stop", str(stop), "--html", str(page_file)]
    assert main(argv) == 0
    with Browser(tmp_path / "profile") as browser:
        page = browser.open(page_file.as_uri(), 1366, 768)
        cells = page.eval(CELLS_JS)
        page.click_on('.bar[data-line="1"] i[data-d="2026-09-12"]')
        shown = page.eval(DETAIL_JS)
    assert {label: [s for _, s in days] for label, days in cells.items()} == {
        label: ["ok"] * 4 if label == "hotel_pickup H2" else ["missing"] * 4 for label in HOTELS
    }
    built = lab.partition(dt.date(2026, 9, 12), "marts/hotel_pickup") / "hotel_id=H2"
    assert (shown["title"], shown["state"]) == ("hotel_pickup H2  2026-09-12", "ok")
    assert shown["rows"] == str(pq.read_table(built / "data.parquet").num_rows)
    run = "luigi --module tasks HotelPickup --date 2026-09-12 --hotel H2 --local-scheduler"
    assert shown["cmd"] == f"rm -r {built} && {run}"


def test_a_previewed_column_name_is_escaped_once(lab):
    """A changed column's name in the previews panel reads as written (``a&b``, escaped once for HTML)."""
    from html.parser import HTMLParser

    from tasks.views.status_html import render

    partition = {"date": "2026-09-01", "partition": "", "rows_before": 1, "rows_after": 1, "added": 0, "removed": 0}
    record = {
        "id": "p1",
        "dataset": "stg_qsr_pos",
        "start": "2026-09-01",
        "stop": "2026-09-02",
        "datasets": {
            "stg_qsr_pos": {
                "measure": "",
                "partitions": [{**partition, "changed": 1, "changed_columns": {"net<a&b>": 1}}],
                "totals": {**partition, "date": "total", "changed": 1, "changed_columns": {"net<a&b>": 1}},
            }
        },
    }
    cells = []

    class Cells(HTMLParser):
        def handle_data(self, data):
            cells.append(data)

    Cells().feed(render([], lines=[], previews=[record]))
    assert "net<a&b> 1" in cells


def test_a_file_not_read_in_a_partitions_window_is_on_the_page(lab):
    """As in the text view and --json: a raw file of a window that is not read, with the datasets it is in."""
    from tasks.views.rows import DayStatus
    from tasks.views.status_html import render

    day = dt.date(2026, 9, 10)
    entry = "qsr_pos/2026-09-11/s003.csv (name is not <store_id>.csv)"
    rows = [
        DayStatus("stg_qsr_pos", day, "ok", "", 10, not_read=(entry,)),
        DayStatus("stg_qsr_pos", day + dt.timedelta(days=1), "ok", "", 10, not_read=(entry,)),
    ]
    page = render(rows, lines=[], previews=[])
    assert "raw files not read, in the windows of:" in page
    assert "<li>qsr_pos/2026-09-11/s003.csv (name is not &lt;store_id&gt;.csv): stg_qsr_pos</li>" in page


def test_a_days_warning_is_on_the_page_as_in_the_text_view(lab, setting, tmp_path):
    """Before, a store that had rows and has none now was in the summary, the text view and --json, not on
    the page."""
    from tasks import cli

    start, day = dt.date(2026, 9, 10), dt.date(2026, 9, 11)
    setting("daybreak", "start_date", start)
    lab.qsr_days(start, 2)
    assert lab.range(start, start + dt.timedelta(days=2)) == 0
    for folder in (day, day + dt.timedelta(days=1)):
        lab.qsr_file(str(folder), "S001", [])  # re-sent with its header only
    assert lab.range(start, start + dt.timedelta(days=2)) == 0
    page = tmp_path / "status.html"
    assert (
        cli.main(["status", "--html", str(page), "--start", str(start), "--stop", str(day + dt.timedelta(days=1))]) == 0
    )
    assert f"warning: store S001 had 4 rows in an earlier build of {day} and has none now" in page.read_text()
