"""``daybreak demo`` (issue 15, item 4): works with no arguments from any folder, writes its table to
its own output, and touches the tracked README.md and docs/backfills.md only when asked to."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tasks import demo, settings
from tests.conftest import REPO

pytestmark = pytest.mark.luigi


@pytest.mark.system
def test_demo_with_no_arguments_writes_its_table_to_its_own_output(tmp_path):
    tracked = {p: p.read_bytes() for p in (REPO / "README.md", REPO / "docs" / "backfills.md")}
    daybreak = Path(sys.executable).parent / "daybreak"
    env = {k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PATH"}
    proc = subprocess.run([str(daybreak), "demo"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    table = (tmp_path / "data" / "demo" / "backfills.md").read_text()
    rows = re.findall(r"^\| (\d)\. .*? \| (\d+) \| [\d.]+ \| (\d+) \|$", table, re.M)
    # the counts docs/backfills.md promises: 10, 60 (10 stale + 50 missing), 1, 2 (a late file of
    # folder D is read by partitions D-1 and D), 0
    assert rows == [("1", "10", "0"), ("2", "60", "0"), ("3", "1", "0"), ("4", "2", "0"), ("5", "0", "0")]
    assert not (tmp_path / "data" / "demo" / "data" / "demo").exists()
    assert {p: p.read_bytes() for p in tracked} == tracked


def test_update_docs_writes_the_table_between_the_markers(tmp_path, monkeypatch):
    for rel in ("README.md", "docs/backfills.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    monkeypatch.setattr(settings, "PROJECT_ROOT", tmp_path)  # a copy of the tracked files, not the repository's
    table = "| step | partitions run | wall time (s) | exit |\n|---|---:|---:|---:|\n| 1. x | 10 | 1.00 | 0 |\n"
    (tmp_path / "out").mkdir()
    assert demo.write_output(tmp_path / "out", table) == [tmp_path / "out" / "backfills.md"]
    assert (tmp_path / "README.md").read_bytes() == (REPO / "README.md").read_bytes()
    written = demo.write_output(tmp_path / "out", table, update_docs=True)
    assert written == [tmp_path / "out" / "backfills.md", tmp_path / "docs" / "backfills.md", tmp_path / "README.md"]
    for doc in written[1:]:
        assert f"<!-- demo:start -->\n{table}<!-- demo:end -->" in doc.read_text()


@pytest.mark.system
def test_demo_never_deletes_a_folder_it_did_not_make(tmp_path):
    """``daybreak demo --workdir .`` from a project folder exits 2 and deletes nothing; a folder an
    earlier demo made (its marker) is deleted and remade."""
    mine = tmp_path / "project"
    (mine / "notes").mkdir(parents=True)
    (mine / "notes" / "keep.txt").write_text("mine")
    daybreak = Path(sys.executable).parent / "daybreak"
    env = {k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PATH"}
    proc = subprocess.run([str(daybreak), "demo", "--workdir", "."], cwd=mine, env=env, capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert "is the current folder or holds it" in proc.stderr and "Traceback" not in proc.stderr
    assert (mine / "notes" / "keep.txt").read_text() == "mine"
    other = subprocess.run(
        [str(daybreak), "demo", "--workdir", str(mine)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert other.returncode == 2 and "holds files the demo did not make" in other.stderr, other.stderr
    assert (mine / "notes" / "keep.txt").read_text() == "mine"
    link = tmp_path / "link"
    link.symlink_to(mine)
    with pytest.raises(SystemExit) as exit_:
        demo.prepare_workdir(link)
    assert exit_.value.code == 2 and (mine / "notes" / "keep.txt").exists()
    earlier = tmp_path / "earlier"
    demo.prepare_workdir(earlier)
    (earlier / "data").mkdir()
    (earlier / "backfills.md").write_text("old table")
    demo.prepare_workdir(earlier)  # an earlier demo's folder: emptied and used again
    assert sorted(p.name for p in earlier.iterdir()) == [demo.MARKER]
    empty = tmp_path / "empty"
    empty.mkdir()
    demo.prepare_workdir(empty)  # an empty folder is used as it is
    assert sorted(p.name for p in empty.iterdir()) == [demo.MARKER]


@pytest.mark.system
def test_a_demo_too_small_for_its_steps_is_one_line_and_the_smallest_runs(tmp_path):
    """Before, ``--days 1 --stores 1`` was a traceback (the partition step 3 deletes was never built: its
    only file was the one held back as late), and ``--days 5`` exited 1 without a word."""
    daybreak = Path(sys.executable).parent / "daybreak"
    env = {k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PATH"}

    def run(*args):
        cmd = [str(daybreak), "demo", "--workdir", str(tmp_path / "d"), *args]
        return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)

    for args, message in (
        (("--days", "5"), "argument --days: 5: expected a whole number, from 12"),
        (("--stores", "1"), "argument --stores: 1: expected a whole number, from 2"),
    ):
        proc = run(*args)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    proc = run("--days", "12", "--stores", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.findall(r"exit (\d+)", proc.stdout) == ["0"] * 5, proc.stdout
