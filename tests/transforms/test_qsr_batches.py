"""A folder checked a batch of files at a time (check_batches, as StgQsrPos reads one) gives exactly
what checking every file at once gives, and the de-duplication keeps the last line read of each key."""

from __future__ import annotations

import datetime as dt
import io
import random

import numpy as np
import pyarrow as pa
import pytest

from tasks.checked import ipc
from tasks.transforms import qsr_pos
from tasks.transforms.qsr_check import RAW_COLUMNS, check_batches, check_folder, check_pieces
from tasks.transforms.qsr_pos import QsrRules, clean_checked
from tasks.transforms.rawcsv import RawSchemaError, parse_csv_many

pytestmark = pytest.mark.unit

D15, D16 = dt.date(2026, 9, 15), dt.date(2026, 9, 16)
HEADER = ",".join(RAW_COLUMNS)


def row(
    store: str, order: str, ts: str = "2026-09-15T12:00:00-04:00", qty: str = "1", n: str = "1", status="COMPLETED"
):
    return f"{order},{n},{store},{ts},SKU1,{qty},5.00,,{status}"


def csv(store: str, folder: dt.date, lines: list[str], header: str = HEADER, end: str = "\n") -> tuple[bytes, str]:
    return ("\n".join([header, *lines]) + end).encode(), f"qsr_pos/{folder}/{store}.csv"


def folder_files(folder: dt.date) -> list[tuple[bytes, str]]:
    """Files with every edge a batch boundary can cut through."""
    day = folder.isoformat()
    return [
        csv(
            "S001",
            folder,
            [
                row("S001", "O1", f"{day}T12:00:00-04:00"),
                row("S001", "O2", f"{day}T02:00:00-04:00"),  # the day before's business date
                row("S001", "O3", "2026-01-01T12:00:00Z"),  # misfiled
                row("S001", "O4", qty="x"),  # a rule fails
                row("S001", "O1", f"{day}T13:00:00-04:00"),  # a later copy of O1 line 1
                "O5,1,S001",  # the parser cannot split it: the last line of the file
            ],
        ),  # fmt: skip
        csv("S002", folder, ["O6,1", row("S002", "O7", f"{day}T12:00:00-04:00")], end=""),  # no last line end
        csv("S003", folder, []),  # a header and nothing else
        csv("S004", folder, [row("S004", "O8\x01", f"{day}T12:00:00-04:00"), row("S004", "O9", f"{day}T12:00:00Z")]),
        csv("S005", folder, [row("S005", "O10", f"{day}T12:00:00-04:00")], header=HEADER + ",extra"),
        (
            (HEADER + "\r\n" + row("S006", '"O11\r\nX"', f"{day}T12:00:00-04:00") + "\r\n").encode(),
            f"qsr_pos/{folder}/S006.csv",
        ),  # quoted line end, CRLF: not plain
        csv("S007", folder, [row("S007", "O12", f"{day}T12:00:00-04:00", status="VOIDED"), ""]),  # an empty line
        csv("S008", folder, [row("S008", "O13", f"{day}T12:00:00-04:00", n="2"), row("S008", "O14", qty="0")]),
    ]


def split(files: list, sizes: list[int]) -> list[list]:
    out, i = [], 0
    for size in sizes:
        out.append(files[i : i + size])
        i += size
    return out + ([files[i:]] if i < len(files) else [])


def plain(checked: qsr_pos.CheckedFolder) -> tuple:
    """A checked folder's contents, its dictionaries decoded (each batch has its own)."""
    rows = checked.rows
    i = rows.schema.get_field_index("source_file")
    rows = rows.set_column(i, "source_file", rows["source_file"].cast(pa.string()))
    return rows.to_pylist(), checked.rejected.to_pylist(), checked.rows_read


BATCHINGS = [[1] * 8, [2, 3, 3], [3, 5], [8]]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("sizes", BATCHINGS, ids=str)
def test_a_folder_checked_in_batches_is_the_folder_checked_at_once(sizes, threads):
    files = folder_files(D15)
    at_once = check_folder(parse_csv_many(files, RAW_COLUMNS), D15, QsrRules())
    batched = check_batches(iter(split(files, sizes)), D15, QsrRules(), threads=threads)
    assert plain(batched) == plain(at_once)
    assert at_once.rejected.num_rows >= 5 and not all(at_once.rejected["parsed"].to_pylist())  # the edges are there


@pytest.mark.parametrize("sizes", BATCHINGS, ids=str)
def test_a_partition_of_batched_folders_is_the_same_partition(sizes):
    window = {d: folder_files(d) for d in (D15, D16)}
    for date in (D15 - dt.timedelta(days=1), D15, D16):
        days = [d for d in (date, date + dt.timedelta(days=1)) if d in window]
        at_once = [check_folder(parse_csv_many(window[d], RAW_COLUMNS), d, QsrRules()) for d in days]
        batched = [check_batches(split(window[d], sizes), d, QsrRules(), threads=2) for d in days]
        expected = clean_checked(at_once, date, QsrRules())
        assert clean_checked(batched, date, QsrRules()) == expected
        assert clean_checked(map(through_ipc, batched), date, QsrRules()) == expected  # as a cache entry
        assert expected.table.num_rows > 0 or date != D15


@pytest.mark.parametrize("sizes", BATCHINGS, ids=str)
def test_a_partition_of_folders_handed_over_piece_by_piece_is_the_same_partition(sizes):
    """StgQsrPos hands a folder it checks to the transform one piece (batch) at a time, each written
    to the cache entry as it comes: the partition is the one of whole folders, and the entry written
    piece by piece reads back as the whole folder."""
    window = {d: folder_files(d) for d in (D15, D16)}
    for date in (D15 - dt.timedelta(days=1), D15, D16):
        days = [d for d in (date, date + dt.timedelta(days=1)) if d in window]
        whole = [check_folder(parse_csv_many(window[d], RAW_COLUMNS), d, QsrRules()) for d in days]
        pieces = {d: list(check_pieces(split(window[d], sizes), d, QsrRules())) for d in days}
        assert len(pieces[days[0]]) == len(split(window[days[0]], sizes))
        streamed = (piece for d in days for piece in pieces[d])
        assert clean_checked(streamed, date, QsrRules()) == clean_checked(whole, date, QsrRules())
        for d, checked in zip(days, whole, strict=True):
            sink = io.BytesIO()
            writer = ipc.CheckedWriter(sink)
            for piece in pieces[d]:
                writer.write(piece)
            writer.close(d)
            entry = ipc.checked_from_ipc(sink.getvalue())
            assert (entry.folder, plain(entry)) == (d, plain(checked))


def test_an_entry_without_its_last_batch_is_not_a_checked_folder():
    sink = io.BytesIO()
    writer = ipc.CheckedWriter(sink)
    writer.write(check_folder(parse_csv_many(folder_files(D15), RAW_COLUMNS), D15, QsrRules()))
    writer.close(D15)
    whole = sink.getvalue()
    assert ipc.checked_from_ipc(whole).folder == D15
    source = pa.BufferReader(whole)
    ends = [source.tell() for message in pa.ipc.MessageReader.open_stream(source) if message.type == "record batch"]
    cut = whole[: ends[-2]]  # up to the last batch of rows: the stream of a writer that never reached close()
    with pytest.raises(ValueError, match="last batch"):
        ipc.checked_from_ipc(cut)


def test_a_window_without_rows_gives_an_empty_partition():
    empty = check_batches([], D15, QsrRules())
    headers_only = check_batches([[csv("S001", D16, [])]], D16, QsrRules())
    for folders in ([], [empty], [empty, headers_only]):
        result = clean_checked(folders, D15, QsrRules())
        assert (result.table.num_rows, result.rejected.num_rows, result.rows_read) == (0, 0, 0)
        assert result.table.schema == qsr_pos.OUTPUT_SCHEMA


def through_ipc(checked: qsr_pos.CheckedFolder) -> qsr_pos.CheckedFolder:
    sink = io.BytesIO()
    ipc.checked_to_ipc(checked, sink)
    return ipc.checked_from_ipc(sink.getvalue())


@pytest.mark.parametrize("threads", [1, 2])
def test_a_bad_header_is_named_as_when_every_file_is_parsed_at_once(threads):
    bad_body = (HEADER + "\n" + row("S001", "O\xff1") + "\n").encode("latin-1"), "qsr_pos/2026-09-15/S001.csv"
    files = [bad_body, *folder_files(D15)[1:4], csv("S009", D15, [], header="order_id,qty")]
    with pytest.raises(RawSchemaError) as at_once:
        parse_csv_many(files, RAW_COLUMNS)
    assert "S009.csv" in str(at_once.value)  # a header error wins over an earlier file's body
    with pytest.raises(RawSchemaError) as batched:
        check_batches(split(files, [1] * 5), D15, QsrRules(), threads=threads)
    assert str(batched.value) == str(at_once.value)
    with pytest.raises(RawSchemaError, match="S001.csv"):  # the body error alone: named too
        check_batches(split(files[:4], [1] * 4), D15, QsrRules(), threads=threads)


@pytest.mark.parametrize(
    ("n", "stores", "orders", "lines"),
    [
        (3000, 3, 40, [1, 2, 3]),
        (120_000, 100_000, 100_000, [1, 999_999_999]),  # too large to fold into one integer: two keys
    ],
)
def test_the_last_line_read_of_each_key_is_kept(n, stores, orders, lines):
    rng = random.Random(13)
    rows = [(f"S{rng.randrange(stores)}", f"O{rng.randrange(orders)}", rng.choice(lines)) for _ in range(n // 2)]
    rows += [rng.choice(rows) if rng.random() < 0.3 else rows[i] for i in range(n - len(rows))]  # repeated keys
    last = {key: i for i, key in enumerate(rows)}
    cuts = sorted(rng.sample(range(1, n), 9))
    store_id, order_id, line_no = zip(*rows, strict=True)
    table = pa.table({"order_id": order_id, "line_no": pa.array(line_no, pa.int32()), "store_id": store_id})
    chunked = pa.concat_tables([table.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, n], strict=True)])
    codes = np.array([int(s[1:]) * 7 for s in store_id])  # a store's code instead of its id: any >= 0
    for keys in (table, chunked):
        assert qsr_pos._last_per_key(keys).nonzero()[0].tolist() == sorted(last.values())
        without_store = keys.drop_columns(["store_id"])
        by_code = qsr_pos._last_per_key(without_store, orders=qsr_pos._order_keys(without_store, codes))
        assert by_code.nonzero()[0].tolist() == sorted(last.values())
    assert len(last) < n
    assert qsr_pos._last_per_key(table.slice(0, 0)).tolist() == []
