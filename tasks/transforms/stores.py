"""store_daily_sales: one store's business dates summed from its stg_qsr_pos rows (pure)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc

SCHEMA = pa.schema(
    [
        ("business_date", pa.date32()),
        ("net_sales", pa.decimal128(18, 2)),
        ("orders", pa.int64()),
        ("suspicious_lines", pa.int64()),
    ]
)


def daily_sales(days: list[tuple[dt.date, pa.Table]]) -> pa.Table:
    """Per business date with rows: sum of net_amount, distinct orders, lines flagged is_suspicious."""
    rows = []
    for day, t in days:
        if t.num_rows == 0:
            continue
        rows.append(
            {
                "business_date": day,
                "net_sales": pc.sum(t["net_amount"]).as_py(),
                "orders": pc.count_distinct(t["order_id"]).as_py(),
                "suspicious_lines": pc.sum(t["is_suspicious"].cast(pa.int64())).as_py() or 0,
            }
        )
    return pa.Table.from_pylist(rows, schema=SCHEMA)
