"""The HTML status page (docs/operations.md): one self-contained file, one bar per dataset (per hotel for
hotel_pickup), from the rows of :func:`tasks.views.status.collect`."""

from __future__ import annotations

import calendar
import datetime as dt
import json
from collections import Counter
from dataclasses import dataclass
from html import escape

from tasks import catalogue, settings
from tasks.storage.partitions import PARTITION_PREFIX, partition_name

# per state: colour (3:1 on white, 4.5:1 under white letters: WCAG), height and stripes (not colour alone), letter
STATES = {
    "ok": ("#2e7d32", 10, False, "O"),
    "provisional": ("#2e7d32", 10, True, "P"),  # ok's green, striped: up to date, but later exports will restate it
    "stale": ("#a15c00", 14, True, "S"),
    "pending": ("#6a1b9a", 7, True, "?"),  # may rebuild once its upstream is rebuilt
    "newer": ("#00695c", 7, False, "N"),  # built by newer code than this host's: a run does not replace it
    "missing": ("#616161", 2, False, "M"),
    "waiting": ("#1565c0", 5, False, "W"),
    "failed": ("#c62828", 14, False, "F"),
    "not over yet": ("#546e7a", 3, True, "-"),  # a business day not over, never built: no run builds it yet
}
TEXT, MUTED, PAGE, PANEL = "#1a1a1a", "#555555", "#ffffff", "#f2f2f2"
NO_DAY = "0000-00-00"  # a date-shaped stand-in, so the path is quoted as it will be with the date in it
LABEL_PX, GAP_PX, ROOM_PX = 190, 4, 1130  # row label, gap between months, width for one band's days


@dataclass
class Line:
    """One bar of the page: a dataset, or one key (hotel) of a date x key dataset."""

    label: str
    family: str  # the Luigi task family that builds it
    params: str  # its parameters besides --date
    path: str  # the partition folder, "{d}" for the date
    days: dict  # date -> DayStatus


def key_lines(rows: list) -> list[Line]:
    """The page's bars: one per date-only dataset of ``rows``, one per key of a date x key dataset."""
    from tasks.freshness.engine import Engine
    from tasks.views import status

    out: list[Line] = []
    cache = Engine()
    with settings.snapshot():
        for name in dict.fromkeys(r.dataset for r in rows if r.date is not None):
            mine = {r.date: r for r in rows if r.dataset == name}
            spec = catalogue.BY_NAME[name]
            first = min(mine)
            if spec.key_param is None:
                out.append(_line(name, spec.task(date=first), "", mine))
                continue
            key = spec.key_param
            for task in spec.partitions(first, first + dt.timedelta(days=1)):
                k = getattr(task, key)
                days = {d: status.day_status(type(task)(date=d, **{key: k}), cache, name) for d in mine}
                out.append(_line(f"{name} {k}", task, f" --{key} {k}", days))
    return out


def _line(label: str, task, params: str, days: dict) -> Line:
    path = task.store().uri(task.key).replace(partition_name(task.key), PARTITION_PREFIX + "{d}")
    return Line(label, task.task_family, params, path, days)


def _reason(day) -> str:
    """A day's reason on the page, with its warnings, as the text view gives them."""
    return "; ".join([*([day.reason] if day.reason else []), *(f"warning: {w}" for w in day.warnings)])


def render(rows: list, lines: list[Line] | None = None, previews: list[dict] | None = None) -> str:
    """The page for ``rows``; ``lines`` default to :func:`key_lines` of them, ``previews`` to the open ones."""
    from tasks import preview
    from tasks.freshness.rawfolders import quiet
    from tasks.views import leftover, status
    from tasks.views.rows import DATA_ROOT, LEFT_OVER, RAW_ZONE

    previews = preview.open_records() if previews is None else previews
    if lines is None:
        with quiet():  # the page shows the raw zone's unread entries itself: no warning in the log
            lines = key_lines(rows)
    above = (RAW_ZONE, DATA_ROOT)  # entries of no day: the raw zone's, the data root's
    snapshots = [r for r in rows if r.date is None and r.dataset not in above]
    unread = "".join(
        f"<p class='unread'>{escape(r.reason)}{'' if r.state == LEFT_OVER else ':'}</p><ul class='unread'>"
        + "".join(f"<li>{escape(entry)}</li>" for entry in r.not_read)
        + "</ul>"
        for r in rows
        if r.dataset in above
    )
    in_windows: dict[str, dict] = {}  # a file of a partition's window not read: the datasets it is in
    for r in rows:
        for entry in r.not_read if r.dataset not in above else ():
            in_windows.setdefault(entry, {})[r.dataset] = None
    if in_windows:
        items = "".join(f"<li>{escape(e)}: {escape(', '.join(names))}</li>" for e, names in sorted(in_windows.items()))
        unread += f"<p class='unread'>raw files not read, in the windows of:</p><ul class='unread'>{items}</ul>"
    dates = sorted({d for line in lines for d in line.days})
    bands = _bands(dates)
    day_px = max(3, min(22, ROOM_PX // max((len(b) for b in bands), default=1)))
    data: dict[str, list] = {"lines": [], "snapshots": [], "builders": []}
    builders: dict[str, int] = {}  # each "host, pid, worker" once: a line names it by its index

    def builder(r) -> int | None:
        text = status.built_by_text(r.built_by)
        return builders.setdefault(text, len(builders)) if text else None

    for line in lines:
        cells = [line.days.get(d) for d in dates]
        data["lines"].append(
            {
                "label": line.label,
                "run": f"luigi --module tasks {line.family} --date {{d}}{line.params} --local-scheduler",
                "rm": leftover.remove_command(line.path.replace("{d}", NO_DAY)).replace(NO_DAY, "{d}"),
                "reasons": {i: why for i, c in enumerate(cells) if c and (why := _reason(c))},
                "rows": [c and c.rows for c in cells],
                "took": [c and c.duration_s for c in cells],
                "by": {i: b for i, c in enumerate(cells) if c and (b := builder(c)) is not None},
            }
        )
    data["builders"] = list(builders)
    for r in snapshots:
        spec = catalogue.BY_NAME[r.dataset]
        cls = spec.task
        if spec.key_param:  # one partition per hotel or store: the command names one of them
            key = spec.key_param
            run = f"luigi --module tasks {cls.task_family} --{key.replace('_', '-')} <{key}> --local-scheduler"
            rm = ""  # the worst key is named in the reason; a fresh one is rebuilt by deleting its folder
        else:
            run = f"luigi --module tasks {cls.task_family} --local-scheduler"
            rm = leftover.remove_command(cls().store().uri(None))
        data["snapshots"].append(
            {
                "label": r.dataset,
                "state": r.state,
                "reason": r.reason,
                "rows": r.rows,
                "took": r.duration_s,
                "by": status.built_by_text(r.built_by),
                "run": run,
                "rm": rm,
            }
        )
    counts = Counter(c.state for line in lines for c in line.days.values()) + Counter(r.state for r in snapshots)
    span = f"{dates[0]} .. {dates[-1]} ({len(dates):,} days)" if dates else "no dates"
    legend = "".join(
        f'<span class="key"><i data-state="{s}"></i><b class="badge {css_class(s)}">{STATES[s][3]}</b> {s} '
        f'<span class="n">{counts[s]:,}</span></span>'
        for s in STATES
    )
    snaps = "".join(
        f'<button type="button" class="snap" data-snap="{i}">{escape(r.dataset)} (unpartitioned) '
        f'<b class="badge {css_class(r.state)}">{STATES[r.state][3]}</b> {r.state}</button>'
        for i, r in enumerate(snapshots)
    )
    grid = "".join(_band(band, dates, lines) for band in bands)
    payload = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width'><title>Daybreak partition status</title>"
        f"<style>{_css(day_px)}</style></head><body>"
        f"<header><h1>Partition status</h1><span class='span'>{span}</span><span class='legend'>{legend}</span>"
        "</header>"
        "<section id='detail' aria-live='polite'><p class='hint'>Click a day, or focus the grid (Tab) and use the "
        "arrow keys, Home and End: its state, reason, rows, build time and the command that rebuilds it show "
        "here.</p></section>"
        f"<div id='grid' tabindex='0' aria-label='partition states: a bar per dataset, a cell per day' "
        f"aria-describedby='detail'>{grid}</div>"
        f"<p class='snaps'>{snaps}</p>{unread}{_previews(previews)}"
        f"<script type='application/json' id='status-data'>{payload}</script><script>{SCRIPT}</script>"
        "</body></html>"
    )


def _previews(records: list[dict]) -> str:
    """Open previews and their diffs (what `daybreak publish ID` would put in place), beside the grid."""
    if not records:
        return ""
    style = (
        f"<style>#previews{{background:{PANEL};border-radius:4px;padding:4px 10px;margin:6px 0}}"
        "#previews h2{font-size:14px;margin:2px 0}#previews h3{font-size:12px;margin:6px 0 2px}"
        "#previews table{border-collapse:collapse;margin-bottom:6px}#previews caption{text-align:left;font-weight:700}"
        "#previews td,#previews th{padding:0 8px;text-align:right;white-space:nowrap}</style>"
    )
    parts = [style, "<aside id='previews' aria-label='open previews'><h2>Open previews</h2>"]
    for r in records:
        parts.append(
            f"<h3>{escape(r['id'])}</h3><p>{escape(r['dataset'])} {r['start']} .. {r['stop']} (stop exclusive); "
            f"publish: <code>daybreak publish {escape(r['id'])}</code></p>"
        )
        for name, entry in r.get("datasets", {}).items():
            measure = entry.get("measure") or ""
            head = "".join(f"<th>{h}</th>" for h in ("partition", "before", "after", "added", "removed", "changed"))
            head += f"<th>{escape(measure)} change</th><th>changed columns</th>"
            body = []
            for q in [*entry["partitions"], {"date": "total", "partition": "", **entry["totals"]}]:
                change = (q.get("measure") or {}).get("change")
                cols = ", ".join(f"{c} {n}" for c, n in q.get("changed_columns", {}).items())  # escaped with the cells
                cells = [
                    q["date"] or q["partition"],
                    *(q[k] for k in ("rows_before", "rows_after", "added", "removed")),
                ]
                cells += [q["changed"], "" if change is None else f"{change:+.2f}", cols]
                body.append("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in cells) + "</tr>")
            parts.append(f"<table><caption>{escape(name)}</caption><tr>{head}</tr>{''.join(body)}</table>")
    return "".join(parts) + "</aside>"


def _bands(dates: list[dt.date]) -> list[list[dt.date]]:
    """The dates in bands of twelve months, the first band from the first date's month."""
    bands: dict[int, list[dt.date]] = {}
    if dates:
        first = dates[0].year * 12 + dates[0].month
        for d in dates:
            bands.setdefault((d.year * 12 + d.month - first) // 12, []).append(d)
    return list(bands.values())


def _band(band: list[dt.date], dates: list[dt.date], lines: list[Line]) -> str:
    months: dict[tuple[int, int], list[dt.date]] = {}
    for d in band:
        months.setdefault((d.year, d.month), []).append(d)
    head = "".join(
        f'<span class="m" style="--n:{len(ds)}">{calendar.month_abbr[m]} {y}</span>' for (y, m), ds in months.items()
    )
    offset = dates.index(band[0])
    bars = []
    for n, line in enumerate(lines):
        groups = []
        for ds in months.values():
            cells = "".join(_cell(line.days.get(d), d) for d in ds)
            groups.append(f'<span class="m" style="--n:{len(ds)}">{cells}</span>')
        bars.append(
            f'<div class="bar" data-line="{n}" data-first="{offset}">'
            f'<span class="lbl">{escape(line.label)}</span>{"".join(groups)}</div>'
        )
    months_row = f'<div class="months" aria-hidden="true"><span class="lbl"></span>{head}</div>'
    return f'<div class="band">{months_row}{"".join(bars)}</div>'


def _cell(r, day: dt.date) -> str:
    state = r.state if r else "none"
    return f'<i data-d="{day}" data-state="{state}"></i>'


def css_class(state: str) -> str:
    """A state as a class name: ``not over yet`` is ``not-over-yet`` (the script does the same)."""
    return state.replace(" ", "-")


def _css(day_px: int) -> str:
    shapes = []
    for state, (colour, height, striped, _) in STATES.items():
        stripes = f"repeating-linear-gradient(to top,{colour} 0 2px,transparent 2px 4px)"
        fill = stripes if striped else f"linear-gradient({colour},{colour})"
        shapes.append(f'i[data-state="{state}"]{{background:{fill} bottom/100% {height}px no-repeat}}')
        shapes.append(f".badge.{css_class(state)}{{background:{colour}}}")
    # a full band (a year) at 3 px a day needs 1,330 px: 4 px on wide screens, 2 px on narrow ones
    wide = "@media (min-width:1800px){:root{--d:4px}}@media (max-width:1339px){:root{--d:2px}}" if day_px == 3 else ""
    return (
        f":root{{--d:{day_px}px}}{wide}"
        f"body{{font:12px/1.4 system-ui,sans-serif;margin:8px 12px;color:{TEXT};background:{PAGE}}}"
        "header{display:flex;flex-wrap:wrap;align-items:baseline;gap:4px 16px}h1{font-size:16px;margin:0}"
        f".span{{color:{MUTED}}}.legend{{display:flex;flex-wrap:wrap;gap:4px 12px}}.key{{white-space:nowrap}}"
        f".key i{{display:inline-block;width:12px;height:14px;vertical-align:-3px;margin-right:3px;"
        f"box-shadow:inset 0 0 0 1px {PANEL}}}.n{{color:{MUTED}}}"
        ".badge{display:inline-block;min-width:1.2em;text-align:center;color:#fff;border-radius:2px;"
        "font-weight:700;padding:0 2px}"
        f"#detail{{background:{PANEL};border-radius:4px;padding:4px 10px;margin:6px 0;height:96px;overflow:auto}}"
        "#detail p{margin:1px 0}"
        f".hint,.k{{color:{MUTED}}}code{{font:12px ui-monospace,monospace;user-select:all;overflow-wrap:anywhere}}"
        f"#grid:focus-visible{{outline:2px solid {TEXT};outline-offset:2px}}"
        ".band{margin-bottom:6px}.months,.bar{display:flex;align-items:flex-end;white-space:nowrap}"
        f".months{{color:{MUTED};font-size:11px;height:15px}}"
        f".lbl{{flex:0 0 {LABEL_PX}px;overflow:hidden;text-overflow:ellipsis;padding-right:6px;box-sizing:border-box}}"
        f".m{{display:flex;flex:0 0 calc(var(--d)*var(--n));margin-right:{GAP_PX}px;overflow:hidden}}"
        ".months .m{display:block;text-overflow:clip}"
        ".bar{height:15px}.bar .lbl{font-size:11px;align-self:center}"
        ".bar i{flex:0 0 var(--d);height:14px;cursor:pointer}"
        f"i.sel{{outline:2px solid {TEXT};outline-offset:1px;position:relative;z-index:1}}"
        f".bar:hover .lbl{{text-decoration:underline}}"
        f".snap{{font:inherit;color:{TEXT};background:{PAGE};border:1px solid {MUTED};border-radius:3px;"
        "padding:1px 6px;cursor:pointer}" + "".join(shapes)
    )


# the page's script: a click, the arrow keys or the URL hash (#LINE/DATE) select a day. Plain DOM.
SCRIPT = r"""
(() => {
  const data = JSON.parse(document.getElementById('status-data').textContent);
  const grid = document.getElementById('grid'), detail = document.getElementById('detail');
  const bars = [...grid.querySelectorAll('.bar')];
  const cells = data.lines.map(() => []);  // cells[line][day index]
  for (const bar of bars) {
    const line = +bar.dataset.line, first = +bar.dataset.first;
    bar.querySelectorAll('i').forEach((c, k) => { cells[line][first + k] = c; });
  }
  const letters = {
    ok: 'O', provisional: 'P', stale: 'S', pending: '?', newer: 'N', missing: 'M', waiting: 'W', failed: 'F',
    'not over yet': '-',
  };
  const next = {
    ok: 'Up to date. To rebuild it anyway, delete it and run it:',
    provisional: 'Up to date for now; the next export restates it. To rebuild it now, delete it and run it:',
    stale: 'Rebuild it:', missing: 'Build it:', failed: 'Fix the input the reason names, then rebuild it:',
    waiting: 'Its raw data has not arrived; once it has, build it:',
    pending: 'Its upstream is rebuilt first, then this partition only if its rows of it changed:',
    newer: 'Built by newer code than this host has; a run here leaves it as built. Upgrade this host, then:',
    'not over yet': 'Its business day is not over: no range builds it yet; the first run after it ends does:',
  };
  const entities = {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'};
  const esc = (s) => String(s).replace(/[&<>"]/g, (ch) => entities[ch]);
  let cur = null;  // [line, day]

  function show(title, state, reason, rows, took, by, run, rm) {
    const cmd = (rm && (state === 'ok' || state === 'provisional')) ? rm + ' && ' + run : run;
    const badge = state.replace(/ /g, '-');  // css_class
    detail.innerHTML =
      '<p><strong>' + esc(title) + '</strong> <b class="badge ' + badge + '">' + letters[state] + '</b> ' +
      '<span class="state">' + state + '</span> &nbsp; <span class="k">rows:</span> <span class="rows">' +
      (rows == null ? '-' : rows.toLocaleString('en')) + '</span> &nbsp; <span class="k">build time:</span> ' +
      '<span class="took">' + (took == null ? '-' : took + ' s') + '</span></p>' +
      '<p><span class="k">' + next[state] + '</span> <code class="cmd">' + esc(cmd) + '</code></p>' +
      '<p><span class="k">reason:</span> <span class="reason">' + esc(reason || '-') + '</span></p>' +
      '<p><span class="k">built by:</span> <span class="by">' + esc(by || '-') + '</span></p>';
  }

  function select(line, day) {
    const cell = cells[line] && cells[line][day];
    if (!cell || cell.dataset.state === 'none') return false;
    if (cur) cells[cur[0]][cur[1]].classList.remove('sel');
    cell.classList.add('sel');
    cur = [line, day];
    const L = data.lines[line], d = cell.dataset.d;
    show(L.label + '  ' + d, cell.dataset.state, L.reasons[day], L.rows[day], L.took[day],
         data.builders[L.by[day]], L.run.replace('{d}', d), L.rm.replace('{d}', d));
    history.replaceState(null, '', '#' + encodeURIComponent(L.label + '/' + d));
    return true;
  }

  grid.addEventListener('click', (e) => {
    const cell = e.target.closest('i[data-d]');
    if (!cell) return;
    const bar = cell.closest('.bar'), line = +bar.dataset.line;
    select(line, cells[line].indexOf(cell));
  });
  grid.addEventListener('mouseover', (e) => {  // a tooltip, made when first hovered
    const cell = e.target.closest('i[data-d]');
    if (!cell || cell.title) return;
    const line = +cell.closest('.bar').dataset.line, L = data.lines[line];
    const reason = L.reasons[cells[line].indexOf(cell)];
    cell.title = L.label + ' ' + cell.dataset.d + ': ' + cell.dataset.state + (reason ? ' - ' + reason : '');
  });
  grid.addEventListener('keydown', (e) => {
    const last = cells[0] ? cells[0].length - 1 : -1;
    let [line, day] = cur || [0, last];
    const moves = {ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0]};
    if (e.key in moves) { line += moves[e.key][0]; day += moves[e.key][1]; }
    else if (e.key === 'Home') day = 0;
    else if (e.key === 'End') day = last;
    else if (e.key === 'PageUp') day -= 30;
    else if (e.key === 'PageDown') day += 30;
    else if (!(e.key === 'Enter' || e.key === ' ')) return;
    e.preventDefault();
    line = Math.max(0, Math.min(cells.length - 1, line));
    day = Math.max(0, Math.min(last, day));
    select(line, day);
  });
  document.querySelectorAll('.snap').forEach((b) => b.addEventListener('click', () => {
    const s = data.snapshots[+b.dataset.snap];
    if (cur) { cells[cur[0]][cur[1]].classList.remove('sel'); cur = null; }
    show(s.label + '  (unpartitioned)', s.state, s.reason, s.rows, s.took, s.by, s.run, s.rm);
  }));

  const hash = decodeURIComponent(location.hash.slice(1)), cut = hash.lastIndexOf('/');
  if (cut > 0) {
    const line = data.lines.findIndex((L) => L.label === hash.slice(0, cut));
    const d = hash.slice(cut + 1), day = line < 0 ? -1 : cells[line].findIndex((c) => c && c.dataset.d === d);
    if (day >= 0) select(line, day);
  }
})();
"""
