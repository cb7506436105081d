"""stg_qsr_pos: clean and type POS lines, and attribute them to a business date (contract section 2).

Pure: parsed raw files in, one partition's table and its rejected rows out.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.calendar import business_dates
from tasks.transforms.rawcsv import ParsedCsv

VERSION = "stg_qsr_pos/1"
RAW_COLUMNS = ["order_id", "line_no", "store_id", "ordered_at", "sku", "qty", "unit_price", "discount", "status"]
STATUSES = ["COMPLETED", "VOIDED", "REFUNDED"]
MONEY = pa.decimal128(18, 2)
OUTPUT_SCHEMA = pa.schema(
    [
        ("store_id", pa.string()),
        ("order_id", pa.string()),
        ("line_no", pa.int32()),
        ("ordered_at", pa.timestamp("s", tz="UTC")),
        ("sku", pa.string()),
        ("qty", pa.int32()),
        ("unit_price", MONEY),
        ("discount", MONEY),
        ("net_amount", MONEY),
        ("status", pa.string()),
        ("is_suspicious", pa.bool_()),
        ("source_file", pa.string()),
    ]
)
REJECT_SCHEMA = pa.schema(
    [("source_file", pa.string()), ("row_number", pa.int64()), ("reason", pa.string())]
    + [(c, pa.string()) for c in RAW_COLUMNS]
)
_MONEY = r"^[0-9]{1,15}(\.[0-9]{1,2})?$"
_ISO = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)$"


@dataclass(frozen=True)
class QsrRules:
    """Settings that change the output; with VERSION they make the rules fingerprint."""

    suspicious_qty_threshold: int = 20
    timezone: str = "America/Toronto"
    day_start_hour: int = 5

    def as_dict(self) -> dict:
        return {"version": VERSION, **self.__dict__}


@dataclass(frozen=True)
class CleanResult:
    table: pa.Table  # OUTPUT_SCHEMA, one row per kept POS line of the business date
    rejected: pa.Table  # REJECT_SCHEMA, rows attributed to the business date that failed a type rule
    attributed_rows: int  # raw rows attributed to the date (valid + rejected), the base of the reject share
    duplicates_dropped: int  # valid rows of the window replaced by a later copy of the same line
    voided_dropped: int


REASONS = [
    "",  # 0: valid
    "order_id is empty",
    "line_no is not an integer >= 1",
    "store_id does not match the file name",
    "ordered_at is not ISO 8601 with a UTC offset",
    "sku is empty",
    "qty is not an integer >= 1",
    "unit_price is not a decimal >= 0 (2 dp)",
    "discount is not blank or a decimal >= 0 (2 dp)",
    "status is not COMPLETED, VOIDED or REFUNDED",
]


@dataclass(frozen=True)
class _FolderRows:
    """What one export folder contributes: rows of the business date, keys of all valid rows, rejects."""

    rows: pa.Table  # valid rows whose business date is the partition's, typed, with a window-wide ``seq``
    keys: pa.Table  # (order_id, line_no, store_id, seq) of every valid row, for de-duplication across the window
    rejected: pa.Table
    attributed: int


def clean_pos_lines(files: Iterable[tuple[ParsedCsv, dt.date]], date: dt.date, rules: QsrRules) -> CleanResult:
    """One business date of POS lines from the files of its dependency window, in read order.

    ``files`` yields (parsed file, its export folder date), folder by folder; it is consumed once, so a
    generator keeps one folder's raw rows in memory at a time. A rejected row whose ``ordered_at``
    parses belongs to its business date, one whose timestamp does not parse to its folder date.
    The output keeps read order: folder ``date`` before ``date+1``, files by name, rows as written.
    """
    parts, offset = [], 0
    for folder, batch in itertools.groupby(files, key=lambda item: item[1]):
        parsed = [p for p, _ in batch]
        parts.append(_folder_rows(parsed, folder, date, rules, offset))
        offset += sum(p.table.num_rows for p in parsed)
    rows = _concat([p.rows for p in parts], _ROWS_SCHEMA)
    keys = _concat([p.keys for p in parts], _KEYS_SCHEMA)
    rejected = _concat([p.rejected for p in parts], REJECT_SCHEMA)
    winners = _last_per_key(keys)
    is_last = pc.is_in(rows["seq"], winners)
    is_void = pc.equal(rows["status"], "VOIDED")
    keep = pc.and_(is_last, pc.invert(is_void))
    voided = _count(pc.and_(is_last, is_void))
    result = _finish(rows.filter(keep), rules)
    attributed = sum(p.attributed for p in parts)
    return CleanResult(result, rejected, attributed, keys.num_rows - len(winners), voided)


def _folder_rows(files: list[ParsedCsv], folder: dt.date, date: dt.date, rules: QsrRules, offset: int) -> _FolderRows:
    raw = pa.concat_tables([f.table for f in files])  # chunked, no copy; groupby never yields an empty folder
    n = raw.num_rows
    source = _per_file(files, lambda f: f.source_file)
    stem = _per_file(files, lambda f: f.source_file.rsplit("/", 1)[-1].removesuffix(".csv"))
    row_numbers = pa.chunked_array([f.row_numbers for f in files], pa.int64())
    ordered_at = _parse_instants(raw["ordered_at"])
    bdate = business_dates(ordered_at, rules.timezone, rules.day_start_hour)
    code = _failed_rule(raw, ordered_at, stem)
    valid = pc.equal(code, 0)
    mine = pc.if_else(pc.is_null(bdate), pa.scalar(folder == date), pc.equal(bdate, pa.scalar(date, pa.date32())))
    typed = pa.table(
        {
            "store_id": raw["store_id"],
            "order_id": raw["order_id"],
            "line_no": _to_int(raw["line_no"], valid),
            "ordered_at": ordered_at,
            "sku": raw["sku"],
            "qty": _to_int(raw["qty"], valid),
            "unit_price": _to_money(raw["unit_price"], valid),
            "discount": _to_money(pc.if_else(_blank(raw["discount"]), "0", raw["discount"]), valid),
            "status": raw["status"],
            "source_file": source,
            "seq": pa.array(np.arange(offset, offset + n, dtype="int64")),
        }
    )
    rows = typed.filter(pc.and_(valid, mine))
    keys = typed.select(["order_id", "line_no", "store_id", "seq"]).filter(valid)
    bad = pc.and_(pc.invert(valid), mine)
    reject_cols = {"source_file": source, "row_number": row_numbers, "reason": pc.take(pa.array(REASONS), code)}
    reject_cols.update({c: raw[c] for c in RAW_COLUMNS})
    rejected = pa.table(reject_cols, schema=REJECT_SCHEMA).filter(bad)
    malformed = [_malformed(f) for f in files if f.malformed] if folder == date else []
    if malformed:
        rejected = pa.concat_tables([rejected, *malformed]).sort_by(
            [("source_file", "ascending"), ("row_number", "ascending")]
        )
    attributed = _count(mine) + sum(len(f.malformed) for f in files if folder == date)
    return _FolderRows(rows, keys, rejected, attributed)


def _per_file(files: list[ParsedCsv], value) -> pa.ChunkedArray:
    """A string column holding ``value(file)`` on every row of that file."""
    return pa.chunked_array([pa.repeat(pa.scalar(value(f), pa.string()), f.table.num_rows) for f in files], pa.string())


def _malformed(parsed: ParsedCsv) -> pa.Table:
    """Rows the CSV parser could not split, as rejects (their text kept in order_id)."""
    m = parsed.malformed
    cols = {c: pa.array([""] * len(m), pa.string()) for c in RAW_COLUMNS}
    cols["order_id"] = pa.array([text[:200] for _, _, text in m], pa.string())
    cols.update(
        source_file=pa.array([parsed.source_file] * len(m), pa.string()),
        row_number=pa.array([n for n, _, _ in m], pa.int64()),
        reason=pa.array([r for _, r, _ in m], pa.string()),
    )
    return pa.table(cols, schema=REJECT_SCHEMA)


def _failed_rule(raw: pa.Table, ordered_at: pa.Array, stem: pa.ChunkedArray) -> pa.Array:
    """Per row, the index in REASONS of the first rule it fails (0 when it passes them all)."""
    checks = [
        _blank(raw["order_id"]),
        _not_int_ge1(raw["line_no"]),
        pc.not_equal(raw["store_id"], stem),
        pc.is_null(ordered_at),
        _blank(raw["sku"]),
        _not_int_ge1(raw["qty"]),
        pc.invert(pc.match_substring_regex(raw["unit_price"], _MONEY)),
        _bad_discount(raw["discount"]),
        pc.invert(pc.is_in(raw["status"], pa.array(STATUSES))),
    ]
    code = pa.scalar(0, pa.int8())
    for i in range(len(checks), 0, -1):  # the first failing rule wins
        code = pc.if_else(checks[i - 1], pa.scalar(i, pa.int8()), code)
    return code


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    return pa.concat_tables(tables).combine_chunks() if tables else schema.empty_table()


def _count(mask: pa.Array) -> int:
    return pc.sum(mask.cast(pa.int64())).as_py() or 0


def _last_per_key(keys: pa.Table) -> pa.Array:
    """``seq`` of the last valid row read per (store_id, order_id, line_no)."""
    if keys.num_rows == 0:
        return pa.array([], pa.int64())
    last = keys.group_by(["store_id", "order_id", "line_no"], use_threads=False).aggregate([("seq", "max")])
    return last["seq_max"].combine_chunks()


def _blank(col) -> pa.Array:
    return pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(col)), 0)


def _not_int_ge1(col) -> pa.Array:
    digits = pc.and_(pc.utf8_is_digit(col), pc.less_equal(pc.utf8_length(col), 9))
    value = pc.cast(pc.if_else(digits, col, "0"), pa.int64())
    return pc.invert(pc.and_(digits, pc.greater_equal(value, 1)))


def _bad_discount(col) -> pa.Array:
    return pc.invert(pc.or_(_blank(col), pc.match_substring_regex(col, _MONEY)))


def _to_int(col, ok) -> pa.Array:
    return pc.cast(pc.if_else(ok, col, "0"), pa.int32())


def _to_money(col, ok) -> pa.Array:
    return pc.cast(pc.if_else(ok, col, "0"), MONEY)


def _parse_instants(col) -> pa.Array:
    """UTC instants from ISO 8601 strings that carry an offset (or Z); null for anything else."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    fast = pc.strptime(col, format="%Y-%m-%dT%H:%M:%S%z", unit="s", error_is_null=True)
    retry = pc.and_(pc.is_null(fast), pc.match_substring_regex(col, _ISO))
    if not pc.any(retry).as_py():
        return fast
    import pandas as pd

    idx = pc.indices_nonzero(retry)
    slow = pd.to_datetime(pc.take(col, idx).to_pandas(), utc=True, format="ISO8601", errors="coerce")
    values = fast.to_pylist()
    for i, v in zip(idx.to_pylist(), slow, strict=True):
        values[i] = None if pd.isna(v) else v.floor("s").to_pydatetime()
    return pa.array(values, pa.timestamp("s", tz="UTC"))


def _finish(kept: pa.Table, rules: QsrRules) -> pa.Table:
    qty = kept["qty"]
    gross = pc.multiply(pc.cast(qty, pa.decimal128(10, 0)), kept["unit_price"])
    net = pc.cast(pc.subtract(gross, kept["discount"]), MONEY)
    net = pc.if_else(pc.equal(kept["status"], "REFUNDED"), pc.negate(net), net)
    out = pa.table(
        {
            "store_id": kept["store_id"],
            "order_id": kept["order_id"],
            "line_no": kept["line_no"],
            "ordered_at": kept["ordered_at"],
            "sku": kept["sku"],
            "qty": qty,
            "unit_price": kept["unit_price"],
            "discount": kept["discount"],
            "net_amount": net,
            "status": kept["status"],
            "is_suspicious": pc.greater(qty, rules.suspicious_qty_threshold),
            "source_file": kept["source_file"],
        },
        schema=OUTPUT_SCHEMA,
    )
    return out.combine_chunks()


def warm_up() -> None:
    """Run the transform once on two lines, so that pyarrow kernels and timezone data are loaded.

    Luigi forks a process per task when ``--workers`` > 1; warming in the parent (at import of
    tasks.qsr) means no forked task pays this again.
    """
    from tasks.transforms.rawcsv import parse_csv

    text = (
        ",".join(RAW_COLUMNS)
        + "\nO1,1,S1,2026-09-15T12:00:00-04:00,X,1,1.00,,COMPLETED\nO1,1,S1,bad,X,1,1.00,,VOIDED\n"
    )
    clean_pos_lines(
        [(parse_csv(text.encode(), "qsr_pos/2026-09-15/S1.csv", RAW_COLUMNS), dt.date(2026, 9, 15))],
        dt.date(2026, 9, 15),
        QsrRules(),
    )


_ROWS_SCHEMA = pa.schema(
    [(f.name, f.type) for f in OUTPUT_SCHEMA if f.name not in ("net_amount", "is_suspicious")] + [("seq", pa.int64())]
)
_KEYS_SCHEMA = pa.schema(
    [("order_id", pa.string()), ("line_no", pa.int32()), ("store_id", pa.string()), ("seq", pa.int64())]
)
