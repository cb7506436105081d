"""Faults: damaged files, dead servers, previews (docs/reliability.md, "Every fault, and what you
see"). Each ends in one line naming the file, partition or server and a documented exit
code, never a traceback or a hang, and nothing is lost."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasks import cli
from tests.conftest import qsr_rows
from tests.test_preview import D1, D2, D3, STOP, production, qsr_lab

pytestmark = pytest.mark.luigi

START = dt.date(2026, 9, 10)
DAY = dt.timedelta(days=1)
SPAN = ["--start", str(START), "--stop", str(START + 2 * DAY)]


def built(lab, setting, days: int = 2, rejects: bool = False) -> None:
    """Staging START .. START+days-1 built, each date with a quarantine when ``rejects``."""
    setting("daybreak", "start_date", START)
    setting("qsr", "max_reject_share", 1)
    for i in range(days + 1):
        d = START + i * DAY
        bad = [f"S001-{d}-X,1,S001,{d}T12:00:00-04:00,COLA,lots,1.99,,COMPLETED"] if rejects else []
        lab.qsr_file(d.isoformat(), "S001", qsr_rows("S001", d) + bad)
        lab.qsr_file(d.isoformat(), "S002", qsr_rows("S002", d))
    assert lab.range(START, START + days * DAY) == 0


def verify(*args: str) -> int:
    return cli.main(["verify", *args])


def run_cli(lab, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``daybreak <args>`` in a subprocess with a luigi.cfg pointing at the lab (and its settings)."""
    cfg = lab.root / "luigi.cfg"
    if not cfg.exists():
        lab.write_cfg(cfg)
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg)}
    cmd = [sys.executable, "-c", "import sys; from tasks.cli import main; sys.exit(main())", *args]
    return subprocess.run(cmd, cwd=lab.root, env=env, capture_output=True, text=True, timeout=timeout)


# -- verify: damaged and replaced files ----------------------------------------------------------------


def test_verify_finds_a_damaged_or_deleted_quarantine_and_marks_the_partition_stale(lab, setting, capsys):
    built(lab, setting, rejects=True)
    manifest = json.loads((lab.partition(START) / "_manifest.json").read_text())
    quarantine = lab.data / manifest["quarantine"]["path"]
    st, good = quarantine.stat(), quarantine.read_bytes()
    quarantine.write_bytes(good[:50] + bytes([good[50] ^ 1]) + good[51:])  # same size, same mtime
    os.utime(quarantine, ns=(st.st_atime_ns, st.st_mtime_ns))
    (lab.data / manifest["quarantine"]["path"].replace(str(START), str(START + DAY))).unlink()
    assert verify(*SPAN) == 1
    out = capsys.readouterr().out
    assert f"MISMATCH quarantine {quarantine}: content differs from its manifest" in out
    assert "quarantine/staging/qsr_pos/business_date=2026-09-11/rejected.parquet: missing" in out
    assert "2 mismatches" in out
    assert lab.rebuilt_by(lambda: lab.range(START, START + 2 * DAY)) == {START, START + DAY}
    assert quarantine.read_bytes() == good
    assert verify(*SPAN) == 0


def test_verify_finds_a_damaged_store_partition_and_the_next_run_rebuilds_it(lab, setting, capsys):
    """Before, verify covered only the dated datasets: ``--dataset store_daily_sales`` was "not a dataset",
    and bit rot in a store's file went unseen (status ok, AllStores up to date)."""
    built(lab, setting)
    assert lab.luigi("AllStores") == 0
    data = lab.data / "marts" / "store_daily_sales" / "store_id=S001" / "data.parquet"
    st, good = data.stat(), data.read_bytes()
    data.write_bytes(good[:10] + bytes([good[10] ^ 1]) + good[11:])  # same size, same mtime
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert verify("--dataset", "store_daily_sales") == 1
    out = capsys.readouterr().out
    assert f"MISMATCH data {data}: content differs from its manifest" in out, out
    assert "stale now: marts/store_daily_sales S001" in out, out
    assert out.splitlines()[-1] == "the partitions named are marked stale: the next AllStores rebuilds them"
    assert lab.luigi("AllStores") == 0
    assert data.read_bytes() == good
    assert verify() == 0


def test_verify_records_a_data_root_copied_without_its_times_and_the_next_run_rebuilds_nothing(lab, setting, capsys):
    """A data root restored by ``cp -r`` gives every file a new time: stale (``data file does not match its
    manifest``) until verify has hashed the files and found the content their manifests recorded."""
    built(lab, setting, days=3, rejects=True)
    before = {p: p.read_bytes() for p in lab.data.rglob("*.parquet")}  # data files and quarantines
    copy = lab.data.with_name("restored")
    shutil.copytree(lab.data, copy, copy_function=shutil.copyfile)  # cp -r: the content, new times
    shutil.rmtree(lab.data)
    copy.rename(lab.data)
    span = ["--start", str(START), "--stop", str(START + 3 * DAY)]
    assert cli.main(["plan", "stg_qsr_pos", *span]) == 1
    assert "data file does not match its manifest" in capsys.readouterr().out
    assert verify(*span) == 0
    out = capsys.readouterr().out
    assert "0 mismatches" in out
    assert "3 partitions copied without their files' times, the content their manifests recorded: " in out
    assert lab.rebuilt_by(lambda: lab.range(START, START + 3 * DAY)) == set()
    assert {p: p.read_bytes() for p in before} == before
    # a file that changed as well is no copy: a mismatch, marked stale, as before
    data = lab.partition(START) / "data.parquet"
    st, good = data.stat(), data.read_bytes()
    data.write_bytes(good[:100] + bytes([good[100] ^ 1]) + good[101:])
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert verify(*span) == 1
    assert f"MISMATCH data {data}: content differs from its manifest" in capsys.readouterr().out
    # the reason status gives is the mismatch verify found, not a copy without its times
    assert cli.main(["status", "--dataset", "stg_qsr_pos", *span]) == 0
    assert f"{START} stale: daybreak verify: data {data}: content differs" in capsys.readouterr().out


@pytest.mark.parametrize("damage", [b"", b'{"dataset": "staging/qs'])
def test_verify_finds_an_empty_or_truncated_manifest(lab, setting, capsys, damage):
    built(lab, setting)
    manifest = lab.partition(START) / "_manifest.json"
    manifest.write_bytes(damage)
    assert verify(*SPAN) == 1
    out = capsys.readouterr().out
    assert f"MISMATCH manifest {manifest}: empty, truncated or not JSON\n  stale now: staging/qsr_pos {START}" in out
    assert "verified 2 partitions" in out
    kept = json.loads((lab.partition(START + DAY) / "_manifest.json").read_text())["finished_at"]
    assert lab.range(START, START + 2 * DAY) == 0
    assert json.loads(manifest.read_text())["row_count"] == 8  # rebuilt
    assert json.loads((lab.partition(START + DAY) / "_manifest.json").read_text())["finished_at"] == kept
    assert verify(*SPAN) == 0


def test_verify_finds_a_manifest_whose_row_count_was_edited(lab, setting, capsys):
    """Before: a manifest edited by hand (row_count 8 -> 7, its times kept) passed verify, and status --json
    gave the edited count."""
    built(lab, setting)
    manifest = lab.partition(START) / "_manifest.json"
    times = manifest.stat()
    edited = json.loads(manifest.read_text())
    edited["row_count"] = 7
    manifest.write_text(json.dumps(edited))
    os.utime(manifest, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert verify(*SPAN) == 1
    out = capsys.readouterr().out
    assert (
        f"MISMATCH manifest {lab.partition(START)}/_manifest.json: row_count 7, but its data file holds 8 rows" in out
    )
    assert lab.range(START, START + 2 * DAY) == 0
    assert json.loads(manifest.read_text())["row_count"] == 8  # rebuilt
    assert verify(*SPAN) == 0


@pytest.mark.parametrize("replacement", ["folder", "symlink"])
def test_verify_reports_a_raw_file_replaced_by_a_folder_or_a_link_as_a_mismatch(lab, setting, capsys, replacement):
    built(lab, setting)
    raw = lab.raw / "qsr_pos" / str(START + DAY) / "S001.csv"
    kept = raw.read_bytes()
    raw.unlink()
    if replacement == "folder":
        raw.mkdir()
    else:
        (lab.root / "elsewhere.csv").write_bytes(kept)
        raw.symlink_to(lab.root / "elsewhere.csv")
    assert verify(*SPAN) == 1
    out = capsys.readouterr().out
    what = "a folder" if replacement == "folder" else "a symbolic link"
    line = next(x for x in out.splitlines() if x.startswith(f"MISMATCH raw qsr_pos/{START + DAY}/S001.csv: "))
    assert what in line, out
    assert f"stale now: staging/qsr_pos {START}, staging/qsr_pos {START + DAY}" in out


@pytest.mark.system
def test_verify_refuses_a_raw_file_replaced_by_a_fifo_instead_of_hanging(lab, setting):
    built(lab, setting)
    raw = lab.raw / "qsr_pos" / str(START + DAY) / "S002.csv"
    raw.unlink()
    os.mkfifo(raw)
    data = lab.partition(START) / "data.parquet"
    data.unlink()
    os.mkfifo(data)  # a data file too: verify hashes both through the same open
    out = run_cli(lab, "verify", *SPAN, timeout=20)
    assert out.returncode == 1, out.stderr
    assert f"MISMATCH raw qsr_pos/{START + DAY}/S002.csv: not a regular file (a FIFO)" in out.stdout
    assert f"MISMATCH data {data}: not a regular file (a FIFO)" in out.stdout
    assert "Traceback" not in out.stdout + out.stderr


def test_verify_refuses_a_reversed_range_or_a_start_date_after_the_newest_folder(lab, setting, capsys):
    built(lab, setting)
    assert verify("--start", str(START + DAY), "--stop", str(START)) == 2
    assert "--start 2026-09-11 is after --stop 2026-09-10" in capsys.readouterr().err
    setting("daybreak", "start_date", START + 30 * DAY)
    assert verify() == 2
    err = capsys.readouterr().err
    assert f"[daybreak] start_date {START + 30 * DAY} is after the day after the newest raw folder" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("command", [["status"], ["plan", "stg_qsr_pos"]])
def test_a_stop_alone_before_the_default_start_names_the_default_not_a_start_never_given(lab, setting, capsys, command):
    built(lab, setting)
    capsys.readouterr()
    assert cli.main([*command, "--stop", str(START - DAY)]) == 2
    err = capsys.readouterr().err
    assert f"--stop {START - DAY} is before the default --start {START} ([daybreak] start_date" in err
    assert err.endswith("give --start too\n") and err.count("\n") == 1


# -- previews ------------------------------------------------------------------------------------------


@pytest.fixture
def threshold_lab(lab, qsr_setting):
    """tests/test_preview.py's: three dates built at threshold 20, then the threshold set to 15."""
    qsr_lab(lab)
    assert lab.range(D1, STOP) == 0
    qsr_setting("suspicious_qty_threshold", 15)
    return lab


def test_preview_with_no_worker_is_a_usage_error(threshold_lab, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["preview", "stg_qsr_pos", "--start", str(D1), "--stop", str(STOP), "--workers", "0"])
    assert exit_.value.code == 2
    assert "argument --workers: 0: expected a whole number, 1 or more" in capsys.readouterr().err
    assert not (threshold_lab.data / "_state" / "preview").exists()


def test_a_preview_whose_partitions_luigi_did_not_run_says_so_and_cannot_be_published(threshold_lab, capsys):
    from tasks import preview

    before = production(threshold_lab)
    record, code = preview.make("stg_qsr_pos", D1, STOP, workers=0)  # Luigi runs nothing with no worker
    assert code == 25
    assert [n["partition"] for n in record["not_run"]] == [f"staging/qsr_pos/business_date={d}" for d in (D1, D2, D3)]
    text = preview.render(record)
    assert "every partition of the range is up to date" not in text
    assert f"NOT BUILT  staging/qsr_pos/business_date={D1}: not run (stale: rules changed" in text
    code, message = preview.publish(record["id"])
    assert code == 1
    assert "3 partition(s) of the preview were not built" in message
    assert production(threshold_lab) == before
    listed = preview.listing()[0]
    assert listed["publishable"] is False


# -- start_date moved forward ---------------------------------------------------------------------------


def test_moving_start_date_forward_keeps_the_partitions_before_it_and_status_shows_them(lab, setting, capsys):
    from tasks.views import status

    first, moved, stop = dt.date(2026, 9, 20), dt.date(2026, 9, 23), dt.date(2026, 9, 27)
    setting("daybreak", "start_date", first)
    for k in range(1, 15):
        lab.ads_export(first + k * DAY, first)
    assert lab.range(first, stop, of="AdsRolling7d") == 0
    rolling = "marts/ads_rolling_7d"
    kept = {d: (lab.partition(d, rolling) / "data.parquet").read_bytes() for d in (first, first + DAY, first + 2 * DAY)}
    built = lab.built_at(rolling)
    setting("daybreak", "start_date", moved)
    assert lab.range(first, stop, of="AdsRolling7d") == 0
    after = lab.built_at(rolling)
    assert {d for d in after if after[d] != built[d]} == {moved + k * DAY for k in range(4)}  # rules: start_date
    for d, data in kept.items():  # never rewritten, and not empty (2 campaigns each)
        assert (lab.partition(d, rolling) / "data.parquet").read_bytes() == data
        assert json.loads((lab.partition(d, rolling) / "_manifest.json").read_text())["row_count"] == 2
    assert (
        lab.range(
            first,
            stop,
            of="AdsRolling7d",
        )
        == 0
    )
    assert lab.built_at(rolling) == after  # nothing to do
    capsys.readouterr()
    assert cli.main(["status", "--dataset", "ads_rolling_7d", "--stop", str(stop)]) == 0
    out = capsys.readouterr().out
    assert f"ads_rolling_7d  {first} .. {stop - DAY}" in out
    assert f"{first} .. {first + 2 * DAY} ok, before [daybreak] start_date {moved}: kept as built, never rebuilt" in out
    assert "\n  7 ok\n" in out and "stale:" not in out
    rows = status.collect(first, stop, ["ads_rolling_7d"])
    assert [r.state for r in rows] == ["ok"] * 7


def test_a_date_before_start_date_is_left_out_in_the_summary_not_up_to_date(lab, setting, caplog):
    """Before: ``StgQsrPos 2026-09-05: 1 up to date`` for a date before start_date, with no partition there."""
    setting("daybreak", "start_date", START)
    lab.qsr_days(START - 5 * DAY, 6)
    early = START - 5 * DAY
    caplog.clear()
    assert lab.luigi("StgQsrPos", "--date", str(early)) == 0  # nothing to build: the date is out of range
    summary = caplog.text[caplog.text.index("summary of this run:") :]
    assert f"  StgQsrPos {early}: 1 left out\n" in summary, summary
    why = f"before [daybreak] start_date {START}: a run builds no date before it; a partition there is kept as built"
    assert f"  left out StgQsrPos {early}: {why}" in summary, summary
    assert not lab.partition(early).exists()
    caplog.clear()
    assert lab.range(START - 2 * DAY, START + DAY) == 0
    summary = caplog.text[caplog.text.index("summary of this run:") :]
    assert f"  StgQsrPos {START - 2 * DAY} .. {START}: 1 ran, 2 left out\n" in summary, summary
    assert f"  left out StgQsrPos {START - 2 * DAY} .. {START - DAY}: {why}" in summary, summary


# -- a store file re-sent with its header only -----------------------------------------------------------


def test_dates_left_by_rangedailys_task_limit_are_not_run_and_exit_25(lab, setting, caplog):
    """Luigi's RangeDaily requires task_limit missing dates only: the others were counted as not handed to this
    host by luigid (there is none) and the run exited 0. Now they are not run, with the limit as the reason."""
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 6)
    caplog.set_level("INFO", logger="luigi-interface")
    assert lab.range(START, START + 6 * DAY, "--task-limit", "2") == 25  # [retcode] not_run
    text = caplog.text
    assert f"[RangeDaily] task_limit 2 leaves 4 of its 6 dates to build for the next run ({START + 2 * DAY} .. " in text
    assert f"  not run  StgQsrPos {START + 2 * DAY} (RangeDaily left it for the next run, its task_limit 2: " in text
    assert "luigid gave it to another host" not in text, text
    assert lab.range(START, START + 6 * DAY) == 0


def test_dates_before_rangedailys_days_back_are_named_as_left_out(lab, setting, caplog):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4)
    back = (dt.datetime.now(dt.UTC).date() - (START + 2 * DAY)).days + 1  # START and the day after: further back
    caplog.set_level("INFO", logger="luigi-interface")
    assert lab.range(START, START + 4 * DAY, "--days-back", str(back)) == 0
    assert f"2 of 4 dates left out ({START} .. {START + DAY}): RangeDaily checks no date before " in caplog.text
    assert f"([RangeDaily] days_back {back})" in caplog.text


def test_a_store_file_resent_header_only_is_named_in_the_summary_and_in_status(lab, setting, capsys, caplog):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 2)
    assert lab.range(START, START + 2 * DAY) == 0
    day = START + DAY
    # date `day` reads S001's lines of folder `day` after 05:00 (2) and of folder `day`+1 before (2)
    resent = [lab.qsr_file(str(day + k * DAY), "S001", []) for k in (0, 1)]  # header only: the contract allows it
    caplog.clear()
    assert lab.range(START, START + 2 * DAY) == 0
    summary = caplog.text[caplog.text.index("summary of this run:") :]
    line = f"  warning  StgQsrPos {day}: store S001 had 4 rows in an earlier build of {day} and has none now"
    assert line in summary, summary
    assert (
        f"(its files qsr_pos/{day}/S001.csv, qsr_pos/{day + DAY}/S001.csv hold no rows of the date; one re-sent"
        in summary
    )
    assert f"StgQsrPos {START}: store" not in summary  # START keeps 2 of S001's 4 rows
    capsys.readouterr()
    assert cli.main(["status", "--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(START + 2 * DAY)]) == 0
    out = capsys.readouterr().out
    assert "2 ok; 1 warning(s)" in out
    assert f"  {day} warning: store S001 had 4 rows in an earlier build of {day} and has none now" in out
    lab.qsr_file(str(day), "S002", [*qsr_rows("S002", day)[:3]])  # another change: the warning is kept
    caplog.clear()
    assert lab.range(START, START + 2 * DAY) == 0
    again = caplog.text[caplog.text.index("summary of this run:") :]
    assert "store S001 had 4 rows" not in again, again  # said by the run it happened in; status keeps it
    assert cli.main(["status", "--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(START + 2 * DAY)]) == 0
    assert f"  {day} warning: store S001 had 4 rows" in capsys.readouterr().out
    resent[0].write_text(resent[0].read_text() + "\n".join(qsr_rows("S001", day)) + "\n")  # re-sent whole
    assert lab.range(START, START + 2 * DAY) == 0
    assert cli.main(["status", "--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(START + 2 * DAY)]) == 0
    assert "warning" not in capsys.readouterr().out


def test_a_stores_day_file_resent_header_only_is_named_though_its_small_hours_remain(lab, setting, capsys, caplog):
    """S001's file of folder d re-sent with its header only, its file of d+1 (d's small hours) as it was: the
    store keeps 2 rows of d, so it is not emptied, yet it lost its day. Before: no warning at all."""
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 2)
    assert lab.range(START, START + 2 * DAY) == 0
    day = START + DAY
    lab.qsr_file(str(day), "S001", [])  # header only
    caplog.clear()
    assert lab.range(START, START + 2 * DAY) == 0
    summary = caplog.text[caplog.text.index("summary of this run:") :]
    line = f"  warning  StgQsrPos {day}: store S001's file qsr_pos/{day}/S001.csv gave 2 rows of {day} in an earlier"
    assert line in summary and "gives none now (re-sent with its header only?)" in summary, summary
    capsys.readouterr()
    assert cli.main(["status", "--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(START + 2 * DAY)]) == 0
    assert f"  {day} warning: store S001's file qsr_pos/{day}/S001.csv gave 2 rows" in capsys.readouterr().out
    lab.qsr_file(str(day), "S001", qsr_rows("S001", day))  # re-sent whole: the warning goes
    assert lab.range(START, START + 2 * DAY) == 0
    assert cli.main(["status", "--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(START + 2 * DAY)]) == 0
    assert "warning" not in capsys.readouterr().out


def test_a_rules_change_that_moves_a_stores_rows_to_another_date_is_no_emptied_store(lab, setting, capsys, caplog):
    """Before: ``store B01 had 1 rows in an earlier build of D and has none now (... one re-sent with its
    header only?)`` after ``day_start_hour = 4`` moved B01's one 04:30 line from D to D+1, kept in status for
    as long as B01 has no rows on D."""
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 2)
    day = START + DAY  # before 05:00: a line of START; before 04:00 only: one of `day`
    lab.qsr_file(str(day), "B01", [f"B1,1,B01,{day}T04:30:00-04:00,A,1,1.00,,COMPLETED"])
    assert lab.range(START, START + 2 * DAY) == 0
    setting("qsr", "day_start_hour", 4)
    caplog.clear()
    assert lab.range(START, START + 2 * DAY) == 0
    summary = caplog.text[caplog.text.index("summary of this run:") :]
    assert "2 ran" in summary and "warning" not in summary, summary
    capsys.readouterr()
    assert cli.main(["status", "--dataset", "stg_qsr_pos", *SPAN]) == 0
    out = capsys.readouterr().out
    assert "2 ok\n" in out and "warning" not in out, out


def test_a_store_whose_files_are_removed_is_named_without_the_header_only_hint(lab, setting, caplog):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 2)
    assert lab.range(START, START + 2 * DAY) == 0
    day = START + DAY
    for k in (0, 1):
        (lab.raw / "qsr_pos" / str(day + k * DAY) / "S001.csv").unlink()
    caplog.clear()
    assert lab.range(START, START + 2 * DAY) == 0
    summary = caplog.text[caplog.text.index("summary of this run:") :]
    line = f"  warning  StgQsrPos {day}: store S001 had 4 rows in an earlier build of {day} and has none now (no file"
    assert line in summary and "header only" not in summary, summary


# -- a read-only data root --------------------------------------------------------------------------------


def read_only(lab, *command: str) -> subprocess.CompletedProcess:
    """``command`` in a subprocess that sees the lab's data root mounted read-only (a mount namespace of
    its own: ``unshare -m``, root only), with a luigi.cfg pointing at the lab."""
    cfg = lab.root / "luigi.cfg"
    if not cfg.exists():
        lab.write_cfg(cfg)
    script = f'mount --bind "{lab.data}" "{lab.data}" && mount -o remount,bind,ro "{lab.data}" && exec "$@"'
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg)}
    argv = ["unshare", "-m", "sh", "-c", script, "sh", *command]
    return subprocess.run(argv, cwd=lab.root, env=env, capture_output=True, text=True, timeout=120)


def can_mount() -> bool:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o ro tmpfs /mnt"], capture_output=True)
    return probe.returncode == 0


DAYBREAK = [sys.executable, "-c", "import sys; from tasks.cli import main; sys.exit(main())"]
LUIGI = [sys.executable, "-m", "luigi", "--local-scheduler", "--module", "tasks"]


@pytest.mark.system
@pytest.mark.skipif(not can_mount(), reason="needs root and a mount namespace (unshare -m)")
def test_a_read_only_data_root_is_named_by_every_command(lab, setting):
    built(lab, setting)
    for k in range(3):
        lab.qsr_file(str(START + (2 + k) * DAY), "S001", qsr_rows("S001", START + (2 + k) * DAY))
    data = lab.partition(START) / "data.parquet"
    st, good = data.stat(), data.read_bytes()
    data.write_bytes(good[:100] + bytes([good[100] ^ 1]) + good[101:])
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))
    before = {p: p.read_bytes() for p in lab.data.rglob("*") if p.is_file()}

    run = read_only(
        lab, *LUIGI, "RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + 4 * DAY)
    )
    assert run.returncode == 30, run.stderr
    assert f"failed   StgQsrPos {START + 2 * DAY}: [Errno 30] Read-only file system" in run.stderr
    checked = read_only(lab, *DAYBREAK, "verify", *SPAN)
    assert checked.returncode == 1, checked.stderr
    assert f"MISMATCH data {data}: content differs from its manifest" in checked.stdout
    assert "1 partition(s) could not be marked stale" in checked.stdout and "read-only file system" in checked.stdout
    assert "Free space" not in checked.stdout and f"Make {lab.data} writable" in checked.stdout, checked.stdout
    assert "not marked stale: staging/qsr_pos" in checked.stdout and "stale now" not in checked.stdout
    preview = read_only(lab, *DAYBREAK, "preview", "stg_qsr_pos", *SPAN)
    assert preview.returncode == 30
    assert preview.stderr.strip() == (
        f"daybreak: error: {lab.data}/_state/preview: Read-only file system; nothing more was written, "
        "the partitions in place are kept"
    )
    for out in (run, checked, preview):
        assert "Traceback" not in out.stdout + out.stderr
    assert {p: p.read_bytes() for p in lab.data.rglob("*") if p.is_file()} == before


# -- an SFTP server down or frozen ----------------------------------------------------------------------------


def sftp_cfg(lab, sshd, threshold: int = 20) -> dict:
    from tasks.settings import write_config

    values = {"key_filename": sshd.client_key, "known_hosts": sshd.known_hosts, "retries": 1, "timeout": 2}
    roots = {"raw_root": sshd.uri(lab.raw), "data_root": lab.data, "start_date": START}
    qsr = {"suspicious_qty_threshold": threshold}
    cfg = write_config(lab.root / "sftp.cfg", {"daybreak": roots, "sftp": values, "qsr": qsr})
    return {**os.environ, "LUIGI_CONFIG_PATH": str(cfg)}


def one_line_exit_30(proc: subprocess.CompletedProcess, sshd) -> None:
    assert proc.returncode == 30, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("daybreak: error: ")]
    assert len(errors) == 1, proc.stderr
    assert f"sftp://{sshd.user}@127.0.0.1:{sshd.port}/" in errors[0], errors
    assert "server not answering" in errors[0], errors
    assert "store" not in proc.stderr, proc.stderr  # the raw zone's server failed: no store in this setup
    # down before the command started: the line every command gives, no retry line before it, nothing said to
    # have failed during the run, and Daybreak's summary (a luigi run), not Luigi's
    assert errors[0].startswith(f"daybreak: error: sftp://{sshd.user}@"), errors
    for wrong in ("retrying", "during the run", "Luigi Execution Summary", "no Daybreak summary"):
        assert wrong not in proc.stdout + proc.stderr, proc.stderr
    if "summary of this run" in proc.stderr:
        assert "the raw zone's SFTP server was not answering when the run started" in proc.stderr, proc.stderr


@pytest.mark.system
def test_a_server_down_when_a_command_starts_is_one_line_and_exit_30(lab, sshd):
    lab.qsr_days(START, 3)
    span = ["--start", str(START), "--stop", str(START + 2 * DAY)]
    first = [*LUIGI, "RangeDaily", "--of", "StgQsrPos", *span]
    assert subprocess.run(first, cwd=lab.root, env=sftp_cfg(lab, sshd), capture_output=True).returncode == 0
    env = sftp_cfg(lab, sshd, threshold=2)  # every partition stale: the preview builds them
    made = subprocess.run(
        [*DAYBREAK, "preview", "stg_qsr_pos", *span], cwd=lab.root, env=env, capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    pid = made.stdout.split()[1]
    sshd.stop()
    commands = [
        [*LUIGI, "RangeDaily", "--of", "StgQsrPos", *span],
        [*LUIGI, "StgQsrPos", "--date", str(START)],
        [*DAYBREAK, "status"],
        [*DAYBREAK, "plan", "stg_qsr_pos", *span],
        [*DAYBREAK, "verify", *span],
        [*DAYBREAK, "preview", "stg_qsr_pos", *span],
        [*DAYBREAK, "publish", pid],
    ]
    for command in commands:
        proc = subprocess.run(command, cwd=lab.root, env=env, capture_output=True, text=True, timeout=120)
        one_line_exit_30(proc, sshd)
        assert "(unable to connect to port" in proc.stderr, command
    assert len(list((lab.data / "staging" / "qsr_pos").glob("*/_manifest.json"))) == 2


def test_an_object_store_gone_from_the_raw_buckets_and_the_data_roots_is_one_line_naming_both(lab, monkeypatch):
    """Raw files in one bucket, the data root in another, on one endpoint that stops answering: most
    partitions fail listing the raw bucket, one the data root's. The run's one line for the endpoint names
    both buckets, not only the one whose request failed first."""
    from tasks.qsr import StgQsrPos
    from tasks.reporting import runlog
    from tasks.storage.s3 import Bucket, StoreError
    from tests.sshd import free_port

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "daybreak")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "daybreak")
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    failures = []
    for uri in ("s3://lake2/d", "s3://landing2/pos", "s3://landing2/pos"):
        with pytest.raises(StoreError) as caught:
            Bucket(uri, endpoint=endpoint, region="default").list("qsr_pos/")
        failures.append(caught.value)
    runlog.report()  # what earlier runs of this process left unreported
    tasks = [StgQsrPos(date=START + i * DAY) for i in range(3)]
    runlog.watch([(task, False) for task in tasks])
    for task, failure in zip(tasks, failures, strict=True):
        runlog.failed(task, failure)
    errors, _ = runlog.report()
    assert len(errors) == 1, errors
    assert endpoint in errors[0] and "lake2" in errors[0] and "landing2" in errors[0], errors


@pytest.mark.system
def test_a_server_down_while_luigi_checks_a_range_is_one_line_the_summary_and_exit_30(lab, sshd):
    """The range built, then the SFTP server stops: RangeDaily's check (StgQsrPos.bulk_complete) lists the
    raw zone and fails. The run ends as when the server goes away during the builds: the line, Daybreak's
    summary naming the range, exit 30; not Luigi's warning with a traceback."""
    lab.qsr_days(START, 3)
    command = [*LUIGI, "RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + 2 * DAY)]
    env = sftp_cfg(lab, sshd)
    assert subprocess.run(command, cwd=lab.root, env=env, capture_output=True).returncode == 0
    sshd.stop()
    proc = subprocess.run(command, cwd=lab.root, env=env, capture_output=True, text=True, timeout=120)
    one_line_exit_30(proc, sshd)
    assert "Will not run" not in proc.stderr and "Luigi Execution Summary" not in proc.stderr, proc.stderr
    summary = proc.stderr[proc.stderr.index("summary of this run:") :].splitlines()
    assert summary[1:] == [
        f"  not run  StgQsrPos {START} .. {START + DAY} (the raw zone's SFTP server was not answering when the run "
        "started)"
    ], proc.stderr
    one = subprocess.run(
        [*LUIGI, "StgQsrPos", "--date", str(START)], cwd=lab.root, env=env, capture_output=True, text=True, timeout=120
    )
    one_line_exit_30(one, sshd)
    assert f"not run  StgQsrPos {START} (the raw zone's SFTP server was not answering" in one.stderr, one.stderr


@pytest.mark.system
def test_a_server_down_when_a_snapshot_never_built_runs_is_one_line_the_summary_and_exit_30(lab, sshd):
    """OtbByStayDate, never built, reads the raw zone's listing to know its requirements; AllStores, to know
    the stores: the same line and summary as a partition's check."""
    lab.qsr_days(START, 2)
    env = sftp_cfg(lab, sshd)
    sshd.stop()
    for task in ("OtbByStayDate", "AllStores"):
        proc = subprocess.run([*LUIGI, task], cwd=lab.root, env=env, capture_output=True, text=True, timeout=120)
        one_line_exit_30(proc, sshd)
        summary = proc.stderr[proc.stderr.index("summary of this run:") :].splitlines()
        assert [line.split(" (")[0] for line in summary[1:]] == [f"  not run  {task}"], proc.stderr


@pytest.mark.system
def test_a_server_frozen_mid_backfill_fails_the_remaining_dates_at_once(lab, sshd):
    """timeout 2 s, 1 retry: a date that waits out the frozen server takes over 4 s; eight took 134 s
    at the default settings before the server was given up on."""
    stores = tuple(f"S{k:03d}" for k in range(1, 31))
    lab.qsr_days(START, 8, stores)
    env = sftp_cfg(lab, sshd)
    command = [*LUIGI, "RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + 8 * DAY)]
    t0 = time.monotonic()
    proc = subprocess.Popen(command, cwd=lab.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while not list((lab.data / "staging" / "qsr_pos").glob("*/_manifest.json")) and proc.poll() is None:
        time.sleep(0.005)
    sshd.signal(signal.SIGSTOP)  # frozen, the sessions already open too: connections are accepted, nothing answers
    frozen = time.monotonic()
    out, err = proc.communicate(timeout=300)
    took = time.monotonic() - frozen
    assert proc.returncode == 30, err
    done = {p.parent.name for p in (lab.data / "staging" / "qsr_pos").glob("*/_manifest.json")}
    assert len(done) <= 4, done  # the freeze came early enough to leave several dates
    assert f"StgQsrPos {START} .. {START + 7 * DAY}: {len(done)} ran, {8 - len(done)} failed" in err, err
    assert "server not answering" in err and "not tried again in this run" in err
    assert took < 4.5 + 2 * 4, f"{took:.1f} s after the freeze ({time.monotonic() - t0:.1f} s in all)"
    assert "Traceback" not in out + err
    sshd.signal(signal.SIGCONT)  # the server back: the dates left are missing, not "failed" (nothing of theirs failed)
    span = ["--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(START + 8 * DAY)]
    shown = subprocess.run(
        [sys.executable, "-m", "tasks.cli", "status", *span], cwd=lab.root, env=env, capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    assert f"\n  {len(done)} ok, {8 - len(done)} missing\n" in shown.stdout, shown.stdout


# -- previews of damaged, busy and half-published data -------------------------------------------------------


def test_a_preview_over_a_damaged_production_partition_builds_and_says_so(threshold_lab, capsys):
    from tasks import preview

    data = threshold_lab.partition(D1) / "data.parquet"
    data.write_bytes(b"not parquet at all")
    record, code = preview.make("stg_qsr_pos", D1, STOP)
    assert code == 0 and record["state"] == "open"
    first = record["datasets"]["stg_qsr_pos"]["partitions"][0]
    assert first["date"] == str(D1) and first["rows_before"] == 0 and first["added"] == 6
    assert "production's partition could not be read" in preview.render(record)
    assert preview.publish(record["id"])[0] == 0
    assert threshold_lab.range(D1, STOP) == 0 and data.read_bytes() != b"not parquet at all"


def test_previews_with_keep_days_0_never_sweeps_a_preview_being_built(threshold_lab, capsys, setting):
    from tasks import preview
    from tasks.storage import partitions

    record, _ = preview.make("stg_qsr_pos", D1, STOP)
    folder = Path(preview.folder_of(record["id"]).uri)
    setting("daybreak", "preview_keep_days", 0)
    with partitions.exclusive(folder / preview.PUBLISH_LOCK):  # what `daybreak preview` holds while it builds
        capsys.readouterr()
        assert cli.main(["previews"]) == 0
        assert folder.is_dir() and record["id"] in capsys.readouterr().out
        assert cli.main(["discard", record["id"]]) == 2
        assert "is being built or published now; not discarded" in capsys.readouterr().err
    assert cli.main(["previews"]) == 0
    assert not folder.exists()


def test_a_half_published_preview_is_listed_so_and_not_discarded(threshold_lab, capsys):
    from tasks import preview
    from tasks.storage.partitions import plain_store

    record, _ = preview.make("stg_qsr_pos", D1, STOP)
    folder = Path(preview.folder_of(record["id"]).uri)
    production = plain_store(threshold_lab.data, "staging/qsr_pos")
    production.copy_partition_from(D1, plain_store(folder, "staging/qsr_pos"))  # what a publish killed after D1 leaves
    listed = preview.listing()[0]
    assert listed["state"] == "half published (1 of 3 in production)"
    assert "half published (1 of 3 in production)" in preview.render_listing([listed])
    capsys.readouterr()
    assert cli.main(["discard", record["id"]]) == 2
    err = capsys.readouterr().err
    assert f"is half published (1 of 3 partitions are in production, e.g. staging/qsr_pos/business_date={D1})" in err
    assert f"daybreak publish {record['id']}" in err
    assert folder.is_dir()
    assert preview.publish(record["id"])[0] == 0  # finishes it
    assert threshold_lab.range(D1, STOP) == 0
    assert threshold_lab.rebuilt_by(lambda: threshold_lab.range(D1, STOP)) == set()


def test_verify_names_the_run_that_rebuilds_each_kind_of_dataset_it_marked_stale():
    from tasks.verify import Report, render

    report = Report(mismatches={"stray x": ["staging/qsr_pos 2026-09-02"], "data y": ["marts/store_daily_sales S001"]})
    report.runs = {"RangeDaily": ["stg_qsr_pos"], "AllStores": ["store_daily_sales"]}
    assert render(report).splitlines()[-1] == (
        "the partitions named are marked stale: the next RangeDaily (stg_qsr_pos) and AllStores (store_daily_sales) "
        "rebuild them"
    )
