"""The freshness engine under Luigi: one pass per run, and a backfill's checks that grow with its dates.

tasks.base tells the engine which Luigi run a question belongs to by the run's keep-alive thread
(Luigi starts it when a run begins scheduling and stops it after the last task): these tests check
that against Luigi itself, through the real command line on a temporary raw zone.
"""

from __future__ import annotations

import datetime as dt

import luigi
import pytest

from tasks.base import MaterializedTask
from tasks.freshness import engine as freshness
from tasks.hotels import HotelBookingState, StgHotelBookingsDaily
from tasks.luigi_shortcuts import luigi_run

pytestmark = pytest.mark.luigi

FIRST = dt.date(2026, 9, 10)
HEADER = "booking_id,hotel_id,event_at,event,arrival_date,departure_date,rooms,rate,channel"


def extracts(lab, days: int) -> None:
    for k in range(days + 1):
        day = FIRST + dt.timedelta(days=k)
        path = lab.raw / "hotel_bookings" / day.isoformat() / "H1.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{HEADER}\nB{k},H1,{day}T12:00:00-04:00,CREATED,2026-12-01,2026-12-03,1,100.00,direct\n")


@pytest.fixture
def seen():
    """(task id, Luigi run, engine pass) at every START and SUCCESS of a partition task."""
    rows: list[tuple[str, object, int]] = []

    def record(task):
        rows.append((task.task_id, luigi_run(), freshness.process_engine().passes))

    for event in (luigi.Event.START, luigi.Event.SUCCESS):
        MaterializedTask.event_handler(event)(record)
    yield rows
    for event in (luigi.Event.START, luigi.Event.SUCCESS):
        MaterializedTask.remove_event_handler(event, record)


def test_one_luigi_run_is_one_pass_and_the_next_run_another(lab, setting, seen):
    setting("daybreak", "start_date", FIRST)
    extracts(lab, 3)
    assert luigi_run() is None  # no run: every question outside one is a pass of its own
    span = ["--start", str(FIRST), "--stop", str(FIRST + dt.timedelta(days=3))]
    assert lab.luigi("RangeDaily", "--of", "HotelBookingState", *span) == 0
    first = list(seen)
    assert len(first) == 12  # 3 staging + 3 state partitions, a START and a SUCCESS each
    assert len({run for _, run, _ in first}) == 1 and first[0][1] is not None
    assert len({passes for _, _, passes in first}) == 1  # scheduling, runs and re-checks: one pass
    seen.clear()
    (lab.raw / "hotel_bookings" / FIRST.isoformat() / "H1.csv").write_text(f"{HEADER}\n")  # re-sent, empty
    assert lab.luigi("RangeDaily", "--of", "HotelBookingState", *span) == 0
    rebuilt = {task for task, _, _ in seen}  # the new run saw the change: a new pass
    assert {StgHotelBookingsDaily(date=FIRST).task_id, HotelBookingState(date=FIRST).task_id} <= rebuilt
    assert seen[0][2] > first[0][2] and seen[0][1] is not first[0][1]


def test_a_pickup_backfill_checks_each_link_of_its_chain_a_bounded_number_of_times(lab, setting, monkeypatch):
    """Luigi asks complete() of every task, again before running what requires it, and again after
    its run; each answer needs the booking-state chain below it. With one pass per run, each link is
    evaluated a few times in all (6 here), not about once per later question (before: up to 3 a later link, 60
    here)."""
    days = 20
    setting("daybreak", "start_date", FIRST)
    extracts(lab, days)
    calls = []
    real = HotelBookingState.upstream
    monkeypatch.setattr(HotelBookingState, "upstream", lambda self: calls.append(self.date) or real(self))
    span = ["--start", str(FIRST), "--stop", str(FIRST + dt.timedelta(days=days))]
    assert lab.luigi("RangeDaily", "--of", "HotelPickup", "--of-params", '{"hotel": "H1"}', *span) == 0
    assert len(lab.built_at("marts/hotel_booking_state")) == days - 1
    assert max(calls.count(d) for d in set(calls)) <= 12, sorted(set(map(calls.count, set(calls))))
