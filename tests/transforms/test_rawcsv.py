"""parse_csv_many must give exactly what parse_csv gives file by file."""

from __future__ import annotations

import pytest

from tasks.transforms.rawcsv import RawSchemaError, parse_csv, parse_csv_many

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
    assert p.row_numbers.to_pylist() == [2, 4]
    [(row, reason, text)] = p.malformed
    assert row == 3 and reason.startswith(f"{column} holds a control character ({code} at character")
    assert not any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text)  # escaped: the quarantine holds none either


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
