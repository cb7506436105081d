"""Preview and publish (issue 17): a backfill built into a shadow root, its diff, and its publication.

Every test drives the real path: `daybreak preview` / `publish` (tasks/cli.py) and Luigi's RangeDaily
on a temporary raw zone; DuckDB and pyarrow read the outputs as a user would.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import signal
import subprocess
import sys

import duckdb
import pyarrow.parquet as pq
import pytest

from tasks import cli
from tests.conftest import REPO, ads_rows

pytestmark = pytest.mark.luigi

D1, D2, D3 = dt.date(2026, 9, 1), dt.date(2026, 9, 2), dt.date(2026, 9, 3)
STOP = dt.date(2026, 9, 4)
DAY = dt.timedelta(days=1)

# qty of the lines of each business date (12:30 local: the folder's own date). Worked by hand:
# at threshold 20 a line is suspicious when qty > 20; at 15 when qty > 15.
QTYS = {D1: [1, 16, 18, 20, 21, 30], D2: [15, 17, 2], D3: [1, 2, 3]}
BECOME_SUSPICIOUS = {D1: 3, D2: 1, D3: 0}  # D1: 16, 18, 20; D2: 17; D3: none


def qsr_lab(lab) -> None:
    for day in [*QTYS, STOP]:
        d = day.isoformat()
        rows = [
            f"S001-{d}-{k},1,S001,{d}T12:30:00-04:00,BURGER,{q},6.50,,COMPLETED"
            for k, q in enumerate(QTYS.get(day, [1]))
        ]
        lab.qsr_file(d, "S001", rows)


def production(lab) -> dict[str, str]:
    """sha256 of every file of the data root outside _state/ (the partitions and their quarantine)."""
    out = {}
    for path in sorted(lab.data.rglob("*")):
        rel = path.relative_to(lab.data)
        if path.is_file() and rel.parts[0] != "_state":
            out[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def daybreak(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = cli.main(list(args))
    return code, capsys.readouterr().out


def preview_json(capsys, dataset: str, start: dt.date, stop: dt.date) -> dict:
    code, out = daybreak(capsys, "preview", dataset, "--start", str(start), "--stop", str(stop), "--json")
    assert code == 0, out
    return json.loads(out)


def tables(root, dataset: str = "staging/qsr_pos") -> dict[str, list]:
    return {
        p.parent.name: pq.read_table(p).sort_by([("order_id", "ascending")]).to_pylist()
        for p in sorted((root / dataset).glob("business_date=*/data.parquet"))
    }


def built_at_20(lab) -> None:
    qsr_lab(lab)
    assert lab.range(D1, STOP) == 0  # threshold 20


@pytest.fixture
def threshold_lab(lab, qsr_setting, built_once):
    """qsr_lab built at threshold 20 (by a run before the test), the threshold now 15."""
    built_once(lab, "threshold-20", built_at_20)
    qsr_setting("suspicious_qty_threshold", 15)
    return lab


def test_threshold_change_counts_per_date_equal_the_hand_count_and_production_is_untouched(threshold_lab, capsys):
    before = production(threshold_lab)
    report = preview_json(capsys, "stg_qsr_pos", D1, STOP)
    parts = report["datasets"]["stg_qsr_pos"]["partitions"]
    assert {p["date"]: p["changed"] for p in parts} == {d.isoformat(): n for d, n in BECOME_SUSPICIOUS.items()}
    assert all(p["added"] == p["removed"] == 0 and p["rows_before"] == p["rows_after"] for p in parts)
    assert report["datasets"]["stg_qsr_pos"]["totals"]["changed_columns"] == {"is_suspicious": 4}
    assert set(report) >= {"id", "datasets"}
    assert set(parts[0]) >= {"date", "rows_before", "rows_after", "added", "removed", "changed"}
    assert production(threshold_lab) == before  # byte for byte
    shadow = threshold_lab.data / "_state" / "preview" / report["id"] / "staging" / "qsr_pos"
    flagged = duckdb.execute(
        f"select count(*) from read_parquet('{shadow}/*/*.parquet') where is_suspicious"
    ).fetchall()[0]
    assert flagged[0] == 2 + 4  # 21 and 30 before, plus the four lines the preview reports


def test_publish_makes_the_next_range_a_no_op_and_equals_a_plain_backfill(threshold_lab, capsys, setting):
    lab = threshold_lab
    report = preview_json(capsys, "stg_qsr_pos", D1, STOP)
    code, out = daybreak(capsys, "publish", report["id"])
    assert code == 0, out
    assert lab.rebuilt_by(lambda: lab.range(D1, STOP)) == set()  # nothing left to do
    published = tables(lab.data)
    code, out = daybreak(capsys, "publish", report["id"])  # idempotent
    assert code == 0 and "nothing to do" in out
    plain = lab.root / "plain"
    setting("daybreak", "data_root", plain)
    assert lab.range(D1, STOP) == 0
    assert published == tables(plain) and len(published) == 3


def test_a_partition_rebuilt_after_the_preview_makes_publish_refuse_and_change_nothing(threshold_lab, capsys):
    lab = threshold_lab
    report = preview_json(capsys, "stg_qsr_pos", D1, STOP)
    assert lab.range(D2, D3) == 0  # production rebuilds one date of the range in the meantime
    before = production(lab)
    capsys.readouterr()
    assert cli.main(["publish", report["id"]]) == 1
    assert "business_date=2026-09-02: production changed since the preview" in capsys.readouterr().err
    assert production(lab) == before


def test_a_publish_a_run_beats_to_its_first_partition_changes_nothing_and_the_preview_stays_open(threshold_lab, capsys):
    """A run commits the first partition between publish's checks and its lock. Before: the preview was listed as
    `half published (0 of 3 in production)`, and discard said the partitions it put in production stay."""
    import threading
    import time

    from tasks.qsr import StgQsrPos

    pid = preview_json(capsys, "stg_qsr_pos", D1, STOP)["id"]
    record = threshold_lab.data / "_state" / "preview" / pid / "preview.json"
    first = json.loads(record.read_text())["partitions"][0]["folder"]
    day = dt.date.fromisoformat(first.rpartition("=")[2])
    store, codes = StgQsrPos(date=day).store(), []
    manifest = threshold_lab.data / first / "_manifest.json"
    with store.locked(day, 60):  # as a run holds it to commit
        publishing = threading.Thread(target=lambda: codes.append(cli.main(["publish", pid])))
        publishing.start()
        deadline = time.monotonic() + 60
        while json.loads(record.read_text()).get("state") != "publishing" and time.monotonic() < deadline:
            time.sleep(0.01)  # publish has passed its checks and waits for the lock
        manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "committed_by": "a run"}))
    publishing.join(60)
    err = capsys.readouterr().err
    assert codes == [1] and f"preview {pid}: refused, nothing was changed:\n  {first} changed" in err, err
    code, out = daybreak(capsys, "previews")
    assert " open " in next(line for line in out.splitlines() if line.startswith(pid)), out


def test_publish_refuses_when_the_rules_no_longer_match(threshold_lab, capsys, qsr_setting):
    report = preview_json(capsys, "stg_qsr_pos", D1, STOP)
    qsr_setting("suspicious_qty_threshold", 16)  # the rules changed again since the preview
    before = production(threshold_lab)
    capsys.readouterr()
    assert cli.main(["publish", report["id"]]) == 1
    assert "rules, settings or inputs no longer match" in capsys.readouterr().err
    assert production(threshold_lab) == before


def killed_publishing(lab, pid: str, tmp_path, at: int) -> None:
    """``daybreak publish pid`` in a process of its own (on the preview's rules), killed at its ``at``-th write
    step of date D2 (tests/crash_driver.py)."""
    cfg = lab.write_cfg(tmp_path / "crash.cfg", suspicious_qty_threshold=15)
    plan = {"counter": str(tmp_path / "steps"), "root": str(lab.data), "date": str(D2), "at": at, "mode": "kill"}
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import tests.crash_driver; from tasks.cli import main; "
        "sys.exit(main(['publish', sys.argv[2]]))"
    )
    env = {**os.environ, "CRASH_PLAN": json.dumps(plan), "LUIGI_CONFIG_PATH": str(cfg)}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(REPO), pid], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr


@pytest.mark.system
@pytest.mark.parametrize("at", [1, 2, 3])
def test_kill_9_during_publish_then_publish_again_equals_a_clean_build(threshold_lab, capsys, setting, tmp_path, at):
    lab = threshold_lab
    report = preview_json(capsys, "stg_qsr_pos", D1, STOP)
    killed_publishing(lab, report["id"], tmp_path, at)
    glob = f"{lab.data}/staging/qsr_pos/*/*.parquet"
    assert duckdb.execute(f"select count(*) from read_parquet('{glob}')").fetchall()[0][0] == sum(
        map(len, QTYS.values())
    )  # whole
    for path in (lab.data / "staging" / "qsr_pos").glob("*/data.parquet"):
        pq.read_table(path)
    capsys.readouterr()
    assert cli.main(["publish", report["id"]]) == 0, capsys.readouterr().err
    assert lab.rebuilt_by(lambda: lab.range(D1, STOP)) == set()
    published = tables(lab.data)
    setting("daybreak", "data_root", lab.root / "plain")
    assert lab.range(D1, STOP) == 0
    assert published == tables(lab.root / "plain")


@pytest.mark.system
def test_a_half_published_preview_that_can_no_longer_be_published_can_be_discarded(
    threshold_lab, capsys, setting, tmp_path
):
    """Before, publish refused it (production changed since) and discard refused it (half published): no
    command could remove it, and the sweep kept it for ever."""
    lab = threshold_lab
    report = preview_json(capsys, "stg_qsr_pos", D1, STOP)
    killed_publishing(lab, report["id"], tmp_path, 2)
    lab.qsr_file(D3.isoformat(), "S001", [f"S001-{D3}-9,1,S001,{D3}T12:30:00-04:00,BURGER,1,6.50,,COMPLETED"])
    capsys.readouterr()
    assert cli.main(["publish", report["id"]]) == 1
    assert "no longer match the preview" in capsys.readouterr().err
    code, out = daybreak(capsys, "discard", report["id"])
    assert code == 0, out
    assert f"discarded preview {report['id']}, half published and no longer publishable" in out
    assert not (lab.data / "_state" / "preview" / report["id"]).exists()


def ads_history(lab, setting, built_once, window_days: int = 7) -> tuple[dt.date, dt.date]:
    """(first, stop): exports 09-21 .. 10-04, each restating from 09-20 ([daybreak] start_date), and
    ads_rolling_7d built over ``[first, stop)`` with windows of ``window_days`` ([ads] rolling_window_days), by a
    run before the test."""
    first, stop = dt.date(2026, 9, 20), dt.date(2026, 10, 4)
    setting("daybreak", "start_date", first)
    setting("ads", "rolling_window_days", window_days)

    def build(lab) -> None:
        for k in range(1, 15):
            lab.ads_export(first + k * DAY, first)
        assert lab.range(first, stop, of="AdsRolling7d") == 0

    built_once(lab, f"ads-windows-{window_days}", build)
    return first, stop


def test_a_resent_ads_export_shows_the_rolling_windows_it_changes(lab, capsys, setting, built_once):
    first, stop = ads_history(lab, setting, built_once)
    # 09-25's newest export is 10-02 (d+7): re-sent with C1 spending 25.00 instead of 10.00 that day
    rows = [
        r.replace("2026-09-25,C1,google,1000,50,10.00", "2026-09-25,C1,google,1000,50,25.00")
        for r in ads_rows(dt.date(2026, 10, 2), first)
    ]
    lab.ads_export(dt.date(2026, 10, 2), first, rows)
    before = production(lab)
    report = preview_json(capsys, "ads_daily", first, stop)
    daily = {p["date"]: p for p in report["datasets"]["ads_daily"]["partitions"]}
    assert {d for d, p in daily.items() if p["changed"]} == {"2026-09-25"}
    assert daily["2026-09-25"]["changed_columns"] == {"spend": 1}
    assert daily["2026-09-25"]["measure"]["change"] == 15.0
    windows = {p["date"]: p for p in report["datasets"]["ads_rolling_7d"]["partitions"] if p["changed"]}
    assert sorted(windows) == [(dt.date(2026, 9, 25) + k * DAY).isoformat() for k in range(7)]  # 09-25 .. 10-01
    assert all(p["changed_columns"].get("spend_7d") == 1 and p["measure"]["change"] == 15.0 for p in windows.values())
    assert production(lab) == before
    code, out = daybreak(capsys, "publish", report["id"])
    assert code == 0, out
    assert lab.rebuilt_by(lambda: lab.range(first, stop, of="AdsRolling7d"), "marts/ads_rolling_7d") == set()


def test_previews_lists_discard_deletes_and_old_previews_are_swept(threshold_lab, capsys, setting):
    report = preview_json(capsys, "stg_qsr_pos", D1, STOP)
    code, out = daybreak(capsys, "previews", "--json")
    (row,) = json.loads(out)
    assert row["id"] == report["id"] and row["publishable"] and row["partitions"] == 3 and row["size_bytes"] > 0
    code, out = daybreak(capsys, "plan", "stg_qsr_pos", "--start", str(D1), "--stop", str(STOP))
    assert f"open preview {report['id']}" in out
    page = threshold_lab.root / "status.html"
    assert daybreak(capsys, "status", "--html", str(page))[0] == 0
    html = page.read_text()
    assert "id='previews'" in html and report["id"] in html and "<td>is_suspicious 3</td>" in html
    assert daybreak(capsys, "discard", report["id"])[0] == 0
    assert not (threshold_lab.data / "_state" / "preview" / report["id"]).exists()
    second = preview_json(capsys, "stg_qsr_pos", D1, D2)
    setting("daybreak", "preview_keep_days", 0)
    code, out = daybreak(capsys, "previews", "--json")
    assert json.loads(out) == [] and not (threshold_lab.data / "_state" / "preview" / second["id"]).exists()


def test_a_failed_partition_exits_30_and_the_others_still_build(threshold_lab, capsys):
    lab = threshold_lab
    d = D3.isoformat()
    bad = [f"S001-{d}-X{k},1,S001,{d}T12:30:00-04:00,BURGER,abc,6.50,,COMPLETED" for k in range(5)]
    lab.qsr_file(d, "S002", bad)  # D3's lines: 5 of 8 rejected, far above max_reject_share
    before = production(lab)
    capsys.readouterr()
    code = cli.main(["preview", "stg_qsr_pos", "--start", str(D1), "--stop", str(STOP), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 30
    assert [f["task_id"].split("_")[1:4] for f in report["failed"]] == [["2026", "09", "03"]]
    assert [f["partition"] for f in report["failed"]] == [f"staging/qsr_pos {D3}"]  # as the user names it
    capsys.readouterr()
    assert cli.main(["preview", "stg_qsr_pos", "--start", str(D1), "--stop", str(STOP)]) == 30
    assert f"  FAILED  staging/qsr_pos {D3}: " in capsys.readouterr().out
    parts = report["datasets"]["stg_qsr_pos"]["partitions"]
    assert {p["date"]: p["changed"] for p in parts} == {"2026-09-01": 3, "2026-09-02": 1}
    assert production(lab) == before and not (lab.data / "_state" / "failures").exists()
    assert cli.main(["publish", report["id"]]) == 1  # a preview with a failed partition is not published


@pytest.mark.parametrize(
    ("value", "error"), [("-1", "out of range: expected 0 or more"), ("soon", "expected a number")]
)
def test_preview_keep_days_is_validated(lab, setting, value, error):
    from tasks.settings_check import config_errors

    setting("daybreak", "preview_keep_days", value)
    assert any("[daybreak] preview_keep_days" in e and error in e for e in config_errors()), config_errors()


def test_a_preview_builds_upstream_partitions_production_does_not_have_yet(lab, capsys, setting):
    """Nothing built in production: a preview of the look-back builds its ads_daily dates into the shadow
    first, and the windows then read them there (a store's folder is the shadow's once it holds the
    partition). Publish puts both in place, and the backfill has nothing left to do."""
    first = dt.date(2026, 9, 20)
    setting("daybreak", "start_date", first)
    for k in range(1, 10):  # exports 09-21 .. 09-29
        lab.ads_export(first + k * DAY, first)
    stop = dt.date(2026, 9, 22)
    report = preview_json(capsys, "ads_rolling_7d", first, stop)
    assert report.get("failed", []) == []
    built = {name: [p["date"] for p in d["partitions"]] for name, d in report["datasets"].items()}
    assert built["ads_rolling_7d"] == ["2026-09-20", "2026-09-21"]
    assert set(built["ads_daily"]) >= {"2026-09-20", "2026-09-21"}
    assert production(lab) == {}  # production had nothing, and has nothing yet
    code, out = daybreak(capsys, "publish", report["id"])
    assert code == 0, out
    assert lab.rebuilt_by(lambda: lab.range(first, stop, of="AdsRolling7d"), "marts/ads_rolling_7d") == set()


def test_a_preview_builds_only_its_range_and_holds_a_mart_that_reads_stale_dates_outside_it(lab, capsys, qsr_setting):
    """After a rule change every date is stale. A preview of D1 alone builds D1, not D2 and D3: the store
    mart of S001, which reads every date of its store, is not built (Luigi would build the stale D2
    and D3 for it, into the preview, and publish would put them in place); the record and the text
    say so. Once D2 and D3 are up to date, the mart is previewed with the range."""
    qsr_lab(lab)
    assert lab.range(D1, STOP) == 0 and lab.luigi("AllStores") == 0  # staging and the store mart at 20
    qsr_setting("suspicious_qty_threshold", 15)
    code, out = daybreak(capsys, "preview", "stg_qsr_pos", "--start", str(D1), "--stop", str(D2), "--json")
    assert code == 25, out  # a partition of the preview was not built
    report = json.loads(out)
    built = {name: [p["date"] for p in d["partitions"]] for name, d in report["datasets"].items()}
    assert built == {"stg_qsr_pos": [D1.isoformat()]}
    assert report["not_built"] == [
        {
            "partition": "marts/store_daily_sales/store_id=S001",
            "reason": f"also reads staging/qsr_pos/business_date={D2}, outside the range and not up to date",
        }
    ]
    code, out = daybreak(capsys, "preview", "stg_qsr_pos", "--start", str(D1), "--stop", str(D2))
    assert code == 25 and "  not built  marts/store_daily_sales/store_id=S001: also reads" in out
    assert lab.range(D2, STOP) == 0  # D2 and D3 at threshold 15
    report = preview_json(capsys, "stg_qsr_pos", D1, D2)
    assert report["not_built"] == []
    assert set(report["datasets"]) == {"stg_qsr_pos", "store_daily_sales"}


def test_a_preview_with_downstream_partitions_not_built_exits_25_and_cannot_be_published(lab, capsys, qsr_setting):
    """Ten stores' marts read a stale date outside the previewed range: the preview exits 25, lists 8 of
    them then "... and 2 more", `previews` shows it not publishable with the reason, and `publish`
    refuses it (exit 1) in one line naming a partition and what to do, changing nothing."""
    stores = tuple(f"S{k:03}" for k in range(1, 11))
    lab.qsr_days(D1, 3, stores)
    assert lab.range(D1, STOP) == 0 and lab.luigi("AllStores") == 0
    qsr_setting("suspicious_qty_threshold", 15)
    before = production(lab)
    code, out = daybreak(capsys, "preview", "stg_qsr_pos", "--start", str(D1), "--stop", str(D2))
    assert code == 25, out
    held = [line for line in out.splitlines() if line.startswith("  not built  ")]
    assert len(held) == 8 and held[0].startswith("  not built  marts/store_daily_sales/store_id=S001: also reads")
    assert "  ... and 2 more (--json lists them all)" in out.splitlines()
    assert out.splitlines()[-1].startswith("not publishable: a partition above failed or was not built")
    pid = out.splitlines()[0].split()[1]
    code, out = daybreak(capsys, "preview", "stg_qsr_pos", "--start", str(D1), "--stop", str(D2), "--json")
    assert code == 25 and len(json.loads(out)["not_built"]) == 10
    code, out = daybreak(capsys, "previews")
    row = next(line for line in out.splitlines() if line.startswith(pid))
    assert " open " in row and "no: 10 downstream partition(s) were not built (preview the whole stale" in row, out
    capsys.readouterr()
    code, err = cli.main(["publish", pid]), capsys.readouterr().err
    assert code == 1 and "refused, nothing was changed" in err, err
    assert "e.g. marts/store_daily_sales/store_id=S001: also reads staging/qsr_pos/business_date=" in err
    assert "or bring its dates up to date first, then make a new preview)" in err
    assert production(lab) == before


def test_a_rule_change_that_moves_no_row_previews_and_publishes_a_partition_with_a_quarantine(lab, capsys, qsr_setting):
    """The README's own change (threshold 20 -> 15) on a date whose quantities are all below 15 and that
    has a rejected line: the rebuild gives production's rows again, so the preview links production's
    files (data, store totals, quarantine) and writes a new manifest. Publish puts it in place, the
    quarantine stays readable with its one row, and the backfill has nothing left to do."""
    d = D1.isoformat()
    good = [f"S001-{d}-{k},1,S001,{d}T12:30:00-04:00,BURGER,{1 + k % 10},6.50,,COMPLETED" for k in range(30)]
    bad = f"S001-{d}-X,1,S001,{d}T12:30:00-04:00,BURGER,abc,6.50,,COMPLETED"  # 1 of 31: under max_reject_share
    lab.qsr_file(d, "S001", [*good, bad])
    lab.qsr_file(D2.isoformat(), "S001", [])
    assert lab.range(D1, D2) == 0
    quarantine = lab.data / "quarantine" / "staging" / "qsr_pos" / f"business_date={d}" / "rejected.parquet"
    assert pq.read_table(quarantine).num_rows == 1
    qsr_setting("suspicious_qty_threshold", 15)
    before = production(lab)
    report = preview_json(capsys, "stg_qsr_pos", D1, D2)
    (part,) = report["datasets"]["stg_qsr_pos"]["partitions"]
    assert (part["rows_before"], part["rows_after"], part["changed"]) == (30, 30, 0)
    assert production(lab) == before
    code, out = daybreak(capsys, "publish", report["id"])
    assert code == 0 and "published 1 partition(s)" in out, out
    data_files = {k: v for k, v in before.items() if not k.endswith("_manifest.json")}
    assert {k: v for k, v in production(lab).items() if not k.endswith("_manifest.json")} == data_files
    assert production(lab) != before  # the same rows, the same quarantine: only the manifest is new
    assert pq.read_table(quarantine).column("qty").to_pylist() == ["abc"]
    assert lab.rebuilt_by(lambda: lab.range(D1, D2)) == set()


def test_a_preview_of_days_of_a_chain_builds_the_days_after_them_and_publishes(lab, capsys, setting):
    """A deleted day of the booking-state chain, previewed with the next day: the days after the range read
    the rebuilt ones (each day reads the day before), so the preview builds them too, up to its horizon, and
    can be published; the range then has nothing to rebuild."""
    import shutil

    from tests.test_hotels import write

    first = dt.date(2026, 9, 10)
    setting("daybreak", "start_date", first)
    for k in range(10):
        day = first + k * DAY
        write(lab, day, "H1", [f"T{k},H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct"])
    stop = first + 10 * DAY
    assert lab.range(first, stop, of="HotelBookingState") == 0
    gone = first + 3 * DAY
    shutil.rmtree(lab.partition(gone, "marts/hotel_booking_state"))
    report = preview_json(capsys, "hotel_booking_state", gone, gone + 2 * DAY)
    assert report["not_built"] == []
    code, out = daybreak(capsys, "publish", report["id"])
    assert code == 0, out
    assert lab.rebuilt_by(lambda: lab.range(first, stop, of="HotelBookingState"), "marts/hotel_booking_state") == set()


@pytest.mark.parametrize("window_days", [7, 10])
def test_a_preview_of_windows_builds_the_later_windows_its_upstream_changes(
    lab, capsys, setting, built_once, window_days
):
    """C1's spend of 09-24 changes in export 10-01, the newest that holds it: a preview of the windows 09-22 ..
    09-25 rebuilds ads_daily 09-24 first, so it builds, and shows changed, the windows after the range that
    read that day too (as many as [ads] rolling_window_days), and publishing it leaves nothing stale. (The
    days after the range that read the export are brought up to date first: a window that reads one of them
    stale is held, not built.)"""
    first, stop = ads_history(lab, setting, built_once, window_days)
    day = dt.date(2026, 9, 24)
    path = lab.raw / "ads" / "2026-10-01" / "ads.csv"
    path.write_text(path.read_text().replace(f"{day},C1,google,1000,50,10.00,", f"{day},C1,google,1000,50,99.00,"))
    # the days after the range that read export 10-01 too, up to date (the same rows): else the windows are held
    assert lab.range(day + 2 * DAY, stop, of="AdsDaily") == 0
    report = preview_json(capsys, "ads_rolling_7d", day - 2 * DAY, day + 2 * DAY)
    windows = {p["date"] for p in report["datasets"]["ads_rolling_7d"]["partitions"] if p["changed"]}
    last = min(day + (window_days - 1) * DAY, stop - DAY)
    assert windows == {(day + k * DAY).isoformat() for k in range((last - day).days + 1)}
    code, out = daybreak(capsys, "publish", report["id"])
    assert code == 0, out
    assert lab.rebuilt_by(lambda: lab.range(first, stop, of="AdsRolling7d"), "marts/ads_rolling_7d") == set()


@pytest.mark.parametrize("dataset", ["hotel_pickup", "otb_by_stay_date", "hotel_otb_export", "store_daily_sales"])
def test_a_preview_of_a_dataset_not_one_partition_per_date_is_one_line_and_exit_2(lab, capsys, dataset):
    """Before, each was a 31-line traceback (``unknown parameter date``, ``requires the 'hotel' parameter``)."""
    qsr_lab(lab)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["preview", dataset, "--start", str(D1), "--stop", str(STOP)])
    assert exit_.value.code == 2
    dated = "stg_qsr_pos, stg_hotel_bookings_daily, ads_daily, ads_rolling_7d, hotel_booking_state"
    assert capsys.readouterr().err.splitlines() == [
        f"daybreak: error: preview: argument dataset: {dataset} is not one partition per date: a preview takes "
        f"{dated} (daybreak plan {dataset} says what a backfill of it would run) (daybreak preview --help)"
    ]
    assert not lab.data.exists()
    with pytest.raises(SystemExit):
        cli.main(["preview", "--help"])
    assert dataset not in capsys.readouterr().out  # the choices offered are the ones taken


def test_a_preview_of_windows_holds_the_later_windows_that_read_stale_days_outside_it_as_the_plan_says(
    lab, capsys, setting, built_once
):
    """Export 10-01 re-sent with every spend one more: ads_daily 09-24 .. 09-30 are stale. A preview of the
    windows 09-22 .. 09-25 builds, as the plan's `first` says, ads_daily 09-24 and 09-25 only, not the days
    after the range that a backfill of the windows does not touch; the later windows that read them are not
    built (exit 25), each named with the day it waits on. Once those days are up to date, the same preview
    builds the later windows and can be published."""
    from tasks.views.plan import make_plan

    first, stop = ads_history(lab, setting, built_once)
    export = dt.date(2026, 10, 1)
    rows = [r.replace(",10.00,", ",11.00,") for r in ads_rows(export, first)]
    lab.ads_export(export, first, rows)
    start, end = dt.date(2026, 9, 22), dt.date(2026, 9, 26)
    plan = make_plan("ads_rolling_7d", start, end)
    assert [(name, label) for name, label, *_ in plan.first] == [("ads_daily", f"2026-09-2{d}") for d in (4, 5)]
    later = [(dt.date(2026, 9, 26) + k * DAY).isoformat() for k in range(6)]  # 09-26 .. 10-01 read 09-24 or 09-25
    assert {**plan.downstream, **plan.downstream_maybe} == {"ads_rolling_7d": later}
    before = production(lab)
    code, out = daybreak(capsys, "preview", "ads_rolling_7d", "--start", str(start), "--stop", str(end), "--json")
    assert code == 25, out
    report = json.loads(out)
    built = {name: [p["date"] for p in d["partitions"]] for name, d in report["datasets"].items()}
    assert built == {"ads_daily": ["2026-09-24", "2026-09-25"], "ads_rolling_7d": ["2026-09-24", "2026-09-25"]}
    assert report["not_built"] == [
        {
            "partition": f"marts/ads_rolling_7d/business_date={day}",
            "reason": "also reads staging/ads_daily/business_date=2026-09-26, outside the range and not up to date",
        }
        for day in later
    ]
    assert production(lab) == before
    assert lab.range(dt.date(2026, 9, 26), dt.date(2026, 10, 1), of="AdsDaily") == 0  # the days after the range
    report = preview_json(capsys, "ads_rolling_7d", start, end)
    built = {name: [p["date"] for p in d["partitions"]] for name, d in report["datasets"].items()}
    # 09-25's rows come out the same (its newest export is 10-02): window 10-01 reads 09-25, not 09-24, and stays
    windows = ["2026-09-24", "2026-09-25", *later[:-1]]
    assert built == {"ads_daily": ["2026-09-24", "2026-09-25"], "ads_rolling_7d": windows}
    code, out = daybreak(capsys, "publish", report["id"])
    assert code == 0, out
    assert lab.rebuilt_by(lambda: lab.range(first, stop, of="AdsRolling7d"), "marts/ads_rolling_7d") == set()


def test_a_preview_of_a_hotel_extract_builds_the_whole_chain_after_it_and_its_pickups_as_the_plan_lists(
    lab, capsys, setting
):
    """An open H2 booking of 09-13 re-sent with 4 rooms instead of 2: every booking state from 09-13 on carries
    it, past any horizon, and so do H2's pickups (H2's file holds H2's rows only: no other hotel's). The plan
    lists the whole chain and H2's pickups over it; the preview builds exactly those (and on-the-books, the
    exports), and once it is published nothing is stale."""
    from tasks.views.plan import make_plan
    from tests.test_hotels import write

    first = dt.date(2026, 9, 10)
    setting("daybreak", "start_date", first)
    days = 14
    for k in range(days):  # 09-10 .. 09-23; each booking stays on the books (arrival 10-20)
        day = first + k * DAY
        write(lab, day, "H1", [f"T{k},H1,{day}T12:00:00-04:00,CREATED,2026-10-20,2026-10-22,1,100.00,direct"])
        write(lab, day, "H2", [f"V{k},H2,{day}T12:00:00-07:00,CREATED,2026-10-20,2026-10-21,2,50.00,ota"])
    stop = first + days * DAY
    assert lab.luigi("AllHotelsPickup", "--start", str(first), "--stop", str(stop)) == 0
    assert lab.luigi("HotelOtbExport", "--hotel", "H2") == 0
    day = first + 3 * DAY
    write(lab, day, "H2", [f"V3,H2,{day}T12:00:00-07:00,CREATED,2026-10-20,2026-10-21,4,50.00,ota"])
    chain = [(day + k * DAY).isoformat() for k in range((stop - day).days)]  # 09-13 .. 09-23: past 7 days
    plan = make_plan("stg_hotel_bookings_daily", day, day + DAY)
    downstream = {**plan.downstream, **plan.downstream_maybe}
    assert downstream["hotel_booking_state"] == chain
    assert {p for p in downstream["hotel_pickup"] if p.endswith(" H2")} == {f"{d} H2" for d in chain}
    code, out = daybreak(capsys, "plan", "stg_hotel_bookings_daily", "--start", str(day), "--stop", str(day + DAY))
    last = chain[-1]
    assert f"  then stale downstream: hotel_booking_state {day} .. {last} (11 partitions)\n" in out, out
    pickups = f"hotel_pickup {day} .. {last} H2 (11 partitions)"  # H2's file: only H2's rows may change
    assert f"  then may go stale downstream: {pickups}\n" in out, out
    before = production(lab)
    report = preview_json(capsys, "stg_hotel_bookings_daily", day, day + DAY)
    assert report["not_built"] == [] and report["not_run"] == []
    built = {name: [p["partition"] for p in d["partitions"]] for name, d in report["datasets"].items()}
    assert [p.removeprefix("business_date=") for p in built["hotel_booking_state"]] == chain
    assert built["hotel_pickup"] == [f"business_date={d}/hotel_id=H2" for d in chain]  # the other hotels' stay
    assert "otb_by_stay_date" in built and "hotel_otb_export" in built
    assert production(lab) == before
    code, out = daybreak(capsys, "publish", report["id"])
    assert code == 0, out
    code, out = daybreak(capsys, "plan", "hotel_pickup", "--start", str(first), "--stop", str(stop))
    assert code == 0 and out.startswith("hotel_pickup: 0 partitions would run, 0 wait for raw data"), out


def test_plan_names_each_open_preview_of_the_range_and_why_one_cannot_be_published(threshold_lab, capsys):
    """Before: every open preview was `put it in place with daybreak publish ...`, one that would be refused too."""
    lab = threshold_lab
    first = preview_json(capsys, "stg_qsr_pos", D1, STOP)["id"]
    assert lab.range(D2, D3) == 0  # production rebuilds a date of the first preview
    second = preview_json(capsys, "stg_qsr_pos", D1, STOP)["id"]
    code, out = daybreak(capsys, "plan", "stg_qsr_pos", "--start", str(D1), "--stop", str(STOP))
    shown = [line for line in out.splitlines() if line.startswith("  open preview ")]
    assert shown == [  # oldest first
        f"  open preview {first} ({D1} .. {STOP}, 3 partitions): cannot be published: "
        f"staging/qsr_pos/business_date={D2}: production changed since the preview (its manifest is not the one "
        f"recorded); discard it with `daybreak discard {first}`",
        f"  open preview {second} ({D1} .. {STOP}, 2 partitions): see it with `daybreak previews`, put it in "
        f"place with `daybreak publish {second}`",
    ], out


def test_publish_says_what_it_keeps_of_the_preview_and_previews_says_when_it_was_published(threshold_lab, capsys):
    """Before: `its folder removed`, while the folder stayed with its record, and `previews` said `no: published`."""
    pid = preview_json(capsys, "stg_qsr_pos", D1, STOP)["id"]
    code, out = daybreak(capsys, "publish", pid)
    assert code == 0 and "its folder removed" not in out, out
    assert ", its record kept: daybreak previews lists it as published until it is swept, " in out, out
    folder = threshold_lab.data / "_state" / "preview" / pid
    assert sorted(p.name for p in folder.iterdir()) == ["_publish.lock", "preview.json"]  # its partitions' files gone
    record = json.loads((folder / "preview.json").read_text())
    code, out = daybreak(capsys, "previews")
    row = next(line for line in out.splitlines() if line.startswith(pid))
    swept = (dt.datetime.fromisoformat(record["created_at"]) + dt.timedelta(days=7)).date()
    published = dt.datetime.fromisoformat(record["published_at"]).strftime("%Y-%m-%d %H:%M")
    assert row.endswith(f" published  no: published at {published} UTC; swept after {swept}"), row


def test_the_previews_listing_keeps_its_columns_for_a_long_id_and_marks_a_cut_reason():
    from tasks.preview.render import render_listing

    row = {"start": "2026-09-01", "stop": "2026-09-05", "age_hours": 1.0, "size_bytes": 2e6, "state": "built"}
    long_id = "stg_qsr_pos-2026-09-01-2026-09-05-" + "x" * 30
    rows = [
        {**row, "id": "short", "publishable": True, "why_not": []},
        {
            **row,
            "id": long_id,
            "publishable": False,
            "why_not": [f"partition 2026-09-0{k} changed since" for k in range(9)],
        },
    ]
    header, short, long = render_listing(rows).splitlines()
    assert header.index("range") == short.index("2026-09-01..") == long.index("2026-09-01..")
    assert long.endswith(" ...") and "publishable" in header


def test_a_preview_while_another_run_rebuilds_production_says_it_is_no_comparison(threshold_lab, capsys, tmp_path):
    """A backfill of the same range on the new rules runs while the preview builds. Before, the preview found
    the dates that backfill had rebuilt up to date, built none of them and reported no change, exit 0. Each
    partition production changed under it is named not built (exit 25), and publish refuses the preview."""
    import luigi

    from tasks.qsr import StgQsrPos

    lab = threshold_lab
    cfg = lab.write_cfg(tmp_path / "backfill.cfg", suspicious_qty_threshold=15)
    env = {"LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(REPO)}
    ran = []

    @StgQsrPos.event_handler(luigi.Event.START)
    def _backfill_meanwhile(task):
        if not ran:
            args = ("RangeDaily", "--of", "StgQsrPos", "--start", str(D1), "--stop", str(STOP), "--local-scheduler")
            ran.append(lab.cli(*args, env=env))

    try:
        code, out = daybreak(capsys, "preview", "stg_qsr_pos", "--start", str(D1), "--stop", str(STOP), "--json")
    finally:
        StgQsrPos.remove_event_handler(luigi.Event.START, _backfill_meanwhile)
    assert ran and ran[0].returncode == 0, ran[0].stderr[-2000:]
    report = json.loads(out)
    assert code == 25, out
    named = {n["partition"]: n["reason"] for n in report["not_run"]}
    for day in (D2, D3):
        assert "production changed while the preview ran" in named[f"staging/qsr_pos/business_date={day}"], named
    capsys.readouterr()
    assert cli.main(["publish", report["id"]]) == 1


def test_a_partition_the_preview_built_from_a_file_changed_since_is_named_built_but_now_stale(threshold_lab, capsys):
    """A raw file the preview's first partition read is re-sent while the preview builds its last: that one
    was built, from the file as it was; before, it was said "not run"."""
    import luigi

    from tasks.qsr import StgQsrPos

    lab, started = threshold_lab, []

    @StgQsrPos.event_handler(luigi.Event.START)
    def _resend_meanwhile(task):
        started.append(task.date)
        if len(started) == 3:
            path = lab.raw / "qsr_pos" / str(started[0]) / "S001.csv"
            path.write_text(path.read_text().replace(",BURGER,1,", ",BURGER,2,"))

    try:
        code, out = daybreak(capsys, "preview", "stg_qsr_pos", "--start", str(D1), "--stop", str(STOP), "--json")
    finally:
        StgQsrPos.remove_event_handler(luigi.Event.START, _resend_meanwhile)
    assert code == 25, out
    named = {n["partition"]: n["reason"] for n in json.loads(out)["not_run"]}
    first = f"staging/qsr_pos/business_date={started[0]}"
    assert named[first].startswith("built, but now (stale: input"), named


def test_a_preview_with_nothing_to_rebuild_is_not_kept(lab, capsys):
    """Before, it was recorded open and publishable, listed by ``previews`` and named by ``plan``."""
    built_at_20(lab)
    code, out = daybreak(capsys, "preview", "stg_qsr_pos", "--start", str(D1), "--stop", str(STOP))
    assert code == 0, out
    assert "nothing to rebuild" in out and "nothing to publish" in out and "daybreak publish" not in out, out
    code, out = daybreak(capsys, "previews")
    assert code == 0 and "stg_qsr_pos-" not in out, out
    assert not any((lab.data / "_state" / "preview").glob("stg_qsr_pos-*"))
