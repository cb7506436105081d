"""Transform versions of the ads and hotel datasets, apart from the transforms so a completeness check
stays cheap to import. Bump one when its transform's output changes: every partition becomes stale."""

ADS_DAILY_VERSION = "ads_daily/8"
ADS_ROLLING_VERSION = "ads_rolling_7d/1"
HOTELS_DAILY_VERSION = "stg_hotel_bookings_daily/5"
OTB_VERSION = "otb_by_stay_date/2"
PICKUP_VERSION = "hotel_pickup/1"
BOOKING_STATE_VERSION = "hotel_booking_state/3"
HOTEL_OTB_EXPORT_VERSION = "hotel_otb_export/1"
STORE_DAILY_SALES_VERSION = "store_daily_sales/1"
