"""Every setting Daybreak reads, with its default.

Luigi maps each ``luigi.Config`` class to the ``luigi.cfg`` section of the same name, so
``[qsr] suspicious_qty_threshold = 30`` sets :attr:`qsr.suspicious_qty_threshold`.
A luigi.cfg that sets nothing works: every value here has a default. Relative paths are taken
from the working directory, as Luigi itself does.
"""

from __future__ import annotations

import configparser
import datetime as dt
import math
import os
from pathlib import Path
from typing import NoReturn

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
        description="Days after which a preview (daybreak preview) is deleted, never published",
    )
    cache_dir = luigi.Parameter(
        default="",
        description="This host's own state when data_root is in an object store (folder cache, summaries, "
        "luigid's state); empty: $XDG_CACHE_HOME/daybreak or ~/.cache/daybreak",
    )


class qsr(luigi.Config, metaclass=SnapshotSections):  # noqa: N801
    suspicious_qty_threshold = luigi.IntParameter(
        default=20, description="A POS line with a qty above this is flagged is_suspicious"
    )
    max_reject_share = luigi.FloatParameter(
        default=0.05,
        description="A partition fails when rejected rows exceed this share of the rows attributed to it",
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


class hotels(luigi.Config, metaclass=SnapshotSections):  # noqa: N801
    max_reject_share = luigi.FloatParameter(
        default=0.05,
        description="A hotel staging partition fails when rejected rows exceed this share of its rows",
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
        default="~/.ssh/known_hosts", description="Host keys to trust; an unknown or changed key is refused"
    )
    timeout = luigi.FloatParameter(
        default=15.0, description="Seconds allowed to connect, to authenticate and for each operation"
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


# Luigi settings Daybreak cannot run safely without, whatever config files exist and whatever the
# working directory: a blocked or failed run must exit non-zero (Luigi's own retcodes are all 0),
# and a range must never be cut short in silence (Luigi's RangeDaily keeps 50 tasks and looks back
# 100 days). Applied when ``tasks`` is imported, to every option no config file sets; a value in
# a luigi.cfg (the repository's, /etc/luigi/luigi.cfg, $LUIGI_CONFIG_PATH) still wins.
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
    # concurrent SFTP sessions of all workers sharing a scheduler; a scheduler without it gives 1 slot
    "resources": {"sftp": "4"},
    # NOTSET: Daybreak's default output, progress lines and a summary (tasks/reporting/runlog.py); --log-level
    # DEBUG or INFO, or a [core] log_level in a config file, is Luigi's own logging at that level
    "core": {"log_level": "NOTSET"},
    # a host with nothing to do while another host runs a task it needs asks luigid again after this
    # (Luigi's own 1 s plus up to 5 s of jitter left a host of two idle for seconds; docs/scale-out.md)
    "worker": {"wait_interval": "0.2", "wait_jitter": "0.2"},
}


def apply_luigi_defaults(config=None) -> dict[str, dict[str, str]]:
    """Set each of :data:`LUIGI_DEFAULTS` that no config file sets; return what was set."""
    import luigi.configuration

    config = config if config is not None else luigi.configuration.get_config()
    applied: dict[str, dict[str, str]] = {}
    for section, values in LUIGI_DEFAULTS.items():
        for key, value in values.items():
            if not config.has_option(section, key):
                if not config.has_section(section):
                    config.add_section(section)
                config.set(section, key, value)
                applied.setdefault(section, {})[key] = value
    return applied


def data_root() -> Path:
    """The local data root (a folder). For a data_root that may be an object store, :func:`data_uri`."""
    uri = data_uri()
    if "://" in uri:
        raise ValueError(f"data_root {uri} is not a local folder")
    return Path(uri)


def data_uri() -> str:
    """``[daybreak] data_root`` as written: a local folder or ``s3://BUCKET/PREFIX``."""
    return str(daybreak().data_root)


def cache_dir() -> Path:
    """This host's own state for a remote data root (``[daybreak] cache_dir``)."""
    if daybreak().cache_dir:
        return Path(daybreak().cache_dir).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "daybreak"


def business_today() -> dt.date:
    """Today's date in the business timezone ([qsr] timezone), not UTC: a cron at 06:00 Toronto is
    already tomorrow in UTC from 19:00 the evening before."""
    from zoneinfo import ZoneInfo

    return dt.datetime.now(ZoneInfo(qsr().timezone)).date()


def raw_root() -> str:
    return str(daybreak().raw_root)


# -- where a setting comes from, and validation of every value ----------------------------------------

SECTIONS: dict[str, type[luigi.Config]] = {
    "daybreak": daybreak, "qsr": qsr, "ads": ads, "hotels": hotels, "sftp": sftp, "s3": s3,
}  # fmt: skip

# Valid values, (lowest, highest) inclusive; None: no bound. docs/operations.md lists them.
RANGES: dict[tuple[str, str], tuple[float | None, float | None]] = {
    ("daybreak", "lock_wait_s"): (0, None),
    ("daybreak", "preview_keep_days"): (0, None),
    ("qsr", "suspicious_qty_threshold"): (0, None),
    ("qsr", "max_reject_share"): (0, 1),
    ("qsr", "day_start_hour"): (0, 23),
    ("ads", "restatement_days"): (0, 366),
    ("ads", "rolling_window_days"): (1, 366),
    ("hotels", "max_reject_share"): (0, 1),
    ("hotels", "max_stay_nights"): (1, None),
    ("hotels", "max_rooms"): (1, None),
    ("hotels", "max_rate"): (0.01, None),
    ("sftp", "timeout"): (0.001, None),
    ("sftp", "retries"): (0, 100),
    ("s3", "lease_seconds"): (1, None),
}
# What a text setting holds (docs/operations.md's table); the checks are in _value_error.
FORMS: dict[tuple[str, str], str] = {
    ("daybreak", "raw_root"): "an existing folder, or a URL",
    ("daybreak", "data_root"): "a folder, or a URL",
    ("daybreak", "cache_dir"): "a folder",
    ("qsr", "timezone"): "an IANA timezone",
    ("hotels", "reference_file"): "an existing file",
    ("sftp", "key_filename"): "a file",
    ("sftp", "known_hosts"): "a file",
    ("s3", "endpoint_url"): "a URL",
    ("s3", "region"): "a region name",
}
INT_MAX = 2**31 - 1  # the largest whole-number setting: the columns it is compared with are int32
_KINDS = {
    luigi.IntParameter: "a whole number",
    luigi.FloatParameter: "a number",
    luigi.DateParameter: "a date (YYYY-MM-DD)",
}


def source_of(section: str, key: str) -> str:
    """Where the value of ``[section] key`` comes from: the command line, the config file that sets it
    (the last one read wins, as in Luigi), a value set at run time, or the built-in default."""
    import luigi.configuration
    from luigi.cmdline_parser import CmdlineParser

    cmdline = CmdlineParser.get_instance()
    if cmdline is not None and getattr(cmdline.known_args, f"{section}_{key}", None) is not None:
        return f"the command line (--{section}-{key.replace('_', '-')})"
    config = luigi.configuration.get_config()
    if not config.has_option(section, key):
        return f"the built-in default (no config file sets [{section}] {key}; tasks/settings.py)"
    found = _last_file_with(lambda parser: parser.has_option(section, key))
    if found is not None and found[1].get(section, key) == config.get(section, key):
        return str(Path(found[0]).resolve())
    return "a value set at run time"


def _last_file_with(has) -> tuple[str, configparser.ConfigParser] | None:
    """(path, its parsed text) of the last config file read (the one that wins, as in Luigi) for
    which ``has(parser)`` holds; None when none does."""
    import luigi.configuration

    for path in reversed(list(type(luigi.configuration.get_config())._config_paths)):
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(path)
        except configparser.Error:
            continue
        if has(parser):
            return path, parser
    return None


def config_errors(config=None) -> list[str]:
    """Every unknown key of a Daybreak section, and every value that does not parse or is out of
    range (:data:`RANGES`), one message each naming the file, the section and the key."""
    import luigi.configuration

    from tasks import configfiles

    errors = configfiles.errors()  # a file Luigi cannot read, a % it cannot interpolate: nothing else can be read
    if errors:
        return errors
    config = config if config is not None else luigi.configuration.get_config()
    defaults = set(config.defaults())
    for name, section in SECTIONS.items():
        if not config.has_section(name):
            continue
        params = dict(section.get_params())
        for key in config.options(name):
            if key in defaults:
                continue
            where = source_of(name, key)
            if key not in params:
                from tasks.guard import nearest

                errors.append(
                    f"unknown setting [{name}] {key} in {where}{nearest(key, params)} (known: {', '.join(params)})"
                )
                continue
            text = config.get(name, key)
            error = _value_error(name, key, params[key], text)
            if error:
                errors.append(f"[{name}] {key} = {text!r} in {where}: {error}")
    errors += section_errors(config)
    named = os.environ.get("LUIGI_CONFIG_PATH")
    if named and not os.path.isfile(named):  # Luigi only warns, then runs on the defaults
        errors.append(f"LUIGI_CONFIG_PATH={named}: no such file (Luigi would go on without it)")
    return errors


# Sections Luigi reads that are no registered class (the classes: core, worker, scheduler, email, ...)
LUIGI_SECTIONS = frozenset({"retcode", "resources", "task_history", "hdfs", "hadoop", "spark", "webhdfs"})


def section_errors(config) -> list[str]:
    """A section one edit away from a Daybreak section (``[qrs]``, ``[hotel]``, ``[QSR]``) that neither
    Daybreak nor Luigi reads: a typo, whose settings would be ignored without a word."""
    import luigi.task_register

    known = {c.get_task_family() for c in luigi.task_register.Register._reg} | LUIGI_SECTIONS | set(SECTIONS)
    errors = []
    for name in config.sections():
        if name in known:
            continue
        meant = next((s for s in SECTIONS if _one_edit(name.lower(), s)), None)
        if meant is not None:
            where = _section_file(name)
            errors.append(f"unknown section [{name}] in {where}; did you mean [{meant}]? (its settings are not read)")
    return errors


def _one_edit(a: str, b: str) -> bool:
    """Equal, or one character inserted, deleted, replaced, or two neighbours swapped."""
    if a == b:
        return True
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (
            len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
        )
    short, long_ = sorted((a, b), key=len)
    return len(long_) - len(short) == 1 and any(long_[:i] + long_[i + 1 :] == short for i in range(len(long_)))


def _section_file(section: str) -> str:
    """The last config file read that has ``[section]``."""
    found = _last_file_with(lambda parser: parser.has_section(section))
    return str(Path(found[0]).resolve()) if found is not None else "the configuration"


def _value_error(section: str, key: str, param: luigi.Parameter, text: str) -> str | None:
    kind = next((label for cls, label in _KINDS.items() if isinstance(param, cls)), None)
    try:
        value = param.parse(text)
    except (ValueError, TypeError):
        return f"expected {kind or 'another value'}"
    low, high = RANGES.get((section, key), (None, None))
    if isinstance(param, luigi.IntParameter):  # a whole number is compared with int32 columns (qty, rooms)
        high = INT_MAX if high is None else min(high, INT_MAX)
    if isinstance(value, float) and not math.isfinite(value):
        return f"expected {kind}, finite"
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"from {low} to {high}" if high is not None else f"{low} or more"
        return f"out of range: expected {bounds}"
    if isinstance(value, dt.date):
        from tasks.guard import DATES

        if not DATES[0] <= value <= DATES[1]:
            return f"out of range: a date is from {DATES[0]} to {DATES[1]}"
        if (section, key) == ("daybreak", "start_date"):
            try:
                today = business_today()
            except (ValueError, KeyError):  # an invalid [qsr] timezone, reported on its own
                today = dt.datetime.now(dt.UTC).date()
            if value > today:
                return (
                    f"after today ({today}): the first business date must have begun, else no range has a date "
                    "to build (set it to today or earlier)"
                )
    if (section, key) == ("qsr", "timezone"):
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            return "not an IANA timezone (e.g. America/Toronto)"
    if isinstance(value, str) and not value and key in ("raw_root", "data_root"):
        return "empty"
    if (section, key) == ("hotels", "reference_file") and value and not Path(value).is_file():
        return f"no such file ({Path(value).resolve()})"
    return None


def check_config(config=None) -> None:
    """Exit 2 (:func:`tasks.guard.fail`) when :func:`config_errors` finds anything."""
    errors = config_errors(config)
    if errors:
        from tasks.guard import fail

        fail("invalid settings:\n  " + "\n  ".join(errors) if len(errors) > 1 else errors[0])


def output_folders() -> list[str]:
    """The folders of the data root that Daybreak writes: each dataset's top folder (catalogue), the
    quarantine and ``_state``. Anything else under the data root (``raw/`` by default) is left alone."""
    from tasks.catalogue import DATASETS

    return sorted({d.path.split("/")[0] for d in DATASETS} | {"quarantine", "_state"})


def check_raw_root(uri: str) -> None:
    """Exit 2 when a local ``raw_root`` is not a folder, naming the path and where it is set, or when
    it and the folders Daybreak writes overlap: ``data_root`` is the raw zone or inside it, or the raw
    zone is (inside) an output folder of the data root (``<data_root>/staging``). Outputs would be
    written into the raw zone, which Daybreak never changes (and a later listing would take them for
    raw files)."""
    if "://" in uri:
        return
    if not Path(uri).is_dir():
        raw_root_missing(uri if Path(uri).is_absolute() else f"{uri} ({Path(uri).resolve()})")
    if "://" in data_uri():
        return
    raw, data = Path(uri).resolve(), data_root().resolve()
    from tasks.guard import fail

    if data == raw or raw in data.parents:
        fail(
            f"data_root {data} is {'the raw zone' if data == raw else 'inside the raw zone'} (raw_root {raw}; "
            f"[daybreak] data_root from {source_of('daybreak', 'data_root')}): outputs would be written among "
            "the raw files, which Daybreak never changes; put data_root beside raw_root"
        )
    for name in output_folders():
        out = data / name
        if raw == out or out in raw.parents:
            fail(
                f"raw_root {raw} is {'' if raw == out else 'inside '}{out}, where Daybreak writes its outputs "
                f"([daybreak] raw_root from {source_of('daybreak', 'raw_root')}): they would be written among the "
                "raw files, which Daybreak never changes; put raw_root outside "
                f"{', '.join(output_folders())} of the data root"
            )


def raw_root_missing(shown: str, where_else: str = "") -> NoReturn:
    """Exit 2: ``raw_root <shown> does not exist``, with where the setting comes from."""
    from tasks.guard import fail

    source = source_of("daybreak", "raw_root")
    where = f"[daybreak] raw_root in {source}" if source.startswith("/") else source
    fail(f"raw_root {shown} does not exist{where_else} (from {where})")


def write_config(path: Path, overrides: dict[str, dict[str, object]]) -> Path:
    """Write the project's luigi.cfg with ``{section: {key: value}}`` overrides to ``path``.

    For a run against another raw zone or data root (tests, the demo, benchmarks) that keeps every
    other setting of the project's luigi.cfg: point ``LUIGI_CONFIG_PATH`` at the result.
    """
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(PROJECT_ROOT / "luigi.cfg")
    for section, values in overrides.items():
        parser.setdefault(section, {})
        parser[section].update({key: str(value) for key, value in values.items()})
    with open(path, "w") as fh:
        parser.write(fh)
    return path


apply_luigi_defaults()  # whoever loads a task first (``import tasks`` with Luigi loaded does it too)
