"""The freshness engine on its own: plain nodes over a real raw zone and data root, no Luigi task.

The nodes below implement the engine's Node protocol the way the Luigi tasks do (a real
PartitionStore, a real RawZone), so these tests exercise the engine's rules and memo directly:
one walk per pass whatever the depth, a write forgetting what read it, a forked process not
trusting what another process built since the fork.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import pyarrow as pa
import pytest

from tasks.freshness import engine as freshness
from tasks.freshness.dataversions import LOGICAL, logical_version
from tasks.freshness.engine import Engine
from tasks.freshness.inputs import input_line
from tasks.freshness.rules import fingerprint
from tasks.storage import store as partition_store
from tasks.storage.partitions import PartitionStore
from tasks.storage.rawzone import RawZone

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
DAY = dt.timedelta(days=1)
START = dt.date(2026, 9, 1)


@dataclass(eq=False)
class Node:
    """A dated partition of ``dataset`` that reads raw folder ``src/<date>`` (when ``source``) and the
    previous date of the same dataset (when ``chain``): hotel_booking_state's shape."""

    root: Path
    dataset: str
    date: dt.date
    source: str | None = None
    chain: bool = False
    version: str = "v1"
    calls: dict = field(default_factory=dict)  # upstream() calls per date, shared by a chain's nodes
    any_days: int = 0  # instead of src/<date>: at least one of src/<date+1 .. date+any_days>
    start_date: dt.date = START  # [daybreak] start_date: a date before it is kept as built, never rebuilt
    reads_a_slice = False  # its upstream's data version, not a key's slice of it

    @property
    def task_id(self) -> str:
        return f"{self.dataset}({self.date})"

    @property
    def key(self) -> dt.date:
        return self.date

    def store(self) -> PartitionStore:
        return PartitionStore(self.root / "data", self.dataset)

    def dataset_path(self) -> str:
        return self.dataset

    def zone(self) -> RawZone:
        return RawZone(self.root / "raw")

    def rules(self) -> dict:
        return {"version": self.version}

    def rules_fingerprint(self) -> str:
        return fingerprint(self.rules())

    def rules_key(self) -> tuple:
        return (self.dataset, self.version)

    def raw_window(self) -> list[tuple[str, dt.date]]:
        return [(self.source, self.date)] if self.source and not self.any_days else []

    def any_raw_window(self) -> list[tuple[str, dt.date]]:
        """With ``any_days``: folders ``src/<date+1 .. date+any_days>``, one of them needed (ads_daily's shape)."""
        return [(self.source, self.date + k * DAY) for k in range(1, self.any_days + 1)] if self.source else []

    def optional_raw_window(self) -> list[tuple[str, dt.date]]:
        return []

    def accepts_input(self, name: str) -> bool:
        return name.endswith(".csv")

    def upstream(self) -> list[Node]:
        self.calls[self.date] = self.calls.get(self.date, 0) + 1
        if not self.chain or self.date <= START:
            return []
        return [self.at(self.date - DAY)]

    def at(self, date: dt.date) -> Node:
        return replace(self, date=date)

    def upstream_version(self, manifest: dict | None) -> str | None:
        return (manifest or {}).get("data_version")

    def before_start(self) -> str:
        return f"before [daybreak] start_date {self.start_date}: kept" if self.date < self.start_date else ""


def build(engine: Engine, node: Node, value: int = 1) -> dict:
    """Write ``node``'s partition the way the run template does: inputs, rules and upstream recorded."""
    window = engine.window(node)
    manifest = {
        "rules": node.rules(),
        "rules_fingerprint": node.rules_fingerprint(),
        "inputs": [input_line(f) for f in window.read],
        "input_fingerprint": window.fingerprint,
        "upstream": engine.upstream_versions(node),
    }
    table = pa.table({"x": [value]})
    manifest.update(data_version=logical_version(table), data_version_kind=LOGICAL)
    store = engine.store(node)
    with engine.replacing(store, node.date):
        return store.write(node.date, table, manifest)


def raw(tmp_path: Path, source: str, date: dt.date, name: str = "a.csv", text: str = "x\n1\n") -> Path:
    path = tmp_path / "raw" / source / date.isoformat() / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def chain(tmp_path) -> list[Node]:
    """A 40-date chain, every date built in order."""
    first = Node(tmp_path, "marts/state", START, source="events", chain=True)
    nodes = [first.at(START + k * DAY) for k in range(40)]
    engine = Engine()
    for node in nodes:
        raw(tmp_path, "events", node.date)
        build(engine, node)
    return nodes


@pytest.mark.system
def test_importing_the_engine_and_the_transforms_loads_no_luigi():
    code = (
        "import sys\n"
        "import tasks.freshness.engine, tasks.storage.partitions, tasks.storage.rawzone, tasks.calendar\n"
        "import tasks.transforms.qsr_pos, tasks.transforms.hotels, tasks.transforms.ads, tasks.transforms.stores\n"
        "print(sorted(m for m in sys.modules if m == 'luigi' or m.startswith('luigi.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_one_pass_walks_a_chain_once_whatever_is_asked_first(chain):
    engine = Engine()
    chain[0].calls.clear()
    for node in reversed(chain):  # the newest first: its answer needs the whole chain below it
        assert engine.state(node).ok
    for node in chain:
        assert engine.state(node).ok
    assert set(chain[0].calls.values()) == {1}  # each date's rules looked at once, not once per question


def test_a_chain_deeper_than_the_recursion_limit_is_checked_without_recursing(tmp_path):
    first = Node(tmp_path, "marts/deep", START, chain=True)
    nodes = [first.at(START + k * DAY) for k in range(300)]
    engine = Engine()
    for node in nodes:
        build(engine, node)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(__import__("inspect").stack()) + 100)  # far fewer frames than 300 links need
    try:
        state = Engine().state(nodes[-1])
    finally:
        sys.setrecursionlimit(limit)
    assert state.ok


def test_a_partition_kept_before_start_date_is_ok_for_its_readers_after_a_rule_change(chain):
    """start_date moves to the chain's sixth date and its rules change: the dates before it are kept as built
    (no run rebuilds them), so once the others are rebuilt under the new rules, the sixth reads the fifth as
    an ok one, and the whole chain is ok."""
    moved = [replace(n, start_date=chain[5].date, version="v2") for n in chain]
    engine = Engine()
    for node in moved[5:]:
        build(engine, node)
    engine = Engine()
    assert engine.state(moved[4]) == freshness.State("ok", f"before [daybreak] start_date {chain[5].date}: kept")
    assert engine.state(moved[5]).ok and engine.state(moved[-1]).ok
    assert Engine().state(replace(moved[4], start_date=START)).reason == "rules changed: version 'v1' -> 'v2'"


def test_a_write_in_this_process_forgets_every_state_that_read_it(chain):
    engine = freshness.process_engine()
    engine.new_pass()
    assert engine.state(chain[-1]).ok
    build(engine, chain[10], value=2)  # another data version, written here
    state = engine.state(chain[-1])  # same pass, no new look at anything else
    assert state.state == "stale" and "changed" in engine.state(chain[11]).reason
    assert engine.state(chain[9]).ok and engine.state(chain[10]).ok


def test_a_manifest_rewritten_by_another_process_is_read_again_and_an_unchanged_one_is_not(chain, monkeypatch):
    engine = Engine()
    assert engine.state(chain[-1]).ok
    other = Engine()  # another process: its write does not reach this engine
    manifest = chain[5].store().read_manifest(chain[5].date)
    chain[5].store().write(chain[5].date, pa.table({"x": [9]}), {**manifest, "rules_fingerprint": "old"})
    assert engine.state(chain[-1]).ok  # a snapshot until the next pass
    reads = []
    real = partition_store.parse_manifest
    monkeypatch.setattr(partition_store, "parse_manifest", lambda data: reads.append(real(data)) or reads[-1])
    engine.new_pass()
    assert engine.state(chain[-1]).state == "stale"
    assert engine.state(chain[5]).reason.startswith("rules changed")
    assert [m["rules_fingerprint"] for m in reads] == ["old"]  # only the file that changed was parsed again
    assert other.state(chain[5]).state == "stale"


def test_refresh_reads_a_node_again_under_the_memo(chain, tmp_path):
    engine = Engine()
    assert engine.state(chain[3]).ok
    raw(tmp_path, "events", chain[3].date, "late.csv")
    assert engine.state(chain[3]).ok  # the pass's snapshot of the raw zone
    engine.refresh(chain[3])
    assert engine.state(chain[3]).reason == f"input changed: new file events/{chain[3].date}/late.csv"


def test_blocked_names_the_missing_folder_and_the_partition_at_the_root_of_the_wait(tmp_path):
    first = Node(tmp_path, "marts/state", START, source="events", chain=True)
    nodes = [first.at(START + k * DAY) for k in range(6)]
    for node in nodes:
        if node.date != START + 2 * DAY:
            raw(tmp_path, "events", node.date)
    engine = Engine()
    blocked = engine.blocked(nodes[5])
    assert blocked.missing == {("events", START + 2 * DAY)}
    assert blocked.root is not None and blocked.root.date == START + 2 * DAY
    assert engine.waiting_for(nodes[5]) == f"upstream marts/state {START + 2 * DAY} waits for raw data"
    assert engine.waiting_for(nodes[2]) == f"raw folder missing: events/{START + 2 * DAY}"
    assert engine.blocked(nodes[1]).missing == frozenset() and engine.waiting_for(nodes[1]) == ""


def test_a_forked_process_sees_what_another_built_since_the_fork_and_keeps_the_ok_states(chain):
    """Luigi's workers are forked from the scheduling process: a worker must see a partition another
    worker built since, or it would refuse to run what depends on it ("unfulfilled dependency")."""
    engine = freshness.process_engine()
    engine.new_pass()
    missing = Node(chain[0].root, "staging/other", START, source="other")  # built by a first forked process
    raw(chain[0].root, "other", START)
    assert engine.state(missing).state == "missing" and engine.state(chain[-1]).ok
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            build(freshness.process_engine(), missing)
        finally:
            os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    pid = os.fork()
    if pid == 0:  # pragma: no cover - a second worker, forked after the first one's write
        ok = False
        try:
            child = freshness.process_engine()
            ok = chain[-1].task_id in child.states and child.state(missing).ok  # ok states kept, not the rest
        finally:
            os._exit(0 if ok else 1)
    assert os.waitpid(pid, 0)[1] == 0


def test_what_another_process_built_since_it_was_found_missing_is_seen_in_the_same_pass(tmp_path):
    """Two runs sharing a central scheduler: one builds what the other found missing while scheduling,
    and the other then checks it before running what depends on it."""
    first = Node(tmp_path, "marts/state", START, source="events", chain=True)
    nodes = [first.at(START + k * DAY) for k in range(5)]
    for node in nodes:
        raw(tmp_path, "events", node.date)
    engine = Engine()
    engine.list_dataset(nodes[0].store())  # as a range check does
    assert [engine.state(n).state for n in nodes] == ["missing"] * 5
    other = Engine()  # the other process: its writes do not reach this engine
    for node in nodes[:4]:
        build(other, node)
    assert engine.state(nodes[3]).ok  # the chain below it was missing too: each link looked at again
    assert engine.state(nodes[4]).state == "missing"
    assert engine.passes == 1


def test_a_new_process_reads_no_manifest_when_its_summary_is_current(chain, monkeypatch):
    """The summary file the first engine keeps answers the next process (Engine() is one) without
    parsing a single manifest, and a manifest replaced since is parsed again (its new stamp)."""
    first = Engine()
    assert first.state(chain[-1]).ok
    first.flush()
    summary_file = chain[0].store().data_root / "_state" / "summaries" / "marts/state.json"
    assert summary_file.is_file()
    reads = []
    real = partition_store.parse_manifest
    monkeypatch.setattr(partition_store, "parse_manifest", lambda data: reads.append(real(data)) or reads[-1])
    assert Engine().state(chain[-1]).ok
    assert reads == []
    store = chain[7].store()
    manifest = store.read_manifest(chain[7].date)
    store.write(chain[7].date, pa.table({"x": [1]}), {**manifest, "rules_fingerprint": "old"})
    reads.clear()  # the writer reads the manifest it replaces
    state = Engine().state(chain[7])
    assert state.state == "stale" and state.reason.startswith("rules changed")
    assert [m["rules_fingerprint"] for m in reads] == ["old"]


def test_a_corrupt_or_foreign_summary_file_only_costs_a_parse(chain):
    first = Engine()
    assert first.state(chain[-1]).ok
    first.flush()
    summary_file = chain[0].store().data_root / "_state" / "summaries" / "marts/state.json"
    entries = ('[[1, 2, 3], "x"]', "[null, {}]", "7", '{"a": 1}', "[[], {}, 3]")
    junks = ["{not json", "[]", *(f'{{"format": 1, "partitions": {{"2026-09-02": {e}}}}}' for e in entries)]
    for junk in junks:
        summary_file.write_text(junk)
        assert Engine().state(chain[-1]).ok
    store = chain[3].store()
    manifest = store.read_manifest(chain[3].date)
    store.write(chain[3].date, pa.table({"x": [1]}), {**manifest, "rules_fingerprint": "old"})
    summary_file.write_text("{not json")
    assert Engine().state(chain[3]).state == "stale"


def test_a_summary_is_never_taken_for_a_different_manifest(chain):
    """A summary entry whose stamp is not the manifest file's is not used, even when a hand-edited
    summary says the partition is fine."""
    first = Engine()
    assert first.state(chain[-1]).ok
    first.flush()
    store = chain[4].store()
    manifest = store.read_manifest(chain[4].date)
    store.write(chain[4].date, pa.table({"x": [1]}), {**manifest, "rules_fingerprint": "old"})
    summary_file = store.data_root / "_state" / "summaries" / "marts/state.json"
    doc = __import__("json").loads(summary_file.read_text())
    entry = doc["partitions"][str(chain[4].date)]
    entry[1]["rules_fingerprint"] = chain[4].rules_fingerprint()  # an old stamp with a "current" content
    summary_file.write_text(__import__("json").dumps(doc))
    assert Engine().state(chain[4]).state == "stale"


def test_a_window_of_which_one_folder_is_needed_reads_those_present_and_waits_for_the_first(tmp_path, monkeypatch):
    node = Node(tmp_path, "staging/restated", START, source="exports", any_days=3)
    engine = Engine()
    assert engine.window(node) is None
    assert engine.missing_folders(node) == [("exports", START + DAY)]
    assert engine.blocked(node).missing == {("exports", START + DAY)}
    assert engine.waiting_for(node) == f"raw folder missing: exports/{START + DAY}"
    raw(tmp_path, "exports", START + 3 * DAY)  # only the last of the three
    engine = Engine()
    assert [f.relpath for f in engine.window(node).read] == [f"exports/{START + 3 * DAY}/a.csv"]
    assert engine.missing_folders(node) == [] and engine.waiting_for(node) == ""
    assert engine.state(node) == freshness.State("missing", "no partition")
    build(engine, node)
    assert Engine().state(node).ok
    raw(tmp_path, "exports", START + DAY)  # an earlier one, late: it is read too, so the partition is stale
    assert Engine().state(node).reason == f"input changed: new file exports/{START + DAY}/a.csv"
    # one pass lists each folder once, however many dates read it: 3 dates x 3 folders, 5 distinct
    scans = []
    real = RawZone.scan_folder_all
    monkeypatch.setattr(RawZone, "scan_folder_all", lambda zone, s, d: scans.append(d) or real(zone, s, d))
    engine = Engine()
    for k in range(3):
        later = Node(tmp_path, "staging/restated", START + k * DAY, source="exports", any_days=3)
        assert engine.window(later) is not None and engine.waiting_for(later) == ""
    assert sorted(scans) == [START + k * DAY for k in range(1, 6)]


def test_a_stale_reason_names_only_the_entries_of_a_settings_table_that_changed():
    hotels = {"H1": "America/Toronto", "H2": "Europe/Paris"}
    old = {"version": 1, "timezones": hotels, "max_rooms": 1000}
    new = {"version": 1, "timezones": {**hotels, "H9": "Asia/Tokyo"}, "max_rooms": 900}
    from tasks.freshness.rules import diff_rules

    assert diff_rules(old, new) == "max_rooms 1000 -> 900, timezones[H9] (none) -> 'Asia/Tokyo'"
