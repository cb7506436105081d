"""Usage and configuration errors get one clear line and exit 2, from every command (issue 15, items
6, 7, 8, 10, 12 and 14): a raw_root that does not exist, a reversed range, a misspelled or out-of-range
setting, a wrong task name or date; dates left out of a range are counted, a stray future folder is
clamped; a failure reason is kept whole and shortened only for display.

The ``luigi`` and ``daybreak`` commands run as a user runs them: in a subprocess, from a folder of their
own with its luigi.cfg (not the lab's root: the in-process tests' working directory).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasks.cli import SAMPLE_INTERRUPTED, main
from tasks.guard import INTERRUPTED
from tasks.settings import day_in_progress
from tasks.views import plan, status
from tests.conftest import REPO, Lab

pytestmark = pytest.mark.luigi

START = dt.date(2026, 9, 10)
DAY = dt.timedelta(days=1)
REVERSED = "--start 2026-09-15 is after --stop 2026-09-12"


def folder_cfg(lab: Lab, text: str | None = None, name: str = "cron") -> Path:
    """A working folder of its own with a luigi.cfg (``text``, default: the lab's two roots)."""
    folder = lab.root / name
    folder.mkdir(exist_ok=True)
    if text is not None or name == "cron":
        cfg = text if text is not None else f"[daybreak]\nraw_root = {lab.raw}\ndata_root = {lab.data}\n"
        (folder / "luigi.cfg").write_text(cfg)
    return folder


def run(folder: Path, *args: str, luigi: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PATH"}
    cmd = [sys.executable, "-m", "luigi", "--module", "tasks", *args, "--local-scheduler"]
    if not luigi:
        cmd = [sys.executable, "-m", "tasks.cli", *args]
    return subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def one_line(proc: subprocess.CompletedProcess, expected: str) -> None:
    """Exit 2, the message on stderr, no traceback."""
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert expected in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


# -- item 6: a raw_root that does not exist -----------------------------------------------------------

COMMANDS = [
    ("StgQsrPos", "--date", str(START)),
    ("RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + 3 * DAY)),
    ("RangeSingleRun", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + 3 * DAY)),
    ("OtbByStayDate",),
    ("AllStores",),
    ("MorningRefresh",),
]


@pytest.mark.system
def test_every_command_names_a_missing_raw_root_and_the_file_that_sets_it(lab):
    nowhere = lab.root / "nowhere"
    cron = folder_cfg(lab, f"[daybreak]\nraw_root = {nowhere}\ndata_root = {lab.data}\n")
    expected = f"raw_root {nowhere} does not exist (from [daybreak] raw_root in {cron / 'luigi.cfg'})"
    for args in COMMANDS:
        one_line(run(cron, *args), expected)
    one_line(run(cron, "plan", "stg_qsr_pos", "--start", str(START), "--stop", str(START + DAY), luigi=False), expected)
    one_line(run(cron, "status", luigi=False), expected)
    assert not lab.data.exists()  # nothing ran


@pytest.mark.system
def test_the_built_in_default_raw_root_is_named_as_such(lab):
    bare = folder_cfg(lab, name="bare")  # no luigi.cfg: raw_root is data/raw of the working directory
    expected = f"raw_root data/raw ({bare / 'data/raw'}) does not exist (from the built-in default"
    one_line(run(bare, "StgQsrPos", "--date", str(START)), expected)
    one_line(run(bare, "status", luigi=False), expected)


@pytest.mark.system
@pytest.mark.parametrize("inside", ["raw", "raw/data"])
def test_a_data_root_in_the_raw_zone_is_refused_before_anything_is_written(lab, inside):
    """``data_root`` equal to ``raw_root`` or below it would write outputs among the raw files (which
    Daybreak never changes): every command refuses it, naming both paths and the file that sets it."""
    lab.qsr_days(START, 2)
    before = sorted(p for p in lab.raw.rglob("*"))
    data = lab.root / inside
    cron = folder_cfg(lab, f"[daybreak]\nraw_root = {lab.raw}\ndata_root = {data}\n")
    where = "the raw zone" if inside == "raw" else "inside the raw zone"
    expected = f"data_root {data} is {where} (raw_root {lab.raw}; [daybreak] data_root from {cron / 'luigi.cfg'})"
    for args in COMMANDS[:3]:
        one_line(run(cron, *args), expected)
    one_line(run(cron, "status", luigi=False), expected)
    assert sorted(p for p in lab.raw.rglob("*")) == before  # nothing written into the raw zone


@pytest.mark.system
@pytest.mark.parametrize("raw", ["data/staging", "data/marts/x", "data/_state"])
def test_a_raw_zone_where_outputs_are_written_is_refused_before_anything_is_written(lab, raw):
    """The other way round: ``raw_root = <data_root>/staging`` was accepted, and the outputs were written
    into the raw zone. ``<data_root>/raw`` (the default layout) is fine."""
    raw_root = lab.root / raw
    raw_root.mkdir(parents=True)
    (raw_root / "qsr_pos" / str(START)).mkdir(parents=True)
    before = sorted(lab.root.rglob("*"))
    cron = folder_cfg(lab, f"[daybreak]\nraw_root = {raw_root}\ndata_root = {lab.data}\n")
    out = lab.data / raw.split("/")[1]
    where = "" if raw_root == out else "inside "
    expected = (
        f"raw_root {raw_root} is {where}{out}, where Daybreak writes its outputs ([daybreak] raw_root from "
        f"{cron / 'luigi.cfg'}): they would be written among the raw files"
    )
    for args in COMMANDS[:3]:
        one_line(run(cron, *args), expected)
    one_line(run(cron, "status", luigi=False), expected)
    assert sorted(lab.root.rglob("*")) == sorted([*before, cron, cron / "luigi.cfg"])  # nothing written


@pytest.mark.system
def test_a_misspelled_section_and_a_missing_config_file_are_errors(lab):
    """A section one edit from a Daybreak section is a typo whose settings would be ignored; a
    LUIGI_CONFIG_PATH that names no file would leave Luigi on its defaults. Sections of Luigi's own
    and of other tools are left alone."""
    text = f"[daybreak]\nraw_root = {lab.raw}\ndata_root = {lab.data}\n[qrs]\nsuspicious_qty_threshold = 5\n"
    text += "[worker]\nkeep_alive = false\n[retcode]\nfailed = 30\n[my_tool]\nx = 1\n"
    cron = folder_cfg(lab, text)
    expected = f"unknown section [qrs] in {cron / 'luigi.cfg'}; did you mean [qsr]?"
    one_line(run(cron, "status", luigi=False), expected)
    one_line(run(cron, "StgQsrPos", "--date", str(START)), expected)
    (cron / "luigi.cfg").write_text(text.replace("[qrs]", "[qsr]"))
    assert "unknown section" not in run(cron, "status", luigi=False).stderr
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cron / "nosuch.cfg")}
    proc = subprocess.run(
        [sys.executable, "-m", "tasks.cli", "status"], cwd=cron, env=env, capture_output=True, text=True, timeout=300
    )
    one_line(proc, f"LUIGI_CONFIG_PATH={cron / 'nosuch.cfg'}: no such file")


@pytest.mark.system
def test_an_sftp_raw_root_is_checked_on_connect(lab, tmp_path):
    from tasks.settings import write_config
    from tests.sshd import Sshd

    server = Sshd(tmp_path / "sshd").start()
    try:
        uri = server.uri(lab.root / "nowhere")
        sftp = {"key_filename": server.client_key, "known_hosts": server.known_hosts, "retries": 1}
        write_config(
            folder_cfg(lab) / "luigi.cfg", {"daybreak": {"raw_root": uri, "data_root": lab.data}, "sftp": sftp}
        )
        proc = run(lab.root / "cron", "StgQsrPos", "--date", str(START))
    finally:
        server.stop()
    one_line(proc, f"raw_root {uri} does not exist on the server (from [daybreak] raw_root in ")


# -- item 7: a reversed range -------------------------------------------------------------------------


def test_a_reversed_range_is_the_same_error_everywhere(lab, capsys):
    lab.qsr_days(START, 6)
    start, stop = START + 5 * DAY, START + 2 * DAY
    assert lab.range(start, stop) == 2
    assert REVERSED in capsys.readouterr().err
    assert lab.luigi("RangeSingleRun", "--of", "StgQsrPos", "--start", str(start), "--stop", str(stop)) == 2
    assert REVERSED in capsys.readouterr().err
    assert main(["plan", "stg_qsr_pos", "--start", str(start), "--stop", str(stop)]) == 2
    assert REVERSED in capsys.readouterr().err
    assert main(["status", "--start", str(start), "--stop", str(stop)]) == 2
    assert REVERSED in capsys.readouterr().err
    assert not lab.data.exists()
    assert lab.range(start, start) == 0  # start == stop: an empty range, not an error


@pytest.mark.system
def test_a_reversed_range_from_the_luigi_command_is_one_line(lab):
    lab.qsr_days(START, 6)
    cron = folder_cfg(lab)
    for family in ("RangeDaily", "RangeSingleRun"):
        proc = run(cron, family, "--of", "StgQsrPos", "--start", str(START + 5 * DAY), "--stop", str(START + 2 * DAY))
        one_line(proc, REVERSED)


@pytest.mark.system
@pytest.mark.parametrize("flags", [("--days-back", "7"), ("--stop", str(START + DAY)), ()])
def test_a_range_without_start_from_the_luigi_command_is_one_line(lab, flags):
    """Before, Luigi logged its ParameterException with a traceback and the command exited 0."""
    lab.qsr_days(START, 2)
    proc = run(folder_cfg(lab), "RangeDaily", "--of", "StgQsrPos", *flags)
    one_line(proc, "RangeDaily needs --start (with --days-back N: its last N days)")
    assert not lab.data.exists()


NOT_BY_DATE = [
    (
        "HotelPickup",
        "HotelPickup (hotel_pickup) is partitioned by date and hotel, not by date alone: run AllHotelsPickup "
        f'--start {START} --stop {START + 3 * DAY} (every hotel), or give --of-params \'{{"hotel": "H1"}}\'',
    ),
    (
        "OtbByStayDate",
        "OtbByStayDate (otb_by_stay_date) is one partition for every date, not one per date: run OtbByStayDate",
    ),
    (
        "HotelOtbExport",
        "HotelOtbExport (hotel_otb_export) is one partition per hotel, not per date: run "
        "HotelOtbExport --hotel H (each hotel of the hotels list)",
    ),
    (
        "StoreDailySales",
        "StoreDailySales (store_daily_sales) is one partition per store, not per date: run AllStores (every store)",
    ),
]


@pytest.mark.system
@pytest.mark.parametrize("family", ["RangeDaily", "RangeSingleRun"])
@pytest.mark.parametrize(("of", "expected"), NOT_BY_DATE)
def test_a_range_of_a_family_not_partitioned_by_date_alone_is_one_line(lab, family, of, expected):
    """Before, RangeDaily gave a traceback and exit 35 (HotelPickup, OtbByStayDate), or took a date for the
    hotel or the store id (``--hotel datetime.date(2026, 9, 1): not a hotel``)."""
    lab.qsr_days(START, 3)
    proc = run(folder_cfg(lab), family, "--of", of, "--start", str(START), "--stop", str(START + 3 * DAY))
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [f"daybreak: error: {family}: {expected}"], proc.stderr[-3000:]
    assert not lab.data.exists()


# -- item 8: settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "suspicious_qty_treshold = 30",
            "unknown setting [qsr] suspicious_qty_treshold in {cfg}; did you mean suspicious_qty_threshold?",
        ),
        ("max_reject_share = 2", "[qsr] max_reject_share = '2' in {cfg}: out of range: expected from 0 to 1"),
        (
            "suspicious-qty-threshold = 30",  # Luigi would take another file's suspicious_qty_threshold first
            "[qsr] suspicious-qty-threshold in {cfg}: write it suspicious_qty_threshold, with underscores",
        ),
        ("suspicious_qty_threshold = abc", "[qsr] suspicious_qty_threshold = 'abc' in {cfg}: expected a whole number"),
        ("timezone = Mars/Olympus", "[qsr] timezone = 'Mars/Olympus' in {cfg}: not an IANA timezone"),
        # these were accepted (Python knows them), then every partition failed in Arrow's words, exit 30
        ("timezone = Factory", "[qsr] timezone = 'Factory' in {cfg}: tzdata's placeholder"),
        ("timezone = right/UTC", "[qsr] timezone = 'right/UTC' in {cfg}: tzdata's copy of UTC"),
        # accepted, and the business dates followed the host's /etc/localtime
        ("timezone = localtime", "[qsr] timezone = 'localtime' in {cfg}: the time zone of the host it runs on"),
    ],
)
@pytest.mark.system
def test_a_bad_setting_names_the_file_the_section_and_the_key(lab, line, expected):
    lab.qsr_days(START, 2)
    cron = folder_cfg(lab, f"[daybreak]\nraw_root = {lab.raw}\ndata_root = {lab.data}\n[qsr]\n{line}\n")
    message = expected.format(cfg=cron / "luigi.cfg")
    for proc in (
        run(cron, "StgQsrPos", "--date", str(START)),
        run(cron, "RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + DAY)),
        run(cron, "status", luigi=False),
    ):
        one_line(proc, message)
        assert "default" not in proc.stderr
        assert "not consumed" not in proc.stderr  # Luigi's own warning of the same key, said before ours
    assert not lab.data.exists()


@pytest.mark.system
def test_every_unknown_key_of_every_daybreak_section_is_reported_at_once(lab):
    cron = folder_cfg(
        lab,
        f"[daybreak]\nraw_root = {lab.raw}\ndata_root = {lab.data}\nlock_wait = 5\n"
        "[ads]\nrestatement_day = 3\n[hotels]\nmax_reject_shares = 0.1\n[sftp]\nretries = -1\n",
    )
    proc = run(cron, "status", luigi=False)
    for text in (
        "[daybreak] lock_wait in",
        "did you mean lock_wait_s?",
        "[ads] restatement_day in",
        "did you mean restatement_days?",
        "[hotels] max_reject_shares in",
        "[sftp] retries = '-1' in",
    ):
        one_line(proc, text)


# -- item 10: dates that have not begun or ended -------------------------------------------------------


@pytest.mark.parametrize(
    ("utc", "hour", "expected"),
    [
        ("2026-12-07T05:59", 5, "2026-12-06"),  # 00:59 in Toronto: the 6th runs to 04:59
        ("2026-12-07T09:59", 5, "2026-12-06"),  # 04:59
        ("2026-12-07T10:00", 5, "2026-12-07"),  # 05:00: the 7th begins
        ("2026-12-07T05:00", 0, "2026-12-07"),  # a day that starts at midnight: the local date
        ("2026-12-07T04:59", 0, "2026-12-06"),
        ("2026-07-07T08:59", 5, "2026-07-06"),  # 04:59 in summer time (-04:00)
    ],
)
def test_the_business_day_in_progress_ends_at_day_start_hour_in_the_business_timezone(setting, utc, hour, expected):
    setting("qsr", "day_start_hour", hour)
    now = dt.datetime.fromisoformat(utc).replace(tzinfo=dt.UTC)
    assert day_in_progress(now) == dt.date.fromisoformat(expected)


@pytest.mark.system
def test_plan_and_range_runs_say_how_many_future_dates_they_leave_out(lab):
    today = day_in_progress()
    lab.qsr_days(today - 4 * DAY, 3)
    single = plan.make_plan("stg_qsr_pos", today - 2 * DAY, today + 3 * DAY, workers=1)
    assert single.left_out == [today + k * DAY for k in range(3)]
    assert "3 of 5 dates left out" in plan.render(single) and f"today is {today}" in plan.render(single)

    cron = folder_cfg(lab)
    utc_today = dt.datetime.now(dt.UTC).date()  # RangeDaily's own dates end at the last whose midnight (UTC) passed
    proc = run(
        cron, "RangeDaily", "--of", "StgQsrPos", "--start", str(utc_today - DAY), "--stop", str(utc_today + 4 * DAY)
    )
    later = (utc_today + 4 * DAY - today).days  # as plan's: the business days not over, from today (Toronto) on
    assert f"RangeDaily StgQsrPos: {later} of 5 dates left out ({today} .. {utc_today + 3 * DAY})" in proc.stderr
    assert f"today is {today}" in proc.stderr
    proc = run(cron, "RangeSingleRun", "--of", "StgQsrPos", "--start", str(today - DAY), "--stop", str(today + 2 * DAY))
    assert f"RangeSingleRun StgQsrPos: 2 of 3 dates left out ({today} .. {today + DAY})" in proc.stderr


def test_plan_names_each_stretch_of_dates_it_leaves_out_with_its_own_reason(lab, setting):
    """start_date moved later, and a range into today: the dates before start_date and the days not over are two
    stretches, each with its reason, not one span over the dates between them, which the run builds."""
    today = day_in_progress()
    setting("daybreak", "start_date", today - 3 * DAY)
    lab.qsr_days(today - 3 * DAY, 3)
    made = plan.make_plan("stg_qsr_pos", today - 6 * DAY, today + 2 * DAY)
    left = [line.strip() for line in plan.render(made).splitlines() if "dates left out" in line]
    assert len(left) == 2, left
    assert left[0].startswith(f"3 of 8 dates left out ({today - 6 * DAY} .. {today - 4 * DAY}): "), left
    assert f"start_date {today - 3 * DAY}" in left[0], left
    assert left[1].startswith(f"2 of 8 dates left out ({today} .. {today + DAY}): "), left
    assert f"today is {today}" in left[1], left
    assert [d for d, *_ in made.runs] == [today - 3 * DAY, today - 2 * DAY, today - DAY]


def test_a_stray_future_folder_is_ignored_and_named(lab, caplog, setting):
    """A folder dated after tomorrow neither stretches a range nor makes one wait: the newest folder
    dated up to tomorrow counts. (It used to be clamped to tomorrow, so OtbByStayDate waited every day
    for the folders up to tomorrow, exit 20.)"""
    from tasks.hotels import OtbByStayDate
    from tasks.store_marts import AllStores

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 2)
    lab.hotel_days(START, 3)
    lab.qsr_file("2099-01-01", "S001", [])
    (lab.raw / "hotel_bookings" / "2099-01-01").mkdir(parents=True)
    with caplog.at_level("WARNING", logger="luigi-interface"):
        assert status.default_stop() == START + 3 * DAY  # the day after the newest real folder, qsr_pos's
        assert OtbByStayDate().dates() == [START, START + DAY, START + 2 * DAY]
        assert AllStores().requires()[0].stop == START + 3 * DAY
    assert "qsr_pos/2099-01-01 is dated after tomorrow" in caplog.text
    assert "hotel_bookings/2099-01-01 is dated after tomorrow" in caplog.text
    assert f"the newest folder counted is {START + 2 * DAY}" in caplog.text
    assert lab.luigi("OtbByStayDate") == 0
    assert (lab.data / "marts/otb_by_stay_date/_manifest.json").exists()


# -- item 12: wrong names and values of the luigi command, and a closed pipe ----------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("StgQsrP", "--date", str(START)), "no task StgQsrP; did you mean StgQsrPos?"),
        (
            ("RangeDaily", "--of", "StgQsrPo", "--start", str(START), "--stop", str(START + DAY)),
            "did you mean StgQsrPos?",
        ),
        (("StgQsrPos", "--date", "2026-13-01"), "--date '2026-13-01': time data"),
        (("RangeDaily", "--of", "StgQsrPos", "--start", "2026-09-31", "--stop", str(START)), "--start '2026-09-31'"),
        (("StgQsrPos",), "StgQsrPos needs --date"),
        (("StgQsrPos", "--date", str(START), "--workers", "x"), "--workers 'x': expected a whole number"),
        (("StgQsrPos", "--date", str(START), "--workers=1.5"), "--workers '1.5': expected a whole number"),
        (("StgQsrPos", "--date", str(START), "--log-level", "NOPE"), "--log-level 'NOPE': expected one of CRITICAL,"),
    ],
)
@pytest.mark.system
def test_a_wrong_task_name_or_value_is_one_short_line_and_exit_2(lab, args, expected):
    proc = run(folder_cfg(lab), *args)
    one_line(proc, expected)
    assert len(proc.stderr.splitlines()) <= 3, proc.stderr


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("scheduler_port = abc", "[core] scheduler_port = 'abc' in {cfg}: expected a whole number"),
        ("workers = 1.5", "[core] workers = '1.5' in {cfg}: expected a whole number"),
    ],
)
@pytest.mark.system
def test_a_bad_value_of_luigis_core_section_names_the_file_and_the_value(lab, line, expected):
    """Before: ``[core] scheduler_port: expected a whole number``, naming neither the file nor the value."""
    cron = folder_cfg(lab, f"[daybreak]\nraw_root = {lab.raw}\ndata_root = {lab.data}\n[core]\n{line}\n")
    proc = run(cron, "StgQsrPos", "--date", str(START))
    one_line(proc, expected.format(cfg=cron / "luigi.cfg"))
    assert proc.stderr.splitlines() == ["daybreak: error: " + expected.format(cfg=cron / "luigi.cfg")]


def test_the_daybreak_command_reads_a_date_as_luigi_does(lab, capsys):
    """``luigi ... --start 2026-9-10`` runs: ``daybreak plan`` takes the same date, not only 2026-09-10."""
    lab.qsr_days(START, 2)
    assert main(["plan", "stg_qsr_pos", "--start", "2026-9-10", "--stop", "2026-9-11"]) == 1
    assert "  run   2026-09-10  missing: no partition" in capsys.readouterr().out.splitlines()


def test_a_bad_date_of_the_daybreak_command_is_named_as_such(lab, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["plan", "stg_qsr_pos", "--start", "2026-13-01", "--stop", str(START)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument --start: '2026-13-01' is not a date (YYYY-MM-DD)" in err
    assert err.startswith("daybreak: error: plan: ") and err.count("\n") == 1, err  # one line, no usage block


@pytest.mark.system
def test_status_into_a_closed_pipe_ends_quietly(lab):
    cron = folder_cfg(lab)
    env = {k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PATH"}
    cmd = [sys.executable, "-m", "tasks.cli", "status", "--start", "2026-01-01", "--stop", "2027-01-01", "--json"]
    proc = subprocess.Popen(cmd, cwd=cron, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "["  # what `head -1` reads, then it closes the pipe
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 141, err
    assert "BrokenPipeError" not in err and "Traceback" not in err, err


# -- audit item 7: a hotel or store id that is not one ---------------------------------------------------

HOTELS = "(hotels: H1, H2, H3, H4, H5)"  # config/hotels.csv
PACKAGED = REPO / "config" / "hotels.csv"  # no config/ beside the luigi.cfg read: the package's list
STORE_ID = "a store id matches ^[A-Z0-9][A-Z0-9_-]{0,31}$ (e.g. S001)"  # the contract, section 2


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("HotelOtbExport", "--hotel", "H9"), f"--hotel 'H9': not a hotel of {PACKAGED} {HOTELS}"),
        (("HotelOtbExport", "--hotel", "../x"), f"--hotel '../x': not a hotel of {PACKAGED} {HOTELS}"),
        (("HotelOtbExport", "--hotel", "/etc"), f"--hotel '/etc': not a hotel of {PACKAGED} {HOTELS}"),
        (
            ("HotelPickup", "--hotel", "../x", "--date", str(START)),
            f"--hotel '../x': not a hotel of {PACKAGED} {HOTELS}",
        ),
        (
            ("RangeDaily", "--of", "HotelPickup", "--of-params", '{"hotel": "H1/../H9"}')
            + ("--start", str(START), "--stop", str(START + DAY)),
            f"--of-params hotel 'H1/../H9': not a hotel of {PACKAGED} {HOTELS}",  # as the user gave it
        ),
        (("StoreDailySales", "--store-id", "../../x"), f"--store-id '../../x': not a store id; {STORE_ID}"),
        (("StoreDailySales", "--store-id", "s001"), f"--store-id 's001': not a store id; {STORE_ID}"),
        (
            ("StoreDailySales", "--store-id", "S009"),
            "--store-id 'S009': not a registered store (_state/stores.json), and no file of it in the raw zone; "
            "did you mean S002? (stores: S001, S002); AllStores builds every store",
        ),
    ],
)
@pytest.mark.system
def test_an_unknown_hotel_or_a_malformed_store_id_is_one_line_and_exit_2(lab, args, expected):
    lab.qsr_days(START, 1)
    cron = folder_cfg(lab)
    before = sorted(lab.root.rglob("*"))
    proc = run(cron, *args)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [f"daybreak: error: {expected}"]  # one line, no traceback
    assert sorted(lab.root.rglob("*")) == before  # nothing written: no data root, no folder anywhere


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("../../PWN,Evil,America/Toronto,10", "hotel_id '../../PWN' does not match ^[A-Z0-9][A-Z0-9_-]{0,31}$"),
        ("H 9,Spaced,America/Toronto,10", "hotel_id 'H 9' does not match"),
        ("H1,Again,Asia/Tokyo,10", "hotel_id H1 is listed twice; keep one row"),
        # these two were ``ValueError: ZoneInfo keys must be normalized relative paths, got: `` and
        # ``ValueError: invalid literal for int() with base 10: 'abc'``
        ("H9,No zone,,10", "timezone '': not an IANA timezone (e.g. America/Toronto)"),
        ("H9,Nowhere,America/Nowhere,10", "timezone 'America/Nowhere': not an IANA timezone (e.g. America/Toronto)"),
        # these were accepted (Python knows them), then the dates holding the hotel's extracts failed in
        # Arrow's words naming neither the hotel nor the list, exit 30; localtime followed the host's clock
        ("H9,Placeholder,Factory,10", "timezone 'Factory': tzdata's placeholder for a host with no time zone set"),
        ("H9,Leap,right/UTC,10", "timezone 'right/UTC': tzdata's copy of UTC counting leap seconds"),
        ("H9,Copy,posix/America/Toronto,10", "timezone 'posix/America/Toronto': tzdata's copy of America/Toronto"),
        ("H9,Here,localtime,10", "timezone 'localtime': the time zone of the host it runs on (/etc/localtime)"),
        ("H9,Rooms,America/Toronto,abc", "rooms 'abc': not a whole number of at least 1"),
        ("H9,Rooms,America/Toronto,0", "rooms '0': not a whole number of at least 1"),
        # these two were accepted, the extra field left out; the next one was "timezone '': not an IANA timezone"
        (
            "H9,Extra,America/Toronto,220,9",
            "5 fields where the header has 4 (hotel_id,name,timezone,rooms): '9' is extra",
        ),
        ("H9,Short,America/Toronto", "3 fields where the header has 4 (hotel_id,name,timezone,rooms): no rooms"),
        (
            'H9,"Open quote,America/Toronto,10',
            'a field opens with a quote (") that is never closed; close it, and '
            'write a quote inside a quoted field as ""',
        ),
    ],
)
@pytest.mark.system
def test_a_hotels_list_row_whose_id_is_not_one_is_one_line_and_exit_2(lab, row, expected):
    """Before, ``../../PWN`` was a traceback from both commands (the partition store refused the folder), and a
    second H1 row silently replaced the first (every hotel date then stale: "rules changed: timezones[H1]")."""
    lab.qsr_days(START, 1)
    listed = lab.root / "hotels.csv"
    listed.write_text(PACKAGED.read_text().rstrip("\n") + "\n" + row + "\n")
    rows = len(listed.read_text().splitlines())
    cron = folder_cfg(
        lab, f"[daybreak]\nraw_root = {lab.raw}\ndata_root = {lab.data}\n[hotels]\nreference_file = {listed}\n"
    )
    message = f"daybreak: error: hotels list {listed} row {rows}: {expected}"
    for proc in (
        run(cron, "status", luigi=False),
        run(cron, "AllHotelsPickup", "--start", str(START), "--stop", str(START + DAY)),
    ):
        assert proc.returncode == 2, proc.stderr[-3000:]
        assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith(message), proc.stderr[-3000:]
    assert not lab.data.exists()


@pytest.mark.parametrize("text", ["", "hotel_id,name,timezone,rooms\n"], ids=["empty", "header-only"])
@pytest.mark.system
def test_a_hotels_list_with_no_hotel_is_one_line_and_exit_2(lab, text):
    """Before, it was an empty list: status exited 0 (``hotels:  (from ...)``) and every hotel date failed
    (``H1.csv ...: hotel not in .../hotels.csv``, exit 30)."""
    lab.hotel_days(START, 2)
    listed = lab.root / "hotels.csv"
    listed.write_text(text)
    cron = folder_cfg(
        lab, f"[daybreak]\nraw_root = {lab.raw}\ndata_root = {lab.data}\n[hotels]\nreference_file = {listed}\n"
    )
    message = (
        f"daybreak: error: hotels list {listed}: no hotel in it; write the header hotel_id,name,timezone,rooms, "
        "then a row per hotel"
    )
    for proc in (
        run(cron, "status", luigi=False),
        run(cron, "RangeDaily", "--of", "HotelBookingState", "--start", str(START), "--stop", str(START + DAY)),
    ):
        assert proc.returncode == 2, proc.stderr[-3000:]
        assert proc.stderr.splitlines() == [message], proc.stderr[-3000:]
    assert not lab.data.exists()


@pytest.mark.system
def test_a_hotels_list_saved_with_a_bom_is_read_and_a_missing_column_names_the_columns_found(lab):
    """A BOM (a spreadsheet's "CSV UTF-8") was refused: ``no column hotel_id (the columns are
    hotel_id,name,timezone,rooms)``, the found column being ``\ufeffhotel_id``."""
    lab.qsr_days(START, 1)
    listed = lab.root / "hotels.csv"
    listed.write_bytes(b"\xef\xbb\xbf" + PACKAGED.read_bytes())
    cron = folder_cfg(
        lab, f"[daybreak]\nraw_root = {lab.raw}\ndata_root = {lab.data}\n[hotels]\nreference_file = {listed}\n"
    )
    proc = run(cron, "status", luigi=False)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr and not proc.stderr, proc.stderr[-3000:]
    listed.write_text(PACKAGED.read_text().replace("timezone", "tz", 1))
    proc = run(cron, "status", luigi=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        f"daybreak: error: hotels list {listed}: no column timezone (its columns: hotel_id,name,tz,rooms; "
        "expected hotel_id,name,timezone,rooms)"
    ]


@pytest.mark.system
def test_a_raw_folder_task_names_only_a_source_of_the_contract(lab):
    """Before, ``RawFolder --source ../../elsewhere`` looked outside the raw root (exit 0 when it existed)."""
    lab.qsr_days(START, 1)
    (lab.root / "elsewhere" / str(START)).mkdir(parents=True)
    cron = folder_cfg(lab)
    proc = run(cron, "RawFolder", "--source", "../elsewhere", "--date", str(START))
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.startswith("daybreak: error: --source '../elsewhere': ../elsewhere is not a valid choice")
    assert len(proc.stderr.splitlines()) == 1, proc.stderr[-3000:]
    assert run(cron, "RawFolder", "--source", "qsr_pos", "--date", str(START)).returncode == 0


# -- item 14: a long failure reason -------------------------------------------------------------------


def test_a_long_failure_reason_is_kept_whole_and_shortened_at_a_word_for_display(lab, capsys):
    lab.qsr_days(START, 1, stores=("S001",))
    bad = [f"Q{i},1,S001,2026-09-10T12:00:00-04:00,COLA,zero,1.00,,COMPLETED" for i in range(8)]
    lab.qsr_file(START.isoformat(), "S001", bad)
    assert lab.range(START, START + DAY) == 30
    record = json.loads((lab.data / "_state/failures/staging/qsr_pos/business_date=2026-09-10.json").read_text())
    whole = record["error"]
    assert (
        len(whole) > 400
        and "no partition was written" in whole
        and whole.rstrip().endswith("row 6: qty is not an integer >= 1")
    )

    assert (
        main(["status", "--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(START + DAY), "--json"]) == 0
    )
    assert json.loads(capsys.readouterr().out)[0]["reason"] == whole

    assert main(["status", "--dataset", "stg_qsr_pos", "--start", str(START), "--stop", str(START + DAY)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "failed:" in x)
    shown = line.split("failed: ", 1)[1]
    assert shown.endswith(" ...") and len(shown) <= 300
    kept = shown.removesuffix(" ...")
    flat = " ".join(whole.split())
    assert flat.startswith(kept) and flat[len(kept)] == " "  # cut between two words


@pytest.mark.system
@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_of_the_luigi_command_is_one_line(tmp_path, workers):
    """Ctrl-C (SIGINT to the command's process group) while a task runs: one line, no traceback, and the
    exit of a command ended by SIGINT (130 in a shell)."""
    probe = [
        sys.executable,
        "-m",
        "luigi",
        "--module",
        "tests.test_task_processes",
        "_Probe",
        "--folder",
        str(tmp_path),
    ]
    command = [*probe, "--n", "1", "--sleep", "60", "--local-scheduler", "--no-lock", "--workers", workers]
    proc = subprocess.Popen(command, cwd=REPO, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "started-1").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "started-1").exists()
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode in (-signal.SIGINT, 130), err[-2000:]
    assert INTERRUPTED in err and "Traceback" not in err, err[-2000:]


@pytest.mark.system
@pytest.mark.parametrize(("sent", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_of_the_daybreak_command_is_one_line(tmp_path, sent, code):
    """Ctrl-C, or SIGTERM (kill, timeout, systemctl stop): one line, and exit 130 or 143."""
    daybreak = str(Path(sys.executable).parent / "daybreak")
    command = [daybreak, "sample", "--raw-root", str(tmp_path / "raw"), "--start", "2026-09-01", "--days", "3000"]
    proc = subprocess.Popen(command, cwd=tmp_path, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while next((tmp_path / "raw").rglob("*.csv"), None) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "the sample was written before it could be interrupted"  # 3,000 days: minutes
        os.killpg(proc.pid, sent)  # while it writes files
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == code, err[-2000:]
    assert err.strip().splitlines() == [SAMPLE_INTERRUPTED], err[-2000:]  # raw files, not partitions


@pytest.mark.system
def test_an_unknown_key_is_said_once_by_daybreak_not_first_by_luigi(lab):
    """With a start date set, ``status`` reads ``[qsr]`` (its timezone says what today is) before it checks the
    settings: Luigi's own warning that the key "is not consumed" must not come first."""
    lab.qsr_days(START, 2)
    cron = folder_cfg(
        lab,
        f"[daybreak]\nraw_root = {lab.raw}\ndata_root = {lab.data}\nstart_date = {START}\n"
        "[qsr]\nsuspicious_qty_treshold = 30\n",
    )
    for proc in (run(cron, "status", luigi=False), run(cron, "StgQsrPos", "--date", str(START))):
        one_line(proc, "unknown setting [qsr] suspicious_qty_treshold in")
        assert proc.stderr.strip().count("\n") == 0, proc.stderr


def test_an_option_is_taken_only_as_spelled_in_full(lab, capsys):
    """docs/operations.md: ``--workers``, not ``--work`` (argparse would take any unambiguous prefix)."""
    lab.qsr_days(START, 2)
    for args in (
        ["plan", "stg_qsr_pos", "--start", str(START), "--stop", str(START + DAY), "--work", "2"],
        ["status", "--data", "stg_qsr_pos"],
    ):
        with pytest.raises(SystemExit) as exit_:
            main(args)
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert "unrecognized arguments: " + " ".join(args[-2:]) in err and err.count("\n") == 1, err


@pytest.mark.system
def test_a_config_path_that_names_no_file_is_one_line(lab):
    """LUIGI_CONFIG_PATH naming no file: Daybreak's line alone, not first Luigi's warning that it does not exist."""
    cron = folder_cfg(lab)
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cron / "nonexist.cfg")}
    proc = subprocess.run(
        [sys.executable, "-m", "tasks.cli", "status"], cwd=cron, env=env, capture_output=True, text=True, timeout=300
    )
    one_line(proc, f"LUIGI_CONFIG_PATH={cron / 'nonexist.cfg'}: no such file")
    assert proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.system
def test_luigis_own_scheduler_keys_give_no_warning(lab):
    """``[core] default_scheduler_port`` (docs/scale-out.md) is read by Luigi itself: no "not consumed" warning
    from either command."""
    lab.qsr_days(START, 2)
    cron = folder_cfg(
        lab,
        f"[daybreak]\nraw_root = {lab.raw}\ndata_root = {lab.data}\n"
        "[core]\ndefault_scheduler_host = 127.0.0.1\ndefault-scheduler-port = 1\nrpc-retry-attempts = 1\n",
    )
    proc = run(cron, "plan", "stg_qsr_pos", "--start", str(START), "--stop", str(START + DAY), luigi=False)
    assert proc.returncode == 1 and "RangeDaily" in proc.stdout, proc.stderr
    assert "not consumed" not in proc.stderr, proc.stderr


def preview_under_way(lab) -> tuple[Path, Path, subprocess.Popen]:
    """(its folder, the previews' folder, the process) of a ``daybreak preview`` of 60 dates x 20 stores,
    once it has written its first partition; the caller stops it."""
    lab.qsr_days(START, 60, stores=tuple(f"S{i:03d}" for i in range(1, 21)))
    cron = folder_cfg(lab)
    command = [sys.executable, "-m", "tasks.cli", "preview", "stg_qsr_pos", "--start", str(START)]
    command += ["--stop", str(START + 60 * DAY)]
    env = {k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PATH"}
    proc = subprocess.Popen(command, cwd=cron, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    previews = lab.data / "_state" / "preview"
    try:
        deadline = time.monotonic() + 120
        while not list(previews.glob("*/staging/qsr_pos/*/_manifest.json")) and time.monotonic() < deadline:
            time.sleep(0.05)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return cron, previews, proc


@pytest.mark.system
def test_ctrl_c_of_a_preview_says_the_preview_was_removed(lab):
    """A preview stopped half-way is removed whole: the line says so, not "run again to build the rest"."""
    from tasks.cli import PREVIEW_INTERRUPTED

    cron, previews, proc = preview_under_way(lab)
    try:
        assert proc.poll() is None, "the preview was made before it could be interrupted"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, err[-2000:]
    assert err.strip().splitlines()[-1] == PREVIEW_INTERRUPTED, err[-2000:]
    assert not [p for p in previews.glob("*") if p.is_dir()]  # removed whole


@pytest.mark.system
def test_a_preview_killed_mid_build_is_listed_as_stopped_not_building(lab):
    """``kill -9`` leaves the record's state "building"; ``previews`` said so for ever. Its builder held the
    lock, so a free lock means the build is gone."""
    cron, previews, proc = preview_under_way(lab)
    try:
        assert proc.poll() is None, "the preview was made before it could be killed"
        listed = run(cron, "previews", luigi=False)
        assert " building " in listed.stdout, listed.stdout  # a live build is shown as building
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    listed = run(cron, "previews", luigi=False)
    assert listed.returncode == 0, listed.stderr
    (row,) = listed.stdout.splitlines()[1:]
    pid = row.split()[0]
    assert " stopped " in row and f"daybreak discard {pid}" in row, row
    refused_publish = run(cron, "publish", pid, luigi=False)
    assert refused_publish.returncode == 1, refused_publish.stderr
    assert "its build stopped before the end (killed?): discard it" in refused_publish.stderr  # not "building"
    assert run(cron, "discard", pid, luigi=False).returncode == 0
    assert not [p for p in previews.glob("*") if p.is_dir()]
