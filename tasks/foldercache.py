"""A cache of checked raw folders, shared by the processes that build a dataset (no Luigi here).

StgQsrPos reads raw folders d and d+1 for partition d, so in a per-date backfill every folder is
read by two partitions, often in two processes (``--workers 2``) or two runs (today's d+1 is
tomorrow's d). The first one to check a folder leaves the result here, as Arrow IPC:

    <data_root>/_state/cache/<dataset>/<folder date>.arrow

The entry's header line holds its key (what it was computed from: cache format, transform version,
the rules that matter, each file's name and content hash) and the length and CRC-32 of its payload,
so an entry that is torn or damaged (a crash before the page cache reached the disk: entries are
written to a temporary name and renamed, not fsynced) is never used. A wrong key or a damaged entry
is a miss: the folder is checked again and the entry replaced. Never a source of truth: deleting
``_state/cache`` at any time only costs time.

One entry per folder. It is removed once the second partition reading the folder has used it
(the writer recorded which partition it was), and any entry older than :data:`MAX_AGE_S` is
removed whenever an entry is written; at most one entry per raw folder remains otherwise.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import zlib
from pathlib import Path

from tasks.tempnames import sweep, temp_path

MAX_AGE_S = 7 * 86400  # a daily run reads yesterday's d+1 entry the next day; a week covers a pause


class FolderCache:
    """Entries of one dataset: each a JSON header line (key, writer, length and CRC-32 of the
    payload) and the payload (Arrow IPC)."""

    def __init__(self, data_root: str | os.PathLike, dataset: str):
        self.root = Path(data_root) / "_state" / "cache" / dataset

    def path(self, folder: dt.date) -> Path:
        return self.root / f"{folder.isoformat()}.arrow"

    def get(self, folder: dt.date, key: str, reader: dt.date) -> memoryview | None:
        """The payload of the folder's intact entry for ``key``, or None (a miss). The entry is removed
        when ``reader`` is not the partition that wrote it: each folder serves two partitions."""
        path = self.path(folder)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        end = data.find(b"\n")
        try:
            header = json.loads(data[:end])
        except ValueError:
            return None
        if header.get("key") != key:
            return None
        payload = memoryview(data)[end + 1 :]
        if len(payload) != header.get("length") or zlib.crc32(payload) != header.get("crc32"):
            _remove(path)  # torn or damaged: never used
            return None
        if header.get("writer") != reader.isoformat():
            _remove(path)  # both partitions reading this folder have had it
        return payload

    def put(self, folder: dt.date, key: str, writer: dt.date, payload) -> None:
        """Store ``payload`` as the folder's one entry. Errors are ignored: a full disk or a read-only
        data root costs the next reader time, nothing else."""
        meta = {"key": key, "writer": writer.isoformat(), "length": len(payload), "crc32": zlib.crc32(payload)}
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            final = self.path(folder)
            tmp = temp_path(final)
            with open(tmp, "wb") as fh:
                fh.write(json.dumps(meta).encode() + b"\n")
                fh.write(payload)
            os.replace(tmp, final)
            self._expire()
        except OSError:
            pass

    def _expire(self) -> None:
        limit = time.time() - MAX_AGE_S
        for entry in os.scandir(self.root):
            try:
                if entry.name.endswith(".arrow") and entry.stat().st_mtime < limit:
                    os.unlink(entry.path)
            except OSError:
                pass
        sweep(self.root)  # temporaries of a writer that died


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
