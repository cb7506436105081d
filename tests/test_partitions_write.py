"""PartitionStore writes: durability order, what readers see mid-write, sweeping orphaned temporaries.

The crash and disk-full scenarios through Luigi are in tests/test_reliability.py.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from tasks.storage import tempnames
from tasks.storage.partitions import PartitionStore

pytestmark = pytest.mark.unit

D1, D2 = dt.date(2026, 9, 10), dt.date(2026, 9, 11)


def table(n: int) -> pa.Table:
    return pa.table({"order_id": [f"o{i}" for i in range(n)], "qty": list(range(n))})


def duck_rows(store: PartitionStore) -> list[tuple]:
    glob = f"{store.root}/*/*.parquet"
    sql = f"select business_date::varchar, order_id from read_parquet('{glob}', hive_partitioning=true) order by all"
    return duckdb.sql(sql).fetchall()


def test_data_is_fsynced_before_its_rename_and_the_folder_after(tmp_path, monkeypatch):
    store = PartitionStore(tmp_path, "staging/qsr_pos")
    store.write(D1, table(3), {"n": 1})
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))))
        return real_fsync(fd)

    def replace(src, dst, **kw):
        events.append(("replace", os.path.basename(dst)))
        return real_replace(src, dst, **kw)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    store.write(D1, table(4), {"n": 2}, extras={"data.csv": b"a,b\n"})
    names = [(op, name.split(".tmp-")[0]) for op, name in events]
    assert names == [
        ("fsync", ".data.parquet"),
        ("fsync", ".data.csv"),
        ("fsync", "._manifest.json"),
        ("replace", "data.parquet"),
        ("replace", "data.csv"),
        ("replace", "_manifest.json"),
        ("fsync", "business_date=2026-09-10"),
    ]


def test_a_new_partition_being_assembled_is_invisible_to_duckdb_and_pyarrow(tmp_path, monkeypatch):
    store = PartitionStore(tmp_path, "staging/qsr_pos")
    store.write(D1, table(2), {})
    seen = []
    real_rename = os.rename

    def rename(src, dst, **kw):  # the instant before the staging folder is renamed into place
        seen.append((duck_rows(store), ds.dataset(store.root, partitioning="hive").to_table().num_rows))
        return real_rename(src, dst, **kw)

    monkeypatch.setattr(os, "rename", rename)
    store.write(D2, table(3), {})
    assert seen == [([("2026-09-10", "o0"), ("2026-09-10", "o1")], 2)]
    assert len(duck_rows(store)) == 5
    assert os.listdir(store.data_root / "_state" / "staging") == []


def aged(path: Path, hours: float) -> Path:
    t = time.time() - hours * 3600
    os.utime(path, (t, t))
    return path


@pytest.mark.system
def test_the_sweep_removes_dead_writers_temporaries_and_never_a_live_writers(tmp_path):
    store = PartitionStore(tmp_path, "staging/qsr_pos")
    store.write(D1, table(2), {})
    folder, host = store.data_root / store.rel(D1), tempnames.host()
    dead = subprocess.Popen(["true"])
    dead.wait()
    live = subprocess.Popen(["sleep", "60"])
    try:
        live_start = int(Path(f"/proc/{live.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        entries = {
            f".data.parquet.tmp-{host}-{dead.pid}-0-aa": False,  # dead writer on this host
            f".data.parquet.tmp-{host}-{live.pid}-{live_start}-bb": True,  # live writer
            f".data.parquet.tmp-{host}-{live.pid}-{live_start + 1}-cc": False,  # its pid, another process
            f".data.parquet.tmp-{host}-{os.getpid()}-0-dd": True,  # this very process
            ".data.parquet.tmp-otherhost-1-0-ee": True,  # another host, fresh
            ".data.parquet.tmp-0123456789abcdef0123456789abcdef": True,  # an older version's name, fresh
        }
        for name in entries:
            (folder / name).write_bytes(b"PAR1 partial")
        for name in (".data.parquet.tmp-otherhost-1-0-ff", ".data.parquet.tmp-fedcba9876543210fedcba9876543210"):
            (folder / name).write_bytes(b"x")
            aged(folder / name, 25)  # another host's, or an older version's, untouched for 25 h
            entries[name] = False
        dead_staging = store.root / f".business_date=2026-09-12.tmp-{host}-{dead.pid}-0-ab"
        (dead_staging).mkdir()
        (dead_staging / "data.parquet").write_bytes(b"PAR1 partial")
        live_staging = (
            store.data_root / "_state" / "staging"
        ) / f".staging.qsr_pos.business_date=2026-09-13.tmp-{host}-{live.pid}-0-ac"
        live_staging.mkdir(parents=True)
        store.write(D2, table(1), {})  # sweeps the dataset folder and the staging root
        assert not dead_staging.exists() and live_staging.is_dir()
        store.write(D1, table(1), {})  # sweeps the partition folder
        assert {n: (folder / n).exists() for n in entries} == entries
    finally:
        live.kill()
        live.wait()


@pytest.mark.system
@pytest.mark.parametrize("state", ["Z"])
def test_a_killed_writer_not_yet_reaped_counts_as_dead(tmp_path, state):
    child = subprocess.Popen(["sleep", "60"])
    child.kill()
    for _ in range(100):  # killed, but not waited for: a zombie
        if Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == state:
            break
        time.sleep(0.01)
    assert not tempnames.writer_alive(child.pid, 0)
    child.wait()


def test_a_high_cardinality_column_is_not_kept_in_a_dictionary(tmp_path):
    """The writer gives a column's dictionary up once it passes 64 KiB: 20,000 order ids (one in two
    repeated, as an order's lines are) take less room than with Arrow's default 1 MiB limit, where
    the whole column stays in a dictionary; the values read back the same, by DuckDB too."""
    import pyarrow.parquet as pq

    n = 20_000
    rows = pa.table({"order_id": [f"ORD-2026-09-10-{i // 2:08d}" for i in range(n)], "status": ["COMPLETED"] * n})
    store = PartitionStore(tmp_path, "staging/qsr_pos")
    store.write(D1, rows, {})
    written = store.data_root / store.rel(D1) / "data.parquet"
    default = pa.BufferOutputStream()
    pq.write_table(rows, default, compression="zstd")
    assert written.stat().st_size < 0.9 * default.getvalue().size
    chunk = pq.ParquetFile(written).metadata.row_group(0)
    assert (
        chunk.column(1).encodings
        == pq.ParquetFile(pa.BufferReader(default.getvalue())).metadata.row_group(0).column(1).encodings
    )  # a low-cardinality column keeps its dictionary
    assert pq.read_table(written).select(["order_id", "status"]).equals(rows)
    assert duckdb.sql(f"select count(distinct order_id) from '{written}'").fetchall() == [(n // 2,)]


def test_decimals_are_stored_as_integers_and_read_back_as_the_same_decimals(tmp_path):
    """Amounts (decimal(18,2)) and any decimal up to precision 9 go to Parquet as INT64 / INT32 with the
    DECIMAL logical type: pyarrow reads the same decimal type and values back, DuckDB the same sums,
    negative amounts and the largest decimal(18,2) included."""
    import decimal

    import pyarrow.parquet as pq

    amounts = [decimal.Decimal(v) for v in ("1.99", "-12.50", "0.00", "9999999999999999.99", "-0.01")]
    rows = pa.table(
        {
            "net_amount": pa.array(amounts, pa.decimal128(18, 2)),
            "rate": pa.array([decimal.Decimal("123.45")] * 5, pa.decimal128(9, 2)),
        }
    )
    store = PartitionStore(tmp_path, "staging/qsr_pos")
    store.write(D1, rows, {})
    written = store.data_root / store.rel(D1) / "data.parquet"
    schema = pq.ParquetFile(written).schema
    assert [schema.column(i).physical_type for i in range(2)] == ["INT64", "INT32"]
    assert [str(schema.column(i).logical_type) for i in range(2)] == ["Decimal(precision=18, scale=2)"] + [
        "Decimal(precision=9, scale=2)"
    ]
    back = pq.read_table(written).select(["net_amount", "rate"])
    assert back.schema == rows.schema
    assert back.equals(rows)
    total = duckdb.sql(f"select sum(net_amount), min(net_amount), max(net_amount) from '{written}'").fetchall()
    assert total == [(sum(amounts), decimal.Decimal("-12.50"), decimal.Decimal("9999999999999999.99"))]


@pytest.mark.system
def test_a_dead_writers_temporaries_are_swept_at_once_only_by_the_host_name_that_wrote_them(tmp_path, setting):
    """Containers of one image share a machine name but not their processes: before, a temporary file of
    another container (same machine name) whose pid is not alive here was swept at once, live or not."""
    store = PartitionStore(tmp_path, "staging/qsr_pos")
    store.write(D1, table(2), {})
    folder = store.data_root / store.rel(D1)
    dead = subprocess.Popen(["true"])
    dead.wait()
    setting("daybreak", "host_name", "box-b")
    mine, theirs = f".data.parquet.tmp-box-b-{dead.pid}-0-aa", f".data.parquet.tmp-box-a-{dead.pid}-0-bb"
    for name in (mine, theirs):
        (folder / name).write_bytes(b"PAR1 partial")
    store.write(D1, table(1), {})  # sweeps the partition folder
    assert not (folder / mine).exists()  # this named host's dead writer: swept at once
    assert (folder / theirs).exists()  # box-a's: its processes are not this host's to judge
    assert f".tmp-box-b-{os.getpid()}-" in tempnames.temp_path(folder / "x").name  # the names it writes
