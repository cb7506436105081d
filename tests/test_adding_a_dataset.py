"""Adding a dataset is the short list of docs/architecture.md ("Adding a dataset"). A real diff,
tests/adding_a_dataset.patch, adds delivery_daily (from a new source, ``delivery/<D>/<store_id>.csv``);
applied to a copy of this checkout, with the generated docs made again, the layers hold, the code is
clean, and the new dataset's tests pass beside the catalogue's, the contract's and the sample's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.system

REPO = Path(__file__).resolve().parent.parent
PATCH = REPO / "tests" / "adding_a_dataset.patch"
BIN = Path(sys.executable).parent

# the short list (docs/architecture.md, "Adding a dataset"), for a dataset from a new source without settings
SHORT_LIST = {
    "docs/raw-zone.md",  # the contract's section for the new source
    "tasks/catalogue.py",  # the entry
    "tasks/transforms/delivery.py",  # the transform, with its version
    "tasks/delivery.py",  # the recipe
    ".importlinter",  # the recipe's place among the recipes' layer
    "tasks/sample/delivery.py",  # the sample writer of the new source
    "tests/test_delivery.py",  # the dataset's tests
    "tests/test_bad_input.py",  # the new source's hostile row
    "tests/test_sample.py",  # the new source's header in the sample
}


def _run(cmd: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(cwd)}  # the copy's tasks and tests, not this checkout's
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_diff_touches_the_short_list_only():
    names = subprocess.run(["git", "apply", "--numstat", str(PATCH)], capture_output=True, text=True, check=True)
    assert {line.split("\t")[2] for line in names.stdout.splitlines()} == SHORT_LIST


def test_a_dataset_added_by_the_short_list_is_built_checked_and_shown(tmp_path):
    copy = tmp_path / "daybreak"
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for rel in filter(None, listed.decode().split("\0")):
        if (REPO / rel).is_file():
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, copy / rel)
    applied = _run(["git", "apply", str(PATCH)], copy)
    assert applied.returncode == 0, applied.stderr
    docs = _run([sys.executable, "-m", "tasks.docs"], copy)  # the datasets table, the README's names
    assert docs.returncode == 0, docs.stderr
    assert "delivery_daily" in (copy / "docs" / "datasets.md").read_text(encoding="utf-8")
    for check in (["lint-imports"], ["ruff", "check", "."], ["ruff", "format", "--check", "."]):
        done = _run([str(BIN / check[0]), *check[1:]], copy)
        assert done.returncode == 0, (check, done.stdout[-3000:], done.stderr[-3000:])
    tests = [
        "tests/test_delivery.py",
        "tests/test_catalogue.py",
        "tests/test_docs_generated.py",
        "tests/test_sample.py",
        "tests/test_bad_input.py::test_a_control_character_never_reaches_a_partition",
        "tests/test_end_to_end.py::test_every_task_declares_its_contract_dataset_path",
    ]
    run = _run([sys.executable, "-m", "pytest", "-v", "-n", "0", "-p", "no:cacheprovider", *tests], copy)
    assert run.returncode == 0, run.stdout[-5000:]
    ran = {line.split(" ")[0] for line in run.stdout.splitlines() if line.endswith("%]") and " PASSED " in line}
    assert {t for t in ran if t.startswith("tests/test_delivery.py::")} == {
        "tests/test_delivery.py::test_a_range_builds_each_date_and_quarantines_a_bad_row",
        "tests/test_delivery.py::test_status_and_plan_know_it",
        "tests/test_delivery.py::test_the_sample_writes_the_source",
    }
    assert any("[delivery-" in t for t in ran)  # the new source's hostile rows were quarantined
