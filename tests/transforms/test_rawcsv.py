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
    [(row, reason, text)] = p.malformed  # one row, however many lines it takes
    assert row == 3 and reason.startswith(f"{column} holds a control character ({code} at character")
    assert not any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text)  # escaped: the quarantine holds none either


def test_the_text_of_a_row_set_aside_splits_into_the_fields_the_parser_read():
    """A quoted field holding a comma and a control character: the quarantine's text keeps the quotes, so it
    splits into the same fields (before, ``1,TE,\\x07A,3``: four fields of a three-column header)."""
    import csv

    p = parse_csv(b'a,b,c\n1,"TE,\x07A",3\n4,"say ""hi""\x07",6\n', "f.csv", COLS)
    texts = [text for _, _, text in p.malformed]
    assert [next(csv.reader([t])) for t in texts] == [["1", "TE,\\x07A", "3"], ["4", 'say "hi"\\x07', "6"]], texts


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


def test_a_quote_closed_lines_later_is_one_row_rejected_for_its_line_breaks_and_reads_on():
    p = parse_csv(b'a,b,c\n1,"2\nx\ny",3\n4,5,6\n', "f.csv", COLS)  # a 3-field record over lines 2-4
    assert p.table.to_pydict() == {"a": ["4"], "b": ["5"], "c": ["6"]} and p.row_numbers.to_pylist() == [5]
    assert [(n, r.split(" (")[0]) for n, r, _ in p.malformed] == [(2, "b holds a control character")]
    assert p.split[2] == ("1", "2\\x0ax\\x0ay", "3")  # its values in their columns, escaped


BOTH = [parse_csv, lambda d, n, c: parse_csv_many([(d, n)], c)[0]]


@pytest.mark.parametrize("parse", BOTH)
@pytest.mark.parametrize("rest", [b"", b"7,8,9\n"])
@pytest.mark.parametrize("record", [b'4,"goo\ngle",6\n', b'4,"goo\r\ngle",6\r\n', b'4,"g\no\no""\ngle",6'])
def test_a_record_over_several_lines_is_one_row(parse, record, rest):
    """Read by the reader's rules (docs/raw-zone.md): one row, rejected for its line break (a control
    character), its values in their columns: its date's like any other row; the lines it takes are no rows."""
    if rest and not record.endswith(b"\n"):
        record += b"\n"
    p = parse(b"a,b,c\n1,2,3\n" + record + rest, "f.csv", COLS)
    rows_after = [3 + record.count(b"\n") + (not record.endswith(b"\n"))] if rest else []
    assert p.row_numbers.to_pylist() == [2, *rows_after]
    assert p.table.num_rows + len(p.malformed) == 2 + bool(rest)  # a row per record
    [(row, reason, text)] = p.malformed
    assert row == 3 and reason.startswith("b holds a control character (U+000")
    assert p.split[3][0] == "4" and p.split[3][2] == "6" and p.split[3][1].startswith("g")


def test_a_record_over_several_lines_with_a_field_missing_is_one_reject_naming_its_lines():
    p = parse_csv(b'a,b,c\n1,2,3\n4,"x\ny"\n7,8,9\n', "f.csv", COLS)
    assert p.row_numbers.to_pylist() == [2, 5]
    [(row, reason, text)] = p.malformed
    assert (row, text) == (3, '4,"x\\x0ay"') and "2 fields" in reason and "lines 3-4" in reason
    assert 3 not in p.split  # not split: no field is known


@pytest.mark.parametrize("parse", BOTH)
@pytest.mark.parametrize("elsewhere", [b"", b'10,"x\ny",12\n'])  # and a record over two lines in the file
@pytest.mark.parametrize("field", [b'"BUR"GER"', b'"BURGER" x', b'BUR"GER', b'BURGER"', b'"BURGER"x', b' "BURGER"'])
def test_a_stray_quote_rejects_its_row_as_one_that_cannot_be_split(parse, elsewhere, field):
    """RFC 4180: a field is plain, with no quote, or enclosed in quotes with a quote inside doubled, and
    nothing but a comma or the line end after its closing quote; a row breaking that is not guessed at."""
    data = b'a,b,c\n1,"BUR""GER",3\n4,' + field + b',6\n7,"",9\n' + elsewhere
    p = parse(data, "f.csv", COLS)
    assert p.table.to_pydict() == {"a": ["1", "7"], "b": ['BUR"GER', ""], "c": ["3", "9"]}  # quoted right: read
    assert p.row_numbers.to_pylist() == [2, 4]
    (row, reason, text), *rest = p.malformed
    assert (row, text) == (3, "4," + field.decode() + ",6")
    assert reason.split()[0] == "b" and "stray quote" in reason
    assert 3 not in p.split  # no value is known: its columns stay null
    assert [n for n, _, _ in rest] == ([5] if elsewhere else [])


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])  # a lone CR as every line's end too
def test_a_stray_quote_is_found_whatever_the_line_ends(end):
    lines = [b"a,b,c", b'1,"BUR""GER",3', b'4,"BUR"GER",6', b'7,"x",9', b'10,B"X,12']
    p = parse_csv(end.join(lines) + end, "f.csv", COLS)
    assert p.table.to_pydict() == {"a": ["1", "7"], "b": ['BUR"GER', "x"], "c": ["3", "9"]}
    assert [(n, r.split()[0], t) for n, r, t in p.malformed] == [(3, "b", '4,"BUR"GER",6'), (5, "b", '10,B"X,12')]


@pytest.mark.parametrize("parse", BOTH)
@pytest.mark.parametrize("end", [b"", b"\n", b"\r\n"])
def test_a_quote_never_closed_on_the_last_line_rejects_it_as_a_row_that_cannot_be_split(parse, end):
    p = parse(b'a,b,c\n1,2,3\n4,5,"abc' + end, "f.csv", COLS)
    assert p.row_numbers.to_pylist() == [2]
    [(row, reason, text)] = p.malformed
    assert (row, text) == (3, '4,5,"abc') and reason.split()[0] == "c" and "stray quote" in reason
    assert 3 not in p.split


def test_a_misquoted_record_whose_quote_closes_on_the_last_line_does_not_say_it_runs_to_the_end():
    p = parse_csv(b'a,b,c\n1,2,3\n4,"5\n6"x,7\n', "f.csv", COLS)  # the quote closes on line 4, then "x"
    assert p.row_numbers.to_pylist() == [2] and 3 not in p.split
    assert [(n, t) for n, _, t in p.malformed] == [(3, '4,"5'), (4, '6"x,7')]
    for _, reason, _ in p.malformed:
        assert "lines 3-4" in reason and "end of the file" not in reason


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
