"""stg_qsr_pos: clean and type POS lines, and attribute them to a business date (contract section 2).

Pure: parsed raw files in, one partition's table and its rejected rows out.
"""

from __future__ import annotations

import collections
import datetime as dt
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.calendar import business_dates
from tasks.transforms.checks import (
    as_array,
    blank,
    count,
    first_failed,
    malformed_rejects,
    money_cents,
    not_int_ge1,
    parse_instants,
    reject_schema,
)
from tasks.transforms.qsr_rules import VERSION, QsrRules  # noqa: F401  (re-exported)
from tasks.transforms.rawcsv import ParsedCsv, RawSchemaError, check_header, file_stem, parse_csv_many

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
REJECT_SCHEMA = reject_schema(RAW_COLUMNS)
_FILE = pa.dictionary(pa.int32(), pa.string())  # source_file of a checked row: an index into the folder's files


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
    # per row of ``table``: equal for the lines of one order of one store (for store_totals), or None
    order_keys: np.ndarray | None = field(default=None, compare=False, repr=False)

    # rows_read == table + rejected + voided_dropped + duplicates_of_date + other_date_rows
    # attributed_rows == rows_read - other_date_rows


REASONS = [
    "",  # 0: valid
    "order_id is empty",
    "line_no is not an integer >= 1",
    "store_id does not match the file name",
    "ordered_at is not ISO 8601 with a UTC offset",
    "ordered_at is not on a business date its folder holds (folder date or the day before): misfiled",
    "sku is empty",
    "qty is not an integer >= 1",
    "unit_price is not a decimal >= 0 (2 dp)",
    "discount is not blank or a decimal >= 0 (2 dp)",
    "status is not COMPLETED, VOIDED or REFUNDED",
    "net_amount (qty x unit_price) does not fit decimal(18,2)",
]


@dataclass(frozen=True)
class CheckedFolder:
    """One export folder checked against the contract, whichever partition reads it.

    Nothing here depends on the partition's date: each row carries the business date that owns it
    (``owner``), so the two partitions that read a folder (folder-1 and folder) each take their rows
    from the same checked folder (computed once, see :func:`check_folder`, or read back from Arrow IPC,
    see :func:`checked_to_ipc`). A rejected row whose business date cannot be known (its ordered_at
    does not parse, or the parser could not split it) has no owner: both partitions take it.
    """

    folder: dt.date
    rows: pa.Table  # CHECKED_SCHEMA: every valid row in read order, typed (money: its checked string; the
    # file: a dictionary of the folder's, or a batch's, file names), its owner; chunked when checked in batches
    rejected: pa.Table  # REJECT_SCHEMA + owner + parsed: rows failing a rule, and rows the parser could not split
    rows_read: int  # every data row of the folder's files (rows the parser could not split included)
    shared: bool = False  # its arrays point into one buffer (read back from Arrow IPC): a slice keeps it all


def clean_pos_lines(folders: Iterable[tuple[dt.date, list[ParsedCsv]]], date: dt.date, rules: QsrRules) -> CleanResult:
    """One business date of POS lines from the files of its dependency window, in read order.

    ``folders`` yields (export folder date, its parsed files) in read order; it is consumed once, so a
    generator keeps one folder's raw rows in memory at a time. A rejected row whose ``ordered_at``
    parses belongs to its business date (a misfiled one to its folder's date); one whose timestamp does
    not parse, or that the parser could not split, to every partition that reads its folder.
    The output keeps read order: folder ``date`` before ``date+1``, files by name, rows as written.
    """
    return clean_checked((check_folder(parsed, folder, rules) for folder, parsed in folders), date, rules)


def clean_checked(folders: Iterable[CheckedFolder], date: dt.date, rules: QsrRules) -> CleanResult:
    """:func:`clean_pos_lines` from folders already checked (:func:`check_folder`), in read order.

    Memory: a folder whose rows are mostly of ``date`` (folder ``date``) is held as it is, and its
    rows are picked once, column by column, into the output; of a folder mostly of another date
    (folder ``date+1``) only the rows of ``date`` are copied out, and the keys of its valid rows
    (every valid row of the window takes part in the de-duplication) are held until it is done."""
    day = pa.scalar(date, pa.date32())
    parts, keys, stores, rejects, offset, rows_read, attributed = [], [], [], [], 0, 0, 0
    store_codes: dict[str, int] = {}  # store id -> its code in this window
    for checked in folders:
        valid = checked.rows
        n = valid.num_rows
        seq: slice | np.ndarray = slice(offset, offset + n)  # each valid row's place in the window's read order
        offset += n
        mine = as_array(pc.equal(valid["owner"], day)) if n else pa.array([], pa.bool_())
        n_mine = count(mine)
        key = valid.select(["order_id", "line_no"])
        stores.append(_store_codes(valid["source_file"], store_codes))
        if 2 * n_mine >= n:  # held whole: its rows of the date are picked at the end
            parts.append((valid.select(_PICKED), seq, mine.to_numpy(zero_copy_only=False)))
        else:
            picked = mine.to_numpy(zero_copy_only=False)
            parts.append((valid.select(_PICKED).filter(mine), np.flatnonzero(picked) + seq.start, None))
            if checked.shared:  # a copy: a slice of an entry read from the cache keeps the whole entry
                key = key.combine_chunks()
                key = key.take(pa.array(np.arange(key.num_rows))) if key.num_rows else key
        keys.append(key)
        rejected = checked.rejected
        # its own rejects, and those whose business date is unknown (owner null): a line of the window's
        # folder d+1 that the parser could not split, or whose ordered_at does not parse, may be a line of
        # this date (d+1's file starts with d's small hours), so it counts against both partitions
        rejected = rejected.filter(pc.fill_null(pc.equal(rejected["owner"], day), True))
        if not pc.all(rejected["parsed"]).as_py():  # rows the parser could not split: in file order
            rejected = rejected.sort_by([("source_file", "ascending"), ("row_number", "ascending")])
        rejects.append(rejected.select(REJECT_SCHEMA.names))
        attributed += n_mine + rejected.num_rows
        rows_read += checked.rows_read
        del checked, valid, key, mine
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
    result = _finish(picks, rules)
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
    )


def check_folder(files: list[ParsedCsv], folder: dt.date, rules: QsrRules) -> CheckedFolder:
    """Every rule of the contract on one export folder's parsed files: valid rows typed, failed rows
    with their reason, each row with the business date that owns it. Only ``rules.timezone`` and
    ``rules.day_start_hour`` matter here (the suspicious threshold is applied per partition)."""
    if not files:
        return CheckedFolder(folder, CHECKED_SCHEMA.empty_table(), _CHECKED_REJECT_SCHEMA.empty_table(), 0)
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
    # a misfiled line's business date is known and is neither partition's: the folder's date reports it;
    # a line whose ordered_at does not parse may be either partition's: its owner is null (both take it)
    owner = pc.if_else(misfiled, pa.scalar(folder, pa.date32()), bdate)
    # copy only what is valid, then cast: every value already passed its type rule
    picked = raw.select(["store_id", "order_id", "line_no", "sku", "qty", "status"]).filter(valid)
    rows = pa.table(
        {
            "store_id": picked["store_id"],
            "order_id": picked["order_id"],
            "line_no": pc.cast(picked["line_no"], pa.int32()),
            "ordered_at": pc.filter(ordered_at, valid),
            "sku": picked["sku"],
            "qty": pc.cast(picked["qty"], pa.int32()),
            "unit_price": pc.filter(price[1], valid),  # in cents (decimal(18,2) once kept: _finish)
            "discount": pc.filter(discount[1], valid),  # a blank one is 0
            "status": picked["status"],
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
        "reason": pc.take(pa.array(REASONS), pc.filter(code, bad)),
    }
    reject_cols.update({c: pc.filter(raw[c], bad) for c in RAW_COLUMNS})
    reject_cols.update(owner=pc.filter(owner, bad), parsed=pa.repeat(pa.scalar(True), count(bad)))
    tables = [pa.table(reject_cols, schema=_CHECKED_REJECT_SCHEMA)]
    for f in files:  # rows the parser could not split: either partition's (owner null), like a bad ordered_at
        if f.malformed:
            m = malformed_rejects(f, RAW_COLUMNS, REJECT_SCHEMA, "order_id")
            m = m.append_column("owner", pa.nulls(m.num_rows, pa.date32()))
            tables.append(m.append_column("parsed", pa.repeat(pa.scalar(False), m.num_rows)))
    rejected = pa.concat_tables(tables).combine_chunks()
    rows_read = raw.num_rows + sum(len(f.malformed) for f in files)
    return CheckedFolder(folder, rows, rejected, rows_read)


def check_batches(
    batches: Iterable[list[tuple[bytes, str]]], folder: dt.date, rules: QsrRules, threads: int = 1
) -> CheckedFolder:
    """:func:`check_folder` of one export folder whose files come in batches of (bytes, source_file),
    in read order: the same result as parsing and checking every file at once, holding only a few
    batches' raw bytes and parsed strings at a time (each batch's are let go once it is checked).
    The pieces of :func:`check_pieces`, merged."""
    return merge_checked(folder, list(check_pieces(batches, folder, rules, threads)))


def check_pieces(
    batches: Iterable[list[tuple[bytes, str]]], folder: dt.date, rules: QsrRules, threads: int = 1
) -> Iterator[CheckedFolder]:
    """Each batch of :func:`check_batches` checked (:func:`check_folder`), in read order, as soon as it
    is: a caller that keeps only part of each piece (a cache entry written as it comes, the rows of
    one date) never holds the whole folder. :func:`merge_checked` of them is the checked folder.

    ``threads`` batches are parsed and checked at once in a thread pool (the CSV parser and Arrow's
    kernels release the GIL), while the calling thread draws the next batch from ``batches`` (reading
    the files); at most ``threads`` + 1 batches are in memory. ``threads`` <= 1: one after another.
    A file whose header fails the contract is named as it would be if every file were parsed at once:
    a header error of any file wins over another error of an earlier batch (raised after the pieces
    before it were handed out)."""

    def one(batch: list[tuple[bytes, str]]) -> CheckedFolder:
        return check_folder(parse_csv_many(batch, RAW_COLUMNS), folder, rules)

    it = iter(batches)
    pool = ThreadPoolExecutor(threads, thread_name_prefix="check") if threads > 1 else _InThisThread()
    ahead = threads if threads > 1 else 0  # batches checked before the oldest one is handed out
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


class _InThisThread:
    """An executor that runs each call at once, in the calling thread."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args))
        except Exception as exc:  # noqa: BLE001  (handed on by .result(), as a thread pool would)
            future.set_exception(exc)
        return future


def _result(future, rest):
    try:
        return future.result()
    except RawSchemaError as exc:
        _read_the_rest(rest, exc, headers=True)


def _read_the_rest(rest, error: RawSchemaError, headers: bool):
    """Raise the error that parsing every file at once would: the files not read yet are read (a file
    that cannot be read wins), then, for an error of a file's body (``headers``), the first header of
    them that fails the contract wins; else ``error``."""
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
    """Checked batches of one folder's files (in read order) as one checked folder, equal to
    :func:`check_folder` of all the files at once: the valid rows in read order (chunked, no copy);
    the rejects that parsed, then the rows the parser could not split, each in read order."""
    if not pieces:
        return CheckedFolder(folder, CHECKED_SCHEMA.empty_table(), _CHECKED_REJECT_SCHEMA.empty_table(), 0)
    if len(pieces) == 1:
        return pieces[0]
    return CheckedFolder(
        folder,
        pa.concat_tables([p.rows for p in pieces]),
        _merged_rejects([p.rejected for p in pieces]),
        sum(p.rows_read for p in pieces),
    )


def _merged_rejects(rejected: list[pa.Table]) -> pa.Table:
    """The rejects of a folder's pieces (in read order) as :func:`check_folder` of the whole folder
    gives them: the rows that parsed, then the rows the parser could not split, each in read order."""
    if len(rejected) == 1:
        return rejected[0]
    if not rejected:
        return _CHECKED_REJECT_SCHEMA.empty_table()
    parsed = [r.filter(r["parsed"]) for r in rejected]
    unparsed = [r.filter(pc.invert(r["parsed"])) for r in rejected]
    return pa.concat_tables(parsed + unparsed).combine_chunks()


class CheckedWriter:
    """A checked folder written to ``sink`` (a writable file object) as it is checked, as one Arrow IPC
    stream: each piece's valid rows (:meth:`write`), then (:meth:`close`) an empty last batch whose
    custom metadata holds the folder's date, the rows read and the rejects (an IPC stream of their
    own, in :func:`merge_checked`'s order). Read back by :func:`checked_from_ipc`."""

    def __init__(self, sink, compression: str | None = None):
        # the stream writes each buffer on its own (thousands): gathered into 1 MiB writes to the sink
        self._out = pa.BufferedOutputStream(pa.PythonFile(sink, mode="w"), buffer_size=1 << 20)
        options = pa.ipc.IpcWriteOptions(compression=compression)
        self._writer = pa.ipc.new_stream(self._out, CHECKED_SCHEMA, options=options)
        self._rejected: list[pa.Table] = []
        self._rows_read = 0

    def write(self, piece: CheckedFolder) -> None:
        self._writer.write_table(piece.rows)
        self._rejected.append(piece.rejected)
        self._rows_read += piece.rows_read

    def close(self, folder: dt.date) -> None:
        buffer = pa.BufferOutputStream()
        rejected = _merged_rejects(self._rejected)
        with pa.ipc.new_stream(buffer, rejected.schema) as writer:
            writer.write_table(rejected)
        meta = {
            b"folder": folder.isoformat().encode(),
            b"rows_read": str(self._rows_read).encode(),
            b"rejected": buffer.getvalue().to_pybytes(),
        }
        self._writer.write_batch(_EMPTY_CHECKED, custom_metadata=meta)
        self._writer.close()
        self._out.detach()  # flushed; the sink stays open for its owner


def checked_to_ipc(checked: CheckedFolder, sink, compression: str | None = None) -> None:
    """Write a checked folder to ``sink`` (a writable file object) at once (see :class:`CheckedWriter`)."""
    writer = CheckedWriter(sink, compression)
    writer.write(checked)
    writer.close(checked.folder)


def checked_from_ipc(data) -> CheckedFolder:
    """What a :class:`CheckedWriter` wrote, read back; raises ``pa.ArrowInvalid`` (or ValueError) on
    anything else."""
    batches, meta = [], None
    with pa.ipc.open_stream(pa.py_buffer(data)) as reader:  # zero-copy: the arrays point into ``data``
        if reader.schema != CHECKED_SCHEMA:
            raise ValueError("not a checked qsr_pos folder")
        for batch, custom in reader.iter_batches_with_custom_metadata():
            if custom is not None and b"rows_read" in custom:
                meta = custom
            elif batch.num_rows:
                batches.append(batch)
    if meta is None:
        raise ValueError("a checked qsr_pos folder without its last batch (rejects, counts)")
    with pa.ipc.open_stream(meta[b"rejected"]) as reader:
        rejected = reader.read_all()
    if rejected.schema != _CHECKED_REJECT_SCHEMA:
        raise ValueError("not a checked qsr_pos folder")
    folder = dt.date.fromisoformat(meta[b"folder"].decode())
    rows = pa.Table.from_batches(batches, CHECKED_SCHEMA)
    return CheckedFolder(folder, rows, rejected, int(meta[b"rows_read"]), shared=True)


def _store_id_is_not_stem(raw: pa.Table, files: list[ParsedCsv], file_index: pa.Array) -> pa.Array:
    """Per row: its store_id differs from its file's name (store ids are short: cheap to spell out per row)."""
    stems = pa.array([file_stem(f.source_file) for f in files], pa.string())
    return pc.not_equal(raw["store_id"], pc.take(stems, file_index))


def _failed_rule(raw: pa.Table, ordered_at: pa.Array, misfiled: pa.Array, wrong_store: pa.Array, price, discount):
    """Per row, the index in REASONS of the first rule it fails (0 when it passes them all); ``price``
    and ``discount`` are :func:`money_cents` of their columns."""
    bad_qty, bad_price = not_int_ge1(raw["qty"]), pa.array(~price[0])
    checks = [
        blank(raw["order_id"]),
        not_int_ge1(raw["line_no"]),
        wrong_store,
        pc.is_null(ordered_at),
        misfiled,
        blank(raw["sku"]),
        bad_qty,
        bad_price,
        pc.invert(pc.or_(blank(raw["discount"]), pa.array(discount[0]))),
        pc.invert(pc.is_in(raw["status"], pa.array(STATUSES))),
        _gross_too_big(raw["qty"], price, pc.invert(pc.or_(bad_qty, bad_price))),
    ]
    return first_failed(checks)


def _gross_too_big(qty, price, typed: pa.Array) -> pa.Array:
    """qty x unit_price >= 10**16, where net_amount's decimal(18,2) cannot hold it (rows ``typed`` only;
    ``price`` is :func:`money_cents` of unit_price).

    A product of an a-digit integer and a b-digit whole part is below 10**(a+b), so only rows whose
    lengths add up to more than 16 need the exact product (a handful, if any)."""
    _, cents, whole = price
    maybe = as_array(typed).to_numpy(zero_copy_only=False) & (as_array(pc.binary_length(qty)).to_numpy() + whole > 16)
    too_big = np.zeros(len(typed), dtype=bool)
    for i in np.flatnonzero(maybe):
        too_big[i] = int(qty[int(i)].as_py()) * int(cents[i]) >= 10**18  # 10**16 in units is 10**18 cents
    return pa.array(too_big)


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    """Tables stacked without copying (chunked)."""
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _store_codes(files: pa.ChunkedArray, codes: dict[str, int]) -> np.ndarray:
    """Per checked row, a code of its store, from its file (a dictionary of file names): a valid row's
    store_id is its file name's stem (the contract's rule), so no row's string is read or hashed.
    ``codes`` (store id -> code) is shared by the folders of a window: one store, one code."""
    out = [np.zeros(0, np.int64)]
    for chunk in files.chunks:
        names = chunk.dictionary.to_pylist()
        lookup = np.array([codes.setdefault(file_stem(name), len(codes)) for name in names], np.int64)
        out.append(lookup[chunk.indices.to_numpy(zero_copy_only=False)] if len(lookup) else np.zeros(0, np.int64))
    return np.concatenate(out)


def _order_keys(keys: pa.Table, stores: np.ndarray | None = None) -> np.ndarray:
    """Per row of ``keys`` (store_id, order_id): an integer, equal for equal (store, order) pairs. The
    order id as its dense rank (Arrow sorts, 16 bytes a row at most), the store id as its dictionary
    code (a few hundred stores: a small hash table), or ``stores``, a code per row (>= 0) instead of
    the store_id column."""
    key = pc.rank(keys["order_id"], tiebreaker="dense").to_numpy().astype(np.int64)  # 1..n
    store = stores
    if store is None:
        store = pc.dictionary_encode(keys["store_id"].combine_chunks()).indices.to_numpy(zero_copy_only=False)
    key *= int(store.max()) + 1 if len(store) else 1
    key += store.astype(np.int64)  # < (n + 1) x (stores + 1): fits int64
    return key


def _last_per_key(keys: pa.Table, orders: np.ndarray | None = None) -> np.ndarray:
    """Per row of ``keys`` (store_id, order_id, line_no, in read order): whether it is the last one
    read of its key. ``orders``: the :func:`_order_keys` of the keys, if they are known (then the
    store_id column is not read).

    The (store, order) pair as one integer (:func:`_order_keys`), the line number folded in, then a
    stable sort of the integers: equal keys stay in read order, so the last of a run is the latest.
    A dictionary of the order ids would cost its hash table (17 MB for the 244,472 keys of a
    full-size window), a sort of the strings themselves their copy in sorted order."""
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


def _finish(picks: list[tuple[dict[str, pa.ChunkedArray], pa.Array]], rules: QsrRules) -> pa.Table:
    """The output rows: of each (checked columns, mask), the rows the mask picks, in order; money as
    decimal(18,2) from the checked cents (no cast), net_amount and is_suspicious computed. Column by
    column, each one chunk (hashed and written without a copy); a checked column is let go (popped)
    once its rows are picked."""

    def take(name: str) -> pa.Array:
        kind = CHECKED_SCHEMA.field(name).type
        chunks = [c for columns, keep in picks for c in pc.filter(columns.pop(name), keep).chunks]
        if pa.types.is_dictionary(kind):  # each chunk has its own dictionary
            chunks, kind = [c.dictionary_decode() for c in chunks], kind.value_type
        return as_array(pa.chunked_array(chunks, kind))

    out = {name: take(name) for name in ("store_id", "order_id", "line_no", "ordered_at", "sku", "qty")}
    price, discount = take("unit_price").to_numpy(), take("discount").to_numpy()
    out["unit_price"], out["discount"] = _money(price), _money(discount)
    out["status"] = take("status")
    refunded = pc.equal(out["status"], "REFUNDED")
    out["net_amount"] = _money(_net_cents(out["qty"], price, discount, refunded))
    del price, discount
    out["is_suspicious"] = pc.greater(out["qty"], rules.suspicious_qty_threshold)
    out["source_file"] = take("source_file")
    return pa.table([out[f.name] for f in OUTPUT_SCHEMA], schema=OUTPUT_SCHEMA)


def _net_cents(qty: pa.Array, unit_price: np.ndarray, discount: np.ndarray, refunded: pa.Array) -> np.ndarray:
    """qty x unit_price - discount, negated where ``refunded``, in int64 cents (no nulls here). Exact:
    every kept row passed the net_amount rule (qty x unit_price < 10**16), so each product and
    difference stays below 10**18 cents, within int64 and within decimal(18,2)."""
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


def warm_up() -> CleanResult:
    """Run the read and the transform once on a few lines, so that pyarrow kernels, timezone data and
    the modules they load lazily (Arrow IPC) are loaded; returns the result (for the next steps' own
    warm-up: versions, store totals).

    Luigi forks a process per task when ``--workers`` > 1; warming in the scheduling process, once
    work is found (``PartitionedTask.prepare_to_run``), means no forked task pays this again.
    """
    import io

    from tasks.transforms.rawcsv import parse_csv_many

    day = dt.date(2026, 9, 15)
    rows = [
        "O1,1,S1,2026-09-15T12:00:00-04:00,X,1,1.00,,COMPLETED",
        "O1,1,S1,2026-09-15T12:00:00.5Z,X,1,1.00,,VOIDED",
        "O2,1,S1,2026-09-15T12:00:00Z,X,2,1.50,0.25,COMPLETED",  # one line kept: the steps after run on a row
    ]
    text = "\n".join([",".join(RAW_COLUMNS), *rows, "O3,x"]) + "\n"
    checked = check_folder(parse_csv_many([(text.encode(), "qsr_pos/2026-09-15/S1.csv")], RAW_COLUMNS), day, QsrRules())
    sink = io.BytesIO()
    checked_to_ipc(checked, sink)
    return clean_checked([checked_from_ipc(sink.getvalue())], day, QsrRules())


CHECKED_SCHEMA = pa.schema(  # money in int64 cents (decimal once a row is kept); the file as a dictionary
    [
        (f.name, {"unit_price": pa.int64(), "discount": pa.int64(), "source_file": _FILE}.get(f.name, f.type))
        for f in OUTPUT_SCHEMA
        if f.name not in ("net_amount", "is_suspicious")
    ]
    + [("owner", pa.date32())]
)
_CHECKED_REJECT_SCHEMA = pa.schema([*REJECT_SCHEMA, ("owner", pa.date32()), ("parsed", pa.bool_())])
_EMPTY_CHECKED = pa.RecordBatch.from_pylist([], schema=CHECKED_SCHEMA)
_KEYS_SCHEMA = pa.schema([("order_id", pa.string()), ("line_no", pa.int32())])  # and a store code per row
_PICKED = [name for name in CHECKED_SCHEMA.names if name != "owner"]  # what the output is made from
