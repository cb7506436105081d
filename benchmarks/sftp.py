"""SFTP raw zone benchmark (issue 5). Run: python benchmarks/sftp.py  (after benchmarks/backfill.py,
which leaves the 1,095-date no-op zone and the 60-day sample in data/bench/).

Against a real OpenSSH server on 127.0.0.1 started here, side by side with the local disk:
 (1) listing and fingerprinting 1,095 dates x 100 stores (StgQsrPos.bulk_complete) over one
     connection; target under 10 s;
 (2) reading every POS file of the 60-day, 100-store sample (bytes only): throughput over SFTP
     against local disk.
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


def main() -> None:
    import luigi.configuration

    from tasks.storage.rawzone import RawZone
    from tasks.storage.sftp import SftpRawZone
    from tests.sshd import Sshd

    noop_raw, sample_raw = BENCH / "noop-raw", BENCH / "raw-60x100"
    if not (noop_raw.exists() and sample_raw.exists()):
        raise SystemExit("run python benchmarks/backfill.py first (it builds data/bench/)")
    server = Sshd(Path(tempfile.mkdtemp()) / "sshd").start()
    try:
        cfg = luigi.configuration.get_config()
        cfg.set("daybreak", "data_root", str(BENCH / "noop-data"))
        cfg.set("sftp", "key_filename", str(server.client_key))
        cfg.set("sftp", "known_hosts", str(server.known_hosts))
        from tasks.qsr import StgQsrPos

        dates = [dt.date(2023, 9, 1) + dt.timedelta(days=k) for k in range(1095)]
        timings = {}
        for name, root in (("local", str(noop_raw)), ("sftp", server.uri(noop_raw))):
            cfg.set("daybreak", "raw_root", root)
            t0 = time.perf_counter()
            done = StgQsrPos.bulk_complete(iter(dates))
            timings[name] = (time.perf_counter() - t0, len(done))
        local_zone = RawZone(sample_raw)
        sftp_zone = SftpRawZone(
            "127.0.0.1",
            server.port,
            server.user,
            str(sample_raw),
            key_filename=str(server.client_key),
            known_hosts=str(server.known_hosts),
        )
        reads = {}
        for name, zone in (("local", local_zone), ("sftp", sftp_zone)):
            t0, total = time.perf_counter(), 0
            for k in range(61):
                for f in zone.list_folder("qsr_pos", dt.date(2026, 9, 1) + dt.timedelta(days=k)) or []:
                    total += len(zone.read_bytes(f))
            reads[name] = (time.perf_counter() - t0, total)
    finally:
        server.stop()
    (lt, ln), (st, sn) = timings["local"], timings["sftp"]
    print(
        f"(1) bulk_complete over 1,095 dates x 100 stores: local {lt:.2f} s ({ln} complete), "
        f"SFTP {st:.2f} s ({sn} complete), {st / lt:.1f}x   target SFTP < 10 s  {'ok' if st < 10 else 'MISSED'}"
    )
    (lr, lb), (sr, sb) = reads["local"], reads["sftp"]
    print(
        f"(2) read 60 days of POS files ({lb / 1e6:.0f} MB): local {lb / 1e6 / lr:.0f} MB/s, "
        f"SFTP {sb / 1e6 / sr:.0f} MB/s ({sr / lr:.1f}x the local time)"
    )
    if sn != 0:
        print(
            "    note: SFTP mtimes are whole seconds, so partitions built from local files (ns mtimes)"
            " count as stale over SFTP: the answers differ in count, not in kind"
        )


if __name__ == "__main__":
    main()
