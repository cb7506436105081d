"""QSR point-of-sale tasks (contract section 2)."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import itertools
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from tasks import catalogue, settings
from tasks.base import PartitionedTask
from tasks.building import Built
from tasks.calendar import day_offset, qsr_dependency_window
from tasks.contract import is_store_file
from tasks.cores import side_thread, start_on_side_thread, task_threads
from tasks.freshness.inputs import input_line
from tasks.freshness.rules import OFFSETS, fingerprint
from tasks.nextdate import keeps_for_next_date, kept_for_next_date, read_by_others
from tasks.storage.rawzone import RawFile
from tasks.transforms.qsr_rules import QsrRules

if TYPE_CHECKING:
    import pyarrow as pa

    from tasks.transforms.qsr_check import CheckedFolder

logger = logging.getLogger("luigi-interface")
STORE_TOTALS_FILE = "_store_totals.arrow"  # beside data.parquet: each store's totals of the date
CACHE_FORMAT = 8  # of a checked folder's entry (tasks/checked/); bump when it changes
# knobs: docs/performance.md
CACHE_COMPRESSION = None  # a checked folder's entry's IPC buffers: None, "lz4" or "zstd"
CHECK_BATCH_BYTES = 2 << 20  # raw bytes read, parsed and checked at a time
CHECK_THREADS = 2  # batches parsed and checked at once
# the manifest's stats.raw_folders: {folder date: how this build had its checked rows}
CHECKED, SHARED, IN_MEMORY = "checked", "shared", "in memory"


class StgQsrPos(PartitionedTask, entry=catalogue.STG_QSR_POS):
    """stg_qsr_pos: one row per POS line per business date, from ``qsr_pos/<date>/`` and ``<date+1>/``."""

    def raw_window(self) -> list[tuple[str, dt.date]]:
        return [("qsr_pos", d) for d in qsr_dependency_window(self.date)]

    @classmethod
    def warm_up(cls) -> None:
        from tasks.checked.ipc import checked_from_ipc, checked_to_ipc
        from tasks.freshness.dataversions import logical_version, slice_versions
        from tasks.transforms.qsr_pos import warm_up
        from tasks.transforms.stores import store_totals, to_ipc

        checked, result = warm_up()
        sink = io.BytesIO()  # Arrow IPC loads lazily
        checked_to_ipc(checked, sink)
        checked_from_ipc(sink.getvalue())
        # Arrow's acero (the store totals' group-by) loads lazily
        to_ipc(store_totals(result.table, dt.date(2026, 9, 15)))
        slice_versions(result.table, "store_id", {"S1"})
        logical_version(result.table)

    def qsr_rules(self) -> QsrRules:
        cfg = settings.qsr()
        return QsrRules(cfg.suspicious_qty_threshold, cfg.timezone, cfg.day_start_hour)

    def rules(self) -> dict:
        rules = self.qsr_rules()
        return {**rules.as_dict(), OFFSETS: {rules.timezone: day_offsets(rules, self.date)}}

    def rules_key(self) -> tuple:
        return (*super().rules_key(), *day_offsets(self.qsr_rules(), self.date).values())

    input_names = "<store_id>.csv (store_id matching ^[A-Z0-9][A-Z0-9_-]{0,31}$)"

    def accepts_input(self, name: str) -> bool:
        return is_store_file(name)

    def input_slice(self, relpath: str) -> str | None:
        from tasks.transforms.rawcsv import file_stem

        return file_stem(relpath)  # the contract: a row whose id is not its file's stem is rejected

    def build(self, inputs: list[RawFile]) -> Built:
        from tasks.transforms.qsr_pos import clean_checked  # pyarrow loads only where data is built
        from tasks.transforms.stores import store_totals, to_ipc

        # closed whatever happens: a folder being checked holds its turn until the generator ends
        how: dict[str, str] = {}  # folder date -> CHECKED, SHARED or IN_MEMORY
        with contextlib.closing(self._checked(inputs, how)) as folders:
            result = clean_checked(folders, self.date, self.qsr_rules(), task_threads())
        stats = {
            "raw_files": len(inputs),
            "raw_folders": dict(sorted(how.items())),
            "attributed_rows": result.attributed_rows,
            "duplicates_dropped": result.duplicates_dropped,
            "voided_dropped": result.voided_dropped,
            # rows_read == row_count + rejected_count + voided_dropped + duplicates_of_date + other_date_rows
            "rows_read": result.rows_read,
            "duplicates_of_date": result.duplicates_of_date,
            "other_date_rows": result.other_date_rows,
        }
        stats["store_versions"] = start_on_side_thread(store_versions, inputs, result.table)
        stats.update(self._emptied_stores(inputs, result.table, result.file_rows))
        # what StoreDailySales reads, so that a store's mart never reads another store's lines
        extras = {STORE_TOTALS_FILE: to_ipc(store_totals(result.table, self.date, result.order_keys))}
        return Built(result.table, result.rejected, stats, extras, file_rows=result.file_rows)

    def _emptied_stores(self, inputs: list[RawFile], table: pa.Table, day_rows: dict[str, int]) -> dict:
        """``store_rows`` and ``day_file_rows`` (a file of folder d: its rows of the date) of this build, and a
        warning for every store that had rows in the previous build (under the same rules) and has none now,
        or whose file of folder d gave rows then and none now (its small hours, in folder d+1, may remain)."""
        import pyarrow.compute as pc

        from tasks.reporting import names
        from tasks.targets import luigi_engine
        from tasks.transforms.rawcsv import file_stem

        counts = pc.value_counts(table["store_id"]).to_pylist() if table.num_rows else []
        now = {c["values"]: c["counts"] for c in counts}
        store = self.store()
        manifest = luigi_engine().manifest(store, self.date) or {}
        previous = manifest.get("stats") or {}
        same_rules = manifest.get("rules_fingerprint") == self.rules_fingerprint()
        before = previous.get("store_rows") if same_rules else None
        if before is None and previous and same_rules:  # a manifest without store_rows: from its data file
            before = _store_rows_of(store, self.date)
        files_before = (previous.get("day_file_rows") or {}) if same_rules else {}
        kept = dict(previous.get("emptied_stores") or {})  # a store's warnings, or a file's
        emptied = {k: why for k, why in kept.items() if not (day_rows if k.endswith(".csv") else now).get(k)}
        read = {f.relpath for f in inputs}
        for s, rows in sorted((before or {}).items()):
            if rows and not now.get(s) and s not in emptied:
                files = [f.relpath for f in inputs if file_stem(f.relpath) == s]
                emptied[s] = f"store {s} had {rows} rows in an earlier build of {self.date} and has none now " + (
                    f"(its files {', '.join(files)} hold no rows of the date; one re-sent with its header only?)"
                    if files
                    else "(no file of its window: removed from the raw zone?)"
                )
        for path, rows in sorted(files_before.items()):
            s = file_stem(path)
            if rows and not day_rows.get(path) and path not in emptied and s not in emptied:
                emptied[path] = f"store {s}'s file {path} gave {rows} rows of {self.date} in an earlier build " + (
                    "and gives none now (re-sent with its header only?)"
                    if path in read
                    else "and is gone now (removed from the raw zone?)"
                )
        for key in emptied.keys() - kept.keys():
            logger.warning("%s: %s", names.label(self), emptied[key])
        return {
            "store_rows": now,
            "day_file_rows": day_rows,
            "emptied_stores": emptied,
            "warnings": list(emptied.values()),
        }

    def run_partition(self) -> None:
        if keeps_for_next_date():
            super().run_partition()
            return
        from tasks.checked import CheckedFolders

        # a bucket's checked folders listed, and the turn at the window's last folder taken, with the lease
        with CheckedFolders(self.store().backend, self.dataset).early(self.raw_window()[-1][1]):
            super().run_partition()

    def _checked(self, inputs: list[RawFile], how: dict[str, str]) -> Iterator[CheckedFolder]:
        """Each folder of the window checked, in read order: kept in memory by a single-run range, else
        shared in the data root (:mod:`tasks.checked`); ``how`` learns how each folder was had."""
        from tasks.transforms import qsr_check

        zone, rules = self.zone(), self.qsr_rules()
        groups = [(folder, list(group)) for folder, group in itertools.groupby(inputs, key=lambda f: f.folder_date)]
        if not keeps_for_next_date():
            yield from self._shared(zone, groups, rules, how)
            return
        for folder, files in groups:  # a single run: kept whole, in memory, for the next date
            if read_by_others(("qsr_pos", folder)):  # another process of the range reads it too: one checks it
                yield from self._shared(zone, [(folder, files)], rules, how)
                continue
            how[folder.isoformat()] = IN_MEMORY

            def check(files=files, folder=folder):
                how[folder.isoformat()] = CHECKED
                return qsr_check.merge_checked(folder, list(self._pieces(zone, files, folder, rules)))

            yield kept_for_next_date(
                ("qsr_pos checked", rules.timezone, rules.day_start_hour, *map(input_line, files)), check
            )

    def _pieces(self, zone, files: list[RawFile], folder: dt.date, rules: QsrRules) -> Iterator[CheckedFolder]:
        """The folder checked a batch of files at a time, up to CHECK_THREADS batches at once."""
        from tasks.transforms import qsr_check

        threads = min(CHECK_THREADS, task_threads())
        return qsr_check.check_pieces(_batches(zone, files, CHECK_BATCH_BYTES), folder, rules, threads)

    def _shared(self, zone, groups: list, rules: QsrRules, how: dict[str, str]) -> Iterator[CheckedFolder]:
        """The folders in read order, each read from the data root or checked here, in turns with other
        processes; one another is checking is waited for only after taking the free ones."""
        from tasks.checked import CheckedFolders

        shared = CheckedFolders(self.store().backend, self.dataset)
        shared.survey()
        taking = self._take_early(shared, groups)
        ahead: dict[dt.date, list[CheckedFolder]] = {}
        try:
            for i, (folder, files) in enumerate(groups):
                if folder in ahead:
                    yield from ahead.pop(folder)
                    continue
                found = self._found(shared, zone, files, folder, rules, how, fresh=False)
                if found is not None:
                    yield found
                    continue
                turn, taken = _take(shared, taking, folder)
                if not taken:
                    try:
                        for later, its_files in groups[i + 1 :]:
                            if later in ahead or later.isoformat() in shared.busy:
                                continue
                            found = self._found(shared, zone, its_files, later, rules, how, fresh=False)
                            if found is not None:
                                ahead[later] = [found]
                                continue
                            other, its_turn = _take(shared, taking, later)
                            if its_turn:
                                checked = self._check(
                                    shared, other, zone, its_files, later, rules, how, shared.free(later)
                                )
                                ahead[later] = list(checked)
                        turn.take()
                    except BaseException:
                        turn.release()
                        raise
                yield from self._check(shared, turn, zone, files, folder, rules, how, taken and shared.free(folder))
        finally:
            for turn, early in taking.values():  # taken early and not used (the build failed)
                if early.exception() is None and early.result():
                    turn.release()

    @staticmethod
    def _take_early(shared, groups: list) -> dict:
        """{folder: (turn, ``try_take`` future)} for the window's last folder when free in a bucket, taken
        while the folders before it are read."""
        from tasks.cores import process_pool

        folder = groups[-1][0] if len(groups) > 1 else None
        early = None if folder is None else shared.early_turn(folder)
        if early is not None:  # taken with the partition's lease
            return {folder: early}
        if folder is None or not shared.surveyed or not shared.free(folder):
            return {}
        turn = shared.turn(folder)
        return {folder: (turn, process_pool("checked-turn", 2).submit(turn.try_take))}

    def _found(self, shared, zone, files: list[RawFile], folder: dt.date, rules: QsrRules, how: dict, fresh=True):
        """The folder's checked rows from the data root (its entry for these files and rules), or None."""
        from tasks.checked import ipc

        payload = shared.lookup(
            folder, lambda about: _hash_files(zone, files, about), lambda: self._cache_key(zone, files, rules),
            self.date, fresh,
        )  # fmt: skip
        if payload is None:
            return None
        try:
            checked = ipc.checked_from_ipc(payload)
        except (ValueError, KeyError, OSError):  # pyarrow's errors are ValueErrors: a miss
            return None
        how[folder.isoformat()] = SHARED
        return checked

    def _check(self, shared, turn, zone, files, folder: dt.date, rules: QsrRules, how: dict, free: bool = False):
        """Under the folder's ``turn``: the folder from its entry (unless ``free``), or checked into a new one."""
        from tasks.checked import ipc

        try:
            checked = None if free else self._found(shared, zone, files, folder, rules, how)
            if checked is None:
                how[folder.isoformat()] = CHECKED
                # the entry is written on a side thread while the caller works on each piece
                with shared.putting(folder, self.date) as entry, side_thread("cache_entry") as pool:
                    writer = ipc.CheckedWriter(entry, CACHE_COMPRESSION)
                    read_ns = time.time_ns()  # before the files' identities are taken
                    identities = [zone.file_identity(f) for f in files]
                    writing = None
                    for piece in self._pieces(zone, files, folder, rules):
                        if writing is not None:
                            writing.result()  # one piece in writing at a time; its error raised here
                        writing = pool.submit(writer.write, piece)
                        yield piece
                        del piece  # before the next one is checked
                    if writing is not None:
                        writing.result()
                    writer.close(folder)
                    # the files as read: the next reader need not read them to hash them
                    hashes = [zone.known_digest(f) for f in files]
                    recorded = {f.relpath: [i, h] for f, i, h in zip(files, identities, hashes, strict=True) if i and h}
                    entry.commit(self._cache_key(zone, files, rules), files=recorded, read_ns=read_ns)
                return
        finally:
            turn.release()
        yield checked  # the turn is let go first: the caller's work on it holds nobody up

    @staticmethod
    def _cache_key(zone, files: list[RawFile], rules: QsrRules) -> str:
        """The key of the checked rows of ``files`` as this process read them (content hashes)."""
        from tasks.transforms import qsr_pos

        return fingerprint(
            {
                "format": CACHE_FORMAT,
                "version": qsr_pos.VERSION,
                "timezone": rules.timezone,
                "day_start_hour": rules.day_start_hour,
                # the bounds of the business days the folder's check tells apart, in this host's time-zone data
                OFFSETS: day_offsets(rules, files[0].folder_date) if files else {},
                "files": [(f.relpath, zone.known_digest(f)) for f in files],
            }
        )

    def max_reject_share(self) -> float:
        return settings.qsr().max_reject_share


def day_offsets(rules: QsrRules, day: dt.date) -> dict[str, str]:
    """The UTC offsets of the business days before ``day`` (``"-1"``) and ``day`` (``"0"``) in Arrow's
    time-zone data: they decide which lines a folder's check assigns to which date."""
    return {str(k): day_offset(rules.timezone, day + dt.timedelta(days=k), rules.day_start_hour) for k in (-1, 0)}


def _take(shared, taking: dict, folder: dt.date) -> tuple:
    """(the folder's turn, whether it was taken), early or now."""
    if folder in taking:
        turn, early = taking.pop(folder)
        return turn, early.result()
    turn = shared.turn(folder)
    return turn, turn.try_take()


def _hash_files(zone, files: list[RawFile], about: dict) -> None:
    """Make each file's content hash known to ``zone``: as ``about`` recorded it if unchanged, else read."""
    recorded = about.get("files") if isinstance(about.get("files"), dict) else {}
    read_ns = about.get("read_ns") if isinstance(about.get("read_ns"), int) else 0
    for f in files:
        if not zone.recorded_digest(f, recorded.get(f.relpath), read_ns):
            zone.read_input(f)  # the hash is remembered; the bytes go at once


def _batches(zone, files: list[RawFile], size: int) -> Iterator[list[tuple[bytes, str]]]:
    """The files' (bytes, relpath) in read order, in batches of at least ``size`` bytes, read when asked for."""
    batch, held = [], 0
    for f, data in zip(files, zone.read_inputs(files), strict=True):
        batch.append((data, f.relpath))
        held += len(data)
        if held >= size:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


def _store_rows_of(store, date: dt.date) -> dict[str, int]:
    """Rows per store of the partition in place (its data file's store_id column); {} when unreadable."""
    import pyarrow.compute as pc

    try:
        column = store.read_table(date, columns=["store_id"])["store_id"]
    except (OSError, ValueError, KeyError, RuntimeError):
        return {}
    return {c["values"]: c["counts"] for c in pc.value_counts(column).to_pylist()}


def store_versions(inputs: list[RawFile], table: pa.Table) -> dict[str, str]:
    """Per store with a file, the logical version of its rows (StoreDailySales rebuilds on a change)."""
    from tasks.freshness.dataversions import slice_versions
    from tasks.transforms.rawcsv import file_stem

    return slice_versions(table, "store_id", {file_stem(f.relpath) for f in inputs})
