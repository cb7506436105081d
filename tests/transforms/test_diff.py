"""The partition diff of previews (tasks/transforms/diff.py), on inline tables of a few rows."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from tasks.transforms.diff import diff_partition, total

pytestmark = pytest.mark.unit

KEY = ("business_date", "store_id", "order_id", "line_no")
MONEY = pa.decimal128(18, 2)


def lines(rows: list[tuple]) -> pa.Table:
    store, order, line, qty, net, flag = zip(*rows, strict=True) if rows else ([],) * 6
    return pa.table(
        {
            "store_id": pa.array(store, pa.string()),
            "order_id": pa.array(order, pa.string()),
            "line_no": pa.array(line, pa.int32()),
            "qty": pa.array(qty, pa.int32()),
            "net_amount": pa.array([Decimal(n) for n in net], MONEY),
            "is_suspicious": pa.array(flag, pa.bool_()),
        }
    )


BASE = [("S1", "A", 1, 1, "6.50", False), ("S1", "A", 2, 16, "36.00", False), ("S2", "B", 1, 30, "60.00", True)]


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (BASE, {"added": 0, "removed": 0, "changed": 0, "changed_columns": {}}),
        (  # threshold 20 -> 15: one line becomes suspicious
            [BASE[0], ("S1", "A", 2, 16, "36.00", True), BASE[2]],
            {"added": 0, "removed": 0, "changed": 1, "changed_columns": {"is_suspicious": 1}},
        ),
        (  # a line removed, another added, one changed in two columns
            [("S1", "A", 1, 2, "13.00", False), BASE[2], ("S3", "C", 1, 1, "1.00", False)],
            {"added": 1, "removed": 1, "changed": 1, "changed_columns": {"net_amount": 1, "qty": 1}},
        ),
    ],
)
def test_rows_are_matched_on_the_key(after, expected):
    diff = diff_partition(lines(BASE), lines(after), KEY, "net_amount")
    assert {k: diff[k] for k in expected} == expected
    assert diff["rows_before"] == 3 and diff["rows_after"] == len(after)


def test_the_measure_is_summed_before_and_after():
    after = [BASE[0], BASE[1], ("S2", "B", 1, 30, "70.25", True)]
    assert diff_partition(lines(BASE), lines(after), KEY, "net_amount")["measure"] == {
        "name": "net_amount", "before": 102.5, "after": 112.75, "change": 10.25,
    }  # fmt: skip


def test_a_missing_partition_is_empty_on_its_side():
    diff = diff_partition(None, lines(BASE), KEY)
    assert (diff["rows_before"], diff["added"], diff["removed"]) == (0, 3, 0)
    diff = diff_partition(lines(BASE), None, KEY)
    assert (diff["rows_after"], diff["added"], diff["removed"]) == (0, 0, 3)


def test_nulls_on_both_sides_are_equal_and_on_one_side_differ():
    def t(values):
        return pa.table({"k": [1, 2, 3], "v": pa.array(values, pa.float64())})

    diff = diff_partition(t([None, 1.0, None]), t([None, 1.0, 2.0]), ("k",))
    assert (diff["changed"], diff["changed_columns"]) == (1, {"v": 1})


def test_a_repeated_key_is_matched_in_order():
    before = pa.table({"k": [1, 1, 2], "v": [10, 20, 30]})
    after = pa.table({"k": [1, 1, 1, 2], "v": [10, 21, 5, 30]})
    diff = diff_partition(before, after, ("k",))
    assert (diff["added"], diff["removed"], diff["changed"]) == (1, 0, 1)


def test_totals_add_up_counts_columns_and_measures():
    a = diff_partition(lines(BASE), lines([BASE[0], ("S1", "A", 2, 16, "36.00", True), BASE[2]]), KEY, "net_amount")
    b = diff_partition(None, lines(BASE[:1]), KEY, "net_amount")
    t = total([a, b])
    assert (t["rows_before"], t["rows_after"], t["added"], t["changed"]) == (3, 4, 1, 1)
    assert t["changed_columns"] == {"is_suspicious": 1}
    assert t["measure"]["change"] == 6.5


def test_the_same_rows_in_another_order_are_unchanged():
    shuffled = lines([BASE[2], BASE[0], BASE[1]])
    diff = diff_partition(lines(BASE), shuffled, KEY, "net_amount")
    assert (diff["added"], diff["removed"], diff["changed"]) == (0, 0, 0)
