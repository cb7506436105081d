"""Partitions in a bucket (docs/scale-out.md). Run: python benchmarks/s3.py [--days 20] [--stores 100] [--repeat 3]

Against a real S3 server started here (Ceph's radosgw on loopback, tests/radosgw.py), side by side in one run,
each command in its own process, the order rotating over the repetitions:
 (1) `RangeDaily --of StgQsrPos --workers 1` over DAYS dates x STORES stores, from an empty data root, with
     data_root = s3://... against the baseline: the yardstick (benchmarks/yardstick.py, no Daybreak import)
     looped over the same dates into a local folder, then that folder uploaded to the bucket by pyarrow's
     own S3FileSystem (`pyarrow.fs.copy_files`), each in a fresh process (its time is the loop plus the
     upload); and the same RangeDaily with a local data_root, for what the bucket costs (target: bucket /
     local at most 1.3x);
 (2) the same range on the bucket by hosts on one luigid: one host with one worker, two hosts with one
     worker each, and one host with `--workers 2` (the same cores as two hosts): two hosts at most 1.15x
     the wall time and at most 1.15x the CPU seconds (every process of the hosts) of one host with
     `--workers 2`; also one host / two hosts, and each as a ratio to (1)'s baseline of the same repetition;
 (3) a no-op RangeDaily over 1,095 complete dates on the bucket, in a new process: wall time (target under
     3 s) and the requests it makes, counted with boto3's events (target: the listing's pages plus at most
     10 per dataset), with this host's cache and from a new host (an empty cache_dir).
The raw zone is `daybreak sample` on a local disk for (1) and (2), one tiny file per date for (3).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._luigi import children_cpu, rotated  # noqa: E402
from benchmarks.backfill import timed_yardstick  # noqa: E402  (no Daybreak import)
from tests import radosgw  # noqa: E402
from tests.sshd import free_port  # noqa: E402

START = dt.date(2026, 9, 1)
NOOP_START = dt.date(2023, 9, 1)
NOOP_DAYS = 1095
YARDSTICK = REPO / "benchmarks" / "yardstick.py"

# the baseline's upload: a local folder to s3://BUCKET/PREFIX with pyarrow's own S3 client, no Daybreak import
UPLOAD = """
import sys
import pyarrow.fs as fs
local, dest, endpoint, region = sys.argv[1:]  # the keys: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
s3 = fs.S3FileSystem(endpoint_override=endpoint, region=region)
fs.copy_files(local, dest, destination_filesystem=s3)
"""

COUNT_REQUESTS = """
import atexit, collections, sys
import luigi.retcodes
import botocore.client
from tasks.storage import s3get
counts = collections.Counter()
call = botocore.client.BaseClient._make_api_call
def counted(self, operation, params):  # every request a client sends, however the client was made
    counts.update([operation])
    return call(self, operation, params)
botocore.client.BaseClient._make_api_call = counted
send = s3get.Signer.send
def signed(self, key, query=None, method="GET"):  # the requests sent outside botocore (tasks/storage/s3get.py)
    counts.update(["HeadBucket" if method == "HEAD" else "ListObjectsV2" if key is None else "GetObject"])
    return send(self, key, query, method)
s3get.Signer.send = signed
atexit.register(lambda: print("REQUESTS " + __import__("json").dumps(counts), file=sys.stderr))
luigi.retcodes.run_with_retcodes(sys.argv[1:])
"""


def config(path: Path, raw: Path | str, data: str, rgw, cache: Path, scheduler: int | None = None) -> Path:
    from tasks.settings import write_config

    sections = {
        "daybreak": {"raw_root": raw, "data_root": data, "start_date": NOOP_START, "cache_dir": cache},
        "s3": {"endpoint_url": rgw.endpoint_url, "region": rgw.region},
        "core": {"log_level": "WARNING"},
    }
    if scheduler is not None:
        sections["core"].update(scheduler_host="127.0.0.1", scheduler_port=scheduler)
    return write_config(path, sections)


def luigi(cfg: Path, rgw, *args: str, count: bool = False) -> tuple[float, float, dict]:
    """(wall s, CPU s, requests by operation) of one ``luigi --module tasks`` command."""
    env = {
        **os.environ, "LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(REPO),
        "AWS_ACCESS_KEY_ID": rgw.access_key, "AWS_SECRET_ACCESS_KEY": rgw.secret_key,
    }  # fmt: skip
    code = ["-c", COUNT_REQUESTS] if count else ["-m", "luigi"]
    cmd = [sys.executable, *code, "--module", "tasks", *args]
    t0, cpu0 = time.perf_counter(), children_cpu()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=cfg.parent)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args[:3])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    line = next((x for x in proc.stderr.splitlines() if x.startswith("REQUESTS ")), "REQUESTS {}")
    return wall, cpu, json.loads(line.removeprefix("REQUESTS "))


def range_args(days: int, start: dt.date = START, workers: int = 1, local: bool = True) -> list[str]:
    args = ["RangeDaily", "--of", "StgQsrPos", "--start", str(start), "--stop", str(start + dt.timedelta(days=days))]
    return [*args, "--workers", str(workers), *(["--local-scheduler"] if local else []), "--no-lock"]


def luigid(work: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    code = "from luigi.cmdline import luigid; luigid()"
    args = ["--address", "127.0.0.1", "--port", str(port), "--state-path", str(work / f"luigid-{port}.pickle")]
    (work / "logs").mkdir(exist_ok=True)
    server = subprocess.Popen([sys.executable, "-c", code, *args, "--logdir", str(work / "logs")], cwd=work)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return server, port
        time.sleep(0.1)
    raise SystemExit("luigid did not start")


LAST_CPU = [0.0]
SYSTEMS = ("base", "local", "s3")  # part (1), the order rotating over the repetitions


HOSTS = {"one": (1, 1), "two": (2, 1), "w2": (1, 2)}  # part (2): (hosts, workers of each)


def hosts_run(work: Path, raw: Path, rgw, bucket: str, tag: str, hosts: int, args, workers: int = 1) -> float:
    """Wall seconds of ``hosts`` processes (``workers`` each) running the range at once on a luigid of their own
    (one that saw the range DONE would hand out nothing); their CPU seconds (forked workers included) in LAST_CPU."""
    server, port = luigid(work)
    try:
        data = f"s3://{bucket}/{tag}"
        cfgs = [config(work / f"{tag}-h{h}.cfg", raw, data, rgw, work / f"cache-{tag}-{h}", port) for h in range(hosts)]
        env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(work)}
        env.update(AWS_ACCESS_KEY_ID=rgw.access_key, AWS_SECRET_ACCESS_KEY=rgw.secret_key)
        cmd = [sys.executable, "-m", "luigi", "--module", "tasks", *range_args(args.days, workers=workers, local=False)]
        t0, cpu0 = time.perf_counter(), children_cpu()
        procs = [
            subprocess.Popen(cmd, env={**env, "LUIGI_CONFIG_PATH": str(c)}, cwd=c.parent, stderr=subprocess.PIPE)
            for c in cfgs
        ]
        codes = [p.wait() for p in procs]
        if codes != [0] * hosts:
            raise SystemExit(f"{tag}: exit codes {codes}: {procs[0].stderr.read().decode()[-2000:]}")
        wall = time.perf_counter() - t0
        LAST_CPU[0] = children_cpu() - cpu0
        return wall
    finally:
        server.terminate()
        server.wait()


def uploaded(rgw, local: Path, bucket: str, prefix: str) -> float:
    """Wall seconds of :data:`UPLOAD` of ``local`` to s3://bucket/prefix in a fresh process; then (not timed)
    a check that every file is in the bucket with its size: copy_files only logs a failed upload."""
    # the AWS SDK's default checksums send aws-chunked bodies, which radosgw 16 refuses (411): only when required
    env = {
        **os.environ, "AWS_ACCESS_KEY_ID": rgw.access_key, "AWS_SECRET_ACCESS_KEY": rgw.secret_key,
        "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required", "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required",
    }  # fmt: skip
    args = [str(local), f"{bucket}/{prefix}", rgw.endpoint_url, rgw.region]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", UPLOAD, *args], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the baseline's upload failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    files = {f"{prefix}/{p.relative_to(local)}": p.stat().st_size for p in local.rglob("*") if p.is_file()}
    stored = {}
    for page in rgw.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{prefix}/"):
        stored.update({o["Key"]: o["Size"] for o in page.get("Contents", []) if not o["Key"].endswith("/")})
    if stored != files or not files:
        raise SystemExit(f"the baseline's upload stored {len(stored)} of {len(files)} files: the measurement is void")
    return wall


def baseline(work: Path, raw: Path, rgw, bucket: str, tag: str, days: int) -> tuple[float, float]:
    """(wall s, of which the upload) of the baseline: the yardstick's loop over the dates into a local folder,
    then that folder uploaded to s3://bucket/tag, each in a fresh process."""
    local = work / f"data-{tag}"
    loop = timed_yardstick(YARDSTICK, raw, local, days)
    upload = uploaded(rgw, local, bucket, tag)
    return loop + upload, upload


def sampled(raw: Path, start: dt.date, days: int, stores: int, seed: int = 1) -> Path:
    """``raw``, holding ``daybreak sample``'s raw files (made once: a later run reuses them)."""
    if not (raw / "qsr_pos").is_dir():
        subprocess.run(
            [sys.executable, "-m", "tasks.cli", "sample", "--raw-root", str(raw), "--start", str(start),
             "--days", str(days), "--stores", str(stores), "--seed", str(seed)],
            check=True, cwd=REPO, capture_output=True,
        )  # fmt: skip
    return raw


def tiny_zone(raw: Path, days: int) -> None:
    header = "order_id,line_no,store_id,ordered_at,sku,qty,unit_price,discount,status\n"
    for i in range(days + 1):
        d = NOOP_START + dt.timedelta(days=i)
        folder = raw / "qsr_pos" / d.isoformat()
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "S001.csv").write_text(f"{header}S001-{d},1,S001,{d}T12:00:00-04:00,COLA,1,1.99,,COMPLETED\n")


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=20)
    parser.add_argument("--stores", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--skip-noop", action="store_true")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="daybreak-s3-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    raw = sampled(work / "raw", START, args.days + 1, args.stores)
    with radosgw.running(work / f"rgw-{uuid.uuid4().hex[:6]}") as rgw:
        bucket = rgw.make_bucket("bench")
        kinds = ("base", "local", "s3", "upload", *HOSTS, *(f"cpu-{k}" for k in HOSTS))
        results: dict[str, list] = {k: [] for k in kinds}
        for rep in range(args.repeat):
            for kind in rotated(SYSTEMS, rep):
                tag = f"{kind}-{rep}"
                if kind == "base":
                    wall, upload = baseline(work, raw, rgw, bucket, tag, args.days)
                    results["base"].append(wall)
                    results["upload"].append(upload)
                    continue
                data = str(work / f"data-{tag}") if kind == "local" else f"s3://{bucket}/{tag}"
                cfg = config(work / f"{tag}.cfg", raw, data, rgw, work / f"cache-{tag}")
                results[kind].append(luigi(cfg, rgw, *range_args(args.days))[0])
            for kind in rotated(tuple(HOSTS), rep):
                hosts, workers = HOSTS[kind]
                results[kind].append(hosts_run(work, raw, rgw, bucket, f"{kind}-{rep}", hosts, args, workers))
                results[f"cpu-{kind}"].append(LAST_CPU[0])
            done = ", ".join(f"{k} {results[k][-1]:.2f} s" for k in (*SYSTEMS, *HOSTS))
            print(f"run {rep + 1}: {done}", flush=True)

        def ratios(a: str, b: str) -> list[float]:
            return [x / y for x, y in zip(results[a], results[b], strict=True)]

        print(f"\n{args.days} dates x {args.stores} stores, {args.repeat} repetitions (min / median / max)")
        rows = [
            ("baseline: yardstick loop, then upload", spread(results["base"]) + " s", ""),
            ("  of which pyarrow's upload to the bucket", spread(results["upload"]) + " s", ""),
            ("RangeDaily --workers 1, data_root on s3", spread(results["s3"]) + " s", ""),
            ("RangeDaily --workers 1, local data_root", spread(results["local"]) + " s", ""),
            ("s3 / baseline", spread(ratios("s3", "base")) + " x", ""),
            ("s3 / local (what the bucket costs)", spread(ratios("s3", "local")) + " x", "target <= 1.30"),
            ("one host on luigid", spread(results["one"]) + " s", ""),
            ("two hosts on luigid, one worker each", spread(results["two"]) + " s", ""),
            ("one host on luigid, --workers 2", spread(results["w2"]) + " s", ""),
            ("one host / baseline", spread(ratios("one", "base")) + " x", ""),
            ("two hosts / baseline", spread(ratios("two", "base")) + " x", ""),
            ("one host / two hosts", spread(ratios("one", "two")) + " x", ""),
            ("CPU s of two hosts (all processes)", spread(results["cpu-two"]) + " s", ""),
            ("CPU s of one host --workers 2", spread(results["cpu-w2"]) + " s", ""),
            ("two hosts / one host --workers 2, wall", spread(ratios("two", "w2")) + " x", "target <= 1.15"),
            ("two hosts / one host --workers 2, CPU", spread(ratios("cpu-two", "cpu-w2")) + " x", "target <= 1.15"),
        ]
        for label, value, target in rows:
            print(f"  {label:<42} {value:<24} {target and f'({target})'}".rstrip())
        if not args.skip_noop:
            noop(work, rgw, bucket)


def noop(work: Path, rgw, bucket: str) -> None:
    raw = work / "noop-raw"
    if not (raw / "qsr_pos").is_dir():
        tiny_zone(raw, NOOP_DAYS)
    data = f"s3://{bucket}/noop"
    cache = work / "cache-noop"
    build = config(work / "noop-build.cfg", raw, data, rgw, cache)
    wall, _, _ = luigi(build, rgw, *range_args(NOOP_DAYS, NOOP_START, workers=2))
    print(f"\nno-op check of {NOOP_DAYS} dates on s3 (built in {wall:.1f} s)")
    for label, cache_dir in (("this host's cache", cache), ("a new host", None)):
        walls, requests = [], {}
        for k in range(3):
            where = cache_dir or work / f"cache-new-{uuid.uuid4().hex[:6]}"
            cfg = config(work / f"noop-{k}.cfg", raw, data, rgw, where)
            wall, _, requests = luigi(cfg, rgw, *range_args(NOOP_DAYS, NOOP_START), count=True)
            walls.append(wall)
        total = sum(requests.values())
        print(f"  {label:<20} {spread(walls)} s (target < 3 s); requests {total}: {dict(requests)}")


if __name__ == "__main__":
    main()
