"""Every setting Daybreak reads, with its default: each ``luigi.Config`` class is the ``luigi.cfg``
section of the same name. Relative paths are taken from the working directory, as Luigi does."""

from __future__ import annotations

import configparser
import datetime as dt
import os
import warnings
from pathlib import Path

import luigi

from tasks.luigi_shortcuts import SnapshotSections, snapshot  # noqa: F401 - settings.snapshot() is the public name

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = PROJECT_ROOT / "config"


class daybreak(luigi.Config, metaclass=SnapshotSections):  # noqa: N801 - the class name is the luigi.cfg section name
    raw_root = luigi.Parameter(
        default="data/raw",
        description="The raw zone Daybreak reads and never changes (docs/raw-zone.md): a local folder, "
        "sftp://user@host:port/path or s3://BUCKET/PREFIX",
    )
    data_root = luigi.Parameter(
        default="data",
        description="Where the outputs go: staging/, marts/, exports/, quarantine/ and _state/; a local folder "
        "(created when missing) or s3://BUCKET/PREFIX",
    )
    start_date = luigi.DateParameter(
        default=dt.date(2026, 9, 1),
        description="The first business date: ranges leave out earlier dates, and partitions built before it "
        "are kept as they are",
    )
    lock_wait_s = luigi.FloatParameter(
        default=900.0,
        description="Seconds a run waits for another run that is writing the same partition, then fails it",
    )
    preview_keep_days = luigi.FloatParameter(
        default=7.0,
        description="Days after which a preview (daybreak preview) is deleted, or the record a published one keeps",
    )
    cache_dir = luigi.Parameter(
        default="",
        description="This host's own state: when it first saw each setting's value (settings_seen.json), "
        "and for a data_root in an object store luigid's state and this host's caches; empty: "
        "$XDG_CACHE_HOME/daybreak or ~/.cache/daybreak",
    )
    host_name = luigi.Parameter(
        default="",
        description="This host's name in every manifest it commits (built_by), its leases and temporary files, "
        "and luigid's task history; empty: the machine's host name",
    )


class qsr(luigi.Config, metaclass=SnapshotSections):  # noqa: N801
    suspicious_qty_threshold = luigi.IntParameter(
        default=20, description="A POS line with a qty above this is flagged is_suspicious"
    )
    max_reject_share = luigi.FloatParameter(
        default=0.05,
        description="A partition fails when rejected rows exceed this share of the rows attributed to it (or half "
        "of one store's file's rows of the date, or this share of them where it is higher)",
    )
    timezone = luigi.Parameter(default="America/Toronto", description="Timezone of the QSR business day")
    day_start_hour = luigi.IntParameter(default=5, description="Local hour at which a QSR business day starts")


class ads(luigi.Config, metaclass=SnapshotSections):  # noqa: N801
    restatement_days = luigi.IntParameter(
        default=7,
        description="An ad export of day E restates the N dates E-N .. E-1; date d is final once export d+N "
        "has arrived",
    )
    rolling_window_days = luigi.IntParameter(
        default=7, description="Days in the ads look-back: ads_rolling_7d of date d covers d-N+1 .. d"
    )
    max_reject_share = luigi.FloatParameter(
        default=0.05,
        description="An ads_daily partition fails when rejected rows exceed this share of the rows its "
        "newest export holds for the date",
    )


class hotels(luigi.Config, metaclass=SnapshotSections):  # noqa: N801
    max_reject_share = luigi.FloatParameter(
        default=0.05,
        description="A hotel staging partition fails when rejected rows exceed this share of its rows (or half "
        "of one hotel's extract's rows, or this share of them where it is higher)",
    )
    max_stay_nights = luigi.IntParameter(
        default=365, description="A booking event whose stay (departure - arrival) has more nights is rejected"
    )
    max_rooms = luigi.IntParameter(default=1000, description="A booking event of more rooms is rejected")
    reference_file = luigi.Parameter(
        default="",
        description="The hotels list (hotel_id,name,timezone,rooms); empty: config/hotels.csv beside the "
        "config file read last, else the package's config/hotels.csv",
    )
    max_rate = luigi.FloatParameter(
        default=100000.0,
        description="A booking event whose nightly rate per room is higher is rejected; "
        "max_rooms x max_rate must be at most 10^10 (else the hotel staging partitions fail, naming them), so that "
        "no revenue sum overflows decimal(18,2)",
    )


class sftp(luigi.Config, metaclass=SnapshotSections):  # noqa: N801
    key_filename = luigi.Parameter(default="", description="Private key for SFTP; keep it out of the repository")
    known_hosts = luigi.Parameter(
        default="~/.ssh/known_hosts", description="Host keys to trust; an unknown, changed or revoked key is refused"
    )
    timeout = luigi.FloatParameter(
        default=15.0,
        description="Seconds allowed to connect, to authenticate, to open the sftp session and for each operation",
    )
    retries = luigi.IntParameter(
        default=3,
        description="Retries of a transient failure (reset, timeout), with backoff; then the server "
        "is given up for the rest of the command",
    )


class s3(luigi.Config, metaclass=SnapshotSections):  # noqa: N801
    endpoint_url = luigi.Parameter(
        default="", description="S3-compatible endpoint, e.g. http://rgw.internal:7480; empty: AWS"
    )
    region = luigi.Parameter(default="us-east-1", description="Region the requests are signed for")
    lease_seconds = luigi.FloatParameter(
        default=60.0,
        description="A partition being built is leased for this long, renewed while its build runs; a "
        "host that stops renewing (dead, frozen) is taken over once it expires",
    )
    timeout = luigi.FloatParameter(
        default=20.0,
        description="Seconds the store may take to send each part of an answer (a read, not a whole object); a "
        "request it does not answer is tried up to 3 times, then the store is given up for the rest of the command",
    )


# Luigi settings Daybreak needs (non-zero exit codes, no silently cut range), where no config file sets them
LUIGI_DEFAULTS: dict[str, dict[str, str]] = {
    "retcode": {
        "already_running": "10",
        "missing_data": "20",
        "not_run": "25",
        "task_failed": "30",
        "scheduling_error": "35",
        "unhandled_exception": "40",
    },
    "RangeDaily": {"task_limit": "100000", "days_back": "36500"},
    "RangeDailyBase": {"task_limit": "100000", "days_back": "36500"},
    "resources": {"sftp": "4"},  # SFTP sessions of all workers sharing a scheduler (else 1)
    # NOTSET: progress lines and a summary; a luigid that does not answer is given up on after 10 s
    "core": {"log_level": "NOTSET", "rpc_retry_attempts": "3", "rpc_retry_wait": "5"},
    # a host waiting for another host's task asks luigid again soon (docs/scale-out.md)
    "worker": {"wait_interval": "0.2", "wait_jitter": "0.2"},
}


def apply_luigi_defaults() -> None:
    import luigi.configuration

    config = luigi.configuration.get_config()
    for section, values in LUIGI_DEFAULTS.items():
        for key, value in values.items():
            if not config.has_option(section, key):
                if not config.has_section(section):
                    config.add_section(section)
                config.set(section, key, value)


def data_root() -> Path:
    """The local data root (a folder); :func:`data_uri` for one that may be an object store."""
    uri = data_uri()
    if "://" in uri:
        raise ValueError(f"data_root {uri} is not a local folder")
    return Path(uri)


def data_uri() -> str:
    """``[daybreak] data_root`` as written: a local folder or ``s3://BUCKET/PREFIX``."""
    return str(daybreak().data_root)


def lock_folder() -> tuple[str, str]:
    """(the folder of Luigi's lock of a command, the data root it is for): ``$TMPDIR/daybreak-lock-<hash>``,
    not in the data root, where a run refused by a check writes nothing."""
    import hashlib
    import tempfile

    root = data_uri()
    if "://" not in root:
        root = os.path.realpath(root)
    digest = hashlib.sha256(root.encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"daybreak-lock-{digest}"), root


def cache_dir() -> Path:
    """This host's own state for a remote data root (``[daybreak] cache_dir``)."""
    if daybreak().cache_dir:
        return Path(daybreak().cache_dir).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "daybreak"


def business_today() -> dt.date:
    """Today's date in the business timezone ([qsr] timezone), not UTC."""
    from zoneinfo import ZoneInfo

    return dt.datetime.now(ZoneInfo(qsr().timezone)).date()


NOT_OVER = "a business day is built once it is over"


def day_in_progress(now: dt.datetime | None = None) -> dt.date:
    """The business date in progress at ``now`` (default: the clock): the local date in ``[qsr] timezone``
    less ``[qsr] day_start_hour``."""
    from zoneinfo import ZoneInfo

    cfg = qsr()
    local = (now or dt.datetime.now(dt.UTC)).astimezone(ZoneInfo(cfg.timezone))
    return (local.replace(tzinfo=None) - dt.timedelta(hours=cfg.day_start_hour)).date()


def not_over(day: dt.date) -> str:
    """Why every range and plan leaves business date ``day`` out ('' when not): it is not over yet."""
    today, cfg = day_in_progress(), qsr()
    if day < today:
        return ""
    return f"{NOT_OVER}: today is {today} ({cfg.timezone}, where a business day starts at {cfg.day_start_hour:02d}:00)"


def host_name() -> str:
    import socket

    return daybreak().host_name or socket.gethostname()


def raw_root() -> str:
    return str(daybreak().raw_root)


def settings_changed_at(extra: tuple = ()) -> float:
    """When the settings this process runs on last changed: the newest modification time of the config
    files Luigi reads and of ``extra`` (docs/scale-out.md)."""
    import os

    from tasks import configfiles

    times = []
    for path in [*configfiles.luigi_files(), *extra]:
        try:
            times.append(os.stat(path).st_mtime)
        except OSError:
            continue
    return max(times, default=0.0)


# -- the sections, and the valid values (tasks/settings_check.py checks them) ---------------------------

SECTIONS: dict[str, type[luigi.Config]] = {
    "daybreak": daybreak, "qsr": qsr, "ads": ads, "hotels": hotels, "sftp": sftp, "s3": s3,
}  # fmt: skip
# an unknown key is named by tasks/settings_check.py, not first by Luigi's "not consumed" warning
warnings.filterwarnings(
    "ignore", message=rf"The configuration contains .* not consumed by the task '({'|'.join(SECTIONS)})'\.$"
)

# Valid values, (lowest, highest) inclusive; None: no bound. docs/operations.md lists them.
RANGES: dict[tuple[str, str], tuple[float | None, float | None]] = {
    ("daybreak", "lock_wait_s"): (0, None),
    ("daybreak", "preview_keep_days"): (0, None),
    ("qsr", "suspicious_qty_threshold"): (0, None),
    ("qsr", "max_reject_share"): (0, 1),
    ("qsr", "day_start_hour"): (0, 23),
    ("ads", "restatement_days"): (1, 366),
    ("ads", "rolling_window_days"): (1, 366),
    ("ads", "max_reject_share"): (0, 1),
    ("hotels", "max_reject_share"): (0, 1),
    ("hotels", "max_stay_nights"): (1, None),
    ("hotels", "max_rooms"): (1, None),
    ("hotels", "max_rate"): (0.01, None),
    ("sftp", "timeout"): (0.001, None),
    ("sftp", "retries"): (0, 100),
    ("s3", "lease_seconds"): (1, 3600),  # tasks/storage/s3lease.py MAX_SECONDS
    ("s3", "timeout"): (0.1, 3600),
}
# What a text setting holds (docs/operations.md's table); the checks are in _value_error.
FORMS: dict[tuple[str, str], str] = {
    ("daybreak", "raw_root"): "an existing folder, or a URL",
    ("daybreak", "data_root"): "a folder, or a URL",
    ("daybreak", "cache_dir"): "a folder",
    ("daybreak", "host_name"): "a host name",
    ("qsr", "timezone"): "an IANA timezone",
    ("hotels", "reference_file"): "an existing file",
    ("sftp", "key_filename"): "a file",
    ("sftp", "known_hosts"): "a file",
    ("s3", "endpoint_url"): "a URL",
    ("s3", "region"): "a region name",
}
INT_MAX = 2**31 - 1  # the largest whole-number setting: the columns it is compared with are int32


def write_config(path: Path, overrides: dict[str, dict[str, object]]) -> Path:
    """Write the project's luigi.cfg with ``{section: {key: value}}`` overrides to ``path``; return it."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(PROJECT_ROOT / "luigi.cfg")
    for section, values in overrides.items():
        parser.setdefault(section, {})
        parser[section].update({key: str(value) for key, value in values.items()})
    with open(path, "w") as fh:
        parser.write(fh)
    return path


apply_luigi_defaults()  # whoever loads a task first (``import tasks`` with Luigi loaded does it too)
