"""Stores discovered at run time: the sensor, its registry, and one partition per store."""

from __future__ import annotations

import datetime as dt
import json
import os
import threading

import duckdb
import pytest

from tasks import store_marts
from tests.conftest import qsr_rows

pytestmark = pytest.mark.luigi

START = dt.date(2026, 9, 10)


def store_parts(lab) -> dict[str, str]:
    out = {}
    for p in (lab.data / "marts/store_daily_sales").glob("store_id=*/_manifest.json"):
        out[p.parent.name.split("=")[1]] = json.loads(p.read_text())["finished_at"]
    return out


def build_all(lab) -> int:
    assert lab.range(START, START + dt.timedelta(days=4)) == 0
    return lab.luigi("AllStores")


def land_keeping_folder_time(lab, day: dt.date, store: str) -> None:
    """A file of ``store`` (S001's rows, relabelled) lands in ``day``'s folder, whose time is then set back as
    rsync -a or cp -p keep it."""
    folder = lab.raw / "qsr_pos" / day.isoformat()
    stamp = folder.stat().st_mtime_ns
    lab.qsr_file(day.isoformat(), store, [r.replace("S001", store) for r in qsr_rows("S001", day)])
    os.utime(folder, ns=(stamp, stamp))


def test_a_new_store_is_registered_and_only_its_partition_is_built(lab, setting):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S002"))
    assert build_all(lab) == 0
    assert store_marts.read_registry() == {"S001": "2026-09-10", "S002": "2026-09-10"}
    before = store_parts(lab)
    assert set(before) == {"S001", "S002"}
    # S003 opens: its first file lands in folder 09-13
    new_day = START + dt.timedelta(days=3)
    lab.qsr_file(new_day.isoformat(), "S003", [r.replace("S001", "S003") for r in qsr_rows("S001", new_day)])
    assert build_all(lab) == 0
    after = store_parts(lab)
    assert store_marts.read_registry()["S003"] == "2026-09-13"
    assert {s for s in after if after[s] != before.get(s)} == {"S003"}  # existing stores untouched
    got = duckdb.execute(
        f"select business_date, orders from '{lab.data}/marts/store_daily_sales/store_id=S003/data.parquet' order by 1"
    ).fetchall()
    # folder 09-13 holds 2 lines after 05:00 (business date 09-13: orders B, C) and 2 before (09-12: order A)
    assert got == [(dt.date(2026, 9, 12), 1), (dt.date(2026, 9, 13), 2)]


def test_a_late_file_rebuilds_exactly_one_store(lab, setting):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S007", "S009"))
    assert build_all(lab) == 0
    before = store_parts(lab)
    late = START + dt.timedelta(days=2)
    path = lab.raw / "qsr_pos" / late.isoformat() / "S007.csv"
    path.write_text(path.read_text().replace(",COLA,3,", ",COLA,9,"))  # re-sent with corrected content
    assert build_all(lab) == 0
    after = store_parts(lab)
    assert {s for s in after if after[s] != before[s]} == {"S007"}


def test_invalid_names_are_never_registered_or_read(lab, setting):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 1, stores=("S001",))
    folder = lab.raw / "qsr_pos" / START.isoformat()
    (folder / "s002.csv").write_text("garbage")
    (folder / "..S003.csv").write_text("garbage")
    found, invalid = store_marts.discover(store_marts.RawZone(lab.raw), START, START + dt.timedelta(days=2))
    assert set(found) == {"S001"}
    assert sorted(invalid) == ["qsr_pos/2026-09-10/..S003.csv", "qsr_pos/2026-09-10/s002.csv"]


def test_two_sensors_at_once_lose_no_entry(lab):
    barrier = threading.Barrier(8)

    def sensor(i: int) -> None:
        barrier.wait()
        for k in range(20):
            store_marts.register({f"S{i}{k:02d}": "2026-09-10"})

    threads = [threading.Thread(target=sensor, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store_marts.read_registry()) == 8 * 20
    assert store_marts.register({"S000": "2026-09-01", "S100": "2026-09-01"})["S100"] == "2026-09-01"  # earliest wins


def full_read(lab, store_id: str) -> list[dict]:
    """The old StoreDailySales build, as an oracle: every staging partition read whole, filtered to the
    store, summed per date with pyarrow.compute (no code shared with tasks/transforms/stores.py)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rows = []
    for path in sorted((lab.data / "staging/qsr_pos").glob("business_date=*/data.parquet")):
        t = pq.read_table(path)
        t = t.filter(pc.equal(t["store_id"], store_id))
        if t.num_rows:
            rows.append(
                {
                    "business_date": dt.date.fromisoformat(path.parent.name.split("=")[1]),
                    "net_sales": pc.sum(t["net_amount"]).as_py(),
                    "orders": pc.count_distinct(t["order_id"]).as_py(),
                    "suspicious_lines": pc.sum(t["is_suspicious"].cast(pa.int64())).as_py() or 0,
                }
            )
    return rows


def store_output(lab, store_id: str) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(lab.data / f"marts/store_daily_sales/store_id={store_id}/data.parquet").to_pylist()


def store_manifest(lab, store_id: str) -> dict:
    return json.loads((lab.data / f"marts/store_daily_sales/store_id={store_id}/_manifest.json").read_text())


def test_a_re_sent_file_rebuilds_two_staging_dates_and_reads_only_them_for_its_store(lab, setting):
    setting("daybreak", "start_date", START)
    setting("qsr", "suspicious_qty_threshold", 2)  # COLA x3 lines are suspicious: a non-zero count to compare
    shops = ("S001", "S002", "S003", "S004")
    lab.qsr_days(START, 6, stores=shops)
    assert lab.range(START, START + dt.timedelta(days=6)) == 0
    assert lab.luigi("AllStores") == 0
    assert store_manifest(lab, "S003")["stats"]["dates_read"] == 6  # built from scratch: every date
    for s in shops:
        assert store_output(lab, s) == full_read(lab, s)
    before = store_parts(lab)

    day = START + dt.timedelta(days=3)  # S003's file of folder D re-sent: staging D-1 and D read it
    path = lab.raw / "qsr_pos" / day.isoformat() / "S003.csv"
    path.write_text(
        path.read_text()
        .replace(",COLA,3,", ",COLA,7,")
        .replace(",BURGER,1,6.50,,COMPLETED", ",BURGER,2,6.50,,COMPLETED")
    )

    def rebuild():
        assert lab.range(START, START + dt.timedelta(days=6)) == 0
        assert lab.luigi("AllStores") == 0

    assert lab.rebuilt_by(rebuild) == {day - dt.timedelta(days=1), day}
    after = store_parts(lab)
    assert {s for s in after if after[s] != before[s]} == {"S003"}
    stats = store_manifest(lab, "S003")["stats"]
    assert stats["dates_read"] == 2  # the two rebuilt dates, not the whole history
    assert stats["staging_rows_read"] == 2 * len(shops)  # one totals row per store and date read, no lines
    for s in shops:
        assert store_output(lab, s) == full_read(lab, s)
    assert store_output(lab, "S003") != [dict(r) for r in full_read(lab, "S001")]  # the change is there


def test_staging_built_before_the_store_totals_existed_is_read_whole(lab, setting):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 3, stores=("S001", "S002"))
    assert lab.range(START, START + dt.timedelta(days=3)) == 0
    for manifest_path in (lab.data / "staging/qsr_pos").glob("business_date=*/_manifest.json"):
        manifest = json.loads(manifest_path.read_text())  # as an older version wrote it: no totals file
        manifest["data_files"] = [f for f in manifest["data_files"] if f["name"] == "data.parquet"]
        manifest_path.write_text(json.dumps(manifest))
        (manifest_path.parent / "_store_totals.arrow").unlink()
    assert lab.luigi("AllStores") == 0
    assert sorted(p.name for p in lab.partition(START).iterdir()) == ["_manifest.json", "data.parquet"]  # not rebuilt
    stats = store_manifest(lab, "S002")["stats"]
    assert stats["dates_read"] == 3 and stats["staging_rows_read"] == 3 * 8  # every line of both stores
    assert store_output(lab, "S002") == full_read(lab, "S002")


class CountingZone(store_marts.RawZone):
    """The real local raw zone, remembering which folders were listed."""

    def __init__(self, root):
        super().__init__(root)
        self.scanned: list[str] = []

    def scan_folder(self, source, date):
        self.scanned.append(date.isoformat())
        return super().scan_folder(source, date)


def test_the_sensor_lists_only_folders_it_has_not_seen(lab, setting, monkeypatch):
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S002"))  # folders 09-10 .. 09-14
    zone = CountingZone(lab.raw)
    monkeypatch.setattr(store_marts.RawZone, "from_uri", lambda uri: zone)  # the zone every task of this run reads
    sensor = ("DiscoverStores", "--start", str(START), "--stop", str(START + dt.timedelta(days=30)))

    def listed_by_run() -> list[str]:
        lab.wait_past_last_raw_change()  # a folder listed in the tick it changed is listed again next run
        zone.scanned.clear()
        assert lab.luigi(*sensor) == 0
        return sorted(zone.scanned)

    assert listed_by_run() == [(START + dt.timedelta(days=k)).isoformat() for k in range(5)]
    assert listed_by_run() == []  # nothing new: complete without listing a folder
    new_day = (START + dt.timedelta(days=5)).isoformat()
    lab.qsr_file(new_day, "S003", qsr_rows("S003", START + dt.timedelta(days=5)))
    assert listed_by_run() == [new_day]
    old_day = (START + dt.timedelta(days=1)).isoformat()
    lab.qsr_file(old_day, "S004", qsr_rows("S004", START + dt.timedelta(days=1)))  # a late file: a new entry
    assert listed_by_run() == [old_day]
    assert store_marts.read_registry() == {"S001": "2026-09-10", "S002": "2026-09-10", "S003": new_day, "S004": old_day}
    (lab.data / "_state" / store_marts.REGISTRY).unlink()  # a lost registry is rebuilt from what the sensor remembers
    assert listed_by_run() == []
    assert store_marts.read_registry()["S004"] == old_day


def test_plan_and_status_say_the_one_store_whose_file_changed_may_rebuild_and_the_run_rebuilds_it(lab, setting, capsys):
    """S007's file re-sent: the stale staging dates can change S007's rows only, so plan and status name S007
    alone as pending (before: every store, though the plan of stg_qsr_pos named S007 only)."""
    from tasks.cli import main

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=tuple(f"S{k:03}" for k in range(1, 12)))  # 11: the status abbreviates them
    assert build_all(lab) == 0
    before = store_parts(lab)
    late = START + dt.timedelta(days=2)
    path = lab.raw / "qsr_pos" / late.isoformat() / "S007.csv"
    path.write_text(path.read_text().replace(",COLA,3,", ",COLA,9,"))  # re-sent with corrected content
    capsys.readouterr()
    args = ["--start", str(START), "--stop", str(START + dt.timedelta(days=4))]
    assert main(["plan", "store_daily_sales", *args]) == 1
    plan = capsys.readouterr().out
    head = "store_daily_sales: 0 partitions would run, 1 may run once their upstream is rebuilt, 0 wait for raw data"
    assert plan.splitlines()[0] == head, plan
    upstream = f"staging/qsr_pos {late - dt.timedelta(days=1)} (stale: input content changed: qsr_pos/{late}/S007.csv)"
    root = f"may rebuild once its upstream is rebuilt: {upstream}"
    assert [line for line in plan.splitlines() if line.startswith("  may ")] == [f"  may   S007: {root}"], plan
    assert "  run:  luigi --module tasks AllStores --local-scheduler" in plan, plan
    assert main(["plan", "stg_qsr_pos", *args]) == 1  # the upstream's plan names the same store
    assert "  then may go stale downstream: store_daily_sales S007\n" in capsys.readouterr().out
    assert main(["status", "--dataset", "store_daily_sales"]) == 0
    shown = capsys.readouterr().out
    assert f"store_daily_sales  (unpartitioned)  pending: store_id S007: {root}\n" in shown, shown
    assert lab.luigi("AllStores") == 0
    after = store_parts(lab)
    assert {s for s in after if after[s] != before[s]} == {"S007"}
    assert main(["plan", "store_daily_sales", *args]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "store_daily_sales: 0 partitions would run, 0 wait for raw data"


def test_a_file_touched_with_the_same_bytes_is_no_store_that_may_rebuild_beside_another_stores_new_file(
    lab, setting, capsys
):
    """S007's file written again with the same bytes, and a new store's file in the same window: only the new
    store's rows may change (before: S007 was named pending too, as its file's time changed)."""
    from tasks.cli import main

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=tuple(f"S{k:03}" for k in range(1, 12)))
    assert build_all(lab) == 0
    late = START + dt.timedelta(days=2)
    path = lab.raw / "qsr_pos" / late.isoformat() / "S007.csv"
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data)  # the same bytes, a new time
    os.utime(path, ns=(path.stat().st_mtime_ns + 10**9,) * 2)
    lab.qsr_file(late.isoformat(), "S051", qsr_rows("S051", late))  # a store's late file: new rows
    capsys.readouterr()
    assert main(["status", "--dataset", "store_daily_sales"]) == 0
    shown = capsys.readouterr().out
    assert "missing: store_id S051: " in shown and "S007" not in shown, shown  # S051: new; no store pending
    assert main(["plan", "stg_qsr_pos", "--start", str(START), "--stop", str(START + dt.timedelta(days=4))]) == 1
    planned = capsys.readouterr().out
    assert "2 partitions would run" in planned and "S007" not in planned, planned


def test_a_deleted_staging_partition_is_rebuilt_for_the_stores_not_left_out_of_their_rows(lab, setting):
    """Deleting a partition forces its rerun: a store's daily sales read every staging date whose raw folder is
    there, so AllStores rebuilds the deleted date first and the stores keep its row."""
    import shutil

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S002"))
    assert build_all(lab) == 0
    full = {s: full_read(lab, s) for s in ("S001", "S002")}
    gone = START + dt.timedelta(days=1)
    assert gone in {r["business_date"] for r in full["S001"]}
    shutil.rmtree(lab.partition(gone))
    assert lab.luigi("AllStores") == 0
    assert lab.partition(gone).is_dir()  # rebuilt as the stores' upstream
    for s in ("S001", "S002"):
        assert store_output(lab, s) == full[s] == full_read(lab, s)


def test_all_stores_reads_no_staging_date_whose_business_day_is_not_over(lab, setting):
    """Tomorrow's folder is there in the evening (a source that dates its folders in UTC): today's staging date has
    both its folders, but its business day is not over. AllStores neither builds nor reads it, as plan and the
    ranges leave it out: the stores' rows end yesterday."""
    from tasks.settings import day_in_progress

    today, day = day_in_progress(), dt.timedelta(days=1)
    setting("daybreak", "start_date", today - 2 * day)
    lab.qsr_days(today - 2 * day, 3)  # folders today-2 .. today+1
    assert lab.luigi("AllStores") == 0
    assert set(lab.built_at()) == {today - 2 * day, today - day}
    for store in ("S001", "S002"):
        assert {r["business_date"] for r in store_output(lab, store)} == {today - 2 * day, today - day}


def test_plan_counts_the_stores_the_sensor_has_not_registered_yet(lab, setting, capsys):
    """Before the first AllStores, and when a new store's first file arrives, the stores that run will build
    are partitions that would run: plan exits 1 and names them, not 0 with nothing to do."""
    from tasks.cli import main

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S002"))
    assert lab.range(START, START + dt.timedelta(days=4)) == 0
    args = ["plan", "store_daily_sales", "--start", str(START), "--stop", str(START + dt.timedelta(days=4))]
    capsys.readouterr()
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "store_daily_sales: 2 partitions would run" in out and "  run   S001 .. S002 (2 partitions)  missing" in out
    assert lab.luigi("AllStores") == 0
    assert main(args) == 0
    new_day = START + dt.timedelta(days=3)
    lab.qsr_file(new_day.isoformat(), "S003", [r.replace("S001", "S003") for r in qsr_rows("S001", new_day)])
    capsys.readouterr()
    assert main(args) == 1
    assert "  run   S003  missing" in capsys.readouterr().out
    assert store_marts.read_registry().keys() == {"S001", "S002"}  # plan registers nothing


def test_a_store_added_within_the_clock_tick_of_the_listing_is_registered_at_the_next_run(lab, setting):
    """A folder stamped within the clock resolution of the sensor's listing (a whole second over SFTP; here a
    second ahead of it) may get a file in the same tick without its stamp changing: the sensor lists it again
    at the next run, and the store added then is registered and built."""
    import os
    import time

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S002"))
    day = START + dt.timedelta(days=1)
    folder = lab.raw / "qsr_pos" / day.isoformat()
    tick = time.time_ns() + 10**9  # the folder's stamp: not older than the listing by the clock resolution
    os.utime(folder, ns=(tick, tick))
    assert build_all(lab) == 0
    assert set(store_marts.read_registry()) == {"S001", "S002"}
    lab.qsr_file(day.isoformat(), "S003", [r.replace("S001", "S003") for r in qsr_rows("S001", day)])
    os.utime(folder, ns=(tick, tick))  # added in the same tick: the folder keeps its stamp
    assert lab.luigi("AllStores") == 0
    assert store_marts.read_registry()["S003"] == day.isoformat()
    assert "S003" in store_parts(lab)


def test_a_store_a_staging_partition_read_is_registered_whatever_its_folder_stamp_says(lab, setting, capsys, caplog):
    """A store file added with the folder's stamp kept (a copy that restores folder times): its staging
    partitions read it, so plan counts its partition and the next AllStores registers and builds it."""
    from tasks.cli import main

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S002"))
    assert build_all(lab) == 0
    day = START + dt.timedelta(days=2)
    land_keeping_folder_time(lab, day, "S003")
    args = ["plan", "store_daily_sales", "--start", str(START), "--stop", str(START + dt.timedelta(days=4))]
    capsys.readouterr()
    assert lab.range(START, START + dt.timedelta(days=4)) == 0  # the staging dates that read it are rebuilt
    assert main(args) == 1
    assert "  run   S003  missing" in capsys.readouterr().out
    assert main(["status", "--dataset", "store_daily_sales", "--json"]) == 0  # status says what plan says
    (row,) = json.loads(capsys.readouterr().out)
    registers = "not registered yet: AllStores registers and builds it"
    assert (row["state"], row["reason"]) == ("missing", f"store_id S003: no partition, {registers}"), row
    assert lab.luigi("AllStores") == 0
    assert store_marts.read_registry()["S003"] == day.isoformat()
    got = duckdb.execute(
        f"select business_date, orders from '{lab.data}/marts/store_daily_sales/store_id=S003/data.parquet' order by 1"
    ).fetchall()
    assert got == [(day - dt.timedelta(days=1), 1), (day, 2)]
    assert main(args) == 0
    caplog.clear()
    with caplog.at_level("INFO", logger="luigi-interface"):
        assert lab.luigi("AllStores") == 0  # nothing to do: the summary says so (it printed nothing)
    assert "StoreDailySales S001, S002, S003: 3 up to date" in caplog.text, caplog.text[-2000:]


def test_plan_and_status_name_a_new_store_whose_file_landed_with_its_folders_time_kept(lab, setting, capsys):
    """S009's first file lands in a folder the sensor has listed, and the folder's time is put back (rsync -a,
    cp -p): the staleness check of the staging dates lists that folder and names the file, so plan counts S009's
    partition as one that would run and status names it missing, as the run then builds it (before: `0
    partitions would run`, then the run said `1 ran`)."""
    from tasks.cli import main

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S002", "S003"))
    assert build_all(lab) == 0
    day = START + dt.timedelta(days=2)
    land_keeping_folder_time(lab, day, "S009")
    capsys.readouterr()
    assert main(["plan", "store_daily_sales", "--start", str(START), "--stop", str(START + dt.timedelta(days=4))]) == 1
    plan = capsys.readouterr().out
    # S009's file holds S009's rows only: the other stores' rows cannot change
    assert plan.startswith("store_daily_sales: 1 partition would run, 0 wait") and "  run   S009  missing" in plan
    assert main(["status", "--dataset", "store_daily_sales", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["state"] == "missing" and row["reason"].startswith("store_id S009: no partition, not registered yet")
    assert store_marts.read_registry().keys() == {"S001", "S002", "S003"}  # neither registers anything
    assert lab.luigi("AllStores") == 0
    assert "S009" in store_parts(lab)


@pytest.fixture
def all_stores(lab, setting, caplog):
    """``luigi --module tasks AllStores`` (or the arguments given) run in this process, start_date START:
    (exit code, what it logged: Luigi's summary, then Daybreak's)."""
    setting("daybreak", "start_date", START)

    def run(*args: str) -> tuple[int, str]:
        caplog.clear()
        with caplog.at_level("INFO", logger="luigi-interface"):
            code = lab.luigi(*(args or ("AllStores",)))
        return code, caplog.text

    return run


@pytest.fixture
def all_stores_command(lab, tmp_path):
    """``luigi --module tasks AllStores --local-scheduler`` as a user runs it (a process of its own, this
    lab's luigi.cfg): (exit code, what it printed)."""
    from tasks.settings import write_config
    from tests.conftest import REPO

    cfg = write_config(
        tmp_path / "stores.cfg", {"daybreak": {"raw_root": lab.raw, "data_root": lab.data, "start_date": START}}
    )
    env = {"LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(REPO)}

    def run(*args: str) -> tuple[int, str]:
        proc = lab.cli(*(args or ("AllStores",)), "--local-scheduler", env=env)
        return proc.returncode, proc.stderr

    return run


def test_all_stores_with_no_store_yet_says_so_in_its_summary_and_exits_0(lab, all_stores):
    (lab.raw / "qsr_pos" / START.isoformat()).mkdir(parents=True)
    for _ in range(2):  # the first run (the sensor runs), then again (nothing to do)
        code, out = all_stores()
        assert code == 0, out[-3000:]
        summary = out[out.index("summary of this run:") :]
        assert (
            summary.splitlines()[1] == f"  AllStores: no store known yet (no store's file under {lab.raw / 'qsr_pos'})"
        )


@pytest.mark.system  # the luigi command: what it prints (test_all_stores_with_no_store_yet_says_so_in_its_summary...)
def test_all_stores_with_no_store_yet_prints_daybreaks_summary_and_exits_0(lab, all_stores_command):
    """An empty qsr_pos folder: the first run printed nothing, the next Luigi's own summary
    ("===== Luigi Execution Summary ===== ... This progress looks :)")."""
    (lab.raw / "qsr_pos" / START.isoformat()).mkdir(parents=True)
    for _ in range(2):  # the first run (the sensor runs), then again (nothing to do)
        code, out = all_stores_command()
        assert code == 0, out[-3000:]
        summary = out[out.index("summary of this run:") :] if "summary of this run:" in out else out
        assert summary.splitlines()[0].startswith("summary of this run: "), out[-3000:]
        assert (
            summary.splitlines()[1] == f"  AllStores: no store known yet (no store's file under {lab.raw / 'qsr_pos'})"
        )
        assert "Luigi Execution Summary" not in out


def test_all_stores_waiting_for_a_raw_folder_exits_20_as_a_range_does(lab, all_stores):
    import shutil

    lab.qsr_days(START, 4, stores=("S001", "S002"))
    gap = lab.raw / "qsr_pos" / (START + dt.timedelta(days=2)).isoformat()
    moved = shutil.move(gap, lab.root / "gap")
    code, out = all_stores()  # the first run: no store registered yet
    assert code == 20, out[-3000:]
    assert "StoreDailySales S001, S002: 2 waiting" in out, out[-3000:]
    shutil.move(moved, gap)
    assert all_stores()[0] == 0
    shutil.move(gap, lab.root / "gap")  # after a first run: the stores registered
    for day in (START + dt.timedelta(days=1), START + dt.timedelta(days=2)):  # kept as built while there
        shutil.rmtree(lab.partition(day))
    code, out = all_stores()
    assert code == 20, out[-3000:]
    assert (
        "StoreDailySales S001, S002: 2 waiting" in out and f"waiting  for raw folder {gap}/ (not there yet)" in out
    ), out
    range_code, _ = all_stores("RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", "2026-09-14")
    assert range_code == code


def test_an_empty_newest_folder_is_not_the_newest_the_stores_build_through_the_last_folder_arrived(lab, all_stores):
    """The uploader makes today's folder before its files: the stores are built through the folders that arrived
    (before: all waited for the empty one, exit 20)."""
    lab.qsr_days(START, 4, stores=("S001", "S002"))
    assert all_stores()[0] == 0
    (lab.raw / "qsr_pos" / (START + dt.timedelta(days=5)).isoformat()).mkdir()
    code, out = all_stores()
    assert code == 0, out[-3000:]
    assert "waiting" not in out, out[-3000:]


def test_all_stores_superseded_by_a_newer_version_exits_10_as_a_range_does(lab, all_stores):
    from tasks.freshness.rules import fingerprint

    lab.qsr_days(START, 4, stores=("S001", "S002"))
    assert all_stores()[0] == 0
    path = lab.data / "marts/store_daily_sales/store_id=S001/_manifest.json"
    manifest = json.loads(path.read_text())
    name, number = manifest["rules"]["version"].rsplit("/", 1)
    newer = f"{name}/{int(number) + 1}"
    manifest["rules"]["version"] = newer  # as a host with the next version of the code writes it
    manifest["rules_fingerprint"] = fingerprint(manifest["rules"])
    path.write_text(json.dumps(manifest))
    code, out = all_stores()
    assert code == 10, out[-3000:]
    assert f"built by version {newer}" in out and "StoreDailySales S001, S002: 1 superseded, 1 up to date" in out, out[
        -3000:
    ]


def test_all_stores_with_a_failed_partition_exits_30_as_a_range_does(lab, all_stores):
    lab.qsr_days(START, 4, stores=("S001", "S002"))
    assert all_stores()[0] == 0
    (lab.raw / "qsr_pos" / (START + dt.timedelta(days=2)).isoformat() / "S002.csv").write_text("")
    code, out = all_stores()
    assert code == 30, out[-3000:]
    assert "file is empty (no header row)" in out, out[-3000:]


def test_a_store_that_opens_while_all_stores_runs_is_built_by_that_run_without_a_failure(lab, setting):
    """A new store's first file lands while AllStores builds the others: the run's requirements stay those
    it scheduled (Luigi would fail AllStores and reschedule it), and the store is registered and built in
    the same run."""
    import luigi

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S002"))
    day = START + dt.timedelta(days=3)
    landed, failures = [], []

    @store_marts.StoreDailySales.event_handler(luigi.Event.START)
    def _lands(task):
        if not landed:
            landed.append(task.store_id)
            lab.qsr_file(day.isoformat(), "S003", [r.replace("S001", "S003") for r in qsr_rows("S001", day)])

    @store_marts.AllStores.event_handler(luigi.Event.FAILURE)
    def _failed(task, exception):
        failures.append(str(exception))

    assert lab.range(START, START + dt.timedelta(days=4)) == 0
    try:
        assert lab.luigi("AllStores") == 0
    finally:
        store_marts.StoreDailySales.remove_event_handler(luigi.Event.START, _lands)
        store_marts.AllStores.remove_event_handler(luigi.Event.FAILURE, _failed)
    assert landed and failures == []
    assert set(store_parts(lab)) == {"S001", "S002", "S003"}
    assert store_marts.read_registry()["S003"] == day.isoformat()


def test_status_and_plan_of_the_stores_look_at_everything_in_one_pass(lab, setting, capsys):
    """A store's upstream (every staging date) is found in the view's own pass: asking it outside a Luigi run
    must not start another pass, which would drop every listing and state the view had read so far."""
    from tasks.cli import main
    from tasks.freshness import engine as freshness

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S002", "S003"))
    assert build_all(lab) == 0
    args = ["--start", str(START), "--stop", str(START + dt.timedelta(days=4))]
    for command in (["status", *args], ["plan", "store_daily_sales", *args]):
        before = freshness.process_engine().passes
        assert main(command) == 0, capsys.readouterr()
        assert freshness.process_engine().passes == before + 1, command


def test_a_deleted_staging_date_before_start_date_leaves_the_stores_rows(lab, setting):
    """start_date moves past 09-11, then the staging partition of 09-11 is deleted: no run rebuilds it (it is
    before start_date), so the stores read it no more and drop its row, as staging does."""
    import shutil

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S002"))
    assert build_all(lab) == 0
    gone = START + dt.timedelta(days=1)
    setting("daybreak", "start_date", gone + dt.timedelta(days=1))
    shutil.rmtree(lab.partition(gone))
    assert lab.luigi("AllStores") == 0
    assert not lab.partition(gone).exists()
    for s in ("S001", "S002"):
        assert gone not in {r["business_date"] for r in store_output(lab, s)}
        assert store_output(lab, s) == full_read(lab, s)


def test_status_names_every_store_not_ok_grouped_by_state_worst_first(lab, setting, capsys):
    """The dataset's one line shows its worst state, and names every store not ok: S002 stale (a stray
    file in its partition) and S001 missing, in the text, --json and the page."""
    import shutil

    from tasks.cli import main
    from tasks.views import status, status_html

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S002", "S003"))
    assert build_all(lab) == 0
    marts = lab.data / "marts/store_daily_sales"
    shutil.rmtree(marts / "store_id=S001")
    shutil.copy(marts / "store_id=S003/data.parquet", marts / "store_id=S002/part-1.parquet")
    reason = (
        "store_id S002: stray file in the partition: marts/store_daily_sales/store_id=S002/part-1.parquet; "
        "S001 missing: no partition"
    )
    capsys.readouterr()
    assert main(["status", "--dataset", "store_daily_sales"]) == 0
    assert f"store_daily_sales  (unpartitioned)  stale: {reason}" in capsys.readouterr().out.splitlines()
    assert main(["status", "--dataset", "store_daily_sales", "--json"]) == 0
    assert [(r["state"], r["reason"]) for r in json.loads(capsys.readouterr().out)] == [("stale", reason)]
    page = status_html.render(status.collect(START, START + dt.timedelta(days=4), ["store_daily_sales"]), previews=[])
    assert json.dumps(reason) in page


def test_a_folder_of_no_registered_store_and_a_file_beside_the_stores_are_named_by_status_and_plan(
    lab, setting, capsys
):
    """A glob over the stores' files reads store_id=S998 (a copy of S001: its rows twice) and notes.txt:
    status names both above the line, S998 left over with the command that deletes it; plan names S998."""
    import shutil

    from tasks.cli import main

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S002"))
    assert build_all(lab) == 0
    marts = lab.data / "marts/store_daily_sales"
    shutil.copytree(marts / "store_id=S001", marts / "store_id=S998")
    (marts / "notes.txt").write_text("x\n")
    capsys.readouterr()
    assert main(["status", "--dataset", "store_daily_sales"]) == 0
    shown = capsys.readouterr().out.splitlines()
    left = (
        "left over: 1 partition of store S998, not registered (_state/stores.json): readers of the datasets' files "
        "still get their rows, and no run removes them. If S998 is a store, AllStores registers it once its files "
        f"are in the raw zone; else delete them: rm -r {marts}/store_id=S998"
    )
    assert shown[1:6] == [
        left,
        "  marts/store_daily_sales/store_id=S998/",
        "1 entry under the datasets' folders that no partition is (never read):",
        "  marts/store_daily_sales/notes.txt",
        "store_daily_sales  (unpartitioned)  ok; 1 left over (above)",
    ], shown
    args = ["plan", "store_daily_sales", "--start", str(START), "--stop", str(START + dt.timedelta(days=4))]
    assert main(args) == 1
    plan = capsys.readouterr().out
    assert "  left  marts/store_daily_sales/store_id=S998/" in plan and f"  {left}" in plan, plan


def test_the_progress_line_of_a_store_names_the_store(lab, setting, caplog):
    """``- StoreDailySales S001``, as ``- HotelPickup 2026-09-01 H5`` names its hotel (not ``- StoreDailySales``)."""
    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S002"))
    assert lab.range(START, START + dt.timedelta(days=4)) == 0
    caplog.clear()
    with caplog.at_level("INFO", logger="luigi-interface"):
        assert lab.luigi("AllStores") == 0
    shown = [r.getMessage().rsplit(" - ", 1)[-1] for r in caplog.records if r.getMessage().startswith("progress: ")]
    assert sorted(shown) == ["StoreDailySales S001", "StoreDailySales S002"], shown


def test_status_before_the_first_all_stores_says_what_registers_the_stores(lab, setting):
    from tasks.views import status

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 2, stores=("S001",))
    (row,) = status.collect(START, START + dt.timedelta(days=2), ["store_daily_sales"])
    assert (row.state, row.reason) == (
        "missing",
        "store_id S001: no partition, not registered yet: AllStores registers and builds it",
    )


def test_status_names_a_new_stores_missing_partition_and_the_others_up_to_date(lab, setting, capsys):
    """A new store's first file makes the staging date stale (S009's rows only can change) and the new store
    a partition the next run builds: status names it missing, as plan names it a run, and no other store."""
    from tasks.cli import main

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S002", "S003"))
    assert build_all(lab) == 0
    day = START + dt.timedelta(days=2)
    lab.qsr_file(day.isoformat(), "S009", [r.replace("S001", "S009") for r in qsr_rows("S001", day)])
    capsys.readouterr()
    assert main(["status", "--dataset", "store_daily_sales", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    new = "store_id S009: no partition, not registered yet: AllStores registers and builds it"
    assert row["state"] == "missing" and row["reason"] == new, row
    assert main(["status", "--dataset", "store_daily_sales"]) == 0
    assert f"  (unpartitioned)  missing: {new}\n" in capsys.readouterr().out
    assert store_marts.read_registry().keys() == {"S001", "S002", "S003"}  # status registers nothing


def test_staging_kept_before_a_later_start_date_counts_as_ok_for_the_stores_after_a_rule_change(lab, setting, capsys):
    """start_date moves from 09-10 to 09-12 and a rule changes: staging 09-10 and 09-11 stay as built, never
    rebuilt, and are what the stores read. The stores are rebuilt once, then ok: a second AllStores builds
    nothing and exits 0, and status, plan and a preview agree."""
    from tasks.cli import main

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 6, stores=("S001", "S002", "S003"))
    stop = START + dt.timedelta(days=6)
    assert lab.range(START, stop) == 0
    assert lab.luigi("AllStores") == 0
    moved = START + dt.timedelta(days=2)
    setting("daybreak", "start_date", moved)
    setting("qsr", "suspicious_qty_threshold", 25)
    assert lab.range(START, stop) == 0
    assert lab.luigi("AllStores") == 0
    rebuilt = store_parts(lab)
    assert lab.luigi("AllStores") == 0
    assert store_parts(lab) == rebuilt  # nothing built again
    for s in ("S001", "S002", "S003"):
        assert store_output(lab, s) == full_read(lab, s)
    args = ["--start", str(START), "--stop", str(stop)]
    capsys.readouterr()
    assert main(["status", "--dataset", "stg_qsr_pos", *args]) == 0
    kept = f"{START} .. {moved - dt.timedelta(days=1)} ok, before [daybreak] start_date {moved}: kept as built"
    assert kept in capsys.readouterr().out
    assert main(["status", "--dataset", "store_daily_sales"]) == 0
    assert "store_daily_sales  (unpartitioned)  ok" in capsys.readouterr().out.splitlines()
    assert main(["plan", "store_daily_sales", *args]) == 0, capsys.readouterr().out
    assert "first" not in capsys.readouterr().out
    assert main(["preview", "stg_qsr_pos", *args]) == 0, capsys.readouterr()


def test_a_store_changed_after_this_run_built_it_is_named_and_the_run_exits_25_not_10(lab, setting, caplog):
    """A file lands in S001's partition after its build, before AllStores runs: Luigi refuses to run AllStores
    (a requirement not complete at run time). No other host built it, so the run is not superseded (10): it
    exits 25, and the summary names the store and why; a rerun rebuilds it."""
    import shutil

    import luigi

    setting("daybreak", "start_date", START)
    lab.qsr_days(START, 4, stores=("S001", "S002"))
    assert lab.range(START, START + dt.timedelta(days=4)) == 0
    marts = lab.data / "marts/store_daily_sales"

    @store_marts.StoreDailySales.event_handler(luigi.Event.SUCCESS)
    def _stray(task):
        if task.store_id == "S001":
            shutil.copy(marts / "store_id=S001/data.parquet", marts / "store_id=S001/part-1.parquet")

    caplog.clear()
    try:
        with caplog.at_level("INFO", logger="luigi-interface"):
            assert lab.luigi("AllStores") == 25
    finally:
        store_marts.StoreDailySales.remove_event_handler(luigi.Event.SUCCESS, _stray)
    line = (
        "  not run  AllStores: StoreDailySales S001 changed after this run built it, now stale: stray file in the "
        "partition: marts/store_daily_sales/store_id=S001/part-1.parquet; rerun"
    )
    (summary,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("summary of this run:")]
    assert line in summary.splitlines(), summary
    assert lab.luigi("AllStores") == 0
    assert lab.luigi("AllStores") == 0


def test_a_store_whose_rows_a_failed_staging_rebuild_cannot_change_is_up_to_date_in_the_run(lab, all_stores, capsys):
    """S001's file re-sent without a column: the staging dates that read it fail. S002's rows cannot change
    whatever their rebuild gives, so status says S002 is ok and the run agrees: up to date, not "not run"."""
    from tasks.cli import main

    lab.qsr_days(START, 4, stores=("S001", "S002"))
    assert all_stores()[0] == 0
    before = store_parts(lab)
    late = (START + dt.timedelta(days=2)).isoformat()
    path = lab.raw / "qsr_pos" / late / "S001.csv"
    path.write_text(path.read_text().replace(",discount,", ",rebate,"))  # no discount column: the file fails
    capsys.readouterr()
    assert main(["status", "--dataset", "store_daily_sales"]) == 0
    shown = capsys.readouterr().out
    assert "pending: store_id S001: " in shown and "S002" not in shown, shown
    code, out = all_stores()
    summary = out[out.index("summary of this run:") :]
    assert code == 30, summary
    assert "StoreDailySales S001, S002: 1 up to date, 1 not run" in summary, summary
    assert "not run  StoreDailySales S001 " in summary and "not run  StoreDailySales S002" not in summary, summary
    assert store_parts(lab) == before
