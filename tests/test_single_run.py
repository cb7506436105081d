"""Single-run backfills (RangeSingleRun): one Luigi task for a range, still one partition per date."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasks.qsr import StgQsrPos
from tests.conftest import qsr_rows

pytestmark = pytest.mark.luigi

START = dt.date(2026, 9, 10)
DAY = dt.timedelta(days=1)


def single(lab, of: str, start: dt.date, stop: dt.date, *extra: str) -> int:
    return lab.luigi("RangeSingleRun", "--of", of, "--start", str(start), "--stop", str(stop), *extra)


def tables(root, dataset: str) -> dict[str, object]:
    return {p.parent.name: pq.read_table(p) for p in sorted((root / dataset).glob("*/data.parquet"))}


def test_one_run_writes_the_same_partitions_as_one_task_per_date(lab, setting):
    lab.qsr_days(START, 6)
    assert lab.range(START, START + 6 * DAY) == 0
    per_date = tables(lab.data, "staging/qsr_pos")
    setting("daybreak", "data_root", lab.root / "single")
    assert single(lab, "StgQsrPos", START, START + 6 * DAY) == 0
    one_run = tables(lab.root / "single", "staging/qsr_pos")
    assert list(one_run) == list(per_date) and len(one_run) == 6
    assert all(one_run[k].equals(per_date[k]) for k in per_date)
    manifests = [json.loads(p.read_text()) for p in (lab.root / "single/staging/qsr_pos").glob("*/_manifest.json")]
    assert sorted(m["business_date"] for m in manifests) == [str(START + k * DAY) for k in range(6)]
    # staleness stays per date: a late file in folder D rebuilds D-1 and D only, in one run again
    late = START + 3 * DAY
    lab.qsr_file(late.isoformat(), "S777", [r.replace("S001", "S777") for r in qsr_rows("S001", late)])
    rebuilt = lab.rebuilt_by(lambda: single(lab, "StgQsrPos", START, START + 6 * DAY), "../single/staging/qsr_pos")
    assert rebuilt == {late - DAY, late}
    assert (
        lab.rebuilt_by(lambda: single(lab, "StgQsrPos", START, START + 6 * DAY), "../single/staging/qsr_pos") == set()
    )


def test_a_raw_folder_checked_for_one_date_is_kept_in_memory_for_the_next(lab):
    lab.qsr_days(START, 2)
    assert single(lab, "StgQsrPos", START, START + 2 * DAY) == 0  # two dates: one process
    how = {
        d: json.loads((lab.partition(d) / "_manifest.json").read_text())["stats"]["raw_folders"]
        for d in (START, START + DAY)
    }
    assert how == {
        START: {str(START): "checked", str(START + DAY): "checked"},
        START + DAY: {str(START + DAY): "in memory", str(START + 2 * DAY): "checked"},
    }


def test_dates_waiting_for_raw_data_end_the_run_as_missing_data_and_the_rest_is_built(lab):
    lab.qsr_days(START, 5)
    shutil.rmtree(lab.raw / "qsr_pos" / (START + 3 * DAY).isoformat())  # dates 2 and 3 read folder 3
    assert single(lab, "StgQsrPos", START, START + 5 * DAY) == 20  # [retcode] missing_data, like RangeDaily
    assert set(lab.built_at()) == {START, START + DAY, START + 4 * DAY}
    assert single(lab, "StgQsrPos", START, START + 5 * DAY) == 20  # still waiting: same answer, nothing run
    lab.qsr_file((START + 3 * DAY).isoformat(), "S001", qsr_rows("S001", START + 3 * DAY))
    assert lab.rebuilt_by(lambda: single(lab, "StgQsrPos", START, START + 5 * DAY)) == {
        START + 2 * DAY,
        START + 3 * DAY,
    }


def test_a_failing_date_is_recorded_and_does_not_lose_the_others(lab):
    lab.qsr_days(START, 5)
    bad = START + 2 * DAY  # folder `bad` has a bad quantity on every line: dates bad-1 and bad fail
    for store in ("S001", "S002"):
        lab.qsr_file(
            bad.isoformat(), store, [re.sub(r",\d,(\d+\.\d\d),", r",lots,\1,", r) for r in qsr_rows(store, bad)]
        )
    assert single(lab, "StgQsrPos", START, START + 5 * DAY) == 30  # [retcode] task_failed
    assert set(lab.built_at()) == {START, START + 3 * DAY, START + 4 * DAY}  # written, kept
    for date in (bad - DAY, bad):
        failure = StgQsrPos(date=date).store().read_failure(date)
        assert "rejected" in failure["error"] and f"qsr_pos/{bad}/S00" in failure["error"]
    # fixed at the source: the rerun builds exactly the failed date, and clears its failure record
    lab.qsr_file(bad.isoformat(), "S001", qsr_rows("S001", bad))
    lab.qsr_file(bad.isoformat(), "S002", qsr_rows("S002", bad))
    assert lab.rebuilt_by(lambda: single(lab, "StgQsrPos", START, START + 5 * DAY)) == {bad - DAY, bad}
    assert StgQsrPos(date=bad).store().read_failure(bad) is None


def test_a_look_back_range_builds_its_upstream_range_first_with_the_same_results(lab, setting):
    first = dt.date(2026, 9, 20)
    setting("daybreak", "start_date", first)
    for k in range(1, 12):
        lab.ads_export(first + k * DAY, first)
    stop = first + 10 * DAY
    assert single(lab, "AdsRolling7d", first + 3 * DAY, stop) == 0
    assert set(lab.built_at("staging/ads_daily")) == {first + k * DAY for k in range(10)}  # d-6 .. stop-1
    single_run = tables(lab.data, "marts/ads_rolling_7d")
    setting("daybreak", "data_root", lab.root / "per-date")
    assert lab.range(first + 3 * DAY, stop, of="AdsRolling7d") == 0
    per_date = tables(lab.root / "per-date", "marts/ads_rolling_7d")
    assert list(single_run) == list(per_date) and all(single_run[k].equals(per_date[k]) for k in per_date)


@pytest.mark.system
def test_progress_shows_done_of_total_rate_and_time_left_across_worker_processes(lab):
    lab.qsr_days(START, 6)
    cfg = lab.write_cfg(lab.root / "luigi.cfg")
    args = ["RangeDaily", "--of", "StgQsrPos", "--start", str(START), "--stop", str(START + 6 * DAY)]
    proc = lab.cli(*args, "--workers", "2", "--local-scheduler", env={"LUIGI_CONFIG_PATH": str(cfg)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = re.findall(r"progress: (\d+)/(\d+) partitions \(\d+%\), [\d.]+/s, about \d+ s left", proc.stderr)
    assert sorted(int(done) for done, _ in lines) == list(range(1, 7))  # one line per partition, both workers
    assert {total for _, total in lines} == {"6"}
    for k in (1, 4):
        shutil.rmtree(lab.partition(START + k * DAY))
    args[0] = "RangeSingleRun"
    proc = lab.cli(*args, "--local-scheduler", env={"LUIGI_CONFIG_PATH": str(cfg)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.findall(r"progress: (\d+)/(\d+) partitions", proc.stderr) == [("1", "2"), ("2", "2")]


def test_a_family_without_dates_is_refused_as_a_usage_error_naming_what_builds_it(lab, capsys):
    assert single(lab, "OtbByStayDate", START, START + DAY) == 2  # a usage error: nothing ran
    refusal = "RangeSingleRun: OtbByStayDate (otb_by_stay_date) is one partition for every date, not one per date"
    assert f"daybreak: error: {refusal}: run OtbByStayDate" in capsys.readouterr().err
    assert not (lab.data / "marts/otb_by_stay_date").exists()


def test_a_chain_is_one_build_from_its_first_link_and_pickups_match_one_task_per_date(lab, setting):
    from tasks.backfill import SingleRunBuild
    from tasks.hotels import HotelBookingState, StgHotelBookingsDaily

    first = START
    setting("daybreak", "start_date", first)
    header = "booking_id,hotel_id,event_at,event,arrival_date,departure_date,rooms,rate,channel"
    for k in range(7):  # H1 extracts: a booking a day, the one of the day before modified to 2 rooms
        day = first + k * DAY
        rows = [f"B{k},H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct"]
        if k:
            rows.append(f"B{k - 1},H1,{day}T13:00:00-04:00,MODIFIED,2026-10-01,2026-10-03,2,100.00,direct")
        path = lab.raw / "hotel_bookings" / day.isoformat() / "H1.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join([header, *rows]) + "\n")
    start, stop = first + 3 * DAY, first + 7 * DAY
    # the state of date d reads the state of d-1: one build from the chain's first link, not one per day
    build = SingleRunBuild(of=HotelBookingState, start=start - DAY, stop=stop - DAY)
    assert [t.date for t in build.partitions()] == [first + k * DAY for k in range(6)]
    assert [(b.of, b.start, b.stop) for b in build.upstream_builds()] == [(StgHotelBookingsDaily, first, stop - DAY)]
    args = ["--of-params", '{"hotel": "H1"}']
    assert lab.luigi("RangeSingleRun", "--of", "HotelPickup", "--start", str(start), "--stop", str(stop), *args) == 0

    def pickups(root) -> dict:
        found = sorted((root / "marts/hotel_pickup").glob("*/hotel_id=H1/data.parquet"))
        return {p.parent.parent.name: pq.read_table(p) for p in found}

    one_run = pickups(lab.data)
    setting("daybreak", "data_root", lab.root / "per-date")
    assert lab.range(start, stop, *args, of="HotelPickup") == 0
    per_date = pickups(lab.root / "per-date")
    assert list(one_run) == list(per_date) and len(per_date) == 4
    assert all(one_run[k].equals(per_date[k]) for k in per_date)


def test_the_raw_folders_a_long_chain_waits_for_are_found_without_recursing_through_it(lab, setting):
    import inspect
    import sys

    from tasks.freshness.engine import Engine
    from tasks.hotels import HotelBookingState

    setting("daybreak", "start_date", START)
    # nothing built, no raw data: the state of day 200 waits for every hotel extract since the start
    last = START + 200 * DAY
    expected = {("hotel_bookings", START + k * DAY) for k in range(201)}
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 100)  # far fewer frames than 200 links need
    try:
        missing = Engine().blocked(HotelBookingState(date=last)).missing
    finally:
        sys.setrecursionlimit(limit)
    assert missing == expected


def test_a_local_range_is_built_by_one_process_per_core_and_sftp_or_a_chain_by_one(lab, setting):
    import os

    from tasks.backfill import SingleRunBuild
    from tasks.freshness.engine import Engine
    from tasks.hotels import HotelBookingState

    lab.qsr_days(START, 6)
    build = SingleRunBuild(of=StgQsrPos, start=START, stop=START + 6 * DAY)
    todo = build.todo(Engine())
    assert len(todo) == 6
    assert build.processes(todo) == min(len(os.sched_getaffinity(0)), 3)  # both cores of this machine
    assert build.processes(todo[:1]) == 1
    chain = SingleRunBuild(of=HotelBookingState, start=START, stop=START + 4 * DAY)
    assert chain.processes(chain.partitions()) == 1  # date d reads d-1: in order, in one process
    setting("daybreak", "raw_root", "sftp://daybreak@127.0.0.1:2222/raw")
    assert build.processes(todo) == 1  # one SFTP connection for the range


def test_a_run_with_nothing_to_do_still_says_so_in_its_summary(lab, caplog):
    """As RangeDaily does: ``StgQsrPos 2026-09-10 .. 2026-09-12: 3 up to date``, not silence."""
    lab.qsr_days(START, 3)
    assert single(lab, "StgQsrPos", START, START + 3 * DAY) == 0
    caplog.clear()
    assert single(lab, "StgQsrPos", START, START + 3 * DAY) == 0
    summary = caplog.text[caplog.text.index("summary of this run:") :]
    assert f"StgQsrPos {START} .. {START + 2 * DAY}: 3 up to date" in summary, caplog.text[-2000:]


@pytest.mark.system
def test_its_build_processes_stop_when_the_run_is_killed(lab, tmp_path):
    """kill -9 of the run's own process: its build processes finish the date they are on, then stop; they
    do not go on building the range unseen (a rerun would overlap them)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    days = 40
    lab.qsr_days(START, days, stores=tuple(f"S{i:03d}" for i in range(1, 41)))
    lab.write_cfg(tmp_path / "luigi.cfg")
    cmd = [sys.executable, "-m", "luigi", "--module", "tasks", "RangeSingleRun", "--of", "StgQsrPos"]
    cmd += ["--start", str(START), "--stop", str(START + days * DAY), "--local-scheduler"]
    run = subprocess.Popen(
        cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    built = lambda: len(list((lab.data / "staging/qsr_pos").glob("*/_manifest.json")))  # noqa: E731
    deadline = time.monotonic() + 120
    while built() == 0 and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run.poll() is None, "the run ended before a partition could be seen: nothing to kill"
    os.kill(run.pid, signal.SIGKILL)
    run.wait()

    def running_in(group: int) -> list[int]:
        """The processes of process group ``group`` that still run (a zombie nobody reaped does not)."""
        out = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == group and fields[0] not in ("Z", "X"):
                out.append(int(stat.parent.name))
        return out

    while running_in(run.pid) and time.monotonic() < deadline:  # its build processes: the run's group
        time.sleep(0.05)
    left = running_in(run.pid)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, "the build processes still ran long after their run was killed"
    assert built() < days // 2, built()  # each stopped after the date it was on


def test_raw_folders_waited_for_that_are_not_every_day_between_are_named_each(lab, caplog):
    """Two folders missing with days between them: the summary names both, not a range that reads as every day
    from the first to the last."""
    lab.qsr_days(START, 6)
    for gone in (START + 2 * DAY, START + 4 * DAY):
        shutil.rmtree(lab.raw / "qsr_pos" / gone.isoformat())
    caplog.clear()
    assert lab.range(START, START + 6 * DAY) == 20
    line = next(line for line in caplog.text.splitlines() if "waiting  for raw" in line)
    assert f"for raw folders {lab.raw}/qsr_pos/{START + 2 * DAY}/, {START + 4 * DAY}/ (not there yet)" in line, line


def test_a_failed_upstream_date_holds_only_the_windows_that_read_it(lab, setting):
    """One ads_daily date fails (its export's header is broken, and it is the only export holding it): the
    single run still builds every window that does not read it, as RangeDaily does, and exits 30."""
    first = dt.date(2026, 9, 20)
    setting("daybreak", "start_date", first)
    for k in range(1, 15):  # exports 09-21 .. 10-04
        lab.ads_export(first + k * DAY, first)
    stop = first + 14 * DAY
    path = lab.raw / "ads" / str(stop) / "ads.csv"  # the newest export: it alone holds 10-03
    path.write_text(path.read_text().replace("spend", "spent", 1))
    assert single(lab, "AdsRolling7d", first, stop) == 30
    failed = {first + k * DAY for k in range(7, 14)}  # 09-27 .. 10-03: export 10-04 is the newest of each
    assert set(lab.built_at("staging/ads_daily")) == {first + k * DAY for k in range(14)} - failed
    assert set(lab.built_at("marts/ads_rolling_7d")) == {first + k * DAY for k in range(7)}  # none reads them


def hotel_days_with_an_unknown_hotel(lab, setting, days: int) -> None:
    """H1's extracts from START on, a booking a day; in folder START+2 also one of H9, a hotel not in the list,
    which fails stg_hotel_bookings_daily of that date."""
    from tests.test_hotels import write

    setting("daybreak", "start_date", START)
    for k in range(days):
        day = START + k * DAY
        write(lab, day, "H1", [f"T{k},H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct"])
    bad = START + 2 * DAY
    write(lab, bad, "H9", [f"X,H9,{bad}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct"])


def test_a_failed_staging_date_holds_the_rest_of_the_chain_without_failing_it(lab, setting):
    """An extract of a hotel not in the list fails staging 09-12: the booking states from 09-12 on read it,
    directly or through the day before, so they are held (not run), not built from the old state, nor failed."""
    hotel_days_with_an_unknown_hotel(lab, setting, 5)
    assert single(lab, "HotelBookingState", START, START + 5 * DAY) == 30
    assert set(lab.built_at("marts/hotel_booking_state")) == {START, START + DAY}
    failures = lab.data / "_state" / "failures"
    recorded = [str(p.relative_to(failures)) for p in failures.rglob("*.json")]
    assert any("hotels_daily" in r or "hotel_bookings_daily" in r for r in recorded), recorded  # staging failed
    assert not [r for r in recorded if "hotel_booking_state" in r], recorded


def test_the_summary_counts_the_upstream_dates_a_single_run_built_in_a_worker_process(lab, setting, caplog):
    """With --workers 2 the single run's task builds in a worker process: the summary still counts the ads
    dates it rebuilt first, as with one worker."""
    first = dt.date(2026, 9, 20)
    setting("daybreak", "start_date", first)
    for k in range(1, 8):
        lab.ads_export(first + k * DAY, first)
    stop = first + 6 * DAY
    assert single(lab, "AdsRolling7d", first, stop) == 0
    shutil.rmtree(lab.partition(first + 2 * DAY, "staging/ads_daily"))
    with caplog.at_level("INFO", logger="luigi-interface"):
        assert single(lab, "AdsRolling7d", first, stop, "--workers", "2") == 0
    assert f"AdsDaily {first} .. {stop - DAY}: 1 ran, 5 up to date" in caplog.text, caplog.text


def test_a_failed_staging_date_holds_the_pickups_that_read_the_held_states(lab, setting):
    """The same bad extract, a single run of one hotel's pickups: the states from 09-12 on are held, so the
    pickups that read them are held too (not run), not built from a state the run did not rebuild, nor failed."""
    hotel_days_with_an_unknown_hotel(lab, setting, 5)
    args = ["--of-params", '{"hotel": "H1"}']
    assert single(lab, "HotelPickup", START, START + 5 * DAY, *args) == 30
    pickups = {dt.date.fromisoformat(p.parent.parent.name.split("=")[1]) for p in
               (lab.data / "marts/hotel_pickup").glob("*/hotel_id=H1/_manifest.json")}  # fmt: skip
    assert pickups == {START, START + DAY}
    failures = lab.data / "_state" / "failures"
    assert not [p for p in failures.rglob("*.json") if "hotel_pickup" in str(p)]


def test_a_date_two_upstream_ranges_share_is_tried_once(lab, setting, caplog, monkeypatch):
    """A hotel's pickups read the booking states and the staging dates, and the states read the staging dates
    too: a staging date that fails is tried once in the run, and counted once."""
    from tasks.hotels import StgHotelBookingsDaily

    hotel_days_with_an_unknown_hotel(lab, setting, 4)
    tried, run_partition = [], StgHotelBookingsDaily.run_partition
    monkeypatch.setattr(StgHotelBookingsDaily, "run_partition", lambda t: tried.append(t.date) or run_partition(t))
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0})  # one core: every build in this process
    with caplog.at_level("INFO", logger="luigi-interface"):
        assert single(lab, "HotelPickup", START, START + 4 * DAY, "--of-params", '{"hotel": "H1"}') == 30
    assert f"StgHotelBookingsDaily {START} .. {START + 3 * DAY}: 3 ran, 1 failed" in caplog.text, caplog.text
    assert sorted(tried) == [START + k * DAY for k in range(4)]  # each once, the failed one too


def test_the_summary_names_the_hotel_of_each_pickup_not_run(lab, setting, caplog):
    """Before: ``not run  HotelPickup 2026-09-12`` once per hotel, which hotel not said."""
    hotel_days_with_an_unknown_hotel(lab, setting, 4)
    with caplog.at_level("INFO", logger="luigi-interface"):
        assert lab.luigi("AllHotelsPickup", "--start", str(START), "--stop", str(START + 4 * DAY)) == 30
    summary = caplog.text[caplog.text.index("summary of this run:") :]
    held = [line.split(" (")[0] for line in summary.splitlines() if line.startswith("  not run  HotelPickup ")]
    assert len(held) > 1 and len(set(held)) == len(held), summary
    assert all(re.fullmatch(r"  not run  HotelPickup 2026-09-1[23] H\d", line) for line in held), summary
