"""The raw zone as the freshness engine sees it in one pass: each folder listed once (many at once where a
listing is a request), a source's folders from one listing, and entries no partition reads named once."""

from __future__ import annotations

import bisect
import contextlib
import datetime as dt
import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from tasks.contract import EVERY_LISTED, arrives_with
from tasks.cores import process_pool
from tasks.freshness.inputs import parse_inputs
from tasks.freshness.node import raw_folders
from tasks.storage.rawzone import (
    FOLDER,
    RawFile,
    RawFileChanged,
    RawZone,
    Refused,
    folder_dates,
    unread_in_source,
)

if TYPE_CHECKING:
    from tasks.freshness.inputs import Entries
    from tasks.freshness.node import Node

logger = logging.getLogger("luigi-interface")
SCAN_AHEAD_THREADS = 16
EARLY_S = 1.0  # a listing made before a build's lock serves its re-check when the lock came within this


_reported: set[tuple] = set()  # (zone, entries) already named in a warning
_quiet = 0


def report_unread(zone: str, unread: list[Refused]) -> None:
    """Warn of a source folder's entries no partition reads, once per process; never inside :func:`quiet`."""
    key = (zone, tuple(unread))
    if not unread or _quiet or key in _reported:
        return
    _reported.add(key)
    logger.warning(
        "raw zone %s: %d %s not read by any partition: %s",
        zone,
        len(unread),
        "entry" if len(unread) == 1 else "entries",
        "; ".join(f"{r.name} ({r.reason})" for r in unread),
    )


@contextlib.contextmanager
def quiet():
    """No warning of :func:`report_unread` meanwhile: the status view shows the entries itself."""
    global _quiet
    _quiet += 1
    try:
        yield
    finally:
        _quiet -= 1


class RawFolders:
    """What a pass read of the raw zone (the attributes are made by :meth:`tasks.freshness.memo.Memo.new_pass`)."""

    raw: dict
    sources: dict
    memo: dict
    digests: dict
    _early: dict[tuple, tuple[float, Future]]

    def raw_folder(self, zone: RawZone, source: str, date: dt.date) -> tuple[Entries, list] | None:
        """``zone.scan_folder_all`` of one folder, once per pass; None when it does not exist."""
        key = (zone.describe(), source, date)
        if key not in self.raw:
            self.raw[key] = zone.scan_folder_all(source, date)
            if (key[0], source) not in self.sources:
                self.source_unread(zone, source)
        return self.raw[key]

    def listed_files(self, source: str) -> dict[dt.date, list[str]]:
        """{folder date: the names of its files} of every ``source`` folder this pass has listed."""
        return {key[2]: [e[0] for e in found[0]] for key, found in self.raw.items() if key[1] == source and found}

    def list_early(self, node: Node) -> None:
        """Start listing ``node``'s raw folders on a bucket before its build takes its lock (:data:`EARLY_S`)."""
        folders = raw_folders(node)
        zone = self.zone(node) if folders else None  # a mart's zone is never opened
        if zone is None or not zone.lists_at_once:
            return
        now = time.monotonic()
        for source, date in folders:
            self._early[(zone.describe(), source, date)] = (
                now,
                process_pool("list-early", 4).submit(zone.scan_folder_all, source, date),
            )

    def scan_ahead(self, nodes: list[Node]) -> None:
        """On a bucket, list at once (one round trip) the raw folders of ``nodes``' windows not listed yet."""
        todo: dict[tuple, tuple[RawZone, str, dt.date]] = {}
        for node in nodes:
            folders = raw_folders(node)
            zone = self.zone(node) if folders else None
            if zone is None or not zone.lists_at_once:
                continue
            for source, date in folders:
                key = (zone.describe(), source, date)
                if key in self.raw:
                    continue
                early = self._early.pop(key, None)
                if early is not None and time.monotonic() - early[0] < EARLY_S:
                    self.raw[key] = early[1].result()
                    continue
                if not self.folder_there(zone, source, date):
                    self.raw[key] = None
                else:
                    todo.setdefault(key, (zone, source, date))
        if not todo:
            return
        sources = {(k[0], k[1]): z for k, (z, _, _) in todo.items() if (k[0], k[1]) not in self.sources}
        with ThreadPoolExecutor(min(len(todo), SCAN_AHEAD_THREADS), thread_name_prefix="scan-ahead") as pool:
            scans = {key: pool.submit(zone.scan_folder_all, source, date) for key, (zone, source, date) in todo.items()}
            unread = {key: pool.submit(self.source_listed, zone, key[1]) for key, zone in sources.items()}
        for key, scan in scans.items():
            self.raw[key] = scan.result()
        for key, listed in unread.items():
            self.sources[key] = unread_in_source(key[1], *listed.result())
            report_unread(key[0], self.sources[key])

    def source_unread(self, zone: RawZone, source: str) -> list[Refused]:
        """The entries of ``<source>/`` that no partition reads, listed once per pass."""
        key = (zone.describe(), source)
        if key not in self.sources:
            self.sources[key] = unread_in_source(source, *self.source_listed(zone, source))
            report_unread(key[0], self.sources[key])
        return self.sources[key]

    def unread_listed(self) -> list[Refused]:
        return sorted(r for unread in self.sources.values() for r in unread)

    def absent_because(self, zone: RawZone, source: str, date: dt.date) -> Refused | None:
        """Why a needed raw folder reads as absent although an entry is there (it or its source is not read)."""
        folder = zone.folder_relpath(source, date)
        return next((r for r in self.source_unread(zone, source) if r.name in (folder, source)), None)

    def empty_root(self, zone: RawZone) -> str:
        """Why every folder waits when the whole raw root holds nothing (:meth:`RawZone.holds_nothing`: a bucket's
        prefix with a typo, or nothing sent yet), asked once per pass; else ''."""
        from tasks.settings_check import empty_root_note

        empty = self.once_per_pass(("holds nothing", zone.describe()), zone.holds_nothing)
        return empty_root_note(zone.describe()) if empty else ""

    def digest(self, zone: RawZone, raw: RawFile) -> str:
        """The content hash of a raw file, read once per pass; :class:`RawFileChanged` each time when the read
        was not of the version listed."""
        known = self.digests.setdefault(raw.relpath.rpartition("/")[0], {})
        key = (zone.describe(), raw)
        if key not in known:
            try:
                known[key] = zone.digest_now(raw)
            except RawFileChanged as exc:
                known[key] = exc
        if isinstance(known[key], RawFileChanged):
            raise RawFileChanged(*known[key].args)
        return known[key]

    def missing_folders(self, node: Node) -> list[tuple[str, dt.date]]:
        """The required raw folders of the window not arrived (and the first ``any_raw_window`` one if none has)."""
        zone = self.zone(node)
        missing = [(s, d) for s, d in node.raw_window() if not self.arrived(zone, s, d)]
        any_of = node.any_raw_window()
        if any_of and not self.present(node, any_of):
            missing.append(any_of[0])
        return missing

    def gone_folders(self, node: Node, manifest: dict | None) -> list[str]:
        """The raw folders its build read files of (``qsr_pos/2026-09-02``) that are removed or emptied since."""
        zone = self.zone(node)
        read = {path.rpartition("/")[0] for path in parse_inputs((manifest or {}).get("inputs", []))}
        folders = [(zone.folder_relpath(s, d), s, d) for s, d in raw_folders(node)]
        return [rel for rel, s, d in folders if rel in read and not self.holds_read_files(zone, s, d)]

    def present(self, node: Node, folders: list[tuple[str, dt.date]]) -> list[tuple[str, dt.date]]:
        zone = self.zone(node)
        return [(s, d) for s, d in folders if self.arrived(zone, s, d)]

    def arrived(self, zone: RawZone, source: str, date: dt.date) -> bool:
        """Whether raw folder ``<source>/<date>`` holds a file it arrives with (:data:`tasks.contract.ARRIVES_WITH`)
        and, of a listed source, every listed id's file it awaits (:meth:`lacking`)."""
        return self.holds_read_files(zone, source, date) and not self.lacking(zone, source, date)

    def holds_read_files(self, zone: RawZone, source: str, date: dt.date) -> bool:
        """Whether raw folder ``<source>/<date>`` is there holding a file it arrives with."""
        if not self.folder_there(zone, source, date):
            return False
        scanned = self.raw_folder(zone, source, date)
        return scanned is not None and any(arrives_with(source, entry[0]) for entry in scanned[0])

    def lacking(self, zone: RawZone, source: str, date: dt.date) -> list[str]:
        """The files of listed ids (:data:`tasks.contract.EVERY_LISTED`) that folder ``<source>/<date>`` lacks
        though an earlier folder holds one; [] for a source whose files are discovered."""
        if source not in EVERY_LISTED:
            return []
        key = ("lacking", zone.describe(), source, date)
        if key not in self.memo:
            scanned = self.raw_folder(zone, source, date)
            there = {entry[0] for entry in scanned[0]} if scanned else set()
            absent = [name for name in listed_files(source) if name not in there]
            self.memo[key] = [name for name in absent if self._held_before(zone, source, date, name)]
        return self.memo[key]

    def _held_before(self, zone: RawZone, source: str, date: dt.date, name: str) -> bool:
        """Whether a folder of ``source`` before ``date`` holds file ``name`` (walked back, remembered per pass)."""
        described = zone.describe()
        dates = self.once_per_pass(("folder dates", described, source), self._folder_dates, zone, source)
        walked, held = [], False
        for day in reversed(dates[: bisect.bisect_left(dates, date)]):
            key = ("held by", described, source, name, day)  # a folder of ``day`` or before holds ``name``
            if key in self.memo:
                held = self.memo[key]
                break
            walked.append(key)
            scanned = self.raw_folder(zone, source, day)
            if scanned is not None and any(entry[0] == name for entry in scanned[0]):
                held = True
                break
        self.memo.update(dict.fromkeys(walked, held))
        return held

    def _folder_dates(self, zone: RawZone, source: str) -> list[dt.date]:
        return sorted(folder_dates(self.source_listed(zone, source)[1]))

    def source_listed(self, zone: RawZone, source: str) -> tuple[str | None, list[tuple[str, str]]]:
        """:meth:`RawZone.source_listing`, once per pass."""
        return self.once_per_pass(("source listing", zone.describe(), source), zone.source_listing, source)

    def _folder_names(self, zone: RawZone, source: str) -> set[str]:
        return {name for name, kind in self.source_listed(zone, source)[1] if kind == FOLDER}

    def folder_there(self, zone: RawZone, source: str, date: dt.date) -> bool:
        """Whether raw folder ``<source>/<date>`` exists; on a bucket from one listing of the source per pass."""
        key = (zone.describe(), source, date)
        if key in self.raw:
            return self.raw[key] is not None
        if zone.lists_at_once:
            return date.isoformat() in self.once_per_pass(("folders", key[0], source), self._folder_names, zone, source)
        return self.raw_folder(zone, source, date) is not None


def listed_files(source: str) -> list[str]:
    """``<hotel_id>.csv`` of each hotel of the hotels list (:data:`tasks.contract.EVERY_LISTED`)."""
    from tasks.reference import hotels  # the one listed source's list; loaded where a listed folder is looked at

    return [f"{hotel}.csv" for hotel in hotels()]


def lacking_note(source: str, lacking: list[str]) -> str:
    """``without H5.csv yet: hotel H5 of /srv/daybreak/config/hotels.csv sent extracts before``."""
    from tasks.reference import hotels_source

    ids = ", ".join(name.removesuffix(".csv") for name in lacking)
    kind = EVERY_LISTED[source] + ("s" if len(lacking) > 1 else "")
    return f"without {', '.join(lacking)} yet: {kind} {ids} of {hotels_source()} sent extracts before"
