"""Data versions: a partition's ``data_version`` hashes its schema and rows as Arrow IPC bytes
(docs/run-semantics.md, "Identity by content"); a version of another kind never matches."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa


LOGICAL = "logical-v2"  # manifest["data_version_kind"]


def _hasher():
    import xxhash

    return xxhash.xxh3_128()


def logical_version(table: pa.Table) -> str:
    """The hash of the table's schema and rows in order, however they were written, chunked or compressed."""
    import numpy as np
    import pyarrow as pa

    schema = pa.schema([pa.field(f.name, f.type, f.nullable) for f in table.schema])
    table = table.combine_chunks()
    if not all(_exact(c.chunks[0]) for c in table.columns if c.num_chunks):
        # a copy of exactly the rows: Arrow's IPC writer keeps the unused tail of a sliced array's buffers
        table = table.take(pa.array(np.arange(table.num_rows)))
    return _ipc_digest(pa.Table.from_arrays(table.columns, schema=schema))


def _ipc_digest(table: pa.Table) -> str:
    import pyarrow as pa

    digest = _HashSink(_hasher())
    with pa.ipc.new_stream(pa.PythonFile(digest, mode="w"), table.schema) as writer:
        for batch in table.to_batches():
            writer.write_batch(batch)
    return digest.hasher.hexdigest()


class _HashSink:
    """A write-only file that hashes what is written to it."""

    closed = False

    def __init__(self, hasher):
        self.hasher = hasher

    def write(self, data) -> int:
        self.hasher.update(data)
        return len(data)

    def flush(self) -> None:
        pass


def _exact(array) -> bool:
    """Whether an array's buffers hold exactly its rows, as a fresh array's do; False for types not looked into."""
    import numpy as np
    import pyarrow as pa

    if array.offset != 0:
        return False
    n, kind = len(array), array.type
    validity, *rest = array.buffers()
    if validity is not None and validity.size != (n + 7) // 8:
        return False
    if pa.types.is_boolean(kind):
        return rest[0].size == (n + 7) // 8
    if pa.types.is_string(kind) or pa.types.is_binary(kind):
        offsets, data = rest
        last = int(np.frombuffer(offsets, np.int32)[n]) if n else 0
        return offsets.size == 4 * (n + 1) and (data.size if data is not None else 0) == last
    if len(rest) == 1 and kind.bit_width % 8 == 0:  # fixed width: ints, floats, dates, timestamps, decimals
        return rest[0].size == n * kind.bit_width // 8
    return False


KEY_VERSIONS = ("hotel_versions", "store_versions")  # a partition's version of each key's rows (its stats)


def key_versions(manifest: dict | None) -> dict[str, str] | None:
    """A partition's version of each key's rows (a hotel's, a store's), shortened to 16 hex digits: what a
    reader of the whole partition records of it; None where it keeps none."""
    stats = (manifest or {}).get("stats") or {}
    found = next((stats[k] for k in KEY_VERSIONS if isinstance(stats.get(k), dict)), None)
    return None if found is None else {key: str(version)[:16] for key, version in found.items()}


def slice_versions(table: pa.Table, column: str, keys: set[str]) -> dict[str, str]:
    """The :func:`logical_version` of each key's rows (``column == key``; no rows: an empty slice's), copied
    out an eighth of the rows at a time, each batch serialised between the stream's fixed head and tail."""
    import pyarrow as pa

    table = table.combine_chunks()  # a take from one chunk per column copies only the rows taken
    order, runs = _sorted_runs(table[column])
    schema = pa.schema([pa.field(f.name, f.type, f.nullable) for f in table.schema])
    # a dictionary's values go in a message of their own, which a batch serialised alone lacks
    plain = not any(pa.types.is_dictionary(f.type) or pa.types.is_nested(f.type) for f in schema)
    head, tail = _stream_frame(schema)
    group_rows = max(1, table.num_rows // 8)
    out, start, i = {}, 0, 0
    while i < len(runs):
        j, rows = i, 0
        while j < len(runs) and (j == i or rows + runs[j]["counts"] <= group_rows):
            rows += runs[j]["counts"]
            j += 1
        group = table.take(order.slice(start, rows)).combine_chunks()  # keys i..j-1: a fresh copy
        cut = [_runs_of(c.chunk(0)) for c in group.columns] if plain else []  # rows >= 1: one chunk each
        at = 0
        for run in runs[i:j]:
            n = run["counts"]
            if plain:
                digest = _hasher()
                digest.update(head)
                digest.update(pa.RecordBatch.from_arrays([c(at, n) for c in cut], schema=schema).serialize())
                digest.update(tail)
                out[run["values"]] = digest.hexdigest()
            else:  # a fresh copy of the run, through the stream writer (it writes the dictionaries)
                copy = group.slice(at, n).take(pa.array(range(n))).combine_chunks()
                out[run["values"]] = _ipc_digest(pa.Table.from_arrays(copy.columns, schema=schema))
            at += n
        start, i = start + rows, j
        del group, cut
    empty = logical_version(table.slice(0, 0))
    return {k: out.get(k, empty) for k in sorted(keys | set(out))}


def _sorted_runs(keys: pa.ChunkedArray) -> tuple[pa.Array, list[dict]]:
    """The stable sort of ``keys`` (row numbers) and its runs, [{"values": key, "counts": rows}], by key rank."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if keys.null_count or not len(keys):
        order = pc.sort_indices(keys)  # stable
        return order, pc.value_counts(pc.take(keys, order)).to_pylist()
    encoded = pc.dictionary_encode(keys).combine_chunks()
    values = encoded.dictionary
    by_value = pc.sort_indices(values).to_numpy()  # distinct values: no ties
    rank = np.empty(len(values), np.int32)
    rank[by_value] = np.arange(len(values), dtype=np.int32)
    key = rank[encoded.indices.to_numpy()]
    order = np.argsort(key, kind="stable")
    counts = np.bincount(key, minlength=len(values))
    runs = [{"values": v, "counts": int(n)} for v, n in zip(pc.take(values, by_value).to_pylist(), counts, strict=True)]
    return pa.array(order), [r for r in runs if r["counts"]]


def _stream_frame(schema: pa.Schema) -> tuple[bytes, bytes]:
    """The head and tail of an IPC stream of ``schema``: a one-batch stream is head + batch + tail."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema):
        pass
    frame = sink.getvalue().to_pybytes()
    return frame[:-8], frame[-8:]


def _runs_of(array: pa.Array) -> Callable[[int, int], pa.Array]:
    """A function of (start, n) giving those rows of a fresh ``array`` with a fresh copy's IPC bytes, without
    copying where the type allows."""
    import numpy as np
    import pyarrow as pa

    kind, buffers = array.type, array.buffers()
    if array.null_count or array.offset:
        pass
    elif pa.types.is_string(kind) or pa.types.is_binary(kind):
        offsets, chars = np.frombuffer(buffers[1], np.int32, len(array) + 1), buffers[2]

        def strings(start: int, n: int) -> pa.Array:
            mine = offsets[start : start + n + 1]
            first = int(mine[0])
            text = chars.slice(first, int(mine[-1]) - first) if chars is not None else None
            return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(mine - np.int32(first)), text])

        return strings
    elif pa.types.is_boolean(kind):
        bits = array.to_numpy(zero_copy_only=False)
        return lambda start, n: pa.Array.from_buffers(
            kind, n, [None, pa.py_buffer(np.packbits(bits[start : start + n], bitorder="little"))]
        )
    elif len(buffers) == 2 and kind.bit_width % 8 == 0 and not pa.types.is_dictionary(kind):
        width, values = kind.bit_width // 8, buffers[1]
        return lambda start, n: pa.Array.from_buffers(kind, n, [None, values.slice(start * width, n * width)])
    return lambda start, n: array.slice(start, n).take(pa.array(np.arange(n)))
