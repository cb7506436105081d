"""Crashes and a full disk in the middle of partition writes (docs/reliability.md).

kill -9: seeded trials crash a real Luigi run (tests/crash_driver.py) at a random write step of a
chosen partition, or SIGKILL a real ``luigi`` process while a write is under way (frozen first, to be
sure of it), on a fresh range and on a range rebuilt after a rules change, with one and two workers.
Every kill lands mid-write, whatever order Luigi runs the dates in. After each crash: the partition
being written is not complete, every partition reads whole (pyarrow
and DuckDB), holds the old or the new content, is complete only if its write finished, temporary
leftovers are invisible to readers; one rerun gives exactly the clean reference build and leaves no
temporary entry behind. ``CRASH_SEED`` / ``CRASH_TRIALS`` explore other kill points.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import luigi.configuration
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tasks.freshness.engine import Engine
from tasks.qsr import StgQsrPos
from tasks.settings import write_config
from tests.conftest import reload_config

pytestmark = pytest.mark.system

REPO = Path(__file__).resolve().parent.parent
START, DAYS = dt.date(2026, 9, 10), 3
STOP = START + dt.timedelta(days=DAYS)  # RangeDaily's --stop is exclusive
DATES = [START + dt.timedelta(days=i) for i in range(DAYS)]
OLD_RULES, NEW_RULES = {"suspicious_qty_threshold": 20}, {"suspicious_qty_threshold": 2}
SEED = int(os.environ.get("CRASH_SEED", "20260910"))
TRIALS = int(os.environ.get("CRASH_TRIALS", "24"))  # crash-driver trials; plus LUIGI_KILLS below
LUIGI_KILLS = 6
DATASET = "staging/qsr_pos"
TIMESTAMPS = (
    "started_at",
    "finished_at",
    "duration_s",
    "inputs_listed_ns",
    "built_by",
    "settings_at",
)  # and its builder


# -- what a data root holds -------------------------------------------------------------------------
def tables(root: Path) -> dict[dt.date, list[dict]]:
    """Every partition's data file, read whole with pyarrow (raises on a truncated or missing file)."""
    out = {}
    for folder in sorted((root / DATASET).glob("business_date=*")):
        assert (folder / "data.parquet").is_file(), f"{folder} has no data file"
        out[dt.date.fromisoformat(folder.name.split("=")[1])] = pq.read_table(folder / "data.parquet").to_pylist()
    return out


def manifests(root: Path) -> dict[dt.date, dict]:
    """Every manifest without its timestamps (build times, data file mtimes), the process that built it and how
    its raw folders came in (checked here, or read checked)."""
    out = {}
    for path in sorted((root / DATASET).glob("business_date=*/_manifest.json")):
        m = {k: v for k, v in json.loads(path.read_text()).items() if k not in TIMESTAMPS}
        m["data_files"] = [{k: v for k, v in f.items() if k != "mtime_ns"} for f in m["data_files"]]
        m["stats"] = {k: v for k, v in m.get("stats", {}).items() if k != "raw_folders"}  # how, not what
        out[dt.date.fromisoformat(path.parent.name.split("=")[1])] = m
    return out


def leftovers(root: Path) -> list[Path]:
    """Temporary files and staging folders anywhere under the data root."""
    return sorted(p for p in root.rglob(".*") if ".tmp-" in p.name)


def assert_readers_see_exactly(root: Path, data: dict[dt.date, list[dict]]) -> None:
    """DuckDB's hive glob and pyarrow's dataset discovery of the dataset root see exactly the
    partitions' data files: no temporary file, no staging folder, no error."""
    expected = sorted((tuple(r.values()) + (d.isoformat(),) for d, rows in data.items() for r in rows), key=repr)
    if not data:
        return
    glob = f"{root / DATASET}/*/*.parquet"
    sql = (
        f"select * exclude (business_date), business_date::varchar from read_parquet('{glob}', hive_partitioning=true)"
    )
    assert sorted(duckdb.sql(sql).fetchall(), key=repr) == expected
    dataset = ds.dataset(root / DATASET, partitioning="hive", format="parquet").to_table()
    assert dataset.num_rows == len(expected)
    assert pq.read_table(root / DATASET).num_rows == len(expected)


# -- runs ---------------------------------------------------------------------------------------------
@dataclass
class Trial:
    name: str
    scenario: str  # fresh | rebuild
    workers: int
    at: int = 0  # crash-driver step of partition `date`; 0 for a luigi process killed mid-write after `delay`
    mode: str = "kill"
    truncate: float = 0.5
    delay: float = 0.0
    date: dt.date | None = None  # the partition the crash driver crashes in; None: no crash


class Bench:
    """A shared raw zone, an old build (old rules), and the clean reference build (new rules)."""

    def __init__(self, lab, tmp: Path):
        self.lab, self.tmp = lab, tmp
        lab.qsr_days(START, DAYS, stores=("S001", "S002", "S003"))
        self.old = tmp / "old"
        self.build_in_process(self.old, OLD_RULES)
        self.cfg = self.config("new", NEW_RULES)

    def config(self, name: str, rules: dict, data_root: Path | None = None) -> Path:
        roots = {"raw_root": self.lab.raw, "data_root": data_root or self.tmp / name}
        return write_config(self.tmp / f"{name}.cfg", {"daybreak": roots, "qsr": rules})

    def build_in_process(self, root: Path, rules: dict) -> int:
        return build_in_process(self.lab, root, rules)

    def data_root(self, trial: Trial) -> Path:
        root = self.tmp / trial.name
        if trial.scenario == "rebuild":
            shutil.copytree(self.old, root)  # keeps mtimes: the old partitions stay valid for the old rules
        return root

    def start(self, trial: Trial, root: Path) -> subprocess.Popen:
        args = ["RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(STOP)]
        args += ["--local-scheduler", "--no-lock", "--workers", str(trial.workers)]
        cfg = self.config(trial.name, NEW_RULES, root)
        env = {
            **os.environ,
            "LUIGI_CONFIG_PATH": str(cfg),
            "TMPDIR": str(self.tmp),
        }  # a killed run's temp files stay here
        if trial.at:
            plan = {"counter": str(self.tmp / f"{trial.name}.steps"), "root": str(root), "at": trial.at}
            plan["date"] = trial.date and str(trial.date)
            env["CRASH_PLAN"] = json.dumps({**plan, "mode": trial.mode, "truncate": trial.truncate})
            cmd = [sys.executable, str(REPO / "tests" / "crash_driver.py"), *args]
        else:
            cmd = [sys.executable, "-m", "luigi", "--module", "tasks", *args]
        return subprocess.Popen(
            cmd, env=env, cwd=self.tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )

    def mid_write_steps(self, trial: Trial) -> dict[dt.date, int]:
        """From a run without a crash: per date, how many of its partition's write steps come before
        the write is over (up to its last rename; a crash before that call leaves it unfinished)."""
        lines = (self.tmp / f"{trial.name}.steps").read_text().splitlines()
        out = {}
        for d in DATES:
            mine = [line.split(" ", 1)[0] for line in lines if f"business_date={d}" in line]
            out[d] = max(i for i, kind in enumerate(mine, 1) if kind in ("rename", "replace"))
        return out


def being_written(root: Path) -> set[dt.date]:
    """Dates whose partition write is under way: a temporary entry in its folder, or its staging folder."""

    def names(folder: Path) -> list[str]:
        try:
            return os.listdir(folder)
        except FileNotFoundError:
            return []

    staging = names(root / "_state" / "staging")
    return {
        d
        for d in DATES
        if any(".tmp-" in n for n in names(root / DATASET / f"business_date={d}"))
        or any(f"business_date={d}.tmp-" in n for n in staging)
    }


def first_write(proc: subprocess.Popen, root: Path) -> None:
    """Wait until a partition write of the run is seen (or the run ends)."""
    while proc.poll() is None and not being_written(root):
        time.sleep(0.0005)


def write_starts(proc: subprocess.Popen, root: Path) -> list[float]:
    """Watch a run to its end; the times at which each partition's write was first seen."""
    seen, times = set(), []
    while proc.poll() is None:
        if new := being_written(root) - seen:
            seen |= new
            times.append(time.perf_counter())
        time.sleep(0.0005)
    return times


def group_stopped(pgid: int) -> bool:
    """Whether every process of process group ``pgid`` is stopped (or gone)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in "TtZX":
            return False
    return True


def kill_during_a_write(proc: subprocess.Popen, root: Path, delay: float) -> set[dt.date]:
    """SIGKILL the run (Luigi and its task processes) while a partition write is under way, ``delay``
    after its first write or at the first write after that: the run is frozen (SIGSTOP) and killed only
    if a write is still under way, else resumed until the next one. Returns the dates being written
    when it was killed; empty when the run ended first."""
    first_write(proc, root)
    time.sleep(delay)
    while True:
        first_write(proc, root)
        if proc.poll() is not None:
            return set()
        os.killpg(proc.pid, signal.SIGSTOP)
        while not group_stopped(proc.pid):
            time.sleep(0.0005)
        if writing := being_written(root):
            os.killpg(proc.pid, signal.SIGKILL)
            return writing
        os.killpg(proc.pid, signal.SIGCONT)


def use(root: Path, rules: dict) -> None:
    """Point this process's Luigi config at data root ``root`` and [qsr] ``rules`` (undone after each
    test by the lab fixture and :func:`restore_rules`)."""
    cfg = luigi.configuration.get_config()
    cfg.set("daybreak", "data_root", str(root))
    for key, value in rules.items():
        cfg.set("qsr", key, str(value))


def build_in_process(lab, root: Path, rules: dict) -> int:
    """A normal RangeDaily backfill of the range, in this process, into ``root``."""
    use(root, rules)
    return lab.range(START, STOP)


@pytest.fixture(autouse=True)
def restore_rules(lab):
    yield
    reload_config()


@pytest.fixture
def bench(lab, tmp_path):
    return Bench(lab, tmp_path)


# -- kill -9 ------------------------------------------------------------------------------------------
def test_kill_9_at_random_write_steps_never_leaves_a_torn_partition(bench):
    old_data = tables(bench.old)
    # clean reference builds, through the crash driver with no crash point: they list each partition's
    # write steps, and time the write phase (first write seen .. last write started) for the luigi kills
    steps, write_phase = {}, {}
    for scenario in ("fresh", "rebuild"):
        ref = Trial(f"ref-{scenario}", scenario, 1, at=10**9)
        root = bench.data_root(ref)
        proc = bench.start(ref, root)
        starts = write_starts(proc, root)
        assert proc.wait() == 0, proc.stderr.read()[-2000:]
        write_phase[scenario] = starts[-1] - starts[0]  # from the first write to the start of the last
        steps[scenario] = bench.mid_write_steps(ref)
    new_data, new_manifests = tables(bench.tmp / "ref-fresh"), manifests(bench.tmp / "ref-fresh")
    assert sorted(new_data) == DATES and new_data != old_data
    assert tables(bench.tmp / "ref-rebuild") == new_data and manifests(bench.tmp / "ref-rebuild") == new_manifests

    rng = random.Random(SEED)
    trials = []
    for i in range(TRIALS):
        scenario, workers = ("fresh", "rebuild")[i % 2], 1 + (i // 2) % 2
        mode = rng.choice(["kill", "killgroup"]) if workers == 2 else "kill"
        date = rng.choice(DATES)
        at = rng.randint(1, steps[scenario][date])  # any step before the partition's write is over
        trials.append(Trial(f"t{i:02d}", scenario, workers, at, mode, round(rng.random(), 2), date=date))
    results = []
    for pair in (trials[i : i + 2] for i in range(0, len(trials), 2)):  # two at a time: two cores
        roots = [bench.data_root(t) for t in pair]
        procs = [bench.start(t, r) for t, r in zip(pair, roots, strict=True)]
        for trial, root, proc in zip(pair, roots, procs, strict=True):
            proc.wait()
            results.append(check_trial(bench, trial, root, proc, old_data, new_data, new_manifests))
    for i in range(LUIGI_KILLS):  # one at a time: the delay counts from the run's first write
        scenario, workers = ("fresh", "rebuild")[i % 2], 1 + (i // 2) % 2
        delay = round(rng.uniform(0, write_phase[scenario] / 2), 4)
        for attempt in range(3):  # the run may end before a write is caught after the delay: then none
            trial = Trial(f"k{i:02d}-{attempt}", scenario, workers, delay=delay if attempt == 0 else 0.0)
            root = bench.data_root(trial)
            proc = bench.start(trial, root)
            writing = kill_during_a_write(proc, root, trial.delay)  # kill -9 of Luigi and its task processes
            proc.wait()
            if writing:
                break
        assert writing, f"{trial}: no write was ever caught under way"
        results.append(check_trial(bench, trial, root, proc, old_data, new_data, new_manifests, writing))
    summary = "\n".join(results)
    print(f"\nmid-write steps per date: {steps}\n{summary}")
    assert any("leftovers" in r and "leftovers 0" not in r for r in results), "no trial left a temporary behind"


def check_trial(bench, trial, root, proc, old_data, new_data, new_manifests, writing=frozenset()) -> str:
    """The checks of one crashed run; returns a one-line account. ``writing``: the dates a luigi kill
    caught being written."""
    where = f"{trial} (rc {proc.returncode}): {proc.stderr.read()[-1500:]}"
    # (a) every partition reads whole, with the old or the new content, never a mix
    data = tables(root)
    for d, rows in data.items():
        assert rows == new_data[d] or (trial.scenario == "rebuild" and rows == old_data[d]), f"{d} mixed: {where}"
    # (d) leftovers are hidden from every reader, and never look like data
    left = leftovers(root)
    assert all(p.name.startswith(".") and not p.name.endswith(".parquet") for p in left), left
    assert_readers_see_exactly(root, data)
    # (b) a partition is complete only when its write finished (the new data with its new manifest)
    states = states_under(root)
    finished = manifests(root)
    for d in DATES:
        if states[d]:
            assert data[d] == new_data[d] and finished[d] == new_manifests[d], f"{d} complete but unfinished: {where}"
    incomplete = [d for d in DATES if not states[d]]
    # (e) the kill landed mid-write: the partition being written is not complete; a task process killed
    # alone (two workers, `kill`) fails its task and Luigi finishes the others, else the whole run died
    if trial.date:
        alone = trial.workers == 2 and trial.mode == "kill"
        assert (incomplete == [trial.date]) if alone else (trial.date in incomplete), where
        assert proc.returncode == (30 if alone else -signal.SIGKILL), where
    else:
        assert writing <= set(incomplete) and proc.returncode == -signal.SIGKILL, where
    # (c) one normal backfill restores exactly the reference build, and sweeps every leftover
    assert bench.build_in_process(root, NEW_RULES) == 0, where
    assert tables(root) == new_data and manifests(root) == new_manifests, where
    assert all(states_under(root).values()), where
    assert leftovers(root) == [], f"not swept: {leftovers(root)} {where}"
    kill = (
        f"{trial.date} step {trial.at} {trial.mode} truncate {trial.truncate}"
        if trial.at
        else f"luigi killed writing {sorted(d.day for d in writing)}, {trial.delay * 1000:.1f} ms after its first write"
    )
    return (
        f"{trial.name} {trial.scenario} w{trial.workers} {kill}: rc {proc.returncode}, "
        + (f"incomplete {[d.day for d in incomplete]}" if incomplete else "all finished")
        + f", leftovers {len(left)}"
    )


def states_under(root: Path) -> dict[dt.date, bool]:
    """complete() of each date, checked in this process against ``root`` with the new rules."""
    use(root, NEW_RULES)
    out = {d: StgQsrPos(date=d).complete() for d in DATES}
    assert out == {d: StgQsrPos(date=d).state(Engine()).ok for d in DATES}
    return out


def wait_stopped(proc: subprocess.Popen, marker: Path) -> None:
    for _ in range(3000):
        if marker.exists() and Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T":
            return
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        time.sleep(0.01)
    raise AssertionError("the writer never paused")


@pytest.mark.parametrize("scenario", ["fresh", "rebuild"])
def test_a_paused_writers_temporaries_survive_another_runs_sweep(bench, scenario, setting):
    """A writer stopped (SIGSTOP) right after writing its first temporary file is alive: a whole
    backfill of the same range, which sweeps the same folders, keeps its temporaries, and once
    resumed the writer finishes its own run cleanly."""
    trial = Trial(f"live-{scenario}", scenario, 1, at=1, mode="stop", date=DATES[1])
    root = bench.data_root(trial)
    proc = bench.start(trial, root)
    try:
        wait_stopped(proc, bench.tmp / f"{trial.name}.steps.stopped")
        paused = leftovers(root)
        assert paused, "the paused writer has no temporary file"
        # the paused writer holds its partition's lock: the other backfill builds every other date,
        # sweeping the shared folders, and gives up on that one after [daybreak] lock_wait_s
        setting("daybreak", "lock_wait_s", 1)
        assert bench.build_in_process(root, NEW_RULES) == 30
        assert set(paused) <= set(leftovers(root)), "the sweep removed a live writer's temporaries"
        busy = [d for d, ok in states_under(root).items() if not ok]
        assert busy == [trial.date]  # only the paused writer's partition is not complete yet
        error = StgQsrPos(date=trial.date).store().read_failure(trial.date)["error"]
        assert f"pid {proc.pid} on " in error and "has been writing it for over 1 s" in error, error
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    assert proc.wait() == 0, proc.stderr.read()[-2000:]
    assert leftovers(root) == []
    assert all(states_under(root).values())
    bench.build_in_process(bench.tmp / "reference", NEW_RULES)
    assert tables(root) == tables(bench.tmp / "reference")


# -- disk full ----------------------------------------------------------------------------------------
def fill(path: Path) -> None:
    """Write ``path`` until the filesystem has no page left."""
    with open(path, "wb", buffering=0) as fh:
        for chunk in (1 << 20, 1 << 12):
            try:
                while True:
                    fh.write(b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc


@pytest.mark.parametrize(
    "room, fails_on",
    [(0, "data.parquet"), (1, "_store_totals.arrow"), (2, "_manifest.json")],
    ids=["data", "extra", "manifest"],
)
def test_a_full_disk_fails_the_rewrite_cleanly_and_keeps_the_previous_partitions(
    lab, tmp_path, small_disk, room, fails_on
):
    """``room``: pages left free, enough for none, one or two of a partition's files (data.parquet, then
    _store_totals.arrow, each under 4 KiB here; the manifest last)."""
    lab.qsr_days(START, DAYS)
    data = small_disk / "data"

    def run(rules: dict, start: dt.date = START) -> subprocess.CompletedProcess:
        roots = {"raw_root": lab.raw, "data_root": data}
        cfg = write_config(tmp_path / "run.cfg", {"daybreak": roots, "qsr": rules})
        args = ["RangeDaily", "--of", "StgQsrPos", "--start", str(start), "--stop", str(STOP), "--local-scheduler"]
        # INFO: Luigi's report of each failed task (the default output summarises them)
        return lab.cli(*args, "--no-lock", "--log-level", "INFO", env={"LUIGI_CONFIG_PATH": str(cfg)})

    assert run(OLD_RULES, START + dt.timedelta(days=1)).returncode == 0  # the first date stays new
    before = {p: p.read_bytes() for p in (data / DATASET).rglob("*") if p.is_file()}
    before_stat = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in before}
    old = tables(data)
    fill(small_disk / "filler")
    os.truncate(small_disk / "filler", (small_disk / "filler").stat().st_size - room * 4096)

    failed = run(NEW_RULES)  # rewrites two partitions, creates one: every write hits ENOSPC
    log = failed.stderr
    assert failed.returncode == 30, log[-3000:]
    # each partition fails on one file, nothing replaced: with `room` pages free, the first files of the
    # first partition Luigi runs (whichever date that is) fit and the next one (`fails_on`) does not; the
    # pages then go to its failure record and the later partitions' files, until they fail on a data file
    failed_on = {
        dt.date.fromisoformat(date): name
        for date, name in re.findall(
            r"staging/qsr_pos business_date=(\S+): could not write the partition: no space left on device "
            r"\(\[Errno 28\] [^;]*; while writing (\S+)\)\. Nothing was replaced: the "
            r"previous partition, if any, is kept",
            log,
        )
    }
    first = dt.date.fromisoformat(re.findall(r"running +StgQsrPos\(date=(\S+)\)", log)[0])
    assert set(failed_on) == set(DATES) and failed_on[first] == fails_on, log[-3000:]
    assert {failed_on[d] for d in DATES if d != first} <= {"data.parquet", "_store_totals.arrow"}, log[-3000:]
    assert "data.parquet" in failed_on.values(), log[-3000:]
    assert "could not record the failure" in log  # the failure record hit the full disk too, and hid nothing
    # the only tracebacks are Luigi's report of each failed task: the OSError, then the error naming it
    errors = [line for line in log.splitlines() if line.startswith("ERROR:")]
    assert len(errors) == 3 and all(" failed    StgQsrPos(date=" in line for line in errors), errors
    assert log.count("Traceback (most recent call last)") == 2 * len(errors), log[-3000:]
    assert "unhandled" not in log.lower() and "Uncaught" not in log
    # the previous partitions are intact and still complete under the rules they were built with
    assert {p: p.read_bytes() for p in (data / DATASET).rglob("*") if p.is_file()} == before
    assert {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in before} == before_stat
    assert tables(data) == old and sorted(old) == DATES[1:]
    assert leftovers(data) == [] and os.listdir(data / "_state" / "staging") == []
    use(data, OLD_RULES)
    assert [StgQsrPos(date=d).complete() for d in DATES] == [False, True, True]

    (small_disk / "filler").unlink()
    assert run(NEW_RULES).returncode == 0  # once space is freed, a rerun rebuilds all three
    assert leftovers(data) == [] and not any((data / "_state" / "failures").rglob("*.json"))
    reference = tmp_path / "reference"
    assert build_in_process(lab, reference, NEW_RULES) == 0
    assert tables(data) == tables(reference) != old
