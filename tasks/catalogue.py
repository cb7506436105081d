"""One entry per dataset, and the lookups everyone uses; a task class names its entry (``entry=...``).
No Luigi here: the CLI, the config check and the sample read the entries before Luigi is imported."""

from __future__ import annotations

import datetime as dt
import importlib
from dataclasses import dataclass

from tasks.calendar import date_range
from tasks.transforms import versions
from tasks.transforms.qsr_rules import VERSION as QSR_VERSION

# the modules that define Daybreak's tasks, which `luigi --module tasks` imports
TASK_MODULES = ("tasks.qsr", "tasks.hotels", "tasks.ads", "tasks.store_marts", "tasks.backfill")

KINDS = ("date", "date x hotel", "hotel", "store", "none")
KEY_PARAMS = {"date x hotel": "hotel", "hotel": "hotel", "store": "store_id"}  # kind -> the key's task parameter
REFRESH = ("", "yesterday", "restated")
# (Luigi family, why) of the run that builds a dataset that is not one partition per date (RangeDaily does)
KEYED_RUNS = {
    "date x hotel": ("AllHotelsPickup", "every hotel of the hotels list over the range, one task per date and hotel"),
    "hotel": ("HotelOtbExport", "one task per hotel"),
    "store": ("AllStores", "the store sensor, then one task per registered store"),
    "none": ("OtbByStayDate", "one partition for every date"),
}


@dataclass(frozen=True, kw_only=True)
class Dataset:
    name: str  # the public name (status, plan, docs)
    path: str  # folder under the data root
    partition: str  # one of KINDS
    grain: str  # what one row is
    key: tuple[str, ...]  # unique per partition
    version: str  # transform version: part of every partition's rules fingerprint
    reads: str  # what one partition reads
    measure: str = ""  # the main measure's column (net sales, spend, rooms on the books): previews sum it
    source: str = ""  # the raw zone's source folder it reads (contract, docs/raw-zone.md); "" for a mart
    # what the morning refresh builds: "yesterday" or "restated" (the last [ads] restatement_days)
    refresh: str = ""

    def __post_init__(self):
        if self.partition not in KINDS:
            raise ValueError(f"dataset {self.name}: partition {self.partition!r} is not one of {', '.join(KINDS)}")
        if self.refresh not in REFRESH:
            raise ValueError(f"dataset {self.name}: refresh {self.refresh!r} is not one of {REFRESH}")

    def bind(self, cls: type) -> None:
        """Make ``cls`` the dataset's task: the class that names this entry (tasks/base.py) calls it."""
        bound = _TASKS.get(self, cls)
        if (bound.__module__, bound.__qualname__) != (cls.__module__, cls.__qualname__):  # not a module reloaded
            mine, other = f"{cls.__module__}.{cls.__name__}", f"{bound.__module__}.{bound.__name__}"
            raise TypeError(f"dataset {self.name}: {mine} names it, built by {other} already")
        _TASKS[self] = cls

    @property
    def task(self) -> type:
        """The task class that builds it (imports the task modules, and so Luigi, the first time)."""
        if self not in _TASKS:
            for module in TASK_MODULES:
                importlib.import_module(module)
        if self not in _TASKS:
            modules = ", ".join(TASK_MODULES)
            raise LookupError(f"dataset {self.name}: no task class names it (entry=) in TASK_MODULES ({modules})")
        return _TASKS[self]

    @property
    def key_param(self) -> str | None:
        """The task parameter of the static key (``hotel``, ``store_id``); None for none."""
        return KEY_PARAMS.get(self.partition)

    def partitions(self, start: dt.date | None = None, stop: dt.date | None = None) -> list:
        """Every partition (a task) of the dataset with ``start`` <= date < ``stop``."""
        cls = self.task
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


_TASKS: dict[Dataset, type] = {}  # entry -> the task class that named it

STG_QSR_POS = Dataset(
    name="stg_qsr_pos",
    path="staging/qsr_pos",
    partition="date",
    grain="one POS line",
    key=("business_date", "store_id", "order_id", "line_no"),
    version=QSR_VERSION,
    reads="raw qsr_pos/D and qsr_pos/D+1",
    measure="net_amount",
    source="qsr_pos",
    refresh="yesterday",
)
STG_HOTEL_BOOKINGS_DAILY = Dataset(
    name="stg_hotel_bookings_daily",
    path="staging/hotel_bookings_daily",
    partition="date",
    grain="one booking event",
    key=("business_date", "source_file", "row_number"),
    version=versions.HOTELS_DAILY_VERSION,
    reads="raw hotel_bookings/D",
    measure="rooms",
    source="hotel_bookings",
    refresh="yesterday",
)
ADS_DAILY = Dataset(
    name="ads_daily",
    path="staging/ads_daily",
    partition="date",
    grain="one campaign on one date",
    key=("business_date", "campaign_id"),
    version=versions.ADS_DAILY_VERSION,
    reads="raw ads/D+1 .. D+7: each one present, at least one",
    measure="spend",
    source="ads",
    refresh="restated",
)
ADS_ROLLING_7D = Dataset(
    name="ads_rolling_7d",
    path="marts/ads_rolling_7d",
    partition="date",
    grain="one campaign over the look-back D-6 .. D",
    key=("business_date", "campaign_id"),
    version=versions.ADS_ROLLING_VERSION,
    reads="ads_daily D-6 .. D",
    measure="spend_7d",
    refresh="restated",
)
HOTEL_BOOKING_STATE = Dataset(
    name="hotel_booking_state",
    path="marts/hotel_booking_state",
    partition="date",
    grain="one open booking's latest event as of D (finished ones: _finished.arrow)",
    key=("business_date", "hotel_id", "booking_id"),
    version=versions.BOOKING_STATE_VERSION,
    reads="hotel_booking_state D-1 (and, for a finished booking D reopens, its finished row) and "
    "stg_hotel_bookings_daily D",
    measure="rooms",
)
HOTEL_PICKUP = Dataset(
    name="hotel_pickup",
    path="marts/hotel_pickup",
    partition="date x hotel",
    grain="one stay date whose books changed on D at hotel H",
    key=("business_date", "hotel_id", "stay_date"),
    version=versions.PICKUP_VERSION,
    reads="hotel H's slice of hotel_booking_state D-1 and of stg_hotel_bookings_daily D",
    measure="rooms_picked_up",
)
OTB_BY_STAY_DATE = Dataset(
    name="otb_by_stay_date",
    path="marts/otb_by_stay_date",
    partition="none",
    grain="one hotel and stay date",
    key=("hotel_id", "stay_date"),
    version=versions.OTB_VERSION,
    reads="the newest hotel_booking_state and every date's _finished.arrow (stale after a change to any "
    "stg_hotel_bookings_daily partition)",
    measure="rooms_on_books",
)
HOTEL_OTB_EXPORT = Dataset(
    name="hotel_otb_export",
    path="exports/otb",
    partition="hotel",
    grain="one stay date of hotel H",
    key=("hotel_id", "stay_date"),
    version=versions.HOTEL_OTB_EXPORT_VERSION,
    reads="hotel H's slice of otb_by_stay_date",
    measure="rooms_on_books",
)
STORE_DAILY_SALES = Dataset(
    name="store_daily_sales",
    path="marts/store_daily_sales",
    partition="store",
    grain="one business date with sales at store S",
    key=("store_id", "business_date"),
    version=versions.STORE_DAILY_SALES_VERSION,
    reads="store S's slice of every stg_qsr_pos partition",
    measure="net_sales",
)

# every dataset, in the order status, plan and the docs list them
DATASETS: tuple[Dataset, ...] = (
    STG_QSR_POS,
    STG_HOTEL_BOOKINGS_DAILY,
    ADS_DAILY,
    ADS_ROLLING_7D,
    HOTEL_BOOKING_STATE,
    HOTEL_PICKUP,
    OTB_BY_STAY_DATE,
    HOTEL_OTB_EXPORT,
    STORE_DAILY_SALES,
)
BY_NAME: dict[str, Dataset] = {d.name: d for d in DATASETS}
# the raw zone's source folders (the contract's sections), in catalogue order
SOURCES: tuple[str, ...] = tuple(dict.fromkeys(d.source for d in DATASETS if d.source))


def _folded(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def named(text: str) -> Dataset | None:
    """The dataset a user meant by ``text``: a dataset name or its task family, in any case."""
    return next((d for d in DATASETS if _folded(d.name) == _folded(text)), None)


def families() -> dict[str, type]:
    """Every task a user can name (``luigi --module tasks <Family>``), by family. Imports Luigi."""
    import luigi

    modules = [importlib.import_module(m) for m in TASK_MODULES]
    found = {
        cls.get_task_family(): cls
        for module in modules
        for cls in vars(module).values()
        if isinstance(cls, type) and issubclass(cls, luigi.Task) and cls.__module__ == module.__name__
    }
    return dict(sorted(found.items()))


def classes(*kinds: str) -> dict[str, type]:
    return {d.name: d.task for d in DATASETS if not kinds or d.partition in kinds}


def names(*kinds: str) -> list[str]:
    return [d.name for d in DATASETS if not kinds or d.partition in kinds]


def markdown_table() -> str:
    """The datasets table of docs/datasets.md (imports the tasks, for their families)."""
    rows = [
        "| Dataset | Task | Path | Partition | Grain | Key | Version | Reads |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in DATASETS:
        family = d.task.get_task_family()
        cells = [d.name, f"`{family}`", f"`{d.path}`", d.partition, d.grain, ", ".join(d.key), f"`{d.version}`"]
        rows.append("| " + " | ".join([*cells, d.reads]) + " |")
    return "\n".join(rows)
