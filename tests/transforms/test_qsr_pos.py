"""clean_pos_lines on tiny inline files, values worked out by hand from the contract."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow.compute as pc
import pytest

from tasks.transforms.qsr_pos import RAW_COLUMNS, QsrRules, clean_pos_lines
from tasks.transforms.rawcsv import RawSchemaError, parse_csv
from tasks.transforms.stores import store_totals

pytestmark = pytest.mark.unit

HEADER = ",".join(RAW_COLUMNS)
D15, D16 = dt.date(2026, 9, 15), dt.date(2026, 9, 16)


def parsed(folder: dt.date, rows: list[str], store: str = "S001", header: str = HEADER):
    text = "\n".join([header, *rows]) + "\n"
    return parse_csv(text.encode(), f"qsr_pos/{folder}/{store}.csv", RAW_COLUMNS)


def clean(date: dt.date, files: list[tuple[dt.date, list[str]]], rules: QsrRules | None = None):
    return clean_pos_lines([(f, [parsed(f, rows)]) for f, rows in files], date, rules or QsrRules())


def line(
    order: str, ts: str, qty: str = "1", price: str = "5.00", discount: str = "", status: str = "COMPLETED", n="1"
):
    return f"{order},{n},S001,{ts},SKU1,{qty},{price},{discount},{status}"


@pytest.mark.parametrize(
    ("folder", "ts", "business_date"),
    [
        (D15, "2026-09-15T04:59:59-04:00", dt.date(2026, 9, 14)),
        (D15, "2026-09-15T05:00:00-04:00", D15),
        (D15, "2026-09-15T08:59:59Z", dt.date(2026, 9, 14)),  # 04:59:59 EDT
        (D15, "2026-09-15T09:00:00Z", D15),  # 05:00:00 EDT
        (D16, "2026-09-16T04:59:59-04:00", D15),
        (D15, "2026-09-15T23:59:59-04:00", D15),
        (dt.date(2026, 11, 1), "2026-11-01T01:30:00-04:00", dt.date(2026, 10, 31)),  # first 01:30, EDT
        (dt.date(2026, 11, 1), "2026-11-01T01:30:00-05:00", dt.date(2026, 10, 31)),  # second 01:30, EST
        (dt.date(2026, 11, 1), "2026-11-01T04:59:59-05:00", dt.date(2026, 10, 31)),
        (dt.date(2026, 11, 1), "2026-11-01T05:00:00-05:00", dt.date(2026, 11, 1)),
    ],
)
def test_business_date_cutoff_at_0500_toronto(folder, ts, business_date):
    for date in (business_date - dt.timedelta(days=1), business_date, business_date + dt.timedelta(days=1)):
        result = clean(date, [(folder, [line("O1", ts)])])
        assert result.table.num_rows == (1 if date == business_date else 0), (ts, date)


def test_business_day_across_fall_back_is_25_hours():
    # Lines every 30 minutes from 2026-10-31T04:00Z to 2026-11-01T12:00Z (UTC); exactly those in
    # [2026-10-31 05:00 EDT, 2026-11-01 05:00 EST) = [09:00Z, 10:00Z next day) are business date 10-31.
    start = dt.datetime(2026, 10, 31, 4, 0, tzinfo=dt.UTC)
    stamps = [start + dt.timedelta(minutes=30 * i) for i in range(65)]
    by_folder: dict[dt.date, list[str]] = {}
    for i, s in enumerate(stamps):
        by_folder.setdefault(dt.date(2026, 10, 31) if s.day == 31 else dt.date(2026, 11, 1), []).append(
            line(f"O{i}", s.strftime("%Y-%m-%dT%H:%M:%SZ"))
        )
    result = clean(dt.date(2026, 10, 31), sorted(by_folder.items()))
    times = sorted(result.table["ordered_at"].to_pylist())
    assert times[0] == dt.datetime(2026, 10, 31, 9, 0, tzinfo=dt.UTC)
    assert times[-1] == dt.datetime(2026, 11, 1, 9, 30, tzinfo=dt.UTC)
    assert len(times) == 50  # 25 hours of half-hour slots


def test_duplicates_keep_last_valid_read_and_voided_after_dedup():
    result = clean(
        D15,
        [
            (D15, [line("O1", "2026-09-15T12:00:00-04:00", qty="1"), line("O1", "2026-09-15T12:00:00-04:00", qty="2")]),
            (D16, [line("O1", "2026-09-15T12:00:00-04:00", qty="3"), line("O1", "2026-09-15T12:00:00-04:00", qty="x")]),
        ],
    )
    assert result.table["qty"].to_pylist() == [3]  # the last *valid* one read: folder d+1 after folder d
    assert result.duplicates_dropped == 2

    voided = clean(
        D15,
        [(D15, [line("O2", "2026-09-15T12:00:00-04:00"), line("O2", "2026-09-15T12:00:00-04:00", status="VOIDED")])],
    )
    assert voided.table.num_rows == 0
    assert voided.voided_dropped == 1


def test_a_line_is_the_same_key_in_both_folders_whatever_stores_each_holds():
    # folder d+1 holds fewer stores than folder d, in another order: a store's line re-sent there is
    # still the same key (store, order, line) as in folder d, and a line of another store is not
    def store_line(store, order, qty):
        return f"{order},1,{store},2026-09-15T12:00:00-04:00,SKU1,{qty},5.00,,COMPLETED"

    def files(folder, stores):
        return [parsed(folder, [store_line(s, "O1", q)], store=s) for s, q in stores]

    d15 = files(D15, [("S001", "1"), ("S002", "2"), ("S003", "3")])
    d16 = files(D16, [("S003", "30"), ("S002", "20")])  # re-sent lines of S003 and S002, the last read
    result = clean_pos_lines([(D15, d15), (D16, d16)], D15, QsrRules())
    rows = sorted(zip(result.table["store_id"].to_pylist(), result.table["qty"].to_pylist(), strict=True))
    assert rows == [("S001", 1), ("S002", 20), ("S003", 30)]
    assert result.duplicates_dropped == 2


def test_store_totals_from_the_de_duplication_are_those_from_the_lines():
    # the orders of each store counted from the transform's order keys, as from the order ids: the
    # same order id in two stores is two orders, an order's lines one, a re-sent line no second one
    def store_line(store, order, n, qty="1"):
        return f"{order},{n},{store},2026-09-15T12:00:00-04:00,SKU1,{qty},5.00,,COMPLETED"

    d15 = [
        parsed(D15, [store_line("S001", "O1", 1), store_line("S001", "O1", 2), store_line("S001", "O2", 1)], "S001"),
        parsed(D15, [store_line("S002", "O1", 1), store_line("S002", "O3", 1, qty="50")], "S002"),
    ]
    d16 = [parsed(D16, [store_line("S002", "O1", 1, qty="2"), store_line("S002", "O4", 1)], "S002")]
    result = clean_pos_lines([(D15, d15), (D16, d16)], D15, QsrRules())
    by_keys = store_totals(result.table, D15, result.order_keys)
    assert by_keys.equals(store_totals(result.table, D15))
    assert by_keys.select(["store_id", "orders", "suspicious_lines"]).to_pylist() == [
        {"store_id": "S001", "orders": 2, "suspicious_lines": 0},
        {"store_id": "S002", "orders": 3, "suspicious_lines": 1},
    ]


@pytest.mark.parametrize(
    ("qty", "price", "discount", "status", "net"),
    [
        ("2", "2.25", "0.50", "COMPLETED", Decimal("4.00")),
        ("3", "1.99", "", "COMPLETED", Decimal("5.97")),
        ("3", "1.99", "", "REFUNDED", Decimal("-5.97")),
        ("1", "0.00", "", "COMPLETED", Decimal("0.00")),
    ],
)
def test_net_amount(qty, price, discount, status, net):
    result = clean(D15, [(D15, [line("O1", "2026-09-15T12:00:00-04:00", qty, price, discount, status)])])
    assert result.table["net_amount"].to_pylist() == [net]


@pytest.mark.parametrize(("threshold", "qty", "suspicious"), [(20, "20", False), (20, "21", True), (5, "6", True)])
def test_is_suspicious_follows_the_threshold(threshold, qty, suspicious):
    rules = QsrRules(suspicious_qty_threshold=threshold)
    result = clean(D15, [(D15, [line("O1", "2026-09-15T12:00:00-04:00", qty=qty)])], rules)
    assert result.table["is_suspicious"].to_pylist() == [suspicious]


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (line("", "2026-09-15T12:00:00-04:00"), "order_id is empty"),
        (line("O1", "2026-09-15T12:00:00-04:00", n="0"), "line_no is not an integer >= 1"),
        (line("O1", "2026-09-15T12:00:00"), "ordered_at is not ISO 8601 with a UTC offset"),
        (line("O1", "yesterday"), "ordered_at is not ISO 8601 with a UTC offset"),
        (line("O1", "2026-09-15T12:00:00-04:00", qty="abc"), "qty is not an integer >= 1"),
        (line("O1", "2026-09-15T12:00:00-04:00", qty="-1"), "qty is not an integer >= 1"),
        (line("O1", "2026-09-15T12:00:00-04:00", price="-1.00"), "unit_price is not a decimal >= 0 (2 dp)"),
        (line("O1", "2026-09-15T12:00:00-04:00", price="1.234"), "unit_price is not a decimal >= 0 (2 dp)"),
        (
            line("O1", "2026-09-15T12:00:00-04:00", qty="5000000000"),
            "qty is over 999999999, the largest a line may have",
        ),
        (
            line("O1", "2026-09-15T12:00:00-04:00", qty="1000000000"),
            "qty is over 999999999, the largest a line may have",
        ),
        (
            line("O1", "2026-09-15T12:00:00-04:00", price="99999999999999999.99"),
            "unit_price has over 16 digits before the point, the most decimal(18,2) holds",
        ),
        (
            line("O1", "2026-09-15T12:00:00-04:00", discount="99999999999999999.99"),
            "discount has over 16 digits before the point, the most decimal(18,2) holds",
        ),
        (
            line("O1", "2026-09-15T12:00:00-04:00", price="-99999999999999999"),
            "unit_price is not a decimal >= 0 (2 dp)",
        ),
        (line("O1", "2026-09-15T12:00:00-04:00", discount="x"), "discount is not blank or a decimal >= 0 (2 dp)"),
        (line("O1", "2026-09-15T12:00:00-04:00", status="PENDING"), "status is not COMPLETED, VOIDED or REFUNDED"),
        ("O1,1,S999,2026-09-15T12:00:00-04:00,SKU1,1,5.00,,COMPLETED", "store_id does not match the file name"),
        ("O1,1,S001", "row has 3 fields, header has 9"),
    ],
)
def test_bad_rows_are_rejected_with_file_row_and_reason(row, reason):
    good = line("G1", "2026-09-15T12:00:00-04:00")
    result = clean(D15, [(D15, [good, row, good.replace("G1", "G2")])])
    assert result.table["order_id"].to_pylist() == ["G1", "G2"]
    rejected = result.rejected.to_pylist()
    assert [(r["source_file"], r["row_number"], r["reason"]) for r in rejected] == [
        ("qsr_pos/2026-09-15/S001.csv", 3, reason)
    ]
    assert result.attributed_rows == 3


def test_a_reject_with_a_business_date_goes_to_that_partition_and_one_without_to_both():
    # a parseable timestamp gives the reject its business date; an unparseable one could be either
    # partition's that reads the folder (folder 16 starts with the 15th's small hours): both count it
    folder16 = [line("O1", "garbage"), line("O2", "2026-09-16T04:00:00-04:00", qty="x")]
    folder16.append(line("O3", "2026-09-16T12:00:00-04:00", qty="x"))
    d15 = clean(D15, [(D15, []), (D16, folder16)])
    d16 = clean(D16, [(D16, folder16)])
    assert [r["order_id"] for r in d15.rejected.to_pylist()] == ["O1", "O2"]
    assert [r["order_id"] for r in d16.rejected.to_pylist()] == ["O1", "O3"]
    assert (d15.attributed_rows, d16.attributed_rows) == (2, 2)
    assert d15.rows_read == d15.attributed_rows + d15.other_date_rows  # the counts still add up per partition


def test_each_files_rows_of_the_date_are_its_lines_of_the_date_and_the_rejects_the_date_counts():
    """What a store's file is judged on (more than half rejected fails the date): a file is judged by its own
    folder's date only, on its rows of that date and its rejects of that date or of none. Folder 16's lines of the
    15th (one valid, one reject) and its reject of no date count in the 15th's share, not in its judgement."""
    folder16 = [line("O1", "garbage"), line("O2", "2026-09-16T04:00:00-04:00", qty="x")]
    folder16 += [line("O3", "2026-09-16T12:00:00-04:00", qty="x"), line("O4", "2026-09-16T03:00:00-04:00")]
    folder15 = [line("G1", "2026-09-15T12:00:00-04:00"), line("G2", "2026-09-15T01:00:00-04:00")]
    d15 = clean(D15, [(D15, folder15), (D16, folder16)])
    d16 = clean(D16, [(D16, folder16)])
    assert d15.file_rows == {"qsr_pos/2026-09-15/S001.csv": 1}  # G1
    assert d16.file_rows == {"qsr_pos/2026-09-16/S001.csv": 2}  # O1 and O3
    assert d16.rejected["source_file"].to_pylist() == ["qsr_pos/2026-09-16/S001.csv"] * 2  # both rejects
    assert d15.attributed_rows == 4  # G1, and O1, O2, O4 of folder 16: the 15th's share counts them


def test_a_line_with_a_control_character_is_a_reject_of_its_business_date_only_its_fields_kept():
    """Before, a line whose sku held a control character counted against both partitions reading its folder,
    as if its ordered_at could not be read, with its whole text in order_id; a line of the wrong field count
    has no business date to read: both take it, its text in raw_line and its fields null."""
    folder16 = [line("O1", "2026-09-16T12:00:00-04:00").replace("SKU1", "SK\x07U"), line("O2", "x")[:-10]]
    d15 = clean(D15, [(D15, []), (D16, folder16)]).rejected.to_pylist()
    d16 = clean(D16, [(D16, folder16)]).rejected.to_pylist()
    assert [r["row_number"] for r in d15] == [3] and [r["row_number"] for r in d16] == [2, 3]
    control = d16[0]
    assert control["reason"].startswith("sku holds a control character (U+0007")
    assert (control["order_id"], control["sku"], control["ordered_at"]) == (
        "O1",
        "SK\\x07U",
        "2026-09-16T12:00:00-04:00",
    )
    assert control["raw_line"] == line("O1", "2026-09-16T12:00:00-04:00").replace("SKU1", "SK\\x07U")
    assert d15[0]["reason"] == "row has 8 fields, header has 9"
    assert (d15[0]["order_id"], d15[0]["raw_line"]) == (None, line("O2", "x")[:-10])


def test_lines_the_parser_cannot_split_in_folder_d_plus_1_count_against_partition_d():
    """An unterminated quote early in folder d+1's file takes the lines after it, the small hours of
    date d among them: partition d counts them as rejects (and fails past the reject share), instead of
    passing with those lines silently missing."""
    early = [line(f"E{i}", f"2026-09-16T0{i % 5}:10:00-04:00") for i in range(8)]
    later = [line(f"L{i}", "2026-09-16T12:00:00-04:00") for i in range(4)]
    broken = [early[0], early[1].replace("SKU1", '"SKU1'), *early[2:], *later]
    d15 = clean(D15, [(D15, [line("G1", "2026-09-15T12:00:00-04:00")]), (D16, broken)])
    swallowed = d15.rejected.filter(pc.equal(d15.rejected["source_file"], "qsr_pos/2026-09-16/S001.csv"))
    assert swallowed.num_rows == len(broken) - 1  # every line from the quote on
    assert swallowed["row_number"].to_pylist() == list(range(3, len(broken) + 2))
    assert d15.table["order_id"].to_pylist() == ["G1", "E0"]
    assert d15.attributed_rows == 2 + swallowed.num_rows


def test_fractional_seconds_are_accepted():
    result = clean(D15, [(D15, [line("O1", "2026-09-15T12:00:00.750-04:00")])])
    assert result.table["ordered_at"].to_pylist() == [dt.datetime(2026, 9, 15, 16, 0, 0, tzinfo=dt.UTC)]


@pytest.mark.parametrize("missing", ["qty", "status"])
def test_missing_column_names_file_and_column(missing):
    header = ",".join(c for c in RAW_COLUMNS if c != missing)
    with pytest.raises(RawSchemaError, match=rf"qsr_pos/2026-09-15/S001.csv: missing column '{missing}'"):
        parsed(D15, [], header=header)


def test_misspelled_column_is_missing():
    with pytest.raises(RawSchemaError, match="missing column 'unit_price'"):
        parsed(D15, [], header=HEADER.replace("unit_price", "unitprice"))


def test_input_tables_are_not_mutated():
    f = parsed(D15, [line("O1", "2026-09-15T12:00:00-04:00")])
    before = f.table.to_pydict()
    clean_pos_lines([(D15, [f])], D15, QsrRules())
    assert f.table.to_pydict() == before


@pytest.mark.parametrize(
    ("price", "ok"),
    [
        ("0", True),
        ("12", True),
        ("12.5", True),
        ("12.50", True),
        ("123456789012345.99", True),
        ("12.505", False),
        ("1.", False),
        (".5", False),
        ("", False),
        ("1.2.3", False),
        ("١٢", False),
        (" 1", False),
        ("9999999999999999.99", True),  # the most decimal(18,2) holds
        ("12345678901234567", False),
        ("-0.00", True),  # zero, whatever its sign
        ("-0.01", False),
    ],
)
def test_unit_price_format(price, ok):
    result = clean(D15, [(D15, [line("O1", "2026-09-15T12:00:00-04:00", price=price)])])
    assert (result.table.num_rows, result.rejected.num_rows) == ((1, 0) if ok else (0, 1))


@pytest.mark.parametrize(
    ("qty", "ok"),
    [
        ("1", True),
        ("01", True),
        ("123456789", True),
        ("0", False),
        ("000", False),
        ("1234567890", False),
        ("1.0", False),
        ("١", False),
        ("", False),
        (" 1", False),
    ],
)
def test_qty_format(qty, ok):
    result = clean(D15, [(D15, [line("O1", "2026-09-15T12:00:00-04:00", qty=qty)])])
    assert (result.table.num_rows, result.rejected.num_rows) == ((1, 0) if ok else (0, 1))


@pytest.mark.parametrize(
    ("ts", "local", "business_date"),
    [
        ("2020-01-01T12:00:00-04:00", "2020-01-01 11:00:00 at the store (America/Toronto, -05:00)", "2020-01-01"),
        ("9999-12-31T23:59:59-12:00", "10000-01-01 06:59:59 at the store (America/Toronto, -05:00)", "10000-01-01"),
        ("0001-01-01T00:00:00+14:00", "0000-12-31 04:42:28 at the store (America/Toronto, -05:17)", "0000-12-30"),
        ("2026-09-17T12:00Z", "2026-09-17 08:00:00 at the store (America/Toronto, -04:00)", "2026-09-17"),
        ("2026-09-14T04:59:59-04:00", "2026-09-14 04:59:59 at the store (America/Toronto, -04:00)", "2026-09-13"),
    ],
)
def test_line_of_a_business_date_its_folder_does_not_hold_is_rejected_not_lost(ts, local, business_date):
    # found by fuzzing: only partitions folder-1 and folder read a folder, so such a line was in none of them.
    # Its reason gives the local time, zone, offset and business date that make it misfiled.
    folder15 = [line("G1", "2026-09-15T12:00:00-04:00"), line("O1", ts.replace("12:00Z", "12:00:00Z"))]
    d15 = clean(D15, [(D15, folder15)])
    ((row_number, reason),) = [(r["row_number"], r["reason"]) for r in d15.rejected.to_pylist()]
    assert row_number == 3 and reason.startswith("ordered_at is ") and reason.endswith("misfiled"), reason
    assert f"{local}, business date {business_date}, not 2026-09-14 or 2026-09-15" in reason, reason
    assert d15.attributed_rows == 2
    d14 = clean(D15 - dt.timedelta(days=1), [(D15 - dt.timedelta(days=1), []), (D15, folder15)])
    assert (d14.table.num_rows, d14.rejected.num_rows, d14.other_date_rows) == (0, 0, 2)


def test_net_amount_that_does_not_fit_decimal_18_2_is_rejected():
    # found by fuzzing: 999999999 x 999999999999999.99 raised ArrowInvalid and failed the whole partition
    big = line("O1", "2026-09-15T12:00:00-04:00", qty="999999999", price="999999999999999.99")
    fits = line("O2", "2026-09-15T12:00:00-04:00", qty="9999", price="999999999999.99")  # 9999 x ... < 10**16
    result = clean(D15, [(D15, [big, fits])])
    assert result.table["order_id"].to_pylist() == ["O2"]
    assert result.rejected["reason"].to_pylist() == ["net_amount (qty x unit_price) does not fit decimal(18,2)"]


@pytest.mark.parametrize(
    ("qty", "price", "fits"),
    [
        ("20", "500000000000000", False),  # exactly 10**16: one more than decimal(18,2) holds
        ("20", "500000000000000.00", False),
        ("20", "499999999999999.99", True),  # 9,999,999,999,999,999.80
        ("10", "999999999999999.99", True),
        ("11", "909090909090909.1", False),  # 10,000,000,000,000,001.00
        ("1", "999999999999999.99", True),
    ],
)
def test_net_amount_fits_up_to_its_last_cent(qty, price, fits):
    result = clean(D15, [(D15, [line("O1", "2026-09-15T12:00:00-04:00", qty=qty, price=price)])])
    assert result.table.num_rows == int(fits)
    if fits:
        assert result.table["net_amount"][0].as_py() == int(qty) * Decimal(price)
        assert result.table["unit_price"][0].as_py() == Decimal(price)


def test_money_is_read_to_the_cent():
    # every shape of money the rule takes, and a discount, read from the text (not cast by Arrow):
    # a wrong position, scale or sign would show in the staged values
    prices = ["0", "7", "0.5", "3.05", "12.5", "12.50", "100", "123456789012345", "99999.9", "000123.40"]
    discounts = ["", "0", "0.01", "1", "2.5", " ", "0.99", "", "10", "0.1"]
    rows = [
        line(f"O{i}", "2026-09-15T12:00:00-04:00", price=p, discount=d)
        for i, (p, d) in enumerate(zip(prices, discounts, strict=True))
    ]
    rows.append(line("O99", "2026-09-15T12:00:00-04:00", qty="3", price="2.25", discount="0.75", status="REFUNDED"))
    table = clean(D15, [(D15, rows)]).table
    assert table["unit_price"].to_pylist() == [Decimal(p).quantize(Decimal("0.01")) for p in [*prices, "2.25"]]
    assert table["discount"].to_pylist() == [
        Decimal(d.strip() or "0").quantize(Decimal("0.01")) for d in [*discounts, "0.75"]
    ]
    assert table["net_amount"].to_pylist()[-1] == Decimal("-6.00")  # -(3 x 2.25 - 0.75)


def test_counts_add_up_to_the_rows_read():
    ts = "2026-09-15T12:00:00-04:00"
    rows15 = [line("O1", ts), line("O1", ts), line("O2", ts, status="VOIDED"), line("O3", ts, qty="x")]
    rows15.append(line("O4", "2026-09-15T01:00:00-04:00"))  # business date 09-14
    result = clean(D15, [(D15, rows15), (D16, [line("O5", "2026-09-16T12:00:00-04:00"), "short,row"])])
    # O3 (bad qty) and folder 16's unsplittable row (its business date unknown: it may be the 15th's)
    assert (result.rows_read, result.table.num_rows, result.rejected.num_rows) == (7, 1, 2)
    assert (result.duplicates_of_date, result.voided_dropped, result.other_date_rows) == (1, 1, 2)


def test_a_day_that_does_not_exist_is_rejected_not_moved_to_the_next():
    # strptime alone read 2026-09-31 as the 1st of October: the line was kept in that partition
    oct1 = dt.date(2026, 10, 1)
    result = clean(oct1, [(oct1, [line("O1", "2026-09-31T12:00:00-04:00"), line("O2", "2026-10-01T12:00:00-04:00")])])
    assert result.table["order_id"].to_pylist() == ["O2"]
    assert result.rejected.select(["source_file", "row_number", "reason"]).to_pylist() == [
        {
            "source_file": "qsr_pos/2026-10-01/S001.csv",
            "row_number": 2,
            "reason": "ordered_at is not ISO 8601 with a UTC offset",
        }
    ]


def test_a_store_total_too_large_for_net_sales_fails_naming_store_date_and_files():
    """Every line's net_amount fits decimal(18,2) (the contract's bound); eleven of the largest do not
    sum into net_sales: a clear error (store, value, date, where its lines are), not Arrow's."""
    import pyarrow as pa

    from tasks.transforms.checks import TotalOutOfRange

    money = pa.decimal128(18, 2)
    n = 11
    lines = pa.table(
        {
            "store_id": ["S001"] * n + ["S002"],
            "order_id": [f"o{i}" for i in range(n + 1)],
            "net_amount": pa.array([Decimal("8999999999999999.91")] * n + [Decimal("1.00")], money),
            "is_suspicious": [False] * (n + 1),
        }
    )
    with pytest.raises(TotalOutOfRange) as err:
        store_totals(lines, D15)
    message = str(err.value)
    assert f"net_sales of {D15}, store: the sum of S001 (98999999999999999.01)" in message
    assert "S002" not in message and f"qsr_pos/{D15}/<store>.csv" in message
    assert store_totals(lines.slice(n - 1), D15)["net_sales"].to_pylist() == [
        Decimal("8999999999999999.91"),
        Decimal("1.00"),
    ]
