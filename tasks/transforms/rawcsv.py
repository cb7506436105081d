"""Parse raw CSV files (bytes) into tables of strings with Arrow's CSV parser, keeping bad rows (a wrong
field count, a control character, a long field) instead of failing."""

from __future__ import annotations

import bisect
import csv
import functools
import io
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from tasks.contract import CONTROL_CHARACTER, escape_control
from tasks.transforms.rawcsv_lines import (
    RawSchemaError,
    bare_cr,
    body_lines,
    by_line,
    check_header,
    misquoted_lines,
    row_numbers,
    undecodable,
)

MAX_FIELD = 1 << 20  # bytes: a longer field rejects its row (docs/raw-zone.md, "Ground rules")


@dataclass(frozen=True)
class ParsedCsv:
    """Rows of one file as strings, with their row numbers (the header is row 1)."""

    source_file: str
    table: pa.Table  # every expected column as string, in contract order
    row_numbers: pa.Array  # int64, one per table row
    malformed: list[tuple[int, str, str]]  # (row number, reason, raw text) of rows the parser took out
    # of those, the rows it could split: row number -> their contract columns' values, escaped
    split: dict[int, tuple[str, ...]] = field(default_factory=dict)


def file_stem(path: str) -> str:
    """The id a raw file's name gives: ``qsr_pos/2026-09-15/S001.csv`` -> ``S001``."""
    return path.rsplit("/", 1)[-1].removesuffix(".csv")


def parse_csv(data: bytes, source_file: str, columns: list[str]) -> ParsedCsv:
    """Parse CSV bytes whose header holds every contract column once; bad rows (the wrong field count, a stray
    quote, a control character, a field too long) come back in ``malformed``, and a file not UTF-8 raises
    :class:`RawSchemaError`."""
    header = check_header(data, source_file, columns)
    if b"\n" not in data and b"\r" not in data:  # a header without a line end: the parser sees no row at all
        data += b"\n"
    try:
        try:
            table, malformed = _read(data, header, columns)
        except pa.ArrowInvalid as exc:  # a row longer than the parser's block: the file in one block
            if "straddling" not in str(exc):
                raise
            table, malformed = _read(data, header, columns, block_size=len(data) + 1)
    except (pa.ArrowInvalid, pa.ArrowKeyError) as exc:  # KeyError: a header the parser reads otherwise
        cause = undecodable(data) or str(exc)
        raise RawSchemaError(f"{source_file}: cannot be read as UTF-8 CSV ({cause}). Fix or re-send the file.") from exc
    records = table.num_rows + len(malformed)
    if records == body_lines(data) and not (malformed and bare_cr(data)):
        numbers = row_numbers(records, malformed)  # one record a line: record numbers are line numbers
        taken = {n for n, _, _ in malformed}
        misquoted = [m for m in misquoted_lines(data, header) if m[0] not in taken] if b'"' in data else []
        stray = {n for n, _, _ in misquoted}
        malformed = sorted(malformed + misquoted) if misquoted else malformed
    else:  # a record over several lines, an empty line, or a bare CR beside a malformed row
        numbers, malformed, stray = by_line(data, source_file, header, records, malformed)
    if stray:  # rows the parser read although a quote in them is wrong: they cannot be split
        keep = pc.invert(pc.is_in(numbers, value_set=pa.array(sorted(stray), pa.int64())))
        table, numbers = table.filter(keep), numbers.filter(keep)
    return _without_control(ParsedCsv(source_file, table, numbers, malformed), columns)


def parse_csv_many(files: Iterable[tuple[bytes, str]], columns: list[str]) -> list[ParsedCsv]:
    """``parse_csv`` of every (bytes, source_file): plain files with the same header parsed as one buffer."""
    files = list(files)
    out: list[ParsedCsv | None] = [None] * len(files)
    groups: dict[bytes, list[int]] = {}
    for i, (data, name) in enumerate(files):
        check_header(data, name, columns)
        end = data.find(b"\n")
        if end >= 0 and _plain_text(data, end + 1):
            groups.setdefault(data[:end], []).append(i)
        else:
            out[i] = parse_csv(data, name, columns)
    for header_line, members in groups.items():
        group = [files[i] for i in members]
        buffer, counts = _join_bodies(header_line, [data for data, _ in group])
        try:
            parsed = _parse_batch(buffer, counts, group, columns)
        except (pa.ArrowInvalid, pa.ArrowKeyError):  # e.g. invalid UTF-8 in one file: one by one to name it
            parsed = [parse_csv(data, name, columns) for data, name in group]
        del buffer
        for i, p in zip(members, parsed, strict=True):
            out[i] = p
    return out


def _join_bodies(header_line: bytes, datas: list[bytes]) -> tuple[bytes, list[int]]:
    """One buffer: the header line, then each file's body ending with a line end; and the body line counts."""
    pieces, counts = [header_line + b"\n"], []
    for data in datas:  # memoryview slices: the bodies are copied once, into the joined buffer
        start = data.find(b"\n") + 1
        pieces.append(memoryview(data)[start:])
        if len(data) > start and not data.endswith(b"\n"):
            pieces.append(b"\n")
        counts.append(data.count(b"\n", start) + (len(data) > start and not data.endswith(b"\n")))
    return b"".join(pieces), counts


def _plain_text(data: bytes, start: int, step: int = 1 << 20) -> bool:
    """From ``start`` on: no quote, no empty line, no control byte but line feeds (a line, a record)."""
    if data.find(b'"', start) >= 0 or data.find(b"\x7f", start) >= 0 or data.startswith(b"\n", start):
        return False
    view = np.frombuffer(data, np.uint8)[start:]
    for first in range(0, len(view), step):
        part = view[max(first - 1, 0) : first + step]  # one byte of overlap: an empty line across slices
        newline = part == 10
        if np.count_nonzero(part < 0x20) != np.count_nonzero(newline) or (newline[1:] & newline[:-1]).any():
            return False
    return True


def _parse_batch(
    buffer: bytes, counts: list[int], files: list[tuple[bytes, str]], columns: list[str]
) -> list[ParsedCsv]:
    """Parse the joined ``buffer`` of plain ``files`` (``counts`` body lines each) and split it back."""
    header = check_header(files[0][0], files[0][1], columns)
    table, malformed = _read(buffer, header, columns)
    starts = np.concatenate([[0], np.cumsum(counts)]).tolist()  # lines before each file's body
    bad: list[list[tuple[int, str, str]]] = [[] for _ in files]
    for number, reason, text in malformed:  # batch row numbers: header = 1, first body line = 2
        i = bisect.bisect_right(starts, number - 2) - 1
        bad[i].append((number - starts[i], reason, text))
    # a field over MAX_FIELD: its file's rows are checked one by one, as with a control character
    clean = not any(pc.any(mask).as_py() for mask in map(_long_mask, table.columns) if mask is not None)
    if clean:
        table = table.select(columns)
    out, offset = [], 0
    for (_, name), n, rejected in zip(files, counts, bad, strict=True):
        valid = n - len(rejected)
        parsed = ParsedCsv(name, table.slice(offset, valid), row_numbers(n, rejected), rejected)
        out.append(parsed if clean else _without_control(parsed, columns))
        offset += valid
    return out


def _read(
    data: bytes, header: list[str], columns: list[str], block_size: int | None = None
) -> tuple[pa.Table, list[tuple[int, str, str]]]:
    malformed: list[tuple[int, str, str]] = []

    def on_invalid(row: pcsv.InvalidRow) -> str:
        reason = f"row has {row.actual_columns} fields, header has {row.expected_columns}"
        malformed.append(
            (row.number or -1, reason, escape_control(row.text))
        )  # the quarantine holds no control character
        return "skip"

    table = pcsv.read_csv(
        pa.BufferReader(data),
        # 1 MiB blocks (docs/performance.md, "Parsing"); a longer row: the file in one block
        read_options=pcsv.ReadOptions(use_threads=False, **({"block_size": block_size} if block_size else {})),
        parse_options=pcsv.ParseOptions(newlines_in_values=True, invalid_row_handler=on_invalid),
        convert_options=pcsv.ConvertOptions(  # every column: extra ones are checked too (UTF-8, control characters)
            column_types={c: pa.string() for c in header},
            include_columns=header,
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )
    return table, malformed


def _without_control(parsed: ParsedCsv, columns: list[str]) -> ParsedCsv:
    """``parsed`` with its contract columns only, the rows with a control character or a field longer than
    :data:`MAX_FIELD` moved to ``malformed`` (their values in ``split``)."""
    table = parsed.table
    long = {name: _long_mask(table[name]) for name in table.column_names}
    long = {name: mask for name, mask in long.items() if mask is not None}
    masks = {name: _control_mask(table[name]) for name in table.column_names}
    masks = {name: mask for name, mask in masks.items() if mask is not None}
    bad = functools.reduce(pc.or_, [*long.values(), *masks.values()]) if masks or long else None
    if bad is None or not pc.any(bad).as_py():
        return ParsedCsv(parsed.source_file, table.select(columns), parsed.row_numbers, parsed.malformed, parsed.split)
    flagged, split = [], dict(parsed.split)
    for i in np.flatnonzero(bad.to_numpy(zero_copy_only=False)).tolist():
        split[parsed.row_numbers[i].as_py()] = tuple(_cut(escape_control(table[c][i].as_py())) for c in columns)
        too_long = next((n for n, mask in long.items() if mask[i].as_py()), None)
        if too_long is not None:
            size = len(table[too_long][i].as_py().encode())
            reason = (
                f"{too_long} is {size:,} bytes long; the contract allows at most {MAX_FIELD:,} bytes (1 MiB) in a field"
            )
            text = csv_line(_cut(escape_control(table[c][i].as_py())) for c in table.column_names)
            flagged.append((parsed.row_numbers[i].as_py(), reason, text))
            continue
        name = next(n for n, mask in masks.items() if mask[i].as_py())
        value = table[name][i].as_py()
        at = re.search(CONTROL_CHARACTER, value)
        reason = (
            f"{name} holds a control character (U+{ord(at.group()):04X} at character {at.start() + 1}); "
            "the contract forbids U+0000..U+001F and U+007F in any field"
        )
        text = csv_line(escape_control(table[c][i].as_py()) for c in table.column_names)
        flagged.append((parsed.row_numbers[i].as_py(), reason, text))
    keep = pc.invert(bad)
    return ParsedCsv(
        parsed.source_file,
        table.select(columns).filter(keep),
        pc.filter(parsed.row_numbers, keep),
        sorted(parsed.malformed + flagged),
        split,
    )


def csv_line(values) -> str:
    """``values`` as one CSV line, a field quoted where it holds a comma or a quote: it splits as it was read."""
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(values)
    return out.getvalue()


def _long_mask(col: pa.ChunkedArray) -> pa.Array | None:
    """Per row, whether the value is longer than :data:`MAX_FIELD` bytes; None when none can be."""
    if sum(chunk.buffers()[2].size for chunk in col.chunks if chunk.buffers()[2] is not None) <= MAX_FIELD:
        return None
    return pc.greater(pc.binary_length(col), MAX_FIELD).combine_chunks()


def _cut(text: str, keep: int = 200) -> str:
    """A field as the quarantine keeps it: a long one cut to its first ``keep`` characters."""
    return text if len(text) <= MAX_FIELD else f"{text[:keep]}... ({len(text):,} characters)"


def _control_mask(col: pa.ChunkedArray) -> pa.Array | None:
    """Per row, whether the value holds a control character; None when no value can."""
    if not any(_holds_control_byte(chunk) for chunk in col.chunks):
        return None
    return pc.match_substring_regex(col, CONTROL_CHARACTER).combine_chunks()


def _holds_control_byte(chunk: pa.Array, step: int = 1 << 20) -> bool:
    """Whether the string data buffer behind ``chunk`` holds a byte 0x00-0x1F or 0x7F."""
    data = chunk.buffers()[2]
    if data is None:
        return False
    view = np.frombuffer(data, np.uint8)
    for start in range(0, len(view), step):
        part = view[start : start + step]
        if ((part < 0x20) | (part == 0x7F)).any():
            return True
    return False
