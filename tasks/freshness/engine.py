"""The freshness engine: a partition's state, the first reason it is not up to date, and the raw folders that
keep it from being built (docs/run-semantics.md). No Luigi: one engine per process answers every question
about *nodes* (:class:`Node`), walking a chain once per pass (docs/architecture.md)."""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import logging
import multiprocessing
import weakref
from collections.abc import Generator, Iterator

from tasks import forks, nextdate
from tasks.contract import arrives_with, awaited_file
from tasks.freshness import identity
from tasks.freshness.dataversions import key_versions
from tasks.freshness.inputs import Window, parse_inputs
from tasks.freshness.memo import Memo, partition_id
from tasks.freshness.node import RAW_GONE, Blocked, Node, State, raw_folders
from tasks.freshness.rawfolders import lacking_note
from tasks.freshness.rules import (
    TIE_FIX,
    built_by_newer,
    diff_rules,
    iso_time,
    newer_version,
    rules_reason,
    rules_seen,
    same_settings,
)
from tasks.storage.errors import StorageUnavailable
from tasks.storage.partitions import PartitionStore
from tasks.storage.rawzone import Refused

logger = logging.getLogger("luigi-interface")


class Engine(Memo):
    """Answers for one process (:func:`process_engine`), or for one pass when made directly (``Engine()``)."""

    # -- state ---------------------------------------------------------------------------------------
    def state(self, node: Node) -> State:
        """The node's state, from the memo or by one walk: a stack of :meth:`_steps` generators, as a chain is
        deeper than Python's recursion limit; an upstream is looked at only once the checks before it passed."""
        states = self.states
        known = self.known_state(node)
        if known is not None:
            return known
        stack = [(node, self._steps(node))]
        answer: State | None = None
        while stack:
            current, steps = stack[-1]
            try:
                up = steps.send(answer)
            except StopIteration as done:
                states[current.task_id] = answer = done.value
                stack.pop()
                continue
            self._readers.setdefault(up.task_id, set()).add(current.task_id)
            answer = self.known_state(up)
            if answer is None:
                stack.append((up, self._steps(up)))
                answer = None
        return states[node.task_id]

    def fetch_next(self, node: Node, window: Window) -> None:
        """While ``node`` builds, have a bucket fetch the next date's inputs when that partition is not ok; not
        in a forked task process (the next date may be another's) unless it builds a single-run stretch."""
        forked = multiprocessing.parent_process() is not None and not nextdate.keeps_for_next_date()
        if not window.read or not isinstance(node.key, dt.date) or forked:
            return
        zone = self.zone(node)
        if not zone.lists_at_once:
            return
        try:
            nxt = node.clone(date=node.key + dt.timedelta(days=1))
        except (TypeError, ValueError, AttributeError):
            return
        state = self.states.get(nxt.task_id)
        if state is None or state.ok or any((zone.describe(), s, d) not in self.raw for s, d in raw_folders(nxt)):
            return
        ahead = self.window(nxt)
        if ahead is not None:
            reading = {f.relpath for f in window.read}
            # not a folder another process of a single-run range reads too: one of the two checks it
            mine = [f for f in ahead.read if not nextdate.read_by_others((f.relpath.split("/")[0], f.folder_date))]
            zone.fetch_ahead([f for f in mine if f.relpath not in reading])

    def _steps(self, node: Node) -> Generator[Node, State, State]:
        """The four rules as a generator: yields an upstream node to be sent its state, returns the state."""
        store = self.store(node)
        self._at.setdefault(partition_id(store, node.key), set()).add(node.task_id)
        self._stamps[node.task_id], manifest = self._summary(store, node.key)
        kept = node.before_start()
        if kept:  # out of range: never rebuilt, so one there is what its readers read, and they read it as ok
            if manifest is not None:
                return State("ok", kept)
            return State("missing", kept.split(":")[0] + ": not built; a run builds no date before it")
        if manifest is None:
            problem = self.folder_problem(store, node.key, None)
            return State("stale", problem) if problem else State("missing", "no partition")
        if manifest.get("_corrupt"):
            return State("stale", "its manifest is empty, truncated or not JSON (interrupted write?)")
        problem = self.folder_problem(store, node.key, manifest)
        if problem:
            return State("stale", problem)
        window = self.window(node)
        gone = self.gone_folders(node, self._manifest(store, node.key)[1]) if window is None else []
        if gone:  # removed from the raw zone since (retention): no run can check or rebuild it
            return self._kept(node, manifest, gone)
        if manifest.get("rules_fingerprint") != self._seen(node)[0]:
            theirs, ours = manifest.get("rules") or {}, node.rules()
            if newer_version(theirs.get("version"), ours.get("version")):  # a run refuses to replace it: not stale
                return State("newer", built_by_newer(theirs.get("version"), ours.get("version")))
            if same_settings(theirs, ours):  # which hotels it reads changed: name the files, not their timezones
                return State("stale", self._files_changed(node, store) or rules_reason(theirs, ours, node.key))
            newer = self.newer_settings(node, manifest)
            if newer:  # the same: a run here refuses it
                return State("newer", f"{newer}; a run does not replace it")
            return State("stale", rules_reason(theirs, ours, node.key))
        if window is None:
            return State("stale", "a raw folder it read is gone")
        note = ""
        if manifest.get("input_fingerprint") != window.fingerprint or self._recent(node, manifest, window):
            stamp, full = self._manifest(store, node.key)  # the inputs are not in the summary
            if full is None or stamp != self._stamps[node.task_id]:
                return State("stale", "its manifest changed while it was checked")
            seen = manifest.get("seen_inputs")
            ok, note, seen = identity.check_inputs(self.zone(node), full, window, self.digest, seen)
            if seen is not None:
                self.remember_in_summary(store, node.key, stamp, seen_inputs=seen)
            if not ok:
                return State("stale", note)
        if manifest.get("verify_mismatch"):
            return State("stale", "daybreak verify: " + manifest["verify_mismatch"])
        recorded = manifest.get("upstream", {})
        upstream = node.upstream()
        dropped = len(set(recorded) - {up.task_id for up in upstream})
        added = [up for up in upstream if up.task_id not in recorded]  # e.g. an earlier start_date again
        if dropped:  # a later start_date: a chain's first day reads the day before no more; the books, a new day
            gone = f"it read {dropped} upstream partition{'s' if dropped > 1 else ''} it reads no more"
            return State("stale", f"{_built_without(added)}; {gone}" if added else gone)
        first_not_ok = None  # a rebuilt upstream may come out as the version this node read (early cutoff)
        for up in upstream:
            up_state = yield up
            # built by newer code: no run here replaces it, so it is read as it is, as an ok one
            if not up_state.ok and up_state.state != "newer":
                # the run rebuilds it first, and its rows then decide, whatever version is in place now: one
                # rebuilt since with other rows may come back to the rows this node read (a change undone)
                first_not_ok = first_not_ok or up_state.cause or _cause(up, up_state)
                continue
            if up.task_id not in recorded:  # not changed: it was built without it
                return State("stale", _built_without(added))
            up_manifest = self._summary(self.store(up), up.key)[1]
            version = None if up_manifest is None or up_manifest.get("_corrupt") else node.upstream_version(up_manifest)
            if recorded.get(up.task_id) != version:  # rebuilt since with other rows, and no run rebuilds it again
                return State("stale", f"upstream {label(up)} changed")
        if first_not_ok:
            return State(
                "stale",
                f"may rebuild once its upstream is rebuilt: {first_not_ok}",
                may_rebuild=True,
                cause=first_not_ok,
            )
        self.warn_unread_not_named(node, window, label(node))
        return State("ok", note)

    def _kept(self, node: Node, manifest: dict, gone: list[str]) -> State:
        """A partition whose raw folders are gone: ok as built unless verify found it damaged (docs/raw-zone.md)."""
        if manifest.get("verify_mismatch"):
            return State("stale", "daybreak verify: " + manifest["verify_mismatch"])
        reason = f"{RAW_GONE}: {', '.join(gone)}: kept as built, no run checks or rebuilds it"
        theirs, ours = manifest.get("rules") or {}, node.rules()
        if manifest.get("rules_fingerprint") != self._seen(node)[0]:
            reason += f"; built under other rules: {diff_rules(theirs, ours, node.key)}"
        return State("ok", reason)

    def _files_changed(self, node: Node, store: PartitionStore) -> str:
        """``input changed: new file ...`` when the raw files are other files than it was built from; ''."""
        window = self.window(node)
        full = self._manifest(store, node.key)[1] or {}
        if window is None or set(parse_inputs(full.get("inputs", []))) == {f.relpath for f in window.read}:
            return ""
        return identity.check_inputs(self.zone(node), full, window, self.digest)[1]

    def _recent(self, node: Node, manifest: dict, window: Window) -> bool:
        """Whether a file changed within the clock resolution of the build's listing (then it is hashed)."""
        listed = manifest.get("inputs_listed_ns")
        if listed is None:
            return False
        newest = max((f.newest for f in window.folders), default=0)
        return newest + self.zone(node).mtime_resolution_ns > listed

    def settings_at_text(self, node: Node) -> str:  # settings_at of a build of node, as its manifest records it
        return dt.datetime.fromtimestamp(self._seen(node)[1], dt.UTC).isoformat()

    def _seen(self, node: Node) -> tuple[str, float]:  # (its rules' fingerprint, settings_at): settings seen here
        return self.once_per_pass(("rules", node.rules_key()), rules_seen, node)

    def newer_settings(self, node: Node, manifest: dict) -> str:
        """Why a partition built under other rules is kept: its dataset's settings changed after this host's
        (docs/scale-out.md, "A rollout cannot be undone"); ''."""
        from tasks.settings import host_name  # here: the engine imports no Luigi until a partition's settings

        rules = node.rules()
        if same_settings(manifest.get("rules") or {}, rules):  # other input (a hotel's extract), not a rollout
            return ""
        ours_at = self._seen(node)[1]
        store = self.store(node)
        ours = node.rules_fingerprint()  # the newest settings under these rules are no reason to stop
        key = ("newest settings", str(store.data_root), store.dataset, store.sub, ours)
        newest = self.once_per_pass(key, self._summary_files.newest_settings, store, ours)
        own = (manifest.get("settings_at"), (manifest.get("built_by") or {}).get("host"))
        theirs_at, host = max((own, newest), key=lambda c: iso_time(c[0]))
        gap = iso_time(theirs_at) - ours_at  # the manifest keeps microseconds, a stat nanoseconds
        tie = abs(gap) <= 0.001 and host not in (None, "", host_name())  # one deploy, two hosts
        if gap <= 0.001 and not tie:
            return ""
        mine, theirs = (
            dt.datetime.fromtimestamp(t, dt.UTC).isoformat("T", "milliseconds")[:23] for t in (ours_at, gap + ours_at)
        )
        when = "at the same time as this host's" if tie else f"at {theirs[:23]}Z, later than this host's"
        fix = TIE_FIX if tie else "update them"
        return (  # a tie: neither host replaces the other's partitions, back and forth
            f"built under other rules; {host or 'another host'} builds {store.dataset} under settings changed {when} "
            f"({mine[:23]}Z; here -> there: {diff_rules(rules, manifest.get('rules') or {}, node.key)}): {fix}"
        )

    @contextlib.contextmanager
    def replacing(self, store: PartitionStore, key: dt.date | None) -> Iterator[None]:
        """A block that replaces partition ``key``: when it ends, even failed, what was read of it is forgotten."""
        try:
            yield
        finally:
            self.forget(store, key)
            with contextlib.suppress(OSError, StorageUnavailable):  # a cache: never fail or hide the commit's end
                self.wrote(store, key)
                self.remember_summary(store, key)

    def upstream_versions(self, node: Node) -> dict[str, str | None]:
        return {up.task_id: node.upstream_version(self.manifest(self.store(up), up.key)) for up in node.upstream()}

    def upstream_key_versions(self, node: Node) -> dict[str, dict[str, str]]:
        """Of each upstream that keeps a version of each key's rows, those versions; none for a node that reads
        one key's slice (its upstream version is that key's already). A plan compares them after a rebuild."""
        if getattr(node, "reads_a_slice", False):
            return {}
        found = {up.task_id: key_versions(self.manifest(self.store(up), up.key)) for up in node.upstream()}
        return {task_id: versions for task_id, versions in found.items() if versions is not None}

    # -- what a partition waits for ------------------------------------------------------------------
    def blocked(self, node: Node) -> Blocked:
        """The raw folders that keep ``node`` from being built now, and the partition at the root of the wait."""
        memo = self._blocked
        stack = [node]
        while stack:
            current = stack[-1]
            if current.task_id in memo:
                stack.pop()
                continue
            if self.window(current) is None:
                memo[current.task_id] = Blocked(frozenset(self.missing_folders(current)), current)
                stack.pop()
                continue
            stale = [up for up in current.upstream() if not self.state(up).ok]
            pending = [up for up in stale if up.task_id not in memo]
            if pending:
                stack.extend(pending)
                continue
            missing = frozenset().union(*(memo[up.task_id].missing for up in stale))
            root = next((memo[up.task_id].root for up in stale if memo[up.task_id].missing), None)
            memo[current.task_id] = Blocked(missing, root)
            stack.pop()
        return memo[node.task_id]

    def waiting_for(self, node: Node) -> str:
        """Why a partition cannot be built yet (a raw folder missing, here or upstream); '' when it can."""
        blocked = self.blocked(node)
        if blocked.root is None:
            return ""
        if blocked.root.task_id == node.task_id:
            zone = self.zone(node)
            empty = self.empty_root(zone)
            return (
                "raw folder missing: "
                + ", ".join(f"{s}/{d}{self._why_missing(zone, s, d)}" for s, d in self.missing_folders(node))
                + (f"; {empty}" if empty else "")
            )
        return f"upstream {blocked.root.dataset} {blocked.root.key} waits for raw data"

    def _why_missing(self, zone, source: str, date: dt.date) -> str:
        """Why a folder a partition needs counts as missing although it is there (`` (...)``), or ''."""
        note = self.without_file(zone, source, date)
        return f" ({note})" if note else absent_note(f"{source}/{date}", self.absent_because(zone, source, date))

    def without_file(self, zone, source: str, date: dt.date) -> str:
        """``there, without its ads.csv yet`` (``; it holds s001.csv``) for a folder without the file awaited,
        or without a listed hotel's extract; else ''."""
        if not self.folder_there(zone, source, date) or self.arrived(zone, source, date):
            return ""
        entries, unread = self.raw_folder(zone, source, date) or ([], [])
        if any(arrives_with(source, entry[0]) for entry in entries):  # so without a listed hotel's extract
            return f"there, {lacking_note(source, self.lacking(zone, source, date))}"
        held = [entry[0] for entry in entries] + [f"{name} ({why})" for name, why in unread]
        shown = ", ".join(sorted(held)[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        return f"there, without {awaited_file(source)} yet" + (f"; it holds {shown}" if held else "")


def _built_without(added: list[Node]) -> str:
    """``built without 2 upstream partitions it reads now: staging/x 2026-09-01, staging/x 2026-09-02``."""
    n = len(added)
    shown = ", ".join(label(up) for up in added[:3]) + (f" and {n - 3} more" if n > 3 else "")
    return f"built without {n} upstream partition{'s' if n > 1 else ''} it reads now: {shown}"


def _cause(node: Node, state: State) -> str:
    """A not-ok partition at the root of a chain, with its state and reason: ``staging/x 2026-09-11 (missing: ...)``."""
    return f"{label(node)} ({state.state}: {state.reason})".replace(": )", ")")


def label(node: Node) -> str:
    """A partition in a reason, ``staging/qsr_pos 2026-09-02``, never Luigi's task id with its hash."""
    parts = (node.dataset, node.key, getattr(node, "hotel", None), getattr(node, "store_id", None))
    return " ".join(str(x) for x in parts if x is not None)


def absent_note(folder: str, why: Refused | None) -> str:
    """Why a needed folder that is there is not read (`` (a symbolic link ...)``, `` (qsr_pos: ...)``), or ''."""
    if why is None:
        return ""
    return f" ({why.reason})" if why.name == folder else f" ({why.name}: {why.reason})"


# -- the process-wide engine ---------------------------------------------------------------------------
_process_engine = Engine()
_run: weakref.ref | None = None  # the run the current pass belongs to
_inherited: weakref.ref | None = None  # in a forked worker: the run it was forked from
_viewing = False  # within view_pass(): a question outside a run joins the view's pass


@atexit.register
def _flush_at_exit() -> None:
    _process_engine.flush()


def process_engine() -> Engine:
    return _process_engine


def engine_for_run(run: object | None) -> Engine:
    """The engine for a question within ``run`` (one ``luigi.build``; None: none): a run and its forked
    workers share one pass; another run or no run starts a new one."""
    global _run
    if run is None and _inherited is not None:
        run = _inherited()
    if run is None and _viewing:
        return _process_engine
    if run is None or _run is None or _run() is not run:
        _process_engine.new_pass()
        _run = None if run is None else weakref.ref(run)
    return _process_engine


def new_pass() -> Engine:
    """The engine with a new pass that is one snapshot (a view, a plan, verify): no state is looked at twice."""
    global _run
    _process_engine.new_pass()
    _process_engine.snapshot = True
    _run = None
    return _process_engine


@contextlib.contextmanager
def view_pass() -> Iterator[Engine]:
    """A snapshot pass (:func:`new_pass`) that every question outside a Luigi run joins until it ends; within
    another view, that view's pass."""
    global _viewing
    if _viewing:
        yield _process_engine
        return
    engine, _viewing = new_pass(), True
    try:
        yield engine
    finally:
        _viewing = False


@forks.before_each_task
def _after_fork() -> None:
    global _inherited
    _process_engine.keep_ok_states()
    _inherited = _run
