"""Deterministic, realistic sample raw zone for Daybreak (contract: docs/raw-zone.md).

``generate()`` writes, for business dates ``start .. start+days-1``:

* ``qsr_pos/<D>/<store_id>.csv``: one file per store (``S001`` ...) and folder date ``D`` in ``start .. start+days``.
  All stores are in America/Toronto. Stores have different sizes (lognormal around ``mean_lines_per_store`` lines
  per business day), weekends are busier, orders peak at breakfast (~08:00), lunch (~12:00) and dinner (~18:30),
  and some orders are placed between 00:00 and 04:59 local: they belong to the previous business day but sit in
  the next day's folder (the folder is the local wall date of ``ordered_at``). ``ordered_at`` carries the real
  Toronto UTC offset at that instant (``-04:00`` / ``-05:00``; both sides of the fall-back hour occur), about 0.5 %
  of lines are written in UTC with ``Z``. 30 menu items with fixed prices, 1-5 lines per order, qty mostly 1-3 and
  about 0.05 % bulk lines (24, 30, 50: above the suspicious threshold), a few discounts, ~2 % VOIDED and ~1 %
  REFUNDED orders. Dirt: ~0.3 % duplicated lines (re-written later in the same file, a fifth of them re-sent as
  VOIDED) and ~0.1 % malformed rows (qty ``abc``, negative unit_price, empty order_id, status ``PENDING``,
  ``ordered_at`` without offset, line_no 0), capped at 1 % of any file.
* ``hotel_bookings/<D>/<hotel_id>.csv``: for every hotel of the hotels list and every date, 20-60 CREATED /
  MODIFIED / CANCELLED events whose local date at the hotel is ``D`` (some at 00:00:xx and 23:59:xx).
* ``ads/<E>/ads.csv``: exports ``E = start+1 .. start+days``, each restating dates ``E-7 .. E-1`` (not before
  ``start``) for 8 campaigns; conversions and conversion_value grow with newer exports, the rest is fixed. One
  campaign-day has spend 0.

One QSR file (``late_file_relpath()``) is held back unless ``include_late``: ``write_late_file()`` drops it in later,
byte-identical. A file is never written over: ``generate()`` refuses, writing nothing, when any file it would
write exists (:class:`SampleExists`), and every file is created exclusively. Every random draw comes from
``numpy.random.default_rng([seed, source, ...])`` keyed per (source, store/hotel/campaign, day), so equal
arguments give byte-identical files and one file can be written alone.
``seed`` must be a non-negative integer.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

# the contract's column lists, from the transforms that read them
from tasks.transforms.ads import RAW_COLUMNS as ADS_COLUMNS
from tasks.transforms.hotels import RAW_COLUMNS as HOTEL_COLUMNS
from tasks.transforms.qsr_check import RAW_COLUMNS as QSR_COLUMNS

QSR_TZ = "America/Toronto"
HOTELS_CSV = Path(__file__).resolve().parent.parent / "config" / "hotels.csv"

# rng stream tags (second element of every seed key)
_QSR, _HOTEL, _ADS, _DIRT, _STORE, _LATE = range(6)

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
_DOW_FACTOR = [0.92, 0.92, 0.92, 0.92, 1.05, 1.20, 1.10]  # Mon..Sun, averages ~1
# order-time mixture, in hours after 05:00 local: breakfast, lunch, dinner (normal); daytime, late night (uniform)
_MIX_W = [0.18, 0.34, 0.28, 0.15, 0.05]
_MIX_A = np.array([3.0, 7.0, 13.5, 0.0, 19.0]) * 3600  # mean (normal) or low bound (uniform)
_MIX_B = np.array([0.75, 0.9, 1.1, 19.0, 24.0]) * 3600  # sd (normal) or high bound (uniform)
_MIX_UNIFORM = np.array([False, False, False, True, True])
_DUP_SHARE, _RESENT_VOID_SHARE, _BAD_SHARE, _BAD_CAP = 0.003, 0.2, 0.001, 0.01
_BAD_QTY, _BAD_PRICE, _BAD_ORDER, _BAD_STATUS, _BAD_TS, _BAD_LINE = range(1, 7)


# ---------------------------------------------------------------------------------------------------- public API
def store_id(index: int, stores: int) -> str:
    """Store id of the 1-based ``index``: ``S001`` ... (wider when ``stores`` > 999)."""
    return f"S{index:0{max(3, len(str(stores)))}d}"


def late_file_relpath(start: date, days: int, stores: int, seed: int) -> str:
    """Relative path (``qsr_pos/<D>/<store>.csv``) of the designated late file: mid-range folder, seeded store."""
    folder = start + timedelta(days=days // 2)
    index = int(np.random.default_rng([seed, _LATE]).integers(1, stores + 1))
    return f"qsr_pos/{folder.isoformat()}/{store_id(index, stores)}.csv"


def generate(
    raw_root: str | Path,
    start: date,
    days: int,
    stores: int = 50,
    seed: int = 1,
    mean_lines_per_store: int = 400,
    include_late: bool = False,
    hotels_csv: Path = HOTELS_CSV,
) -> dict:
    """Write a raw zone for business dates ``start .. start+days-1`` (all three sources); return a summary.

    Unless ``include_late``, the designated late QSR file is not written (see ``write_late_file``). Raises
    :class:`SampleExists`, writing nothing, when a file it would write is there already.
    """
    if days < 1 or stores < 1:
        raise ValueError("days and stores must be >= 1")
    root = Path(raw_root)
    late = late_file_relpath(start, days, stores, seed)
    skip = set() if include_late else {late}
    there = [rel for rel in planned_files(start, days, stores, hotels_csv) if rel not in skip and (root / rel).exists()]
    if there:
        raise SampleExists(root, there)
    qsr_files = qsr_lines = 0
    for index in range(1, stores + 1):
        files, lines = _qsr_store(root, start, days, stores, seed, mean_lines_per_store, index, None, skip)
        qsr_files, qsr_lines = qsr_files + files, qsr_lines + lines
    hotel_files, hotel_events = _hotels(root, start, days, seed, hotels_csv)
    ads_files, ads_rows = _ads(root, start, days, seed)
    return {
        "qsr_files": qsr_files,
        "qsr_lines": qsr_lines,
        "hotel_files": hotel_files,
        "hotel_events": hotel_events,
        "ads_files": ads_files,
        "ads_rows": ads_rows,
        "late_file": late,
        "late_file_written": include_late,
    }


class SampleExists(FileExistsError):
    """Files the sample would write are in the raw zone already: a raw file is never changed."""

    def __init__(self, root: Path, relpaths: list[str]):
        self.root, self.relpaths = root, relpaths
        more = f" (and {len(relpaths) - 1} more of the files it would write)" if len(relpaths) > 1 else ""
        super().__init__(
            f"{root / relpaths[0]} exists{more}: the sample never writes over a raw file; "
            "give it a new or empty folder (--raw-root)"
        )


def planned_files(start: date, days: int, stores: int, hotels_csv: Path = HOTELS_CSV) -> list[str]:
    """Every file ``generate()`` writes (the late file included), as paths below the raw root."""
    folders = [start + timedelta(days=i) for i in range(days + 1)]
    qsr = [f"qsr_pos/{f.isoformat()}/{store_id(i, stores)}.csv" for i in range(1, stores + 1) for f in folders]
    hotels = pd.read_csv(hotels_csv, dtype=str)["hotel_id"]
    booked = [f"hotel_bookings/{d.isoformat()}/{h}.csv" for h in hotels for d in folders[:-1]]
    return [*qsr, *booked, *(f"ads/{d.isoformat()}/ads.csv" for d in folders[1:])]


def write_late_file(
    raw_root: str | Path, start: date, days: int, stores: int = 50, seed: int = 1, mean_lines_per_store: int = 400
) -> Path:
    """Write the designated late QSR file, byte-identical to ``generate(include_late=True)``'s; return its path."""
    rel = late_file_relpath(start, days, stores, seed)
    _, folder_name, file_name = rel.split("/")
    index = int(file_name.removesuffix(".csv")[1:])
    folder = date.fromisoformat(folder_name)
    _qsr_store(Path(raw_root), start, days, stores, seed, mean_lines_per_store, index, folder, set())
    return Path(raw_root) / rel


# ---------------------------------------------------------------------------------------------------- QSR
def _qsr_store(
    root: Path, start: date, days: int, stores: int, seed: int, mean: int, index: int, only: date | None, skip: set
) -> tuple[int, int]:
    """Write the folders of one store (all, or only folder ``only``); return (files written, lines written)."""
    sid = store_id(index, stores)
    size = _store_size(seed, index)
    first, last = 0, days - 1
    if only is not None:  # folder D holds the tail of business day D-1 and the head of D
        first, last = max(0, (only - start).days - 1), min(days - 1, (only - start).days)
    business = [start + timedelta(days=i) for i in range(first, last + 1)]
    parts = [_qsr_day(seed, index, d, pos, mean * size * _DOW_FACTOR[d.weekday()]) for pos, d in enumerate(business)]
    lines = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    folders = [start + timedelta(days=i) for i in range(days + 1)] if only is None else [only]
    wanted = [f for f in folders if f"qsr_pos/{f.isoformat()}/{sid}.csv" not in skip]
    take, codes, bounds = _qsr_dirt(seed, index, lines["wall"], wanted)
    text = _qsr_text(sid, business, {k: v[take] for k, v in lines.items()}, codes)
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int32)[text.offset : text.offset + len(text) + 1]
    data = memoryview(text.buffers()[2])
    header = (",".join(QSR_COLUMNS) + "\n").encode()
    for folder, a, b in zip(wanted, bounds[:-1], bounds[1:], strict=True):
        path = root / "qsr_pos" / folder.isoformat() / f"{sid}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "xb") as fh:  # never over a file that is there
            fh.write(header)
            fh.write(data[offsets[a] : offsets[b]])
    return len(wanted), int(bounds[-1])


def _store_size(seed: int, index: int) -> float:
    """Store size factor: lognormal with mean ~1, clipped to 0.25 .. 4."""
    rng = np.random.default_rng([seed, _STORE, index])
    return float(np.clip(rng.lognormal(-0.5 * 0.55**2, 0.55), 0.25, 4.0))


def _qsr_day(seed: int, index: int, d: date, pos: int, expected_lines: float) -> dict[str, np.ndarray]:
    """Lines of one store and business day ``d`` (orders between d 05:00 and d+1 04:59:59 local), in time order."""
    rng = np.random.default_rng([seed, _QSR, index, d.toordinal()])
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
        rng = np.random.default_rng([seed, _DIRT, index, folder.toordinal()])
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


def _create(path: Path, data: bytes) -> None:
    """Write a new file; one that is there already is never written over (FileExistsError)."""
    with open(path, "xb") as fh:
        fh.write(data)


# ---------------------------------------------------------------------------------------------------- hotels
def _hotels(root: Path, start: date, days: int, seed: int, hotels_csv: Path) -> tuple[int, int]:
    """Write every hotel's extract for every date (the hotels of ``hotels_csv``); return (files, events)."""
    hotels = pd.read_csv(hotels_csv, dtype=str)
    files = events = 0
    for hi, (hotel_id, tz) in enumerate(zip(hotels["hotel_id"], hotels["timezone"], strict=True)):
        books: dict[str, list] = {}  # booking_id -> [arrival, departure, rooms, rate_cents, channel]
        counter = [0]
        for i in range(days):
            day = start + timedelta(days=i)
            rows = _hotel_day(seed, hi, hotel_id, tz, day, books, counter)
            path = root / "hotel_bookings" / day.isoformat() / f"{hotel_id}.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            _create(path, ("\n".join([",".join(HOTEL_COLUMNS), *rows]) + "\n").encode())
            files, events = files + 1, events + len(rows)
    return files, events


def _hotel_times(rng: np.random.Generator, tz: str, day: date, n: int) -> list[str]:
    """Sorted local event times of ``day`` in ``tz`` with offsets; sometimes one at 00:00:xx and one at 23:59:xx."""
    secs = np.sort(rng.integers(60, 86340, n))
    if rng.random() < 0.5:
        secs[0] = rng.integers(0, 60)
    if rng.random() < 0.5:
        secs[-1] = 86340 + rng.integers(0, 60)
    naive = pd.DatetimeIndex(np.datetime64(day, "s") + secs.astype("timedelta64[s]"))
    local = naive.tz_localize(tz, ambiguous=rng.random(n) < 0.5, nonexistent="shift_forward")
    local = local[np.argsort(local.asi8, kind="stable")]
    return [ts.isoformat() for ts in local]


def _hotel_day(seed: int, hi: int, hotel_id: str, tz: str, day: date, books: dict, counter: list) -> list[str]:
    """Event rows of one hotel and local date; updates ``books`` (the bookings on the books) in place."""
    rng = np.random.default_rng([seed, _HOTEL, hi, day.toordinal()])
    n = int(rng.integers(20, 61))
    times = _hotel_times(rng, tz, day, n)
    kind = rng.choice(3, n, p=[0.65, 0.22, 0.13])
    lead, nights, shift = rng.integers(0, 121, n), rng.integers(1, 8, n), rng.integers(-3, 4, n)
    rooms, rate = rng.choice([1, 2, 3], n, p=[0.75, 0.18, 0.07]), rng.integers(12000, 45001, n)
    channel, rescale = rng.choice(["direct", "ota", "gds"], n, p=[0.4, 0.45, 0.15]), rng.uniform(0.9, 1.1, n)
    pool = [bid for bid, b in books.items() if b[0] > day]  # earlier bookings with a future arrival
    targets = list(rng.permutation(pool)) if pool else []
    rows = []
    for j in range(n):
        if kind[j] == 0 or not targets:
            counter[0] += 1
            bid, event = f"{hotel_id}-{counter[0]:06d}", "CREATED"
            arrival = day + timedelta(days=int(lead[j]))
            books[bid] = [arrival, arrival + timedelta(days=int(nights[j])), int(rooms[j]), int(rate[j]), channel[j]]
        elif kind[j] == 1:
            bid, event = str(targets.pop()), "MODIFIED"
            old = books[bid]
            arrival = max(day, old[0] + timedelta(days=int(shift[j])))
            new_rate = int(np.clip(round(old[3] * rescale[j]), 12000, 45000))
            books[bid] = [arrival, arrival + timedelta(days=int(nights[j])), int(rooms[j]), new_rate, old[4]]
        else:
            bid, event = str(targets.pop()), "CANCELLED"
        b = books[bid] if event != "CANCELLED" else books.pop(bid)
        rows.append(f"{bid},{hotel_id},{times[j]},{event},{b[0]},{b[1]},{b[2]},{b[3] // 100}.{b[3] % 100:02d},{b[4]}")
    return rows


# ---------------------------------------------------------------------------------------------------- ads
_CAMPAIGNS = [  # id, channel, daily impressions, ctr, cpc (CAD), conversion rate, value per conversion (CAD)
    ("C01", "google", 40000, 0.035, 0.85, 0.060, 18.0),
    ("C02", "google", 25000, 0.042, 1.10, 0.050, 22.0),
    ("C03", "google", 12000, 0.028, 0.70, 0.045, 15.0),
    ("C04", "meta", 60000, 0.012, 0.55, 0.030, 16.0),
    ("C05", "meta", 35000, 0.015, 0.60, 0.035, 20.0),
    ("C06", "meta", 20000, 0.010, 0.45, 0.025, 14.0),
    ("C07", "tiktok", 80000, 0.008, 0.30, 0.020, 12.0),
    ("C08", "tiktok", 30000, 0.009, 0.35, 0.020, 13.0),
]
_REPORTED = [0.6, 0.78, 0.88, 0.94, 0.97, 0.99, 1.0]  # share of final conversions reported at export age 1..7


def _ads_truth(seed: int, start: date, days: int) -> dict[tuple[date, int], tuple[int, int, int, int, int]]:
    """Final (impressions, clicks, spend cents, conversions, value cents) per (date, campaign index)."""
    zero = (start + timedelta(days=days // 2), len(_CAMPAIGNS) - 1)  # paused campaign-day: spend 0
    truth = {}
    for i in range(days):
        d = start + timedelta(days=i)
        for ci, (_, _, impr, ctr, cpc, cvr, aov) in enumerate(_CAMPAIGNS):
            rng = np.random.default_rng([seed, _ADS, ci, d.toordinal()])
            shown = int(impr * rng.lognormal(0, 0.25) * _DOW_FACTOR[d.weekday()])
            clicks = int(rng.binomial(shown, ctr))
            spend = int(round(clicks * cpc * rng.lognormal(0, 0.1) * 100))
            conv = int(rng.binomial(clicks, cvr))
            value = int(round(conv * aov * rng.lognormal(0, 0.2) * 100))
            truth[(d, ci)] = (0, 0, 0, 0, 0) if (d, ci) == zero else (shown, clicks, spend, conv, value)
    return truth


def _ads(root: Path, start: date, days: int, seed: int) -> tuple[int, int]:
    """Write exports start+1 .. start+days, each restating E-7 .. E-1 (not before start); return (files, rows)."""
    truth = _ads_truth(seed, start, days)
    files = total = 0
    for e in range(1, days + 1):
        export = start + timedelta(days=e)
        rows = [",".join(ADS_COLUMNS)]
        for age in range(min(7, e), 0, -1):
            d = export - timedelta(days=age)
            for ci, (cid, channel, *_) in enumerate(_CAMPAIGNS):
                shown, clicks, spend, conv, value = truth[(d, ci)]
                conv_now = int(np.floor(conv * _REPORTED[age - 1] + 1e-9))
                value_now = value * conv_now // conv if conv else 0
                money = f"{spend // 100}.{spend % 100:02d}", f"{value_now // 100}.{value_now % 100:02d}"
                rows.append(f"{d},{cid},{channel},{shown},{clicks},{money[0]},{conv_now},{money[1]}")
        path = root / "ads" / export.isoformat() / "ads.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        _create(path, ("\n".join(rows) + "\n").encode())
        files, total = files + 1, total + len(rows) - 1
    return files, total
