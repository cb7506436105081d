"""Hostile raw files, generated with hypothesis (docs/reliability.md, "Every fault, and what you see": raw files).

Every data row of a raw file must end up in exactly one place: a staging partition, a quarantine
(with file, row number and a reason), or a documented drop (another business date, a duplicate
line, a VOIDED line, an older restatement), and the counts must add up to the rows written. A file
the pipeline cannot read fails with RawSchemaError naming it, never with another exception.

Deterministic: derandomized, no example database, no deadline. ``bin/test --fast``
(``DAYBREAK_TEST_TIER=fast``) tries each property on a third of its examples, ``bin/test`` on all.
"""

from __future__ import annotations

import collections
import contextlib
import csv
import datetime as dt
import io
import json
import os
from dataclasses import dataclass

import luigi
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tasks.checked import ipc
from tasks.freshness.buildplan import RejectShareExceeded
from tasks.qsr import StgQsrPos
from tasks.transforms import ads, hotels, qsr_check, qsr_pos
from tasks.transforms.checks import parse_dates, parse_instants
from tasks.transforms.rawcsv import RawSchemaError, parse_csv_many

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)


# invalid UTF-8 in a row the parser cannot split fails inside pyarrow's invalid-row callback; pyarrow
# reports it as unraisable before it raises ArrowInvalid (which parse_csv turns into RawSchemaError)
pytestmark = [pytest.mark.luigi, pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")]


FAST = os.environ.get("DAYBREAK_TEST_TIER") == "fast"


def fuzz(max_examples: int) -> settings:
    return settings(FUZZ, max_examples=max(5, max_examples // 3) if FAST else max_examples)


# -- values ------------------------------------------------------------------------------------------
HOSTILE = [
    "", " ", "0", "-0", "-1", "1.0", "1e308", "-1e308", "99999999999999999999999", "NaN", "inf", "-inf", "0x1F",
    "١٢", "１", "\x00", "\x07", "\u2028", "\U0001f600", "𝟙", '"', '""', ",", "\n", "\r\n", "a\r", "NULL", "1,5",
]  # fmt: skip
TEXT = st.text(st.characters(codec="utf-8"), max_size=8)  # NUL, controls, non-BMP; no lone surrogates
INVALID_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\x80", b"\xf4\x90\x80\x80", b"\x80"]
OFFSETS = ["Z", "+00:00", "-04:00", "-05:00", "+05:30", "+05:45", "-12:00", "+14:00", "-0930", "+0100"]


@st.composite
def rows(draw, valid: dict[str, st.SearchStrategy[str]]) -> dict[str, str]:
    """A row of valid values; one row in three is dirty: a hostile value in about a quarter of its fields.
    (Mostly valid rows, so that de-duplication, voiding and attribution are exercised too.)"""
    dirty = draw(st.integers(0, 2)) == 0
    return {
        column: draw(st.one_of(st.sampled_from(HOSTILE), TEXT) if dirty and draw(st.integers(0, 3)) == 0 else value)
        for column, value in valid.items()
    }


def spelled(instant: dt.datetime, offset: str, fraction: bool) -> str:
    """``instant`` (aware) written as ISO 8601 with ``offset``."""
    if offset == "Z":
        local, suffix = instant.astimezone(dt.UTC), "Z"
    else:
        sign = -1 if offset[0] == "-" else 1
        hh, mm = int(offset[1:3]), int(offset[-2:])
        local, suffix = instant.astimezone(dt.timezone(sign * dt.timedelta(hours=hh, minutes=mm))), offset
    text = local.strftime("%Y-%m-%dT%H:%M:%S") + (".250" if fraction else "")
    return text + suffix


@st.composite
def instants(draw, day: dt.date, timezone: str) -> str:
    """A timestamp on local date ``day`` (or just after, or far away), spelled with any offset; or broken."""
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(timezone)
    start = dt.datetime.combine(day, dt.time(), zone)
    minutes = draw(st.integers(-60, 30 * 60))  # a little before and after the local day: other dates
    instant = (start.astimezone(dt.UTC) + dt.timedelta(minutes=minutes)).replace(second=draw(st.integers(0, 59)))
    good = spelled(instant, draw(st.sampled_from(OFFSETS)), draw(st.booleans()))
    odd = [
        good[:19],  # no offset
        good[:19] + "+99:99",
        good[:19] + "+24:00",
        good[:10],
        good.replace("T", " "),
        "1970-01-01T00:00:00Z",
        "0001-01-01T00:00:00+14:00",
        "9999-12-31T23:59:59-12:00",
        "2019-02-29T12:00:00Z",
        "2020-01-01T12:00:00-04:00",
    ]
    return draw(st.sampled_from(odd)) if draw(st.integers(0, 5)) == 0 else good


# -- rows and files ----------------------------------------------------------------------------------
def parser_lines(text: str) -> list[str]:
    """The lines of ``text`` as the CSV parser ends them: at LF, CR LF or a lone CR (ends kept)."""
    return io.StringIO(text, newline="").readlines()


@dataclass
class RawFile:
    name: str  # relative path, e.g. qsr_pos/2026-09-15/S001.csv
    data: bytes
    rows: int  # rows the parser must account for: a row a record (a blank line is none)
    error: str | None  # "schema" when the file as a whole must be refused


def cell(value: str, quote: bool) -> str:
    if quote or any(c in value for c in ',"\r\n'):
        return '"' + value.replace('"', '""') + '"'
    return value


@st.composite
def raw_file(draw, name: str, columns: list[str], row: st.SearchStrategy[dict[str, str]], max_rows: int = 8) -> RawFile:
    """A CSV file of generated rows: any column order, extra columns, rows with fields missing or added,
    quoted fields with newlines, BOM, CRLF, no final newline; sometimes a broken header or invalid UTF-8."""
    header = list(columns)
    if draw(st.booleans()):
        header = draw(st.permutations(header))
    header += draw(st.lists(st.sampled_from(["extra", "note", "x"]), max_size=2, unique=True))
    error = None
    header_trouble = draw(st.sampled_from(["none"] * 27 + ["missing", "misspelled", "padded", "repeated"]))
    if header_trouble == "repeated":  # a name twice: the contract (v2) wants unique names
        error = "schema"
        header.insert(draw(st.integers(0, len(header))), draw(st.sampled_from(header)))
    elif header_trouble != "none":
        error = "schema"
        i = draw(st.integers(0, len(columns) - 1))
        j = header.index(columns[i])
        header[j] = {"missing": "extra2", "misspelled": columns[i].upper(), "padded": f" {columns[i]}"}[header_trouble]
    newline = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    lines, records = [",".join(cell(h, draw(st.booleans())) for h in header)], 0
    for _ in range(draw(st.integers(0, max_rows))):
        values = draw(row)
        fields = [values.get(h, draw(TEXT)) for h in header]
        shape = draw(st.sampled_from(["ok"] * 18 + ["fewer", "more"]))
        if shape == "fewer":
            fields = fields[: draw(st.integers(0, len(fields) - 1))]
        elif shape == "more":
            fields += draw(st.lists(TEXT, min_size=1, max_size=3))
        text = ",".join(cell(f, draw(st.integers(0, 9)) == 0) for f in fields)
        lines.append(text)
        # a record is one row however many lines it takes (its fields are quoted right: a quoted line break,
        # LF, CR LF or a lone CR, rejects it for its control character); a blank line is no row
        records += bool(text)
    body = newline.join(lines) + (newline if draw(st.booleans()) else "")
    data = (b"\xef\xbb\xbf" if draw(st.integers(0, 5)) == 0 else b"") + body.encode("utf-8")
    if lines[1:] and draw(st.integers(0, 11)) == 0:  # invalid UTF-8 inside a row: its first or its last field
        at = len(data) - len(body.encode("utf-8")) + len((newline.join(lines[:-1]) + newline).encode("utf-8"))
        if draw(st.booleans()):  # the end of the last line: an extra column's field when the header has one
            at += len(lines[-1].encode("utf-8"))
        data = data[:at] + draw(st.sampled_from(INVALID_UTF8)) + data[at:]
        error = error or "schema"
    return RawFile(name, data, records, error)


def qsr_row(folder: dt.date, store: str) -> st.SearchStrategy[dict[str, str]]:
    money = st.sampled_from(["0", "1.00", "2.5", "12.34", "999999999999999.99", "123456789012345"])
    return rows(
        {
            "order_id": (st.sampled_from(["O1", "O2"])),  # few ids: duplicates across files
            "line_no": (st.sampled_from(["1", "01"])),
            "store_id": st.sampled_from([store, store, store, "S999", store.lower(), ""]),
            "ordered_at": instants(folder, "America/Toronto"),
            "sku": (st.sampled_from(["BURGER", "COLA"])),
            "qty": (st.sampled_from(["1", "2", "21", "999999999"])),
            "unit_price": (money),
            "discount": (st.sampled_from(["", "", "0.50", "1e308"])),
            "status": (st.sampled_from(["COMPLETED", "COMPLETED", "VOIDED", "REFUNDED", "completed"])),
        }
    )


@st.composite
def qsr_folders(draw, first: dt.date, folders: int) -> dict[dt.date, list[RawFile]]:
    out = {}
    for k in range(folders):
        folder = first + dt.timedelta(days=k)
        stores = draw(st.lists(st.sampled_from(["S001", "S002"]), max_size=2, unique=True).map(sorted))
        out[folder] = [
            draw(raw_file(f"qsr_pos/{folder}/{s}.csv", qsr_pos.RAW_COLUMNS, qsr_row(folder, s))) for s in stores
        ]
    return out


DAYS = st.sampled_from([dt.date(2026, 9, 15), dt.date(2026, 10, 31), dt.date(2026, 3, 7)])  # fall back, spring forward


def parse_folder(files: list[RawFile], columns: list[str]):
    return parse_csv_many([(f.data, f.name) for f in files], columns)


def through_ipc(window, date: dt.date):
    """clean_checked of each folder of ``window`` checked, written as a folder-cache entry, read back."""
    import io

    folders = []
    for folder, parsed in window:
        sink = io.BytesIO()
        ipc.checked_to_ipc(qsr_pos.check_folder(parsed, folder, qsr_pos.QsrRules()), sink)
        folders.append(ipc.checked_from_ipc(sink.getvalue()))
    return qsr_pos.clean_checked(folders, date, qsr_pos.QsrRules())


def in_batches(raw: dict, window_dates: list[dt.date], date: dt.date):
    """clean_checked of the window's folders checked a file at a time (each file a batch, two threads)."""
    folders = [
        qsr_check.check_batches(([(f.data, f.name)] for f in raw[d]), d, qsr_pos.QsrRules(), threads=2)
        for d in window_dates
    ]
    return qsr_pos.clean_checked(folders, date, qsr_pos.QsrRules())


def expect_refused(files: list[RawFile], columns: list[str]) -> None:
    """A folder holding a file that must be refused: RawSchemaError naming one of the refused files."""
    with pytest.raises(RawSchemaError) as caught:
        parse_folder(files, columns)
    assert any(f.name in str(caught.value) for f in files if f.error), str(caught.value)


def no_control_characters(*tables) -> None:
    """No string value of these tables holds a control character (contract v2): rows holding one are
    quarantined with their text escaped, never written as they are."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for table in tables:
        for name in table.column_names:
            if pa.types.is_string(table.schema.field(name).type):
                assert not pc.any(pc.match_substring_regex(table[name], r"[\x00-\x1f\x7f]")).as_py(), name


def undated(rejected, when) -> list[tuple[tuple[str, int], bool]]:
    """((file, row), whether its date cannot be read) of each reject; ``when`` its date or instant, parsed."""
    keys = zip(rejected["source_file"].to_pylist(), rejected["row_number"].to_pylist(), strict=True)
    return list(zip(keys, when.is_null().to_pylist(), strict=True))  # (year 0 instants: no datetime)


def check_rejects(rejected, files: list[RawFile]) -> None:
    """Every quarantined row names its file and row (its line: header = line 1) and gives a reason."""
    lines = {f.name: parser_lines(f.data.decode("utf-8-sig")) for f in files}
    for r in rejected.select(["source_file", "row_number", "reason"]).to_pylist():
        assert r["reason"], r
        assert r["source_file"] in lines, r
        assert 2 <= r["row_number"] <= len(lines[r["source_file"]]), r


# -- property 1 and 2: pure transforms ---------------------------------------------------------------
@fuzz(150)
@given(first=DAYS, folders=st.data())
def test_qsr_every_row_is_staged_quarantined_or_a_documented_drop(first, folders):
    raw = folders.draw(qsr_folders(first, 3))
    if any(f.error for fs in raw.values() for f in fs):
        for fs in raw.values():
            if any(f.error for f in fs):
                expect_refused(fs, qsr_pos.RAW_COLUMNS)
        return
    parsed = {d: parse_folder(fs, qsr_pos.RAW_COLUMNS) for d, fs in raw.items()}
    for d, fs in raw.items():
        for f, p in zip(fs, parsed[d], strict=True):
            assert p.table.num_rows + len(p.malformed) == f.rows, f  # the parser loses no record
    total, landed, quarantined = sum(f.rows for fs in raw.values() for f in fs), 0, []
    # every partition that reads one of these folders: first-1 (reads first) .. last
    for k in range(-1, len(raw)):
        date = first + dt.timedelta(days=k)
        window = [(d, parsed[d]) for d in (date, date + dt.timedelta(days=1)) if d in parsed]
        r = qsr_pos.clean_pos_lines(window, date, qsr_pos.QsrRules())
        # the same folders checked once, through the folder cache's Arrow IPC form: the same result
        assert through_ipc(window, date) == r
        # and checked a file at a time, as a build reads a folder in batches: the same result
        assert in_batches(raw, [d for d, _ in window], date) == r
        read = sum(f.rows for d, _ in window for f in raw[d])
        staged, rejected = r.table.num_rows, r.rejected.num_rows
        assert r.rows_read == read
        assert staged + rejected + r.voided_dropped + r.duplicates_of_date + r.other_date_rows == read
        assert r.attributed_rows == staged + rejected + r.voided_dropped + r.duplicates_of_date
        check_rejects(r.rejected, [f for d, _ in window for f in raw[d]])
        no_control_characters(r.table, r.rejected)
        keys = r.table.select(["store_id", "order_id", "line_no"]).to_pylist()
        assert len({tuple(k.values()) for k in keys}) == len(keys)  # the partition's key is unique
        assert "VOIDED" not in r.table["status"].to_pylist()
        landed += r.attributed_rows
        event(f"staged {staged > 0}, voided {r.voided_dropped > 0}, duplicates {r.duplicates_of_date > 0}")
        quarantined += undated(r.rejected, parse_instants(r.rejected["ordered_at"]))
    # a reject whose business date cannot be read (ordered_at does not parse, the row cannot be split)
    # is in the quarantine of both partitions that read its folder; every other one in one partition's
    times, unknown = collections.Counter(k for k, _ in quarantined), {k for k, u in quarantined if u}
    assert all(n == (2 if k in unknown else 1) for k, n in times.items()), times
    assert landed == total + len(unknown)  # no row lost; each undated reject counted by its two dates


def ads_row(export: dt.date) -> st.SearchStrategy[dict[str, str]]:
    restated = st.integers(1, 7).map(lambda k: (export - dt.timedelta(days=k)).isoformat())
    odd_dates = st.sampled_from([export.isoformat(), (export - dt.timedelta(days=8)).isoformat(), "1999-01-01"])
    count = st.sampled_from(["0", "1", "1000", "999999999999999"])
    money = st.sampled_from(["0", "0.00", "10.00", "999999999999999.99"])
    return rows(
        {
            "date": st.one_of(restated, restated, restated, odd_dates, st.sampled_from(HOSTILE), TEXT),
            "campaign_id": (st.sampled_from(["C1", "C2"])),  # few ids: repeated campaigns
            "channel": (st.just("google")),
            "impressions": (count),
            "clicks": (count),
            "spend": (money),
            "conversions": (count),
            "conversion_value": (money),
        }
    )


@fuzz(100)
@given(first=DAYS, data=st.data())
def test_ads_every_row_is_staged_quarantined_or_a_documented_drop(first, data):
    exports = data.draw(st.lists(st.integers(0, 9), min_size=1, max_size=3, unique=True).map(sorted))
    raw = {}
    for k in exports:
        e = first + dt.timedelta(days=k)
        raw[e] = data.draw(raw_file(f"ads/{e}/ads.csv", ads.RAW_COLUMNS, ads_row(e)))
    if any(f.error for f in raw.values()):
        expect_refused(list(raw.values()), ads.RAW_COLUMNS)
        return
    parsed = dict(zip(raw, parse_folder(list(raw.values()), ads.RAW_COLUMNS), strict=True))
    total, landed, quarantined, won = sum(f.rows for f in raw.values()), 0, [], collections.Counter()
    for k in range(min(exports) - 7, max(exports)):  # every date some export restates
        date = first + dt.timedelta(days=k)
        window = [(e, p) for e, p in parsed.items() if 1 <= (e - date).days <= 7]
        r = ads.newest_restatement(window, date)
        read = sum(raw[e].rows for e, _ in window)
        staged, rejected = r.table.num_rows, r.rejected.num_rows
        assert r.rows_read == read
        assert staged + rejected + r.superseded_rows + r.duplicates_dropped + r.other_date_rows == read
        check_rejects(r.rejected, [raw[e] for e, _ in window])
        no_control_characters(r.table, r.rejected)
        campaigns = r.table["campaign_id"].to_pylist()
        assert len(set(campaigns)) == len(campaigns)  # ads_daily's key (business_date, campaign_id) is unique
        assert set(r.rejected["source_file"].to_pylist()) <= {f"ads/{r.source_export_date}/ads.csv"}  # its rejects
        won[f"ads/{r.source_export_date}/ads.csv"] += 1
        landed += read - r.other_date_rows
        quarantined += undated(r.rejected, parse_dates(r.rejected["date"]))
    # a row whose date cannot be read is rejected by each date its export restates and is the newest to hold
    times, unknown = collections.Counter(k for k, _ in quarantined), {k for k, u in quarantined if u}
    assert all(n == (won[k[0]] if k in unknown else 1) for k, n in times.items()), (times, won)
    assert landed == total + 6 * len(unknown)


HOTEL_TZ = {"H1": "America/Toronto", "H2": "America/Vancouver", "H5": "America/Halifax"}


def hotel_row(day: dt.date, hotel: str) -> st.SearchStrategy[dict[str, str]]:
    """Around the bounds too: stays of 365 and 366 nights, 1000 and 1001 rooms, rates of 100000.00 and
    100000.01, and the extremes that used to poison the marts (departure 9999-12-31, 999999999 rooms)."""
    dates = st.integers(-3, 400).map(lambda k: (day + dt.timedelta(days=k)).isoformat())
    long_stays = st.sampled_from([365, 366, 367]).map(lambda k: (day + dt.timedelta(days=k)).isoformat())
    return rows(
        {
            "booking_id": (st.sampled_from(["B1", "B2"])),
            "hotel_id": st.sampled_from([hotel, hotel, "H9", ""]),
            "event_at": instants(day, HOTEL_TZ[hotel]),
            "event": (st.sampled_from(["CREATED", "MODIFIED", "CANCELLED"])),
            "arrival_date": (st.one_of(dates, st.just(day.isoformat()))),
            "departure_date": (st.one_of(dates, long_stays, st.just("9999-12-31"))),
            "rooms": (st.sampled_from(["1", "2", "1000", "1001", "999999999"])),
            "rate": (st.sampled_from(["0", "129.00", "100000.00", "100000.01", "999999999999999.99"])),
            "channel": (st.sampled_from(["direct", "ota"])),
        }
    )


@fuzz(80)
@given(day=DAYS, data=st.data())
def test_hotels_every_row_is_staged_or_quarantined(day, data):
    chosen = data.draw(st.lists(st.sampled_from(sorted(HOTEL_TZ)), min_size=1, max_size=3, unique=True).map(sorted))
    files = [
        data.draw(raw_file(f"hotel_bookings/{day}/{h}.csv", hotels.RAW_COLUMNS, hotel_row(day, h))) for h in chosen
    ]
    if any(f.error for f in files):
        expect_refused(files, hotels.RAW_COLUMNS)
        return
    parsed = parse_folder(files, hotels.RAW_COLUMNS)
    r = hotels.clean_booking_events([(p, HOTEL_TZ[h]) for p, h in zip(parsed, chosen, strict=True)], day)
    assert r.rows_read == sum(f.rows for f in files)
    assert r.table.num_rows + r.rejected.num_rows == r.rows_read  # hotels drop nothing: staged or quarantined
    check_rejects(r.rejected, files)
    assert len(set(zip(r.table["source_file"].to_pylist(), r.table["row_number"].to_pylist(), strict=True))) == (
        r.table.num_rows
    )
    no_control_characters(r.table, r.rejected)
    limits = hotels.HotelLimits()  # every staged event within the bounds, so the marts never overflow
    for e in r.table.to_pylist():
        assert (e["departure_date"] - e["arrival_date"]).days <= limits.max_stay_nights, e
        assert e["rooms"] <= limits.max_rooms and e["rate"] <= limits.max_rate, e
    event(f"a row beyond a bound {any('max_' in why for why in r.rejected['reason'].to_pylist())}")
    books = hotels.on_the_books([(day, r.table)])  # never raises, never expands a booking past the bound
    assert books.num_rows <= r.table.num_rows * limits.max_stay_nights


def further_lines_quoted_right(data: bytes) -> set[int]:
    """The lines but the first of each record over several lines that Python's csv reader, strict, reads."""
    lines = [line.replace("\0", "\x01") for line in parser_lines(data.decode("utf-8-sig"))]  # it refuses a NUL
    reader = csv.reader(lines)
    next(reader, None)
    out, end = set(), reader.line_num
    for _ in reader:
        first, last = end + 1, reader.line_num
        with contextlib.suppress(csv.Error):
            list(csv.reader(lines[first - 1 : last], strict=True))
            out |= set(range(first + 1, last + 1))
        end = last
    return out


@fuzz(80)
@given(data=st.data())
def test_unbalanced_quotes_are_rejected_rows_or_a_refused_file(data):
    """A quote opened and never closed swallows the rest of the file into one field: whatever the parser
    makes of it, the rows it sees are accounted for and nothing but RawSchemaError escapes."""
    day = dt.date(2026, 9, 15)
    f = data.draw(raw_file(f"qsr_pos/{day}/S001.csv", qsr_pos.RAW_COLUMNS, qsr_row(day, "S001")))
    lines = f.data.split(b"\n")
    at = data.draw(st.integers(0, len(lines) - 1))  # 0: the header itself
    lines[at] = b'"' + lines[at]
    broken = b"\n".join(lines)
    try:
        [p] = parse_csv_many([(broken, f.name)], qsr_pos.RAW_COLUMNS)
    except RawSchemaError as exc:
        assert f.name in str(exc)
        return
    r = qsr_pos.clean_pos_lines([(day, [p])], day, qsr_pos.QsrRules())
    # every line after the header is a row that parsed or a reject, once (blank lines outside a record
    # are neither, nor are the further lines of a record quoted right, one row): the lines the quote
    # swallowed are rejected one by one, not lost in one record
    body = parser_lines(broken.decode("utf-8-sig"))[1:]
    numbers = p.row_numbers.to_pylist() + [n for n, _, _ in p.malformed]
    assert len(numbers) == len(set(numbers)) == r.rows_read
    assert (
        {n for n, line in enumerate(body, start=2) if line.strip("\r\n")} - further_lines_quoted_right(broken)
        <= set(numbers)
        <= set(range(2, len(body) + 2))
    )
    assert r.table.num_rows + r.rejected.num_rows + r.voided_dropped + r.duplicates_of_date + r.other_date_rows == (
        r.rows_read
    )


# -- property 3: end to end through Luigi ------------------------------------------------------------
@pytest.fixture
def failures():
    """Exceptions of failed tasks, as Luigi hands them to FAILURE event handlers."""
    seen: list[BaseException] = []

    def on_failure(task, exception):
        seen.append(exception)

    luigi.Task.event_handler(luigi.Event.FAILURE)(on_failure)
    yield seen
    luigi.Task.remove_event_handler(luigi.Event.FAILURE, on_failure)


@fuzz(15)
@given(data=st.data())
def test_luigi_run_on_hostile_qsr_files(lab, failures, qsr_setting, data):
    import shutil

    date = dt.date(2026, 9, 15)
    shutil.rmtree(lab.raw, ignore_errors=True)
    shutil.rmtree(lab.data, ignore_errors=True)
    failures.clear()
    qsr_setting("max_reject_share", data.draw(st.sampled_from(["0.05", "1.0"])))  # also runs that succeed
    raw = data.draw(qsr_folders(date, 2))
    for folder, files in raw.items():
        (lab.raw / "qsr_pos" / folder.isoformat()).mkdir(parents=True)
        for f in files:
            (lab.raw / f.name).write_bytes(f.data)
    code = lab.luigi("StgQsrPos", "--date", str(date))
    event(f"exit code {code}")
    refused = [f.name for fs in raw.values() for f in fs if f.error]
    if not all(raw.values()):  # a folder with no store file has not arrived: the date waits, nothing written
        assert code == 20 and not failures, (code, failures)
        assert StgQsrPos(date=date).store().read_manifest(date) is None
        return
    assert code in (0, 30), code
    assert all(isinstance(e, RawSchemaError | RejectShareExceeded) for e in failures), failures
    store = StgQsrPos(date=date).store()
    if code == 30:
        record = json.loads((store.data_root / store.failure_id(date)).read_text())
        names = refused or [f.name for fs in raw.values() for f in fs]
        assert any(n in record["error"] for n in names), record
        assert store.read_manifest(date) is None  # nothing written
        return
    assert not refused
    m = store.read_manifest(date)
    s = m["stats"]
    assert s["rows_read"] == sum(f.rows for fs in raw.values() for f in fs)
    assert (
        m["row_count"] + m["rejected_count"] + s["voided_dropped"] + s["duplicates_of_date"] + s["other_date_rows"]
        == s["rows_read"]
    )
    quarantine = store.data_root / store.quarantine_rel(date)  # none when nothing was rejected
    assert (pq.read_table(quarantine).num_rows if quarantine.exists() else 0) == m["rejected_count"]
    assert pq.read_table(store.data_root / store.rel(date) / "data.parquet").num_rows == m["row_count"]
