"""Shared fixtures: a temporary raw zone and data root, and Luigi runs against them.

Tests drive the real path: Luigi's command line (in process through ``luigi.retcodes``, or as a
subprocess) with the project's luigi.cfg, on files written to a temporary raw zone.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import luigi
import luigi.configuration
import luigi.retcodes
import pytest

from tasks.freshness import engine as freshness
from tasks.settings import apply_luigi_defaults, write_config

REPO = Path(__file__).resolve().parent.parent
START = Path.cwd()  # the folder pytest started in: where this process first read ./luigi.cfg


def reload_config() -> None:
    """Luigi's config as this process first read it: every section dropped and the files re-read from the
    folder pytest started in. Luigi reads ``luigi.cfg`` relative to the working directory, and a test's
    folder may hold one of its own for the commands it runs: re-read from there, its settings (another
    ``[qsr] timezone``) would outlive the test and change every later test in the worker. The package's
    Luigi defaults ([retcode]) are set again, as ``import tasks`` set them."""
    cfg = luigi.configuration.get_config()
    for section in cfg.sections():
        cfg.remove_section(section)
    with contextlib.chdir(START):
        cfg.reload()
    apply_luigi_defaults()


# A test's tier is the highest of its tier markers (a module's ``pytestmark``, raised for one test by its
# own ``@pytest.mark.system``): unit (no Luigi run), luigi (Luigi in this process, a temporary raw zone),
# system (subprocesses, sshd, luigid, radosgw, Chromium, kill -9, a fresh clone). ``bin/test --fast``
# runs the first two: ``-m "not system"``.
TIERS = ("unit", "luigi", "system")


# Files that take minutes in one test: collected first, so that the two test processes (bin/test, a
# file each at a time) do not end with one of them running it alone.
LONG_FIRST = ("tests/test_luigi_own_tests.py",)


def pytest_collection_modifyitems(config, items):
    """Every test has a tier: a test without one is an error, not a test that runs in every tier. The
    files of LONG_FIRST go first."""
    untiered = [item.nodeid for item in items if not any(item.get_closest_marker(t) for t in TIERS)]
    if untiered:
        raise pytest.UsageError(
            f"{len(untiered)} test(s) without a tier marker ({', '.join(TIERS)}), e.g. {untiered[0]}: "
            "give the module a pytestmark (tests/conftest.py, TIERS)"
        )
    items.sort(key=lambda item: not item.nodeid.startswith(LONG_FIRST))  # stable: the rest keep their order


def _one_parser_per_task_set() -> None:
    """Luigi's command line builds its argparse parser, one argument per parameter of every registered
    task, 9 times a run (3 ``CmdlineParser`` a run, 3 parsers each): a third of the CPU of a short
    in-process run. Here a parser is built once for each root task, while no task class is added
    (Luigi's registry only grows), and then parsed again: the same parser, as Luigi and Daybreak
    (``tasks.luigi_shortcuts.options_in_full``) build it. The system tier runs the real ``luigi``
    command, which builds its own."""
    from luigi.cmdline_parser import CmdlineParser
    from luigi.task_register import Register

    build, built = CmdlineParser._build_parser, {}

    def build_parser(root_task=None, help_all=False):
        key = (root_task, help_all, len(Register._reg))
        if key not in built:
            built[key] = build(root_task, help_all)
        return built[key]

    build_parser.options_in_full = True  # Daybreak's own wrapper is inside: it does not wrap again
    CmdlineParser._build_parser = staticmethod(build_parser)


_one_parser_per_task_set()  # after ``import tasks`` (tasks.freshness above): Daybreak's wrapper is in place


QSR_HEADER = "order_id,line_no,store_id,ordered_at,sku,qty,unit_price,discount,status"
HOTEL_HEADER = "booking_id,hotel_id,event_at,event,arrival_date,departure_date,rooms,rate,channel"


class Lab:
    """A raw zone + data root, with helpers to write raw files and run Luigi on them."""

    def __init__(self, root: Path):
        self.root = root
        self.raw = root / "raw"
        self.data = root / "data"
        self.raw.mkdir()

    # -- raw files ----------------------------------------------------------------------------------
    def qsr_file(self, folder: str, store: str, rows: list[str], header: str = QSR_HEADER) -> Path:
        path = self.raw / "qsr_pos" / folder / f"{store}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
        return path

    def ads_export(self, export: dt.date, first_date: dt.date, rows: list[str] | None = None) -> Path:
        path = self.raw / "ads" / export.isoformat() / "ads.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        header = "date,campaign_id,channel,impressions,clicks,spend,conversions,conversion_value"
        path.write_text("\n".join([header, *(rows if rows is not None else ads_rows(export, first_date))]) + "\n")
        return path

    def hotel_extract(self, day: dt.date, hotel: str, rows: list[str]) -> Path:
        path = self.raw / "hotel_bookings" / day.isoformat() / f"{hotel}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join([HOTEL_HEADER, *rows]) + "\n")
        return path

    def hotel_days(self, first: dt.date, days: int) -> None:
        """Extracts first .. first+days-1: one H1 booking a day (1 room, 100.00), one H2 (2 rooms, 50.00)."""
        for k in range(days):
            day = first + dt.timedelta(days=k)
            toronto = f"T{k},H1,{day}T12:00:00-04:00,CREATED,2026-10-01,2026-10-03,1,100.00,direct"
            vancouver = f"V{k},H2,{day}T23:30:00-07:00,CREATED,2026-10-02,2026-10-03,2,50.00,ota"
            self.hotel_extract(day, "H1", [toronto])
            self.hotel_extract(day, "H2", [vancouver])

    def qsr_days(self, start: dt.date, days: int, stores: tuple[str, ...] = ("S001", "S002")) -> None:
        """Folders start .. start+days, each store with a few valid lines around the clock."""
        for i in range(days + 1):
            d = start + dt.timedelta(days=i)
            for s in stores:
                self.qsr_file(d.isoformat(), s, qsr_rows(s, d))

    def wait_past_last_raw_change(self) -> None:
        """Wait (a second at most) until the clock is past every raw file's last change by the local raw
        zone's mtime resolution, as it is for a run that starts after its files landed: within it, a run
        cannot tell a file it listed from one changed since, so it trusts nothing and remembers nothing."""
        from tasks.storage.rawlocal import LocalRaw

        newest = max((p.stat().st_mtime_ns for p in self.raw.rglob("*") if p.is_file()), default=0)
        deadline = time.monotonic() + 1
        while time.time_ns() <= newest + LocalRaw.mtime_resolution_ns:
            assert time.monotonic() < deadline, f"a raw file of {self.raw} is stamped in the future"
            time.sleep(0.001)

    # -- partitions ---------------------------------------------------------------------------------
    def partition(self, date: dt.date, dataset: str = "staging/qsr_pos") -> Path:
        return self.data / dataset / f"business_date={date.isoformat()}"

    def built_at(self, dataset: str = "staging/qsr_pos") -> dict[dt.date, str]:
        """finished_at of every partition's manifest, by date: what changed between two snapshots was rebuilt."""
        import json

        out = {}
        root = self.data / dataset
        for p in sorted(root.glob("business_date=*/_manifest.json")) if root.exists() else []:
            out[dt.date.fromisoformat(p.parent.name.split("=")[1])] = json.loads(p.read_text())["finished_at"]
        return out

    def files(self) -> dict[str, tuple[int, int]]:
        """(size, mtime_ns) of every file under the lab: raw zone and data root."""
        return {
            str(p.relative_to(self.root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in self.root.rglob("*")
            if p.is_file()
        }

    # -- running Luigi ------------------------------------------------------------------------------
    def luigi(self, *args: str) -> int:
        """Run ``luigi --module tasks <args> --local-scheduler`` in this process; return its exit code.
        The engine keeps what it learned as the ``luigi`` command does when it exits (its summaries). Each run
        makes its tasks anew, as a new ``luigi`` command does: a RangeDaily made by an earlier run of the same
        range would keep the requirements that run computed (``_cached_requires``), so that a range found
        complete once would be complete for good."""
        from luigi.task_register import Register

        Register.clear_instance_cache()
        try:
            luigi.retcodes.run_with_retcodes(["--module", "tasks", *args, "--local-scheduler", "--no-lock"])
        except SystemExit as exc:
            return int(exc.code or 0)
        finally:
            freshness.process_engine().flush()
        return 0

    @contextlib.contextmanager
    def host(self, cfg: Path, cwd: Path):
        """A block in which this process is a host of its own (:meth:`luigi`, ``tasks.cli.main``): one started
        in ``cwd`` with ``LUIGI_CONFIG_PATH=cfg``, so its settings, and their age (settings_changed_at), are
        the files Luigi reads there, and its own state (``XDG_CACHE_HOME``: ``cwd/<cfg's stem>.cache``).
        Afterwards the test's settings are back."""
        from luigi.task_register import Register

        from tasks.configfiles import LUIGI_FILES

        cfg_parser = luigi.configuration.get_config()
        kind, kept = type(cfg_parser), {s: dict(cfg_parser.items(s, raw=True)) for s in cfg_parser.sections()}
        paths, named = kind._config_paths, os.environ.get("LUIGI_CONFIG_PATH")
        cache_home = os.environ.get("XDG_CACHE_HOME")  # the lab's

        def load(sections: dict | None) -> None:
            for section in cfg_parser.sections():
                cfg_parser.remove_section(section)
            if sections is None:
                cfg_parser.reload()
            else:
                cfg_parser.read_dict(sections)
            apply_luigi_defaults()
            Register.clear_instance_cache()

        try:
            with contextlib.chdir(cwd):
                kind._config_paths, os.environ["LUIGI_CONFIG_PATH"] = [*LUIGI_FILES, str(cfg)], str(cfg)
                os.environ["XDG_CACHE_HOME"] = str(cwd / f"{cfg.stem}.cache")
                load(None)
                yield self
        finally:
            kind._config_paths = paths
            if cache_home is None:
                os.environ.pop("XDG_CACHE_HOME", None)
            else:
                os.environ["XDG_CACHE_HOME"] = cache_home
            if named is None:
                os.environ.pop("LUIGI_CONFIG_PATH", None)
            else:
                os.environ["LUIGI_CONFIG_PATH"] = named
            load(kept)

    def range(self, start: dt.date, stop: dt.date, *extra: str, of: str = "StgQsrPos") -> int:
        return self.luigi("RangeDaily", "--of", of, "--start", str(start), "--stop", str(stop), *extra)

    def rebuilt_by(self, action, dataset: str = "staging/qsr_pos") -> set[dt.date]:
        before = self.built_at(dataset)
        action()
        after = self.built_at(dataset)
        return {d for d, t in after.items() if before.get(d) != t}

    def cli(self, *args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
        """The real ``luigi`` command in a subprocess, with a luigi.cfg in ``cwd`` pointing at this lab."""
        cwd = cwd or self.root
        full_env = {**os.environ, **(env or {})}
        cmd = [sys.executable, "-m", "luigi", "--module", "tasks", *args]
        return subprocess.run(cmd, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=300)

    def write_cfg(self, path: Path, **qsr) -> Path:
        """The project's luigi.cfg with this lab's roots (and any [qsr] overrides), written to ``path``."""
        roots = {"raw_root": self.raw, "data_root": self.data}
        return write_config(path, {"daybreak": roots, "qsr": qsr})


def qsr_rows(store: str, folder: dt.date) -> list[str]:
    """Four valid lines in folder ``folder``: two before 05:00 (previous business date), two after."""
    d = folder.isoformat()
    return [
        f"{store}-{d}-A,1,{store},{d}T01:15:00-04:00,BURGER,1,6.50,,COMPLETED",
        f"{store}-{d}-A,2,{store},{d}T01:15:00-04:00,FRIES,2,2.25,0.50,COMPLETED",
        f"{store}-{d}-B,1,{store},{d}T12:30:00-04:00,COLA,3,1.99,,COMPLETED",
        f"{store}-{d}-C,1,{store},{d}T19:05:00-04:00,BURGER,1,6.50,,REFUNDED",
    ]


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A fresh lab with the project's luigi.cfg loaded and its roots pointed at tmp_path.

    Each test stands for a new process: Luigi's task instances are forgotten, since an instance
    outlives a run in one process (a RangeDaily keeps the requirements it computed, ``_cached_requires``,
    so a later test's range with the same parameters would reuse an earlier test's missing dates)."""
    from luigi.task_register import Register

    Register.clear_instance_cache()  # Daybreak's shortcut to the instances follows Luigi's cache
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-home"))  # this host's own state: the test's
    lab = Lab(tmp_path)
    cfg = luigi.configuration.get_config()
    if str(REPO / "luigi.cfg") in type(cfg)._config_paths:
        cfg.reload()  # added by an earlier test: once more in Luigi's list, every later read would read it again
    else:
        cfg.add_config_path(str(REPO / "luigi.cfg"))
    cfg.set("daybreak", "raw_root", str(lab.raw))
    cfg.set("daybreak", "data_root", str(lab.data))
    yield lab
    reload_config()
    shutil.rmtree(tmp_path / "data", ignore_errors=True)


@pytest.fixture(scope="module")
def built_once(tmp_path_factory):
    """``built_once(lab, name, build)``: ``lab`` with the raw zone and data root that ``build(lab)`` leaves, for
    tests that start from the same build: the module's first test that asks for ``name`` builds it in a lab of its
    own, and every test gets a copy (copy2: sizes and mtimes kept, so the partitions match their manifests), as
    a run of an earlier process left it. Copying is cheaper than building. ``build`` writes its raw files and runs
    on the settings the test set before; it must depend on nothing else the test did."""
    from luigi.task_register import Register

    kept: dict[str, Path] = {}

    def use(lab: Lab, name: str, build) -> Lab:
        if name not in kept:
            root = tmp_path_factory.mktemp(f"built-{name}")
            cfg = luigi.configuration.get_config()
            cfg.set("daybreak", "raw_root", str(root / "raw"))
            cfg.set("daybreak", "data_root", str(root / "data"))
            try:
                build(Lab(root))
            finally:
                cfg.set("daybreak", "raw_root", str(lab.raw))
                cfg.set("daybreak", "data_root", str(lab.data))
                Register.clear_instance_cache()  # the build's tasks (a RangeDaily's requirements) are not the test's
            kept[name] = root  # built: a build that failed fails each test that asks for it
        shutil.rmtree(lab.raw)
        shutil.copytree(kept[name] / "raw", lab.raw, symlinks=True)
        if (kept[name] / "data").exists():
            shutil.copytree(kept[name] / "data", lab.data, symlinks=True)
        return lab

    return use


@pytest.fixture
def setting():
    """Change a luigi.cfg setting for one test: ``setting("qsr", "suspicious_qty_threshold", 5)``."""
    cfg = luigi.configuration.get_config()

    def set_(section: str, key: str, value) -> None:
        cfg.set(section, key, str(value))

    yield set_
    reload_config()


@pytest.fixture
def sshd(tmp_path):
    """A real OpenSSH server on 127.0.0.1, on a port of its own (tests/sshd.py)."""
    from tests.sshd import Sshd

    server = Sshd(tmp_path / "sshd").start()
    yield server
    server.stop()  # continues a frozen server's processes first


@pytest.fixture
def qsr_setting(setting):
    """Change a [qsr] setting for one test."""
    return lambda key, value: setting("qsr", key, value)


def ads_rows(export: dt.date, first_date: dt.date, campaigns: tuple[str, ...] = ("C1", "C2")) -> list[str]:
    """Export ``export`` restating dates export-7 .. export-1 (not before ``first_date``).

    C1 spends 10.00 a day, C2 nothing; conversions of date d as export E reports them: (E - d) days,
    so a newer export reports more; conversion_value = 5.00 per conversion.
    """
    rows = []
    for k in range(7, 0, -1):
        d = export - dt.timedelta(days=k)
        if d < first_date:
            continue
        for c in campaigns:
            spend = "10.00" if c == "C1" else "0.00"
            conversions = (export - d).days
            rows.append(f"{d},{c},google,1000,50,{spend},{conversions},{conversions * 5}.00")
    return rows


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB tmpfs, unmounted afterwards; the test is skipped where mounting is not permitted."""
    mnt = tmp_path / "small_disk"
    mnt.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if mount.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here (needs root or CAP_SYS_ADMIN): {mount.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "--lazy", str(mnt)], check=True)


@pytest.fixture(scope="session", autouse=True)
def _own_temporary_folder_for_commands(tmp_path_factory):
    """The commands tests start get a temporary folder of this pytest process's (``TMPDIR``): Luigi's
    lock (one identical command at a time on a machine) lives in ``$TMPDIR/luigi``, and the same
    command run at the same moment by a test in the other pytest process is not "already running"."""
    tempfile.gettempdir()  # this process keeps its own
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TMPDIR", str(tmp_path_factory.mktemp("commands-tmp")))
        yield


@pytest.fixture(scope="session", autouse=True)
def _own_cache_folder(tmp_path_factory):
    """This host's own state (``[daybreak] cache_dir``'s default: when it first saw each setting, a bucket's
    probes) in a folder of this pytest process's, not in the user's ``~/.cache``; a lab has its own."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache-home")))
        yield


@pytest.fixture(autouse=True)
def _servers_taken_for_alive():
    """A server or a store given up on by one test's run (tasks/storage/sftp.py, known_dead; s3gone.py) is
    not by the next's: each test stands for a new command."""
    yield
    sftp = sys.modules.get("tasks.storage.sftp")
    if sftp is not None:
        sftp.forget_dead()
    s3gone = sys.modules.get("tasks.storage.s3gone")
    if s3gone is not None:
        s3gone.forget()


@pytest.fixture(scope="module")
def rgw(tmp_path_factory):
    """A real radosgw (tests/radosgw.py) on free ports of 127.0.0.1, one per test module that asks for it."""
    from tests import radosgw

    with radosgw.running(tmp_path_factory.mktemp("radosgw")) as server:
        yield server


@pytest.fixture
def behind_proxy(rgw, setting, monkeypatch, tmp_path):
    """``with behind_proxy(delay_s) as proxy``: the module's radosgw reached through the latency proxy
    (tests/latency_proxy.py, ``delay_s`` each way; 0: a proxy that only sees every request), with its
    credentials, and ``[s3]`` and a cache folder of the test's own set for it."""
    import contextlib

    from tests import latency_proxy

    @contextlib.contextmanager
    def running(delay_s: float):
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", rgw.access_key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", rgw.secret_key)
        with latency_proxy.running("127.0.0.1", rgw.port, delay_s) as proxy:
            setting("s3", "endpoint_url", f"http://127.0.0.1:{proxy.port}")
            setting("s3", "region", rgw.region)
            setting("daybreak", "cache_dir", tmp_path / "cache")
            yield proxy

    return running


@pytest.fixture
def in_buckets(rgw, lab, setting, behind_proxy):
    """``with in_buckets(name, delay_s, files, start) as lab``: ``files`` of the lab's raw zone put in a new bucket of
    the module's radosgw under ``landing/``, raw_root and data_root in that bucket, reached through the latency
    proxy (``behind_proxy(delay_s)``), start_date ``start``; ``lab.bucket``, ``lab.s3`` (a client of the server's
    own, not through the proxy) and ``lab.proxy`` set."""
    import contextlib
    import uuid

    @contextlib.contextmanager
    def running(name: str, delay_s: float, files, start: dt.date):
        bucket = rgw.make_bucket(f"{name}-{uuid.uuid4().hex[:10]}")
        client = rgw.client()
        for path in sorted(files):
            client.put_object(Bucket=bucket, Key=f"landing/{path.relative_to(lab.raw)}", Body=path.read_bytes())
        lab.bucket, lab.s3 = bucket, client
        with behind_proxy(delay_s) as proxy:
            setting("daybreak", "raw_root", f"s3://{bucket}/landing")
            setting("daybreak", "data_root", f"s3://{bucket}/daybreak")
            setting("daybreak", "start_date", start)
            lab.proxy = proxy
            yield lab

    return running
