"""A rollout cannot be undone by a host left on old rules or old code (docs/scale-out.md, "A rollout"):
within one run a host never replaces a partition that another writer committed with other rules after the
run first looked at it, and no host replaces a partition that a newer version of the dataset's code built.
Both runs are exit 10 (superseded), and the partitions keep what the newer host wrote."""

from __future__ import annotations

import datetime as dt
import json

import luigi
import pytest

from tasks.freshness.rules import fingerprint
from tasks.qsr import StgQsrPos
from tasks.transforms.qsr_rules import VERSION
from tests.conftest import REPO

pytestmark = pytest.mark.luigi

START = dt.date(2026, 9, 1)
DAY = dt.timedelta(days=1)
DATES = 4


def _manifests(lab) -> dict[dt.date, dict]:
    root = lab.data / "staging" / "qsr_pos"
    return {
        dt.date.fromisoformat(p.parent.name.split("=")[1]): json.loads(p.read_text())
        for p in sorted(root.glob("business_date=*/_manifest.json"))
    }


@pytest.fixture
def old_and_new(lab, tmp_path):
    """(folder, old, new): the hosts' folder, and the luigi.cfg of a host on the default threshold (20), set an
    hour ago, and of a host that rolled out threshold 2 half an hour ago."""
    import os
    import time

    folder = tmp_path / "hosts"
    folder.mkdir()
    old = lab.write_cfg(tmp_path / "host-old.cfg")
    new = lab.write_cfg(tmp_path / "host-new.cfg", suspicious_qty_threshold=2)
    now = time.time()
    os.utime(old, (now - 3600, now - 3600))
    os.utime(new, (now - 1800, now - 1800))
    return folder, old, new


@pytest.fixture
def other_host_builds_first(lab, tmp_path):
    """When this process starts its first StgQsrPos build, another host (a ``luigi`` process of its own, on
    new rules: suspicious_qty_threshold 2) builds the whole range first."""
    cfg = lab.write_cfg(tmp_path / "host-b.cfg", suspicious_qty_threshold=2)
    args = ("RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + DATES * DAY))
    env = {"LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(REPO)}
    done = []

    @StgQsrPos.event_handler(luigi.Event.START)
    def _host_b(task):
        if not done:
            done.append(lab.cli(*args, "--local-scheduler", env=env))

    yield args, env, done
    StgQsrPos.remove_event_handler(luigi.Event.START, _host_b)


def test_a_host_on_old_rules_never_replaces_what_another_host_committed_since_its_run_began(
    lab, other_host_builds_first, caplog
):
    args, env, done = other_host_builds_first
    lab.qsr_days(START, DATES + 1)
    with caplog.at_level("INFO", logger="luigi-interface"):
        code = lab.range(START, START + DATES * DAY)  # host A: the old rules (threshold 20)
    out = caplog.text
    assert done and done[0].returncode == 0, done[0].stderr[-2000:]
    assert code == 10, out[-3000:]
    manifests = _manifests(lab)
    assert sorted(manifests) == [START + i * DAY for i in range(DATES)]
    assert {m["rules"]["suspicious_qty_threshold"] for m in manifests.values()} == {2}  # host B's, every one
    assert (
        f"another host committed staging/qsr_pos {START} (other rules: suspicious_qty_threshold 2 -> 20) "
        "since this run began; not replaced" in out
    )
    summary = out.split("summary of this run:")[1]
    assert f"StgQsrPos {START} .. {START + (DATES - 1) * DAY}: {DATES} superseded" in summary
    assert "  failed   " not in summary and " failed" not in summary.splitlines()[1]
    # host B, on the rules meant to stay, runs again: nothing to do, nothing changes
    again = lab.cli(*args, "--local-scheduler", env=env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert _manifests(lab) == manifests


def test_a_partition_built_by_a_newer_version_is_never_replaced_by_an_older_one(lab, caplog):
    lab.qsr_days(START, 2)
    assert lab.range(START, START + DAY) == 0
    manifest_path = lab.partition(START) / "_manifest.json"
    manifest = json.loads(manifest_path.read_text())
    name, number = VERSION.rsplit("/", 1)
    newer = f"{name}/{int(number) + 1}"
    manifest["rules"]["version"] = newer  # as a host with the next version of the code writes it
    manifest["rules_fingerprint"] = fingerprint(manifest["rules"])
    manifest_path.write_text(json.dumps(manifest))
    before = {p.name: p.read_bytes() for p in lab.partition(START).iterdir()}
    with caplog.at_level("INFO", logger="luigi-interface"):
        assert lab.range(START, START + DAY) == 10
    out = caplog.text
    assert (
        f"staging/qsr_pos {START}: built by version {newer}, newer than this host's {VERSION}: upgrade this host" in out
    )
    assert {p.name: p.read_bytes() for p in lab.partition(START).iterdir()} == before
    assert f"StgQsrPos {START}: 1 superseded" in out


def test_a_host_whose_settings_are_older_never_replaces_a_partition_built_under_newer_ones(
    lab, tmp_path, caplog, capsys
):
    """Before, a host left on an old luigi.cfg rebuilt, exit 0 and without a word, every partition a host on the
    new settings had built: two hosts on a daily timer flipped the partitions back and forth. The newest
    settings any partition of the dataset was built under decide, so a rollback holds for the partitions the
    rolling-back host did not rebuild too; a setting on the command line makes no host's settings newer."""
    import os
    import time

    from tasks.cli import main

    lab.qsr_days(START, DATES + 1)
    folder = tmp_path / "hosts"
    folder.mkdir()
    old = lab.write_cfg(tmp_path / "host-old.cfg")  # the default threshold, 20
    new = lab.write_cfg(tmp_path / "host-new.cfg", suspicious_qty_threshold=2)
    now = time.time()
    os.utime(old, (now - 3600, now - 3600))  # the old host's settings, an hour before the rollout
    os.utime(new, (now - 1800, now - 1800))
    middle = ("--start", str(START + DAY), "--stop", str(START + 3 * DAY))

    def host(cfg, *args) -> tuple[int, str]:
        """(exit code, log) of the range run by a host on ``cfg``."""
        args = args if "--start" in args else ("--start", str(START), "--stop", str(START + DATES * DAY), *args)
        caplog.clear()
        with lab.host(cfg, folder), caplog.at_level("INFO", logger="luigi-interface"):
            return lab.luigi("RangeDaily", "--of", "StgQsrPos", *args), caplog.text

    def thresholds():
        return [m["rules"]["suspicious_qty_threshold"] for _, m in sorted(_manifests(lab).items())]

    assert host(old)[0] == 0 and thresholds() == [20] * DATES
    assert host(new, *middle)[0] == 0 and thresholds() == [20, 2, 2, 20]  # the rollout, begun
    before = _manifests(lab)
    code, late = host(old, "--daybreak-lock-wait-s", "5")  # a setting on the command line changes nothing
    assert code == 10, late[-3000:]
    assert f"staging/qsr_pos {START + DAY}: built under other rules; " in late
    assert "here -> there: suspicious_qty_threshold 20 -> 2): update them. Not replaced" in late
    assert f"StgQsrPos {START} .. {START + (DATES - 1) * DAY}: 2 superseded, 2 up to date" in late
    assert _manifests(lab) == before
    span = ["--start", str(START), "--stop", str(START + DATES * DAY)]
    capsys.readouterr()
    with lab.host(old, folder):
        assert main(["status", "--dataset", "stg_qsr_pos", *span]) == 0
        shown = capsys.readouterr().out
        assert main(["plan", "stg_qsr_pos", *span]) == 10  # as the run: nothing this host may do
        planned = capsys.readouterr().out
    assert "2 ok, 2 newer" in shown, shown
    assert "20 -> 2): update them; a run does not replace it" in shown, shown
    assert "0 partitions would run, 0 wait for raw data, 2 built by a newer version or settings" in planned, planned
    # a deliberate rollback, the old settings kept as they are: made the newest as the message says...
    assert "to keep them as they are, touch its luigi.cfg and delete settings_seen.json from its cache_dir" in late
    os.utime(old)
    assert host(old)[0] == 10  # a touch alone: the settings were first seen an hour ago, as before
    (folder / "host-old.cache" / "daybreak" / "settings_seen.json").unlink()
    assert host(old)[0] == 0 and thresholds() == [20] * DATES
    # ... and hold for every partition of the dataset, those the rollback did not rebuild as well
    before = _manifests(lab)
    assert host(new)[0] == 10
    assert _manifests(lab) == before


def test_an_edit_of_other_settings_leaves_a_host_behind_a_rollout_behind(lab, old_and_new, caplog):
    """Before, an edit of any section of the luigi.cfg of a host left behind (here [ads], which staging does not
    read) made all its settings the newest: its next run replaced every partition of the rollout with the old
    rules, exit 0. A dataset's settings are now as new as the newest of its own."""

    lab.qsr_days(START, DATES + 1)
    folder, old, new = old_and_new

    def host(cfg) -> tuple[int, str]:
        caplog.clear()
        with lab.host(cfg, folder), caplog.at_level("INFO", logger="luigi-interface"):
            return lab.range(START, START + DATES * DAY), caplog.text

    assert host(old)[0] == 0
    assert host(new)[0] == 0  # the rollout
    before = _manifests(lab)
    assert {m["rules"]["suspicious_qty_threshold"] for m in before.values()} == {2}
    with old.open("a") as cfg:  # now, on the host left behind: a setting of another dataset
        cfg.write("[ads]\nrolling_window_days = 8\n")
    code, out = host(old)
    assert code == 10, out[-3000:]
    assert "here -> there: suspicious_qty_threshold 20 -> 2): update them. Not replaced" in out, out
    assert _manifests(lab) == before
    lab.write_cfg(old, suspicious_qty_threshold=21)  # a setting staging reads, changed there: now the newest
    assert host(old)[0] == 0
    assert {m["rules"]["suspicious_qty_threshold"] for m in _manifests(lab).values()} == {21}
    assert host(new)[0] == 10  # and the rolled-out host is the one behind


def test_a_host_that_only_looked_or_ran_with_a_setting_on_its_command_line_stays_behind_a_rollout(
    lab, tmp_path, caplog
):
    """Before, a host that had found the dataset up to date recorded nothing of its settings, so a `touch` of its
    luigi.cfg after another host's rollout made them the newest; and a value given once on its command line was
    recorded as changed then. Now a host records its settings whenever it looks at a partition, and a value given
    on the command line is as old as any, for that run only."""
    import os
    import time

    lab.qsr_days(START, DATES + 1)
    folder = tmp_path / "hosts"
    folder.mkdir()
    old, new = lab.write_cfg(tmp_path / "host-old.cfg"), lab.write_cfg(tmp_path / "host-new.cfg")
    now = time.time()
    for cfg in (old, new):
        os.utime(cfg, (now - 3600, now - 3600))

    def host(cfg, *args) -> tuple[int, str]:
        caplog.clear()
        with lab.host(cfg, folder), caplog.at_level("INFO", logger="luigi-interface"):
            return lab.range(START, START + DATES * DAY, *args), caplog.text

    assert host(new)[0] == 0
    assert host(old)[0] == 0  # up to date: it builds nothing, and looked at every partition
    lab.write_cfg(new, suspicious_qty_threshold=2)
    os.utime(new, (now - 1800, now - 1800))
    assert host(new)[0] == 0  # the rollout
    before = _manifests(lab)
    os.utime(old)  # a touch of the host left behind
    code, out = host(old)
    assert code == 10, out[-3000:]
    code, out = host(old, "--qsr-suspicious-qty-threshold", "7")  # a value given once on its command line
    assert code == 10, out[-3000:]
    assert "suspicious_qty_threshold 7 -> 2" in out, out
    assert host(old)[0] == 10  # and back on its luigi.cfg, still behind
    assert _manifests(lab) == before


def test_a_host_named_on_its_command_line_rolls_out_each_change_of_its_luigi_cfg(lab, tmp_path, caplog):
    """Before, any Daybreak setting on the command line (``--daybreak-host-name``, as two hosts on one machine
    are told to) made every change of the host's rules settings "as old as any": a change of its threshold in
    luigi.cfg after one its ``daybreak status`` had seen was never built (exit 10, superseded by that one)."""
    import os
    import time

    from tasks.cli import main

    lab.qsr_days(START, DATES + 1)
    folder = tmp_path / "hosts"
    folder.mkdir()
    cfg = lab.write_cfg(tmp_path / "host.cfg")
    now = time.time()

    def run(threshold: int, age: float, look: bool) -> tuple[int, str]:
        lab.write_cfg(cfg, suspicious_qty_threshold=threshold)
        os.utime(cfg, (now - age, now - age))
        caplog.clear()
        with lab.host(cfg, folder), caplog.at_level("INFO", logger="luigi-interface"):
            if look:  # a look at the dataset before the run and after it, which records the settings it sees
                assert main(["status", "--dataset", "stg_qsr_pos"]) in (0, 1)
            code = lab.range(START, START + DATES * DAY, "--daybreak-host-name", "h1")
            if look:
                assert main(["status", "--dataset", "stg_qsr_pos"]) in (0, 1)
            return code, caplog.text

    for threshold, age, look in ((20, 3600, True), (25, 1800, True), (22, 900, False)):
        code, out = run(threshold, age, look)
        assert code == 0, out[-3000:]
        thresholds = {m["rules"]["suspicious_qty_threshold"] for m in _manifests(lab).values()}
        assert thresholds == {threshold}, (threshold, out[-3000:])


def test_two_hosts_whose_settings_changed_at_the_same_time_do_not_replace_each_others_partitions(lab, tmp_path, caplog):
    """Before: two hosts' luigi.cfg with the same time (one deploy loop, rsync -t, an image's fixed times) and
    other thresholds each rebuilt the other's partitions on every run, exit 0: the data flipped back and forth.
    Now neither replaces the other's: the second says why and exits 10, until one's settings are newer."""
    import os

    from tasks.settings import write_config

    lab.qsr_days(START, DATES + 1)
    folder = tmp_path / "hosts"
    folder.mkdir()
    roots = {"raw_root": lab.raw, "data_root": lab.data}
    a = write_config(tmp_path / "a.cfg", {"daybreak": {**roots, "host_name": "host-a"}, "qsr": {}})
    b = write_config(
        tmp_path / "b.cfg", {"daybreak": {**roots, "host_name": "host-b"}, "qsr": {"suspicious_qty_threshold": 2}}
    )
    for cfg in (a, b):
        os.utime(cfg, ns=(1_796_000_000_000_000_000,) * 2)  # the same time to the nanosecond

    def host(cfg) -> tuple[int, str]:
        caplog.clear()
        with lab.host(cfg, folder), caplog.at_level("INFO", logger="luigi-interface"):
            return lab.range(START, START + DATES * DAY), caplog.text

    assert host(a)[0] == 0
    before = _manifests(lab)
    code, log = host(b)
    assert code == 10, log[-3000:]
    assert "host-a builds staging/qsr_pos under settings changed at the same time as this host's" in log, log
    assert _manifests(lab) == before  # nothing replaced
    assert host(a)[0] == 0 and _manifests(lab) == before  # and nothing flips back
    assert "on that host: touch its luigi.cfg and delete settings_seen.json from its cache_dir" in log, log
    os.utime(b)  # b's settings now the newer, as the message says: its rollout goes ahead
    (folder / "b.cache" / "daybreak" / "settings_seen.json").unlink()
    assert host(b)[0] == 0 and _manifests(lab) != before


def test_status_and_plan_show_a_partition_built_by_a_newer_version_as_newer_not_as_stale(lab, setting, capsys, caplog):
    """After a rollback (this host built store_daily_sales/2, then went back to /1) every run refuses to replace
    what /2 built: status and plan say so, not 'stale' and 'would run', and the run's lines name the store."""
    from tasks.cli import main
    from tasks.store_marts import StoreDailySales

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 2)
    assert lab.range(START, START + 2 * DAY) == 0 and lab.luigi("AllStores") == 0
    ours = StoreDailySales.version
    name, number = ours.rsplit("/", 1)
    newer = f"{name}/{int(number) + 1}"
    path = lab.data / "marts" / "store_daily_sales" / "store_id=S001" / "_manifest.json"
    manifest = json.loads(path.read_text())
    manifest["rules"]["version"] = newer  # as this host wrote it before the rollback
    manifest["rules_fingerprint"] = fingerprint(manifest["rules"])
    path.write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(["status", "--dataset", "store_daily_sales"]) == 0
    why = f"built by a newer version {newer} than this host's {ours}: upgrade this host; a run does not replace it"
    assert f"store_daily_sales  (unpartitioned)  newer: store_id S001: {why}\n" in capsys.readouterr().out
    assert main(["plan", "store_daily_sales", "--start", str(START), "--stop", str(START + 2 * DAY)]) == 10
    plan = capsys.readouterr().out
    assert plan.splitlines() == [
        "store_daily_sales: 0 partitions would run, 0 wait for raw data, 1 built by a newer version or settings",
        f"  newer S001  {why}",
    ], plan
    assert main(["status", "--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(START + 2 * DAY)]) == 0
    assert "\n  ##\n  2 ok\n" in capsys.readouterr().out  # its upstream: nothing to do
    with caplog.at_level("INFO", logger="luigi-interface"):
        assert lab.luigi("AllStores") != 0  # refused: nothing written
    out = caplog.text
    assert f"marts/store_daily_sales S001: built by version {newer}, newer than this host's {ours}: upgrade " in out
    assert "  superseded StoreDailySales S001: not replaced, a newer build is kept" in out, out
    assert "another host" not in out.split("summary of this run:")[1], out


def test_what_reads_a_partition_built_by_a_newer_version_as_it_is_is_up_to_date(lab, setting, capsys):
    """A store's totals read staging that newer code built (this host then rolled back): no run here replaces
    that staging, so what read it as it is stays up to date, and nothing says it may run."""
    from tasks.cli import main

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 2)
    assert lab.range(START, START + 2 * DAY) == 0 and lab.luigi("AllStores") == 0
    manifest_path = lab.partition(START) / "_manifest.json"
    manifest = json.loads(manifest_path.read_text())
    name, number = VERSION.rsplit("/", 1)
    manifest["rules"]["version"] = f"{name}/{int(number) + 1}"  # its rows are the ones the stores read
    manifest["rules_fingerprint"] = fingerprint(manifest["rules"])
    manifest_path.write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(["status", "--start", str(START), "--stop", str(START + 2 * DAY)]) == 0
    out = capsys.readouterr().out
    assert "stg_qsr_pos  2026-09-01 .. 2026-09-02\n  n#\n  1 ok, 1 newer\n" in out, out
    assert "store_daily_sales  (unpartitioned)  ok\n" in out, out
    assert main(["plan", "store_daily_sales", "--start", str(START), "--stop", str(START + 2 * DAY)]) == 0
    assert capsys.readouterr().out == "store_daily_sales: 0 partitions would run, 0 wait for raw data\n"
    assert lab.luigi("AllStores") == 0


def test_a_late_hotel_extract_is_built_by_a_host_whose_settings_file_is_older_but_the_same(lab, tmp_path, caplog):
    """Which hotels a date reads is part of its rules (each hotel's timezone), so a late extract changes them:
    that is new input, not a rollout. A host whose luigi.cfg is older, with the same settings, builds it."""
    import os
    import time

    from tests.test_hotels import FIRST, write

    for k in range(3):
        day = FIRST + k * DAY
        write(lab, day, "H1", [f"T{k},H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct"])
    folder = tmp_path / "hosts"
    folder.mkdir()
    from tasks.settings import write_config

    roots = {"raw_root": lab.raw, "data_root": lab.data, "start_date": FIRST}
    older, newer = (write_config(tmp_path / f"host-{n}.cfg", {"daybreak": roots}) for n in ("older", "newer"))
    now = time.time()
    os.utime(older, (now - 3600, now - 3600))
    os.utime(newer, (now - 1800, now - 1800))

    def host(cfg) -> tuple[int, str]:
        """(exit code, log) of the range run by a host on ``cfg``."""
        span = ("--start", str(FIRST), "--stop", str(FIRST + 3 * DAY))
        caplog.clear()
        with lab.host(cfg, folder), caplog.at_level("INFO", logger="luigi-interface"):
            return lab.luigi("RangeDaily", "--of", "StgHotelBookingsDaily", *span), caplog.text

    code, out = host(newer)
    assert code == 0, out[-3000:]
    day = FIRST + 2 * DAY  # H2's first extract, late (once a hotel sent one, a later folder waits for its own)
    write(lab, day, "H2", [f"V1,H2,{day}T23:30:00-07:00,CREATED,2026-10-02,2026-10-03,2,50.00,ota"])
    code, late = host(older)
    assert code == 0, late[-3000:]
    assert f"StgHotelBookingsDaily {FIRST} .. {FIRST + 2 * DAY}: 1 ran, 2 up to date" in late, late


@pytest.mark.system  # a real luigid and two luigi processes
@pytest.mark.parametrize("change", ["removed", "re-sent"])
def test_a_host_on_older_settings_leaves_a_stale_partition_to_the_newer_host_on_one_luigid(lab, tmp_path, change):
    """Two hosts on one luigid during a rollout: the new host (suspicious_qty_threshold 15, settings changed
    later) built the range, then a raw file removed or re-sent makes two partitions stale. The new host freezes in its
    first build; the old host (20) runs the range meanwhile. Before, luigid handed it the other stale partition,
    its build refused it (superseded), luigid marked it FAILED, and the new host could not run it: exit 25,
    ``not run ... (a partition it reads failed or waits)``, the partition left stale. The old host now takes no
    partition built under newer settings: the new host builds both in the same run and exits 0."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tasks.settings import write_config
    from tests.luigid import Luigid

    lab.qsr_days(START, DATES + 1)
    server = Luigid(tmp_path / "luigid").start()
    core = {"scheduler_host": "127.0.0.1", "scheduler_port": server.port}
    args = ("RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + DATES * DAY))
    procs = []

    def host(name: str, extra=(), plan: dict | None = None, **qsr) -> subprocess.Popen:
        home = tmp_path / name
        (home / "tmp").mkdir(parents=True, exist_ok=True)
        cfg = home / "luigi.cfg"
        if not cfg.exists():
            roots = {"raw_root": lab.raw, "data_root": lab.data, "host_name": name}
            write_config(cfg, {"daybreak": roots, "qsr": qsr, "core": core})
            age = 3600 if name == "old" else 1800  # the old host's settings, from before the rollout
            os.utime(cfg, (time.time() - age,) * 2)
        env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(REPO), "TMPDIR": str(home / "tmp")}
        cmd = [sys.executable, "-m", "luigi", "--module", "tasks"]
        if plan is not None:
            env["CRASH_PLAN"] = json.dumps(plan)
            cmd = [sys.executable, str(REPO / "tests" / "crash_driver.py")]
        out = open(home / "out.txt", "a")
        procs.append(
            subprocess.Popen(
                [*cmd, *args, *extra], cwd=home, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        )
        return procs[-1]

    def out(name: str) -> str:
        return (tmp_path / name / "out.txt").read_text()

    def thresholds():
        return [m["rules"]["suspicious_qty_threshold"] for _, m in sorted(_manifests(lab).items())]

    try:
        assert host("new", ["--local-scheduler"], suspicious_qty_threshold=15).wait(120) == 0, out("new")
        assert host("old").wait(120) == 10, out("old")  # every partition built under newer settings
        assert thresholds() == [15] * DATES
        built = {d: m["finished_at"] for d, m in _manifests(lab).items()}
        raw = lab.raw / "qsr_pos" / str(START + 2 * DAY) / "S002.csv"  # read by START+1 and START+2: stale
        if change == "removed":
            raw.unlink()
        else:
            raw.write_text(
                raw.read_text()
                + f"S002-{START + 2 * DAY}-Z,1,S002,{START + 2 * DAY}T09:00:00-04:00,COLA,1,1.99,,COMPLETED\n"
            )
        counter = tmp_path / "steps"
        new = host("new", plan={"counter": str(counter), "root": str(lab.data), "date": "*", "at": 1, "mode": "stop"})
        deadline = time.monotonic() + 60
        while not (tmp_path / "steps.stopped").exists():
            assert time.monotonic() < deadline and new.poll() is None, out("new")
            time.sleep(0.1)
        old = host("old", ["--log-level", "INFO"])  # while the new host is frozen in its first build
        try:
            old.wait(20)
        except subprocess.TimeoutExpired:
            pass
        os.killpg(new.pid, signal.SIGCONT)
        codes = [new.wait(120), old.wait(120)]
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        server.stop()
    new_out, old_out = out("new").split("summary of this run:")[-1], out("old").split("summary of this run:")[-1]
    assert codes == [0, 10], new_out + old_out
    assert thresholds() == [15] * DATES
    rebuilt = {d for d, m in _manifests(lab).items() if m["finished_at"] != built[d]}
    assert rebuilt == {START + DAY, START + 2 * DAY}, new_out
    assert "a partition it reads failed or waits" not in new_out + old_out
    assert f"StgQsrPos {START} .. {START + (DATES - 1) * DAY}: {DATES} superseded" in old_out, old_out
    assert "does not exist (yet?)" not in out("old")  # Luigi's words for external data: nothing is missing


def test_a_partition_not_run_that_reads_no_partition_is_never_said_to_wait_for_one(lab):
    """A partition this run checked stale but did not build (luigid gave it to another host, whose run of it
    failed or refused it): StgQsrPos reads no partition, so its summary line must not blame one."""
    from tasks.reporting import runlog

    lab.qsr_days(START, 2)
    runlog.report()  # what earlier runs of this process left unreported
    runlog.watch([(StgQsrPos(date=START), False)])  # checked missing by this run, then neither built nor failed
    errors, text = runlog.report()
    assert errors == []
    assert f"StgQsrPos {START}: 1 not run" in text, text
    assert "a partition it reads failed or waits" not in text, text
    assert (
        f"not run  StgQsrPos {START} (this run did not get to build it, and it reads no partition: luigid gave it "
        "to another host (its /history says how that run ended), or --log-level INFO says why; rerun)" in text
    ), text


def test_a_setting_counts_from_when_its_value_was_first_seen_not_from_later_edits_of_the_file(setting, tmp_path):
    from tasks import settings_seen

    setting("daybreak", "cache_dir", tmp_path / "cache")
    qsr = "staging/qsr_pos"
    first = {f"{qsr} suspicious_qty_threshold": "20", f"{qsr} timezone": '"America/Toronto"'}

    def at(entries, files_at, group=qsr):
        return settings_seen.changed_at(entries, lambda: files_at, group)

    assert at(first, 100.0) == 100.0  # first seen: the files' time
    assert at(first, 200.0) == 100.0  # the file edited elsewhere: as it was
    changed = {**first, f"{qsr} suspicious_qty_threshold": "2"}
    assert at(changed, 300.0) == 300.0  # its own value changed: the newest
    assert at({f"{qsr} timezone": '"America/Toronto"'}, 400.0) == 100.0
    # a name not seen before in a dataset with names seen (a hotel's first extract): no newer than those
    assert at({**changed, f"{qsr} timezones[H6]": '"America/Winnipeg"'}, 500.0) == 300.0
    assert at({"marts/other window_days": "7"}, 600.0, "marts/other") == 600.0  # a dataset not seen before
    settings_seen.path().write_text("{not json")  # damaged: every value is seen again, from the files' time
    assert at(first, 700.0) == 700.0
    assert at(first, 800.0) == 700.0


def test_the_settings_a_partition_reads_are_its_own_not_its_version_offsets_or_what_it_does_not_read():
    from tasks.freshness.rules import OFFSETS, setting_entries

    rules = {
        "version": "stg_hotel_bookings_daily/3",
        "timezones": {"H1": "America/Toronto", "H9": None},  # H9 not in the list: nothing of it is a setting
        OFFSETS: {"America/Toronto": {"0": "-04:00"}},
        "max_rate": 5000.0,
    }
    assert setting_entries("staging/hotel_bookings", rules) == {
        "staging/hotel_bookings timezones[H1]": '"America/Toronto"',
        "staging/hotel_bookings max_rate": "5000.0",
    }
    window = {"version": "ads_rolling_7d/1", "window_days": 7, "start_date": None}  # a window start_date does not cut
    assert setting_entries("marts/ads_rolling_7d", window) == {"marts/ads_rolling_7d window_days": "7"}


def test_a_host_left_behind_builds_what_reads_a_rollout_as_it_is_as_its_plan_says(lab, setting, old_and_new, capsys):
    """Before, a host left behind on a rollout said its store totals (which read the rolled-out staging) would
    run, then its run built nothing and exited 10: each staging partition it reads was left to the newer host,
    so Luigi held back what reads it. No run here replaces that staging, so its readers read it as it is."""

    from tasks.cli import main

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, DATES + 1)
    folder, old, new = old_and_new
    span = ("--start", str(START), "--stop", str(START + DATES * DAY))
    with lab.host(old, folder):
        assert lab.range(START, START + DATES * DAY) == 0 and lab.luigi("AllStores") == 0
    with lab.host(new, folder):
        assert lab.range(START + DAY, START + 3 * DAY) == 0  # the rollout, begun: two days
    before = json.loads((lab.data / "marts" / "store_daily_sales" / "store_id=S001" / "_manifest.json").read_text())
    capsys.readouterr()
    with lab.host(old, folder):
        assert main(["plan", "store_daily_sales", *span]) == 1
        assert "store_daily_sales: 2 partitions would run" in capsys.readouterr().out
        assert lab.luigi("AllStores") == 0
        assert main(["plan", "store_daily_sales", *span]) == 0
    after = json.loads((lab.data / "marts" / "store_daily_sales" / "store_id=S001" / "_manifest.json").read_text())
    assert after["finished_at"] > before["finished_at"]
    thresholds = [m["rules"]["suspicious_qty_threshold"] for _, m in sorted(_manifests(lab).items())]
    assert thresholds[:DATES] == [20, 2, 2, 20]  # the rollout's staging as it was


def test_a_partition_another_host_built_meanwhile_under_newer_settings_is_superseded_in_the_summary(lab, old_and_new):
    """A partition this run checked stale that luigid gave to another host, whose settings this host never
    replaces (newer, or changed at the same time): before, the summary said luigid's cooldown kept it from
    this host ("rerun in a few seconds", though a rerun changes nothing); now it is superseded, with why."""
    import collections

    from tasks.freshness.engine import Engine
    from tasks.reporting import outcomes

    lab.qsr_days(START, DATES + 1)
    folder, old, new = old_and_new
    with lab.host(old, folder):
        assert lab.range(START, START + DATES * DAY) == 0
    with lab.host(new, folder):
        assert lab.range(START, START + DAY) == 0
    with lab.host(old, folder):
        kept, failed, waiting, others = [], [], collections.defaultdict(list), []
        kind = outcomes.kind_now(StgQsrPos(date=START), Engine(), "", failed, waiting, others, kept)
    assert kind == "superseded" and not failed, (kind, failed)
    assert (
        kept == [f"StgQsrPos {START}: " + kept[0].split(": ", 1)[1]] and "suspicious_qty_threshold 20 -> 2" in kept[0]
    )
