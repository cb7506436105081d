"""The lab's demonstration: what a backfill costs after each kind of change.

Builds 10 days, changes the suspicious threshold and backfills all 60, deletes one partition, drops in
one late file, and reruns with nothing to do. Every step is the real ``luigi ... RangeDaily`` command
line; the partitions each step ran are counted from the manifests it rewrote. The table is written to
``<workdir>/backfills.md``; with ``--update-docs`` also into docs/backfills.md and README.md between
``<!-- demo:start -->`` and ``<!-- demo:end -->``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tasks import sample, settings
from tasks.guard import fail

MARKERS = ("<!-- demo:start -->", "<!-- demo:end -->")


@dataclass
class Step:
    name: str
    partitions_run: int
    wall_s: float
    exit_code: int


class DemoLab:
    def __init__(self, workdir: Path, start: dt.date, days: int, workers: int):
        workdir = workdir.resolve()  # the steps run in workdir: a relative raw root would be taken from there
        self.workdir, self.start, self.days, self.workers = workdir, start, days, workers
        self.raw, self.data, self.cfg = workdir / "raw", workdir / "data", workdir / "luigi.cfg"

    def write_cfg(self, **qsr: object) -> None:
        roots = {"raw_root": self.raw, "data_root": self.data, "start_date": self.start}
        settings.write_config(self.cfg, {"daybreak": roots, "qsr": qsr})

    def manifests(self) -> dict[str, str]:
        root = self.data / "staging" / "qsr_pos"
        return {p.parent.name: json.loads(p.read_text())["finished_at"] for p in root.glob("*/_manifest.json")}

    def backfill(self, name: str, days: int) -> Step:
        stop = self.start + dt.timedelta(days=days)
        cmd = [sys.executable, "-m", "luigi", "--module", "tasks", "RangeDaily", "--of", "StgQsrPos"]
        cmd += ["--start", str(self.start), "--stop", str(stop), "--workers", str(self.workers), "--local-scheduler"]
        before = self.manifests()
        t0 = time.perf_counter()
        env = {**os.environ, "LUIGI_CONFIG_PATH": str(self.cfg)}
        proc = subprocess.run(cmd, cwd=self.workdir, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        ran = sum(1 for k, v in self.manifests().items() if before.get(k) != v)
        step = Step(name, ran, round(wall, 2), proc.returncode)
        print(f"{name:<58} {ran:>4} partitions {wall:7.2f} s  exit {proc.returncode}", flush=True)
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
        return step


MARKER = ".daybreak-demo"  # in a workdir the demo made: only such a folder (or an empty one) is deleted


def prepare_workdir(workdir: Path) -> None:
    """Make ``workdir`` ready: new, empty, or an earlier demo's (its marker file) emptied; exit 2,
    deleting nothing, for any other folder, a symbolic link, or the current folder or one that holds it."""
    if workdir.is_symlink():
        fail(f"demo: --workdir {workdir} is a symbolic link; give the folder itself")
    if workdir.exists():
        if not workdir.is_dir():
            fail(f"demo: --workdir {workdir} is a file, not a folder")
        here = Path.cwd().resolve()
        if workdir.resolve() in (here, *here.parents) and any(workdir.iterdir()):
            fail(f"demo: --workdir {workdir} is the current folder or holds it: the demo empties its workdir")
        if any(workdir.iterdir()):
            if not (workdir / MARKER).is_file():
                fail(
                    f"demo: --workdir {workdir} holds files the demo did not make, and the demo deletes its "
                    "workdir: choose a new or empty folder"
                )
            for entry in workdir.iterdir():  # the folder itself stays (it may be someone's working folder)
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / MARKER).write_text("made by daybreak demo: emptied and used again by the next demo\n")


def run_demo(workdir: Path, start: dt.date, days: int, stores: int, workers: int, seed: int = 1) -> list[Step]:
    prepare_workdir(workdir)
    lab = DemoLab(workdir, start, days, workers)
    t0 = time.perf_counter()
    summary = sample.generate(lab.raw, start, days, stores=stores, seed=seed)
    took = time.perf_counter() - t0
    print(f"sample: {summary['qsr_lines']:,} POS lines in {summary['qsr_files']:,} files ({took:.1f} s)")
    lab.write_cfg()
    steps = [lab.backfill("1. build the first 10 days", 10)]
    lab.write_cfg(suspicious_qty_threshold=15)
    steps.append(lab.backfill(f"2. threshold 20 -> 15, backfill all {days} days", days))
    victim = start + dt.timedelta(days=days // 3)
    shutil.rmtree(lab.data / "staging" / "qsr_pos" / f"business_date={victim}")
    steps.append(lab.backfill(f"3. delete partition {victim}, rerun", days))
    late = sample.write_late_file(lab.raw, start, days, stores=stores, seed=seed)
    steps.append(lab.backfill(f"4. late file {late.relative_to(lab.raw)} arrives, rerun", days))
    steps.append(lab.backfill("5. rerun with nothing to do", days))
    return steps


def render(steps: list[Step], stores: int, days: int, workers: int) -> str:
    head = (
        f"Generated by `daybreak demo` on {dt.date.today()} ({days} days x {stores} stores of sample data, "
        f"`--workers {workers}`, {os.cpu_count()} cores):\n\n"
        "| step | partitions run | wall time (s) | exit |\n|---|---:|---:|---:|\n"
    )
    return head + "".join(f"| {s.name} | {s.partitions_run} | {s.wall_s:.2f} | {s.exit_code} |\n" for s in steps)


def write_output(workdir: Path, table: str, update_docs: bool = False) -> list[Path]:
    """Write the table to ``<workdir>/backfills.md``, and with ``update_docs`` into the tracked
    docs/backfills.md and README.md (between the markers); return the files written."""
    out = workdir / "backfills.md"
    out.write_text(table, encoding="utf-8")
    docs = (settings.PROJECT_ROOT / "docs" / "backfills.md", settings.PROJECT_ROOT / "README.md")
    return [out, *(doc for doc in docs if update_docs and write_table(doc, table))]


def write_table(path: Path, table: str) -> bool:
    if not path.exists():
        return False
    text = path.read_text()
    pattern = re.compile(re.escape(MARKERS[0]) + ".*?" + re.escape(MARKERS[1]), re.S)
    if not pattern.search(text):
        return False
    path.write_text(pattern.sub(lambda _m: f"{MARKERS[0]}\n{table}{MARKERS[1]}", text))
    return True
