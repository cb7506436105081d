"""stg_qsr_pos: clean and type POS lines, and attribute them to a business date (contract section 2).

Pure: parsed raw files in, one partition's table and its rejected rows out.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

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
_INT = r"^\s*[0-9]{1,9}\s*$"
_MONEY = r"^\s*[0-9]{1,15}(\.[0-9]{1,2})?\s*$"
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
    duplicates_dropped: int
    voided_dropped: int


def clean_pos_lines(files: list[ParsedCsv], folder_dates: list[dt.date], date: dt.date, rules: QsrRules) -> CleanResult:
    """One business date of POS lines from the files of its dependency window, in read order.

    ``folder_dates[i]`` is the export folder of ``files[i]``. Rows that fail a type rule are rejected;
    a rejected row whose ``ordered_at`` parses belongs to its business date, one that does not to its folder date.
    """
    raw = _stack(files, folder_dates)
    typed, reason = _validate(raw, rules)
    bdate = typed["business_date"]
    folder = raw["folder_date"]
    is_valid = pc.is_null(reason)
    day = pa.scalar(date, pa.date32())
    attributed_to_date = pc.if_else(pc.is_null(bdate), pc.equal(folder, day), pc.equal(bdate, day))
    rejected = _rejects(raw, reason, pc.and_(pc.invert(is_valid), attributed_to_date))
    attributed = pc.sum(attributed_to_date.cast(pa.int64())).as_py() or 0

    valid = typed.filter(is_valid)
    kept = _dedupe_last(valid)
    duplicates = valid.num_rows - kept.num_rows
    kept = kept.filter(pc.equal(kept["business_date"], day))
    not_void = pc.not_equal(kept["status"], "VOIDED")
    voided = kept.num_rows - (pc.sum(not_void.cast(pa.int64())).as_py() or 0)
    kept = kept.filter(not_void)
    return CleanResult(_finish(kept, rules), rejected, attributed, duplicates, voided)


def _stack(files: list[ParsedCsv], folder_dates: list[dt.date]) -> pa.Table:
    """All rows of the window in read order, with provenance columns and malformed rows as all-null rows."""
    parts = []
    for f, folder in zip(files, folder_dates, strict=True):
        n = f.table.num_rows
        t = f.table.select(RAW_COLUMNS)
        t = t.append_column("source_file", pa.array([f.source_file] * n, pa.string()))
        t = t.append_column("row_number", f.row_numbers)
        t = t.append_column("folder_date", pa.array([folder] * n, pa.date32()))
        t = t.append_column("parse_error", pa.nulls(n, pa.string()))
        parts.append(t)
        if f.malformed:
            parts.append(_malformed_rows(f, folder))
    if not parts:
        return _empty_raw()
    return pa.concat_tables(parts).combine_chunks()


def _malformed_rows(f: ParsedCsv, folder: dt.date) -> pa.Table:
    m = len(f.malformed)
    cols = {c: pa.array([""] * m, pa.string()) for c in RAW_COLUMNS}
    cols["order_id"] = pa.array([text[:200] for _, _, text in f.malformed], pa.string())
    cols["source_file"] = pa.array([f.source_file] * m, pa.string())
    cols["row_number"] = pa.array([n for n, _, _ in f.malformed], pa.int64())
    cols["folder_date"] = pa.array([folder] * m, pa.date32())
    cols["parse_error"] = pa.array([r for _, r, _ in f.malformed], pa.string())
    return pa.table(cols)


def _empty_raw() -> pa.Table:
    fields = [(c, pa.string()) for c in RAW_COLUMNS]
    fields += [("source_file", pa.string()), ("row_number", pa.int64()), ("folder_date", pa.date32())]
    fields += [("parse_error", pa.string())]
    return pa.schema(fields).empty_table()


def _validate(raw: pa.Table, rules: QsrRules) -> tuple[pa.Table, pa.Array]:
    """Typed columns and, per row, the first failed rule (null when the row is valid)."""
    ordered_at = _parse_instants(raw["ordered_at"])
    stem = pc.replace_substring_regex(raw["source_file"], r"^.*/|\.csv$", "")
    checks = [
        (pc.is_valid(raw["parse_error"]), raw["parse_error"]),
        (_blank(raw["order_id"]), "order_id is empty"),
        (_not_int_ge1(raw["line_no"]), "line_no is not an integer >= 1"),
        (pc.not_equal(raw["store_id"], stem), "store_id does not match the file name"),
        (pc.is_null(ordered_at), "ordered_at is not ISO 8601 with a UTC offset"),
        (_blank(raw["sku"]), "sku is empty"),
        (_not_int_ge1(raw["qty"]), "qty is not an integer >= 1"),
        (pc.invert(pc.match_substring_regex(raw["unit_price"], _MONEY)), "unit_price is not a decimal >= 0 (2 dp)"),
        (_bad_discount(raw["discount"]), "discount is not blank or a decimal >= 0 (2 dp)"),
        (pc.invert(pc.is_in(raw["status"], pa.array(STATUSES))), "status is not COMPLETED, VOIDED or REFUNDED"),
    ]
    conds = pa.StructArray.from_arrays([_array(c) for c, _ in checks], [str(i) for i in range(len(checks))])
    values = [_array(v) if not isinstance(v, str) else pa.scalar(v) for _, v in checks]
    reason = pc.case_when(conds, *values)
    ok = pc.is_null(reason)
    typed = pa.table(
        {
            "store_id": raw["store_id"],
            "order_id": raw["order_id"],
            "line_no": _to_int(raw["line_no"], ok),
            "ordered_at": ordered_at,
            "sku": raw["sku"],
            "qty": _to_int(raw["qty"], ok),
            "unit_price": _to_money(raw["unit_price"], ok),
            "discount": _to_money(pc.if_else(_blank(raw["discount"]), "0", raw["discount"]), ok),
            "status": raw["status"],
            "source_file": raw["source_file"],
            "business_date": business_dates(ordered_at, rules.timezone, rules.day_start_hour),
            "seq": pa.array(range(raw.num_rows), pa.int64()),
        }
    )
    return typed, reason


def _array(x) -> pa.Array:
    return x.combine_chunks() if isinstance(x, pa.ChunkedArray) else x


def _blank(col) -> pa.Array:
    return pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(col)), 0)


def _not_int_ge1(col) -> pa.Array:
    digits = pc.match_substring_regex(col, _INT)
    value = pc.cast(pc.if_else(digits, pc.utf8_trim_whitespace(col), "0"), pa.int64())
    return pc.invert(pc.and_(digits, pc.greater_equal(value, 1)))


def _bad_discount(col) -> pa.Array:
    return pc.invert(pc.or_(_blank(col), pc.match_substring_regex(col, _MONEY)))


def _to_int(col, ok) -> pa.Array:
    return pc.cast(pc.if_else(ok, pc.utf8_trim_whitespace(col), "0"), pa.int32())


def _to_money(col, ok) -> pa.Array:
    return pc.cast(pc.if_else(ok, pc.utf8_trim_whitespace(col), "0"), MONEY)


def _parse_instants(col) -> pa.Array:
    """UTC instants from ISO 8601 strings that carry an offset (or Z); null for anything else."""
    col = _array(col)
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


def _rejects(raw: pa.Table, reason: pa.Array, mask: pa.Array) -> pa.Table:
    cols = {"source_file": raw["source_file"], "row_number": raw["row_number"], "reason": reason}
    cols.update({c: raw[c] for c in RAW_COLUMNS})
    return pa.table(cols, schema=REJECT_SCHEMA).filter(mask)


def _dedupe_last(valid: pa.Table) -> pa.Table:
    """Keep the last row read per (store_id, order_id, line_no)."""
    if valid.num_rows == 0:
        return valid
    last = valid.group_by(["store_id", "order_id", "line_no"], use_threads=False).aggregate([("seq", "max")])
    keep = pc.is_in(valid["seq"], last["seq_max"])
    return valid.filter(keep)


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
    return out.sort_by([("store_id", "ascending"), ("order_id", "ascending"), ("line_no", "ascending")])
