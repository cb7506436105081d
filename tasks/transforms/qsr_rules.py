"""The identity of stg_qsr_pos's rules: transform version and the settings that change its output; apart
from the transform (no pyarrow import), so a completeness check stays cheap to import."""

from __future__ import annotations

from dataclasses import dataclass

VERSION = "stg_qsr_pos/7"  # bumped when a change of the transform changes its output


@dataclass(frozen=True)
class QsrRules:
    """Settings that change the output; with VERSION they make the rules fingerprint."""

    suspicious_qty_threshold: int = 20
    timezone: str = "America/Toronto"
    day_start_hour: int = 5

    def as_dict(self) -> dict:
        return {"version": VERSION, **self.__dict__}
