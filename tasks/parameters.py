"""Luigi parameters that check their value as every ``daybreak`` command does (tasks/guard.py)."""

from __future__ import annotations

import datetime as dt

import luigi

from tasks.guard import check_date


class DateParameter(luigi.DateParameter):
    """A ``luigi.DateParameter`` within :data:`tasks.guard.DATES`; ``flag`` names it in the error."""

    def __init__(self, *args, flag: str = "--date", **kwargs):
        super().__init__(*args, **kwargs)
        self.flag = flag

    def normalize(self, x) -> dt.date | None:
        value = super().normalize(x)
        return value if value is None else check_date(value, self.flag)
