"""Daybreak: business-date partitioned pipelines for QSR and hotel data on Luigi.

Importing this package registers every task family, so ``luigi --module tasks <Family>`` finds them.
"""

__version__ = "0.1.0"

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
