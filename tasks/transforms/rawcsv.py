"""Parse raw CSV files (bytes) into tables of strings, keeping bad rows instead of failing."""

from __future__ import annotations

import bisect
import contextlib
import csv
import functools
import io
import re
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from tasks.contract import CONTROL_CHARACTER, escape_control

MAX_FIELD = 1 << 20  # bytes: a longer field rejects its row (docs/raw-zone.md, "Ground rules")


class RawSchemaError(ValueError):
    """A raw file whose header does not carry the contract's columns. Fails the partition."""


@dataclass(frozen=True)
class ParsedCsv:
    """Rows of one file as strings, with their row numbers (the header is row 1)."""

    source_file: str
    table: pa.Table  # every expected column as string, in contract order
    row_numbers: pa.Array  # int64, one per table row
    malformed: list[tuple[int, str, str]]  # (row number, reason, raw text) of rows that could not be split


def file_stem(path: str) -> str:
    """The id a raw file's name gives (the contract's ``<store or hotel id>.csv``), from a bare name or a
    path: ``qsr_pos/2026-09-15/S001.csv`` -> ``S001``. The one spelling of the rule."""
    return path.rsplit("/", 1)[-1].removesuffix(".csv")


def parse_csv(data: bytes, source_file: str, columns: list[str]) -> ParsedCsv:
    """Parse CSV bytes with a header row. Every contract column must be in the header, once; extra
    columns are checked (UTF-8, control characters) but not returned.

    Rows with the wrong number of fields, and rows with a control character in any field, are not
    dropped: they come back in ``malformed`` (the latter with their text escaped). A file that is not
    UTF-8 anywhere raises :class:`RawSchemaError` naming the byte offset and line.
    """
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
        cause = _undecodable(data) or str(exc)
        raise RawSchemaError(f"{source_file}: cannot be read as UTF-8 CSV ({cause}). Fix or re-send the file.") from exc
    records = table.num_rows + len(malformed)
    if records == _body_lines(data) and not (malformed and _bare_cr(data)):
        numbers = _row_numbers(records, malformed)  # one record a line: record numbers are line numbers
    else:  # a record over several lines, an empty line, or a bare CR beside a malformed row
        numbers, malformed = _by_line(data, source_file, records, malformed)
    return _without_control(ParsedCsv(source_file, table, numbers, malformed), columns)


def parse_csv_many(files: Iterable[tuple[bytes, str]], columns: list[str]) -> list[ParsedCsv]:
    """``parse_csv`` of every (bytes, source_file), with the same results, in fewer parser calls.

    Files whose header line is byte-identical and whose body is plain (one record per line: no quote,
    no carriage return, no empty line) are parsed as one buffer and split back by line counts; any
    other file, or a batch the parser refuses as a whole, is parsed on its own. A batch whose joined
    buffer holds no quote, no empty line and no control byte but its line ends (the usual case) is
    checked once, as a whole, and needs no per-column control-character scan.
    """
    files = list(files)
    out: list[ParsedCsv | None] = [None] * len(files)
    groups: dict[bytes, list[int]] = {}
    for i, (data, name) in enumerate(files):
        check_header(data, name, columns)
        end = data.find(b"\n")
        if end >= 0:
            groups.setdefault(data[:end], []).append(i)
        else:
            out[i] = parse_csv(data, name, columns)
    for header_line, members in groups.items():
        joined = _join_bodies(header_line, [files[i][0] for i in members])
        if _plain_text(joined[0]):
            batches = [(members, joined, True)]
        else:  # some file is not plain, or holds a control character: sort them out one by one
            plain = [i for i in members if _plain(files[i][0], files[i][0].find(b"\n") + 1)]
            for i in set(members) - set(plain):
                out[i] = parse_csv(files[i][0], files[i][1], columns)
            batches = [(plain, _join_bodies(header_line, [files[i][0] for i in plain]), False)] if plain else []
        del joined
        for batch, (buffer, counts), clean in batches:
            group = [files[i] for i in batch]
            try:
                parsed = _parse_batch(buffer, counts, group, columns, clean)
            except (pa.ArrowInvalid, pa.ArrowKeyError):  # e.g. invalid UTF-8 in one file: one by one to name it
                parsed = [parse_csv(data, name, columns) for data, name in group]
            for i, p in zip(batch, parsed, strict=True):
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


def _plain_text(buffer: bytes, step: int = 1 << 20) -> bool:
    """No quote, no empty line, and no byte 0x00-0x1F or 0x7F but line feeds (so no carriage return and
    no control character either): every line is one record of plain fields. Scanned in 1 MiB slices."""
    if b'"' in buffer or b"\x7f" in buffer:
        return False
    view = np.frombuffer(buffer, np.uint8)
    for start in range(0, len(view), step):
        part = view[max(start - 1, 0) : start + step]  # one byte of overlap: an empty line across slices
        newline = part == 10
        if np.count_nonzero(part < 0x20) != np.count_nonzero(newline) or (newline[1:] & newline[:-1]).any():
            return False
    return True


def _plain(data: bytes, start: int) -> bool:
    """One record per line from ``start`` on: no quote, no carriage return, no empty line."""
    return (
        data.find(b'"', start) < 0
        and data.find(b"\r", start) < 0
        and data.find(b"\n\n", start) < 0
        and not data.startswith(b"\n", start)
    )


def _parse_batch(
    buffer: bytes, counts: list[int], files: list[tuple[bytes, str]], columns: list[str], clean: bool
) -> list[ParsedCsv]:
    """Parse the joined ``buffer`` of plain ``files`` (``counts`` body lines each) and split it back;
    ``clean``: the buffer holds no control character (see ``_plain_text``), so no field needs a scan."""
    header = check_header(files[0][0], files[0][1], columns)
    table, malformed = _read(buffer, header, columns)
    starts = np.concatenate([[0], np.cumsum(counts)]).tolist()  # lines before each file's body
    bad: list[list[tuple[int, str, str]]] = [[] for _ in files]
    for number, reason, text in malformed:  # batch row numbers: header = 1, first body line = 2
        i = bisect.bisect_right(starts, number - 2) - 1
        bad[i].append((number - starts[i], reason, text))
    if clean and any(pc.any(mask).as_py() for mask in map(_long_mask, table.columns) if mask is not None):
        clean = False  # a field over MAX_FIELD: its file's rows are checked one by one, as with a control character
    if clean:
        table = table.select(columns)
    out, offset = [], 0
    for (_, name), n, rejected in zip(files, counts, bad, strict=True):
        valid = n - len(rejected)
        parsed = ParsedCsv(name, table.slice(offset, valid), _row_numbers(n, rejected), rejected)
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
        # 1 MiB blocks: larger ones parse no faster, peak higher (a longer row: the file in one block)
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


def _body_lines(data: bytes) -> int:
    """Lines after the header, as the parser ends them (LF, CR LF or a lone CR), empty ones included."""
    ends = data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")
    return ends + (not data.endswith((b"\n", b"\r"))) - 1


def _bare_cr(data: bytes) -> bool:
    return data.count(b"\r") != data.count(b"\r\n")


def _by_line(
    data: bytes, source_file: str, records: int, malformed: list[tuple[int, str, str]]
) -> tuple[pa.Array, list[tuple[int, str, str]]]:
    """Row numbers that are line numbers, and every line accounted for, where records and lines differ.

    A record the parser read over several lines holds a line break inside a quoted field, which the
    contract forbids: the record is rejected (for its field count here, or later for the control
    character), and each further line it took is rejected too, with its own text, so that an unbalanced
    quote costs as many rejected rows as the lines it swallowed (the reject share sees them all) and the
    quarantine holds every line. Empty lines are no rows. The record boundaries come from Python's csv
    reader, which splits quoted fields as Arrow's parser does; where the two disagree the file is refused.
    """
    # the file's lines, split at LF, CR LF and a lone CR, as the parser splits them
    lines = list(io.StringIO(data.decode("utf-8-sig"), newline=""))
    spans = []  # (first line, last line) of each record
    with _no_field_limit():
        # Python's csv refuses a NUL, which ends no record: it reads a stand-in
        reader = csv.reader(line.replace("\0", "\x01") for line in lines)
        next(reader, None)  # the header
        end = reader.line_num
        for record in reader:
            if record:  # an empty line is no record (the parser skips it too)
                spans.append((end + 1, reader.line_num))
            end = reader.line_num
    if len(spans) != records:
        raise RawSchemaError(
            f"{source_file}: its quoting cannot be split into rows unambiguously ({records} rows to the CSV "
            f"parser, {len(spans)} to a second reader). Fix or re-send the file; the previous partition is kept."
        )

    def line_text(number: int) -> str:
        return escape_control(lines[number - 1].rstrip("\r\n"))

    bad = {number - 2: reason for number, reason, _ in malformed}  # record index -> the parser's reason
    lone_cr_splits = b"\n" in data  # in a file of lone-CR line ends (old Mac style) a CR is its line end
    numbers, out = [], []
    for index, (first, last) in enumerate(spans):
        over = f"lines {first}-{last}" + (" (to the end of the file)" if last == len(lines) else "")
        if index in bad:
            reason = bad[index]
            if last > first:
                reason += f"; a quoted field runs over {over}: unbalanced quote? (no line break is allowed in a field)"
            elif lone_cr_splits and lines[first - 1].endswith("\r"):  # a lone CR amid LF line ends
                reason += "; the line ends in a lone carriage return (U+000D), a control character the contract forbids"
            out.append((first, reason, line_text(first)))
        else:
            numbers.append(first)
        for number in range(first + 1, last + 1):
            out.append((number, f"inside the quoted field of row {first}, which runs over {over}", line_text(number)))
    return pa.array(numbers, pa.int64()), sorted(out)


@contextlib.contextmanager
def _no_field_limit():
    """Python's csv reader without its 128 KiB field limit (an unbalanced quote can swallow a whole file)."""
    was = csv.field_size_limit(sys.maxsize)
    try:
        yield
    finally:
        csv.field_size_limit(was)


def _row_numbers(records: int, malformed: list[tuple[int, str, str]]) -> pa.Array:
    """Row numbers (header = 1) of the records that parsed, given ``records`` in all."""
    numbers = np.arange(2, records + 2, dtype="int64")
    if malformed:
        numbers = numbers[~np.isin(numbers, [n for n, _, _ in malformed])]
    return pa.array(numbers)


def _without_control(parsed: ParsedCsv, columns: list[str]) -> ParsedCsv:
    """``parsed`` with its contract columns only, and the rows holding a control character in any
    field (extra columns included), or a field longer than :data:`MAX_FIELD` bytes, moved to
    ``malformed``: reason naming the column, text escaped (a long field cut)."""
    table = parsed.table
    long = {name: _long_mask(table[name]) for name in table.column_names}
    long = {name: mask for name, mask in long.items() if mask is not None}
    masks = {name: _control_mask(table[name]) for name in table.column_names}
    masks = {name: mask for name, mask in masks.items() if mask is not None}
    bad = functools.reduce(pc.or_, [*long.values(), *masks.values()]) if masks or long else None
    if bad is None or not pc.any(bad).as_py():
        return ParsedCsv(parsed.source_file, table.select(columns), parsed.row_numbers, parsed.malformed)
    flagged = []
    for i in np.flatnonzero(bad.to_numpy(zero_copy_only=False)).tolist():
        too_long = next((n for n, mask in long.items() if mask[i].as_py()), None)
        if too_long is not None:
            size = len(table[too_long][i].as_py().encode())
            reason = (
                f"{too_long} is {size:,} bytes long; the contract allows at most {MAX_FIELD:,} bytes (1 MiB) in a field"
            )
            text = ",".join(_cut(escape_control(table[c][i].as_py())) for c in table.column_names)
            flagged.append((parsed.row_numbers[i].as_py(), reason, text))
            continue
        name = next(n for n, mask in masks.items() if mask[i].as_py())
        value = table[name][i].as_py()
        at = re.search(CONTROL_CHARACTER, value)
        reason = (
            f"{name} holds a control character (U+{ord(at.group()):04X} at character {at.start() + 1}); "
            "the contract forbids U+0000..U+001F and U+007F in any field"
        )
        text = ",".join(escape_control(table[c][i].as_py()) for c in table.column_names)
        flagged.append((parsed.row_numbers[i].as_py(), reason, text))
    keep = pc.invert(bad)
    return ParsedCsv(
        parsed.source_file,
        table.select(columns).filter(keep),
        pc.filter(parsed.row_numbers, keep),
        sorted(parsed.malformed + flagged),
    )


def _long_mask(col: pa.ChunkedArray) -> pa.Array | None:
    """Per row, whether the value is longer than :data:`MAX_FIELD` bytes; None when none can be (the
    column's data is not that long in all)."""
    if sum(chunk.buffers()[2].size for chunk in col.chunks if chunk.buffers()[2] is not None) <= MAX_FIELD:
        return None
    return pc.greater(pc.binary_length(col), MAX_FIELD).combine_chunks()


def _cut(text: str, keep: int = 200) -> str:
    """A field as the quarantine keeps it: a long one cut to its first ``keep`` characters."""
    return text if len(text) <= MAX_FIELD else f"{text[:keep]}... ({len(text):,} characters)"


def _control_mask(col: pa.ChunkedArray) -> pa.Array | None:
    """Per row, whether the value holds a control character; None when no value can (the usual case,
    found from the raw bytes of the column without a regular expression)."""
    if not any(_holds_control_byte(chunk) for chunk in col.chunks):
        return None
    return pc.match_substring_regex(col, CONTROL_CHARACTER).combine_chunks()


def _holds_control_byte(chunk: pa.Array, step: int = 1 << 20) -> bool:
    """Whether the string data buffer behind ``chunk`` holds a byte 0x00-0x1F or 0x7F (scanned in 1 MiB
    slices, so the scan costs no more memory than a slice; a sliced chunk scans its whole buffer)."""
    data = chunk.buffers()[2]
    if data is None:
        return False
    view = np.frombuffer(data, np.uint8)
    for start in range(0, len(view), step):
        part = view[start : start + step]
        if ((part < 0x20) | (part == 0x7F)).any():
            return True
    return False


def _undecodable(data: bytes) -> str | None:
    """Where ``data`` stops being UTF-8: byte offset and line; None when it is UTF-8."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return f"invalid UTF-8 at byte {exc.start} (line {line}): {data[exc.start : exc.start + 4]!r}"
    return None


def check_header(data: bytes, source_file: str, columns: list[str]) -> list[str]:
    """The names of the header row of ``data``; raises :class:`RawSchemaError` naming the file when the
    file is empty, or its header is not UTF-8, repeats a name or lacks a contract column."""
    header = _header(data, source_file)
    repeated = [name for name, n in Counter(header).items() if n > 1]
    if repeated:
        raise RawSchemaError(
            f"{source_file}: column {', '.join(map(repr, repeated))} appears more than once in the header "
            "(the contract requires unique names). Fix or re-send the file; the previous partition is kept."
        )
    missing = [c for c in columns if c not in header]
    if missing:
        raise RawSchemaError(
            f"{source_file}: missing column {', '.join(repr(c) for c in missing)} "
            f"(header has {', '.join(map(repr, header)) or 'nothing'}; expected {', '.join(columns)}). "
            "Fix or re-send the file; the previous partition is kept."
        )
    return header


def _header(data: bytes, source_file: str) -> list[str]:
    if not data or data.isspace():  # (not data.strip(), without a copy of the file)
        raise RawSchemaError(f"{source_file}: file is empty (no header row). Fix or re-send the file.")
    end = re.search(rb"[\r\n]", data)  # the header line ends at LF, CR LF or a lone CR, as the parser's lines do
    first = data if end is None else data[: end.start()]
    if first.startswith(b"\xef\xbb\xbf"):
        first = first[3:]
    try:
        text = first.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RawSchemaError(f"{source_file}: header row is not UTF-8 ({exc})") from exc
    # the names exactly as the CSV parser will read them: unquoted, spaces kept (" qty" is not "qty")
    return next(csv.reader([text]), [])
