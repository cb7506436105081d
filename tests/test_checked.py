"""Checked raw folders in the data root (tasks/checked/), on a local data root: a raw folder checked by one
partition's build serves the other partition that reads it, whatever process builds it, and never serves anything
but the files it was computed from."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow.parquet as pq
import pytest

from tasks.checked import CheckedFolders
from tasks.qsr import StgQsrPos
from tests.conftest import qsr_rows

pytestmark = pytest.mark.luigi

D = dt.date(2026, 9, 10)
NEXT = D + dt.timedelta(days=1)


def cache_dir(lab):
    return lab.data / "_state" / "checked" / "staging" / "qsr_pos"


def entries(lab) -> set[str]:
    """The folder dates that have an entry (``<folder date>/<key>.arrow``)."""
    return {p.parent.name for p in cache_dir(lab).glob("*/*.arrow")}


def shared(root) -> CheckedFolders:
    from tasks.storage.store import open_backend

    return CheckedFolders(open_backend(root), "staging/qsr_pos")


@contextmanager
def checking(cache: CheckedFolders, folder: dt.date) -> Iterator[None]:
    """Hold the folder's turn for the block, as a build checking it does."""
    turn = cache.turn(folder)
    turn.take()
    try:
        yield
    finally:
        turn.release()


def put(cache: CheckedFolders, folder: dt.date, key: str, writer: dt.date, write) -> None:
    """Store an entry made by ``write(sink)`` under ``key``, as a build does."""
    with cache.putting(folder, writer) as entry:
        write(entry)
        entry.commit(key)


def get(cache: CheckedFolders, folder: dt.date, key: str, reader: dt.date):
    return cache.lookup(folder, lambda about: None, lambda: key, reader)


def path(cache: CheckedFolders, folder: dt.date, key: str):
    return cache.where.root / str(folder) / f"{key}.arrow"


def files(root) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def build(lab, date: dt.date) -> int:
    return lab.luigi("StgQsrPos", "--date", str(date))


def rows(lab, date: dt.date) -> list[dict]:
    return pq.read_table(lab.partition(date) / "data.parquet").to_pylist()


def manifest(lab, date: dt.date) -> dict:
    return json.loads((lab.partition(date) / "_manifest.json").read_text())


def test_an_entry_serves_the_other_partition_of_its_folder_then_goes(lab):
    lab.qsr_days(D, 2)
    assert build(lab, D) == 0
    # partition D read folders D and D+1 and left both for the other partition that reads each
    assert entries(lab) == {str(D), str(NEXT)}
    assert build(lab, NEXT) == 0
    # D+1 used folder D+1's entry (D wrote it): both partitions had it, so it is gone; D+2 is new
    assert entries(lab) == {str(D), str(NEXT + dt.timedelta(days=1))}


def test_partitions_built_from_the_cache_equal_partitions_built_without_it(lab, qsr_setting):
    qsr_setting("max_reject_share", 0.5)  # one rejected line among a dozen
    lab.qsr_days(D, 3)
    lab.qsr_file(
        NEXT.isoformat(), "S003", [*qsr_rows("S003", NEXT), "bad,x,S003,2026-09-11T12:00:00Z,A,1,1,,COMPLETED"]
    )
    for i in range(3):
        assert build(lab, D + dt.timedelta(days=i)) == 0
    cached = {i: (rows(lab, D + dt.timedelta(days=i)), manifest(lab, D + dt.timedelta(days=i))) for i in range(3)}
    # the same dates again, each with the cache emptied first: every folder checked from its files
    for i in range(3):
        date = D + dt.timedelta(days=i)
        shutil.rmtree(cache_dir(lab))
        os.remove(lab.partition(date) / "_manifest.json")
        assert build(lab, date) == 0
        again = manifest(lab, date)
        assert rows(lab, date) == cached[i][0]
        assert again["data_version"] == cached[i][1]["data_version"]
        assert again["stats"] == {**cached[i][1]["stats"], "raw_folders": again["stats"]["raw_folders"]}
        assert set(again["stats"]["raw_folders"].values()) == {"checked"}
        assert again["input_hashes"] == cached[i][1]["input_hashes"]
        assert again["rejected_count"] == cached[i][1]["rejected_count"]
    assert cached[1][1]["rejected_count"] == 1


def test_folders_checked_a_file_at_a_time_give_the_partitions_of_whole_folders(lab, qsr_setting, monkeypatch):
    """With a batch per file, a build hands each folder on in pieces, each written to the folder's
    entry as it comes, and the next partition reads that entry: the partitions (rows, quarantine,
    counts) are those of folders checked whole, without the cache, rejects in later pieces included."""
    from tasks import qsr

    qsr_setting("max_reject_share", 0.5)
    stores = ("S001", "S002", "S003")
    lab.qsr_days(D, 3, stores)
    lab.qsr_file(NEXT.isoformat(), "S002", [*qsr_rows("S002", NEXT), "O9,1,S002"])  # the parser cannot split it
    lab.qsr_file(
        NEXT.isoformat(), "S003", [*qsr_rows("S003", NEXT), "bad,x,S003,2026-09-11T12:00:00Z,A,1,1,,COMPLETED"]
    )

    def partitions() -> dict:
        out = {}
        for i in range(3):
            date = D + dt.timedelta(days=i)
            m = manifest(lab, date)
            quarantine = lab.data / m["quarantine"]["path"] if m.get("quarantine") else None
            stats = {k: v for k, v in m["stats"].items() if k != "raw_folders"}  # how, not what
            out[date] = (rows(lab, date), pq.read_table(quarantine).to_pylist() if quarantine else [], stats)
        return out

    monkeypatch.setattr(qsr, "CHECK_BATCH_BYTES", 1)  # a batch per file: three pieces per folder
    for i in range(3):
        assert build(lab, D + dt.timedelta(days=i)) == 0
    streamed = partitions()
    assert entries(lab) == {str(D), str(D + dt.timedelta(days=3))}  # the middle ones were read
    monkeypatch.undo()
    for i in range(3):
        shutil.rmtree(cache_dir(lab))
        shutil.rmtree(lab.partition(D + dt.timedelta(days=i)))
        assert build(lab, D + dt.timedelta(days=i)) == 0
    assert partitions() == streamed
    assert [len(streamed[NEXT][1]), streamed[NEXT][2]["rows_read"] > 0] == [2, True]


def test_a_file_rewritten_with_the_same_size_and_mtime_is_not_served_from_the_cache(lab):
    lab.qsr_days(D, 2)
    assert build(lab, D) == 0
    assert str(NEXT) in entries(lab)
    # a re-sent file of folder D+1: same length, same mtime, another quantity (COLA 3 -> 4)
    path = lab.raw / "qsr_pos" / NEXT.isoformat() / "S001.csv"
    st = path.stat()
    text = path.read_text()
    changed = text.replace(",COLA,3,", ",COLA,4,")
    assert changed != text and len(changed) == len(text)
    path.write_text(changed)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert build(lab, NEXT) == 0
    cola = [r for r in rows(lab, NEXT) if r["store_id"] == "S001" and r["sku"] == "COLA"]
    assert [r["qty"] for r in cola] == [4]


def test_a_folder_served_from_the_cache_is_not_read_again_and_its_hashes_are_recorded(lab, monkeypatch):
    from tasks.storage.rawlocal import LocalRaw

    lab.qsr_days(D, 2)
    lab.wait_past_last_raw_change()  # else folder D+1 is read again: changed since it was listed, or not
    assert build(lab, D) == 0
    read, real = [], LocalRaw.read
    monkeypatch.setattr(LocalRaw, "read", lambda zone, raw: read.append(raw.relpath) or real(zone, raw))
    assert build(lab, NEXT) == 0
    # folder D+1 came from the entry D left, by the identities it recorded: none of its files read again
    assert sorted({p.split("/")[1] for p in read}) == [str(NEXT + dt.timedelta(days=1))]
    folder = lab.raw / "qsr_pos" / NEXT.isoformat()
    assert {p: h for p, h in manifest(lab, NEXT)["input_hashes"].items() if f"/{NEXT}/" in p} == {
        f"qsr_pos/{NEXT}/{f.name}": hashlib.sha256(f.read_bytes()).hexdigest() for f in folder.iterdir()
    }


def test_a_damaged_entry_is_never_used(lab):
    lab.qsr_days(D, 2)
    assert build(lab, D) == 0
    (entry,) = (cache_dir(lab) / str(NEXT)).glob("*.arrow")
    data = bytearray(entry.read_bytes())
    good = [r for r in rows(lab, D)]
    # change bytes at the end of the payload (the last column's values: owner dates, no offsets to
    # trip the IPC reader), as a torn write or a bad disk would; the trailer (key, checksum) is intact
    end = len(data) - 8 - int.from_bytes(data[-8:], "little")
    for i in range(end - 24, end - 8):  # before the stream's 8-byte end marker
        data[i] ^= 0x01
    entry.write_bytes(bytes(data))
    cache = shared(lab.data)
    assert get(cache, NEXT, entry.stem, D) is None  # the checksum does not match: a miss
    assert not entry.exists()  # ... and the entry is removed
    entry.parent.mkdir(exist_ok=True)  # gone with its last entry
    entry.write_bytes(bytes(data))
    assert build(lab, NEXT) == 0
    # rebuilt from the files: D+1 holds its own four lines per store from folder D+1 and two from D+2
    got = rows(lab, NEXT)
    assert len(got) == 2 * 4
    assert {r["order_id"] for r in got} == {f"{s}-{NEXT}-{x}" for s in ("S001", "S002") for x in "BC"} | {
        f"{s}-{NEXT + dt.timedelta(days=1)}-A" for s in ("S001", "S002")
    }
    assert rows(lab, D) == good


def test_a_rule_change_does_not_use_an_entry_checked_under_the_old_rules(lab, qsr_setting):
    lab.qsr_days(D, 2)
    assert build(lab, D) == 0
    qsr_setting("day_start_hour", 0)  # a business day from midnight: the 01:15 lines stay on D+1
    assert build(lab, NEXT) == 0
    got = rows(lab, NEXT)
    assert {r["order_id"] for r in got} == {f"{s}-{NEXT}-{x}" for s in ("S001", "S002") for x in "ABC"}


def test_a_single_run_leaves_no_entry(lab):
    lab.qsr_days(D, 4)
    assert (
        lab.luigi("RangeSingleRun", "--of", "StgQsrPos", "--start", str(D), "--stop", str(D + dt.timedelta(days=4)))
        == 0
    )
    assert entries(lab) == set()
    assert StgQsrPos(date=D).complete()


def test_the_two_partitions_of_a_folder_checking_it_at_once_leave_no_entry(tmp_path):
    cache = shared(tmp_path)
    # partition D checked folder D+1 and left it; partition D+1, running at the same time, missed it
    # and checked the folder too: both have had it, nothing is left for anyone
    put(cache, NEXT, "k1", D, lambda sink: sink.write(b"rows"))
    assert bytes(get(cache, NEXT, "k1", D)) == b"rows"  # the writer itself (a rebuild of D) keeps it
    put(cache, NEXT, "k1", NEXT, lambda sink: sink.write(b"rows"))
    assert not path(cache, NEXT, "k1").exists()
    # an entry for other content is replaced, whoever wrote it
    put(cache, NEXT, "k1", D, lambda sink: sink.write(b"old"))
    put(cache, NEXT, "k2", NEXT, lambda sink: sink.write(b"new"))
    assert get(cache, NEXT, "k1", D) is None
    assert bytes(get(cache, NEXT, "k2", D)) == b"new"
    assert not path(cache, NEXT, "k1").exists()  # read by the other partition: gone


def test_an_entry_read_stays_whole_when_it_is_replaced_or_removed(tmp_path):
    """An entry is mapped, not copied: what a reader got must not change when another process
    replaces the entry (a rename over it) or removes it (the second partition has had it)."""
    cache = shared(tmp_path)
    put(cache, NEXT, "k1", D, lambda sink: sink.write(b"first rows"))
    held = get(cache, NEXT, "k1", D)
    put(cache, NEXT, "k2", D, lambda sink: sink.write(b"other rows, longer"))  # renamed over it
    assert bytes(held) == b"first rows"
    assert bytes(get(cache, NEXT, "k2", NEXT)) == b"other rows, longer"  # the other partition: removed
    assert not path(cache, NEXT, "k1").exists()
    assert bytes(held) == b"first rows"
    path(cache, NEXT, "k1").parent.mkdir(exist_ok=True)
    path(cache, NEXT, "k1").write_bytes(b"")  # an empty file is a miss, not an error
    assert get(cache, NEXT, "k1", D) is None


def test_an_entry_is_there_only_once_committed(tmp_path):
    """An entry is written as its folder is checked: a build that stops half-way (an error, a bad
    file found late) leaves neither an entry nor a temporary file."""
    cache = shared(tmp_path)
    with cache.putting(D, D) as entry:
        entry.write(b"half of it")  # no commit
    with pytest.raises(RuntimeError), cache.putting(D, D) as entry:
        entry.write(b"half of it")
        raise RuntimeError("a bad file in the next batch")
    assert files(cache.where.root) == []
    with cache.putting(D, D) as entry:
        entry.write(b"ro")
        entry.write(b"ws")
        entry.commit("k")
    assert bytes(get(cache, D, "k", D)) == b"rows"
    assert files(cache.where.root) == [f"{D}/k.arrow"]


@pytest.mark.system
def test_a_full_disk_while_an_entry_is_written_costs_the_entry_only(small_disk, monkeypatch):
    """The disk fills up in the middle of an entry (the free-space guard let it start): no error
    reaches the build, no entry and no temporary file are left."""
    from tasks import checked

    monkeypatch.setattr(checked, "MIN_FREE_BYTES", 0)
    monkeypatch.setattr(checked, "MIN_FREE_SHARE", 0.0)
    cache = shared(small_disk)
    with cache.putting(D, D) as entry:
        for _ in range(4):  # 4 MB onto a 2 MB disk
            assert entry.write(b"\0" * (1 << 20)) == 1 << 20
        entry.commit("k")
    assert files(cache.where.root) == []
    with cache.putting(D, D) as entry:  # the room is back: entries are written again
        entry.write(b"rows")
        entry.commit("k")
    assert bytes(get(cache, D, "k", D)) == b"rows"


def test_a_build_that_fails_while_checking_a_folder_lets_go_of_it_at_once(lab, monkeypatch):
    """A folder is handed to the transform piece by piece while its lock is held and its entry
    written: when the transform fails half-way, the lock is let go and the half-written entry dropped
    as the build ends, not whenever the error (whose traceback holds the build's frames) is let go.
    Another build in the same process would otherwise wait for the lock (flock: per open file)."""
    import time

    from tasks.checked import turns
    from tasks.freshness.engine import Engine
    from tasks.transforms import qsr_pos

    lab.qsr_days(D, 2)

    def failing(folders, date, rules, threads):
        for checked in folders:
            if checked.folder == NEXT:
                raise RuntimeError("the transform failed")

    monkeypatch.setattr(qsr_pos, "clean_checked", failing)
    task = StgQsrPos(date=D)
    with pytest.raises(RuntimeError) as failure:
        task.build(Engine().window(task).read)
    assert failure.value.__traceback__ is not None  # still alive
    monkeypatch.setattr(turns, "CHECK_WAIT_S", 1.0)
    t0 = time.monotonic()
    with checking(shared(lab.data), NEXT):
        waited = time.monotonic() - t0
    assert waited < 0.5
    (entry,) = (cache_dir(lab) / str(D)).glob("*.arrow")
    assert files(cache_dir(lab)) == [f"{D}.lock", f"{D}/{entry.name}", f"{NEXT}.lock"]


def test_an_entry_older_than_a_week_is_removed_when_another_is_written(tmp_path):
    from tasks.checked import MAX_AGE_S

    cache = shared(tmp_path)
    put(cache, D, "k", D, lambda sink: sink.write(b"x"))
    old = path(cache, D, "k").stat().st_mtime - MAX_AGE_S - 60
    for aged in (path(cache, D, "k"), path(cache, D, "k").parent):  # the entry, and its folder since it was stored
        os.utime(aged, (old, old))
    put(cache, NEXT, "k", D, lambda sink: sink.write(b"y"))
    assert not path(cache, D, "k").exists()
    assert path(cache, NEXT, "k").exists()


def test_a_process_needing_a_folder_another_is_checking_waits_for_it(tmp_path, monkeypatch):
    """``checking`` makes a second holder wait until the first lets go (the lock is a ``flock`` on a
    file of its own, so two holders conflict even within one process); a holder that is stuck is
    waited for ``CHECK_WAIT_S`` only, then the waiter goes on (the lock only saves work)."""
    import threading
    import time

    from tasks.checked import turns

    cache = shared(tmp_path)
    held, release, order = threading.Event(), threading.Event(), []

    def first():
        with checking(cache, NEXT):
            held.set()
            release.wait(10)
            order.append("first done")

    holder = threading.Thread(target=first)
    holder.start()
    held.wait(10)
    threading.Timer(0.3, release.set).start()
    with checking(cache, NEXT):
        order.append("second in")
    holder.join()
    assert order == ["first done", "second in"]
    with checking(cache, D):  # another folder: its own lock, no wait
        pass

    monkeypatch.setattr(turns, "CHECK_WAIT_S", 0.2)
    held.clear()
    release.clear()
    order.clear()
    holder = threading.Thread(target=first)
    holder.start()
    held.wait(10)
    t0 = time.monotonic()
    with checking(cache, NEXT):
        order.append("second in")
    waited = time.monotonic() - t0
    release.set()
    holder.join()
    assert order == ["second in", "first done"]
    assert waited >= 0.2


def test_two_workers_building_the_two_partitions_of_a_folder_check_it_once(lab, monkeypatch):
    """``--workers 2`` builds D and D+1 at once (two processes), and both read folder D+1. The process
    that checks folder D+1 first holds its check open until the other one has found the folder's lock
    taken (a handshake through a file, not a sleep): that one waits for the check's entry instead of
    checking the folder too. Every check is logged to a file by the (forked) workers."""
    import fcntl
    import time

    from tasks.checked import turns
    from tasks.transforms import qsr_check

    lab.qsr_days(D, 3)
    log = lab.data.parent / "checks.log"
    waited = lab.data.parent / "waited"  # written by a process that found folder D+1's lock taken
    check_pieces, flock_within = qsr_check.check_pieces, turns.flock_within

    def logged(batches, folder, rules, threads=1):
        if folder == NEXT:
            deadline = time.monotonic() + 60
            while not waited.exists() and time.monotonic() < deadline:
                time.sleep(0.005)
        yield from check_pieces(batches, folder, rules, threads)
        with open(log, "a") as fh:
            fh.write(f"{os.getpid()} {folder}\n")

    def watched(fh, wait_s, poll_s=0.1):
        if fh.name.endswith(f"{NEXT}.lock"):
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                waited.write_text(str(os.getpid()))
        return flock_within(fh, wait_s, poll_s)

    monkeypatch.setattr(qsr_check, "check_pieces", logged)
    monkeypatch.setattr(turns, "flock_within", watched)
    assert lab.range(D, NEXT + dt.timedelta(days=1), "--workers", "2") == 0  # as the luigi command runs it
    checks = [line.split() for line in log.read_text().splitlines()]
    assert sorted(folder for _, folder in checks) == sorted(str(d) for d in (D, NEXT, NEXT + dt.timedelta(days=1)))
    assert len({pid for pid, _ in checks}) == 2  # the two partitions ran in two processes
    checker = next(pid for pid, folder in checks if folder == str(NEXT))
    assert waited.read_text() != checker  # the other process waited on the check, and did not check again
    # both partitions are as built one after the other, each from its files
    together = {d: rows(lab, d) for d in (D, NEXT)}
    shutil.rmtree(cache_dir(lab))
    for d in (D, NEXT):
        shutil.rmtree(lab.partition(d))
        assert build(lab, d) == 0
    assert {d: rows(lab, d) for d in (D, NEXT)} == together


def test_deleting_the_checked_folders_mid_run_only_costs_time(lab, monkeypatch):
    """``_state/checked`` removed while a build is writing folder D+1's entry (and holding its turn): the run
    goes on, the next partition checks folder D+1 again instead of reading it, later folders are shared again,
    and every partition equals one built from its files alone."""
    from tasks.transforms import qsr_check

    lab.qsr_days(D, 4)
    check_pieces, removed = qsr_check.check_pieces, []

    def deleting(batches, folder, rules, threads=1):
        for piece in check_pieces(batches, folder, rules, threads):
            if folder == NEXT and not removed:
                shutil.rmtree(cache_dir(lab))
                removed.append(folder)
            yield piece

    monkeypatch.setattr(qsr_check, "check_pieces", deleting)
    dates = [D + dt.timedelta(days=i) for i in range(4)]
    assert lab.range(dates[0], dates[-1] + dt.timedelta(days=1)) == 0
    assert removed == [NEXT]
    how = {d: manifest(lab, d)["stats"]["raw_folders"] for d in dates}
    assert how[NEXT][str(NEXT)] == "checked"  # its entry was never stored: checked again
    assert how[dates[2]][str(dates[2])] == "shared"  # the next ones are shared again
    assert how[dates[3]][str(dates[3])] == "shared"
    built = {d: rows(lab, d) for d in dates}
    monkeypatch.undo()
    shutil.rmtree(cache_dir(lab))
    for d in dates:
        shutil.rmtree(lab.partition(d))
        assert build(lab, d) == 0
    assert {d: rows(lab, d) for d in dates} == built


def test_a_build_checks_the_folder_nobody_is_checking_before_it_waits_for_the_other(lab, monkeypatch):
    """Partition D+1 reads folders D+1 and D+2. While another process holds folder D+1's turn (checking it),
    the build checks folder D+2 first, then waits for D+1: the holder lets go only once D+2's entry is there
    (or after 10 s, and then the order shows it was not)."""
    import threading
    import time

    from tasks.transforms import qsr_check

    lab.qsr_days(D, 3)
    after = NEXT + dt.timedelta(days=1)
    order, check_pieces = [], qsr_check.check_pieces

    def logged(batches, folder, rules, threads=1):
        order.append(folder)
        yield from check_pieces(batches, folder, rules, threads)

    monkeypatch.setattr(qsr_check, "check_pieces", logged)
    held, released = threading.Event(), []

    def other_process():
        with checking(shared(lab.data), NEXT):
            held.set()
            deadline = time.monotonic() + 10
            while str(after) not in entries(lab) and time.monotonic() < deadline:
                time.sleep(0.01)
            released.append(str(after) in entries(lab))

    holder = threading.Thread(target=other_process)
    holder.start()
    held.wait(10)
    assert build(lab, NEXT) == 0
    holder.join()
    assert released == [True]
    assert order == [after, NEXT]
    assert manifest(lab, NEXT)["stats"]["raw_folders"] == {str(NEXT): "checked", str(after): "checked"}


def test_status_says_how_each_build_had_its_raw_folders(lab, capsys):
    from tasks.cli import main

    lab.qsr_days(D, 3)
    assert lab.range(D, D + dt.timedelta(days=3)) == 0
    capsys.readouterr()
    stop = D + dt.timedelta(days=3)
    assert main(["status", "--dataset", "stg_qsr_pos", "--start", str(D), "--stop", str(stop), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["raw_folders"] for r in rows] == [
        {str(D + dt.timedelta(days=i)): "shared" if i else "checked", str(D + dt.timedelta(days=i + 1)): "checked"}
        for i in range(3)
    ]
