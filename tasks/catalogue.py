"""One entry per dataset: its name, task family, path, partition kind, grain, key, transform version
and dependency window. The status view, plans, the CLI's choices and the table in docs/datasets.md
come from here (tests/test_catalogue.py checks the docs and every task against it). No Luigi here.
"""

from __future__ import annotations

import datetime as dt
import importlib
from dataclasses import dataclass

from tasks.calendar import date_range
from tasks.transforms import versions
from tasks.transforms.qsr_rules import VERSION as QSR_VERSION

# The task families a user can name that build no dataset of their own: wrappers over the datasets'
# tasks, and the module of each (``tasks/__init__.py`` imports these and the datasets' modules under Luigi).
WRAPPERS = {
    "MorningRefresh": "tasks.backfill",
    "RangeSingleRun": "tasks.backfill",
    "AllHotelsPickup": "tasks.hotels",
    "AllStores": "tasks.store_marts",
    "DiscoverStores": "tasks.store_marts",
}

# How a dataset is partitioned: one folder per business date, per date and hotel, per (static) hotel
# or store, or one folder for all of it.
KINDS = ("date", "date x hotel", "hotel", "store", "none")
KEY_PARAMS = {"date x hotel": "hotel", "hotel": "hotel", "store": "store_id"}  # kind -> the key's task parameter


@dataclass(frozen=True)
class DatasetSpec:
    name: str  # the public name (status, plan, docs)
    family: str  # the Luigi task family that builds it
    path: str  # folder under the data root
    partition: str  # one of KINDS
    grain: str  # what one row is
    key: tuple[str, ...]  # unique per partition
    version: str  # transform version: part of every partition's rules fingerprint
    window: str  # what one partition reads
    measure: str = ""  # the main measure's column (net sales, spend, rooms on the books): previews sum it
    module: str = ""  # the module of the recipe (the Luigi task class named ``family``)
    source: str = ""  # the raw zone's source folder it reads (contract, docs/raw-zone.md); "" for a mart
    refresh: str = ""  # what the morning refresh builds: "yesterday", "restated" (the last [ads] restatement_days)

    def task_class(self) -> type:
        """The task class (loads Luigi and the recipes)."""
        return getattr(importlib.import_module(self.module), self.family)

    @property
    def key_param(self) -> str | None:
        """The task parameter of the static key (``hotel``, ``store_id``); None for none."""
        return KEY_PARAMS.get(self.partition)

    def partitions(self, start: dt.date | None = None, stop: dt.date | None = None) -> list:
        """Every partition (a task) of the dataset with ``start`` <= date < ``stop``: one per date, per
        date and hotel, per hotel or store (today's keys: the recipe's ``static_keys()``), or the one."""
        cls = self.task_class()
        if self.partition == "none":
            return [cls()]
        keys = sorted(cls.static_keys()) if self.key_param else [None]
        if self.partition in ("hotel", "store"):
            return [cls(**{self.key_param: k}) for k in keys]
        if start is None or stop is None:
            raise ValueError(f"{self.name} is partitioned by date: give start and stop")
        if self.key_param is None:
            return [cls(date=d) for d in date_range(start, stop)]
        return [cls(date=d, **{self.key_param: k}) for d in date_range(start, stop) for k in keys]


DATASETS: tuple[DatasetSpec, ...] = (
    DatasetSpec(
        "stg_qsr_pos",
        "StgQsrPos",
        "staging/qsr_pos",
        "date",
        "one POS line",
        ("business_date", "store_id", "order_id", "line_no"),
        QSR_VERSION,
        "raw qsr_pos/D and qsr_pos/D+1",
        "net_amount",
        module="tasks.qsr",
        source="qsr_pos",
        refresh="yesterday",
    ),
    DatasetSpec(
        "stg_hotel_bookings_daily",
        "StgHotelBookingsDaily",
        "staging/hotel_bookings_daily",
        "date",
        "one booking event",
        ("business_date", "source_file", "row_number"),
        versions.HOTELS_DAILY_VERSION,
        "raw hotel_bookings/D",
        "rooms",
        module="tasks.hotels",
        source="hotel_bookings",
        refresh="yesterday",
    ),
    DatasetSpec(
        "ads_daily",
        "AdsDaily",
        "staging/ads_daily",
        "date",
        "one campaign on one date",
        ("business_date", "campaign_id"),
        versions.ADS_DAILY_VERSION,
        "raw ads/D+1 .. D+7: each one present, at least one",
        "spend",
        module="tasks.ads",
        source="ads",
        refresh="restated",
    ),
    DatasetSpec(
        "ads_rolling_7d",
        "AdsRolling7d",
        "marts/ads_rolling_7d",
        "date",
        "one campaign over the look-back D-6 .. D",
        ("business_date", "campaign_id"),
        versions.ADS_ROLLING_VERSION,
        "ads_daily D-6 .. D",
        "spend_7d",
        module="tasks.ads",
        refresh="restated",
    ),
    DatasetSpec(
        "hotel_booking_state",
        "HotelBookingState",
        "marts/hotel_booking_state",
        "date",
        "one open booking's latest event as of D (finished ones: finished.arrow)",
        ("business_date", "hotel_id", "booking_id"),
        versions.BOOKING_STATE_VERSION,
        "hotel_booking_state D-1 (and, for a finished booking D reopens, its finished row) and "
        "stg_hotel_bookings_daily D",
        "rooms",
        module="tasks.hotels",
    ),
    DatasetSpec(
        "hotel_pickup",
        "HotelPickup",
        "marts/hotel_pickup",
        "date x hotel",
        "one stay date whose books changed on D at hotel H",
        ("business_date", "hotel_id", "stay_date"),
        versions.PICKUP_VERSION,
        "hotel H's slice of hotel_booking_state D-1 and of stg_hotel_bookings_daily D",
        "rooms_picked_up",
        module="tasks.hotels",
    ),
    DatasetSpec(
        "otb_by_stay_date",
        "OtbByStayDate",
        "marts/otb_by_stay_date",
        "none",
        "one hotel and stay date",
        ("hotel_id", "stay_date"),
        versions.OTB_VERSION,
        "the newest hotel_booking_state and every date's finished.arrow (stale after a change to any "
        "stg_hotel_bookings_daily partition)",
        "rooms_on_books",
        module="tasks.hotels",
    ),
    DatasetSpec(
        "hotel_otb_export",
        "HotelOtbExport",
        "exports/otb",
        "hotel",
        "one stay date of hotel H",
        ("hotel_id", "stay_date"),
        versions.HOTEL_OTB_EXPORT_VERSION,
        "otb_by_stay_date",
        "rooms_on_books",
        module="tasks.hotels",
    ),
    DatasetSpec(
        "store_daily_sales",
        "StoreDailySales",
        "marts/store_daily_sales",
        "store",
        "one business date with sales at store S",
        ("store_id", "business_date"),
        versions.STORE_DAILY_SALES_VERSION,
        "store S's slice of every stg_qsr_pos partition",
        "net_sales",
        module="tasks.store_marts",
    ),
)

BY_NAME: dict[str, DatasetSpec] = {d.name: d for d in DATASETS}
# every Luigi task family a user can name, and its module
FAMILIES: dict[str, str] = {**{d.family: d.module for d in DATASETS}, **WRAPPERS}
# the raw zone's source folders (the contract's sections), in catalogue order
SOURCES: tuple[str, ...] = tuple(dict.fromkeys(d.source for d in DATASETS if d.source))
BY_FAMILY: dict[str, DatasetSpec] = {d.family: d for d in DATASETS}


def _folded(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def dataset_for(name: str) -> DatasetSpec | None:
    """The dataset a user meant by a task family (``StgQsrPos``, ``stgqsrpos``): what ``daybreak`` takes."""
    return next((d for d in DATASETS if _folded(d.family) == _folded(name)), None)


def family_for(name: str) -> DatasetSpec | None:
    """The dataset a user meant by a dataset name (``stg_qsr_pos``, ``StgQsrPos``'s folded spelling), whose
    family is what ``luigi --module tasks`` takes."""
    return next((d for d in DATASETS if _folded(d.name) == _folded(name)), None)


def classes(*kinds: str) -> dict[str, type]:
    """Task class of each dataset of these partition kinds (all when none is given), in catalogue order."""
    return {d.name: d.task_class() for d in DATASETS if not kinds or d.partition in kinds}


def names(*kinds: str) -> list[str]:
    """Dataset names of these partition kinds (all when none is given), in catalogue order."""
    return [d.name for d in DATASETS if not kinds or d.partition in kinds]


def markdown_table() -> str:
    """The datasets table of docs/datasets.md."""
    rows = [
        "| Dataset | Task | Path | Partition | Grain | Key | Version | Reads |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in DATASETS:
        cells = [d.name, f"`{d.family}`", f"`{d.path}`", d.partition, d.grain, ", ".join(d.key), f"`{d.version}`"]
        rows.append("| " + " | ".join([*cells, d.window]) + " |")
    return "\n".join(rows)
