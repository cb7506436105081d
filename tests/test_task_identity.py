"""The shortcuts in partition task construction give the tasks Luigi itself would build."""

from __future__ import annotations

import datetime as dt

import luigi
import pytest

from tasks.ads import AdsRolling7d
from tasks.hotels import HotelPickup
from tasks.qsr import StgQsrPos
from tasks.store_marts import StoreDailySales

pytestmark = pytest.mark.unit

CASES = [
    (StgQsrPos, {"date": dt.date(2026, 9, 10)}),
    (StgQsrPos, {"date": dt.datetime(2026, 9, 10, 13, 5)}),  # normalised to its date, as Luigi does
    (AdsRolling7d, {"date": dt.date(2026, 10, 1)}),
    (HotelPickup, {"date": dt.date(2026, 9, 10), "hotel": "H2"}),
    (StoreDailySales, {"store_id": "S007"}),
]


@pytest.mark.parametrize("cls, kwargs", CASES)
def test_parameter_values_and_task_ids_are_luigis(cls, kwargs):
    params = cls.get_params()
    assert params == luigi.Task.get_params.__func__(cls)  # the per-class list is Luigi's list
    ours = cls.get_param_values(params, [], kwargs)
    assert ours == luigi.Task.get_param_values.__func__(cls, params, [], kwargs)
    task = cls(**kwargs)
    assert task is cls(**kwargs)  # one instance per parameters, as Luigi's instance cache gives
    assert task.task_id == luigi.task.task_id_str(cls.get_task_family(), task.to_str_params(only_significant=True))


def test_a_missing_or_unknown_parameter_still_fails_the_way_luigi_fails():
    with pytest.raises(luigi.parameter.MissingParameterException):
        HotelPickup(date=dt.date(2026, 9, 10))
    with pytest.raises(luigi.parameter.UnknownParameterException):
        StgQsrPos(date=dt.date(2026, 9, 10), hotel="H1")
