"""The shared type checks on their own (tasks/transforms/checks.py)."""

import datetime as dt

import pyarrow as pa
import pytest

from tasks.transforms.checks import parse_instants

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
