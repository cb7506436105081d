"""Preview and publish benchmark (issue 17). Run: python benchmarks/preview.py [--days 60] [--stores 50] [--repeat 3]

On the sample data (``daybreak sample``), stg_qsr_pos built for every date with the default rules, then
``[qsr] suspicious_qty_threshold`` changed (20 -> 25: the sample's bulk lines of qty 24 stop being
suspicious, so every partition is rewritten and its diff is not empty). Side by side in one run, each
from a copy of the same data root, the order rotating over the repetitions:

 (1) the backfill a preview stands for: ``luigi --module tasks RangeDaily --of StgQsrPos`` over the dates;
 (2) ``daybreak preview stg_qsr_pos`` over the same dates, diff included (same ``--workers``);
 (3) ``daybreak publish ID`` of that preview: the time it reports for putting the partitions in place
     (renames), and the command's wall time (Python start and imports included).

Targets: (2) <= 1.15 x (1); (3) < 1 s for 60 partitions.
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

from benchmarks._luigi import timed_luigi  # noqa: E402

START = dt.date(2026, 9, 1)


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--stores", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", help="scratch folder (default: a temporary one, deleted after)")
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="preview-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    raw, base = work / "raw", work / "base"
    stop = START + dt.timedelta(days=args.days)
    if not raw.exists():
        from tasks import sample

        sample.generate(raw, START, args.days + 1, stores=args.stores, seed=1, include_late=False)
    rng = ["--start", str(START), "--stop", str(stop), "--workers", str(args.workers)]
    if not base.exists():
        timed_luigi(write_cfg(work / "base.cfg", raw, base, 20), "RangeDaily", "--of", "StgQsrPos", *rng)
    results: dict[str, list[float]] = {"range": [], "preview": [], "publish": [], "publish_cmd": []}
    for i in range(args.repeat):
        order = ["range", "preview"] if i % 2 == 0 else ["preview", "range"]
        for what in order:
            data = work / f"data-{what}"
            shutil.rmtree(data, ignore_errors=True)
            shutil.copytree(base, data)  # copy2: sizes and mtimes as the manifests record them
            cfg = write_cfg(work / f"{what}.cfg", raw, data, 25)
            if what == "range":
                results["range"].append(timed_luigi(cfg, "RangeDaily", "--of", "StgQsrPos", *rng))
                continue
            wall, out = daybreak(cfg, "preview", "stg_qsr_pos", *rng, "--json")
            report = json.loads(out)
            parts = report["datasets"]["stg_qsr_pos"]["partitions"]
            assert len(parts) == args.days and sum(p["changed"] for p in parts) > 0, "the preview built nothing"
            results["preview"].append(wall)
            wall, out = daybreak(cfg, "publish", report["id"])
            results["publish"].append(float(re.search(r"partition\(s\) in ([\d.]+) s", out).group(1)))
            results["publish_cmd"].append(wall)
        print(f"run {i + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in results.items()), flush=True)
    med = {k: statistics.median(v) for k, v in results.items()}
    best = {k: min(v) for k, v in results.items()}
    print(f"\n{args.days} dates x {args.stores} stores, --workers {args.workers}, {args.repeat} runs (median, best)")
    print("| step | median (s) | best (s) | vs RangeDaily (median) |")
    print("|---|---:|---:|---:|")
    print(f"| RangeDaily --of StgQsrPos | {med['range']:.2f} | {best['range']:.2f} | 1.00x |")
    ratio = med["preview"] / med["range"]
    print(f"| daybreak preview (diff included) | {med['preview']:.2f} | {best['preview']:.2f} | {ratio:.2f}x |")
    print(f"| daybreak publish: {args.days} partitions put in place | {med['publish']:.3f} | {best['publish']:.3f} | |")
    cmd = f"{med['publish_cmd']:.2f} | {best['publish_cmd']:.2f}"
    print(f"| daybreak publish, the command (start-up included) | {cmd} | |")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
