"""The blocks of the docs that the code holds (tasks/docs.py) are what the code makes now: the datasets
table, the settings table and the README's dataset names. A failure names the command that rewrites them."""

from __future__ import annotations

import shutil

import pytest

from tasks import catalogue, docs, settings
from tasks.guard import DATES

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("block", docs.BLOCKS, ids=lambda b: b.name)
def test_each_generated_block_is_what_the_code_makes(block):
    held = docs.current(block)
    assert held is not None, f"{block.file}: no <!-- {block.name}:start --> / <!-- {block.name}:end --> markers"
    assert held == block.make(), f"{block.file}: the {block.name} block is out of date; run `python -m tasks.docs`"


def test_the_settings_table_has_every_key_of_every_section_with_its_range():
    table = docs.settings_table().splitlines()[2:]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in table]
    expected = [(name, key) for name, section in settings.SECTIONS.items() for key, _ in section.get_params()]
    assert [(c[0], c[1]) for c in cells] == expected
    by_key = {(c[0], c[1]): c for c in cells}
    # worked out from tasks/settings.py by hand: defaults, RANGES, the int32 cap, the dates' bounds
    assert by_key["qsr", "suspicious_qty_threshold"][2:4] == ["`20`", "a whole number, 0 to 2147483647"]
    assert by_key["qsr", "max_reject_share"][2:4] == ["`0.05`", "a number, 0 to 1"]
    assert by_key["daybreak", "lock_wait_s"][2:4] == ["`900`", "a number, 0 or more"]
    assert by_key["daybreak", "start_date"][2:4] == ["`2026-09-01`", f"a date, {DATES[0]} to today"]
    assert by_key["hotels", "max_rate"][2:4] == ["`100000`", "a number, 0.01 or more"]
    assert by_key["sftp", "key_filename"][2] == "(none)"
    assert by_key["s3", "lease_seconds"][3] == "a number, 1 to 3600"
    for (section, key), (low, high) in settings.RANGES.items():
        valid = by_key[section, key][3]
        assert f"{low:g}" in valid and (high is None or f"{high:g}" in valid), (section, key, valid)


def test_the_readme_names_every_dataset_the_status_command_takes():
    from tasks.cli import DATASET_NAMES

    assert docs.dataset_names().count("|") == len(DATASET_NAMES) - 1
    assert all(name in docs.dataset_names() for name in catalogue.names())


def test_the_command_rewrites_a_block_out_of_date_and_check_says_which(tmp_path):
    for block in docs.BLOCKS:
        (tmp_path / block.file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(docs.REPO / block.file, tmp_path / block.file)
    assert docs.out_of_date(tmp_path) == []
    ops = tmp_path / "docs" / "operations.md"
    text = ops.read_text()
    ops.write_text(text.replace("| qsr | max_reject_share | `0.05` |", "| qsr | max_reject_share | `0.1` |"))
    assert docs.out_of_date(tmp_path) == [
        "docs/operations.md: the settings block is out of date; run `python -m tasks.docs`"
    ]
    assert docs.update(tmp_path) == ["docs/operations.md"]
    assert ops.read_text() == text and docs.out_of_date(tmp_path) == []
    assert docs.update(tmp_path) == []  # nothing to do: nothing written
