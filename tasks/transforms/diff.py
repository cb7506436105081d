"""The difference between two versions of one partition, rows matched on the dataset's key, for
previews. Pure: tables in, a small dict out."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

COUNTS = ("rows_before", "rows_after", "added", "removed", "changed")


def diff_partition(
    before: pa.Table | None, after: pa.Table | None, key: Sequence[str], measure: str = ""
) -> dict[str, object]:
    """Rows before and after, added, removed and changed, the changes per column, and the sum of
    ``measure`` before, after and the change; repeated keys match in order."""
    before = _empty_like(after) if before is None else before
    after = _empty_like(before) if after is None else after
    names = [k for k in key if k in before.column_names and k in after.column_names]
    if not names:
        raise ValueError(f"no key column of {list(key)} in both tables ({before.column_names})")
    shared = [c for c in before.column_names if c in after.column_names and c not in names]
    if _same_keys(before, after, names):  # the usual rebuild: the same rows in the same order, no join needed
        both = pa.table({**{c + "__b": before[c] for c in shared}, **{c + "__a": after[c] for c in shared}})
        in_b = in_a = pa.array([True] * before.num_rows, pa.bool_())
    else:
        left, right = _numbered(before, names), _numbered(after, names)
        on = [*names, "__n"]
        joined = left.join(right, on, join_type="full outer", left_suffix="__b", right_suffix="__a")
        in_b, in_a = pc.is_valid(joined["__in__b"]), pc.is_valid(joined["__in__a"])
        both = joined.filter(pc.and_(in_b, in_a))
    columns: dict[str, int] = {}
    any_change = pa.array([False] * both.num_rows, pa.bool_())
    for c in shared:
        b, a = both[c + "__b"], both[c + "__a"]
        if not b.type.equals(a.type):
            a = a.cast(b.type, safe=False)
        differs = pc.fill_null(pc.not_equal(b, a), True)  # one side null: differs
        differs = pc.and_(differs, pc.invert(pc.and_(pc.is_null(b), pc.is_null(a))))  # both null: same
        n = pc.sum(differs).as_py() or 0
        if n:
            columns[c] = n
            any_change = pc.or_(any_change, differs)
    result: dict[str, object] = {
        "rows_before": before.num_rows,
        "rows_after": after.num_rows,
        "added": pc.sum(pc.invert(in_b)).as_py() or 0,
        "removed": pc.sum(pc.invert(in_a)).as_py() or 0,
        "changed": pc.sum(any_change).as_py() or 0,
        "changed_columns": dict(sorted(columns.items(), key=lambda kv: (-kv[1], kv[0]))),
    }
    if measure:
        result["measure"] = _measure(before, after, measure)
    return result


def total(diffs: Iterable[dict]) -> dict[str, object]:
    """The sum of partition diffs: counts, changed columns and the measure."""
    out: dict[str, object] = dict.fromkeys(COUNTS, 0)
    columns: dict[str, int] = {}
    measure: dict | None = None
    for d in diffs:
        for k in COUNTS:
            out[k] += d[k]
        for c, n in d.get("changed_columns", {}).items():
            columns[c] = columns.get(c, 0) + n
        if "measure" in d:
            m = d["measure"]
            measure = measure or {"name": m["name"], "before": 0.0, "after": 0.0, "change": 0.0}
            for k in ("before", "after", "change"):
                measure[k] = None if m[k] is None or measure[k] is None else round(measure[k] + m[k], 2)
    out["changed_columns"] = dict(sorted(columns.items(), key=lambda kv: (-kv[1], kv[0])))
    if measure is not None:
        out["measure"] = measure
    return out


def _same_keys(before: pa.Table, after: pa.Table, key: list[str]) -> bool:
    """Whether both tables hold the same keys in the same order (rows then match by position)."""
    if before.num_rows != after.num_rows:
        return False
    return all(before[k].type.equals(after[k].type) and before[k].equals(after[k]) for k in key)


def _numbered(table: pa.Table, key: list[str]) -> pa.Table:
    """The table with ``__n``, the row's occurrence within its key, and ``__in``, a marker for the join."""
    n = table.num_rows
    marked = table.append_column("__in", pa.array([True] * n, pa.bool_()))
    if n == 0:
        return marked.append_column("__n", pa.array([], pa.int64()))
    if table.select(key).group_by(key, use_threads=False).aggregate([]).num_rows == n:
        return marked.append_column("__n", pa.array([0] * n, pa.int64()))
    seen: dict[tuple, int] = {}
    occurrence = []
    for row in zip(*(table[k].to_pylist() for k in key), strict=True):
        occurrence.append(seen.get(row, 0))
        seen[row] = occurrence[-1] + 1
    return marked.append_column("__n", pa.array(occurrence, pa.int64()))


def _measure(before: pa.Table, after: pa.Table, column: str) -> dict[str, object]:
    b, a = _sum(before, column), _sum(after, column)
    return {"name": column, "before": b, "after": a, "change": None if a is None or b is None else round(a - b, 2)}


def _sum(table: pa.Table, column: str) -> float | None:
    if column not in table.column_names:
        return None
    value = pc.sum(table[column]).as_py()
    if isinstance(value, Decimal):
        value = float(value)
    return round(float(value or 0), 2)


def _empty_like(table: pa.Table | None) -> pa.Table:
    if table is None:
        raise ValueError("both sides of a diff are missing")
    return table.schema.empty_table()
