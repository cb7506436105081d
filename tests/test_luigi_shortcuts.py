"""Each shortcut of tasks/luigi_shortcuts.py gives Luigi's own answer (a Luigi upgrade that changes
what they rely on fails here). Luigi's own path is called directly: ``Register.__call__`` and
``luigi.Task``'s ``get_params``/``get_param_values``, on every task family of the catalogue."""

from __future__ import annotations

import datetime as dt

import luigi
import pytest
from luigi.task_register import Register

import tasks
from tasks import catalogue, settings
from tasks.luigi_shortcuts import CachedInstances, SnapshotSections, snapshot

DATE = dt.date(2026, 9, 15)


def _kwargs(cls) -> dict:
    """A valid value for every parameter of a partition task."""
    values = {"date": DATE, "hotel": "H1", "store_id": "S001"}
    return {name: values[name] for name, _ in luigi.Task.get_params.__func__(cls)}


def _families() -> list[type]:
    tasks.register()
    found = []
    for spec in catalogue.DATASETS:
        cls = Register.get_task_cls(spec.family)
        if isinstance(cls, CachedInstances):
            found.append(cls)
    return found


@pytest.fixture
def fresh_luigi(lab):
    """The lab clears Luigi's instance cache, as a new process would have it."""
    return lab


@pytest.mark.parametrize("family", [spec.family for spec in catalogue.DATASETS])
def test_params_and_values_are_luigis_own(fresh_luigi, family):
    tasks.register()
    cls = Register.get_task_cls(family)
    kwargs = _kwargs(cls)
    ours = cls.get_params()
    assert [name for name, _ in ours] == [name for name, _ in luigi.Task.get_params.__func__(cls)]
    assert cls.get_param_values(ours, [], kwargs) == luigi.Task.get_param_values.__func__(cls, ours, [], kwargs)


@pytest.mark.parametrize("family", [spec.family for spec in catalogue.DATASETS])
def test_an_instance_is_the_one_luigi_makes_and_caches(fresh_luigi, family):
    tasks.register()
    cls = Register.get_task_cls(family)
    kwargs = _kwargs(cls)
    ours = cls(**kwargs)
    theirs = Register.__call__(cls, **kwargs)  # Luigi's path: its cache, filled by the first call
    assert ours is theirs
    assert ours.task_id == theirs.task_id and ours.param_kwargs == theirs.param_kwargs
    assert cls(**kwargs) is ours


def test_clearing_luigis_cache_clears_the_shortcut(fresh_luigi):
    cls = _families()[0]
    kwargs = _kwargs(cls)
    before = cls(**kwargs)
    Register.clear_instance_cache()
    after = cls(**kwargs)
    assert after is not before and after.task_id == before.task_id
    assert Register.__call__(cls, **kwargs) is after


def test_a_disabled_luigi_cache_makes_new_instances(fresh_luigi, monkeypatch):
    cls = _families()[0]
    kwargs = _kwargs(cls)
    monkeypatch.setattr(Register, "_Register__instance_cache", None)  # what Register.disable_instance_cache does
    assert cls(**kwargs) is not cls(**kwargs)


def test_a_section_in_a_snapshot_is_read_once_with_luigis_values(fresh_luigi):
    cfg = luigi.configuration.get_config()
    assert isinstance(settings.qsr, SnapshotSections)
    with snapshot():
        first = settings.qsr()
        assert settings.qsr() is first
        theirs = Register.__call__(settings.qsr)
        assert first.param_kwargs == theirs.param_kwargs
        cfg.set("qsr", "suspicious_qty_threshold", "17")
        assert settings.qsr().suspicious_qty_threshold == first.suspicious_qty_threshold  # a snapshot
    assert settings.qsr().suspicious_qty_threshold == 17  # seen once the block ends


def test_luigis_command_line_takes_a_tasks_options_only_in_full(fresh_luigi):
    """``--hotel`` is a prefix of every ``--hotels-...`` setting flag: with argparse's abbreviations on,
    Luigi's own parser stopped with "ambiguous option". An abbreviation is refused, not guessed."""
    from luigi.cmdline_parser import CmdlineParser

    tasks.register()
    with CmdlineParser.global_instance(["HotelOtbExport", "--hotel", "H2"]) as parser:
        assert parser.get_task_obj().hotel == "H2"
    with pytest.raises(SystemExit), CmdlineParser.global_instance(["HotelOtbExport", "--hot", "H2"]) as parser:
        parser.get_task_obj()


def test_the_shortcut_follows_every_way_luigi_clears_its_cache(fresh_luigi):
    """Two clears in a row (a freed dict's address may be reused), and a clear called on a task class
    (Luigi then stores the new cache on the metaclass): after each, the instance is Luigi's new one."""
    cls = _families()[0]
    kwargs = _kwargs(cls)
    first = cls(**kwargs)
    Register.clear_instance_cache()
    Register.clear_instance_cache()
    second = cls(**kwargs)
    assert second is not first and Register.__call__(cls, **kwargs) is second
    cls.clear_instance_cache()
    try:
        third = cls(**kwargs)
        assert third is not second and Register.__call__(cls, **kwargs) is third
    finally:  # Luigi's cache back on Register, where the next test's lab clears it
        del CachedInstances._Register__instance_cache
