"""Vectorised type checks shared by the staging transforms (string columns in, boolean masks out)."""

from __future__ import annotations

import contextlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MONEY = pa.decimal128(18, 2)  # every money column of every dataset: cents, up to 16 digits before the point
MONEY_DIGITS = MONEY.precision - MONEY.scale  # the most digits before the point an amount may have: 16
RAW_LINE = "raw_line"  # a quarantine's column: the text of a row the CSV parser took out, null for the others
RAW_LINE_CHARS = 200  # of that text, at most
ISO_INSTANT = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)$"


def blank(col) -> pa.Array:
    """Empty or only whitespace (utf8_is_space is false for an empty string)."""
    return pc.or_(pc.equal(pc.utf8_length(col), 0), pc.utf8_is_space(col))


def is_money(col) -> pa.Array:
    """1 to 16 ASCII digits, optionally a dot and 1 or 2 more digits; a zero may have a minus sign (``-0.00``)."""
    return pa.array(money_cents(col)[0])


def money_cents(col) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of a string array: whether it is money (:func:`is_money`), its value in cents and the
    digits of its whole part (0 where it is not)."""
    col = as_array(col)
    n = len(col)
    ok, cents, whole = np.zeros(n, dtype=bool), np.zeros(n, np.int64), np.zeros(n, np.int64)
    layout = _text_layout(col)
    if layout is None:
        return ok, cents, whole
    offsets, lengths = layout
    at = np.flatnonzero((lengths >= 1) & (lengths <= MONEY_DIGITS + 4))  # a sign, 16 digits, a dot and 2 more
    if not len(at):
        return ok, cents, whole
    size = lengths[at]
    width = int(size.max())
    data = np.frombuffer(col.buffers()[2], np.uint8, count=int(offsets[-1]))
    padded = np.concatenate((np.zeros(width, np.uint8), data))  # the first row's record starts before it
    # each row's last ``width`` bytes: in ``padded`` they start where the row ends in ``data``
    by_position = np.ascontiguousarray(_records(padded, width, offsets[1:][at]).T)
    first = width - size  # a row's text is its record's bytes from ``first`` on
    bad, dots = np.zeros(len(at), dtype=bool), np.zeros(len(at), np.int8)
    fraction, value = np.zeros(len(at), np.int8), np.zeros(len(at), np.int64)
    signed = (by_position[first, np.arange(len(at))] == ord("-")) & (size > 1)  # a minus sign leads
    for j in range(width):
        byte = by_position[j]
        text = first <= j
        digit = byte - np.uint8(ord("0"))  # 0-9 for a digit, 10 and above for any other byte
        is_digit, dot = digit <= 9, (byte == ord(".")) & text
        bad |= text & ~(is_digit | dot | signed & (first == j))
        digit *= is_digit & text
        if dot.any():
            dots += dot
            fraction[dot] = width - 1 - j  # the digits after the dot
            value = np.where(dot, value, value * 10 + digit)
        else:
            value *= 10
            value += digit
    has_dot = dots == 1
    fraction[~has_dot] = 0
    digits = size - np.where(has_dot, fraction + 1, 0) - signed
    good = ~bad & (dots <= 1) & (digits >= 1) & (digits <= MONEY_DIGITS)
    good &= (~has_dot | (fraction >= 1) & (fraction <= 2)) & (~signed | (value == 0))  # -0.00 is 0, -1 is no money
    value *= _CENTS_PER_UNIT[np.minimum(fraction, 2)]
    ok[at[good]], cents[at[good]], whole[at[good]] = True, value[good], digits[good]
    return ok, cents, whole


_CENTS_PER_UNIT = np.array([100, 10, 1], np.int64)  # by the digits after the dot


def _text_layout(col: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
    """A string array's offsets and each row's length in bytes (-1 for a null); None when it holds no text."""
    if len(col) == 0 or col.buffers()[2] is None:
        return None
    offsets = np.frombuffer(col.buffers()[1], np.int32)[col.offset : col.offset + len(col) + 1]
    lengths = np.diff(offsets)
    if col.null_count:
        lengths[~col.is_valid().to_numpy(zero_copy_only=False)] = -1
    return offsets, lengths


def _records(data, width: int, starts: np.ndarray) -> np.ndarray:
    """The ``width`` bytes of ``data`` from each of ``starts`` on, a row each; no start within ``width`` of the end."""
    return np.ndarray((data.size - width + 1,), f"V{width}", data, 0, (1,))[starts].view(np.uint8).reshape(-1, width)


def count(mask: pa.Array) -> int:
    return pc.sum(mask.cast(pa.int64())).as_py() or 0


def first_failed(checks: list) -> pa.Array:
    """Per row, 1 + the index of the first check (a boolean mask, true = failed) it fails; 0 when none."""
    code = pa.scalar(0, pa.int8())
    for i in range(len(checks), 0, -1):  # walk backwards so that the first failing check wins
        code = pc.if_else(checks[i - 1], pa.scalar(i, pa.int8()), code)
    return code


def malformed_rejects(parsed, raw_columns: list[str], schema: pa.Schema) -> pa.Table:
    """Rows the CSV parser took out (``parsed.malformed``), as rejects, the line's text in ``raw_line``."""
    m = parsed.malformed
    fields = [parsed.split.get(n) for n, _, _ in m]
    cols = {c: pa.array([f[i] if f else None for f in fields], pa.string()) for i, c in enumerate(raw_columns)}
    cols.update(
        source_file=pa.array([parsed.source_file] * len(m), pa.string()),
        row_number=pa.array([n for n, _, _ in m], pa.int64()),
        reason=pa.array([r for _, r, _ in m], pa.string()),
    )
    cols[RAW_LINE] = pa.array([text[:RAW_LINE_CHARS] for _, _, text in m], pa.string())
    return pa.table(cols, schema=schema)


def not_int_ge1(col) -> pa.Array:
    """Not 1 to 9 ASCII digits with at least one of them non-zero (so >= 1 and fits int32)."""
    digits = pc.and_(pc.ascii_is_decimal(col), pc.less_equal(pc.utf8_length(col), 9))
    nonzero = pc.greater(pc.utf8_length(pc.utf8_ltrim(col, characters="0")), 0)
    return pc.invert(pc.and_(digits, nonzero))


def int_too_long(col, failed, digits: int = 9) -> pa.Array:
    """Per row: it ``failed`` its integer rule only for having more than ``digits`` digits."""
    return _too_many_digits(col, failed, rf"0*[1-9][0-9]{{{digits},}}")


def money_too_long(col, failed) -> pa.Array:
    """Per row: it ``failed`` :func:`is_money` only for having more than its 16 digits before the point."""
    return _too_many_digits(col, failed, rf"[0-9]{{{MONEY_DIGITS + 1},}}(\.[0-9]{{1,2}})?")


def _too_many_digits(col, failed, pattern: str) -> pa.Array:
    """Per row: it ``failed`` its type rule and matches ``pattern`` (only failed rows are matched)."""
    out = np.zeros(len(col), dtype=bool)
    at = np.flatnonzero(as_array(failed).to_numpy(zero_copy_only=False))
    if len(at):
        matched = pc.match_substring_regex(as_array(col).take(pa.array(at)), f"^{pattern}$")
        out[at] = pc.fill_null(matched, False).to_numpy(zero_copy_only=False)
    return pa.array(out)


def parse_instants(col) -> pa.Array:
    """UTC instants from ISO 8601 strings with an offset (or Z), floored to the second; null for anything
    else, a date or time that does not exist included."""
    col = as_array(col)
    ok, seconds = _iso_seconds(col, 19)
    failed = np.flatnonzero(~ok)
    if len(failed):
        # rare: a fraction of a second; dropping its digits floors the instant
        retry = col.take(pa.array(failed))
        iso = pc.fill_null(pc.match_substring_regex(retry, ISO_INSTANT), False).to_numpy(zero_copy_only=False)
        whole_ok, whole = _iso_seconds(as_array(pc.replace_substring_regex(retry, r"\.\d+", "")), 19)
        ok[failed], seconds[failed] = whole_ok & iso, whole
    return pa.array(seconds, _INSTANT, mask=None if ok.all() else ~ok)


def parse_dates(col) -> pa.Array:
    """date32 from ``YYYY-MM-DD`` strings; null for anything else, a date that does not exist included."""
    ok, seconds = _iso_seconds(as_array(col), 10)
    return pa.array(seconds // 86400, pa.int64(), mask=None if ok.all() else ~ok).cast(pa.int32()).cast(pa.date32())


_INSTANT = pa.timestamp("s", tz="UTC")
# not Arrow's strptime, which takes 2026-9-15 and lets days run over (docs/performance.md, "Parsing")
_DAYS_IN_MONTH = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], np.int16)


def _iso_seconds(col: pa.Array, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row: whether it is exactly an ISO date (``width`` 10) or an instant with an offset (19), every
    field in range, and its seconds since the epoch (else 0)."""
    keep, seconds = np.zeros(len(col), dtype=bool), np.zeros(len(col), np.int64)
    layout = _text_layout(col)
    if layout is None:
        return keep, seconds
    offsets, lengths = layout
    sized = (lengths == 10) if width == 10 else (lengths == 20) | (lengths == 24) | (lengths == 25)
    at = np.flatnonzero(sized)
    if not len(at):
        return keep, seconds
    starts, size = offsets[:-1][at], lengths[at]
    data = col.buffers()[2]
    head = _records(data, width, starts)  # every text is at least ``width`` bytes long: no read past the data
    ok = (head[:, 4] == ord("-")) & (head[:, 7] == ord("-"))

    def number(*positions: int) -> np.ndarray:
        value = np.zeros(len(at), np.int32)
        for i in positions:
            digit = head[:, i] - np.uint8(ord("0"))  # 0-9 for a digit, 10 and above for any other byte
            ok[:] &= digit <= 9
            value *= 10
            value += digit
        return value

    year, month, day = number(0, 1, 2, 3), number(5, 6), number(8, 9)
    month_ok = (month >= 1) & (month <= 12)
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    last = _DAYS_IN_MONTH[np.where(month_ok, month, 0)] + (month_ok & (month == 2) & leap)
    ok &= month_ok & (day >= 1) & (day <= last) & (year >= 1)  # no year 0: Python's dates start at 1
    # days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil; year >= 1)
    y = year - (month <= 2)
    era, yoe = y // 400, y % 400
    doy = (153 * ((month + 9) % 12) + 2) // 5 + day - 1
    value = (era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468).astype(np.int64) * 86400
    if width == 19:
        ok &= (head[:, 10] == ord("T")) & (head[:, 13] == ord(":")) & (head[:, 16] == ord(":"))
        hour, minute, second = number(11, 12), number(14, 15), number(17, 18)
        ok &= (hour <= 23) & (minute <= 59) & (second <= 59)
        value += hour * 3600 + minute * 60 + second
        # the offset ends the text: Z (20 bytes in all), +HH:MM (25) or +HHMM (24)
        tail = _records(data, 8, starts + size - 8)
        long, zulu = size == 25, size == 20
        sign = np.where(long, tail[:, 2], tail[:, 3])
        h1, h2 = np.where(long, tail[:, 3], tail[:, 4]), np.where(long, tail[:, 4], tail[:, 5])
        h1, h2, m1, m2 = (b.astype(np.int32) - ord("0") for b in (h1, h2, tail[:, 6], tail[:, 7]))
        hours, minutes = h1 * 10 + h2, m1 * 10 + m2
        digits = (h1 >= 0) & (h1 <= 9) & (h2 >= 0) & (h2 <= 9) & (m1 >= 0) & (m1 <= 9) & (m2 >= 0) & (m2 <= 9)
        offset_ok = digits & ((sign == ord("+")) | (sign == ord("-"))) & (hours <= 23) & (minutes <= 59)
        offset_ok &= ~long | (tail[:, 5] == ord(":"))
        ok &= np.where(zulu, tail[:, 7] == ord("Z"), offset_ok)
        east = np.where(zulu | ~offset_ok, 0, (hours * 3600 + minutes * 60) * np.where(sign == ord("-"), -1, 1))
        value -= east  # local time minus its offset: UTC
    keep[at[ok]] = True
    seconds[at[ok]] = value[ok]
    return keep, seconds


def as_array(x) -> pa.Array:
    """``x`` as one array (a chunked array's only chunk without a copy)."""
    if not isinstance(x, pa.ChunkedArray):
        return x
    return x.chunk(0) if x.num_chunks == 1 else x.combine_chunks()


def reject_schema(raw_columns: list[str]) -> pa.Schema:
    """Quarantine rows: where they came from, why, the raw values as strings, and :data:`RAW_LINE`."""
    head = [("source_file", pa.string()), ("row_number", pa.int64()), ("reason", pa.string())]
    return pa.schema(head + [(c, pa.string()) for c in raw_columns] + [(RAW_LINE, pa.string())])


def file_rejects(
    parsed,
    code: pa.Array,
    bad: pa.Array,
    reasons: list[str],
    schema: pa.Schema,
    *,
    malformed: bool = True,
    detail: pa.Array | None = None,
) -> pa.Table:
    """The rows of one parsed file that ``bad`` marks, with ``reasons[code]`` or a row's ``detail``; then,
    if ``malformed``, the rows the parser took out."""
    raw_columns = schema.names[3:-1]
    n = count(bad)
    reason = pc.take(pa.array(reasons), pc.filter(code, bad))
    if detail is not None:
        reason = pc.coalesce(pc.filter(detail, bad), reason)
    cols = {
        "source_file": pa.repeat(pa.scalar(parsed.source_file, pa.string()), n),
        "row_number": pc.filter(parsed.row_numbers, bad),
        "reason": reason,
    }
    cols.update({c: pc.filter(parsed.table[c], bad) for c in raw_columns})
    cols[RAW_LINE] = pa.nulls(n, pa.string())
    rejected = pa.table(cols, schema=schema)
    if parsed.malformed and malformed:  # in file order, the rows the parser took out among the others
        rejected = pa.concat_tables([rejected, malformed_rejects(parsed, raw_columns, schema)]).sort_by("row_number")
    return rejected


class TotalOutOfRange(ValueError):
    """A sum of valid amounts that its output column's decimal type cannot hold: fails the partition."""


def fit_total(
    sums: pa.Array | pa.ChunkedArray, kind: pa.DataType, keys: pa.Array | pa.ChunkedArray, what: str, where: str = ""
):
    """``sums`` cast to ``kind``; one that does not fit raises :class:`TotalOutOfRange` naming its keys."""
    with contextlib.suppress(pa.ArrowInvalid):
        return pc.cast(sums, kind)
    limit = pa.scalar(10 ** (kind.precision - kind.scale), pa.decimal128(38, 0))
    big = pc.greater_equal(
        pc.abs(pc.cast(sums, pa.decimal128(38, kind.scale))), pc.cast(limit, pa.decimal128(38, kind.scale))
    )
    over = [
        f"{k} ({v})" for k, v in zip(pc.filter(keys, big).to_pylist(), pc.filter(sums, big).to_pylist(), strict=True)
    ]
    raise TotalOutOfRange(
        f"{what}: the sum of {', '.join(over[:10])}{' ...' if len(over) > 10 else ''} does not fit {kind} "
        f"(below {limit.as_py():,} in absolute value); each amount summed is valid, their total is not"
        f"{where}. The partition is not written; the previous one stays."
    )
