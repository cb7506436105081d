"""Dates, counts and settings a command cannot use are refused the same way by every command: one line
on stderr and exit 2, before anything is read or written (tasks/guard.py: ``DATES``, ``MAX_RANGE_DAYS``,
``check_count``; tasks/settings.py for luigi.cfg values).

The commands run as a user runs them: in a subprocess, from a folder of their own with its luigi.cfg.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks import guard
from tests.conftest import Lab

pytestmark = pytest.mark.unit

START = dt.date(2026, 9, 10)
DAY = dt.timedelta(days=1)


def folder_cfg(lab: Lab, extra: str = "") -> Path:
    """A working folder of its own whose luigi.cfg names the lab's roots, plus ``extra``."""
    folder = lab.root / "cron"
    folder.mkdir(exist_ok=True)
    (folder / "luigi.cfg").write_text(f"[daybreak]\nraw_root = {lab.raw}\ndata_root = {lab.data}\n{extra}")
    return folder


def run(folder: Path, *args: str, luigi: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PATH"}
    cmd = [sys.executable, "-m", "luigi", "--module", "tasks", *args, "--local-scheduler"]
    if not luigi:
        cmd = [sys.executable, "-m", "tasks.cli", *args]
    return subprocess.run(cmd, cwd=folder, env={**base, **(env or {})}, capture_output=True, text=True, timeout=300)


def refused(proc: subprocess.CompletedProcess, expected: str) -> None:
    """Exit 2, one line on stderr that starts with ``expected``, no traceback."""
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(proc.stderr.splitlines()) == 1, proc.stderr[-3000:]
    assert proc.stderr.startswith(f"daybreak: error: {expected}"), proc.stderr[-3000:]


# -- the one check ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: guard.check_date(dt.date(9999, 12, 31), "--stop"), "--stop 9999-12-31: out of range"),
        (lambda: guard.check_date(dt.date(1, 1, 1), "--start"), "--start 0001-01-01: out of range"),
        (lambda: guard.check_count(0, "--workers"), "--workers 0: expected a whole number, 1 or more"),
        (lambda: guard.check_count(-5, "--days", 1, 10), "--days -5: expected a whole number, from 1 to 10"),
        (lambda: guard.check_range(dt.date(2026, 9, 2), dt.date(2026, 9, 1)), "--start 2026-09-02 is after --stop"),
        (
            lambda: guard.check_range(dt.date(1950, 1, 1), dt.date(2051, 1, 1), "plan"),
            "plan: --start 1950-01-01 --stop 2051-01-01 is 36890 days; a range holds at most 36500 days",
        ),
    ],
)
def test_the_one_check_refuses_with_exit_2(call, message, capsys):
    with pytest.raises(guard.UsageError) as refusal:
        call()
    assert refusal.value.code == 2 and message in str(refusal.value)
    assert capsys.readouterr().err.startswith(f"daybreak: error: {message}")


def test_the_one_check_passes_its_bounds():
    low, high = guard.DATES
    assert guard.check_date(low) == low and guard.check_date(high) == high
    assert guard.check_count(1, "--workers") == 1
    guard.check_range(low, low + dt.timedelta(days=guard.MAX_RANGE_DAYS))  # exactly the longest range
    guard.check_range(START, START)  # an empty range
    # a look-back or a restatement of at most 366 days from either end stays a date
    assert low - dt.timedelta(days=366) > dt.date.min and high + dt.timedelta(days=366) < dt.date.max


# -- every command --------------------------------------------------------------------------------------

OUT = "out of range; a date is from 1900-01-01 to 2999-12-31"
DAYBREAK = [
    (("status", "--stop", "9999-12-31"), f"status: --stop 9999-12-31: {OUT}"),
    (("status", "--html", "/nonexistent/x.html"), "--html /nonexistent/x.html: cannot write there"),
    (
        ("preview", "ads_rolling_7d", "--start", "0001-01-01", "--stop", "0001-01-10"),
        f"preview: --start 0001-01-01: {OUT}",
    ),
    (
        ("preview", "stg_qsr_pos", "--start", str(START), "--stop", str(START + DAY), "--workers", "0"),
        "argument --workers: 0: expected a whole number, 1 or more",
    ),
    (("plan", "stg_qsr_pos", "--start", str(START), "--stop", "9999-12-31"), f"plan: --stop 9999-12-31: {OUT}"),
    (("plan", "stg_qsr_pos", "--start", "1900-01-01", "--stop", str(START)), "a range holds at most 36500 days"),
    (("verify", "--start", str(START), "--stop", "9999-12-31"), f"verify: --stop 9999-12-31: {OUT}"),
    (("sample", "--days", "-5"), "argument --days: -5: expected a whole number, from 1 to 36500"),
    (("sample", "--stores", "0"), "argument --stores: 0: expected a whole number, from 1 to 9999"),
    (("scheduler", "--port", "0"), "argument --port: 0: expected a whole number, from 1 to 65535"),
]
LUIGI = [
    (("StgQsrPos", "--date", "9999-12-31"), f"--date 9999-12-31: {OUT}"),
    (("AdsRolling7d", "--date", "0001-01-01"), f"--date 0001-01-01: {OUT}"),
    (
        ("RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", "9999-12-31"),
        f"RangeDaily: --stop 9999-12-31: {OUT}",
    ),
    (
        ("RangeDaily", "--of", "StgQsrPos", "--start", "1800-01-01", "--stop", str(START)),
        f"RangeDaily: --start 1800-01-01: {OUT}",
    ),
    (("RangeSingleRun", "--of", "StgQsrPos", "--start", "1900-01-01", "--stop", str(START)), "at most 36500 days"),
    (
        ("RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + DAY), "--workers", "0"),
        "--workers 0",
    ),
    (("AllHotelsPickup", "--start", str(START), "--stop", "9999-12-31"), f"--stop 9999-12-31: {OUT}"),
    (("MorningRefresh", "--today", "9999-12-31"), f"--today 9999-12-31: {OUT}"),
]


@pytest.mark.system
def test_every_command_refuses_the_same_bad_dates_and_counts(lab):
    lab.qsr_days(START, 2)
    cron = folder_cfg(lab)
    raw_before = lab.files()
    for args, expected in DAYBREAK:
        proc = run(cron, *args, luigi=False)
        assert proc.returncode == 2 and expected in proc.stderr, (args, proc.stderr[-3000:])
        assert expected in proc.stderr.splitlines()[-1], (args, proc.stderr[-3000:])  # argparse: its usage first
        assert "Traceback" not in proc.stderr, (args, proc.stderr[-3000:])
    for args, expected in LUIGI:
        proc = run(cron, *args)
        assert proc.returncode == 2 and expected in proc.stderr, (args, proc.stderr[-3000:])
        assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr, (args, proc.stderr[-3000:])
    assert lab.files() == raw_before and not lab.data.exists()  # nothing read into outputs, nothing written


@pytest.mark.system
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "[daybreak]\nstart_date = 2999-01-01",
            "[daybreak] start_date = '2999-01-01' in {cfg}: after today",
        ),
        ("[daybreak]\nstart_date = 1066-10-14", "[daybreak] start_date = '1066-10-14' in {cfg}: out of range"),
        (
            "[qsr]\nsuspicious_qty_threshold = 99999999999999999999",
            "[qsr] suspicious_qty_threshold = '99999999999999999999' in {cfg}: out of range: expected from 0 to "
            "2147483647",
        ),
        ("[daybreak]\nlock_wait_s = nan", "[daybreak] lock_wait_s = 'nan' in {cfg}: expected a number, finite"),
        # an export of day E restates E-N .. E-1: with N = 0 no export holds any date (every partition empty)
        ("[ads]\nrestatement_days = 0", "[ads] restatement_days = '0' in {cfg}: out of range: expected from 1 to 366"),
        (
            "[s3]\nlease_seconds = 1e300",
            "[s3] lease_seconds = '1e300' in {cfg}: out of range: expected from 1 to 3600",
        ),
        # a store's location: each was a traceback and exit 1 from both commands
        ("[daybreak]\ndata_root = {cfg}", "[daybreak] data_root = '{cfg}' in {cfg}: not a folder"),
        ("[daybreak]\ndata_root = s3://", "[daybreak] data_root = 's3://' in {cfg}: no bucket: expected s3://BUCKET/"),
        (
            "[daybreak]\ndata_root = s3://lake/a/../b",
            "[daybreak] data_root = 's3://lake/a/../b' in {cfg}: the prefix 'a/../b' has an empty, '.' or '..' part",
        ),
        (
            "[daybreak]\ndata_root = s3://lake/x\n[s3]\nendpoint_url = 127.0.0.1:9000",
            "[s3] endpoint_url = '127.0.0.1:9000' in {cfg}: no http:// or https:// in front",
        ),
        (
            "[daybreak]\ndata_root = s3://lake/x\n[s3]\nendpoint_url = http://[::1",
            "[s3] endpoint_url = 'http://[::1' in {cfg}: not a URL (Invalid IPv6 URL)",
        ),
        ("[daybreak]\nraw_root = sftp://host/x", "[daybreak] raw_root = 'sftp://host/x' in {cfg}: no user"),
        # a % written %% as asked, and another mistake: the file is still named, not "a value set at run time"
        (
            "[daybreak]\nraw_root = s3://landing/in box/p%%os",
            "[daybreak] raw_root = 's3://landing/in box/p%os' in {cfg}: a URL has no spaces",
        ),
        # a comment after a value, in any section: Luigi reads it as part of the value
        (
            "[daybreak]\nraw_root = s3://landing/pos   ; or a local folder",
            "[daybreak] raw_root = 's3://landing/pos   ; or a local folder' in {cfg}: inline comments are not allowed "
            "in luigi.cfg (Luigi would read '; or a local folder' as part of the value); put the comment on its own "
            "line",
        ),
        (
            "[qsr]\ntimezone = America/Toronto # the stores'",
            '[qsr] timezone = "America/Toronto # the stores\'" in {cfg}: inline comments are not allowed',
        ),
        (
            "[core]\nscheduler_port = 8082\t; luigid",
            "[core] scheduler_port = '8082\\t; luigid' in {cfg}: inline comments",
        ),
    ],
)
def test_a_setting_no_run_can_use_is_refused_by_both_commands(lab, line, expected):
    """A start_date after today made MorningRefresh die with Luigi's "Can't have start > stop" (exit 35); a
    threshold above int64 failed every partition with a pyarrow type error; a store's location that is not
    one was a traceback (exit 1); a comment after a value was read as part of it."""
    lab.qsr_days(START, 2)
    other = lab.root / "other.cfg"
    other.write_text(line.format(cfg=other) + "\n")
    cron = folder_cfg(lab)
    env = {"LUIGI_CONFIG_PATH": str(other)}
    message = expected.format(cfg=other)
    for proc in (
        run(cron, "MorningRefresh", env=env),
        run(cron, "RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + DAY), env=env),
        run(cron, "status", luigi=False, env=env),
    ):
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-3000:]
        assert len(proc.stderr.splitlines()) == 1, proc.stderr[-3000:]
    assert not lab.data.exists()


@pytest.mark.system
@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (("--qsr-day-start-hour", "30"), "--qsr-day-start-hour '30': out of range: expected from 0 to 23"),
        (("--qsr-suspicious-qty-threshold", "-5"), "--qsr-suspicious-qty-threshold '-5': out of range"),
        (("--daybreak-host-name", "../x"), "--daybreak-host-name '../x': expected a host name"),
        (("--daybreak-lock-wait-s", "nan"), "--daybreak-lock-wait-s 'nan': expected a number, finite"),
        (("--qsr-timezone", "Mars/X"), "--qsr-timezone 'Mars/X': not an IANA timezone"),
        (("--ads-restatement-days", "0"), "--ads-restatement-days '0': out of range: expected from 1 to 366"),
    ],
)
def test_a_setting_given_on_the_luigi_command_line_is_checked_as_in_a_file(lab, flags, expected):
    """Before, a command-line value skipped every check: day_start_hour 30 built a partition of the wrong
    lines, exit 0; an unknown timezone failed each partition (exit 30)."""
    lab.qsr_days(START, 2)
    cron = folder_cfg(lab)
    for args in (("StgQsrPos", "--date", str(START)), ("RangeDaily", "--of", "StgQsrPos", "--start", str(START))):
        refused(run(cron, *args, *flags), expected)
    assert not lab.data.exists()


# -- luigi.cfg that Luigi cannot read -------------------------------------------------------------------

CFG_FAULTS = [
    (
        "[daybreak]\nraw_root = {raw}\n[daybreak]\ndata_root = {data}\n",
        "{cfg} line 3: section [daybreak] appears twice",
    ),
    ("[daybreak]\nraw_root = {raw}\nraw_root = {raw}\n", "{cfg} line 3: [daybreak] raw_root is set twice; keep one"),
    ("[daybreak]\nraw_root = {raw}\ndata_root = {data}\nstart_date\n", "{cfg} line 4: 'start_date' is neither"),
    ("raw_root = {raw}\n", "{cfg} line 1: 'raw_root = {raw}' comes before any [section]"),
    (
        "[daybreak]\nraw_root = {raw}\ndata_root = {data}%x\n",
        "[daybreak] data_root = '{data}%x' in {cfg}: a % must be written %%",
    ),
    (
        "[daybreak]\nraw_root = {raw}\ndata_root = {data}\n[qsr]\ntimezone = %(zone)s\n",
        "[qsr] timezone = '%(zone)s' in {cfg}: %(zone)s names no setting of [qsr]",
    ),
    (
        "[daybreak]\nraw_root = ${{DAYBREAK_NO_SUCH_VARIABLE}}\n",
        "[daybreak] raw_root = '${{DAYBREAK_NO_SUCH_VARIABLE}}' in {cfg}: ${{DAYBREAK_NO_SUCH_VARIABLE}}: the "
        "environment variable DAYBREAK_NO_SUCH_VARIABLE is not set",
    ),
]


@pytest.mark.system
@pytest.mark.parametrize(("text", "expected"), CFG_FAULTS)
def test_a_config_file_luigi_cannot_read_is_one_line_from_daybreak(lab, text, expected):
    """Before, each was configparser's traceback from ``import luigi`` or from the first value read (exit 1)."""
    cron = lab.root / "cron"
    cron.mkdir()
    cfg = cron / "luigi.cfg"
    cfg.write_text(text.format(raw=lab.raw, data=lab.data))
    message = expected.format(cfg=cfg, raw=lab.raw, data=lab.data)
    for args in (("status",), ("plan", "stg_qsr_pos", "--start", str(START), "--stop", str(START + DAY))):
        refused(run(cron, *args, luigi=False), message)
    # the same file named by LUIGI_CONFIG_PATH, from another folder
    other = lab.root / "elsewhere"
    other.mkdir()
    refused(run(other, "status", luigi=False, env={"LUIGI_CONFIG_PATH": str(cfg)}), message)
    assert not lab.data.exists()


@pytest.mark.system
@pytest.mark.parametrize(("text", "expected"), [f for f in CFG_FAULTS if "%" in f[0] or "$" in f[0]])
def test_a_value_luigi_cannot_interpolate_is_one_line_from_the_luigi_command(lab, text, expected):
    """A value is interpolated when it is read, which Daybreak's check does first; a repeated section or
    key stops ``import luigi`` itself, before the luigi command loads Daybreak (docs/operations.md)."""
    cron = lab.root / "cron"
    cron.mkdir()
    cfg = cron / "luigi.cfg"
    cfg.write_text(text.format(raw=lab.raw, data=lab.data))
    refused(run(cron, "StgQsrPos", "--date", str(START)), expected.format(cfg=cfg, raw=lab.raw, data=lab.data))


@pytest.mark.system
def test_a_toml_config_or_parser_is_one_line_from_daybreak(lab):
    """Before, ``import luigi`` raised ImportError ("install luigi[toml]") with a traceback, exit 1."""
    cron = folder_cfg(lab)
    toml = lab.root / "daybreak.toml"
    toml.write_text(f'[daybreak]\nraw_root = "{lab.raw}"\n')
    refused(run(cron, "status", luigi=False, env={"LUIGI_CONFIG_PATH": str(toml)}), f"{toml}: a .toml config")
    refused(run(cron, "status", luigi=False, env={"LUIGI_CONFIG_PARSER": "toml"}), "LUIGI_CONFIG_PARSER=toml:")
    assert not lab.data.exists()


def test_the_daybreak_command_loads_luigi_only_after_the_check():
    proc = subprocess.run(
        [sys.executable, "-c", "import sys, tasks.cli; print('luigi' in sys.modules)"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout.strip() == "False", proc.stderr


# -- daybreak sample into a raw zone ---------------------------------------------------------------------


@pytest.mark.system
def test_sample_refuses_to_write_over_a_raw_file_and_into_an_sftp_raw_root(lab):
    cron = folder_cfg(lab)
    args = ("sample", "--start", str(START), "--days", "2", "--stores", "2")
    assert run(cron, *args, "--seed", "7", luigi=False).returncode == 0
    edited = lab.raw / "qsr_pos" / str(START + DAY) / "S001.csv"
    edited.write_text(edited.read_text() + "S001-X,1,S001,2026-09-11T12:00:00-04:00,COLA,1,1.99,,COMPLETED\n")
    before = lab.files()
    proc = run(cron, *args, "--seed", "8", luigi=False)
    refused(proc, f"sample: {lab.raw}/")
    assert "exists (and " in proc.stderr and "the sample never writes over a raw file" in proc.stderr
    assert "with other bytes than this sample's" in proc.stderr
    assert lab.files() == before  # the added line is still there, nothing else changed

    uri = "sftp://someone@127.0.0.1:1/srv/raw"
    sftp = folder_cfg(lab).parent / "sftp"
    sftp.mkdir()
    (sftp / "luigi.cfg").write_text(f"[daybreak]\nraw_root = {uri}\ndata_root = {lab.data}\n")
    refused(
        run(sftp, *args, luigi=False),
        f"raw_root {uri} ([daybreak] raw_root from {sftp / 'luigi.cfg'}) is not a local folder",
    )
    assert sorted(p.name for p in sftp.iterdir()) == ["luigi.cfg"]  # no folder named sftp:


# -- the names a user gives and reads -------------------------------------------------------------------


@pytest.mark.system
def test_each_command_suggests_the_name_the_other_one_takes_and_progress_names_partitions(lab):
    """``luigi`` takes StgQsrPos where ``daybreak`` takes stg_qsr_pos: given the other's name, each says
    which one it means. Progress lines and plan reasons named partitions by Luigi's task id and hash."""
    import re

    lab.qsr_days(START, 3)
    cron = folder_cfg(lab)
    proc = run(cron, "plan", "StgQsrPos", "--start", str(START), "--stop", str(START + DAY), luigi=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "'StgQsrPos' is not a dataset; did you mean stg_qsr_pos? (StgQsrPos is the luigi task" in proc.stderr
    proc = run(cron, "status", "--dataset", "AdsRolling7d", luigi=False)
    assert "did you mean ads_rolling_7d? (AdsRolling7d is the luigi task that builds it)" in proc.stderr
    refused(run(cron, "stg_qsr_pos", "--date", str(START)), "no task stg_qsr_pos; did you mean StgQsrPos?")
    refused(
        run(cron, "RangeDaily", "--of", "ads_rolling_7d", "--start", str(START), "--stop", str(START + DAY)),
        "--of ads_rolling_7d: no task ads_rolling_7d; did you mean AdsRolling7d? (the task that builds dataset",
    )
    proc = run(cron, "RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + 3 * DAY))
    assert proc.returncode == 0, proc.stderr[-3000:]
    shown = [x for x in proc.stderr.splitlines() if "progress: " in x]
    assert shown and all(re.search(rf" - StgQsrPos {START.year}-\d\d-\d\d$", x) for x in shown), shown
    assert not re.search(r"_[0-9a-f]{10}\b", proc.stderr), proc.stderr  # no task id hash anywhere


def test_a_partition_is_named_by_its_family_and_key():
    from tasks.hotels import HotelPickup, OtbByStayDate
    from tasks.qsr import StgQsrPos
    from tasks.reporting.names import label

    assert label(StgQsrPos(date=START)) == "StgQsrPos 2026-09-10"
    assert label(HotelPickup(date=START, hotel="H1")) == "HotelPickup 2026-09-10 H1"
    assert label(OtbByStayDate()) == "OtbByStayDate"


# -- a field longer than the parser's block ---------------------------------------------------------------


def test_a_field_over_1_mib_rejects_its_row_naming_file_row_and_column(lab, setting):
    """It failed the partition with Arrow's "straddling object ... (try to increase block size?)"."""
    import pyarrow.parquet as pq

    from tasks.transforms.rawcsv import MAX_FIELD

    setting("qsr", "max_reject_share", 0.5)
    lab.qsr_days(START, 1)
    rows = [
        f"S001-{START}-L,1,S001,{START}T12:00:00-04:00,{'X' * (MAX_FIELD + 1)},1,1.99,,COMPLETED",
        f"S001-{START}-M,1,S001,{START}T12:30:00-04:00,{'Y' * MAX_FIELD},1,1.99,,COMPLETED",  # at the limit: kept
    ]
    path = lab.raw / "qsr_pos" / str(START) / "S001.csv"
    path.write_text(path.read_text() + "\n".join(rows) + "\n")
    assert lab.luigi("StgQsrPos", "--date", str(START)) == 0
    quarantine = pq.read_table(lab.data / f"quarantine/staging/qsr_pos/business_date={START}/rejected.parquet")
    got = quarantine.to_pylist()
    assert len(got) == 1, got
    assert got[0]["source_file"].endswith(f"qsr_pos/{START}/S001.csv") and got[0]["row_number"] == 6
    assert (
        got[0]["reason"]
        == "sku is 1,048,577 bytes long; the contract allows at most 1,048,576 bytes (1 MiB) in a field"
    )
    assert got[0]["order_id"] == f"S001-{START}-L" and got[0]["sku"] == f"{'X' * 200}... (1,048,577 characters)"
    assert got[0]["raw_line"].startswith(f"S001-{START}-L,1,S001,") and len(got[0]["raw_line"]) <= 200  # its text
    data = pq.read_table(lab.partition(START))
    assert f"S001-{START}-M" in data["order_id"].to_pylist() and f"S001-{START}-L" not in data["order_id"].to_pylist()


@pytest.mark.system
def test_the_readme_sample_line_runs_twice_and_never_writes_over_a_changed_file(tmp_path):
    """Run again, the README's line leaves every file as it is, its mtime too, and exits 0 (before: exit 2,
    "the sample never writes over a raw file"); a file changed since is named, exit 2, and stays changed."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    line = next(x for x in readme.splitlines() if x.startswith("daybreak sample "))
    args = line.split()[1:]
    first = run(tmp_path, *args, luigi=False)
    assert first.returncode == 0, first.stderr
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "data" / "raw").rglob("*") if p.is_file()}
    assert len(stamps) > 3000
    again = run(tmp_path, *args, luigi=False)
    assert again.returncode == 0 and again.stderr == "", again.stderr
    assert f"files_unchanged {len(stamps)}" in again.stdout
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    changed = tmp_path / "data" / "raw" / "qsr_pos" / "2026-09-15" / "S007.csv"
    changed.write_bytes(changed.read_bytes().replace(b"COMPLETED", b"VOIDED", 1))
    content = changed.read_bytes()
    refused(
        run(tmp_path, *args, luigi=False),
        "sample: data/raw/qsr_pos/2026-09-15/S007.csv exists with other bytes than this sample's: the sample never "
        "writes over a raw file",
    )
    assert changed.read_bytes() == content
