"""Parse one raw CSV file (bytes) into a table of strings, keeping bad rows instead of failing."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.csv as pcsv


class RawSchemaError(ValueError):
    """A raw file whose header does not carry the contract's columns. Fails the partition."""


@dataclass(frozen=True)
class ParsedCsv:
    """Rows of one file as strings, with their row numbers (the header is row 1)."""

    source_file: str
    table: pa.Table  # every expected column as string, in contract order
    row_numbers: pa.Array  # int64, one per table row
    malformed: list[tuple[int, str, str]]  # (row number, reason, raw text) of rows that could not be split


def parse_csv(data: bytes, source_file: str, columns: list[str]) -> ParsedCsv:
    """Parse CSV bytes with a header row. Every contract column must be in the header (extra ones are ignored).

    Rows with the wrong number of fields are not dropped: they come back in ``malformed``.
    """
    header = _header(data, source_file)
    missing = [c for c in columns if c not in header]
    if missing:
        raise RawSchemaError(
            f"{source_file}: missing column {', '.join(repr(c) for c in missing)} "
            f"(header has {', '.join(header) or 'nothing'}; expected {', '.join(columns)}). "
            "Fix or re-send the file; the previous partition is kept."
        )
    malformed: list[tuple[int, str, str]] = []

    def on_invalid(row: pcsv.InvalidRow) -> str:
        reason = f"row has {row.actual_columns} fields, header has {row.expected_columns}"
        malformed.append((row.number or -1, reason, row.text))
        return "skip"

    table = pcsv.read_csv(
        pa.BufferReader(data),
        read_options=pcsv.ReadOptions(use_threads=False),
        parse_options=pcsv.ParseOptions(newlines_in_values=True, invalid_row_handler=on_invalid),
        convert_options=pcsv.ConvertOptions(
            column_types={c: pa.string() for c in header},
            include_columns=columns,
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )
    total = table.num_rows + len(malformed)
    skipped = {n for n, _, _ in malformed}
    numbers = [n for n in range(2, total + 2) if n not in skipped] if skipped else None
    row_numbers = pa.array(numbers, pa.int64()) if numbers is not None else _arange(2, table.num_rows + 2)
    return ParsedCsv(source_file, table, row_numbers, malformed)


def _arange(start: int, stop: int) -> pa.Array:
    import numpy as np

    return pa.array(np.arange(start, stop, dtype="int64"))


def _header(data: bytes, source_file: str) -> list[str]:
    if not data.strip():
        raise RawSchemaError(f"{source_file}: file is empty (no header row). Fix or re-send the file.")
    first = data.split(b"\n", 1)[0].rstrip(b"\r")
    if first.startswith(b"\xef\xbb\xbf"):
        first = first[3:]
    try:
        text = first.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RawSchemaError(f"{source_file}: header row is not UTF-8 ({exc})") from exc
    return [c.strip().strip('"') for c in text.split(",")]
