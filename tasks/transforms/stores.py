"""store_daily_sales (pure): a store's rows of the per-store totals staging keeps beside its data file."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.transforms.checks import MONEY, fit_total

SCHEMA = pa.schema(
    [
        ("business_date", pa.date32()),
        ("net_sales", MONEY),
        ("orders", pa.int64()),
        ("suspicious_lines", pa.int64()),
    ]
)
TOTALS_SCHEMA = pa.schema([pa.field("store_id", pa.string()), *SCHEMA])


def store_totals(lines: pa.Table, day: dt.date, order_keys: np.ndarray | None = None) -> pa.Table:
    """One date's stg_qsr_pos lines summed per store (sorted); ``order_keys`` spares hashing the order ids."""
    if lines.num_rows == 0:
        return TOTALS_SCHEMA.empty_table()
    flagged = pc.cast(lines["is_suspicious"], pa.int64())
    columns = {"store_id": lines["store_id"], "net": lines["net_amount"], "flag": flagged}
    if order_keys is None:
        columns["order"], orders = lines["order_id"], ("order", "count_distinct")
    else:  # each order's first line counts it once
        first = np.zeros(lines.num_rows, np.int64)
        first[np.unique(order_keys, return_index=True)[1]] = 1
        columns["order"], orders = first, ("order", "sum")
    grouped = (
        pa.table(columns).group_by("store_id", use_threads=False).aggregate([("net", "sum"), orders, ("flag", "sum")])
    )
    out = pa.table(
        {
            "store_id": grouped["store_id"],
            "business_date": pa.repeat(pa.scalar(day, pa.date32()), grouped.num_rows),
            "net_sales": fit_total(
                grouped["net_sum"],
                SCHEMA.field("net_sales").type,
                grouped["store_id"],
                f"net_sales of {day}, store",
                f" (the store's lines of {day} are in qsr_pos/{day}/<store>.csv and "
                f"qsr_pos/{day + dt.timedelta(days=1)}/<store>.csv)",
            ),
            "orders": grouped[f"order_{orders[1]}"],
            "suspicious_lines": pc.fill_null(grouped["flag_sum"], 0),
        },
        schema=TOTALS_SCHEMA,
    )
    return out.sort_by("store_id")


def store_rows(totals: pa.Table, store_id: str) -> pa.Table:
    """One store's row of a date's totals, in the store_daily_sales schema (no row: no lines that date)."""
    return totals.filter(pc.equal(totals["store_id"], store_id)).select(SCHEMA.names).cast(SCHEMA)


def daily_sales(parts: list[pa.Table]) -> pa.Table:
    """A store's dates, each a :func:`store_rows` table (or rows kept from its previous build), by date."""
    if not parts:
        return SCHEMA.empty_table()
    return pa.concat_tables([p.cast(SCHEMA) for p in parts]).sort_by("business_date")


def to_ipc(table: pa.Table) -> bytes:
    """``table`` as an Arrow IPC file (not Parquet: a ``*/*.parquet`` glob over staging must not match it)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()
