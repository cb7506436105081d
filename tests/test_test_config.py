"""The tests' own Luigi config: what one test sets or reads is gone for the next one in the same worker."""

from __future__ import annotations

import luigi.configuration
import pytest

from tests.conftest import reload_config

pytestmark = pytest.mark.unit


def timezone() -> str:
    return luigi.configuration.get_config().get("qsr", "timezone", "(unset)")


def test_a_luigi_cfg_in_a_tests_folder_is_not_read_into_later_tests(tmp_path, monkeypatch):
    before = timezone()
    assert before != "America/Vancouver"
    monkeypatch.chdir(tmp_path)  # as the lab fixture does; a system test writes the commands' luigi.cfg here
    (tmp_path / "luigi.cfg").write_text("[qsr]\ntimezone = America/Vancouver\n[probe_section]\nkey = 1\n")
    luigi.configuration.get_config().set("qsr", "suspicious_qty_threshold", "99")
    reload_config()
    cfg = luigi.configuration.get_config()
    assert timezone() == before
    assert not cfg.has_section("probe_section")
    assert cfg.get("qsr", "suspicious_qty_threshold", "(unset)") != "99"
    assert cfg.getint("retcode", "missing_data") == 20  # the package's default, set again
