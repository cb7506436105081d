"""Preview and publish benchmark. Run: python benchmarks/preview.py [--days 60] [--stores 50] [--repeat 3]

On the sample data (``daybreak sample``), stg_qsr_pos built for every date with the default rules, then
``[qsr] suspicious_qty_threshold`` changed (20 -> 25: the sample's bulk lines of qty 24 stop being
suspicious, so every partition is rewritten and its diff is not empty). Side by side in one run, each
system in a fresh process, each from a copy of its own data root, the order rotating over the repetitions:

 (1) the baseline, without Daybreak: the yardstick (benchmarks/yardstick.py) looped over the dates with
     the new threshold into a shadow data root, then a plain comparison (one DuckDB query in a fresh
     process: both sides' Parquet files joined on the key, rows added, removed and changed counted per
     partition), then the shadow partitions' folders renamed into place (the yardstick's own atomic
     publish, in a fresh process); its live root holds the yardstick's partitions of the old threshold;
 (2) the backfill a preview stands for: ``luigi --module tasks RangeDaily --of StgQsrPos`` over the dates;
 (3) ``daybreak preview stg_qsr_pos`` over the same dates, diff included (same ``--workers``);
 (4) ``daybreak publish ID`` of that preview: the time it reports for putting the partitions in place
     (checks and renames), and the command's wall time (Python start and imports included).

Printed: medians; the ratios, taken within a repetition: (3) against (1)'s loop and comparison (the
headline), (3) against (2) (what a preview adds to a backfill), (4) against (1)'s renames.
Targets: (3) <= 1.15 x (2); (4) < 1 s for 60 partitions.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._luigi import rotated, timed_luigi  # noqa: E402
from benchmarks.backfill import JEMALLOC_CONF, START, timed_yardstick  # noqa: E402  (no Daybreak import)

YARDSTICK = REPO / "benchmarks" / "yardstick.py"
SYSTEMS = ("plain", "range", "preview")


def write_cfg(path: Path, raw: Path, data: Path, threshold: int) -> Path:
    from tasks.settings import write_config

    return write_config(
        path,
        {
            "daybreak": {"raw_root": raw, "data_root": data, "start_date": START},
            "qsr": {"suspicious_qty_threshold": threshold},
            "core": {"log_level": "WARNING"},
        },
    )


def daybreak(cfg: Path, *args: str) -> tuple[float, str]:
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-c", "import sys; from tasks.cli import main; sys.exit(main(sys.argv[1:]))", *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=cfg.parent)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"daybreak {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, proc.stdout


DIFF_SQL = """
WITH o AS (SELECT * FROM read_parquet('{old}/staging/qsr_pos/*/part.parquet')),
     n AS (SELECT * FROM read_parquet('{new}/staging/qsr_pos/*/part.parquet'))
SELECT coalesce(o.business_date, n.business_date) AS business_date,
       count(o.order_id) AS rows_before, count(n.order_id) AS rows_after,
       count(*) FILTER (WHERE o.order_id IS NULL) AS added,
       count(*) FILTER (WHERE n.order_id IS NULL) AS removed,
       count(*) FILTER (WHERE o.order_id IS NOT NULL AND n.order_id IS NOT NULL AND o IS DISTINCT FROM n) AS changed
FROM o FULL JOIN n ON o.business_date = n.business_date AND o.store_id = n.store_id
                  AND o.order_id = n.order_id AND o.line_no = n.line_no
GROUP BY ALL ORDER BY 1
"""


def plain_diff(old: str, new: str) -> dict:
    """(in a fresh process, no Daybreak import) The old and new partitions of the yardstick's data roots
    compared in one DuckDB query: joined on the key, rows added, removed and changed (any other column
    differs) per partition; returns the totals and the partitions that differ."""
    import duckdb

    rows = duckdb.connect().sql(DIFF_SQL.format(old=old, new=new)).fetchall()
    names = ("rows_before", "rows_after", "added", "removed", "changed")
    totals = {k: sum(r[i + 1] for r in rows) for i, k in enumerate(names)}
    return {**totals, "partitions": len(rows), "differ": sum(1 for r in rows if any(r[3:]))}


def plain_publish(shadow: str, live: str, days: int) -> dict:
    """(in a fresh process, no Daybreak import) Each date's shadow partition and quarantine folders renamed
    into place in ``live`` by the yardstick's own atomic publish (rename, or exchange with the old folder,
    which is then removed; fsynced); returns the seconds the renames took."""
    from benchmarks.yardstick import partition_dir, publish_dir, quarantine_dir

    t0 = time.perf_counter()
    for i in range(days):
        d = START + dt.timedelta(days=i)
        for folder in (quarantine_dir, partition_dir):
            publish_dir(folder(shadow, d), folder(live, d), durable=True)
    return {"renames_s": time.perf_counter() - t0}


def timed_plain(*args: str) -> tuple[float, dict]:
    """(wall s, its JSON answer) of this script's ``args`` (a plain step) in a fresh process, with Arrow's
    own allocator settings (as the yardstick's loop)."""
    env = {k: v for k, v in os.environ.items() if k not in ("JE_ARROW_MALLOC_CONF", "ARROW_DEFAULT_MEMORY_POOL")}
    env.update({} if JEMALLOC_CONF is None else {"JE_ARROW_MALLOC_CONF": JEMALLOC_CONF})
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, *args], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{args[0]} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--stores", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", help="scratch folder (default: a temporary one, deleted after)")
    parser.add_argument("--plain-diff", nargs=2, metavar=("OLD", "NEW"), help=argparse.SUPPRESS)
    parser.add_argument("--plain-publish", nargs=3, metavar=("SHADOW", "LIVE", "DAYS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_diff:
        return print(json.dumps(plain_diff(*args.plain_diff)))
    if args.plain_publish:
        shadow, live, days = args.plain_publish
        return print(json.dumps(plain_publish(shadow, live, int(days))))
    work = Path(args.workdir or tempfile.mkdtemp(prefix="preview-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    raw, base, base_plain = work / "raw", work / "base", work / "base-plain"
    stop = START + dt.timedelta(days=args.days)
    if not raw.exists():
        from tasks import sample

        sample.generate(raw, START, args.days + 1, stores=args.stores, seed=1, include_late=False)
    rng = ["--start", str(START), "--stop", str(stop), "--workers", str(args.workers)]
    if not base.exists():
        timed_luigi(write_cfg(work / "base.cfg", raw, base, 20), "RangeDaily", "--of", "StgQsrPos", *rng)
    if not base_plain.exists():  # the baseline's live partitions: the yardstick's, the old threshold
        timed_yardstick(YARDSTICK, raw, base_plain, args.days, suspicious_qty=20)
    keys = "plain plain_build plain_diff range preview renames renames_cmd publish publish_cmd".split()
    runs: list[dict[str, float]] = []
    changed: dict[str, int] = {}
    for i in range(args.repeat):
        order = rotated(SYSTEMS, i)
        times: dict[str, float] = {}
        for what in order:
            data = work / f"data-{what}"
            shutil.rmtree(data, ignore_errors=True)
            # copy2: sizes and mtimes as the manifests record them
            shutil.copytree(base_plain if what == "plain" else base, data)
            if what == "plain":
                shadow = work / "shadow-plain"
                shutil.rmtree(shadow, ignore_errors=True)
                times["plain_build"] = timed_yardstick(YARDSTICK, raw, shadow, args.days, suspicious_qty=25)
                times["plain_diff"], diff = timed_plain("--plain-diff", str(data), str(shadow))
                assert diff["partitions"] == args.days and diff["changed"] > 0, f"the plain diff found nothing: {diff}"
                changed["plain"] = diff["changed"]
                times["plain"] = times["plain_build"] + times["plain_diff"]
                times["renames_cmd"], out = timed_plain("--plain-publish", str(shadow), str(data), str(args.days))
                times["renames"] = out["renames_s"]
                continue
            cfg = write_cfg(work / f"{what}.cfg", raw, data, 25)
            if what == "range":
                times["range"] = timed_luigi(cfg, "RangeDaily", "--of", "StgQsrPos", *rng)
                continue
            wall, out = daybreak(cfg, "preview", "stg_qsr_pos", *rng, "--json")
            report = json.loads(out)
            parts = report["datasets"]["stg_qsr_pos"]["partitions"]
            assert len(parts) == args.days and sum(p["changed"] for p in parts) > 0, "the preview built nothing"
            changed["daybreak"] = sum(p["changed"] for p in parts)
            times["preview"] = wall
            times["publish_cmd"], out = daybreak(cfg, "publish", report["id"])
            times["publish"] = float(re.search(r"partition\(s\) in ([\d.]+) s", out).group(1))
            times["publish_renames"] = float(re.search(r"renames ([\d.]+) s", out).group(1))
        runs.append(times)
        print(f"run {i + 1} ({', '.join(order)}): " + ", ".join(f"{k} {times[k]:.2f} s" for k in keys), flush=True)
    report_runs(runs, changed, args)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


def report_runs(runs: list[dict], changed: dict[str, int], args) -> None:
    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    def best(key: str) -> float:
        return min(r[key] for r in runs)

    def ratio(a: str, b: str) -> str:
        return f"{statistics.median(r[a] / r[b] for r in runs):.2f}x"

    n = args.days
    print(f"\n{n} dates x {args.stores} stores, --workers {args.workers}, {len(runs)} runs (median, best)")
    print("| step | median (s) | best (s) | vs the baseline (median) | vs RangeDaily (median) |")
    print("|---|---:|---:|---:|---:|")
    rows = [
        ("baseline: yardstick loop into a shadow root, then a DuckDB diff", "plain", "1.00x", ratio("plain", "range")),
        ("  of which the yardstick loop", "plain_build", "", ""),
        ("  of which the DuckDB diff (a fresh process)", "plain_diff", "", ""),
        ("RangeDaily --of StgQsrPos", "range", ratio("range", "plain"), "1.00x"),
        ("daybreak preview (diff included)", "preview", ratio("preview", "plain"), ratio("preview", "range")),
        (f"baseline: {n} partitions' shadow folders renamed into place", "renames", "1.00x", ""),
        (f"daybreak publish: {n} partitions in place (checks, renames)", "publish", ratio("publish", "renames"), ""),
        ("the renames, the script (start-up included)", "renames_cmd", "1.00x", ""),
        ("daybreak publish, the command (start-up included)", "publish_cmd", ratio("publish_cmd", "renames_cmd"), ""),
    ]  # fmt: skip
    for label, key, vs_base, vs_range in rows:
        digits = 3 if key == "renames" else 2  # publish reports hundredths
        print(f"| {label} | {med(key):.{digits}f} | {best(key):.{digits}f} | {vs_base} | {vs_range} |")
    print(
        f"daybreak publish's renames alone: {med('publish_renames'):.2f} s (median); rows changed: "
        f"Daybreak's diff {changed['daybreak']:,}, the plain diff {changed['plain']:,} (the yardstick's rules and "
        "columns are not Daybreak's: the counts need not match)"
    )


if __name__ == "__main__":
    main()
