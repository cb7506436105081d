"""Daybreak: business-date partitioned pipelines for QSR and hotel data on Luigi.

Importing this package registers every task family, so ``luigi --module tasks <Family>`` finds them.
"""

__version__ = "0.1.0"

import luigi.tools.range  # noqa: E402,F401  (RangeDaily on the command line, even with autoload_range off)

from tasks import guard  # noqa: E402
from tasks.settings import apply_luigi_defaults, check_config, options_in_full  # noqa: E402

apply_luigi_defaults()  # exit codes and uncapped ranges, before Luigi reads [retcode] (tasks/settings.py)
options_in_full()  # `--hotel` is not an abbreviation of the [hotels] settings' flags
guard.install()  # Luigi's usage errors: one line and exit 2 (tasks/guard.py)
check_config()  # an unknown key or a bad value in a Daybreak section: exit 2, naming file and key

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
