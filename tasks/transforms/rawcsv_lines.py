"""The lines and the header of a raw CSV file, for the reader (:mod:`tasks.transforms.rawcsv`): the
header row's check, and row numbers that are line numbers where a record and a line differ (a quoted
line break, an empty line, a lone carriage return)."""

from __future__ import annotations

import contextlib
import csv
import io
import re
import sys
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tasks.contract import escape_control


class RawSchemaError(ValueError):
    """A raw file whose header does not carry the contract's columns. Fails the partition."""


def body_lines(data: bytes) -> int:
    """Lines after the header, as the parser ends them (LF, CR LF or a lone CR), empty ones included."""
    ends = data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")
    return ends + (not data.endswith((b"\n", b"\r"))) - 1


def bare_cr(data: bytes) -> bool:
    return data.count(b"\r") != data.count(b"\r\n")


def by_line(
    data: bytes, source_file: str, header: list[str], records: int, malformed: list[tuple[int, str, str]]
) -> tuple[pa.Array, list[tuple[int, str, str]], set[int]]:
    """Row numbers that are line numbers where records and lines differ. A record quoted as RFC 4180 quotes is
    one row however many lines it takes; one that is not may have swallowed the rows after it: it is rejected,
    and so is each further line it took. Empty lines are no rows. Also the numbers of the records the parser
    read whose quoting is wrong (the caller takes them out)."""
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
    numbers, out, stray = [], [], set()
    for index, (first, last) in enumerate(spans):
        text = "".join(lines[first - 1 : last]).rstrip("\r\n")
        field = misquoted_field(text) if '"' in text else None
        if index not in bad:
            numbers.append(first)
            if field is None:
                continue
            stray.add(first)
        reason = bad[index] if index in bad else stray_quote(header, field)
        if field is None and last > first:  # quoted right, the wrong number of fields
            out.append((first, f"{reason}; the row runs over lines {first}-{last}", escape_control(text)))
            continue
        if last > first:
            over = f"lines {first}-{last}" + (" (to the end of the file)" if _open_at_end(text) else "")
            reason += f"; a quoted field runs over {over}: unbalanced quote? (no line break is allowed in a field)"
        elif index in bad and lone_cr_splits and lines[first - 1].endswith("\r"):  # a lone CR amid LF line ends
            reason += "; the line ends in a lone carriage return (U+000D), a control character the contract forbids"
        out.append((first, reason, line_text(first)))
        for number in range(first + 1, last + 1):
            out.append((number, f"inside the quoted field of row {first}, which runs over {over}", line_text(number)))
    return pa.array(numbers, pa.int64()), sorted(out), stray


_STRICT = r'"[^"]*(?:""[^"]*)*"|[^,"\r\n]*'  # RFC 4180: enclosed in quotes, any inside doubled; or no quote
_FIELD = re.compile(_STRICT)
_LENIENT = re.compile(r'"[^"]*(?:""[^"]*)*("?)[^,\r\n]*|[^,\r\n]*')  # as the parsers read a field


def misquoted_field(record: str) -> int | None:
    """The index of the first field of ``record`` (its text, without its line end) quoted otherwise than
    RFC 4180 allows: a quote in a field not enclosed in quotes, anything but a comma or the line end after
    a closing quote, a quote never closed. None when there is none."""
    at, index = 0, 0
    while True:
        at = _FIELD.match(record, at).end()
        if at == len(record):
            return None
        if record[at] != ",":
            return index
        at, index = at + 1, index + 1


def stray_quote(header: list[str], index: int) -> str:
    """The reason a row with :func:`misquoted_field` ``index`` is rejected."""
    name = header[index] if index < len(header) else f"field {index + 1}"
    return (
        f'{name} holds a stray quote ("); the contract allows a quote only around a whole field, '
        'with each quote inside it doubled ("")'
    )


_RECORD_LINE = f"^(?:{_STRICT})(?:,(?:{_STRICT}))*$"  # one line of such fields, as Arrow's RE2 matches it


def misquoted_lines(data: bytes, header: list[str]) -> list[tuple[int, str, str]]:
    """For a file of one record a line: (line number, reason, text escaped) of each line after the header
    holding a quote the wrong way (:func:`misquoted_field`), the lines split at LF, CR LF and a lone CR as the
    parser splits them, and matched by Arrow (RE2): six times faster than a loop where every field is quoted."""
    body = pa.array(data.splitlines()[1:], pa.binary()).cast(pa.string())
    wrong = pc.and_(pc.match_substring(body, '"'), pc.invert(pc.match_substring_regex(body, _RECORD_LINE)))
    out = []
    for index in pc.indices_nonzero(wrong).to_pylist():
        line = body[index].as_py()
        out.append((index + 2, stray_quote(header, misquoted_field(line)), escape_control(line)))
    return out


def _open_at_end(record: str) -> bool:
    """Whether ``record`` ends inside a quoted field (a quote never closed), read as the parsers read it."""
    at = 0
    while True:
        field = _LENIENT.match(record, at)
        if record.startswith('"', at) and not field.group(1) and field.end() == len(record):
            return True
        at = field.end() + 1
        if at > len(record):
            return False


@contextlib.contextmanager
def _no_field_limit():
    """Python's csv reader without its 128 KiB field limit (an unbalanced quote can swallow a whole file)."""
    was = csv.field_size_limit(sys.maxsize)
    try:
        yield
    finally:
        csv.field_size_limit(was)


def row_numbers(records: int, malformed: list[tuple[int, str, str]]) -> pa.Array:
    """Row numbers (header = 1) of the records that parsed, given ``records`` in all."""
    numbers = np.arange(2, records + 2, dtype="int64")
    if malformed:
        numbers = numbers[~np.isin(numbers, [n for n, _, _ in malformed])]
    return pa.array(numbers)


def undecodable(data: bytes) -> str | None:
    """Where ``data`` stops being UTF-8: byte offset and line; None when it is UTF-8."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return f"invalid UTF-8 at byte {exc.start} (line {line}): {data[exc.start : exc.start + 4]!r}"
    return None


def check_header(data: bytes, source_file: str, columns: list[str]) -> list[str]:
    """The names of the header row of ``data``; :class:`RawSchemaError` when it is not the contract's."""
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
