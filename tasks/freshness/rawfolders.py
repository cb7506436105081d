"""The raw zone as the freshness engine sees it in one pass (:class:`RawFolders`, a part of
:class:`tasks.freshness.memo.Memo`): each raw folder listed once, a range's or a window's folders listed at
once where a listing is a request (a bucket), a source's folders known from one listing of it, and the
entries no partition reads named once."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from tasks.cores import process_pool
from tasks.storage.rawzone import FOLDER, RawFile, RawZone, Refused, unread_in_source

if TYPE_CHECKING:
    from tasks.freshness.inputs import Entries
    from tasks.freshness.node import Node

logger = logging.getLogger("luigi-interface")
SCAN_AHEAD_THREADS = 16  # raw folders listed at once (a bucket, SFTP) by Memo.scan_ahead
EARLY_S = 1.0  # a raw folder listed before a build's lock serves its re-check when the lock came within this


_reported: set[tuple] = set()  # (zone, entries) already named in a warning by this process
_quiet = 0


def report_unread(zone: str, unread: list[Refused]) -> None:
    """A warning in the run's log naming the entries of a source folder that no partition reads, once
    per process (a forked worker inherits what its run reported); never inside :func:`quiet`."""
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
    """What a pass read of the raw zone (``raw``, ``sources``, ``digests``, ``_early``: made by
    :meth:`tasks.freshness.memo.Memo.new_pass`)."""

    raw: dict
    sources: dict
    digests: dict
    _early: dict[tuple, tuple[float, Future]]

    def raw_folder(self, zone: RawZone, source: str, date: dt.date) -> tuple[Entries, list] | None:
        """``zone.scan_folder_all`` of one folder (files read, entries refused), scanned once per pass
        even when two partitions read it; None when the folder does not exist. The first folder of a
        source in a pass also lists the source folder once (:meth:`source_unread`)."""
        key = (zone.describe(), source, date)
        if key not in self.raw:
            self.raw[key] = zone.scan_folder_all(source, date)
            if (key[0], source) not in self.sources:
                self.source_unread(zone, source)
        return self.raw[key]

    def list_early(self, node: Node) -> None:
        """Start listing ``node``'s raw folders again (a bucket: :attr:`RawZone.lists_at_once`), before its
        build takes its lock: the build's re-check (:meth:`refresh`) takes these listings when the lock came
        within :data:`EARLY_S`, instead of listing the folders once it holds it."""
        folders = [*node.raw_window(), *node.any_raw_window(), *node.optional_raw_window()]
        zone = self.zone(node) if folders else None  # a mart reads no raw folder: its zone is never opened
        if zone is None or not zone.lists_at_once:
            return
        now = time.monotonic()
        for source, date in folders:
            self._early[(zone.describe(), source, date)] = (
                now,
                process_pool("list-early", 4).submit(zone.scan_folder_all, source, date),
            )

    def scan_ahead(self, nodes: list[Node]) -> None:
        """List at once the raw folders of ``nodes``' windows that this pass has not listed, when a listing
        is a request to a server that takes many at once (a bucket: :attr:`RawZone.lists_at_once`): one round
        trip for them all, not one per folder. Other zones list a folder when it is asked for."""
        todo: dict[tuple, tuple[RawZone, str, dt.date]] = {}
        for node in nodes:
            folders = [*node.raw_window(), *node.any_raw_window(), *node.optional_raw_window()]
            zone = self.zone(node) if folders else None  # a mart reads no raw folder: its zone is never opened
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
                if not self.folder_there(zone, source, date):  # not in the source's listing: nothing to list
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
        for key, listed in unread.items():  # what source_unread would list, listed with the folders
            self.sources[key] = unread_in_source(key[1], *listed.result())
            report_unread(key[0], self.sources[key])

    def source_unread(self, zone: RawZone, source: str) -> list[Refused]:
        """The entries of ``<source>/`` that no partition reads (a symbolic link, a name that is not
        YYYY-MM-DD, a file named like a date; or the source folder itself, a link), listed once per
        pass and named in a warning once per process (:func:`report_unread`)."""
        key = (zone.describe(), source)
        if key not in self.sources:
            self.sources[key] = unread_in_source(source, *self.source_listed(zone, source))
            report_unread(key[0], self.sources[key])
        return self.sources[key]

    def unread_listed(self) -> list[Refused]:
        """Every entry no partition reads of the source folders listed in this pass, by path."""
        return sorted(r for unread in self.sources.values() for r in unread)

    def absent_because(self, zone: RawZone, source: str, date: dt.date) -> Refused | None:
        """Why a raw folder that a partition needs reads as absent although an entry is there: itself,
        or its source folder, is one that is not read (a symbolic link, a file); None: it is not there."""
        folder = zone.folder_relpath(source, date)
        return next((r for r in self.source_unread(zone, source) if r.name in (folder, source)), None)

    def digest(self, zone: RawZone, raw: RawFile) -> str:
        """The content hash of a raw file, read once per pass (the raw zone is a snapshot per pass)."""
        known = self.digests.setdefault(raw.relpath.rpartition("/")[0], {})
        key = (zone.describe(), raw)
        if key not in known:
            known[key] = zone.digest_now(raw)
        return known[key]

    def missing_folders(self, node: Node) -> list[tuple[str, dt.date]]:
        """(source, date) of the required raw folders of the node's own window that are absent; and,
        while none of its ``any_raw_window`` exists, the first of those (the one it waits for)."""
        zone = self.zone(node)
        missing = [(s, d) for s, d in node.raw_window() if not self.folder_there(zone, s, d)]
        any_of = node.any_raw_window()
        if any_of and not self.present(node, any_of):
            missing.append(any_of[0])
        return missing

    def present(self, node: Node, folders: list[tuple[str, dt.date]]) -> list[tuple[str, dt.date]]:
        """The (source, date) of ``folders`` that exist in the node's raw zone, from the pass's listings."""
        zone = self.zone(node)
        return [(s, d) for s, d in folders if self.folder_there(zone, s, d)]

    def source_listed(self, zone: RawZone, source: str) -> tuple[str | None, list[tuple[str, str]]]:
        """:meth:`RawZone.source_listing`, once per pass: the folders there and the entries no partition reads."""
        return self.once_per_pass(("source listing", zone.describe(), source), zone.source_listing, source)

    def _folder_names(self, zone: RawZone, source: str) -> set[str]:
        return {name for name, kind in self.source_listed(zone, source)[1] if kind == FOLDER}

    def folder_there(self, zone: RawZone, source: str, date: dt.date) -> bool:
        """Whether raw folder ``<source>/<date>`` exists: from its listing when this pass has it; on a zone
        where a listing is a request (a bucket), from one listing of the source's folders per pass (a status
        view over years asks of a thousand folders); elsewhere by listing the folder."""
        key = (zone.describe(), source, date)
        if key in self.raw:
            return self.raw[key] is not None
        if zone.lists_at_once:
            return date.isoformat() in self.once_per_pass(("folders", key[0], source), self._folder_names, zone, source)
        return self.raw_folder(zone, source, date) is not None
