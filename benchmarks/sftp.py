"""SFTP raw zone benchmark. Run: python benchmarks/sftp.py  (after benchmarks/backfill.py, which leaves
the 1,095-date no-op zone and the 60-day sample in data/bench/), or only (2) on any raw zone:
python benchmarks/sftp.py --reads-only --raw RAW [--folders 9] [--rounds 3].

Against a real OpenSSH server on 127.0.0.1 started here, side by side with the local disk:
 (1) listing and fingerprinting 1,095 dates x 100 stores (StgQsrPos.bulk_complete) over one
     connection, after a first check over the server (untimed for the target: the files' identities over
     SFTP are new to partitions built from the local disk, so it hashes each file once); target under 10 s;
 (2) reading the POS files of the first folders (bytes only): Daybreak's reads as a build makes them
     (a new connection, then RawZone.read_inputs: several files in flight) against OpenSSH's own
     client fetching the same files (`sftp -b` with one `get` per file, its start and login
     included), rounds alternating; target: Daybreak's rate at least 1.0x OpenSSH's.
"""

from __future__ import annotations

import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
BENCH = REPO / "data" / "bench"


def openssh_batch(server, batch: Path) -> None:
    """OpenSSH's own client running the commands of ``batch`` (``sftp -b``: a failed command stops it)
    against ``server`` (a started ``tests.sshd.Sshd``), with its client key and known_hosts."""
    import subprocess

    subprocess.run(
        ["sftp", "-q", "-b", str(batch), "-i", str(server.client_key), "-P", str(server.port),
         "-o", f"UserKnownHostsFile={server.known_hosts}", "-o", "StrictHostKeyChecking=yes",
         f"{server.user}@127.0.0.1"],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip


def reads(raw: Path, folders: int, rounds: int) -> None:
    """(2): Daybreak's reads of the first ``folders`` export folders against ``sftp -b``, alternating."""
    import shutil

    from tasks.storage import sftp as sftp_module
    from tasks.storage.rawzone import RawZone
    from tasks.storage.sftp import SftpRaw
    from tests.sshd import Sshd

    dates = sorted(p.name for p in (raw / "qsr_pos").iterdir())[:folders]
    files = [f for d in dates for f in RawZone(raw).list_folder("qsr_pos", dt.date.fromisoformat(d))]
    total = sum(f.size for f in files)
    server = Sshd(Path(tempfile.mkdtemp()) / "sshd").start()
    out = Path(tempfile.mkdtemp())
    try:

        def daybreak() -> None:
            zone = RawZone(SftpRaw(
                "127.0.0.1", server.port, server.user, str(raw), key_filename=str(server.client_key),
                known_hosts=str(server.known_hosts),
            ))  # fmt: skip
            got = sum(len(b) for b in zone.read_inputs(files))
            zone.close()
            sftp_module._CONNECTIONS.clear()
            assert got == total, (got, total)

        def openssh() -> None:
            batch = out / "batch"
            batch.write_text("".join(f"get {raw}/{f.relpath} {out}/{i}\n" for i, f in enumerate(files)))
            openssh_batch(server, batch)

        rates: dict[str, list[float]] = {"daybreak": [], "openssh": []}
        for k in range(rounds):
            for name, fn in (("daybreak", daybreak), ("openssh", openssh))[:: 1 if k % 2 == 0 else -1]:
                t0 = time.perf_counter()
                fn()
                rates[name].append(total / 1e6 / (time.perf_counter() - t0))
    finally:
        server.stop()
        shutil.rmtree(out, ignore_errors=True)
    ratios = [d / o for d, o in zip(rates["daybreak"], rates["openssh"], strict=True)]
    print(
        f"(2) read {len(files)} POS files ({total / 1e6:.0f} MB) over SFTP, {rounds} rounds: Daybreak "
        + ", ".join(f"{r:.0f}" for r in rates["daybreak"]) + " MB/s; OpenSSH's sftp -b "
        + ", ".join(f"{r:.0f}" for r in rates["openssh"]) + " MB/s"
    )  # fmt: skip
    median = sorted(ratios)[len(ratios) // 2]
    print(f"    Daybreak / OpenSSH, same round: {', '.join(f'{r:.2f}' for r in ratios)}; median {median:.2f}x"
          f"   target >= 1.0x {'ok' if median >= 1.0 else 'MISSED'}")  # fmt: skip


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reads-only", action="store_true", help="only (2), on --raw")
    ap.add_argument("--raw", default=str(BENCH / "raw-60x100"), help="a raw zone with qsr_pos folders")
    ap.add_argument("--folders", type=int, default=9, help="export folders read in (2) (100 files each)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if args.reads_only:
        if not (Path(args.raw) / "qsr_pos").is_dir():
            ap.error(f"--raw {args.raw}: no qsr_pos folder (run benchmarks/backfill.py first, or name a raw zone)")
        return reads(Path(args.raw), args.folders, args.rounds)
    import luigi.configuration

    from tests.sshd import Sshd

    noop_raw, sample_raw = BENCH / "noop-raw", BENCH / "raw-60x100"
    if not (noop_raw.exists() and sample_raw.exists()):
        raise SystemExit("run python benchmarks/backfill.py first (it builds data/bench/)")
    server = Sshd(Path(tempfile.mkdtemp()) / "sshd").start()
    try:
        cfg = luigi.configuration.get_config()
        cfg.set("daybreak", "data_root", str(BENCH / "noop-data"))
        # the dates' own start: a date before start_date counts as done without a look (it would time nothing)
        cfg.set("daybreak", "start_date", "2023-09-01")
        cfg.set("sftp", "key_filename", str(server.client_key))
        cfg.set("sftp", "known_hosts", str(server.known_hosts))
        from tasks.qsr import StgQsrPos

        dates = [dt.date(2023, 9, 1) + dt.timedelta(days=k) for k in range(1095)]
        if StgQsrPos(date=dates[0]).before_start():
            raise SystemExit("the dates lie before [daybreak] start_date: bulk_complete would not look at them")
        timings = {}
        zones = (("local", str(noop_raw)), ("sftp first", server.uri(noop_raw)), ("sftp", server.uri(noop_raw)))
        for name, root in zones:
            cfg.set("daybreak", "raw_root", root)
            t0 = time.perf_counter()
            done = StgQsrPos.bulk_complete(iter(dates))
            timings[name] = (time.perf_counter() - t0, len(done))
    finally:
        server.stop()
    (lt, ln), (ft, fn), (st, sn) = timings["local"], timings["sftp first"], timings["sftp"]
    print(
        f"(1) bulk_complete over 1,095 dates x 100 stores: local {lt:.2f} s ({ln} complete), "
        f"SFTP {st:.2f} s ({sn} complete), {st / lt:.1f}x   target SFTP < 10 s  {'ok' if st < 10 else 'MISSED'}"
    )
    print(f"    the first check over this server: {ft:.2f} s ({fn} complete)")
    if ft > 3 * st:
        print(
            "    (the partitions were built from the local files: over SFTP a file's identity, its whole-second"
            " mtime and no ctime, is new, so the first check read and hashed each file once and recorded it)"
        )
    reads(sample_raw, args.folders, args.rounds)


if __name__ == "__main__":
    main()
