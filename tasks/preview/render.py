"""A preview's record as text and JSON, and the list of previews."""

from __future__ import annotations

import json

from tasks.preview.records import previews_root
from tasks.reporting.names import cut_at_word

DETAIL_LINES = 8  # "not built" lines shown, then "... and N more" (--json lists them all), as a run's summary


def to_json(record: dict) -> str:
    keep = ("id", "dataset", "start", "stop", "state", "datasets", "failed", "not_run", "waiting", "not_built")
    return json.dumps({k: record.get(k) for k in keep}, indent=1, default=str)


def render(record: dict) -> str:
    pid = record["id"]
    parts = len(record.get("partitions", []))
    lines = [
        f"preview {pid}",
        f"  {record['dataset']} {record['start']} .. {record['stop']} (stop exclusive): {parts} partition(s) built "
        f"into {previews_root(record['data_root']).child(pid).uri}; production unchanged",
    ]
    if not parts and not record.get("failed") and not record.get("not_run"):
        lines.append("  nothing to rebuild: every partition of the range is up to date")
    lines += [f"  wait    {w['date']}  {w['reason']}" for w in record.get("waiting", [])]
    lines += _capped([f"  not built  {h['partition']}: {h['reason']}" for h in record.get("not_built", [])])
    lines += [f"  FAILED  {f.get('partition', f['task_id'])}: {f['error'][:200]}" for f in record.get("failed", [])]
    lines += _capped([f"  NOT BUILT  {n['partition']}: {n['reason'][:200]}" for n in record.get("not_run", [])])
    for name, entry in record.get("datasets", {}).items():
        measure = entry.get("measure") or ""
        lines.append(f"{name} (rows matched on {', '.join(entry['key'])})")
        head = f"  {'partition':<24} {'before':>8} {'after':>8} {'added':>7} {'removed':>7} {'changed':>7}"
        lines.append(head + (f" {measure + ' change':>22}" if measure else "") + "  changed columns")
        for p in [*entry["partitions"], {"date": "total", "partition": "", **entry["totals"]}]:
            label = p["date"] or p["partition"] or "(all)"
            if p["date"] and p["partition"] and "business_date" not in p["partition"].split("/")[-1]:
                label = f"{p['date']} {p['partition'].split('/')[-1]}"
            counts = f"{p['rows_before']:>8} {p['rows_after']:>8} {p['added']:>7} {p['removed']:>7} {p['changed']:>7}"
            row = f"  {label:<24} {counts}"
            if measure:
                change = (p.get("measure") or {}).get("change")
                row += f" {'' if change is None else f'{change:+.2f}':>22}"
            cols = ", ".join(f"{c} {n}" for c, n in p.get("changed_columns", {}).items())
            lines.append(row + ("  " + cols if cols else "") + (f"  ({p['note']})" if p.get("note") else ""))
    if record.get("state") == "not kept":
        lines.append("nothing to publish: the preview is not kept")
    elif record.get("failed") or record.get("not_run") or record.get("not_built"):
        lines.append(f"not publishable: a partition above failed or was not built    discard: daybreak discard {pid}")
    else:
        lines.append(f"publish: daybreak publish {pid}    discard: daybreak discard {pid}")
    return "\n".join(lines)


def _capped(lines: list[str]) -> list[str]:
    more = len(lines) - DETAIL_LINES
    return lines if more <= 0 else [*lines[:DETAIL_LINES], f"  ... and {more} more (--json lists them all)"]


def render_listing(rows: list[dict]) -> str:
    if not rows:
        return "no previews"
    wide = max(44, *(len(r["id"]) for r in rows))  # a long id keeps the columns in line
    lines = [f"{'id':<{wide}} {'range':<24} {'age':>7} {'size':>10} {'state':<10} publishable"]
    for r in rows:
        why = "yes" if r["publishable"] else "no: " + cut_at_word("; ".join(str(x) for x in r["why_not"]), 160)
        lines.append(
            f"{r['id']:<{wide}} {r['start'] + '..' + r['stop']:<24} {r['age_hours']:>6.1f}h "
            f"{r['size_bytes'] / 1e6:>8.1f}MB {r['state']:<10} {why}"
        )
    return "\n".join(lines)
