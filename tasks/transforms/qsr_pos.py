"""stg_qsr_pos, step two (pure): the checked folders of a partition's window in, the date's rows out,
de-duplicated (last read wins), VOIDED dropped, with net amounts and the suspicious flag."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.cores import executor
from tasks.transforms.checks import (
    as_array,
    count,
)
from tasks.transforms.qsr_check import (
    CHECKED_SCHEMA,
    MONEY,
    OUTPUT_SCHEMA,
    RAW_COLUMNS,
    REJECT_SCHEMA,
    CheckedFolder,
    check_folder,
)
from tasks.transforms.qsr_rules import VERSION, QsrRules  # noqa: F401  (re-exported)
from tasks.transforms.rawcsv import ParsedCsv, file_stem, parse_csv_many


@dataclass(frozen=True)
class CleanResult:
    table: pa.Table  # OUTPUT_SCHEMA, one row per kept POS line of the business date
    rejected: pa.Table  # REJECT_SCHEMA, rows attributed to the business date that failed a type rule
    attributed_rows: int  # raw rows attributed to the date (valid + rejected), the base of the reject share
    duplicates_dropped: int  # valid rows of the window replaced by a later copy of the same line
    voided_dropped: int
    rows_read: int = 0  # every data row of the window's files (rows the parser could not split included)
    other_date_rows: int = 0  # rows of the window attributed to another business date
    duplicates_of_date: int = 0  # valid rows of the date replaced by a later copy of the same line
    # source_file -> its rows of the date, for files of the date's own folder only (d+1's judges its own)
    file_rows: dict[str, int] = field(default_factory=dict)
    # per row of ``table``: equal for the lines of one order of one store (for store_totals), or None
    order_keys: np.ndarray | None = field(default=None, compare=False, repr=False)

    # rows_read == table + rejected + voided_dropped + duplicates_of_date + other_date_rows
    # attributed_rows == rows_read - other_date_rows


def clean_pos_lines(folders: Iterable[tuple[dt.date, list[ParsedCsv]]], date: dt.date, rules: QsrRules) -> CleanResult:
    """One business date of POS lines from (folder date, parsed files) of its window, in read order."""
    return clean_checked((check_folder(parsed, folder, rules) for folder, parsed in folders), date, rules)


def clean_checked(folders: Iterable[CheckedFolder], date: dt.date, rules: QsrRules, threads: int = 1) -> CleanResult:
    """Like :func:`clean_pos_lines`, from folders already checked (:func:`check_folder`)."""
    day = pa.scalar(date, pa.date32())
    parts, keys, stores, rejects, offset, rows_read, attributed = [], [], [], [], 0, 0, 0
    store_codes: dict[str, int] = {}  # store id -> its code in this window
    file_rows: dict[str, int] = {}  # source_file -> its rows the date judges it by (CleanResult.file_rows)
    for checked in folders:
        valid = checked.rows
        n = valid.num_rows
        seq: slice | np.ndarray = slice(offset, offset + n)  # each valid row's place in the window's read order
        offset += n
        mine = as_array(pc.equal(valid["owner"], day)) if n else pa.array([], pa.bool_())
        n_mine = count(mine)
        is_mine = mine.to_numpy(zero_copy_only=False)
        key = valid.select(["order_id", "line_no"])
        stores.append(_store_codes(valid["source_file"], store_codes))
        if checked.folder == date:  # a file is judged by its own folder's date (d+1's holds a few small hours of d)
            _count_per_file(valid["source_file"], is_mine, file_rows)
        if 2 * n_mine >= n:  # held whole: its rows of the date are picked at the end
            parts.append((valid.select(_PICKED), seq, is_mine))
        else:
            picked = np.flatnonzero(is_mine)
            # a take of the few rows picked, not a filter of every chunk (docs/performance.md)
            parts.append((valid.select(_PICKED).take(pa.array(picked)), picked + seq.start, None))
            if checked.shared:  # a copy: a slice of an entry read from the cache keeps the whole entry
                key = key.combine_chunks()
                key = key.take(pa.array(np.arange(key.num_rows))) if key.num_rows else key
        keys.append(key)
        rejected = checked.rejected
        # its own rejects, and those of no known business date, which may be this date's (both partitions count them)
        rejected = rejected.filter(pc.fill_null(pc.equal(rejected["owner"], day), True))
        if not pc.all(rejected["parsed"]).as_py():  # rows the parser could not split: in file order
            rejected = rejected.sort_by([("source_file", "ascending"), ("row_number", "ascending")])
        rejects.append(rejected.select(REJECT_SCHEMA.names))
        for c in pc.value_counts(rejected["source_file"]).to_pylist() if checked.folder == date else []:
            file_rows[c["values"]] = file_rows.get(c["values"], 0) + c["counts"]
        attributed += n_mine + rejected.num_rows
        rows_read += checked.rows_read
        del checked, valid, key, mine, is_mine
    rejected = _concat(rejects, REJECT_SCHEMA).combine_chunks()
    keys = _concat(keys, _KEYS_SCHEMA)
    orders = _order_keys(keys, np.concatenate(stores)) if keys.num_rows else np.zeros(0, np.int64)
    last_by_seq = _last_per_key(keys, orders=orders)
    duplicates = keys.num_rows - int(np.count_nonzero(last_by_seq))
    del keys
    picks, kept_orders, voided, of_date, last_of_date = [], [], 0, 0, 0
    for table, seq, mine in parts:  # mine: None when every row of the table is of the date
        is_last = last_by_seq[seq] if mine is None else last_by_seq[seq] & mine  # (a new array, never a view)
        is_void = pc.equal(table["status"], "VOIDED").to_numpy(zero_copy_only=False)
        voided += int(np.count_nonzero(is_last & is_void))
        of_date += table.num_rows if mine is None else int(np.count_nonzero(mine))
        last_of_date += int(np.count_nonzero(is_last))
        keep = is_last & ~is_void
        picks.append(({name: table[name] for name in _PICKED}, pa.array(keep)))
        kept_orders.append(orders[seq][keep])
        del table  # its columns are held by ``picks`` only, to be let go one at a time
    del parts, last_by_seq, orders
    result = _finish(picks, rules, threads)
    return CleanResult(
        result,
        rejected,
        attributed,
        duplicates,
        voided,
        rows_read=rows_read,
        other_date_rows=rows_read - attributed,
        duplicates_of_date=of_date - last_of_date,
        order_keys=np.concatenate(kept_orders) if kept_orders else np.zeros(0, np.int64),
        file_rows=file_rows,
    )


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _count_per_file(files: pa.ChunkedArray, mask: np.ndarray, into: dict[str, int]) -> None:
    """Add to ``into`` (file name -> rows) the rows of ``files`` where ``mask`` is true, by dictionary code."""
    start = 0
    for chunk in files.chunks:
        codes = chunk.indices.to_numpy(zero_copy_only=False)[mask[start : start + len(chunk)]]
        start += len(chunk)
        names = chunk.dictionary.to_pylist()
        for name, n in zip(names, np.bincount(codes, minlength=len(names)).tolist(), strict=True):
            if n:
                into[name] = into.get(name, 0) + n


def _store_codes(files: pa.ChunkedArray, codes: dict[str, int]) -> np.ndarray:
    """Per checked row, a code of its store from its file's name (a valid row's store_id is its stem);
    ``codes`` (store id -> code) is shared by the folders of a window."""
    out = [np.zeros(0, np.int64)]
    for chunk in files.chunks:
        names = chunk.dictionary.to_pylist()
        lookup = np.array([codes.setdefault(file_stem(name), len(codes)) for name in names], np.int64)
        out.append(lookup[chunk.indices.to_numpy(zero_copy_only=False)] if len(lookup) else np.zeros(0, np.int64))
    return np.concatenate(out)


def _order_keys(keys: pa.Table, stores: np.ndarray | None = None) -> np.ndarray:
    """Per row of ``keys`` (store_id, order_id): an integer equal for equal (store, order) pairs."""
    key = pc.rank(keys["order_id"], tiebreaker="dense").to_numpy().astype(np.int64)  # 1..n
    store = stores
    if store is None:
        store = pc.dictionary_encode(keys["store_id"].combine_chunks()).indices.to_numpy(zero_copy_only=False)
    key *= int(store.max()) + 1 if len(store) else 1
    key += store.astype(np.int64)  # < (n + 1) x (stores + 1): fits int64
    return key


def _last_per_key(keys: pa.Table, orders: np.ndarray | None = None) -> np.ndarray:
    """Per row of ``keys`` (store_id, order_id, line_no, in read order): whether it is the last read of its key."""
    n = keys.num_rows
    last = np.zeros(n, dtype=bool)
    if n == 0:
        return last
    key = _order_keys(keys) if orders is None else orders.copy()
    line = keys["line_no"].to_numpy()
    is_last = np.ones(n, dtype=bool)
    if int(key.max()) < (2**63 - 1) // (int(line.max()) + 1) - 1:  # the three keys as one integer
        key *= int(line.max()) + 1
        key += line
        del line
        by = np.argsort(key, kind="stable")
        key = key[by]
        np.not_equal(key[1:], key[:-1], out=is_last[:-1])
    else:  # line numbers too large to fold in (up to 999,999,999): two keys
        by = np.lexsort((line, key))  # stable too
        key, line = key[by], line[by]
        is_last[:-1] = (key[1:] != key[:-1]) | (line[1:] != line[:-1])
    del key
    last[by[is_last]] = True
    return last


def _finish(picks: list[tuple[dict[str, pa.ChunkedArray], pa.Array]], rules: QsrRules, threads: int) -> pa.Table:
    """The output rows picked by each (checked columns, mask), column by column, with net_amount and
    is_suspicious computed."""

    def take(name: str) -> pa.Array:
        kind = CHECKED_SCHEMA.field(name).type
        chunks = [c for columns, keep in picks for c in pc.filter(columns.pop(name), keep).chunks]
        if pa.types.is_dictionary(kind):  # each chunk has its own dictionary
            chunks, kind = [c.dictionary_decode() for c in chunks], kind.value_type
        return as_array(pa.chunked_array(chunks, kind))

    # ``threads`` columns at a time (Arrow's filter lets go of the GIL), when the build has more than one
    with executor(min(2, threads), "pick") as pool:
        names = ("store_id", "order_id", "sku", "status", "line_no", "ordered_at", "qty")
        out = dict(zip(names, pool.map(take, names), strict=True))
    price, discount = take("unit_price").to_numpy(), take("discount").to_numpy()
    out["unit_price"], out["discount"] = _money(price), _money(discount)
    refunded = pc.equal(out["status"], "REFUNDED")
    out["net_amount"] = _money(_net_cents(out["qty"], price, discount, refunded))
    del price, discount
    out["is_suspicious"] = pc.greater(out["qty"], rules.suspicious_qty_threshold)
    out["source_file"] = take("source_file")
    return pa.table([out[f.name] for f in OUTPUT_SCHEMA], schema=OUTPUT_SCHEMA)


def _net_cents(qty: pa.Array, unit_price: np.ndarray, discount: np.ndarray, refunded: pa.Array) -> np.ndarray:
    """qty x unit_price - discount, negated where ``refunded``, in int64 cents; exact, as every kept row
    passed the net_amount rule (below 10**18 cents)."""
    net = qty.to_numpy().astype(np.int64)
    net *= unit_price
    net -= discount
    np.negative(net, out=net, where=refunded.to_numpy(zero_copy_only=False))
    return net


def _money(cents: np.ndarray) -> pa.Array:
    """int64 cents (below 10**18 in magnitude, no nulls) as decimal(18,2), without a cast."""
    words = np.empty(2 * len(cents), np.int64)  # a decimal128 value: low then high 64 bits, little-endian
    words[0::2] = cents
    words[1::2] = cents >> 63  # the sign, extended
    return pa.Array.from_buffers(MONEY, len(cents), [None, pa.py_buffer(words)])


def warm_up() -> tuple[CheckedFolder, CleanResult]:
    """Run the check and the transform once on a few lines, to load kernels and timezone data before forks."""
    day = dt.date(2026, 9, 15)
    rows = [
        "O1,1,S1,2026-09-15T12:00:00-04:00,X,1,1.00,,COMPLETED",
        "O1,1,S1,2026-09-15T12:00:00.5Z,X,1,1.00,,VOIDED",
        "O2,1,S1,2026-09-15T12:00:00Z,X,2,1.50,0.25,COMPLETED",  # one line kept: the steps after run on a row
    ]
    text = "\n".join([",".join(RAW_COLUMNS), *rows, "O3,x"]) + "\n"
    checked = check_folder(parse_csv_many([(text.encode(), "qsr_pos/2026-09-15/S1.csv")], RAW_COLUMNS), day, QsrRules())
    return checked, clean_checked([checked], day, QsrRules())


_KEYS_SCHEMA = pa.schema([("order_id", pa.string()), ("line_no", pa.int32())])  # and a store code per row
_PICKED = [name for name in CHECKED_SCHEMA.names if name != "owner"]  # what the output is made from
