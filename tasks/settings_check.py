"""Where a setting comes from, and the check of every value: unknown keys and sections, values that
do not parse or are out of range (:data:`tasks.settings.RANGES`), and a raw zone that overlaps the
folders Daybreak writes. Each message names the file, the section and the key; a failure exits 2."""

from __future__ import annotations

import configparser
import datetime as dt
import math
import os
import re
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit

import luigi

from tasks.luigi_shortcuts.messages import last_config_with
from tasks.settings import INT_MAX, RANGES, SECTIONS, business_today, data_root, data_uri

HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")  # [daybreak] host_name: no space, no ';'
_KINDS = {
    luigi.IntParameter: "a whole number",
    luigi.FloatParameter: "a number",
    luigi.DateParameter: "a date (YYYY-MM-DD)",
}


def source_of(section: str, key: str) -> str:
    """Where the value of ``[section] key`` comes from: the command line, a config file, or the default."""
    import luigi.configuration
    from luigi.cmdline_parser import CmdlineParser

    cmdline = CmdlineParser.get_instance()
    if cmdline is not None and getattr(cmdline.known_args, f"{section}_{key}", None) is not None:
        return f"the command line (--{section}-{key.replace('_', '-')})"
    config = luigi.configuration.get_config()
    if not config.has_option(section, key):
        return f"the built-in default (no config file sets [{section}] {key}; tasks/settings.py)"
    found = last_config_with(lambda parser: parser.has_option(section, key))
    if found is not None and found[1].get(section, key) == config.get(section, key, raw=True):  # %% and ${} as written
        return str(Path(found[0]).resolve())
    return "a value set at run time"


def config_errors() -> list[str]:
    """Every unknown key of a Daybreak section and every bad value, one message each."""
    import luigi.configuration

    from tasks import configfiles

    errors = configfiles.errors()  # a file Luigi cannot read, a % it cannot interpolate: nothing else can be read
    if errors:
        return errors
    config = luigi.configuration.get_config()
    errors += _setting_errors(config, source_of)
    errors += section_errors(config)
    named = os.environ.get("LUIGI_CONFIG_PATH")
    if named and not os.path.isfile(named):  # Luigi only warns, then runs on the defaults
        errors.append(f"LUIGI_CONFIG_PATH={named}: no such file (Luigi would go on without it)")
    return errors


def file_errors(path: str) -> list[str]:
    """One config file checked on its own and without the disk; return its error lines."""
    from tasks import configfiles

    errors = configfiles.errors([path])
    if errors:
        return errors
    config = configparser.ConfigParser()  # Luigi's reading: keys in lower case, %(name)s interpolated
    config.read(path)
    where = str(Path(path).resolve())
    return _setting_errors(config, lambda _section, _key: where, disk=False) + section_errors(config, where)


def _setting_errors(config, where_of, disk: bool = True) -> list[str]:
    errors = []
    defaults = set(config.defaults())
    for name, section in SECTIONS.items():
        if not config.has_section(name):
            continue
        params = dict(section.get_params())
        for key in config.options(name):
            if key in defaults:
                continue
            where = where_of(name, key)
            if key not in params and key.replace("-", "_") in params:  # Luigi would prefer another file's
                found = last_config_with(lambda parser, name=name, key=key: parser.has_option(name, key))
                where = str(Path(found[0]).resolve()) if found is not None and disk else where
                errors.append(f"[{name}] {key} in {where}: write it {key.replace('-', '_')}, with underscores")
                continue
            if key not in params:
                from tasks.guard import nearest

                errors.append(
                    f"unknown setting [{name}] {key} in {where}{nearest(key, params)} (known: {', '.join(params)})"
                )
                continue
            text = config.get(name, key)
            error = _value_error(name, key, params[key], text, disk)
            if error:
                errors.append(f"[{name}] {key} = {text!r} in {where}: {error}")
    return errors


# Sections Luigi reads that are no registered class (the classes: core, worker, scheduler, email, ...)
LUIGI_SECTIONS = frozenset({"retcode", "resources", "task_history", "hdfs", "hadoop", "spark", "webhdfs"})


def section_errors(config, where: str | None = None) -> list[str]:
    """A section one edit away from a Daybreak section (``[qrs]``, ``[hotel]``): a typo."""
    from luigi.task_register import Register

    known = set(Register.task_names()) | LUIGI_SECTIONS | set(SECTIONS)
    errors = []
    for name in config.sections():
        if name in known:
            continue
        meant = next((s for s in SECTIONS if _one_edit(name.lower(), s)), None)
        if meant is not None:
            errors.append(
                f"unknown section [{name}] in {where or _section_file(name)}; did you mean [{meant}]? "
                "(its settings are not read)"
            )
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
    found = last_config_with(lambda parser: parser.has_section(section))
    return str(Path(found[0]).resolve()) if found is not None else "the configuration"


def _value_error(section: str, key: str, param: luigi.Parameter, text: str, disk: bool = True) -> str | None:
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

        from tasks.calendar import zone_problem

        problem = zone_problem(value)  # as Arrow, which gives each line its business date, knows zones
        if problem:
            return problem
        try:
            ZoneInfo(value)  # today's date is Python's (settings.business_today)
        except (ZoneInfoNotFoundError, ValueError):
            return "not an IANA timezone (e.g. America/Toronto)"
    if isinstance(value, str) and not value and key in ("raw_root", "data_root"):
        return "empty"
    if (section, key) == ("daybreak", "host_name") and value and not HOST_NAME.fullmatch(value):
        return "expected a host name: letters, digits, '.', '_' and '-', at most 253"
    if (section, key) in LOCATIONS and "://" in value:
        return location_error(value, LOCATIONS[section, key])
    if (section, key) == ("daybreak", "data_root") and disk and value and Path(value).exists():
        return None if Path(value).is_dir() else "not a folder"
    if (section, key) == ("s3", "endpoint_url") and value:
        return endpoint_error(value)
    if (section, key) == ("hotels", "reference_file") and disk and value and not Path(value).is_file():
        return f"no such file ({Path(value).resolve()})"
    return None


# The URLs each location setting takes (a value without ``://`` is a local folder)
LOCATIONS = {("daybreak", "raw_root"): ("sftp", "s3"), ("daybreak", "data_root"): ("s3",)}
_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]", re.I)  # S3's, loosened as radosgw's relaxed names
_HOST = re.compile(r"^((?!-)[a-z\d-]{1,63}(?<!-)\.)*((?!-)[a-z\d-]{1,63}(?<!-))\.?$", re.I)  # botocore's


def location_error(uri: str, schemes: tuple[str, ...]) -> str | None:
    """Why ``uri`` is not of the form ``s3://BUCKET/PREFIX`` (or ``sftp://...`` where ``schemes`` has it), or None."""
    scheme, _, rest = uri.partition("://")
    forms = " or ".join(URL_FORMS[s] for s in schemes)
    if scheme not in schemes:
        return f"scheme {scheme}:// is not supported: expected a local folder or {forms}"
    if any(c.isspace() or ord(c) < 32 for c in uri):
        return f"a URL has no spaces: expected {forms}"
    if scheme == "s3":
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            return f"no bucket: expected {URL_FORMS['s3']}"
        if not _BUCKET.fullmatch(bucket) or ".." in bucket:
            return f"{bucket!r} is not a bucket name (3 to 63 letters, digits, . - _): expected {URL_FORMS['s3']}"
        parts = prefix.strip("/").split("/") if prefix.strip("/") else []
        if any(part in ("", ".", "..") for part in parts):
            return f"the prefix {prefix!r} has an empty, '.' or '..' part (keys are taken as written): write it in full"
        return None
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises on a port that is not a number from 0 to 65535
    except ValueError as exc:
        return f"not a URL ({exc}): expected {URL_FORMS['sftp']}"
    if not parts.username or not parts.hostname:
        return f"no {'user' if parts.hostname else 'host'}: expected {URL_FORMS['sftp']}"
    return None


def endpoint_error(url: str) -> str | None:
    """Why ``[s3] endpoint_url`` is not ``http(s)://HOST[:PORT]``, as botocore would refuse it; None when it is."""
    form = "http://HOST:PORT or https://HOST (e.g. http://127.0.0.1:7480)"
    if any(c.isspace() or ord(c) < 32 for c in url):
        return f"a URL has no spaces: expected {form}"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"not a URL ({exc}): expected {form}"
    if parts.scheme not in ("http", "https") or "://" not in url:
        return f"no http:// or https:// in front: expected {form}"
    host = parts.hostname or ""
    if not host or not (_HOST.match(host) or _ipv6(host)) or port == 0:
        return f"no host{'' if not host else ' ' + repr(host)} a client can connect to: expected {form}"
    return None


def _ipv6(host: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False


URL_FORMS = {"s3": "s3://BUCKET/PREFIX", "sftp": "sftp://USER@HOST:PORT/PATH"}


def _command_line_settings():
    """(section, key, its parameter, the text given) of each Daybreak setting on the ``luigi`` command line."""
    from luigi.cmdline_parser import CmdlineParser

    cmdline = CmdlineParser.get_instance()
    if cmdline is None:
        return
    for name, section in SECTIONS.items():
        for key, param in section.get_params():
            text = getattr(cmdline.known_args, f"{name}_{key}", None)
            if text is not None:
                yield name, key, param, text


def given_on_command_line() -> set[str]:
    """The keys of the Daybreak settings given on the ``luigi`` command line (``--qsr-day-start-hour 6``:
    ``day_start_hour``)."""
    return {key for _, key, _, _ in _command_line_settings()}


def command_line_errors() -> list[str]:
    """Each bad Daybreak setting given on the ``luigi`` command line (``--qsr-day-start-hour 30``)."""
    errors = []
    for name, key, param, text in _command_line_settings():
        error = _value_error(name, key, param, text) if isinstance(text, str) else None
        if error:
            errors.append(f"--{name}-{key.replace('_', '-')} {text!r}: {error}")
    return errors


def check_config(command_line: bool = False) -> None:
    """Exit 2 when :func:`config_errors` (or, ``command_line``, :func:`command_line_errors`) finds anything."""
    errors = command_line_errors() if command_line else config_errors()
    if errors:
        from tasks.guard import fail

        fail("invalid settings:\n  " + "\n  ".join(errors) if len(errors) > 1 else errors[0])


def output_folders() -> list[str]:
    """The folders of the data root that Daybreak writes: each dataset's top folder, quarantine and ``_state``."""
    from tasks.catalogue import DATASETS

    return sorted({d.path.split("/")[0] for d in DATASETS} | {"quarantine", "_state"})


def check_raw_root(uri: str) -> None:
    """Exit 2 when a local ``raw_root`` is not a folder or overlaps the folders Daybreak writes."""
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

    fail(f"raw_root {shown} does not exist{where_else} (from {raw_root_setting()})")


def raw_root_setting() -> str:
    """``[daybreak] raw_root in <its file>``, or where else the value comes from (the command line, ...)."""
    source = source_of("daybreak", "raw_root")
    return f"[daybreak] raw_root in {source}" if source.startswith("/") else source


def empty_root_note(uri: str) -> str:
    """Why every folder of a raw root that holds nothing at all waits: a typo, or nothing sent yet."""
    where = raw_root_setting()
    return f"nothing at all under {uri}: check {where if where.startswith('[') else '[daybreak] raw_root'}"
