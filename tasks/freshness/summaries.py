"""Manifest summaries (docs/run-semantics.md, "Between processes"): each manifest without :data:`DETAIL`, kept
with its stamp in ``_state/summaries/<dataset>.json``; a forked worker hands its entries to its parent."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import tempfile

from tasks.storage.partitions import PartitionStore

# read only when the raw files' metadata changed, or by a plan (the upstream's version of each key's rows)
DETAIL = frozenset({"inputs", "input_hashes", "upstream_keys"})
STATS_DETAIL = frozenset({"day_file_rows"})  # read by the partition's own next build only
FORMAT = 1


def summary(manifest: dict | None) -> dict | None:
    """The manifest without its :data:`DETAIL` keys, nor :data:`STATS_DETAIL` of its stats."""
    if manifest is None:
        return None
    kept = {k: v for k, v in manifest.items() if k not in DETAIL}
    if isinstance(kept.get("stats"), dict) and STATS_DETAIL & kept["stats"].keys():
        kept["stats"] = {k: v for k, v in kept["stats"].items() if k not in STATS_DETAIL}
    return kept


class SummaryFiles:
    """The summary files of one process: loaded once per dataset, written back when they learned something."""

    def __init__(self) -> None:
        self._files: dict[tuple, dict[str, list]] = {}  # (data root, dataset, sub) -> {partition: [stamp, summary]}
        self._stores: dict[tuple, PartitionStore] = {}  # the store each was read from: it writes it back
        self._dirty: set[tuple] = set()
        self._pid = os.getpid()
        # what forked workers learn, one JSON line each, for this process to write
        self._handoff = os.path.join(tempfile.gettempdir(), f"daybreak-summaries-{self._pid}-{id(self):x}.jsonl")

    def _entries(self, store: PartitionStore) -> dict[str, list]:
        key = (store.data_root, store.dataset, store.sub)
        entries = self._files.get(key)
        if entries is None:
            try:
                doc = json.loads(store.read_summaries() or b"{}")
                entries = doc["partitions"] if doc.get("format") == FORMAT else {}
                if not isinstance(entries, dict):
                    entries = {}
            except (OSError, ValueError, KeyError, TypeError, AttributeError, RuntimeError):
                entries = {}  # none yet, or unreadable: the manifests are parsed again
            self._files[key], self._stores[key] = entries, store
        return entries

    def load(self, store: PartitionStore) -> None:
        """Read the store's summary file now, if not yet read."""
        self._entries(store)

    def get(self, store: PartitionStore, key: dt.date | None, stamp: tuple) -> dict | None:
        """The summary of partition ``key`` if it was taken from the manifest file with ``stamp``."""
        entry = self._entries(store).get(str(key))
        try:
            if len(entry) == 2 and tuple(entry[0]) == stamp and isinstance(entry[1], dict):
                return entry[1]
        except (TypeError, IndexError, KeyError):  # none, or not [stamp, summary]: parse the manifest
            pass
        return None

    def newest_settings(self, store: PartitionStore, fingerprint: str) -> tuple[str | None, str | None]:
        """(settings_at, host) of the newest settings its summaries know under other rules than ``fingerprint``."""
        found = [
            (entry[1].get("settings_at"), (entry[1].get("built_by") or {}).get("host"))
            for entry in self._entries(store).values()
            if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], dict)
            and entry[1].get("rules_fingerprint") != fingerprint
        ]  # fmt: skip
        return max((f for f in found if isinstance(f[0], str)), default=(None, None))

    def put(self, store: PartitionStore, key: dt.date | None, stamp: tuple, content: dict) -> None:
        if os.getpid() != self._pid:  # a forked worker: the process that forked it writes the files
            line = json.dumps([str(store.data_root), store.dataset, store.sub, str(key), list(stamp), content])
            with contextlib.suppress(OSError, TypeError, ValueError):
                fd = os.open(self._handoff, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, (line + "\n").encode())  # one write: two workers' lines never mix
                finally:
                    os.close(fd)
            return
        self._entries(store)[str(key)] = [list(stamp), content]
        self._dirty.add((store.data_root, store.dataset, store.sub))

    def take_handoff(self) -> None:
        """Take in (and remove) what forked workers handed off."""
        taking = f"{self._handoff}.{os.getpid()}"
        try:
            os.rename(self._handoff, taking)
        except OSError:
            return  # none
        try:
            with open(taking, encoding="utf-8") as fh:
                lines = fh.read().splitlines()
        finally:
            with contextlib.suppress(OSError):
                os.unlink(taking)
        from tasks.storage.partitions import plain_store

        for line in lines:
            try:
                root, dataset, sub, key, stamp, content = json.loads(line)
                store = plain_store(root, dataset, sub)
            except (ValueError, TypeError):
                continue  # a line cut short: a cache entry lost, nothing more
            if isinstance(content, dict) and isinstance(stamp, list):
                self.put(store, key, tuple(stamp), content)

    def flush(self) -> None:
        """Write the summary files that learned something, each whole; one that cannot be written is skipped."""
        if os.getpid() != self._pid:
            return
        self.take_handoff()
        dirty, self._dirty = self._dirty, set()
        for key in sorted(dirty, key=str):
            doc = {"format": FORMAT, "partitions": self._files[key]}
            try:
                self._stores[key].write_summaries(json.dumps(doc, separators=(",", ":")).encode())
            except (OSError, RuntimeError):
                continue
