"""Daybreak: business-date partitioned pipelines for QSR and hotel data on Luigi.

Importing this package registers every task family, so ``luigi --module tasks <Family>`` finds them.
"""

__version__ = "0.1.0"

import luigi.tools.range  # noqa: E402,F401  (RangeDaily on the command line, even with autoload_range off)

from tasks.settings import apply_luigi_defaults, options_in_full  # noqa: E402

apply_luigi_defaults()  # exit codes and uncapped ranges, before Luigi reads [retcode] (tasks/settings.py)
options_in_full()  # `--hotel` is not an abbreviation of the [hotels] settings' flags

from tasks.ads import AdsDaily, AdsRolling7d  # noqa: E402,F401  (registers the task families)
from tasks.backfill import MorningRefresh, RangeSingleRun  # noqa: E402,F401
from tasks.hotels import (  # noqa: E402,F401
    AllHotelsPickup,
    HotelBookingState,
    HotelOtbExport,
    HotelPickup,
    OtbByStayDate,
    StgHotelBookingsDaily,
)
from tasks.qsr import StgQsrPos  # noqa: E402,F401
from tasks.stores import AllStores, DiscoverStores, StoreDailySales  # noqa: E402,F401
