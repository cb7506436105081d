"""Every setting Daybreak reads, with its default.

Luigi maps each ``luigi.Config`` class to the ``luigi.cfg`` section of the same name, so
``[qsr] suspicious_qty_threshold = 30`` sets :attr:`qsr.suspicious_qty_threshold`.
A luigi.cfg that sets nothing works: every value here has a default. Relative paths are taken
from the working directory, as Luigi itself does.
"""

from __future__ import annotations

import configparser
import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import luigi
from luigi.task_register import Register

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = PROJECT_ROOT / "config"


_snapshot: dict | None = None


@contextmanager
def snapshot() -> Iterator[None]:
    """Read each section once for the duration of the block (a status view or range check asks for
    ``data_root`` thousands of times; each read resolves every parameter of the section against
    the config). Settings changed inside the block are not seen until it ends. Reentrant."""
    global _snapshot
    if _snapshot is not None:
        yield
        return
    _snapshot = {}
    try:
        yield
    finally:
        _snapshot = None


class _Section(Register):
    """Luigi's metaclass for the sections below; inside :func:`snapshot`, one instance per section."""

    def __call__(cls, *args, **kwargs):
        if _snapshot is None or args or kwargs:
            return super().__call__(*args, **kwargs)
        if cls not in _snapshot:
            _snapshot[cls] = super().__call__()
        return _snapshot[cls]


class daybreak(luigi.Config, metaclass=_Section):  # noqa: N801 - the class name is the luigi.cfg section name
    raw_root = luigi.Parameter(default="data/raw", description="Raw zone: a local folder or sftp://user@host:port/path")
    data_root = luigi.Parameter(default="data", description="Folder that holds staging/, marts/, quarantine/")
    start_date = luigi.DateParameter(
        default=dt.date(2026, 9, 1), description="First business date that exists (inclusive)"
    )
    lock_wait_s = luigi.FloatParameter(
        default=900.0,
        description="How long a run waits for another run that is writing the same partition before it fails",
    )


class qsr(luigi.Config, metaclass=_Section):  # noqa: N801
    suspicious_qty_threshold = luigi.IntParameter(
        default=20, description="A POS line with qty above this (exclusive) is flagged is_suspicious"
    )
    max_reject_share = luigi.FloatParameter(
        default=0.05,
        description="A partition fails when rejected rows exceed this share of the rows attributed to it",
    )
    timezone = luigi.Parameter(default="America/Toronto", description="IANA timezone of the QSR business day")
    day_start_hour = luigi.IntParameter(
        default=5, description="Local hour at which a QSR business day starts (the day ends at HH-1:59:59)"
    )


class ads(luigi.Config, metaclass=_Section):  # noqa: N801
    restatement_days = luigi.IntParameter(
        default=7,
        description="An ad export of day E restates dates E-N .. E-1; date d is final once export d+N arrived",
    )
    rolling_window_days = luigi.IntParameter(
        default=7, description="Length of the ads look-back: AdsRolling7d for d covers d-N+1 .. d (inclusive)"
    )


class hotels(luigi.Config, metaclass=_Section):  # noqa: N801
    max_reject_share = luigi.FloatParameter(
        default=0.05, description="A hotel staging partition fails when more of its rows are rejected"
    )


class sftp(luigi.Config, metaclass=_Section):  # noqa: N801
    key_filename = luigi.Parameter(default="", description="Private key for SFTP (never stored in the repo)")
    known_hosts = luigi.Parameter(
        default="~/.ssh/known_hosts", description="Host keys to trust; an unknown or changed key is refused"
    )
    timeout = luigi.FloatParameter(default=15.0, description="Seconds to connect, authenticate and per operation")
    retries = luigi.IntParameter(default=3, description="Retries of a transient failure (reset, timeout), with backoff")


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
    # NOTSET: Daybreak's default output, progress lines and a summary (tasks/runlog.py); --log-level
    # DEBUG or INFO, or a [core] log_level in a config file, is Luigi's own logging at that level
    "core": {"log_level": "NOTSET"},
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
    return Path(daybreak().data_root)


def raw_root() -> str:
    return str(daybreak().raw_root)


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
