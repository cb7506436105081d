"""Several hosts on one bucket (a real radosgw, tests/radosgw.py), with and without one luigid (a real one,
``daybreak scheduler``): each partition built once, equal to a local build, nothing lost when a host
freezes, dies, or the store restarts. docs/scale-out.md.

A host is a process of its own: its own working directory, HOME, TMPDIR and cache folder, the raw zone
in the bucket (a landing prefix), the data root in the bucket."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasks.settings import write_config
from tests import radosgw
from tests.conftest import QSR_HEADER, REPO, qsr_rows
from tests.sshd import free_port

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(not radosgw.installed(), reason=f"radosgw not installed ({radosgw.INSTALL})"),
]

START = dt.date(2026, 9, 1)
DAY = dt.timedelta(days=1)
DATES = 10


class Site:
    """A bucket with a landing prefix (the raw zone) and the data root, and hosts that share it."""

    def __init__(self, lab, rgw):
        self.lab, self.rgw = lab, rgw
        self.s3 = rgw.client()
        self.bucket = rgw.make_bucket(f"site-{uuid.uuid4().hex[:10]}")
        self.raw_uri, self.data_uri = f"s3://{self.bucket}/landing", f"s3://{self.bucket}/lake"
        self.scheduler_port: int | None = None

    def land(self, days: int = DATES) -> None:
        """Folders START .. START+days in the lab (for the local build) and in the landing prefix. Partition
        d: S001's 4 lines, 12 more COLA x3 lines, S002's 4 lines and one rejected line (qty abc)."""
        lab = self.lab
        for i in range(days + 1):
            d = START + i * DAY
            cola = qsr_rows("S001", d)[2]
            bad = f"S002-{d}-X,1,S002,{d}T12:30:00-04:00,BURGER,abc,6.50,,COMPLETED"
            lab.qsr_file(
                d.isoformat(), "S001", [*qsr_rows("S001", d), *(cola.replace("-B,", f"-B{k},") for k in range(12))]
            )
            lab.qsr_file(d.isoformat(), "S002", [*qsr_rows("S002", d), bad])
        for path in sorted(lab.raw.rglob("*.csv")):
            key = f"landing/{path.relative_to(lab.raw)}"
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=path.read_bytes())

    def config(self, name: str, age: float = 0, **qsr) -> tuple[Path, Path]:
        """(folder, luigi.cfg) of host ``name``, its settings changed ``age`` seconds ago."""
        home = self.lab.root / "hosts" / name
        (home / "tmp").mkdir(parents=True, exist_ok=True)
        sections = {
            "daybreak": {"raw_root": self.raw_uri, "data_root": self.data_uri, "cache_dir": home / "cache"},
            "s3": {"endpoint_url": self.rgw.endpoint_url, "region": self.rgw.region, "lease_seconds": 3},
            "qsr": qsr,
        }
        if self.scheduler_port is not None:
            sections["core"] = {"scheduler_host": "127.0.0.1", "scheduler_port": self.scheduler_port}
        cfg = write_config(home / "luigi.cfg", sections)
        if age:
            os.utime(cfg, (time.time() - age,) * 2)
        return home, cfg

    def env(self, home: Path, cfg: Path) -> dict[str, str]:
        return {
            **os.environ, "HOME": str(home), "TMPDIR": str(home / "tmp"), "LUIGI_CONFIG_PATH": str(cfg),
            "AWS_ACCESS_KEY_ID": self.rgw.access_key, "AWS_SECRET_ACCESS_KEY": self.rgw.secret_key,
            "PYTHONPATH": str(REPO),
        }  # fmt: skip

    def host(self, name: str, *args: str, plan: dict | None = None, age: float = 0, **qsr) -> subprocess.Popen:
        """``luigi --module tasks <args>`` as host ``name`` (through tests/s3_driver.py with a plan), its
        settings changed ``age`` seconds ago."""
        home, cfg = self.config(name, age, **qsr)
        env = self.env(home, cfg)
        if plan is not None:
            env["S3_PLAN"] = json.dumps(plan)
            cmd = [sys.executable, str(REPO / "tests" / "s3_driver.py"), *args]
        else:
            cmd = [sys.executable, "-m", "luigi", "--module", "tasks", *args]
        out = open(home / "out.txt", "a")
        return subprocess.Popen(cmd, cwd=home, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def range_args(self, days: int = DATES, *extra: str) -> list[str]:
        return ["RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + days * DAY), *extra]

    def scheduler(self, **settings) -> subprocess.Popen:
        """``daybreak scheduler`` (luigid with SQLite task history) on a port of its own."""
        self.scheduler_port = free_port()
        home, cfg = self.config("luigid")
        if settings:
            text = cfg.read_text() + "\n[scheduler]\n" + "".join(f"{k} = {v}\n" for k, v in settings.items())
            cfg.write_text(text)
        code = f"from tasks.cli import main; main(['scheduler', '--port', '{self.scheduler_port}'])"
        server = subprocess.Popen(
            [sys.executable, "-c", code], cwd=home, env=self.env(home, cfg), stdout=subprocess.DEVNULL,
            stderr=open(home / "luigid.err", "w"),
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.scheduler_port)) == 0:
                    return server
            time.sleep(0.1)
        raise RuntimeError((home / "luigid.err").read_text())

    def history(self) -> Path:
        return next((self.lab.root / "hosts" / "luigid" / "cache").rglob("history.db"))

    def objects(self, prefix: str = "lake/") -> dict[str, str]:
        """{key: ETag} under ``prefix``, but the caches a check or a build may write whoever wins the commit:
        the manifest summaries, and the checked raw folders (a frozen host resumed stores the folder it had
        checked: the next reader's, whatever the rules)."""
        out = {}
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            out.update(
                {
                    o["Key"]: o["ETag"]
                    for o in page.get("Contents", ())
                    if "/_state/summaries/" not in o["Key"] and "/_state/checked/" not in o["Key"]
                }
            )
        return out

    def tables(self, prefix: str) -> dict[str, list]:
        """Every Parquet object under ``prefix`` of the bucket (partitions or quarantines), by folder, rows."""
        out = {}
        for key in self.objects(prefix):
            if key.endswith(".parquet"):
                table = pq.read_table(io.BytesIO(self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()))
                out[key.removeprefix(prefix).rsplit("/", 1)[0]] = _rows(table)
        return out

    def rules_of(self, date: dt.date) -> dict:
        key = f"lake/staging/qsr_pos/business_date={date}/_manifest.json"
        return json.loads(self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())["rules"]

    def committed_with(self, threshold: int) -> list[dt.date]:
        """The staging dates committed with this ``suspicious_qty_threshold``."""
        keys = [k for k in self.objects("lake/staging/qsr_pos/") if k.endswith("/_manifest.json")]
        dates = [dt.date.fromisoformat(k.split("business_date=")[1].split("/")[0]) for k in keys]
        return [d for d in dates if self.rules_of(d)["suspicious_qty_threshold"] == threshold]

    def local_build(self, setting, **qsr) -> Path:
        """The same raw zone built locally, with one process (the reference)."""
        root = self.lab.root / "local"
        setting("daybreak", "data_root", root)
        for key, value in qsr.items():
            setting("qsr", key, value)
        assert self.lab.range(START, START + DATES * DAY) == 0
        return root


def _rows(table) -> list:
    return table.sort_by([(c, "ascending") for c in table.column_names if c != "row_number"][:4]).to_pylist()


def local_tables(root: Path, prefix: str) -> dict[str, list]:
    return {
        str(p.parent.relative_to(root / prefix)): _rows(pq.read_table(p))
        for p in sorted((root / prefix).rglob("*.parquet"))
    }


def log(site, name: str) -> str:
    return (site.lab.root / "hosts" / name / "out.txt").read_text()[-3000:]


def wait(procs: list[subprocess.Popen], timeout: float = 240) -> list[int]:
    return [p.wait(timeout=timeout) for p in procs]


@pytest.fixture
def site(lab, rgw):
    return Site(lab, rgw)


def documented_worker_command() -> list[str]:
    """The worker command docs/scale-out.md gives, as written (without ``luigi --module tasks``)."""
    text = (REPO / "docs" / "scale-out.md").read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if x.startswith("luigi --module tasks RangeDaily"))
    args = shlex.split(line)[3:]
    assert args[args.index("--start") + 1] == str(START) and args[args.index("--stop") + 1] == str(START + DATES * DAY)
    return args


def test_three_hosts_on_one_luigid_build_each_partition_once_and_equal_a_local_build(site, setting):
    """The worker command of docs/scale-out.md, as written, on three hosts at once."""
    site.land()
    server = site.scheduler()
    try:
        hosts = [site.host(f"h{k}", *documented_worker_command()) for k in range(3)]
        assert wait(hosts) == [0, 0, 0], [
            (site.lab.root / "hosts" / f"h{k}" / "out.txt").read_text()[-3000:] for k in range(3)
        ]
        running = (
            sqlite3.connect(site.history())
            .execute(
                "select p.value, count(*) from task_events e join tasks t on e.task_id = t.id "
                "join task_parameters p on p.task_id = t.id and p.name = 'date' "
                "where t.name = 'StgQsrPos' and e.event_name = 'RUNNING' group by p.value"
            )
            .fetchall()
        )
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert sorted(running) == [(str(START + i * DAY), 1) for i in range(DATES)]
    local = site.local_build(setting)
    assert site.tables("lake/staging/qsr_pos/") == local_tables(local, "staging/qsr_pos")
    assert site.tables("lake/quarantine/staging/qsr_pos/") == local_tables(local, "quarantine/staging/qsr_pos")


def test_three_hosts_with_local_schedulers_at_once_equal_a_local_build_and_a_rerun_changes_nothing(site, setting):
    site.land()
    hosts = [site.host(f"h{k}", *site.range_args(DATES, "--local-scheduler")) for k in range(3)]
    codes = wait(hosts)
    # 10: a host whose build lost its commit to another (the fence)
    assert set(codes) <= {0, 10}, (codes, [log(site, f"h{k}") for k in range(3)])
    stored = site.objects()
    local = site.local_build(setting)
    assert site.tables("lake/staging/qsr_pos/") == local_tables(local, "staging/qsr_pos")
    assert site.tables("lake/quarantine/staging/qsr_pos/") == local_tables(local, "quarantine/staging/qsr_pos")
    parquet = [k for k in stored if k.endswith(".parquet") and "/_state/" not in k]
    assert len(parquet) == len(list(local.rglob("*.parquet"))) == 2 * DATES
    again = site.host("h0", *site.range_args(DATES, "--local-scheduler"))
    assert wait([again]) == [0]
    assert site.objects() == stored


def test_a_frozen_host_cannot_replace_what_another_host_committed(site, setting):
    """Host A (old rules) freezes mid-build of one date, holding its lease; host B (new rules) takes the
    lease over once it expired and builds the whole range while A is frozen; A resumes: its commit is
    refused (another writer committed), it exits 10, and every partition holds B's rules."""
    site.land()
    # luigid: notices a frozen worker in 2 s (not 60), retries its task after 1 s; a task a host with other
    # rules finds incomplete is handed out at once, not after luigid's 10 s "stable done" cooldown
    server = site.scheduler(
        worker_disconnect_delay=2, retry_delay=1, prune_on_get_work="true", stable_done_cooldown_secs=0
    )
    frozen = START + 3 * DAY
    counter = site.lab.root / "a-steps"
    try:
        a = site.host(
            "a", *site.range_args(), plan={"counter": str(counter), "date": str(frozen), "at": 2, "mode": "stop"}
        )
        deadline = time.monotonic() + 120
        while not Path(f"{counter}.stopped").exists():
            assert time.monotonic() < deadline and a.poll() is None
            time.sleep(0.1)
        b = site.host("b", *site.range_args(DATES, "--worker-keep-alive"), suspicious_qty_threshold=2)
        assert wait([b]) == [0], log(site, "b")
        assert all(site.rules_of(START + i * DAY)["suspicious_qty_threshold"] == 2 for i in range(DATES))
        after_b = site.objects()
        os.killpg(a.pid, signal.SIGCONT)
        assert wait([a]) == [10], log(site, "a")
        assert "another writer committed staging/qsr_pos" in (site.lab.root / "hosts" / "a" / "out.txt").read_text()
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert site.objects() == after_b  # A wrote nothing after B
    rerun = site.host("b", *site.range_args(DATES, "--local-scheduler"), suspicious_qty_threshold=2)
    assert wait([rerun]) == [0]
    assert site.objects() == after_b


def test_a_host_killed_mid_build_is_taken_over_after_its_lease(site, setting):
    site.land()
    counter = site.lab.root / "steps"
    dead = site.host(
        "a", *site.range_args(DATES, "--local-scheduler"),
        plan={"counter": str(counter), "date": str(START + 5 * DAY), "at": 2, "mode": "kill"},
    )  # fmt: skip
    assert wait([dead]) == [-signal.SIGKILL]
    t0 = time.monotonic()
    rerun = site.host("b", *site.range_args(DATES, "--local-scheduler"))
    assert wait([rerun]) == [0], log(site, "b")
    assert time.monotonic() - t0 < 60
    local = site.local_build(setting)
    assert site.tables("lake/staging/qsr_pos/") == local_tables(local, "staging/qsr_pos")


def test_a_host_killed_mid_build_on_luigid_is_taken_over_by_the_host_waiting_for_it(site, setting):
    """Host A is killed (SIGKILL) mid-build of one date while host B, on the same luigid, has built the rest
    and waits for it. luigid notices A gone after worker_disconnect_delay and fails its task (for
    [scheduler] retry_delay, 900 s by default); B puts it back in the pool, builds it and exits 0."""
    site.land()
    server = site.scheduler(worker_disconnect_delay=3, prune_on_get_work="true")  # retry_delay: luigid's own
    held = START + 3 * DAY
    counter = site.lab.root / "a-steps"
    try:
        plan = {"counter": str(counter), "date": str(held), "at": 2, "mode": "hold"}
        a = site.host("a", *site.range_args(), plan=plan)
        deadline = time.monotonic() + 120
        while not Path(f"{counter}.stopped").exists():
            assert time.monotonic() < deadline and a.poll() is None, log(site, "a")
            time.sleep(0.1)
        t0 = time.monotonic()
        b = site.host("b", *site.range_args())
        others = {f"lake/staging/qsr_pos/business_date={START + i * DAY}/_manifest.json" for i in range(DATES)}
        others.discard(f"lake/staging/qsr_pos/business_date={held}/_manifest.json")
        while not others <= set(site.objects()):  # B has built every other date: it waits for A's
            assert time.monotonic() < deadline and b.poll() is None, log(site, "b")
            time.sleep(0.2)
        os.killpg(a.pid, signal.SIGKILL)
        assert wait([a]) == [-signal.SIGKILL]
        assert wait([b], timeout=60) == [0], log(site, "b")
        assert time.monotonic() - t0 < 60
    finally:
        server.terminate()
        server.wait(timeout=10)
    out = log(site, "b")
    assert f"StgQsrPos {held}: the host building it disconnected from luigid" in out
    # said as the task is put back, before its lease: that this host runs it, not that it builds it (a build
    # of the lost host's task process, still alive, or of another host waiting for it may commit first)
    warning = next(line for line in out.splitlines() if "disconnected from luigid" in line)
    assert "this host runs it again" in warning and "this host builds it" not in warning
    assert "unless another build commits first" in warning and "the lost host" not in warning, warning
    assert "not run" not in out and "daybreak status shows every partition" not in out  # a clean summary
    local = site.local_build(setting)
    assert site.tables("lake/staging/qsr_pos/") == local_tables(local, "staging/qsr_pos")


def test_a_partition_luigid_disabled_when_its_host_was_killed_is_named_with_that_reason(site):
    """As above, with luigid's [scheduler] retry_count 1: the failure luigid counts when it loses host A
    disables the task, which host B cannot put back. B's summary says why, not that a partition it reads
    failed."""
    site.land(3)
    server = site.scheduler(worker_disconnect_delay=3, prune_on_get_work="true", retry_count=1)
    held = START + DAY
    counter = site.lab.root / "a-steps"
    try:
        plan = {"counter": str(counter), "date": str(held), "at": 2, "mode": "hold"}
        a = site.host("a", *site.range_args(3), plan=plan)
        deadline = time.monotonic() + 120
        while not Path(f"{counter}.stopped").exists():
            assert time.monotonic() < deadline and a.poll() is None, log(site, "a")
            time.sleep(0.1)
        b = site.host("b", *site.range_args(3))
        others = {f"lake/staging/qsr_pos/business_date={START + i * DAY}/_manifest.json" for i in (0, 2)}
        while not others <= set(site.objects()):
            assert time.monotonic() < deadline and b.poll() is None, log(site, "b")
            time.sleep(0.2)
        os.killpg(a.pid, signal.SIGKILL)
        code = wait([a, b], timeout=60)[1]
    finally:
        server.terminate()
        server.wait(timeout=10)
    out = log(site, "b")
    assert code == 25, out
    assert (
        f"not run  StgQsrPos {held} (the host building it disconnected from luigid mid-build, and luigid disabled "
        "it: [scheduler] retry_count; re-enable it in luigid's visualiser, then rerun)"
    ) in out
    assert "a partition it reads failed" not in out


def test_the_store_going_away_mid_run_fails_the_run_and_keeps_the_other_partitions(site, setting):
    """A rebuild with new rules; the store stops answering during the commit of one date. That date fails
    (its manifest still names the old objects: stale, never a mix that counts), the run exits 30, every
    partition it had not reached is byte-identical, and a rerun after the store is back completes. What
    the run prints: its progress (the failures counted apart), one line naming the store, and Daybreak's
    summary, made from what the run recorded (the store cannot be asked): never Luigi's, nor a traceback."""
    site.land()
    first = site.host("a", *site.range_args(DATES, "--local-scheduler"))
    assert wait([first]) == [0]
    before = site.objects()
    counter = site.lab.root / "steps"
    at = START + 4 * DAY
    run = site.host(
        "a", *site.range_args(DATES, "--local-scheduler"), suspicious_qty_threshold=2,
        plan={"counter": str(counter), "date": str(at), "at": 2, "mode": "stop"},
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not Path(f"{counter}.stopped").exists():
        assert time.monotonic() < deadline and run.poll() is None
        time.sleep(0.1)
    site.rgw._kill("rgw")  # the store goes away
    os.killpg(run.pid, signal.SIGCONT)
    assert wait([run]) == [30], log(site, "a")
    out = (site.lab.root / "hosts" / "a" / "out.txt").read_text()
    ended = out[out.rindex("progress: 1/") :]  # the second run's output
    the_store = f"the object store (endpoint {site.rgw.endpoint_url}, bucket {site.bucket}) failed during the run"
    assert [x for x in ended.splitlines() if x.startswith("daybreak: error:")] == [
        f"daybreak: error: {the_store} (EndpointConnectionError): the partitions it failed are kept as they were, "
        "or stale where it stopped mid-commit; rerun the same command once it answers"
    ], ended
    assert "Traceback" not in ended and "Luigi Execution Summary" not in ended and "no Daybreak summary" not in ended
    summary = ended[ended.index("daybreak: error:") :].splitlines()
    assert summary[1].startswith("INFO: summary of this run: "), ended
    assert summary[2] == f"  StgQsrPos {START} .. {START + (DATES - 1) * DAY}: 4 ran, 6 failed", ended
    assert "progress: 10/10 partitions (100%), 4 built, 6 failed" in ended, ended
    assert len(ended.splitlines()) <= 10 + 1 + 2 + 6 + 1, ended  # progress, the error, the summary: nothing else
    site.rgw.restart()
    now = site.objects()
    untouched = [k for k in before if "/_state/" not in k and not any(f"={d}" in k for d in _reached(now, before))]
    assert untouched and all(now[k] == before[k] for k in untouched)
    again = site.host("a", *site.range_args(DATES, "--local-scheduler"), suspicious_qty_threshold=2)
    assert wait([again]) == [0]
    local = site.local_build(setting, suspicious_qty_threshold=2)
    assert site.tables("lake/staging/qsr_pos/") == local_tables(local, "staging/qsr_pos")


def _reached(now: dict, before: dict) -> set[str]:
    """Dates of the partitions a run changed (their objects' ETags differ)."""
    return {k.split("business_date=")[1][:10] for k in before if "business_date=" in k and now.get(k) != before[k]}


def test_a_host_that_luigid_keeps_from_a_partition_for_its_cooldown_is_told_so(site):
    """Host B (new rules) builds the range on luigid; host A (old rules) runs it at once: luigid counts the
    partitions done (another host, less than stable_done_cooldown_secs ago) and hands A none of them. A's
    summary says that is why they did not run, not that a partition they read failed or waits."""
    site.land(3)
    server = site.scheduler(stable_done_cooldown_secs=600)
    try:
        b = site.host("b", *site.range_args(3), suspicious_qty_threshold=2)
        assert wait([b]) == [0], log(site, "b")
        a = site.host("a", *site.range_args(3))
        assert wait([a]) == [25], log(site, "a")  # not run, as luigid kept it; not superseded (10)
    finally:
        server.terminate()
        server.wait(timeout=10)
    out = log(site, "a")
    assert f"StgQsrPos {START} .. {START + 2 * DAY}: 3 not run" in out
    assert "luigid counts it done by a run less than [scheduler] stable_done_cooldown_secs ago" in out
    assert "a partition it reads failed or waits" not in out


def test_a_host_on_older_settings_warns_once_per_partition_within_luigids_cooldown(site):
    """Host B (newer settings) builds two dates on luigid; host A (settings an hour older) runs three at once.
    luigid counts B's partitions done for its cooldown and hands A its range, which finds them missing and is
    scheduled again: each partition's "Not replaced" warning is still said once."""
    site.land(3)
    server = site.scheduler(stable_done_cooldown_secs=600)
    try:
        assert wait([site.host("b", *site.range_args(2), suspicious_qty_threshold=2)]) == [0], log(site, "b")
        a = site.host("a", *site.range_args(3), age=3600)
        assert wait([a]) == [10], log(site, "a")  # superseded: two left to the host on newer settings
    finally:
        server.terminate()
        server.wait(timeout=10)
    out = log(site, "a")
    warned = [line for line in out.splitlines() if line.startswith("WARNING:") and "Not replaced" in line]
    assert sorted(line.split(": ")[1] for line in warned) == [f"staging/qsr_pos {START + i * DAY}" for i in range(2)]


def test_a_host_on_old_rules_frozen_past_its_lease_cannot_undo_a_rollout_on_luigid(site):
    """Host A (old rules) and host B (new rules) on one luigid with its own settings; A freezes in the
    middle of its first commit, past its lease, until B has built the rest of the range. A's run exits 10,
    never writing over B's partitions (only the one it froze in is its own); one rerun of B converges,
    and the next changes nothing."""
    days = 8
    site.land(days)
    server = site.scheduler()
    counter = site.lab.root / "a-steps"
    try:
        a = site.host("a", *site.range_args(days), plan={"counter": str(counter), "date": "*", "at": 2, "mode": "stop"})
        deadline = time.monotonic() + 120
        while not Path(f"{counter}.stopped").exists():
            assert time.monotonic() < deadline and a.poll() is None, log(site, "a")
            time.sleep(0.1)
        stopped, deadline = time.monotonic(), time.monotonic() + 120
        b = site.host("b", *site.range_args(days), suspicious_qty_threshold=2)
        # A stays frozen until its lease (3 s) is long past and B has built every date but the one A holds
        while not (b.poll() is not None or len(site.committed_with(2)) >= days - 1) or time.monotonic() < stopped + 6:
            assert time.monotonic() < deadline, log(site, "b")
            time.sleep(0.1)
        os.killpg(a.pid, signal.SIGCONT)
        codes = wait([a, b])
    finally:
        server.terminate()
        server.wait(timeout=10)
    out = (site.lab.root / "hosts" / "a" / "out.txt").read_text()
    assert codes[0] == 10, out[-3000:]
    assert "Traceback" not in out and " failed" not in out.split("summary of this run:")[1], out[-3000:]
    old_rules = [i for i in range(days) if site.rules_of(START + i * DAY)["suspicious_qty_threshold"] == 20]
    assert len(old_rules) <= 1, old_rules  # A's first date at most: nothing B committed was replaced
    # 10: B's build of the date A froze in lost to A's commit; 25: A committed it, on its old rules, before B's
    # range ended: B names it not run, stale (built by another host; luigid counts it done), and its rerun below
    # rebuilds it
    assert codes[1] in (0, 10, 25), log(site, "b")
    if codes[1] == 25:
        not_run = [x for x in log(site, "b").splitlines() if x.startswith("  not run  ")]
        assert any(f"StgQsrPos {START + old_rules[0] * DAY}" in x and "stale" in x for x in not_run), not_run
    rerun = site.host("b", *site.range_args(days, "--local-scheduler"), suspicious_qty_threshold=2)
    assert wait([rerun]) == [0], log(site, "b")
    assert all(site.rules_of(START + i * DAY)["suspicious_qty_threshold"] == 2 for i in range(days))
    after = site.objects()
    assert wait([site.host("b", *site.range_args(days, "--local-scheduler"), suspicious_qty_threshold=2)]) == [0]
    assert site.objects() == after


@pytest.mark.parametrize("last", [4, DATES - 1], ids=["mid-run", "the-last-date"])
def test_a_partition_committed_just_before_the_store_went_away_is_reported_built(site, last):
    """The store stops right after the manifest of date ``last`` is written (its commit made): what
    follows the commit (the failure record's removal, what the engine learns of the manifest, the lease's
    release; for the last date, RangeDaily's check of the range) must not fail it. It is reported built,
    the dates after it failed, one line names the store, and no traceback is printed."""
    site.land()
    assert wait([site.host("a", *site.range_args(DATES, "--local-scheduler"))]) == [0]
    counter = site.lab.root / "steps"
    date = START + last * DAY
    run = site.host(
        "a", *site.range_args(DATES, "--local-scheduler"), suspicious_qty_threshold=2,
        plan={"counter": str(counter), "date": str(date), "at": 4, "mode": "stop", "after": True},
    )  # fmt: skip  # 4: data, store totals, quarantine, then the manifest
    deadline = time.monotonic() + 120
    while not Path(f"{counter}.stopped").exists():
        assert time.monotonic() < deadline and run.poll() is None
        time.sleep(0.1)
    site.rgw._kill("rgw")
    try:
        os.killpg(run.pid, signal.SIGCONT)
        code = wait([run])[0]
    finally:
        site.rgw.restart()  # for the next test, whatever happens in this one
    out = (site.lab.root / "hosts" / "a" / "out.txt").read_text()
    ended = out[out.rindex("progress: 1/") :]
    built, failed = last + 1, DATES - last - 1
    errors = [x for x in ended.splitlines() if x.startswith("daybreak: error:")]
    if failed or code != 0:  # at the last date nothing may need the store after the commit: exit 0, no error
        assert code == 30 and errors == [
            f"daybreak: error: the object store (endpoint {site.rgw.endpoint_url}, bucket {site.bucket}) failed "
            "during the run (EndpointConnectionError): the partitions it failed are kept as they were, or stale where "
            "it stopped mid-commit; rerun the same command once it answers"
        ], ended
    else:
        assert errors == [], ended
    kinds = f"{built} ran, {failed} failed" if failed else f"{built} ran"
    assert f"  StgQsrPos {START} .. {START + (DATES - 1) * DAY}: {kinds}\n" in ended, ended
    assert f"failed   StgQsrPos {date}" not in ended
    counts = f", {built} built, {failed} failed" if failed else ""
    assert f"progress: 10/10 partitions (100%){counts}," in ended, ended
    assert "Traceback" not in ended and "Luigi Execution Summary" not in ended
    assert site.rules_of(date)["suspicious_qty_threshold"] == 2  # committed, whole


def test_a_host_on_older_settings_leaves_a_stale_partition_in_the_bucket_to_the_newer_host(site):
    """Host "new" (suspicious_qty_threshold 15) built the range; a raw object re-sent to the landing prefix
    makes two partitions stale. "new" freezes at its first write; host "old" (20, settings an hour older) runs
    the range on the same luigid meanwhile. Before, luigid handed "old" the other stale partition, its build
    refused it (superseded), luigid marked it FAILED, and "new" exited 25 leaving it stale. Now "old" takes
    none of them (exit 10) and "new" builds both in the same run (exit 0)."""
    days = 4
    site.land(days)
    server = site.scheduler()
    counter = site.lab.root / "new-steps"
    try:
        assert wait([site.host("new", *site.range_args(days, "--local-scheduler"), suspicious_qty_threshold=15)]) == [0]
        assert site.committed_with(15) == [START + i * DAY for i in range(days)]
        before = site.objects("lake/staging/")
        day = START + 2 * DAY  # S002's object re-sent without its rejected line: START+1 and START+2 go stale
        body = "\n".join([QSR_HEADER, *qsr_rows("S002", day)]) + "\n"
        site.s3.put_object(Bucket=site.bucket, Key=f"landing/qsr_pos/{day}/S002.csv", Body=body.encode())
        plan = {"counter": str(counter), "date": "*", "at": 1, "mode": "stop"}
        new = site.host("new", *site.range_args(days), plan=plan, suspicious_qty_threshold=15)
        deadline = time.monotonic() + 60
        while not Path(f"{counter}.stopped").exists():
            assert time.monotonic() < deadline and new.poll() is None, log(site, "new")
            time.sleep(0.1)
        old = site.host("old", *site.range_args(days), age=3600)
        try:
            old.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        os.killpg(new.pid, signal.SIGCONT)
        codes = wait([new, old])
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert codes == [0, 10], log(site, "new") + log(site, "old")
    assert site.committed_with(15) == [START + i * DAY for i in range(days)]
    assert _reached(site.objects("lake/staging/"), before) == {str(START + DAY), str(START + 2 * DAY)}
    assert "a partition it reads failed or waits" not in log(site, "new") + log(site, "old")
    assert f"StgQsrPos {START} .. {START + (days - 1) * DAY}: {days} superseded" in log(site, "old")
