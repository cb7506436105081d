"""Backfill wrappers over Luigi's RangeDaily: the morning refresh of what late data can still change."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import luigi
from luigi.tools.range import RangeDaily

from tasks import settings
from tasks.ads import AdsDaily, AdsRolling7d
from tasks.hotels import StgHotelBookingsDaily
from tasks.qsr import StgQsrPos


def business_today() -> dt.date:
    """Today's date in the business timezone ([qsr] timezone), not UTC: a cron at 06:00 Toronto is
    already tomorrow in UTC from 19:00 the evening before."""
    return dt.datetime.now(ZoneInfo(settings.qsr().timezone)).date()


class MorningRefresh(luigi.WrapperTask):
    """Each morning: the last N ad dates (ads_daily and ads_rolling_7d, N = [ads] restatement_days),
    because a new export restates them, and yesterday's QSR and hotel staging. Each range is Luigi's RangeDaily,
    so only partitions that are missing or stale run; on a day nothing changed, nothing runs.

    Yesterday's QSR partition needs today's POS folder (its business day ends at 04:59 today); until
    that folder arrives the run exits 20 (missing data), which is the signal to rerun later.
    """

    today = luigi.DateParameter(
        default=None, description="Run as of this date (default: today in the business timezone)"
    )

    def as_of(self) -> dt.date:
        return self.today or business_today()

    def requires(self):
        today = self.as_of()
        ads_start = max(today - dt.timedelta(days=settings.ads().restatement_days), settings.daybreak().start_date)
        common = {"stop": today, "now": _epoch(today)}
        yield RangeDaily(of=AdsDaily, start=ads_start, **common)
        yield RangeDaily(of=AdsRolling7d, start=ads_start, **common)
        yield RangeDaily(of=StgQsrPos, start=today - dt.timedelta(days=1), **common)
        yield RangeDaily(of=StgHotelBookingsDaily, start=today - dt.timedelta(days=1), **common)


def _epoch(day: dt.date) -> int:
    """RangeDaily's ``now`` (seconds since the epoch): the start of ``day`` in UTC, so that its range
    ends at ``day`` whatever the clock says (and a test can run as of any date)."""
    return int(dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC).timestamp())
