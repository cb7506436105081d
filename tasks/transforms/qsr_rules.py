"""The identity of stg_qsr_pos's rules: transform version and the settings that change its output.

Kept apart from the transform (no pyarrow import), so that a completeness check, which needs the
rules fingerprint but never runs the transform, stays cheap to import.
"""

from __future__ import annotations

from dataclasses import dataclass

VERSION = "stg_qsr_pos/6"  # 2: misfiled lines, net_amount overflow rejected; 3: control characters rejected;
# 4: row numbers are line numbers, and every line a quoted line break takes is a reject (rawcsv);
# 5: an ordered_at that does not exist (2026-09-31, a 61st second, +24:00) or is not exactly ISO is rejected;
# 6: a reject whose business date is unknown (ordered_at does not parse, a row the parser cannot split)
# counts against both partitions that read its folder, not only the folder's date


@dataclass(frozen=True)
class QsrRules:
    """Settings that change the output; with VERSION they make the rules fingerprint."""

    suspicious_qty_threshold: int = 20
    timezone: str = "America/Toronto"
    day_start_hour: int = 5

    def as_dict(self) -> dict:
        return {"version": VERSION, **self.__dict__}
