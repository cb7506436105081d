"""Transform versions of the ads and hotel datasets: part of each partition's rules fingerprint.

Kept apart from the transforms (no pyarrow or numpy import), like qsr_rules, so that a completeness
check or the status view, which need the fingerprint but never run a transform, stay cheap to import.
Bump a version when a change to its transform changes the output: every partition becomes stale
(what each bump changed is in the commit log).
"""

ADS_DAILY_VERSION = "ads_daily/8"
ADS_ROLLING_VERSION = "ads_rolling_7d/1"
HOTELS_DAILY_VERSION = "stg_hotel_bookings_daily/5"
OTB_VERSION = "otb_by_stay_date/2"
PICKUP_VERSION = "hotel_pickup/1"
BOOKING_STATE_VERSION = "hotel_booking_state/2"
HOTEL_OTB_EXPORT_VERSION = "hotel_otb_export/1"
STORE_DAILY_SALES_VERSION = "store_daily_sales/1"
