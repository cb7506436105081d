"""Transform versions of the ads and hotel datasets: part of each partition's rules fingerprint.

Kept apart from the transforms (no pyarrow or numpy import), like qsr_rules, so that a completeness
check or the status view, which need the fingerprint but never run a transform, stay cheap to import.
Bump a version when a change to its transform changes the output: every partition becomes stale.
"""

ADS_DAILY_VERSION = "ads_daily/6"  # 2: dates outside the window rejected, one row per campaign; 3: control characters;
# 4 (and stg_hotel_bookings_daily/3): row numbers are line numbers, every line of a quoted line break a reject
# 5 (and stg_hotel_bookings_daily/4, stg_qsr_pos/5): a date or instant that does not exist is rejected (checks.py)
# 6: a row whose date cannot be read (it does not parse, the row cannot be split) is rejected by every date its
# export restates, not only the export's day before
ADS_ROLLING_VERSION = "ads_rolling_7d/1"
HOTELS_DAILY_VERSION = "stg_hotel_bookings_daily/4"  # 2: stays, rooms, rates bounded; control characters
OTB_VERSION = "otb_by_stay_date/2"  # 2: from the newest booking state; one booking id in two hotels is two
PICKUP_VERSION = "hotel_pickup/1"
BOOKING_STATE_VERSION = "hotel_booking_state/2"  # 2: open bookings only, finished ones in finished.arrow
HOTEL_OTB_EXPORT_VERSION = "hotel_otb_export/1"
STORE_DAILY_SALES_VERSION = "store_daily_sales/1"
