"""Identity by content: what makes two builds of a partition the same (docs/run-semantics.md, "Identity").

* **Raw inputs.** A manifest records each input's name, size and mtime, and its content hash
  (``input_hashes``, taken from the bytes the build read). A check compares the metadata first.
  Where it differs, or where a file's mtime lies within the raw zone's clock resolution of the time
  the build listed it (SFTP: one second), the file is hashed: unchanged content keeps the partition
  up to date ("metadata changed, content identical"), and the new metadata is remembered in a
  sidecar, ``<data_root>/_state/identity/<dataset>/business_date=D.json``, so the next check is as
  cheap as before. The data and its manifest are never rewritten for that.
* **Data versions.** A partition's ``data_version`` is a hash of its logical content: the schema
  (names, types) and the rows in the order the transform produced them, as Arrow IPC bytes (a
  stable format), without the schema metadata. It does not depend on the Parquet writer, its
  version or the compression, so an upstream rebuilt to the same rows stops the cascade.
* **Failure records** carry the identity of the failed attempt and no longer apply once it differs.

No Luigi here; the engine (:mod:`tasks.freshness.engine`) asks these functions.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa

    from tasks.freshness.inputs import Window
    from tasks.storage.partitions import PartitionStore
    from tasks.storage.rawzone import RawFile, RawZone

LOGICAL = "logical-v1"  # manifest["data_version_kind"] of a version made by :func:`logical_version`
SAME_CONTENT = "metadata changed, content identical"


# -- data versions ---------------------------------------------------------------------------------
def logical_version(table: pa.Table) -> str:
    """sha256 of the table's schema (names, types, nullability) and rows in order, as one Arrow IPC
    stream of a single record batch with no metadata: the same rows give the same version whatever
    wrote them, with which library version, and however they were chunked or compressed."""
    import numpy as np
    import pyarrow as pa

    schema = pa.schema([pa.field(f.name, f.type, f.nullable) for f in table.schema])
    table = table.combine_chunks()
    if not all(_exact(c.chunks[0]) for c in table.columns if c.num_chunks):
        # a copy of exactly the rows: Arrow's IPC writer keeps the unused tail of a sliced array's buffers
        table = table.take(pa.array(np.arange(table.num_rows)))
    return _ipc_sha256(pa.Table.from_arrays(table.columns, schema=schema))


def _ipc_sha256(table: pa.Table) -> str:
    import pyarrow as pa

    digest = _Sha256Sink()
    with pa.ipc.new_stream(pa.PythonFile(digest, mode="w"), table.schema) as writer:
        for batch in table.to_batches():
            writer.write_batch(batch)
    return digest.sha.hexdigest()


class _Sha256Sink:
    """A write-only file that hashes what is written to it (no copy of the stream in memory)."""

    closed = False

    def __init__(self):
        self.sha = hashlib.sha256()

    def write(self, data) -> int:
        self.sha.update(data)
        return len(data)

    def flush(self) -> None:
        pass


def _exact(array) -> bool:
    """Whether an array's buffers hold exactly its rows (offset 0, nothing after the last row), as a
    freshly built array does; a slice does not. Types not looked into count as not exact."""
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


def slice_versions(table: pa.Table, column: str, keys: set[str]) -> dict[str, str]:
    """The logical version of each key's rows (``column == key``, in table order); a key without rows
    gets the version of an empty slice. One stable sort of the table, then its keys' rows copied out
    in sorted order a group of keys at a time (about an eighth of the rows: the copy stays small),
    and each key's run of a group hashed as :func:`logical_version` hashes a table (the bytes of its
    IPC stream: schema, one record batch, end of stream), the batch made over the group's buffers
    (:func:`_runs_of`) and serialised between the stream's fixed head and tail."""
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
                digest = hashlib.sha256(head)
                digest.update(pa.RecordBatch.from_arrays([c(at, n) for c in cut], schema=schema).serialize())
                digest.update(tail)
                out[run["values"]] = digest.hexdigest()
            else:  # a fresh copy of the run, through the stream writer (it writes the dictionaries)
                copy = group.slice(at, n).take(pa.array(range(n))).combine_chunks()
                out[run["values"]] = _ipc_sha256(pa.Table.from_arrays(copy.columns, schema=schema))
            at += n
        start, i = start + rows, j
        del group, cut
    empty = logical_version(table.slice(0, 0))
    return {k: out.get(k, empty) for k in sorted(keys | set(out))}


def _sorted_runs(keys: pa.ChunkedArray) -> tuple[pa.Array, list[dict]]:
    """The stable sort of ``keys`` (row numbers, equal keys in row order) and its runs, in sorted
    order: [{"values": key, "counts": rows}]. The keys are few (stores): their dictionary is sorted
    (a few hundred strings) and the rows by their key's rank, a stable integer sort, rather than every
    row's string compared."""
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
    """The bytes an IPC stream of ``schema`` starts with (its schema message) and ends with (the
    end-of-stream marker): a one-batch stream is head + the batch's serialised message + tail."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema):
        pass
    frame = sink.getvalue().to_pybytes()
    return frame[:-8], frame[-8:]


def _runs_of(array: pa.Array) -> Callable[[int, int], pa.Array]:
    """For ``array`` (a freshly built one: offset 0), a function of (start, n) giving its rows start to
    start + n as an array whose IPC bytes are those of a fresh copy of them (what ``take`` gives; a
    slice would carry the padding of the buffers it points into). Without nulls: fixed-width values
    point into the array's buffer, strings get offsets that start at 0 and point into its characters,
    booleans are packed again; anything else is copied by ``take``."""
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


def version_matches(recorded: str | None, version: str | None, upstream: dict | None) -> bool:
    """Whether a downstream partition that recorded ``recorded`` still has the upstream it read:
    the same version, or the byte version of an older manifest whose data was found to hold the same
    rows when it was rebuilt (``equivalent_versions``, see :func:`legacy_equivalents`)."""
    if recorded == version:
        return True
    return (
        upstream is not None
        and version == upstream.get("data_version")
        and recorded in upstream.get("equivalent_versions", ())
    )


def same_rows(store: PartitionStore, key: dt.date | None, previous: dict | None, version: str) -> bool:
    """Whether the partition's current data file holds rows of ``version`` (and is intact): a rebuild
    that produced them again replaces the manifest only, and the data file is not rewritten."""
    if not previous or previous.get("verify_mismatch"):  # a data file that verify found damaged is rewritten
        return False
    return previous.get("data_version") == version and store.data_matches(key, previous)


def legacy_equivalents(store: PartitionStore, key: dt.date | None, previous: dict | None, table: pa.Table) -> list[str]:
    """The migration of manifests written before logical versions (their ``data_version`` is the
    sha256 of the Parquet bytes). Their downstream partitions recorded that byte version, which
    stays valid as long as the partition is not rebuilt. When it is, the replaced data is read once
    and, if it holds the same rows, its byte version is listed as equivalent to the new logical one,
    so nothing downstream rebuilds for the change of version kind."""
    if not previous or previous.get("data_version_kind") == LOGICAL or not previous.get("data_version"):
        return []
    try:  # the old rows as stored, against the new ones as Parquet will store them (seconds become ms)
        if not store.data_matches(key, previous) or logical_version(store.read_table(key)) != _as_stored(table):
            return []
    except (OSError, ValueError):  # unreadable old data: nothing to be equivalent to
        return []
    return [previous["data_version"], *previous.get("equivalent_versions", [])]


def _as_stored(table: pa.Table) -> str:
    """The logical version of ``table`` once written to Parquet and read back (once per old manifest)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return logical_version(pq.read_table(pa.BufferReader(sink.getvalue())))


# -- raw inputs by content -------------------------------------------------------------------------
def sidecar_path(store: PartitionStore, key: dt.date | None) -> Path:
    """``_state/identity/`` mirrors ``_state/failures/``: one small JSON file per partition."""
    return store.state_dir / "identity" / store.record_name(key)


def read_sidecar(store: PartitionStore, key: dt.date | None, manifest: dict) -> dict | None:
    """The remembered metadata of the manifest's inputs, if it was taken for this very manifest."""
    try:
        side = json.loads(sidecar_path(store, key).read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    same = side.get("for_fingerprint") == manifest.get("input_fingerprint")
    return side if same and side.get("for_started_at") == manifest.get("started_at") else None


def write_sidecar(store: PartitionStore, key: dt.date | None, manifest: dict, fingerprint: str, inputs, at_ns: int):
    from tasks.storage.partitions import atomic_write_text

    side = {
        "for_fingerprint": manifest.get("input_fingerprint"),
        "for_started_at": manifest.get("started_at"),
        "input_fingerprint": fingerprint,
        "inputs": inputs,
        "checked_ns": at_ns,
    }
    path = sidecar_path(store, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(side, indent=1))
    except OSError:  # only a saving: the next check hashes again
        pass


def newest_mtime(files: list[RawFile]) -> int:
    return max((f.mtime_ns for f in files), default=0)


def parse_inputs(lines: list) -> dict[str, tuple[int, int]]:
    """A manifest's ``inputs`` as {path: (size, mtime_ns)}; old manifests hold ``[path, size, mtime_ns]``."""
    out = {}
    for line in lines:
        path, size, mtime_ns = line if isinstance(line, list) else line.rsplit(" ", 2)
        out[path] = (int(size), int(mtime_ns))
    return out


def check_inputs(
    zone: RawZone, store: PartitionStore, key, manifest: dict, window: Window, digest: Callable
) -> tuple[bool, str]:
    """Compare the window's files now with the ones the manifest was built from, by content where the
    metadata cannot be trusted. Returns ``(ok, reason)``: ``(True, SAME_CONTENT)`` when only metadata
    changed, ``(True, "")`` when nothing did, ``(False, what changed)`` otherwise."""
    fingerprint, files = window.fingerprint, window.read
    side = read_sidecar(store, key, manifest)
    resolution = zone.mtime_resolution_ns
    metadata_same = manifest.get("input_fingerprint") == fingerprint
    trusted = side is not None and newest_mtime(files) + resolution <= side["checked_ns"]
    if trusted and side["input_fingerprint"] == fingerprint:
        return True, "" if metadata_same else SAME_CONTENT
    hashes = manifest.get("input_hashes")
    if hashes is None:  # a manifest of a version before content hashes: metadata decides
        return metadata_same, "" if metadata_same else "input changed: " + describe_changes(manifest, files)
    if set(hashes) != {f.relpath for f in files}:
        return False, "input changed: " + describe_changes(manifest, files)
    known = parse_inputs(manifest.get("inputs", []))
    trusted_until = manifest.get("inputs_listed_ns", 0)
    if side is not None:
        known.update(parse_inputs(side["inputs"]))
        trusted_until = side["checked_ns"]
    suspects = [
        f for f in files if known.get(f.relpath) != (f.size, f.mtime_ns) or f.mtime_ns + resolution > trusted_until
    ]
    if not suspects:
        return True, ""
    resized = [f.relpath for f in suspects if known.get(f.relpath, (None,))[0] != f.size]
    if resized:
        return False, "input changed: " + ", ".join(f"changed {p}" for p in resized[:3]) + _more(resized)
    checked_ns = time.time_ns()
    changed = [f.relpath for f in suspects if digest(zone, f) != hashes[f.relpath]]
    if changed:
        return False, "input content changed: " + ", ".join(changed[:3]) + _more(changed)
    if newest_mtime(files) + resolution <= checked_ns:
        lines = [f"{f.relpath} {f.size} {f.mtime_ns}" for f in files]
        write_sidecar(store, key, manifest, fingerprint, lines, checked_ns)
    return True, "" if metadata_same else SAME_CONTENT


def _more(items: list) -> str:
    return f" (+{len(items) - 3} more)" if len(items) > 3 else ""


def describe_changes(manifest: dict, files: list[RawFile]) -> str:
    from tasks.freshness.inputs import diff_inputs

    return diff_inputs(manifest.get("inputs", []), files)


# -- failure records -------------------------------------------------------------------------------
def attempt(engine, node, decided_by: dict | None = None) -> dict:
    """The identity of a build attempt, recorded with its failure: rules, inputs (metadata, and the
    content hashes of the files it read before failing), upstream versions, and the settings that
    decided the failure without being rules (``decided_by``: the reject share a build exceeded)."""
    window = engine.window(node)
    zone = engine.zone(node)
    read = [] if window is None else window.read  # a folder gone mid-build: what it read is not known
    return {
        "rules_fingerprint": node.rules_fingerprint(),
        "inputs": [f"{f.relpath} {f.size} {f.mtime_ns}" for f in read],
        "input_hashes": {f.relpath: h for f in read if (h := zone.known_digest(f)) is not None},
        "upstream": engine.upstream_versions(node),
        "decided_by": dict(decided_by or {}),
    }


def failure_applies(engine, node, failure: dict) -> bool:
    """Whether a failure record still describes the partition: same rules, same settings that decided
    it (``decided_by``), same upstream versions, and the raw files it can see now (those of the
    window's folders that are there) exactly the attempt's, with the same content (hashed: a file
    fixed with its mtime kept is seen). A folder of the window gone since takes the files it held out
    of sight, so the record stops applying (the partition waits for the folder, as a run does),
    unless that folder held none the attempt read.
    A record written before identities were recorded always applies."""
    if "rules_fingerprint" not in failure:
        return True
    if failure["rules_fingerprint"] != node.rules_fingerprint():
        return False
    decided = failure.get("decided_by") or {}
    if decided and any(node.acceptance_settings().get(k) != v for k, v in decided.items()):
        return False
    if failure.get("upstream") != engine.upstream_versions(node):
        return False
    seen = engine.window(node, partial=True).read
    before, hashes, zone = parse_inputs(failure.get("inputs", [])), failure.get("input_hashes", {}), engine.zone(node)
    if set(before) != {f.relpath for f in seen}:
        return False
    for f in seen:
        if f.relpath in hashes:
            if zone.digest_now(f) != hashes[f.relpath]:
                return False
        elif before[f.relpath] != (f.size, f.mtime_ns):
            return False
    return True


def _register() -> None:
    """A partition written without a data version gets this one (tasks/storage/partitions.py)."""
    from tasks.storage import partitions

    if not partitions.DATA_VERSION:
        partitions.DATA_VERSION.append((LOGICAL, logical_version))


_register()
