"""newest_restatement and rolling_window on tiny inline exports."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from tasks.transforms.ads import DAILY_SCHEMA, RAW_COLUMNS, newest_restatement, rolling_window
from tasks.transforms.rawcsv import parse_csv

pytestmark = pytest.mark.unit

D = dt.date(2026, 9, 30)
HEADER = ",".join(RAW_COLUMNS)


def export(e: dt.date, rows: list[str]):
    return e, parse_csv(("\n".join([HEADER, *rows]) + "\n").encode(), f"ads/{e}/ads.csv", RAW_COLUMNS)


@pytest.mark.parametrize(
    ("present", "winner"),
    [
        ([1, 2, 3, 4, 5, 6, 7], 7),
        ([1, 2, 4], 4),  # an export missing in the middle
        ([1], 1),
        ([3, 1, 2], 3),  # order of the list does not matter
    ],
)
def test_the_newest_export_holding_the_date_wins(present, winner):
    exports = [export(D + dt.timedelta(days=k), [f"{D},C1,google,100,5,10.00,{k},{k * 3}.00"]) for k in present]
    result = newest_restatement(exports, D)
    assert result.source_export_date == D + dt.timedelta(days=winner)
    assert result.table.to_pylist() == [
        {
            "campaign_id": "C1",
            "channel": "google",
            "impressions": 100,
            "clicks": 5,
            "spend": Decimal("10.00"),
            "conversions": winner,
            "conversion_value": Decimal(f"{winner * 3}.00"),
            "source_export_date": D + dt.timedelta(days=winner),
        }
    ]


def test_an_export_that_does_not_hold_the_date_is_not_the_truth():
    other_day = D - dt.timedelta(days=1)
    exports = [
        export(D + dt.timedelta(days=1), [f"{D},C1,google,1,1,1.00,1,1.00"]),
        export(D + dt.timedelta(days=2), [f"{other_day},C1,google,9,9,9.00,9,9.00"]),
    ]
    assert newest_restatement(exports, D).source_export_date == D + dt.timedelta(days=1)


def test_no_export_holds_the_date():
    result = newest_restatement([export(D + dt.timedelta(days=1), [])], D)
    assert (result.table.num_rows, result.source_export_date) == (0, None)


def daily(rows: list[tuple[str, str, int, str]]) -> pa.Table:
    return pa.table(
        {
            "campaign_id": [r[0] for r in rows],
            "channel": ["google"] * len(rows),
            "impressions": [1] * len(rows),
            "clicks": [1] * len(rows),
            "spend": [Decimal(r[1]) for r in rows],
            "conversions": [r[2] for r in rows],
            "conversion_value": [Decimal(r[3]) for r in rows],
            "source_export_date": [D] * len(rows),
        },
        schema=DAILY_SCHEMA,
    )


def test_rolling_sums_and_ratios():
    days = [
        (D, daily([("C1", "10.00", 2, "30.00"), ("C2", "0.00", 0, "0.00")])),
        (D, daily([("C1", "5.50", 1, "4.50")])),
    ]
    got = rolling_window(days, 2).to_pylist()
    assert got == [
        {
            "campaign_id": "C1",
            "spend_7d": Decimal("15.50"),
            "conversions_7d": 3,
            "conversion_value_7d": Decimal("34.50"),
            "roas_7d": pytest.approx(34.5 / 15.5),
            "cpa_7d": pytest.approx(15.5 / 3),
            "days_in_window": 2,
        },
        {
            "campaign_id": "C2",
            "spend_7d": Decimal("0.00"),
            "conversions_7d": 0,
            "conversion_value_7d": Decimal("0.00"),
            "roas_7d": None,
            "cpa_7d": None,
            "days_in_window": 2,
        },
    ]


def test_rolling_over_nothing_is_empty():
    assert rolling_window([], 0).num_rows == 0


@pytest.mark.parametrize("day", ["2026-10-01", "2026-10-05", "2026-09-22", "1999-01-01"])
def test_row_of_a_date_the_export_does_not_restate_is_rejected_not_lost(day):
    # found by fuzzing: export E restates E-7 .. E-1; a row of any other date was read by no partition
    e = D + dt.timedelta(days=1)
    exp = export(e, [f"{D},C1,google,100,5,10.00,1,3.00", f"{day},C2,google,100,5,10.00,1,3.00"])
    result = newest_restatement([exp], D)
    assert result.table["campaign_id"].to_pylist() == ["C1"]
    assert [(r["row_number"], r["reason"]) for r in result.rejected.to_pylist()] == [
        (3, "date is not one the export restates (2026-09-24 .. 2026-09-30)")  # the dates, not a formula
    ]
    other = dt.date.fromisoformat(day)
    assert newest_restatement([exp], other).rows_read - newest_restatement([exp], other).other_date_rows == 0


def test_a_campaign_listed_twice_for_a_date_keeps_its_last_row():
    # found by fuzzing: both rows were staged, so (business_date, campaign_id) was not unique
    rows = [f"{D},C1,google,100,5,10.00,1,3.00", f"{D},C2,google,1,1,1.00,1,1.00", f"{D},C1,google,200,5,20.00,2,6.00"]
    result = newest_restatement([export(D + dt.timedelta(days=1), rows)], D)
    assert [(r["campaign_id"], r["impressions"]) for r in result.table.to_pylist()] == [("C2", 1), ("C1", 200)]
    assert (result.duplicates_dropped, result.rows_read) == (1, 3)


def test_a_date_that_does_not_exist_is_rejected_not_read_as_the_next():
    # strptime alone read 2026-09-31 as the 1st of October: that row became the truth of the 1st
    oct1 = dt.date(2026, 10, 1)
    exports = [
        export(dt.date(2026, 10, 2), ["2026-09-31,C1,google,9,9,9.00,9,9.00", "2026-10-01,C2,google,1,1,1.00,1,1.00"])
    ]
    result = newest_restatement(exports, oct1)
    assert result.table["campaign_id"].to_pylist() == ["C2"]
    assert result.rejected.select(["row_number", "reason"]).to_pylist() == [
        {"row_number": 2, "reason": "date is not an ISO date"}
    ]


def test_a_row_whose_date_cannot_be_read_is_rejected_by_every_date_its_export_restates():
    """An unparseable date, or a row the parser cannot split (a thousands separator in spend), may be a
    row of any date export E restates (E-7 .. E-1): each of those dates rejects it, so a date whose
    truth is E and whose campaign went missing says so; a date E does not restate does not."""
    e = D + dt.timedelta(days=3)
    rows = [
        f"{D},C1,google,1,1,1.00,1,1.00",
        "yesterday,C2,google,1,1,1.00,1,1.00",
        f'{D},C3,google,1,1,"1,000.00",1,1.00',
    ]
    rows.append(f"{D},C4,google,1,1,1,000.00,1,1.00")  # nine fields: the parser cannot split it
    exp = export(e, rows)
    for day in (D, e - dt.timedelta(days=1), e - dt.timedelta(days=7)):
        result = newest_restatement([exp], day)
        # row 4 (C3's spend is no decimal) has a date: D's alone
        assert result.rejected["row_number"].to_pylist() == ([3, 4, 5] if day == D else [3, 5]), day
        assert result.rows_read == result.table.num_rows + result.rejected.num_rows + result.other_date_rows
    assert newest_restatement([exp], D).table["campaign_id"].to_pylist() == ["C1"]
    outside = newest_restatement([exp], e - dt.timedelta(days=8))
    assert (outside.rejected.num_rows, outside.other_date_rows) == (0, 4)


def test_a_window_total_too_large_for_its_type_fails_naming_the_campaign_and_window():
    """Each day's spend is valid (decimal(18,2)); eleven of the largest sum past what spend_7d holds."""
    from tasks.transforms.checks import TotalOutOfRange

    big = "9999999999999999.99"
    days = [(D + dt.timedelta(days=i), daily([("C1", big, 1, "1.00"), ("C2", "1.00", 1, "1.00")])) for i in range(11)]
    with pytest.raises(TotalOutOfRange) as err:
        rolling_window(days, 11)
    message = str(err.value)
    assert "spend_7d" in message and "C1 (109999999999999999.89)" in message and "C2" not in message
    assert f"{D} to {D + dt.timedelta(days=10)}" in message
    assert rolling_window(days[:1], 1).column("spend_7d").to_pylist()[0] == Decimal(big)  # one day fits


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (
            f"{D},C1,google,50000000000000000000,5,10.00,1,3.00",
            "impressions has over 15 digits, the most a count holds",
        ),
        (f"{D},C1,google,100,5,99999999999999999.99,1,3.00", "spend has over 16 digits before the point, the most"),
        (f"{D},C1,google,1e3,5,10.00,1,3.00", "impressions is not an integer >= 0"),
        (f"{D},C1,google,100,5,-1.00,1,3.00", "spend is not a decimal >= 0 (2 dp)"),
    ],
)
def test_a_number_too_large_for_its_column_is_rejected_as_too_large_not_as_not_a_number(row, reason):
    result = newest_restatement([export(D + dt.timedelta(days=1), [row])], D)
    assert [r["reason"][: len(reason)] for r in result.rejected.to_pylist()] == [reason]


def test_a_row_with_a_control_character_is_a_reject_of_its_own_date_only_its_fields_in_their_columns():
    """Before, a row whose channel held a control character was a reject of every date its export restates, as if
    its date could not be read (7 dates failed on one row), with its whole line in campaign_id and its date
    empty. A row of the wrong field count cannot be split: its date is unknown, every date restated takes it."""
    e, three_days_before = D + dt.timedelta(days=1), D - dt.timedelta(days=3)
    rows = [
        f"{D},C1,google,100,5,10.00,1,3.00",
        f"{three_days_before},C2,goo\x07gle,100,5,10.00,1,3.00",
        f"{D},C3,meta,1,2,3",
    ]
    exp = export(e, rows)
    restated = [e - dt.timedelta(days=k) for k in range(1, 8)]
    rejects = {d: newest_restatement([exp], d).rejected.to_pylist() for d in restated}
    owner = [d for d, rows in rejects.items() if any(r["row_number"] == 3 for r in rows)]
    assert owner == [three_days_before]
    (control,) = [r for r in rejects[three_days_before] if r["row_number"] == 3]
    assert control["reason"].startswith("channel holds a control character (U+0007")
    assert (control["date"], control["campaign_id"], control["channel"], control["spend"]) == (
        str(three_days_before),
        "C2",
        "goo\\x07gle",
        "10.00",
    )
    assert control["raw_line"] == f"{three_days_before},C2,goo\\x07gle,100,5,10.00,1,3.00"  # escaped
    assert all(any(r["row_number"] == 4 for r in rows) for rows in rejects.values())  # no date: each date's
    (unsplit,) = [r for r in rejects[D] if r["row_number"] == 4]
    assert unsplit["reason"] == "row has 6 fields, header has 8"
    assert (unsplit["date"], unsplit["campaign_id"], unsplit["raw_line"]) == (None, None, f"{D},C3,meta,1,2,3")
    counts = {d: newest_restatement([exp], d).attributed_rows for d in restated}
    assert counts == {d: 1 + (d == D) + (d == three_days_before) for d in restated}
    good = newest_restatement([exp], D)
    assert good.table["campaign_id"].to_pylist() == ["C1"] and good.rejected.column("raw_line").to_pylist() == [
        f"{D},C3,meta,1,2,3"
    ]


@pytest.mark.parametrize(
    ("amount", "kept"),
    [
        ("9999999999999999.99", Decimal("9999999999999999.99")),  # 16 digits: the most decimal(18,2) holds
        ("-0.00", Decimal("0.00")),  # zero, whatever its sign
        ("-0", Decimal("0.00")),
    ],
)
def test_every_amount_decimal_18_2_holds_is_kept(amount, kept):
    """Before, 16 digits were refused as "over 15 digits before the point, the most decimal(18,2) holds", and
    -0.00 as "not a decimal >= 0"."""
    result = newest_restatement([export(D + dt.timedelta(days=1), [f"{D},C1,google,100,5,{amount},1,{amount}"])], D)
    assert result.rejected.to_pylist() == []
    assert result.table.select(["spend", "conversion_value"]).to_pylist() == [{"spend": kept, "conversion_value": kept}]
