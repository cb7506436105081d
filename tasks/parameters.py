"""Luigi parameters that check their value the way every ``daybreak`` command does (tasks/guard.py): a
date outside :data:`tasks.guard.DATES` is one line and exit 2 when the task is made, from the command
line, a config file or a range, before anything is checked or written."""

from __future__ import annotations

import datetime as dt

import luigi

from tasks.guard import check_date


class DateParameter(luigi.DateParameter):
    """A ``luigi.DateParameter`` whose value must lie in :data:`tasks.guard.DATES`; ``flag`` names it in
    the error (``--date``, ``--start``)."""

    def __init__(self, *args, flag: str = "--date", **kwargs):
        super().__init__(*args, **kwargs)
        self.flag = flag

    def normalize(self, x) -> dt.date | None:
        value = super().normalize(x)
        return value if value is None else check_date(value, self.flag)
