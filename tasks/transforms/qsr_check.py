"""stg_qsr_pos, step one: check an export folder against the contract (types, rules, the business date
that owns each row). Pure: parsed raw files in, a :class:`CheckedFolder` out, which both partitions
reading the folder share (tasks/checked/)."""

from __future__ import annotations

import collections
import datetime as dt
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.calendar import business_dates
from tasks.cores import executor
from tasks.transforms.checks import (
    MONEY,
    MONEY_DIGITS,
    RAW_LINE,
    as_array,
    blank,
    count,
    first_failed,
    int_too_long,
    malformed_rejects,
    money_cents,
    money_too_long,
    not_int_ge1,
    parse_instants,
    reject_schema,
)
from tasks.transforms.qsr_rules import VERSION, QsrRules  # noqa: F401  (re-exported)
from tasks.transforms.rawcsv import ParsedCsv, file_stem, parse_csv_many
from tasks.transforms.rawcsv_lines import RawSchemaError, check_header

RAW_COLUMNS = ["order_id", "line_no", "store_id", "ordered_at", "sku", "qty", "unit_price", "discount", "status"]
STATUSES = ["COMPLETED", "VOIDED", "REFUNDED"]
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
REJECT_SCHEMA = reject_schema(RAW_COLUMNS)
# a checked row's columns of few distinct values (source_file: an index into the folder's files) as dictionaries
_CODED = dict.fromkeys(("store_id", "sku", "status", "source_file"), pa.dictionary(pa.int32(), pa.string()))

MISFILED_REASON = "ordered_at is not on a business date its folder holds (folder date or the day before): misfiled"

REASONS = [
    "",  # 0: valid
    "order_id is empty",
    "line_no is not an integer >= 1",
    "store_id does not match the file name",
    "ordered_at is not ISO 8601 with a UTC offset",
    MISFILED_REASON,
    "sku is empty",
    "qty is not an integer >= 1",
    "unit_price is not a decimal >= 0 (2 dp)",
    "discount is not blank or a decimal >= 0 (2 dp)",
    "status is not COMPLETED, VOIDED or REFUNDED",
    "net_amount (qty x unit_price) does not fit decimal(18,2)",
    "qty is over 999999999, the largest a line may have",
    f"unit_price has over {MONEY_DIGITS} digits before the point, the most decimal(18,2) holds",
    f"discount has over {MONEY_DIGITS} digits before the point, the most decimal(18,2) holds",
]
MISFILED = REASONS.index(MISFILED_REASON)  # a misfiled line's reason gives its local time and business date


@dataclass(frozen=True)
class CheckedFolder:
    """One export folder checked, for both partitions that read it: each row carries the business date that
    owns it (``owner``), null for a rejected row whose date cannot be known (both take it)."""

    folder: dt.date
    rows: pa.Table  # CHECKED_SCHEMA: every valid row in read order, typed (money: its checked string; the
    # file: a dictionary of the folder's, or a batch's, file names), its owner; chunked when checked in batches
    rejected: pa.Table  # REJECT_SCHEMA + owner + parsed: rows failing a rule, and rows the parser could not split
    rows_read: int  # every data row of the folder's files (rows the parser could not split included)
    shared: bool = False  # its arrays point into one buffer (read back from Arrow IPC): a slice keeps it all


def check_folder(files: list[ParsedCsv], folder: dt.date, rules: QsrRules) -> CheckedFolder:
    """Every rule of the contract on one export folder's parsed files (the suspicious threshold is
    applied per partition)."""
    if not files:
        return CheckedFolder(folder, CHECKED_SCHEMA.empty_table(), CHECKED_REJECT_SCHEMA.empty_table(), 0)
    raw = pa.concat_tables([f.table for f in files])  # chunked, no copy
    names = pa.array([f.source_file for f in files], pa.string())
    file_index = pa.array(np.repeat(np.arange(len(files), dtype="int32"), [f.table.num_rows for f in files]))
    ordered_at = parse_instants(raw["ordered_at"])
    bdate = business_dates(ordered_at, rules.timezone, rules.day_start_hour)
    # only partitions folder-1 and folder read this folder: a line of any other business date would be lost
    held = pa.array([folder - dt.timedelta(days=1), folder], pa.date32())
    misfiled = pc.and_(pc.is_valid(bdate), pc.invert(pc.is_in(bdate, held)))  # a date, neither of the two
    price, discount = money_cents(raw["unit_price"]), money_cents(raw["discount"])
    code = _failed_rule(raw, ordered_at, misfiled, _store_id_is_not_stem(raw, files, file_index), price, discount)
    valid = pc.equal(code, 0)
    owner = _owner(bdate, misfiled, folder)
    # copy only what is valid, then cast: every value already passed its type rule
    picked = raw.select(["store_id", "order_id", "line_no", "sku", "qty", "status"]).filter(valid)
    rows = pa.table(
        {
            # few distinct values (stores, SKUs, statuses): as dictionaries, 4 bytes a row
            "store_id": pc.dictionary_encode(picked["store_id"]),
            "order_id": picked["order_id"],
            "line_no": pc.cast(picked["line_no"], pa.int32()),
            "ordered_at": pc.filter(ordered_at, valid),
            "sku": pc.dictionary_encode(picked["sku"]),
            "qty": pc.cast(picked["qty"], pa.int32()),
            "unit_price": pc.filter(price[1], valid),  # in cents (decimal(18,2) once kept: _finish)
            "discount": pc.filter(discount[1], valid),  # a blank one is 0
            "status": pc.dictionary_encode(picked["status"]),
            # each row's file as an index into the folder's file names (4 bytes a row, not the name)
            "source_file": pa.DictionaryArray.from_arrays(as_array(pc.filter(file_index, valid)), names),
            "owner": pc.filter(owner, valid),
        },
        schema=CHECKED_SCHEMA,
    )
    del picked
    bad = pc.invert(valid)
    row_numbers = pa.chunked_array([f.row_numbers for f in files], pa.int64())
    reject_cols = {
        "source_file": pc.take(names, pc.filter(file_index, bad)),
        "row_number": pc.filter(row_numbers, bad),
        "reason": _reasons(pc.filter(code, bad), pc.filter(ordered_at, bad), pc.filter(bdate, bad), folder, rules),
    }
    reject_cols.update({c: pc.filter(raw[c], bad) for c in RAW_COLUMNS})
    reject_cols[RAW_LINE] = pa.nulls(count(bad), pa.string())
    reject_cols.update(owner=pc.filter(owner, bad), parsed=pa.repeat(pa.scalar(True), count(bad)))
    tables = [pa.table(reject_cols, schema=CHECKED_REJECT_SCHEMA)]
    for f in files:  # rows the parser took out: owned like any other row (none when it could not split them)
        if f.malformed:
            m = malformed_rejects(f, RAW_COLUMNS, REJECT_SCHEMA)
            m = m.append_column("owner", _owners(m["ordered_at"], folder, held, rules))
            tables.append(m.append_column("parsed", pa.repeat(pa.scalar(False), m.num_rows)))
    rejected = pa.concat_tables(tables).combine_chunks()
    rows_read = raw.num_rows + sum(len(f.malformed) for f in files)
    return CheckedFolder(folder, rows, rejected, rows_read)


def _reasons(code: pa.Array, ordered_at: pa.Array, bdate: pa.Array, folder: dt.date, rules: QsrRules) -> pa.Array:
    """Each rejected row's reason (``REASONS[code]``); a misfiled one's gives its local time and business date."""
    reason = pc.take(pa.array(REASONS), code)
    misfiled = pc.equal(code, MISFILED)
    if not count(misfiled):
        return reason
    local = ordered_at.cast(pa.timestamp("s", tz=rules.timezone))
    at = pc.strftime(local, f"ordered_at is %Y-%m-%d %H:%M:%S at the store ({rules.timezone}, %Ez), business date ")
    held = f", not {folder - dt.timedelta(days=1)} or {folder} (the folder's date or the day before): misfiled"
    return pc.if_else(misfiled, pc.binary_join_element_wise(at, pc.cast(bdate, pa.string()), held, ""), reason)


def check_batches(
    batches: Iterable[list[tuple[bytes, str]]], folder: dt.date, rules: QsrRules, threads: int = 1
) -> CheckedFolder:
    """:func:`check_folder` of one export folder whose files come in batches of (bytes, source_file), in
    read order: the pieces of :func:`check_pieces`, merged."""
    return merge_checked(folder, list(check_pieces(batches, folder, rules, threads)))


def check_pieces(
    batches: Iterable[list[tuple[bytes, str]]], folder: dt.date, rules: QsrRules, threads: int = 1
) -> Iterator[CheckedFolder]:
    """Each batch checked, in read order, ``threads`` at once while this thread reads the next; the error
    raised is the one parsing every file at once would raise."""

    def one(batch: list[tuple[bytes, str]]) -> CheckedFolder:
        return check_folder(parse_csv_many(batch, RAW_COLUMNS), folder, rules)

    it = iter(batches)
    pool = executor(threads, "check")
    ahead = threads - 1 if threads > 1 else 0  # batches checked before the oldest one is handed out
    with pool:
        pending: collections.deque = collections.deque()
        try:
            for batch in it:
                try:
                    for data, name in batch:  # in this thread: a bad header stops the reading at once
                        check_header(data, name, RAW_COLUMNS)
                except RawSchemaError as exc:
                    _read_the_rest(it, exc, headers=False)
                pending.append(pool.submit(one, batch))
                del batch
                while len(pending) > ahead:
                    yield _result(pending.popleft(), it)
            while pending:
                yield _result(pending.popleft(), it)
        finally:
            for future in pending:
                future.cancel()


def _result(future, rest):
    try:
        return future.result()
    except RawSchemaError as exc:
        _read_the_rest(rest, exc, headers=True)


def _read_the_rest(rest, error: RawSchemaError, headers: bool):
    """Raise the error that parsing every file at once would: a read error of the rest, then for a body
    error (``headers``) the first failing header of the rest; else ``error``."""
    first = None
    for batch in rest:
        for data, name in batch:
            if headers and first is None:
                try:
                    check_header(data, name, RAW_COLUMNS)
                except RawSchemaError as exc:
                    first = exc
    raise first or error


def merge_checked(folder: dt.date, pieces: list[CheckedFolder]) -> CheckedFolder:
    """Checked batches of one folder's files as one checked folder, equal to :func:`check_folder` of all."""
    if not pieces:
        return CheckedFolder(folder, CHECKED_SCHEMA.empty_table(), CHECKED_REJECT_SCHEMA.empty_table(), 0)
    if len(pieces) == 1:
        return pieces[0]
    return CheckedFolder(
        folder,
        pa.concat_tables([p.rows for p in pieces]),
        merged_rejects([p.rejected for p in pieces]),
        sum(p.rows_read for p in pieces),
    )


def merged_rejects(rejected: list[pa.Table]) -> pa.Table:
    """The rejects of a folder's pieces in :func:`check_folder`'s order: parsed rows, then unsplit ones."""
    if len(rejected) == 1:
        return rejected[0]
    if not rejected:
        return CHECKED_REJECT_SCHEMA.empty_table()
    if all(pc.all(r["parsed"]).as_py() is not False for r in rejected):  # every row parsed (the usual case)
        return pa.concat_tables(rejected).combine_chunks()
    parsed = [r.filter(r["parsed"]) for r in rejected]
    unparsed = [r.filter(pc.invert(r["parsed"])) for r in rejected]
    return pa.concat_tables(parsed + unparsed).combine_chunks()


def _owner(bdate: pa.Array, misfiled: pa.Array, folder: dt.date) -> pa.Array:
    """The partition a row is attributed to: its business date; the folder's for a misfiled line; null for
    an unparsed ordered_at (both take it)."""
    return pc.if_else(misfiled, pa.scalar(folder, pa.date32()), bdate)


def _owners(ordered_at, folder: dt.date, held: pa.Array, rules: QsrRules) -> pa.Array:
    """:func:`_owner` of rows given their ordered_at text (null for a row the parser could not split)."""
    bdate = business_dates(parse_instants(ordered_at), rules.timezone, rules.day_start_hour)
    return _owner(bdate, pc.and_(pc.is_valid(bdate), pc.invert(pc.is_in(bdate, held))), folder)


def _store_id_is_not_stem(raw: pa.Table, files: list[ParsedCsv], file_index: pa.Array) -> pa.Array:
    """Per row: its store_id differs from its file's name (store ids are short: cheap to spell out per row)."""
    stems = pa.array([file_stem(f.source_file) for f in files], pa.string())
    return pc.not_equal(raw["store_id"], pc.take(stems, file_index))


def _failed_rule(raw: pa.Table, ordered_at: pa.Array, misfiled: pa.Array, wrong_store: pa.Array, price, discount):
    """Per row, the index in REASONS of the first rule it fails (0: none)."""
    bad_qty, bad_price = not_int_ge1(raw["qty"]), pa.array(~price[0])
    big_qty = int_too_long(raw["qty"], bad_qty)
    big_price = money_too_long(raw["unit_price"], bad_price)
    bad_discount = pc.invert(pc.or_(blank(raw["discount"]), pa.array(discount[0])))
    big_discount = money_too_long(raw["discount"], bad_discount)
    checks = [
        blank(raw["order_id"]),
        not_int_ge1(raw["line_no"]),
        wrong_store,
        pc.is_null(ordered_at),
        misfiled,
        blank(raw["sku"]),
        pc.and_not(bad_qty, big_qty),
        pc.and_not(bad_price, big_price),
        pc.and_not(bad_discount, big_discount),
        pc.invert(pc.is_in(raw["status"], pa.array(STATUSES))),
        _gross_too_big(raw["qty"], price, pc.invert(pc.or_(bad_qty, bad_price))),
        big_qty,
        big_price,
        big_discount,
    ]
    return first_failed(checks)


def _gross_too_big(qty, price, typed: pa.Array) -> pa.Array:
    """qty x unit_price >= 10**16, which decimal(18,2) cannot hold; only rows whose digits add to > 16 are
    multiplied."""
    _, cents, whole = price
    maybe = as_array(typed).to_numpy(zero_copy_only=False) & (as_array(pc.binary_length(qty)).to_numpy() + whole > 16)
    too_big = np.zeros(len(typed), dtype=bool)
    for i in np.flatnonzero(maybe):
        too_big[i] = int(qty[int(i)].as_py()) * int(cents[i]) >= 10**18  # 10**16 in units is 10**18 cents
    return pa.array(too_big)


CHECKED_SCHEMA = pa.schema(  # money in int64 cents (decimal once a row is kept); few-valued columns as dictionaries
    [
        (f.name, {"unit_price": pa.int64(), "discount": pa.int64(), **_CODED}.get(f.name, f.type))
        for f in OUTPUT_SCHEMA
        if f.name not in ("net_amount", "is_suspicious")
    ]
    + [("owner", pa.date32())]
)
CHECKED_REJECT_SCHEMA = pa.schema([*REJECT_SCHEMA, ("owner", pa.date32()), ("parsed", pa.bool_())])
EMPTY_CHECKED = pa.RecordBatch.from_pylist([], schema=CHECKED_SCHEMA)
