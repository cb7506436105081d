"""Raw files and partitions in buckets, the store near and far. Run: python benchmarks/s3_far.py [--days 20]
[--stores 100] [--repeat 3] [--delay-ms 10]

Against a real S3 server started here (Ceph's radosgw on loopback, tests/radosgw.py) and the same server behind
tests/latency_proxy.py (every byte delayed --delay-ms each way, a round trip more per new connection: a store in
another zone), side by side in one run, each command in its own process with its own cache folder, the order
rotating over the repetitions:

 (1) ``RangeDaily --of StgQsrPos --workers 1`` over DAYS dates x STORES stores: raw files and partitions on a
     local disk ("local"); both in buckets ("bucket"); both in buckets through the proxy ("far"). Independent
     baseline: the yardstick (benchmarks/yardstick.py, no Daybreak import) over the same local raw files.
     Targets: bucket / local at most 1.3x, far / local at most 1.6x.
 (2) the no-op rerun of (1), and ``daybreak status --dataset stg_qsr_pos``: far against local (target at most
     2x each).
      The S3 server runs on the same cores: its CPU and Daybreak's, spread over the cores, give a floor for
     bucket / local that no client can beat on this machine (printed beside the ratio).
 (3) ``daybreak status`` of every dataset over 1,095 dates, a few built: on the bucket against local (target at
     most 2x), with the requests it makes for 30 and for 1,095 dates (target: the same count).
 (4) what ``daybreak plan`` runs for one worker without a luigid, ``RangeSingleRun`` (a process per core, each a
     stretch of dates), local and through the proxy (no target: for comparison with (1)).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._luigi import rotated  # noqa: E402
from benchmarks.backfill import timed_yardstick  # noqa: E402  (no Daybreak import)
from benchmarks.s3 import COUNT_REQUESTS, START, config, luigi, range_args, sampled, spread  # noqa: E402
from tests import latency_proxy, radosgw  # noqa: E402

YARDSTICK = REPO / "benchmarks" / "yardstick.py"
KINDS = ("local", "bucket", "far", "single-local", "single-far")
COUNT_STATUS = COUNT_REQUESTS.replace(
    "luigi.retcodes.run_with_retcodes(sys.argv[1:])", "from tasks.cli import main\nsys.exit(main(sys.argv[1:]))"
)


class Endpoint:
    """What benchmarks/s3.py's config() and luigi() need of a server: its endpoint and credentials."""

    def __init__(self, rgw, url: str):
        self.endpoint_url, self.region, self.access_key, self.secret_key = (
            url,
            rgw.region,
            rgw.access_key,
            rgw.secret_key,
        )


def server_cpu(rgw) -> float:
    """CPU seconds the S3 server's processes (radosgw, its OSD and monitor) have used so far."""
    total = 0.0
    for proc in rgw.procs.values():
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def floor(res: dict, rep: int) -> float:
    """The least wall time the bucket run could take on this machine's cores: the local run's wall, or its own
    CPU and the server's (on the same cores here, a store's own machine in production) spread over every core."""
    return max(res["local"][rep], (res["cpu-bucket"][rep] + res["server-bucket"][rep]) / (os.cpu_count() or 1))


def put_raw(rgw, raw: Path, bucket: str) -> None:
    client = rgw.client()
    for path in sorted(raw.rglob("*.csv")):
        client.put_object(Bucket=bucket, Key=f"landing/{path.relative_to(raw)}", Body=path.read_bytes())


def status(cfg: Path, server, *args: str) -> tuple[float, int]:
    """(wall s, requests to the store) of one ``daybreak status`` in a new process."""
    env = {
        **os.environ, "LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(REPO),
        "AWS_ACCESS_KEY_ID": server.access_key, "AWS_SECRET_ACCESS_KEY": server.secret_key,
    }  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", COUNT_STATUS, "status", *args], env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"status {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    line = next((x for x in proc.stderr.splitlines() if x.startswith("REQUESTS ")), "REQUESTS {}")
    return wall, sum(json.loads(line.removeprefix("REQUESTS ")).values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=20)
    parser.add_argument("--stores", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--delay-ms", type=float, default=10.0)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="daybreak-s3-far-"))
    work.mkdir(parents=True, exist_ok=True)
    raw = sampled(work / "raw", START, args.days + 1, args.stores)
    stop = str(START + dt.timedelta(days=args.days))
    with radosgw.running(work / f"rgw-{uuid.uuid4().hex[:6]}") as rgw:
        bucket = rgw.make_bucket("far")
        put_raw(rgw, raw, bucket)
        with latency_proxy.running("127.0.0.1", rgw.port, args.delay_ms / 1000) as proxy:
            near, far = Endpoint(rgw, rgw.endpoint_url), Endpoint(rgw, f"http://127.0.0.1:{proxy.port}")
            res: dict[str, list] = {}
            for rep in range(args.repeat):
                res.setdefault("yardstick", []).append(timed_yardstick(YARDSTICK, raw, work / f"y-{rep}", args.days))
                for kind in rotated(KINDS, rep):
                    tag = f"{kind}-{rep}"
                    server = far if kind.endswith("far") else near
                    roots = (raw, str(work / f"data-{tag}")) if kind.endswith("local") else (
                        f"s3://{bucket}/landing", f"s3://{bucket}/{tag}")  # fmt: skip
                    cfg = config(work / f"{tag}.cfg", roots[0], roots[1], server, work / f"cache-{tag}")
                    run = range_args(args.days)
                    if kind.startswith("single"):
                        run = ["RangeSingleRun", *run[1:]]
                    served = server_cpu(rgw)
                    wall, cpu, _ = luigi(cfg, server, *run)
                    res.setdefault(kind, []).append(wall)
                    res.setdefault(f"cpu-{kind}", []).append(cpu)
                    res.setdefault(f"server-{kind}", []).append(server_cpu(rgw) - served)
                    if kind in ("local", "far"):
                        res.setdefault(f"noop-{kind}", []).append(luigi(cfg, server, *range_args(args.days))[0])
                        args_status = ("--dataset", "stg_qsr_pos", "--start", str(START), "--stop", stop)
                        res.setdefault(f"status-{kind}", []).append(status(cfg, server, *args_status)[0])
                print(f"run {rep + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in res.items()), flush=True)

        def ratio(a: str, b: str) -> str:
            return spread([x / y for x, y in zip(res[a], res[b], strict=True)]) + " x"

        print(f"\n{args.days} dates x {args.stores} stores, --delay-ms {args.delay_ms:g}, {args.repeat} repetitions")
        rows = [
            ("yardstick (independent baseline)", spread(res["yardstick"]) + " s", ""),
            ("RangeDaily, raw and data on a local disk", spread(res["local"]) + " s", ""),
            ("RangeDaily, raw and data in buckets", spread(res["bucket"]) + " s", ""),
            ("RangeDaily, the same through the proxy", spread(res["far"]) + " s", ""),
            ("local / yardstick", ratio("local", "yardstick"), ""),
            ("bucket / local", ratio("bucket", "local"), "target <= 1.3"),
            (
                "  CPU s local; bucket: Daybreak + S3 server",
                spread(res["cpu-local"])
                + " s; "
                + spread(res["cpu-bucket"])
                + " + "
                + spread(res["server-bucket"])
                + " s",
                "",
            ),
            (
                "  the cores' floor for bucket / local",
                spread([floor(res, i) / res["local"][i] for i in range(args.repeat)]) + " x",
                "(CPU of both / cores)",
            ),
            ("far / local", ratio("far", "local"), "target <= 1.6"),
            ("no-op rerun far / local", ratio("noop-far", "noop-local"), "target <= 2"),
            ("status --dataset stg_qsr_pos far / local", ratio("status-far", "status-local"), "target <= 2"),
            ("RangeSingleRun, local", spread(res["single-local"]) + " s", ""),
            ("RangeSingleRun, through the proxy", spread(res["single-far"]) + " s", ""),
            ("RangeSingleRun far / its local", ratio("single-far", "single-local"), ""),
            ("RangeSingleRun far / RangeDaily local", ratio("single-far", "local"), ""),
        ]
        for label, value, target in rows:
            print(f"  {label:<44} {value:<26} {target and f'({target})'}".rstrip())
        long_status(work, rgw, near, bucket)


def long_status(work: Path, rgw, near: Endpoint, bucket: str) -> None:
    """``daybreak status`` of every dataset over 1,095 dates (three built), local and on the bucket."""
    first = dt.date(2024, 1, 1)
    raw = sampled(work / "status-raw", first, 4, 3, seed=2)
    walls: dict[str, list] = {}
    counts = {}
    for kind in ("local", "bucket"):
        data = str(work / "status-data") if kind == "local" else f"s3://{bucket}/status"
        cfg = config(work / f"status-{kind}.cfg", raw, data, near, work / f"cache-status-{kind}")
        cfg.write_text(cfg.read_text().replace("start_date = 2023-09-01", f"start_date = {first}"))
        built = ("RangeDaily", "--of", "StgQsrPos", "--start", str(first), "--stop", str(first + dt.timedelta(3)))
        luigi(cfg, near, *built, "--local-scheduler")
        for days in (30, 1095):
            stop = str(first + dt.timedelta(days=days))
            runs = [status(cfg, near, "--start", str(first), "--stop", stop) for _ in range(3)]
            walls.setdefault(f"{kind}-{days}", [w for w, _ in runs])
            counts[f"{kind}-{days}"] = runs[-1][1]
    ratio = [b / a for a, b in zip(walls["local-1095"], walls["bucket-1095"], strict=True)]
    print("\ndaybreak status, every dataset, 1,095 dates (3 built):")
    print(f"  local  {spread(walls['local-1095'])} s")
    print(
        f"  bucket {spread(walls['bucket-1095'])} s; requests {counts['bucket-1095']} (30 dates: {counts['bucket-30']})"
    )
    print(f"  bucket / local {spread(ratio)} x (target <= 2); requests the same for 30 and 1,095 dates: "
          f"{counts['bucket-30'] == counts['bucket-1095']}")  # fmt: skip


if __name__ == "__main__":
    main()
