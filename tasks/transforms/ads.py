"""ads_daily and ads_rolling_7d (contract section 4). Pure: parsed exports or upstream tables in, one
partition's table out."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from tasks.transforms.checks import (
    MONEY,
    MONEY_DIGITS,
    blank,
    count,
    file_rejects,
    first_failed,
    fit_total,
    int_too_long,
    is_money,
    malformed_rejects,
    money_too_long,
    parse_dates,
    reject_schema,
)
from tasks.transforms.rawcsv import ParsedCsv

RAW_COLUMNS = ["date", "campaign_id", "channel", "impressions", "clicks", "spend", "conversions", "conversion_value"]
DAILY_SCHEMA = pa.schema(
    [
        ("campaign_id", pa.string()),
        ("channel", pa.string()),
        ("impressions", pa.int64()),
        ("clicks", pa.int64()),
        ("spend", MONEY),
        ("conversions", pa.int64()),
        ("conversion_value", MONEY),
        ("source_export_date", pa.date32()),
    ]
)
ROLLING_SCHEMA = pa.schema(
    [
        ("campaign_id", pa.string()),
        ("spend_7d", MONEY),
        ("conversions_7d", pa.int64()),
        ("conversion_value_7d", MONEY),
        ("roas_7d", pa.float64()),
        ("cpa_7d", pa.float64()),
        ("days_in_window", pa.int32()),
    ]
)
REJECT_SCHEMA = reject_schema(RAW_COLUMNS)
_COUNTS, _AMOUNTS = ("impressions", "clicks", "conversions"), ("spend", "conversion_value")


def reasons(restated: list[dt.date]) -> list[str]:
    """The reject reasons of an export, by rule (0: valid), given the dates it restates (oldest first)."""
    return [
        "",
        "date is not an ISO date",
        "campaign_id is empty",
        "channel is empty",
        "impressions is not an integer >= 0",
        "clicks is not an integer >= 0",
        "spend is not a decimal >= 0 (2 dp)",
        "conversions is not an integer >= 0",
        "conversion_value is not a decimal >= 0 (2 dp)",
        f"date is not one the export restates ({restated[0]} .. {restated[-1]})",
        *(f"{c} has over 15 digits, the most a count holds" for c in _COUNTS),
        *(f"{c} has over {MONEY_DIGITS} digits before the point, the most decimal(18,2) holds" for c in _AMOUNTS),
    ]


@dataclass(frozen=True)
class DailyResult:
    table: pa.Table  # DAILY_SCHEMA: the rows of the date from the newest export that holds it
    rejected: pa.Table  # REJECT_SCHEMA: rows of the date, in the export that won, that failed a rule
    source_export_date: dt.date | None
    rows_read: int = 0  # every data row of the exports read (rows the parser could not split included)
    other_date_rows: int = 0  # rows of those exports attributed to another date
    attributed_rows: int = 0  # rows of the date in the export that won, valid or not: the reject share's base
    superseded_rows: int = 0  # rows of the date in an older export than the one that won, valid or not
    duplicates_dropped: int = 0  # valid rows of the date replaced by a later row of the same campaign, same export

    # rows_read == table + rejected + superseded_rows + duplicates_dropped + other_date_rows


def newest_restatement(
    exports: list[tuple[dt.date, ParsedCsv]], date: dt.date, restatement_days: int = 7
) -> DailyResult:
    """Date ``date`` as the newest export holding a row attributed to it (valid or not) reports it, with
    that export's rejects; a campaign listed twice keeps its last valid row."""
    holding, rows_read = [], 0
    for export_date, parsed in sorted(exports, key=lambda e: e[0]):
        rows, bad, mine = _export_rows(parsed, export_date, date, restatement_days)
        rows_read += parsed.table.num_rows + len(parsed.malformed)
        if mine:
            holding.append((export_date, rows, bad, mine))
    counts = {"rows_read": rows_read, "other_date_rows": rows_read - sum(h[3] for h in holding)}
    if not holding:
        return DailyResult(DAILY_SCHEMA.empty_table(), REJECT_SCHEMA.empty_table(), None, **counts)
    export_date, rows, rejects, attributed = holding[-1]
    superseded = sum(h[3] for h in holding[:-1])
    last = _last_per_campaign(rows)
    table = last.append_column("source_export_date", pa.repeat(pa.scalar(export_date, pa.date32()), last.num_rows))
    dropped = rows.num_rows - last.num_rows
    return DailyResult(
        table.cast(DAILY_SCHEMA),
        rejects,
        export_date,
        **counts,
        attributed_rows=attributed,
        superseded_rows=superseded,
        duplicates_dropped=dropped,
    )


def _last_per_campaign(rows: pa.Table) -> pa.Table:
    numbered = rows.append_column("_i", pa.array(range(rows.num_rows), pa.int64()))
    last = numbered.group_by("campaign_id", use_threads=False).aggregate([("_i", "max")])["_i_max"]
    return rows.take(pc.take(last, pc.sort_indices(last)))  # the last rows, in read order


def _export_rows(
    parsed: ParsedCsv, export_date: dt.date, date: dt.date, restatement_days: int
) -> tuple[pa.Table, pa.Table, int]:
    """(valid rows of ``date``, rejects attributed to ``date``, rows attributed to ``date``) of one export."""
    raw = parsed.table
    day = parse_dates(raw["date"])
    restated = [export_date - dt.timedelta(days=k) for k in range(restatement_days, 0, -1)]
    bad = {c: _not_count(raw[c]) for c in _COUNTS} | {c: pc.invert(is_money(raw[c])) for c in _AMOUNTS}
    # a number of more digits than its column holds is too large, not "not a number"
    big = {c: int_too_long(raw[c], bad[c], digits=15) for c in _COUNTS}  # _not_count's 15
    big |= {c: money_too_long(raw[c], bad[c]) for c in _AMOUNTS}
    typed = {c: pc.and_not(bad[c], big[c]) for c in bad}
    checks = [
        pc.is_null(day),
        blank(raw["campaign_id"]),
        blank(raw["channel"]),
        typed["impressions"],
        typed["clicks"],
        typed["spend"],
        typed["conversions"],
        typed["conversion_value"],
        _not_restated(day, restated),
        *(big[c] for c in (*_COUNTS, *_AMOUNTS)),
    ]
    code = first_failed(checks)
    valid = pc.equal(code, 0)
    mine = _owned(day, restated, date)
    keep = pc.and_(valid, mine)
    picked = raw.filter(keep)
    rows = pa.table(
        {
            "campaign_id": picked["campaign_id"],
            "channel": picked["channel"],
            "impressions": pc.cast(picked["impressions"], pa.int64()),
            "clicks": pc.cast(picked["clicks"], pa.int64()),
            "spend": pc.cast(picked["spend"], MONEY),
            "conversions": pc.cast(picked["conversions"], pa.int64()),
            "conversion_value": pc.cast(picked["conversion_value"], MONEY),
        }
    )
    bad = pc.and_(pc.invert(valid), mine)
    rejected = file_rejects(parsed, code, bad, reasons(restated), REJECT_SCHEMA, malformed=False)
    # rows the parser took out: one it could split is its date's like any other; one it could not has no date
    taken_out = malformed_rejects(parsed, RAW_COLUMNS, REJECT_SCHEMA)
    theirs = _owned(parse_dates(taken_out["date"]), restated, date)
    rejected = pa.concat_tables([rejected, taken_out.filter(theirs)]).sort_by("row_number")  # in file order
    return rows, rejected, count(mine) + count(theirs)


def _not_restated(day: pa.Array, restated: list[dt.date]) -> pa.Array:
    """Per row: a date, but not one the export restates."""
    return pc.and_(pc.is_valid(day), pc.invert(pc.is_in(day, pa.array(restated, pa.date32()))))


def _owned(day: pa.Array, restated: list[dt.date], date: dt.date) -> pa.Array:
    """Per row of an export, whether it is ``date``'s: a date not restated goes to the export's day before,
    a row with no date to every date the export restates."""
    outside = _not_restated(day, restated)
    own = pc.fill_null(pc.equal(day, pa.scalar(date, pa.date32())), date in restated)
    return pc.if_else(outside, pa.scalar(restated[-1] == date), own)


def rolling_window(days: list[tuple[dt.date, pa.Table]], days_in_window: int) -> pa.Table:
    """Per campaign, the sums over ``days``, roas_7d and cpa_7d (null over 0), and ``days_in_window``."""
    tables = [t.select(["campaign_id", "spend", "conversions", "conversion_value"]) for _, t in days]
    if not tables or sum(t.num_rows for t in tables) == 0:
        return ROLLING_SCHEMA.empty_table()
    sums = (
        pa.concat_tables(tables)
        .group_by("campaign_id", use_threads=False)
        .aggregate([("spend", "sum"), ("conversions", "sum"), ("conversion_value", "sum")])
        .sort_by("campaign_id")
    )
    window = f"the {days[0][0]} to {days[-1][0]} window, campaign"
    spend = fit_total(
        sums["spend_sum"], MONEY, sums["campaign_id"], f"spend_7d of {window}", " (ads_daily of those dates)"
    )
    conversions = sums["conversions_sum"]
    value = fit_total(
        sums["conversion_value_sum"],
        MONEY,
        sums["campaign_id"],
        f"conversion_value_7d of {window}",
        " (ads_daily of those dates)",
    )
    spend_f, conv_f, value_f = (pc.cast(c, pa.float64()) for c in (spend, conversions, value))
    null = pa.scalar(None, pa.float64())
    return pa.table(
        {
            "campaign_id": sums["campaign_id"],
            "spend_7d": spend,
            "conversions_7d": conversions,
            "conversion_value_7d": value,
            "roas_7d": pc.if_else(pc.equal(spend_f, 0), null, pc.divide(value_f, spend_f)),
            "cpa_7d": pc.if_else(pc.equal(conv_f, 0), null, pc.divide(spend_f, conv_f)),
            "days_in_window": pa.repeat(pa.scalar(days_in_window, pa.int32()), sums.num_rows),
        },
        schema=ROLLING_SCHEMA,
    )


def _not_count(col) -> pa.Array:
    """Not 1 to 15 ASCII digits (an integer >= 0)."""
    return pc.invert(pc.and_(pc.ascii_is_decimal(col), pc.less_equal(pc.utf8_length(col), 15)))
