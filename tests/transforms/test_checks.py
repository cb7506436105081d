"""The shared type checks on their own (tasks/transforms/checks.py)."""

import datetime as dt
import random
import re
from decimal import Decimal

import pyarrow as pa
import pytest

from tasks.transforms.checks import is_money, money_cents, parse_dates, parse_instants

pytestmark = pytest.mark.unit

UTC = dt.UTC


@pytest.mark.parametrize(
    ("text", "instant"),
    [
        ("2026-09-15T12:00:00-04:00", dt.datetime(2026, 9, 15, 16, 0, 0, tzinfo=UTC)),
        ("2026-09-15T12:00:00.750-04:00", dt.datetime(2026, 9, 15, 16, 0, 0, tzinfo=UTC)),
        ("2026-09-15T12:00:59.999999999999Z", dt.datetime(2026, 9, 15, 12, 0, 59, tzinfo=UTC)),
        ("2026-09-15T12:00:00.1+0530", dt.datetime(2026, 9, 15, 6, 30, 0, tzinfo=UTC)),
        ("1969-12-31T23:59:59.5Z", dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC)),  # floored, not rounded to 0
        # a fraction takes nothing from the range of dates the whole seconds have
        ("9999-12-31T11:59:59.5-12:00", dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)),
        ("0001-01-01T14:00:00.5+14:00", dt.datetime(1, 1, 1, 0, 0, 0, tzinfo=UTC)),
    ],
)
def test_an_instant_with_an_offset_is_parsed_and_its_fraction_dropped(text, instant):
    assert parse_instants(pa.array([text, "2026-09-15T00:00:00Z"])).to_pylist() == [
        instant,
        dt.datetime(2026, 9, 15, tzinfo=UTC),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "2026-09-15T12:00:00",  # no offset
        "2026-09-15T12:00:00.5",
        "2026-09-15T12:00:00.Z",  # a dot without digits
        "2026-09-15T12:00:00.5.5Z",
        "2026-09-15 12:00:00.5Z",  # not ISO's T
        "2026-09-15T12:00:00.5+99:99",
        "2026-13-01T00:00:00.5Z",
        "2026-09-15",
        "",
        None,
    ],
)
def test_anything_else_is_null(text):
    assert parse_instants(pa.array([text, "2026-09-15T12:00:00.5Z"], pa.string())).to_pylist() == [
        None,
        dt.datetime(2026, 9, 15, 12, tzinfo=UTC),
    ]


# Arrow's strptime (the C library's) lets days and seconds run over and reads fields loosely: each of
# these was taken before, most of them as another instant (2026-09-31 as the 1st of October)
@pytest.mark.parametrize(
    "text",
    [
        "2026-09-31T12:00:00-04:00",  # September has 30 days
        "2026-04-31T23:00:00-04:00",
        "2026-02-29T12:00:00Z",  # not a leap year
        "2100-02-29T00:00:00Z",  # nor is 2100
        "2026-09-31T12:00:00.5Z",  # with a fraction too
        "2026-09-30T12:00:61Z",
        "2026-09-30T23:59:60Z",  # a leap second would move it to the next day
        "2026-09-30T12:00:00+24:00",
        "2026-09-15T12:00:00.5+24:00",
        "2026-09-30T12:00:00+05",  # an offset without its minutes
        "2026-9-15T12:00:00Z",  # ISO's fields have all their digits
        "2026-09-15T1:00:00Z",
        " 2026-09-15T12:00:00Z",
        "2026-09-15T12:00:00 +05:00",
        "0000-01-01T00:00:00+14:00",  # no year 0
    ],
)
def test_a_date_or_time_that_does_not_exist_is_null(text):
    assert parse_instants(pa.array([text, "2026-09-15T12:00:00Z"])).to_pylist() == [
        None,
        dt.datetime(2026, 9, 15, 12, tzinfo=UTC),
    ]


@pytest.mark.parametrize(
    ("text", "instant"),
    [
        ("2028-02-29T12:00:00Z", dt.datetime(2028, 2, 29, 12, tzinfo=UTC)),
        ("2000-02-29T23:59:59+23:59", dt.datetime(2000, 2, 29, 0, 0, 59, tzinfo=UTC)),
        ("2026-09-30T12:00:00-0400", dt.datetime(2026, 9, 30, 16, tzinfo=UTC)),
        ("2026-09-30T12:00:00.25+0530", dt.datetime(2026, 9, 30, 6, 30, tzinfo=UTC)),
        ("2026-12-31T23:59:59-00:00", dt.datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)),
    ],
)
def test_real_edge_instants_are_kept(text, instant):
    assert parse_instants(pa.array(["2026-09-31T12:00:00Z", text])).to_pylist() == [None, instant]


@pytest.mark.parametrize(
    ("text", "day"),
    [
        ("2026-09-30", dt.date(2026, 9, 30)),
        ("2024-02-29", dt.date(2024, 2, 29)),
        ("0001-01-01", dt.date(1, 1, 1)),
        ("9999-12-31", dt.date(9999, 12, 31)),
        ("2026-09-31", None),
        ("2026-02-29", None),
        ("2026-13-01", None),
        ("2026-00-10", None),
        ("2026-09-00", None),
        ("2026-9-30", None),
        (" 2026-09-30", None),
        ("2026-09-30 ", None),
        ("2026-09-30T00:00:00Z", None),
        ("0000-01-01", None),
        ("", None),
        (None, None),
    ],
)
def test_dates_are_exactly_iso_and_exist(text, day):
    assert parse_dates(pa.array([text, "2026-09-15"], pa.string())).to_pylist() == [day, dt.date(2026, 9, 15)]


_REFERENCE = (
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"  # groups 1-6: the local date and time
    r"(\.[0-9]+)?(Z|([+-])([0-9]{2}):?([0-9]{2}))"  # 7: a fraction; 8: the offset (9-11: its sign and fields)
)


def _reference_instant(text):
    """The contract's rule for an instant, in plain Python: seconds since the epoch (UTC), or None."""
    m = re.fullmatch(_REFERENCE, text or "")
    if m is None:
        return None
    year, month, day, hour, minute, second = (int(m[i]) for i in range(1, 7))
    try:
        local = dt.datetime(year, month, day, hour, minute, second)
    except ValueError:  # no year 0, no 31st of September, no 24th hour or 60th second
        return None
    seconds = (local - dt.datetime(1970, 1, 1)) // dt.timedelta(seconds=1)
    if m[8] == "Z":
        return seconds
    hours, minutes = int(m[10]), int(m[11])
    if hours > 23 or minutes > 59:
        return None
    return seconds - (1 if m[9] == "+" else -1) * (hours * 3600 + minutes * 60)


def test_instants_and_dates_agree_with_a_plain_python_reading_of_the_contract():
    # valid texts of every shape, each mutated: a byte changed, added or taken away (the reading is
    # numpy over the array's bytes: a wrong position, width or sign shows here)
    rnd = random.Random(13)
    shapes = [
        *("2026-09-15T12:00:00-04:00", "2026-09-15T12:00:00Z", "2026-09-15T12:00:00+0530"),
        *("2028-02-29T23:59:59.25+23:59", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-23:59"),
        *("1969-12-31T23:59:59.5Z", "2100-03-01", "2024-02-29"),
    ]
    texts = []
    for _ in range(20000):
        text = list(rnd.choice(shapes))
        for _ in range(rnd.randint(0, 2)):
            i, op = rnd.randrange(len(text)), rnd.random()
            if op < 0.6:
                text[i] = rnd.choice("0123456789-:TZ+. \u00e9")
            elif op < 0.8:
                text.insert(i, rnd.choice("0123456789:."))
            else:
                del text[i]
        texts.append("".join(text))
    texts += ["", None]
    col = pa.array(texts, pa.string()).slice(1)  # an offset into the buffers, too
    expected = [_reference_instant(t) for t in texts[1:]]
    assert parse_instants(col).cast(pa.int64()).to_pylist() == expected
    assert sum(e is not None for e in expected) > 5000  # both kinds are well represented
    assert sum(e is None for e in expected) > 5000

    def reference_date(text):
        if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text or ""):
            return None
        try:
            return dt.date.fromisoformat(text)
        except ValueError:
            return None

    assert parse_dates(col).to_pylist() == [reference_date(t) for t in texts[1:]]


def test_money_agrees_with_a_plain_python_reading_of_the_contract():
    rnd = random.Random(17)
    texts = ["".join(rnd.choice("0123456789..") for _ in range(rnd.randint(0, 21))) for _ in range(20000)]
    texts += ["-" + "".join(rnd.choice("000001.") for _ in range(rnd.randint(0, 20))) for _ in range(2000)]
    texts += ["9999999999999999.99", "99999999999999999", "0", "0.0", ".5", "5.", "1.234", " 1", "1 ", "١", None]
    texts += ["-0.00", "-0", "-0000000000000000.00", "-1", "-0.01", "-", "--0", "-.0", "+0", "0-"]
    col = pa.array(texts, pa.string()).slice(1)
    ok, cents, whole = money_cents(col)

    def reference(text):  # (is money, cents, digits of the whole part): 16 digits, a zero may be signed
        m = re.fullmatch(r"(-?)([0-9]{1,16})(\.[0-9]{1,2})?", text or "")
        if m is None or m[1] and Decimal(text) != 0:
            return (False, 0, 0)
        return (True, int(Decimal(text) * 100), len(m[2]))

    expected = [reference(t) for t in texts[1:]]
    assert list(zip(ok.tolist(), cents.tolist(), whole.tolist(), strict=True)) == expected
    assert sum(e[0] for e in expected) > 1000
    assert is_money(col).to_pylist() == [e[0] for e in expected]
