# The yardstick of benchmarks/backfill.py: a verbatim copy of the team's shared side-by-side yardstick
# (shared/bench/reference.py, "a plain vectorised pyarrow transform of stg_qsr_pos"), kept here so the
# benchmark runs from a clone alone. It imports nothing of Daybreak. Its rules are contract v1's: the
# rows it writes are not Daybreak's (schema, de-duplication scope); the benchmark times it and checks
# Daybreak's rows against its own plain loop (plain_loop in backfill.py), which follows Daybreak's rules.
# backfill.py times the shared original beside this copy when it finds it (--shared).
"""Reference ("physical limit") implementation of stg_qsr_pos for one business date.

Pure work, no orchestration: list + read raw folders ``d`` and ``d+1`` with
pyarrow.csv, validate and type every column with vectorised Arrow kernels,
compute the business date, quarantine rejects, dedupe, drop VOIDED, derive
``net_amount`` / ``is_suspicious`` and publish the partition atomically.

Contract decisions taken here (contract section 2 is silent on them):

* Validation runs first; a rejected row is not a "line read" for dedupe, so
  a malformed re-send never hides an earlier valid version.
* Dedupe keeps the last *valid* version of (store_id, order_id, line_no)
  within the partition (folder d before d+1, file name order, row order),
  and VOIDED is dropped *after* dedupe (a last version that is VOIDED voids
  the line).
* A reject whose ``ordered_at`` is valid belongs to the partition of its
  business date; a reject whose ``ordered_at`` cannot be parsed belongs to
  the partition of its folder date, so every reject is quarantined exactly
  once.  The reject share is rejects / rows attributed to the partition.
* A missing ``d+1`` folder is read as empty (files may be missing).
* ``ordered_at`` is stored as an instant (timestamp[ms, UTC]); the business
  date is the *wall-clock* date of (local time - 5 h), which gives the 25-hour
  business day of 2026-10-31 that the contract describes.
* Money is decimal128: unit_price/discount (12,2), net_amount (18,2).

Layout written (hive style)::

    <data_root>/staging/qsr_pos/business_date=D/part.parquet + _SUCCESS
    <data_root>/quarantine/qsr_pos/business_date=D/rejects.parquet + _SUCCESS

Each folder is built in a hidden temp folder next to it and published with
one rename (or an atomic RENAME_EXCHANGE when it already exists), so a reader
sees the old or the new partition, never a mix.  ``_SUCCESS`` holds a JSON
manifest (cleaning version, parameters, inputs with size/mtime, counts).
"""
from __future__ import annotations

import ctypes
import datetime as dt
import errno
import json
import os
import re
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

CLEANING_VERSION = "qsr_pos-clean-v1"
TZ = "America/Toronto"
COLUMNS = ["order_id", "line_no", "store_id", "ordered_at", "sku", "qty", "unit_price", "discount", "status"]
STORE_RE = re.compile(r"^[A-Z0-9][A-Z0-9_-]{0,31}$")
BUSINESS_DAY_START = dt.timedelta(hours=5)

_READ_OPTS = pacsv.ReadOptions(use_threads=False, block_size=1 << 22)
_PARSE_OPTS = pacsv.ParseOptions()
_CONVERT_OPTS = pacsv.ConvertOptions(
    column_types={c: pa.string() for c in COLUMNS},
    strings_can_be_null=False,
    quoted_strings_can_be_null=False,
)
_TS_SHAPE = (  # ISO 8601 extended, seconds precision, with Z or +-HH:MM; field ranges checked here
    r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(Z|[+-](0\d|1[0-4]):[0-5]\d)$"
)
_DAYS_IN_MONTH = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
_INT_SHAPE = r"^[+-]?\d{1,15}$"
_DEC_SHAPE = r"^[+-]?\d{1,10}(\.\d{1,2})?$"
PRICE_T = pa.decimal128(12, 2)
# low-cardinality columns get dictionary pages; order_id etc. are near-unique (dictionary
# encoding them only to fall back to plain costs ~30 % of the write time)
DICT_COLUMNS = ["business_date", "store_id", "sku", "status", "source_file", "is_suspicious"]
NET_T = pa.decimal128(18, 2)


class PartitionError(RuntimeError):
    """The partition fails; its previous output (if any) is left as it was."""


@dataclass
class PartitionStats:
    business_date: str
    files_read: int = 0
    bytes_read: int = 0
    rows_read: int = 0
    rows_attributed: int = 0
    rejects: int = 0
    duplicates_dropped: int = 0
    voided_dropped: int = 0
    rows_out: int = 0
    skipped_file_names: list = field(default_factory=list)
    seconds: float = 0.0
    phase_s: dict = field(default_factory=dict)  # list, read, validate, transform, write


# --------------------------------------------------------------------------- paths
def partition_dir(data_root: str, d: dt.date) -> str:
    return os.path.join(data_root, "staging", "qsr_pos", f"business_date={d.isoformat()}")


def quarantine_dir(data_root: str, d: dt.date) -> str:
    return os.path.join(data_root, "quarantine", "qsr_pos", f"business_date={d.isoformat()}")


def list_folder(raw_root: str, folder: dt.date) -> tuple[list[tuple[str, str, os.stat_result]], list[str]]:
    """(path, store_id, stat) for valid file names, sorted; plus skipped names."""
    path = os.path.join(raw_root, "qsr_pos", folder.isoformat())
    try:
        entries = list(os.scandir(path))
    except FileNotFoundError:
        return [], []
    good, bad = [], []
    for e in entries:
        if not e.is_file() or e.name.startswith("."):
            continue
        stem, ext = os.path.splitext(e.name)
        if ext == ".csv" and STORE_RE.match(stem):
            good.append((e.path, stem, e.stat()))
        else:
            bad.append(e.path)
    good.sort(key=lambda x: x[1])
    return good, sorted(bad)


# --------------------------------------------------------------------------- read
_HEADER = ",".join(COLUMNS).encode()


def _read_one(path: str) -> pa.Table:
    try:
        t = pacsv.read_csv(path, read_options=_READ_OPTS, parse_options=_PARSE_OPTS, convert_options=_CONVERT_OPTS)
    except pa.ArrowInvalid as e:  # e.g. empty file: no header at all
        raise PartitionError(f"{path}: unreadable CSV, missing column {COLUMNS[0]!r}? ({e})") from e
    missing = [c for c in COLUMNS if c not in t.column_names]
    if missing:
        raise PartitionError(f"{path}: missing column {missing[0]!r} (header has {t.column_names})")
    return t.select(COLUMNS)


def _slurp(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def read_files(paths: list[str], threads: int | None = None) -> tuple[pa.Table, np.ndarray]:
    """Concatenate files in order; returns (table of strings, rows per file).

    Fast path: when every file starts with the canonical header and holds no
    quote character and no blank line, the bodies are concatenated and parsed
    by one multi-threaded pyarrow.csv call (per-file parsing costs ~0.5 ms of
    fixed overhead per file).  Anything else goes file by file, by column name.
    """
    use_threads = (threads or pa.cpu_count()) > 1
    blobs = [_slurp(p) for p in paths]
    parts, counts = [_HEADER + b"\n"], []
    fast = True
    for b in blobs:
        nl = b.find(b"\n")
        if nl < 0 or not b.startswith(_HEADER) or nl - len(_HEADER) > 1:  # header must be exact (LF or CRLF)
            fast = False
            break
        n_lines = b.count(b"\n", nl + 1)
        parts.append(memoryview(b)[nl + 1 :])
        if len(b) > nl + 1 and b[-1] != 10:  # last line without a newline
            parts.append(b"\n")
            n_lines += 1
        counts.append(n_lines)
    if fast and blobs:
        big = b"".join(parts)
        # Per-file row counts are newline counts.  Quoted newlines and blank lines can
        # only make the parser return *fewer* rows than newlines, so an exact total
        # proves the counts; a bare CR (also a line break for the parser) is excluded.
        if big.find(b"\r") < 0:
            t = pacsv.read_csv(
                pa.py_buffer(big),
                read_options=pacsv.ReadOptions(use_threads=use_threads, block_size=1 << 22),
                parse_options=_PARSE_OPTS,
                convert_options=_CONVERT_OPTS,
            )
            counts_arr = np.asarray(counts, dtype=np.int64)
            if t.num_rows == counts_arr.sum():
                return t, counts_arr
    tables = [_read_one(p) for p in paths]
    counts_arr = np.fromiter((t.num_rows for t in tables), dtype=np.int64, count=len(tables))
    if not tables:
        return pa.table({c: pa.array([], pa.string()) for c in COLUMNS}), counts_arr
    return pa.concat_tables(tables), counts_arr


# --------------------------------------------------------------------------- parse
def _shape_ok(col: pa.Array, pattern: str) -> pa.Array:
    return pc.match_substring_regex(col, pattern)


def _parse_int(col: pa.Array, minimum: int) -> tuple[pa.Array, pa.Array]:
    """(int64 values with 0 where invalid, bool ok-shape mask) -- fast path is one cast."""
    try:
        v = pc.cast(col, pa.int64())
        ok = pa.array(np.ones(len(col), bool))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        ok = _shape_ok(col, _INT_SHAPE)
        v = pc.cast(pc.if_else(ok, col, pa.scalar("0")), pa.int64())
    return v, pc.and_(ok, pc.greater_equal(v, minimum))


def _parse_dec(col: pa.Array, blank_is_zero: bool) -> tuple[pa.Array, pa.Array]:
    if blank_is_zero:
        col = pc.if_else(pc.equal(col, ""), pa.scalar("0"), col)
    try:
        v = pc.cast(col, PRICE_T)
        ok = pa.array(np.ones(len(col), bool))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        ok = _shape_ok(col, _DEC_SHAPE)
        v = pc.cast(pc.if_else(ok, col, pa.scalar("0")), PRICE_T)
    return v, pc.and_(ok, pc.greater_equal(v, pa.scalar(0, PRICE_T)))


def _parse_ts(col: pa.Array) -> pa.Array:
    """timestamp[s, UTC], null where not ISO 8601 with offset/Z or not a real date/time."""
    ts_t = pa.timestamp("s", tz="UTC")
    try:
        return pc.cast(col, ts_t)  # fast path: every value is valid
    except pa.ArrowInvalid:
        pass
    cand = pc.if_else(pc.match_substring_regex(col, _TS_SHAPE), col, pa.scalar(None, pa.string()))
    try:
        return pc.cast(cand, ts_t)
    except pa.ArrowInvalid:
        pass
    # right shape but an impossible day of month (2026-09-31, 2026-02-29): check the
    # few rows with day >= 29 numerically
    late = np.flatnonzero(pc.fill_null(pc.greater_equal(pc.utf8_slice_codeunits(cand, 8, 10), "29"), False).to_numpy(zero_copy_only=False))
    few = cand.take(pa.array(late))
    y, m, dd = (
        np.asarray(pc.cast(pc.utf8_slice_codeunits(few, i, j), pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)
        for i, j in ((0, 4), (5, 7), (8, 10))
    )
    dim = _DAYS_IN_MONTH[m] + ((m == 2) & (y % 4 == 0) & ((y % 100 != 0) | (y % 400 == 0)))
    bad = np.zeros(len(cand), bool)
    bad[late[dd > dim]] = True
    cand = pc.if_else(pa.array(bad), pa.scalar(None, pa.string()), cand)
    return pc.cast(cand, ts_t)


def business_dates(ts_utc: pa.Array) -> pa.Array:
    """Wall-clock local date of (ordered_at - 5 h) in America/Toronto."""
    local = pc.local_timestamp(ts_utc.cast(pa.timestamp("s", tz=TZ)))
    return pc.subtract(local, pa.scalar(BUSINESS_DAY_START, pa.duration("s"))).cast(pa.date32())


# --------------------------------------------------------------------------- publish
_libc = ctypes.CDLL(None, use_errno=True)
_renameat2 = getattr(_libc, "renameat2", None)
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def _fsync_path(path: str, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish_dir(tmp: str, final: str, durable: bool) -> None:
    """Atomically make ``tmp`` visible as ``final`` (replacing it if present)."""
    parent = os.path.dirname(final)
    if durable:
        for name in os.listdir(tmp):
            _fsync_path(os.path.join(tmp, name))
        _fsync_path(tmp, directory=True)
    try:
        os.rename(tmp, final)  # atomic when final does not exist
    except OSError as e:
        if e.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR):
            raise
        if _renameat2 is not None and _renameat2(_AT_FDCWD, tmp.encode(), _AT_FDCWD, final.encode(), _RENAME_EXCHANGE) == 0:
            shutil.rmtree(tmp)  # tmp now holds the old partition
        else:  # no RENAME_EXCHANGE: short window with no partition (documented)
            old = f"{tmp}.old"
            os.rename(final, old)
            os.rename(tmp, final)
            shutil.rmtree(old)
    if durable:
        _fsync_path(parent, directory=True)


def _write_dir(final: str, table: pa.Table, file_name: str, manifest: dict, durable: bool, dict_cols=True) -> None:
    parent = os.path.dirname(final)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".tmp-{os.path.basename(final)}-{uuid.uuid4().hex[:12]}")
    os.mkdir(tmp)
    try:
        pq.write_table(table, os.path.join(tmp, file_name), compression="snappy", use_dictionary=dict_cols)
        with open(os.path.join(tmp, "_SUCCESS"), "w") as fh:
            json.dump(manifest, fh)
        publish_dir(tmp, final, durable)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# --------------------------------------------------------------------------- transform
def stage_partition(
    raw_root: str,
    data_root: str,
    d: dt.date | str,
    *,
    suspicious_qty: int = 20,
    max_reject_share: float = 0.05,
    threads: int | None = None,
    durable: bool = True,
) -> PartitionStats:
    t_start = time.perf_counter()
    if isinstance(d, str):
        d = dt.date.fromisoformat(d)
    st = PartitionStats(business_date=d.isoformat())

    marks = [time.perf_counter()]
    files_d, bad_d = list_folder(raw_root, d)
    files_n, bad_n = list_folder(raw_root, d + dt.timedelta(days=1))
    files = files_d + files_n
    st.skipped_file_names = bad_d + bad_n
    st.files_read = len(files)
    st.bytes_read = sum(f[2].st_size for f in files)
    marks.append(time.perf_counter())
    raw, counts = read_files([f[0] for f in files], threads)
    marks.append(time.perf_counter())
    n = raw.num_rows
    st.rows_read = n

    # per-row file index and line number in its file (header is line 1)
    file_idx = np.repeat(np.arange(len(files), dtype=np.int32), counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    line_in_file = (np.arange(n, dtype=np.int64) - starts + 2).astype(np.int32)

    # ---- attribution first: only rows of business date d (or undatable rows of folder d)
    ts_all = _parse_ts(raw.column("ordered_at").combine_chunks())
    ok_ts_all = pc.is_valid(ts_all)
    mine = pc.or_(
        pc.fill_null(pc.equal(business_dates(ts_all), pa.scalar(d, pa.date32())), False),
        pc.and_(pc.invert(ok_ts_all), pa.array(file_idx < len(files_d))),
    )
    mine_np = mine.to_numpy(zero_copy_only=False)
    sub = raw.filter(mine)
    m = sub.num_rows
    st.rows_attributed = m
    file_idx, line_in_file = file_idx[mine_np], line_in_file[mine_np]
    ts, ok_ts = ts_all.filter(mine), ok_ts_all.filter(mine)
    stem = pc.take(pa.array([f[1] for f in files], pa.string()), pa.array(file_idx))

    # ---- validate and type the attributed rows -------------------------------------------
    c = {name: sub.column(name).combine_chunks() for name in COLUMNS}
    line_no, ok_line = _parse_int(c["line_no"], 1)
    qty, ok_qty = _parse_int(c["qty"], 1)
    unit_price, ok_price = _parse_dec(c["unit_price"], blank_is_zero=False)
    discount, ok_disc = _parse_dec(c["discount"], blank_is_zero=True)
    status = c["status"]
    checks = [  # in order: the first failing check names the reason
        (pc.not_equal(c["order_id"], ""), "order_id is empty"),
        (ok_line, "line_no is not an integer >= 1"),
        (pc.equal(c["store_id"], stem), "store_id does not match the file name"),
        (ok_ts, "ordered_at is not ISO 8601 with a UTC offset"),
        (pc.not_equal(c["sku"], ""), "sku is empty"),
        (ok_qty, "qty is not an integer >= 1"),
        (ok_price, "unit_price is not a decimal >= 0 with 2 dp"),
        (ok_disc, "discount is not blank or a decimal >= 0 with 2 dp"),
        (pc.is_in(status, value_set=pa.array(["COMPLETED", "VOIDED", "REFUNDED"])), "status is not COMPLETED, VOIDED or REFUNDED"),
    ]
    all_ok = checks[0][0]
    for ok, _ in checks[1:]:
        all_ok = pc.and_(all_ok, ok)
    rej_mask = pc.invert(all_ok)
    st.rejects = pc.sum(rej_mask).as_py() or 0

    src_names = pa.array([os.path.relpath(f[0], os.path.join(raw_root, "qsr_pos")) for f in files], pa.string())
    reason = pa.nulls(st.rejects, pa.string())
    for ok, why in reversed(checks):  # only over the (few) rejected rows
        reason = pc.if_else(ok.filter(rej_mask), reason, pa.scalar(why))
    rejects = pa.table(
        {
            **{name: c[name].filter(rej_mask) for name in COLUMNS},
            "reason": reason,
            "source_file": pc.take(src_names, pa.array(file_idx).filter(rej_mask)),
            "source_line": pa.array(line_in_file).filter(rej_mask),
        }
    )
    if m and st.rejects / m > max_reject_share:
        r0 = rejects.slice(0, 1).to_pylist()[0]
        raise PartitionError(
            f"business_date={d}: {st.rejects} of {m} rows rejected "
            f"({st.rejects / m:.2%} > {max_reject_share:.2%}); first: "
            f"{r0['source_file']} line {r0['source_line']}: {r0['reason']}"
        )

    marks.append(time.perf_counter())
    # ---- clean rows, dedupe keep-last, drop VOIDED ----------------------------------
    keep = all_ok
    keep_np = keep.to_numpy(zero_copy_only=False)
    good = pa.table(
        {
            "store_id": c["store_id"].filter(keep),
            "order_id": c["order_id"].filter(keep),
            "line_no": line_no.filter(keep).cast(pa.int32()),
            "ordered_at": ts.filter(keep),
            "sku": c["sku"].filter(keep),
            "qty": qty.filter(keep).cast(pa.int32()),
            "unit_price": unit_price.filter(keep),
            "discount": discount.filter(keep),
            "status": status.filter(keep),
            "source_file": pa.DictionaryArray.from_arrays(pa.array(file_idx[keep_np]), src_names),
            "source_line": pa.array(line_in_file[keep_np]),
        }
    )
    good = good.append_column("_i", pa.array(np.arange(good.num_rows, dtype=np.int64)))
    last = good.group_by(["store_id", "order_id", "line_no"], use_threads=False).aggregate([("_i", "max")])
    kept_idx = np.sort(last.column("_i_max").to_numpy())
    st.duplicates_dropped = good.num_rows - kept_idx.size
    if st.duplicates_dropped:
        good = good.take(pa.array(kept_idx))
    not_void = pc.not_equal(good.column("status"), "VOIDED")
    st.voided_dropped = good.num_rows - (pc.sum(not_void).as_py() or 0)
    good = good.filter(not_void).drop_columns(["_i"])

    # ---- derived columns ---------------------------------------------------------------
    gross = pc.subtract(pc.multiply(good.column("qty").cast(pa.decimal128(10, 0)), good.column("unit_price")), good.column("discount"))
    net = pc.if_else(pc.equal(good.column("status"), "REFUNDED"), pc.negate(gross), gross).cast(NET_T)
    out = pa.table(
        {
            "business_date": pa.array(np.full(good.num_rows, (d - dt.date(1970, 1, 1)).days, np.int32), pa.date32()),
            "store_id": good.column("store_id"),
            "order_id": good.column("order_id"),
            "line_no": good.column("line_no"),
            "ordered_at": good.column("ordered_at").cast(pa.timestamp("ms", tz="UTC")),
            "sku": good.column("sku"),
            "qty": good.column("qty"),
            "unit_price": good.column("unit_price"),
            "discount": good.column("discount"),
            "net_amount": net,
            "status": good.column("status"),
            "is_suspicious": pc.greater(good.column("qty"), suspicious_qty),
            "source_file": good.column("source_file"),
            "source_line": good.column("source_line"),
        }
    )
    st.rows_out = out.num_rows

    manifest = {
        "dataset": "stg_qsr_pos",
        "business_date": d.isoformat(),
        "cleaning_version": CLEANING_VERSION,
        "params": {"suspicious_qty": suspicious_qty, "max_reject_share": max_reject_share},
        "inputs": [[os.path.relpath(f[0], raw_root), f[2].st_size, f[2].st_mtime_ns] for f in files],
        "rows_out": st.rows_out,
        "rejects": st.rejects,
    }
    marks.append(time.perf_counter())
    qmanifest = {k: manifest[k] for k in ("business_date", "cleaning_version", "params", "rejects")}
    _write_dir(quarantine_dir(data_root, d), rejects, "rejects.parquet", qmanifest, durable)
    _write_dir(partition_dir(data_root, d), out, "part.parquet", manifest, durable, dict_cols=DICT_COLUMNS)
    marks.append(time.perf_counter())
    st.phase_s = {k: round(b - a, 4) for k, a, b in zip(("list", "read", "validate", "transform", "write"), marks, marks[1:])}
    st.seconds = time.perf_counter() - t_start
    return st


def publish_marker_only(data_root: str, d: dt.date | str) -> None:
    """No-op body for overhead measurements: publish a partition folder holding only ``_SUCCESS``."""
    if isinstance(d, str):
        d = dt.date.fromisoformat(d)
    final = partition_dir(data_root, d)
    parent = os.path.dirname(final)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".tmp-{os.path.basename(final)}-{uuid.uuid4().hex[:12]}")
    os.mkdir(tmp)
    open(os.path.join(tmp, "_SUCCESS"), "w").close()
    publish_dir(tmp, final, durable=False)


def warm_up() -> float:
    """Run the whole transform once on a 3-line raw zone in a temp folder.

    The first call in a process costs ~0.4 s more than later ones (lazy imports
    inside pyarrow, Acero and kernel initialisation, time-zone database). A
    scheduler that forks a fresh process per task pays it per task unless the
    parent warms up before forking.  Returns the seconds spent.
    """
    import tempfile

    t = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="qsr-warm-") as tmp:
        day = dt.date(2026, 1, 5)
        folder = os.path.join(tmp, "raw", "qsr_pos", day.isoformat())
        os.makedirs(folder)
        with open(os.path.join(folder, "W1.csv"), "w") as fh:
            fh.write(",".join(COLUMNS) + "\n"
                     "o1,1,W1,2026-01-05T12:00:00-05:00,S,1,1.00,,COMPLETED\n"
                     "o1,1,W1,2026-01-05T12:00:00-05:00,S,2,1.00,0.10,REFUNDED\n"
                     "o2,1,W1,2026-02-30T12:00:00-05:00,S,1,1.00,,VOIDED\n")
        stage_partition(os.path.join(tmp, "raw"), os.path.join(tmp, "data"), day, durable=False, max_reject_share=1.0)
    return time.perf_counter() - t


def stats_dict(st: PartitionStats) -> dict:
    return asdict(st)


if __name__ == "__main__":  # tiny CLI: python reference.py RAW DATA 2026-09-01 [2026-09-02 ...]
    import sys

    for day in sys.argv[3:]:
        print(json.dumps(stats_dict(stage_partition(sys.argv[1], sys.argv[2], day))))
