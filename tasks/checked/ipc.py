"""A checked qsr_pos folder as an Arrow IPC stream, written piece by piece as it is checked, read back
without a copy."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from tasks.transforms.qsr_check import (
    CHECKED_REJECT_SCHEMA,
    CHECKED_SCHEMA,
    EMPTY_CHECKED,
    CheckedFolder,
    merged_rejects,
)


class CheckedWriter:
    """A checked folder written to ``sink`` as one IPC stream: each piece's valid rows, then an empty last
    batch whose metadata holds the folder's date, the rows read and the rejects (an IPC stream of their own)."""

    def __init__(self, sink, compression: str | None = None):
        # the stream writes each buffer on its own (thousands): gathered into 1 MiB writes to the sink
        self._out = pa.BufferedOutputStream(pa.PythonFile(sink, mode="w"), buffer_size=1 << 20)
        options = pa.ipc.IpcWriteOptions(compression=compression)
        self._writer = pa.ipc.new_stream(self._out, CHECKED_SCHEMA, options=options)
        self._rejected: list[pa.Table] = []
        self._rows_read = 0

    def write(self, piece: CheckedFolder) -> None:
        self._writer.write_table(piece.rows)
        self._rejected.append(piece.rejected)
        self._rows_read += piece.rows_read

    def close(self, folder: dt.date) -> None:
        buffer = pa.BufferOutputStream()
        rejected = merged_rejects(self._rejected)
        with pa.ipc.new_stream(buffer, rejected.schema) as writer:
            writer.write_table(rejected)
        meta = {
            b"folder": folder.isoformat().encode(),
            b"rows_read": str(self._rows_read).encode(),
            b"rejected": buffer.getvalue().to_pybytes(),
        }
        self._writer.write_batch(EMPTY_CHECKED, custom_metadata=meta)
        self._writer.close()
        self._out.detach()  # flushed; the sink stays open for its owner


def checked_to_ipc(checked: CheckedFolder, sink) -> None:
    """Write a checked folder to ``sink`` at once."""
    writer = CheckedWriter(sink)
    writer.write(checked)
    writer.close(checked.folder)


def checked_from_ipc(data) -> CheckedFolder:
    """What a :class:`CheckedWriter` wrote; ``pa.ArrowInvalid`` or ValueError on anything else."""
    batches, meta = [], None
    with pa.ipc.open_stream(pa.py_buffer(data)) as reader:  # zero-copy: the arrays point into ``data``
        if reader.schema != CHECKED_SCHEMA:
            raise ValueError("not a checked qsr_pos folder")
        for batch, custom in reader.iter_batches_with_custom_metadata():
            if custom is not None and b"rows_read" in custom:
                meta = custom
            elif batch.num_rows:
                batches.append(batch)
    if meta is None:
        raise ValueError("a checked qsr_pos folder without its last batch (rejects, counts)")
    with pa.ipc.open_stream(meta[b"rejected"]) as reader:
        rejected = reader.read_all()
    if rejected.schema != CHECKED_REJECT_SCHEMA:
        raise ValueError("not a checked qsr_pos folder")
    folder = dt.date.fromisoformat(meta[b"folder"].decode())
    rows = pa.Table.from_batches(batches, CHECKED_SCHEMA)
    return CheckedFolder(folder, rows, rejected, int(meta[b"rows_read"]), shared=True)
