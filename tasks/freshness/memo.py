"""What the freshness engine reads and remembers; it reads the data root only through here. What is kept and
when it is forgotten: docs/architecture.md ("A raw file becomes a partition", "What is remembered")."""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from tasks.freshness.inputs import Entries, FolderInputs, Window
from tasks.freshness.node import Blocked, Node, State, raw_folders
from tasks.freshness.rawfolders import RawFolders
from tasks.freshness.summaries import SummaryFiles, summary
from tasks.storage import partitions
from tasks.storage.layout import DATA_FILE, strays_reason
from tasks.storage.partitions import PartitionStore
from tasks.storage.rawzone import RawZone, Refused

logger = logging.getLogger("luigi-interface")


def partition_id(store: PartitionStore, key: dt.date | None) -> tuple:
    return (store.root, store.sub, key)


class Memo(RawFolders):
    """What an engine remembers, and reads of the raw zone and the data root."""

    def __init__(self, stores_too: bool = True):
        self._parsed: dict[tuple, tuple[tuple, dict | None]] = {}  # partition -> (stamp, content)
        self._summary_files = SummaryFiles()
        self._accepts: dict[tuple, bool] = {}  # (node class, file name) -> accepts_input (by name alone)
        self._pid = os.getpid()
        self.passes = 0
        self.new_pass(stores_too)

    # -- the memo ------------------------------------------------------------------------------------
    def new_pass(self, stores_too: bool = True) -> None:
        """Forget the raw zone and every state, and unless ``stores_too`` is False, the stores' listings."""
        self.flush()
        if stores_too:
            partitions.new_pass()
        self.passes += 1
        self.raw: dict[tuple, Entries | None] = {}
        self.sources: dict[tuple[str, str], list[Refused]] = {}  # (zone, source) -> entries no partition reads
        self.listed: dict[Path, set[dt.date]] = {}
        self.manifests: dict[tuple, tuple[tuple | None, dict | None]] = {}
        self.summaries: dict[tuple, tuple[tuple | None, dict | None]] = {}
        self.states: dict[str, State] = {}
        self.memo: dict = {}
        # raw folder relpath -> (zone, file) -> content hash, or the RawFileChanged its read raised
        self.digests: dict[str, dict[tuple, str | Exception]] = {}
        self._blocked: dict[str, Blocked] = {}
        self._readers: dict[str, set[str]] = {}  # task id -> task ids whose state read its state
        self._at: dict[tuple, set[str]] = {}  # partition -> task ids of its states
        self._stamps: dict[str, tuple | None] = {}  # task id -> its manifest's stamp when its state was found
        self.first_seen: dict[tuple, tuple | None] = {}  # partition -> its stamp at first look, or as written
        self.snapshot = False  # a view's pass: a state is never looked at again within it
        self._early: dict[tuple, tuple[float, Future]] = {}  # raw folder -> (when, its listing), list_early
        # found not ok just now by a bulk check: Luigi's check as it schedules each takes that answer once
        self.just_found: set[str] = set()
        self.warned_unread: set[str] = set()  # task ids: warn_unread_not_named said it in this run

    def keep_ok_states(self) -> None:
        """A new pass that keeps the ok states (a forked worker: another worker builds only what was not ok)."""
        ok = {k: v for k, v in self.states.items() if v.ok}
        readers = {k: {r for r in v if r in ok} for k, v in self._readers.items() if k in ok}
        at = {k: {t for t in v if t in ok} for k, v in self._at.items()}
        stamps = {k: v for k, v in self._stamps.items() if k in ok}
        sources = self.sources  # reported once per run, not per task
        first_seen = self.first_seen  # the run's, in every process of it
        warned = self.warned_unread
        self.new_pass()
        self.states, self._readers, self._at, self._stamps, self.sources = ok, readers, at, stamps, sources
        self.first_seen, self.warned_unread = first_seen, warned

    def flush(self) -> None:
        """Write the manifest summaries learned, from the process that made the engine only."""
        if os.getpid() == self._pid:
            self._summary_files.flush()

    def once_per_pass(self, key, compute: Callable, *args):
        if key not in self.memo:
            self.memo[key] = compute(*args)
        return self.memo[key]

    def forget(self, store: PartitionStore, key: dt.date | None) -> None:
        """Partition ``key`` was (re)written: drop what was read of it, its state and its readers' states."""
        part = partition_id(store, key)
        self.manifests.pop(part, None)
        self.summaries.pop(part, None)
        self.listed.pop(store.root, None)
        self._blocked.clear()
        todo = list(self._at.pop(part, ()))
        while todo:
            task_id = todo.pop()
            self.states.pop(task_id, None)
            todo.extend(self._readers.pop(task_id, ()))

    def refresh(self, node: Node) -> None:
        """Read ``node``'s manifest, raw folders and upstream manifests again on the next question."""
        store = self.store(node)
        folders = set()
        for source, date in raw_folders(node):
            self.raw.pop((self.zone(node).describe(), source, date), None)
            self.memo.pop(("select", type(node), source, date), None)
            self.memo.pop(("lacking", self.zone(node).describe(), source, date), None)
            folders.add(self.zone(node).folder_relpath(source, date))
        for folder in folders:
            self.digests.pop(folder, None)  # hashed again too: a same-size re-send within the mtime resolution
        self.scan_ahead([node])
        for up in node.upstream():
            self.manifests.pop(partition_id(self.store(up), up.key), None)
            self.summaries.pop(partition_id(self.store(up), up.key), None)
            self.store(up).refresh(up.key)
        store.refresh(node.key)
        self.forget(store, node.key)

    def known_state(self, node: Node) -> State | None:
        """The remembered state, if any; one not ok only while its manifest is unchanged (another worker may
        have built it)."""
        state = self.states.get(node.task_id)
        if state is None or state.ok or self.snapshot:
            return state
        if node.task_id in self.just_found:  # found so a moment ago; the build re-checks under its lock
            self.just_found.discard(node.task_id)
            return state
        store = self.store(node)
        if self._stamps.get(node.task_id) == store.manifest_stamp(node.key, fresh=True):
            return state
        store.refresh(node.key)  # another process wrote it
        self.forget(store, node.key)
        return None

    # -- what is read --------------------------------------------------------------------------------
    def zone(self, node: Node) -> RawZone:
        return self.once_per_pass("zone", node.zone)

    def store(self, node: Node) -> PartitionStore:
        return self.once_per_pass(("store", node.dataset_path()), node.store)

    def read_summaries(self, store: PartitionStore) -> None:
        """Read the dataset's manifest summaries now (a bucket: while other requests are out)."""
        self._summary_files.load(store)

    def check_many(self, nodes: list[Node]) -> None:
        """Before the states of many partitions are asked at once: on a bucket, each dataset listed and its
        summaries read while the raw folders are listed; again, one listing anew rather than a HEAD each."""
        stores: dict[tuple, tuple[PartitionStore, list[Node]]] = {}
        for node in nodes:
            store = self.store(node)
            stores.setdefault((store.root, store.sub), (store, []))[1].append(node)
        remote = [n for n in nodes if raw_folders(n) and self.zone(n).lists_at_once]
        asked, again = [], []
        with ThreadPoolExecutor(2, thread_name_prefix="list-dataset") as pool:
            for store, group in stores.values():
                states = [self.states.get(n.task_id) for n in group]
                found = [] if self.snapshot else [n for n, s in zip(group, states, strict=True) if s and not s.ok]
                if found and store.relist():  # a bucket: what any process committed since, in one listing
                    self._summary_files.take_handoff()  # and the summaries of what this one's workers built
                    self.listed.pop(store.root, None)
                    again.append((store, found))
                if store.root not in self.listed and (remote or getattr(store.backend, "bucket", None)):
                    asked += [pool.submit(self.list_dataset, store), pool.submit(self.read_summaries, store)]
            self.scan_ahead(remote)
        for future in asked:
            future.result()
        for store, found in again:
            for node in found:
                if self._stamps.get(node.task_id) == store.manifest_stamp(node.key):
                    self.just_found.add(node.task_id)  # its manifest as it was: the state holds for the next question
                else:
                    self.forget(store, node.key)
            self.list_dataset(store)  # from the listing just made

    def list_dataset(self, store: PartitionStore) -> None:
        """List the dataset folder once, so that an absent partition costs no file lookup."""
        if store.root not in self.listed:
            self.listed[store.root] = store.listed_dates()

    def manifest(self, store: PartitionStore, key: dt.date | None) -> dict | None:
        return self._manifest(store, key)[1]

    def summary(self, store: PartitionStore, key: dt.date | None) -> dict | None:
        """The manifest without its list of inputs (:mod:`tasks.freshness.summaries`)."""
        return self._summary(store, key)[1]

    def _manifest(self, store: PartitionStore, key: dt.date | None) -> tuple[tuple | None, dict | None]:
        """(stamp of the manifest as read, its content), once per pass."""
        part = partition_id(store, key)
        if part not in self.manifests:
            listed = self.listed.get(store.root) if key is not None else None
            self.manifests[part] = (None, None) if listed is not None and key not in listed else self._read(store, key)
            self.first_seen.setdefault(part, self.manifests[part][0])
        return self.manifests[part]

    def _read(self, store: PartitionStore, key: dt.date | None) -> tuple[tuple | None, dict | None]:
        """The manifest, parsed again only when its stamp changed."""
        part = partition_id(store, key)
        stamp, content = store.read_manifest_stamped(key, self._parsed.get(part))
        if content is not None:
            self._parsed[part] = (stamp, content)
        return stamp, content

    def changed_since_first_look(self, store: PartitionStore, key: dt.date | None) -> bool:
        """Whether another writer replaced the partition's manifest since this pass first looked at it."""
        part = partition_id(store, key)
        return part in self.first_seen and self.first_seen[part] != store.manifest_stamp(key)

    def wrote(self, store: PartitionStore, key: dt.date | None) -> None:
        """This process replaced the partition: what it wrote counts as what the pass saw."""
        self.first_seen[partition_id(store, key)] = store.manifest_stamp(key)

    def remember_summary(self, store: PartitionStore, key: dt.date | None) -> None:
        """Remember the summary of a manifest just written, so that a run after a build writes nothing."""
        stamp, content = store.read_manifest_stamped(key, None)
        if stamp is not None and content is not None and not content.get("_corrupt"):
            self._summary_files.put(store, key, stamp, summary(content))

    def remember_in_summary(self, store: PartitionStore, key: dt.date | None, stamp: tuple, **learned) -> None:
        """Remember in the manifest's summary what a check learned (``seen_inputs``, ``refused_inputs``)."""
        part = partition_id(store, key)
        known = self.summaries.get(part)
        if known is None or known[0] != stamp or known[1] is None:
            return
        self.summaries[part] = (stamp, {**known[1], **learned})
        self._summary_files.put(store, key, stamp, self.summaries[part][1])

    def unread_not_named(self, node: Node, window: Window) -> list[dict[str, str]]:
        """The files of ``node``'s window not read that its manifest does not name (they came after its build)."""
        store = self.store(node)
        stamp, manifest = self._summary(store, node.key)
        named = (manifest or {}).get("refused_inputs")
        if named is None:
            named = (self.manifest(store, node.key) or {}).get("refused_inputs") or []
            self.remember_in_summary(store, node.key, stamp, refused_inputs=named)
        known = {r.get("path") for r in named if isinstance(r, dict)}
        return [r for r in window.refused if r["path"] not in known]

    def warn_unread_not_named(self, node: Node, window: Window, label: str) -> None:
        """Warn, once per pass and not in a view's, of unread files an up-to-date manifest does not name."""
        if self.snapshot or node.task_id in self.warned_unread or not any(f.refused for f in window.folders):
            return
        new = self.unread_not_named(node, window)
        if new:
            self.warned_unread.add(node.task_id)
            files = "; ".join(f"{r['path']} ({r['reason']})" for r in new)
            logger.warning(
                "%s: up to date; %d raw file(s) of its window not read, not in its manifest: %s", label, len(new), files
            )

    def _summary(self, store: PartitionStore, key: dt.date | None) -> tuple[tuple | None, dict | None]:
        """(stamp, summary of the manifest) once per pass, from the summary file while it is current."""
        part = partition_id(store, key)
        known = self.summaries.get(part)
        if known is None:
            listed = self.listed.get(store.root) if key is not None else None
            stamp = None if listed is not None and key not in listed else store.manifest_stamp(key)
            content = None if stamp is None else self._summary_files.get(store, key, stamp)
            if content is not None:
                known = (stamp, content)
            elif stamp is None:
                known = (None, None)
            else:
                stamp, full = self._manifest(store, key)
                known = (stamp, summary(full))
                if stamp is not None and full is not None and not full.get("_corrupt"):
                    self._summary_files.put(store, key, stamp, known[1])
            self.summaries[part] = known
            self.first_seen.setdefault(part, known[0])
        return known

    def folder_problem(self, store: PartitionStore, key: dt.date | None, manifest: dict | None) -> str:
        """Why the partition's folder does not hold just what ``manifest`` lists (no manifest: any file); ''."""
        problem = "" if manifest is None else store.data_problem(key, manifest)
        if problem:
            return problem
        strays = store.strays_in(key, manifest)
        if manifest is None and f"{store.rel(key)}/{DATA_FILE}" in strays:
            return "data file without its manifest: readers see it"
        return strays_reason(strays) if strays else ""

    def window(self, node: Node, partial: bool = False) -> Window | None:
        """The raw files of the dependency window, read and refused; None while a required folder, or every
        ``any_raw_window`` one, has not arrived (``partial``: a missing folder taken as empty)."""
        zone, folders = self.zone(node), []
        required, any_of = node.raw_window(), node.any_raw_window()
        absent_ok = [*any_of, *node.optional_raw_window()]
        found_any = False
        for source, date in [*required, *absent_ok]:
            there = not zone.lists_at_once or self.folder_there(zone, source, date)
            scanned = self.raw_folder(zone, source, date) if there else None
            relpath = zone.folder_relpath(source, date)
            if scanned is None:
                if (source, date) not in absent_ok and not partial:
                    return None
                folders.append(FolderInputs(relpath, [], [], "absent"))
                continue
            if (source, date) not in absent_ok and not partial and not self.arrived(zone, source, date):
                return None  # there, without a file it arrives with yet (a folder made before its files)
            folders.append(
                self.once_per_pass(
                    ("select", type(node), source, date), _select, node, relpath, *scanned, self._accepts
                )
            )
            found_any = found_any or ((source, date) in any_of and self.arrived(zone, source, date))
        if any_of and not found_any and not partial:
            return None
        return Window(folders)


def _select(node: Node, relpath: str, entries: Entries, unread: list, accepts: dict) -> FolderInputs:
    """The entries ``node`` reads of one folder; ``accepts`` remembers ``accepts_input`` by (class, name)."""
    read, refused = [], [(name, reason) for name, reason in unread]
    cls = type(node)
    for entry in entries:
        key = (cls, entry[0])
        ok = accepts.get(key)
        if ok is None:
            ok = accepts[key] = node.accepts_input(entry[0])
        if ok:
            read.append(entry)
        else:
            refused.append((entry[0], f"name is not {node.input_names or 'one this dataset reads'}"))
    refused.sort()
    digest = hashlib.sha256(repr(read).encode()).hexdigest()
    return FolderInputs(relpath, read, refused, digest, max((e[2] for e in read), default=0))
