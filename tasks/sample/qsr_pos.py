"""The sample's POS files ``qsr_pos/<D>/<store_id>.csv``: Toronto stores, lognormal sizes, busier weekends,
meal-time peaks, real UTC offsets (~0.5 % in ``Z``). Dirt: ~0.3 % duplicated lines, ~0.1 % malformed rows,
~0.05 % bulk lines, ~2 % VOIDED and ~1 % REFUNDED orders; one file (``late_file_relpath()``) arrives late."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tasks.sample.common import DIRT, DOW_FACTOR, LATE, QSR, STORE, Request, create_file
from tasks.transforms.qsr_check import RAW_COLUMNS as QSR_COLUMNS

QSR_TZ = "America/Toronto"

# (sku, price in cents, popularity weight)
MENU = [
    ("COFFEE-S", 199, 9),
    ("COFFEE-M", 229, 10),
    ("COFFEE-L", 259, 7),
    ("LATTE", 449, 6),
    ("TEA", 189, 4),
    ("ICED-CAP", 379, 5),
    ("OJ", 299, 3),
    ("MUFFIN", 249, 5),
    ("DONUT", 219, 6),
    ("BAGEL", 279, 4),
    ("BREAKFAST-SAND", 549, 6),
    ("HASHBROWN", 229, 5),
    ("OATMEAL", 399, 2),
    ("BURGER", 899, 8),
    ("CHEESEBURGER", 949, 7),
    ("DOUBLE-BURGER", 1199, 4),
    ("CHICKEN-SAND", 979, 6),
    ("NUGGETS-6", 699, 5),
    ("NUGGETS-10", 999, 3),
    ("WRAP", 849, 4),
    ("SALAD", 1049, 3),
    ("SOUP", 549, 3),
    ("FRIES-S", 299, 6),
    ("FRIES-L", 429, 7),
    ("POUTINE", 749, 5),
    ("ONION-RINGS", 449, 3),
    ("SOFT-DRINK", 249, 8),
    ("MILKSHAKE", 549, 3),
    ("COOKIE", 199, 3),
    ("SUNDAE", 399, 2),
]
_SKU = pa.array([m[0] for m in MENU])
_PRICE = pa.array([f"{m[1] // 100}.{m[1] % 100:02d}" for m in MENU])
_NEG_PRICE = pa.array([f"-{m[1] // 100}.{m[1] % 100:02d}" for m in MENU])
_SKU_P = np.array([m[2] for m in MENU], dtype=float) / sum(m[2] for m in MENU)
_DISCOUNTS = pa.array(["", "0.50", "1.00", "2.00"])
_DISCOUNT_P = [0.93, 0.04, 0.02, 0.01]
_STATUS_NL = pa.array(["COMPLETED\n", "VOIDED\n", "REFUNDED\n"])  # status is the last column: carries the newline
_VOIDED = 1
_LINES_PER_ORDER = np.arange(1, 6)
_LINES_P = [0.42, 0.28, 0.15, 0.10, 0.05]
_MEAN_LINES_PER_ORDER = float(np.dot(_LINES_PER_ORDER, _LINES_P))
# order-time mixture, in hours after 05:00 local: breakfast, lunch, dinner (normal); daytime, late night (uniform)
_MIX_W = [0.18, 0.34, 0.28, 0.15, 0.05]
_MIX_A = np.array([3.0, 7.0, 13.5, 0.0, 19.0]) * 3600  # mean (normal) or low bound (uniform)
_MIX_B = np.array([0.75, 0.9, 1.1, 19.0, 24.0]) * 3600  # sd (normal) or high bound (uniform)
_MIX_UNIFORM = np.array([False, False, False, True, True])
_DUP_SHARE, _RESENT_VOID_SHARE, _BAD_SHARE, _BAD_CAP = 0.003, 0.2, 0.001, 0.01
_BAD_QTY, _BAD_PRICE, _BAD_ORDER, _BAD_STATUS, _BAD_TS, _BAD_LINE = range(1, 7)


def store_id(index: int, stores: int) -> str:
    """Store id of the 1-based ``index``: ``S001`` ... (wider when ``stores`` > 999)."""
    return f"S{index:0{max(3, len(str(stores)))}d}"


def late_file_relpath(start: date, days: int, stores: int, seed: int) -> str:
    """Relative path (``qsr_pos/<D>/<store>.csv``) of the designated late file: mid-range folder, seeded store."""
    folder = start + timedelta(days=days // 2)
    index = int(np.random.default_rng([seed, LATE]).integers(1, stores + 1))
    return f"qsr_pos/{folder.isoformat()}/{store_id(index, stores)}.csv"


def planned(req: Request) -> list[str]:
    """Every file :func:`write` writes (the late file included), below the raw root."""
    folders = [req.start + timedelta(days=i) for i in range(req.days + 1)]
    return [f"qsr_pos/{f.isoformat()}/{store_id(i, req.stores)}.csv" for i in range(1, req.stores + 1) for f in folders]


def write(req: Request) -> dict:
    """Every store's folders ``start .. start+days`` but the files of ``req.skip``; the counts written."""
    files = lines = 0
    for index in range(1, req.stores + 1):
        args = (req.root, req.start, req.days, req.stores, req.seed, req.mean_lines_per_store, index, None, req.skip)
        wrote, written = qsr_store(*args)
        files, lines = files + wrote, lines + written
    return {"qsr_files": files, "qsr_lines": lines}


def qsr_store(
    root: Path, start: date, days: int, stores: int, seed: int, mean: int, index: int, only: date | None, skip: set
) -> tuple[int, int]:
    """Write the folders of one store (all, or only folder ``only``); return (files written, lines written)."""
    sid = store_id(index, stores)
    size = _store_size(seed, index)
    first, last = 0, days - 1
    if only is not None:  # folder D holds the tail of business day D-1 and the head of D
        first, last = max(0, (only - start).days - 1), min(days - 1, (only - start).days)
    business = [start + timedelta(days=i) for i in range(first, last + 1)]
    parts = [_qsr_day(seed, index, d, pos, mean * size * DOW_FACTOR[d.weekday()]) for pos, d in enumerate(business)]
    lines = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    folders = [start + timedelta(days=i) for i in range(days + 1)] if only is None else [only]
    wanted = [f for f in folders if f"qsr_pos/{f.isoformat()}/{sid}.csv" not in skip]
    take, codes, bounds = _qsr_dirt(seed, index, lines["wall"], wanted)
    text = _qsr_text(sid, business, {k: v[take] for k, v in lines.items()}, codes)
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int32)[text.offset : text.offset + len(text) + 1]
    data = memoryview(text.buffers()[2])
    header = (",".join(QSR_COLUMNS) + "\n").encode()
    for folder, a, b in zip(wanted, bounds[:-1], bounds[1:], strict=True):
        create_file(root / "qsr_pos" / folder.isoformat() / f"{sid}.csv", header + bytes(data[offsets[a] : offsets[b]]))
    return len(wanted), int(bounds[-1])


def _store_size(seed: int, index: int) -> float:
    """Store size factor: lognormal with mean ~1, clipped to 0.25 .. 4."""
    rng = np.random.default_rng([seed, STORE, index])
    return float(np.clip(rng.lognormal(-0.5 * 0.55**2, 0.55), 0.25, 4.0))


def _qsr_day(seed: int, index: int, d: date, pos: int, expected_lines: float) -> dict[str, np.ndarray]:
    """Lines of one store and business day ``d`` (orders between d 05:00 and d+1 04:59:59 local), in time order."""
    rng = np.random.default_rng([seed, QSR, index, d.toordinal()])
    n = int(rng.poisson(expected_lines / _MEAN_LINES_PER_ORDER))
    comp = rng.choice(len(_MIX_W), n, p=_MIX_W)
    z, u = rng.standard_normal(n), rng.random(n)
    a, b = _MIX_A[comp], _MIX_B[comp]
    secs = np.clip(np.where(_MIX_UNIFORM[comp], a + u * (b - a), a + b * z), 0, 86399).astype(np.int64)
    wall_naive = np.datetime64(d, "s") + np.timedelta64(5 * 3600, "s") + secs.astype("timedelta64[s]")
    local = pd.DatetimeIndex(wall_naive).tz_localize(QSR_TZ, ambiguous=rng.random(n) < 0.5, nonexistent="shift_forward")
    utc = local.tz_convert("UTC").tz_localize(None).as_unit("s").asi8
    wall = local.tz_localize(None).as_unit("s").asi8
    order = np.argsort(utc, kind="stable")
    utc, wall = utc[order], wall[order]
    k = rng.choice(_LINES_PER_ORDER, n, p=_LINES_P)
    status = rng.choice(3, n, p=[0.97, 0.02, 0.01])
    n_lines = int(k.sum())
    of = np.repeat(np.arange(n), k)
    qty = rng.choice([1, 2, 3], n_lines, p=[0.78, 0.16, 0.06])
    bulk = rng.random(n_lines) < 0.0005
    qty[bulk] = rng.choice([24, 30, 50], int(bulk.sum()))
    return {
        "utc": utc[of],
        "wall": wall[of],
        "day": np.full(n_lines, pos, dtype=np.int32),
        "seq": of + 1,
        "line_no": np.arange(n_lines) - np.repeat(np.cumsum(k) - k, k) + 1,
        "sku": rng.choice(len(MENU), n_lines, p=_SKU_P),
        "qty": qty,
        "discount": rng.choice(len(_DISCOUNT_P), n_lines, p=_DISCOUNT_P),
        "status": status[of],
        "zulu": rng.random(n_lines) < 0.005,
    }


def _qsr_dirt(seed: int, index: int, wall: np.ndarray, folders: list[date]) -> tuple:
    """Per folder file: row order with duplicates (index into lines), malformation codes, file row bounds."""
    folder_of = wall // 86400  # wall seconds -> local wall date (days since epoch); sorted
    epoch = date(1970, 1, 1).toordinal()
    takes, codes, bounds = [], [], [0]
    for folder in folders:
        day = folder.toordinal() - epoch
        a, b = np.searchsorted(folder_of, [day, day + 1])
        rng = np.random.default_rng([seed, DIRT, index, folder.toordinal()])
        src = rng.choice(b - a, int(min(rng.binomial(b - a, _DUP_SHARE), b - a)), replace=False)
        after = src + 1 + np.floor(rng.random(len(src)) * (b - a - src)).astype(np.int64)
        keys = np.concatenate([np.arange(b - a, dtype=float), after - 0.5])
        rows = np.concatenate([np.arange(a, b), src + a])[np.argsort(keys, kind="stable")]
        code = np.zeros(len(rows), dtype=np.int8)
        resent = np.concatenate([np.zeros(b - a, bool), rng.random(len(src)) < _RESENT_VOID_SHARE])
        code[resent[np.argsort(keys, kind="stable")]] = -1  # -1: re-sent line that says VOIDED
        n_bad = min(int(rng.binomial(len(rows), _BAD_SHARE)), int(len(rows) * _BAD_CAP))
        code[rng.choice(len(rows), n_bad, replace=False)] = rng.integers(1, 7, n_bad)
        takes.append(rows)
        codes.append(code)
        bounds.append(bounds[-1] + len(rows))
    return np.concatenate(takes), np.concatenate(codes), np.array(bounds)


def _qsr_text(sid: str, business: list[date], lines: dict[str, np.ndarray], codes: np.ndarray) -> pa.StringArray:
    """CSV text of the lines, one string per line ending in a newline (no quoting: no value needs it)."""
    status = np.where(codes == -1, _VOIDED, lines["status"])
    prefixes = pa.array([f"{sid}-{d:%Y%m%d}-" for d in business])
    seq = pc.utf8_lpad(pc.cast(pa.array(lines["seq"]), pa.string()), 5, "0")
    cols = {
        "order_id": pc.binary_join_element_wise(pc.take(prefixes, pa.array(lines["day"])), seq, ""),
        "line_no": pc.cast(pa.array(lines["line_no"]), pa.string()),
        "ordered_at": _ordered_at(lines),
        "sku": pc.take(_SKU, pa.array(lines["sku"])),
        "qty": pc.cast(pa.array(lines["qty"]), pa.string()),
        "unit_price": pc.take(_PRICE, pa.array(lines["sku"])),
        "discount": pc.take(_DISCOUNTS, pa.array(lines["discount"])),
        "status": pc.take(_STATUS_NL, pa.array(status)),
    }
    bad = {
        _BAD_QTY: ("qty", "abc"),
        _BAD_ORDER: ("order_id", ""),
        _BAD_STATUS: ("status", "PENDING\n"),
        _BAD_LINE: ("line_no", "0"),
    }
    for code, (name, value) in bad.items():
        mask = codes == code
        if mask.any():
            cols[name] = pc.replace_with_mask(cols[name], pa.array(mask), pa.array([value] * int(mask.sum())))
    mask = codes == _BAD_TS
    if mask.any():  # wall time without offset
        naive = _strftime(lines["wall"][mask])
        cols["ordered_at"] = pc.replace_with_mask(cols["ordered_at"], pa.array(mask), naive)
    mask = codes == _BAD_PRICE
    if mask.any():  # the menu price, negated
        negative = pc.take(_NEG_PRICE, pa.array(lines["sku"][mask]))
        cols["unit_price"] = pc.replace_with_mask(cols["unit_price"], pa.array(mask), negative)
    return pc.binary_join_element_wise(*[cols[c] if c != "store_id" else sid for c in QSR_COLUMNS], ",")


def _ordered_at(lines: dict[str, np.ndarray]) -> pa.StringArray:
    """ISO 8601 local wall time with its UTC offset; ``zulu`` lines in UTC with ``Z``."""
    offset = lines["wall"] - lines["utc"]
    uniq, inv = np.unique(offset, return_inverse=True)
    suffix = pc.take(pa.array([_fmt_offset(int(o)) for o in uniq], pa.string()), pa.array(inv.ravel()))
    text = pc.binary_join_element_wise(_strftime(lines["wall"]), suffix, "")
    zulu = lines["zulu"]
    if zulu.any():
        utc = pc.binary_join_element_wise(_strftime(lines["utc"][zulu]), "Z", "")
        text = pc.replace_with_mask(text, pa.array(zulu), utc)
    return text


def _strftime(seconds: np.ndarray) -> pa.StringArray:
    return pc.strftime(pa.array(seconds.astype("datetime64[s]")), format="%Y-%m-%dT%H:%M:%S")


def _fmt_offset(seconds: int) -> str:
    sign = "-" if seconds < 0 else "+"
    hours, minutes = divmod(abs(seconds) // 60, 60)
    return f"{sign}{hours:02d}:{minutes:02d}"
