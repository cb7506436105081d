"""parse_csv_many must give exactly what parse_csv gives file by file."""

from __future__ import annotations

import pytest

from tasks.transforms.rawcsv import RawSchemaError, file_stem, parse_csv, parse_csv_many

pytestmark = pytest.mark.unit

COLS = ["a", "b", "c"]
FILES = [
    (b"a,b,c\n1,2,3\n4,5,6\n", "f1.csv"),
    (b"a,b,c\n7,8\n9,10,11\n12,13,14,15\n16,17,18", "f2.csv"),  # two malformed rows, no final newline
    (b"a,b,c\n", "f3.csv"),  # header only
    (b'a,b,c\n"x\ny",1,2\n3,4,5\n', "f4.csv"),  # quoted newline: parsed on its own
    (b"a,b,c\r\n1,2,3\r\n", "f5.csv"),  # CRLF: parsed on its own
    (b"c,a,b,extra\n3,1,2,9\n", "f6.csv"),  # other column order: its own batch
    (b"a,b,c\n,,\n1,2\n20,21,22\n", "f7.csv"),
    (b"a,b,c\n\n1,2,3\n", "f8.csv"),  # an empty line: parsed on its own
]


def as_tuple(p):
    return (p.source_file, p.table.to_pydict(), p.row_numbers.to_pylist(), p.malformed)


def test_batched_parse_equals_file_by_file():
    one_by_one = [as_tuple(parse_csv(data, name, COLS)) for data, name in FILES]
    assert [as_tuple(p) for p in parse_csv_many(FILES, COLS)] == one_by_one
    # worked by hand for the file with malformed rows: rows 2 and 4 malformed, 3 and 5 kept
    f2 = one_by_one[1]
    assert f2[2] == [3, 5] and [n for n, _, _ in f2[3]] == [2, 4]
    assert f2[1] == {"a": ["9", "16"], "b": ["10", "17"], "c": ["11", "18"]}


def test_invalid_utf8_in_one_file_is_named():
    files = [(b"a,b,c\n1,2,3\n", "ok.csv"), (b"a,b,c\n1,\xff\xfe,3\n", "bad.csv")]
    with pytest.raises(RawSchemaError, match="bad.csv: cannot be read as UTF-8 CSV"):
        parse_csv_many(files, COLS)


def test_missing_column_is_named_in_a_batch():
    with pytest.raises(RawSchemaError, match="f2.csv: missing column 'c'"):
        parse_csv_many([(b"a,b,c\n1,2,3\n", "f1.csv"), (b"a,b\n1,2\n", "f2.csv")], COLS)


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_header_only_file_without_final_newline_has_no_rows(bom):
    # found by fuzzing: the parser saw no line end and refused the file as "cannot be read as UTF-8 CSV"
    for parse in (lambda f: parse_csv(*f, COLS), lambda f: parse_csv_many([f], COLS)[0]):
        p = parse((bom + b"a,b,c", "h.csv"))
        assert (p.table.num_rows, p.malformed) == (0, [])


def test_header_name_with_a_space_is_a_missing_column():
    # found by fuzzing: " b" passed the header check (stripped) and the parser then raised ArrowKeyError
    with pytest.raises(RawSchemaError, match=r"h.csv: missing column 'b' \(header has 'a', ' b', 'c'"):
        parse_csv(b"a, b,c\n1,2,3\n", "h.csv", COLS)


@pytest.mark.parametrize("parse", ["one", "many"])
@pytest.mark.parametrize(
    ("body", "column", "code"),
    [
        (b"1,TE\x00A,3\n", "b", "U+0000"),
        (b"1,2,\x07\n", "c", "U+0007"),
        (b"1,2,3\x7f\n", "c", "U+007F"),
        (b'"x\ny",2,3\n', "a", "U+000A"),  # a newline inside a quoted field is a control character too
        (b'1,"a\r",3\n', "b", "U+000D"),
        (b"1,\t2,3\n", "b", "U+0009"),
    ],
)
def test_a_row_with_a_control_character_is_set_aside_naming_its_column(parse, body, column, code):
    data = b"a,b,c\n0,0,0\n" + body + b"4,5,6\n"
    p = parse_csv(data, "f.csv", COLS) if parse == "one" else parse_csv_many([(data, "f.csv")], COLS)[0]
    assert p.table.to_pydict() == {"a": ["0", "4"], "b": ["0", "5"], "c": ["0", "6"]}
    breaks = code in ("U+000A", "U+000D")  # a line break inside the quoted field: the row takes two lines
    assert p.row_numbers.to_pylist() == ([2, 5] if breaks else [2, 4])  # line numbers of the file
    (row, reason, text), *rest = p.malformed
    assert row == 3 and reason.startswith(f"{column} holds a control character ({code} at character")
    # the row's second line is rejected too, so that every line of the file is a row or a reject
    assert [(n, r) for n, r, _ in rest] == (
        [(4, "inside the quoted field of row 3, which runs over lines 3-4")] if breaks else []
    )
    for _, _, t in p.malformed:  # escaped: the quarantine holds no control character either
        assert not any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in t)


def test_a_control_character_in_an_extra_column_sets_the_row_aside_too():
    p = parse_csv(b"a,b,c,note\n1,2,3,ok\n4,5,6,b\x00d\n", "f.csv", COLS)
    assert p.table.column_names == COLS and p.table.num_rows == 1
    assert [(n, r.split(" (")[0]) for n, r, _ in p.malformed] == [(3, "note holds a control character")]


def test_a_file_with_no_control_character_is_read_unchanged():
    p = parse_csv(b"a,b,c\n1,\xc3\xa9t\xc3\xa9,3\n", "f.csv", COLS)  # non-ASCII is not a control character
    assert (p.table.to_pydict(), p.malformed) == ({"a": ["1"], "b": ["été"], "c": ["3"]}, [])


@pytest.mark.parametrize("parse", [parse_csv, lambda d, n, c: parse_csv_many([(d, n)], c)])
def test_invalid_utf8_anywhere_refuses_the_file_naming_byte_and_line(parse):
    with pytest.raises(
        RawSchemaError, match=r"x.csv: cannot be read as UTF-8 CSV \(invalid UTF-8 at byte 26 \(line 3\)"
    ):
        parse(b"a,b,c,extra\n1,2,3,4\n5,6,7,\xff\n", "x.csv", COLS)  # in a column the contract does not use


@pytest.mark.parametrize("header", [b"a,b,c,b", b"a,b,c,x,x", b"a,a,b,c"])
def test_a_header_with_a_repeated_name_is_refused_naming_file_and_name(header):
    with pytest.raises(RawSchemaError, match=r"d.csv: column '\w' appears more than once in the header"):
        parse_csv_many([(header + b"\n1,2,3,4,5\n", "d.csv")], COLS)


def test_the_text_of_a_row_the_parser_cannot_split_is_kept_with_its_control_characters_escaped():
    # found by fuzzing: the quarantine held the raw text of an unsplittable row as it was
    p = parse_csv(b'a,b,c\n1,2,3,"\x1f"\n', "f.csv", COLS)
    assert p.malformed == [(2, "row has 4 fields, header has 3", '1,2,3,"\\x1f"')]


def test_a_batch_checked_as_a_whole_still_finds_each_control_character_in_any_column():
    files = [
        (b"a,b,c,x\n1,2,3,4\n", "g1.csv"),
        (b"a,b,c,x\n5,6,7,\x01\n8,9,10,11\n", "g2.csv"),  # in an extra column
        (b"a,b,c\n1,\x7f,3\n2,3,4", "g3.csv"),  # DEL, and no final newline, in a batch of its own
        (b"a,b,c\n5,6,7\n", "g4.csv"),
    ]
    one_by_one = [as_tuple(parse_csv(data, name, COLS)) for data, name in files]
    many = parse_csv_many(files, COLS)
    assert [as_tuple(p) for p in many] == one_by_one
    assert [(n, r.split(" (")[0]) for p in many for n, r, _ in p.malformed] == [
        (2, "x holds a control character"),
        (2, "b holds a control character"),
    ]
    assert [p.table.num_rows for p in many] == [1, 1, 1, 1]


# -- row numbers are line numbers, and every line is a row or a reject ---------------------------------
@pytest.mark.parametrize("parse", [parse_csv, lambda d, n, c: parse_csv_many([(d, n)], c)[0]])
def test_an_empty_line_is_no_row_and_the_rows_after_it_keep_their_line_numbers(parse):
    p = parse(b"a,b,c\n1,2,3\n\n4,5,6\n\r\n7,8\n", "f.csv", COLS)
    assert p.table.to_pydict() == {"a": ["1", "4"], "b": ["2", "5"], "c": ["3", "6"]}
    assert p.row_numbers.to_pylist() == [2, 4]
    assert [(n, r) for n, r, _ in p.malformed] == [(6, "row has 2 fields, header has 3")]


@pytest.mark.parametrize("parse", [parse_csv, lambda d, n, c: parse_csv_many([(d, n)], c)[0]])
@pytest.mark.parametrize("end", [b"\n", b"\r\n"])
def test_a_quote_never_closed_rejects_each_line_it_takes_with_that_lines_text(parse, end):
    lines = [b"a,b,c", b"1,2,3", b'4,"5,6', b"7,8,9", b"", b"10,11,12"]
    p = parse(end.join(lines) + end, "f.csv", COLS)
    assert p.table.to_pydict() == {"a": ["1"], "b": ["2"], "c": ["3"]} and p.row_numbers.to_pylist() == [2]
    over = "lines 3-6 (to the end of the file)"
    assert p.malformed == [
        (
            3,
            f"row has 2 fields, header has 3; a quoted field runs over {over}: unbalanced quote? "
            "(no line break is allowed in a field)",
            '4,"5,6',
        ),
        (4, f"inside the quoted field of row 3, which runs over {over}", "7,8,9"),
        (5, f"inside the quoted field of row 3, which runs over {over}", ""),  # a blank line inside the quote
        (6, f"inside the quoted field of row 3, which runs over {over}", "10,11,12"),
    ]


def test_a_quote_closed_lines_later_rejects_the_lines_between_and_reads_on():
    p = parse_csv(b'a,b,c\n1,"2\nx\ny",3\n4,5,6\n', "f.csv", COLS)  # a 3-field record over lines 2-4
    assert p.table.to_pydict() == {"a": ["4"], "b": ["5"], "c": ["6"]} and p.row_numbers.to_pylist() == [5]
    assert [(n, r.split(" (")[0]) for n, r, _ in p.malformed] == [
        (2, "b holds a control character"),
        (3, "inside the quoted field of row 2, which runs over lines 2-4"),
        (4, "inside the quoted field of row 2, which runs over lines 2-4"),
    ]


def test_a_lone_carriage_return_that_splits_a_row_is_named_in_the_reason():
    p = parse_csv(b"a,b,c\n1,2\r,3\n4,5,6\n", "f.csv", COLS)  # the parser ends a line at a lone CR
    assert p.table.to_pydict() == {"a": ["4"], "b": ["5"], "c": ["6"]} and p.row_numbers.to_pylist() == [4]
    assert [n for n, _, _ in p.malformed] == [2, 3]
    assert "lone carriage return (U+000D)" in p.malformed[0][1]


def test_a_quote_that_swallows_more_than_python_csvs_field_limit_is_still_split_by_line():
    body = b"".join(b"%d,x,%d\n" % (i, i) for i in range(20_000))  # about 200 KB after the open quote
    p = parse_csv(b'a,b,c\n0,"0\x00,0\n' + body, "f.csv", COLS)
    assert p.table.num_rows == 0 and [n for n, _, _ in p.malformed] == list(range(2, 20_003))
    assert p.malformed[1][2] == "0,x,0" and p.malformed[0][2] == '0,"0\\x00,0'  # NUL escaped, as everywhere


@pytest.mark.parametrize("parse", [parse_csv, lambda d, n, c: parse_csv_many([(d, n)], c)[0]])
def test_a_file_whose_lines_end_in_a_lone_carriage_return_is_read_line_by_line(parse):
    p = parse(b"a,b,c\r1,2,3\r4,5\r6,7,8\r", "mac.csv", COLS)  # old Mac line ends: each CR ends a line
    assert p.table.to_pydict() == {"a": ["1", "6"], "b": ["2", "7"], "c": ["3", "8"]}
    assert p.row_numbers.to_pylist() == [2, 4] and p.malformed == [(3, "row has 2 fields, header has 3", "4,5")]


@pytest.mark.parametrize(
    "path, stem",
    [
        ("qsr_pos/2026-09-15/S001.csv", "S001"),  # a raw zone relpath
        ("S001.csv", "S001"),  # a bare name, as a folder listing gives it
        ("hotel_bookings/2026-09-15/H1.csv", "H1"),
        ("qsr_pos/2026-09-15/S001.csv.csv", "S001.csv"),  # only the one final suffix is the contract's
        ("qsr_pos/2026-09-15/S001", "S001"),  # no suffix: the name itself
    ],
)
def test_a_files_stem_is_its_name_without_folder_or_csv_suffix(path, stem):
    assert file_stem(path) == stem
