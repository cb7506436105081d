"""Time-zone data: a partition records the UTC offsets its dates follow from, so other time-zone data (a
tzdata upgrade, another host's) makes exactly the dates it moves stale, naming the offset.

The system test runs commands in a private mount namespace where America/Vancouver is a zone file compiled
here with zic (British Columbia on -07:00 from 2026-11-05 12:00): Arrow reads it as it would an upgraded
tzdata. Nothing of the transform is replaced."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tasks.calendar import TZ_DATA, day_offset
from tasks.freshness.rules import offsets_changed, rules_reason
from tests.conftest import Lab, qsr_rows

pytestmark = pytest.mark.unit  # the Luigi and system tests say so

FIRST = dt.date(2026, 11, 2)
DAY = dt.timedelta(days=1)
DAYS = 6  # hotel extracts and POS folders 11-02 .. 11-07
HOTELS = "staging/hotel_bookings_daily"
POS = "staging/qsr_pos"
# the same instant on either side of the zone's change: 23:30 on 11-05 at -08:00, 00:30 on 11-06 at -07:00
LATE_EVENT = "X1,H2,2026-11-06T00:30:00-07:00,CREATED,2026-11-20,2026-11-22,1,200.00,direct"
# 04:30 on 11-07 at -08:00 (business date 11-06), 05:30 at -07:00 (business date 11-07)
EARLY_LINE = "S001-X,1,S001,2026-11-07T05:30:00-07:00,COLA,1,1.99,,COMPLETED"
NEW_DATA = "Zone America/Vancouver -8:00 - PST 2026 Nov 5 12:00\n\t-7:00 - MST\n"


@pytest.mark.parametrize(
    ("zone", "day", "hour", "expected"),
    [
        ("America/Vancouver", dt.date(2020, 11, 1), 0, "-07:00/-08:00"),  # back to standard time that day
        ("America/Vancouver", dt.date(2020, 11, 2), 0, "-08:00"),
        ("America/Vancouver", dt.date(2020, 3, 8), 0, "-08:00/-07:00"),
        ("America/Toronto", dt.date(2020, 10, 31), 5, "-04:00/-05:00"),  # the business day ends at 05:00 on 11-01
        ("America/Toronto", dt.date(2020, 11, 1), 5, "-05:00"),
        ("Asia/Kolkata", dt.date(2020, 6, 1), 0, "+05:30"),
        ("America/Havana", dt.date(2020, 3, 8), 0, "-05:00/-04:00"),  # midnight skipped: 00:00 is 01:00
        ("America/Vancouver", dt.date(2020, 12, 31), 5, "-08:00"),  # the day ends in the next year
    ],
)
def test_a_days_offsets_are_those_at_its_start_and_its_end(zone, day, hour, expected):
    assert day_offset(zone, day, hour) == expected


def test_a_change_of_offsets_alone_is_named_as_the_time_zone_datas_with_each_day():
    old = {"version": "v/1", "utc_offsets": {"America/Toronto": {"-1": "-04:00", "0": "-04:00/-05:00"}}}
    new = {"version": "v/1", "utc_offsets": {"America/Toronto": {"-1": "-04:00", "0": "-04:00"}}}
    alone = rules_reason(old, new, dt.date(2026, 11, 1))
    assert "America/Toronto's offset on 2026-11-01 changed -04:00/-05:00 -> -04:00" in alone
    assert alone.endswith("(time-zone data)") and "rules changed" not in alone and "10-31" not in alone
    both = rules_reason({**old, "version": "v/0"}, new, dt.date(2026, 11, 1))
    assert both.startswith("rules changed: ") and "version 'v/0' -> 'v/1'" in both
    assert "America/Toronto's offset on 2026-11-01 changed" in both
    assert offsets_changed({"A/B": {"0": "+01:00"}}, {"C/D": {"0": "+02:00"}}) == ""  # another zone: no change


def run(lab: Lab, *args: str, new_data: Path | None = None, luigi: bool = True) -> subprocess.CompletedProcess:
    """A command in the lab's folder; with ``new_data``, in a mount namespace of its own where that zone file
    is America/Vancouver."""
    cmd = [sys.executable, "-m", "luigi", "--module", "tasks", *args, "--local-scheduler"]
    if not luigi:
        cmd = [sys.executable, "-m", "tasks.cli", *args]
    if new_data is not None:
        bind = 'mount --bind "$0" "$1" && shift && exec "$@"'
        target = f"{TZ_DATA}/America/Vancouver"
        cmd = [*UNSHARE, "sh", "-c", bind, str(new_data), target, *cmd]
    env = {k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PATH"}
    return subprocess.run(cmd, cwd=lab.root, env=env, capture_output=True, text=True, timeout=300)


UNSHARE = ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]


@pytest.fixture
def new_data(tmp_path) -> Path:
    """America/Vancouver of newer time-zone data, compiled with zic; the test is skipped where a user and mount
    namespace cannot be made (a container without them) or zic is not installed."""
    if shutil.which("zic") is None or shutil.which("unshare") is None:
        pytest.skip("needs zic and unshare (util-linux)")
    (tmp_path / "tz.src").write_text(NEW_DATA)
    subprocess.run(["zic", "-d", str(tmp_path / "tz"), str(tmp_path / "tz.src")], check=True)
    probe = subprocess.run([*UNSHARE, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"a user and mount namespace cannot be made here: {probe.stderr.strip()}")
    return tmp_path / "tz" / "America" / "Vancouver"


def states(lab: Lab, dataset: str, stop: dt.date, new_data: Path | None = None) -> dict[str, tuple[str, str]]:
    span = ["--start", str(FIRST), "--stop", str(stop)]
    proc = run(lab, "status", "--dataset", dataset, *span, "--json", new_data=new_data, luigi=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {row["date"]: (row["state"], row["reason"]) for row in json.loads(proc.stdout)}


def rows(lab: Lab, dataset: str, where: str) -> list[tuple]:
    return duckdb.execute(
        f"select business_date::varchar from read_parquet('{lab.data}/{dataset}/*/*.parquet', hive_partitioning=true) "
        f"where {where}"
    ).fetchall()


@pytest.mark.system
def test_time_zone_data_that_moves_a_day_makes_exactly_its_partitions_stale_naming_the_offset(lab, new_data):
    lab.hotel_days(FIRST, DAYS)
    path = lab.raw / "hotel_bookings" / "2026-11-06" / "H2.csv"
    path.write_text(path.read_text() + LATE_EVENT + "\n")
    for k in range(DAYS):  # POS partitions 11-02 .. 11-06; folder 11-07 is read by 11-06 alone
        folder = FIRST + k * DAY
        lab.qsr_file(str(folder), "S001", [*qsr_rows("S001", folder), *([EARLY_LINE] if k == DAYS - 1 else [])])
    (lab.root / "luigi.cfg").write_text(
        f"[daybreak]\nraw_root = {lab.raw}\ndata_root = {lab.data}\nstart_date = {FIRST}\n"
        "[qsr]\ntimezone = America/Vancouver\n[hotels]\nmax_reject_share = 0.5\n"  # X1 is 1 of 3 rows of 11-06
    )
    stop = FIRST + DAYS * DAY
    ranges = [
        ("RangeDaily", "--of", "StgHotelBookingsDaily", "--start", str(FIRST), "--stop", str(stop)),
        ("RangeDaily", "--of", "StgQsrPos", "--start", str(FIRST), "--stop", str(stop - DAY)),
    ]
    for args in ranges:  # with this host's time-zone data (-08:00 all of November)
        proc = run(lab, *args)
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert rows(lab, HOTELS, "booking_id = 'X1'") == []  # 23:30 on 11-05: misfiled in 11-06
    assert rows(lab, POS, "order_id = 'S001-X'") == [("2026-11-06",)]
    hotels_before, pos_before = lab.built_at(HOTELS), lab.built_at(POS)

    # the same partitions seen with the newer data: the days it moves are stale, saying why; no other is
    hotels = states(lab, "stg_hotel_bookings_daily", stop, new_data)
    stale = {d: why for d, (state, why) in hotels.items() if state == "stale"}
    assert sorted(stale) == ["2026-11-05", "2026-11-06", "2026-11-07"], hotels
    assert {s for d, (s, _) in hotels.items() if d not in stale} == {"ok"}, hotels
    assert "time zone America/Vancouver's offset on 2026-11-05 changed -08:00 -> -08:00/-07:00" in stale["2026-11-05"]
    assert "time zone America/Vancouver's offset on 2026-11-06 changed -08:00 -> -07:00" in stale["2026-11-06"]
    assert all(why.endswith("(time-zone data)") for why in stale.values()), stale
    pos = states(lab, "stg_qsr_pos", stop - DAY, new_data)
    assert sorted(d for d, (state, _) in pos.items() if state == "stale") == ["2026-11-05", "2026-11-06"], pos
    assert "offset on 2026-11-05 changed -08:00 -> -08:00/-07:00" in pos["2026-11-06"][1]  # the day before's

    # a run with it rebuilds exactly those, the checked POS folders of the other data not reused
    for args in ranges:
        proc = run(lab, *args, new_data=new_data)
        assert proc.returncode == 0, proc.stderr[-3000:]
    hotels_after, pos_after = lab.built_at(HOTELS), lab.built_at(POS)
    assert sorted(str(d) for d in hotels_after if hotels_after[d] != hotels_before[d]) == sorted(stale)
    assert sorted(str(d) for d in pos_after if pos_after[d] != pos_before[d]) == ["2026-11-05", "2026-11-06"]
    assert rows(lab, HOTELS, "booking_id = 'X1'") == [("2026-11-06",)]  # 00:30 on 11-06 now
    assert rows(lab, POS, "order_id = 'S001-X'") == []  # business date 11-07, not built
    assert {s for s, _ in states(lab, "stg_hotel_bookings_daily", stop, new_data).values()} == {"ok"}

    # this host, whose data differs, says so of the same days (hosts on one data root need the same tzdata)
    back = states(lab, "stg_hotel_bookings_daily", stop)
    assert "offset on 2026-11-06 changed -07:00 -> -08:00 (time-zone data)" in back["2026-11-06"][1], back


@pytest.mark.luigi
def test_a_partition_whose_recorded_offset_is_not_this_hosts_is_stale_saying_so_and_rebuilt(lab, setting):
    """As another host's tzdata records it: the date alone is stale, by the time-zone data, and a run rebuilds it."""
    from tasks.freshness.rules import fingerprint
    from tasks.views import status

    setting("daybreak", "start_date", FIRST)
    lab.hotel_days(FIRST, 3)
    stop = FIRST + 3 * DAY
    assert lab.range(FIRST, stop, of="StgHotelBookingsDaily") == 0
    day = FIRST + DAY
    path = lab.partition(day, HOTELS) / "_manifest.json"
    manifest = json.loads(path.read_text())
    manifest["rules"]["utc_offsets"]["America/Vancouver"]["0"] = "-07:00"  # this host's: -08:00
    manifest["rules_fingerprint"] = fingerprint(manifest["rules"])
    path.write_text(json.dumps(manifest))
    found = {r.date: (r.state, r.reason) for r in status.collect(FIRST, stop, ["stg_hotel_bookings_daily"])}
    state, reason = found.pop(day)
    assert state == "stale" and f"America/Vancouver's offset on {day} changed -07:00 -> -08:00" in reason, reason
    assert reason.endswith("(time-zone data)")
    assert {s for s, _ in found.values()} == {"ok"}, found
    assert lab.rebuilt_by(lambda: lab.range(FIRST, stop, of="StgHotelBookingsDaily"), HOTELS) == {day}
