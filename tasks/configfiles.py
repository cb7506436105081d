"""The config files Luigi reads, checked as text before Luigi reads a value from them (where configparser
would raise a traceback deep in Luigi), one line each. No Luigi here."""

from __future__ import annotations

import ast
import configparser
import contextlib
import os
import re
import sys

# Luigi's list (luigi/configuration/cfg_parser.py; tasks/luigi_shortcuts/messages.py reads it), then the variable
LUIGI_FILES = ("/etc/luigi/client.cfg", "/etc/luigi/luigi.cfg", "client.cfg", "luigi.cfg")
_ENV = re.compile(r"\$\{([^}]+)\}")  # Luigi's EnvironmentInterpolation, applied after the % interpolation
_INLINE_COMMENT = re.compile(r"\s([;#].*)$", re.S)  # whitespace, then a comment to the end


def luigi_files() -> list[str]:
    """The config files Luigi reads in this process, in its order (the last one wins), existing or not."""
    if "luigi.configuration" in sys.modules:
        from tasks.luigi_shortcuts.messages import config_paths

        return config_paths()
    named = os.environ.get("LUIGI_CONFIG_PATH")
    return [*LUIGI_FILES, *([named] if named else [])]


def read(path: str) -> tuple[configparser.ConfigParser | None, str | None]:
    """(the file parsed as Luigi parses it, or None; the one-line error that stops Luigi reading it, or None)."""
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # Luigi keeps the keys' case
    where = os.path.abspath(path)
    try:
        parser.read(path)  # Luigi's read: the locale's encoding
    except configparser.DuplicateSectionError as exc:
        return None, f"{where} line {exc.lineno}: section [{exc.section}] appears twice; merge the two into one"
    except configparser.DuplicateOptionError as exc:
        return None, f"{where} line {exc.lineno}: [{exc.section}] {exc.option} is set twice; keep one"
    except configparser.MissingSectionHeaderError as exc:
        return None, f"{where} line {exc.lineno}: {exc.line.strip()!r} comes before any [section]"
    except configparser.ParsingError as exc:
        lineno, line = exc.errors[0]  # configparser keeps the line as its repr()
        with contextlib.suppress(ValueError, SyntaxError):
            line = ast.literal_eval(line)
        return None, f"{where} line {lineno}: {str(line).strip()!r} is neither 'key = value' nor a [section]"
    except UnicodeDecodeError as exc:
        return None, f"{where}: not text in this system's encoding ({exc.reason} at byte {exc.start})"
    except OSError as exc:
        return None, f"{where}: cannot be read ({exc.strerror or exc})"
    return parser, None


def errors(paths: list[str] | None = None) -> list[str]:
    """Every reason Luigi would stop with a traceback over ``paths`` (default: :func:`luigi_files`)."""
    found, parsed = [], []
    chosen = os.environ.get("LUIGI_CONFIG_PARSER", "cfg")
    if paths is None and chosen != "cfg":  # `import luigi` raises without the toml package; Daybreak reads .cfg
        found.append(f"LUIGI_CONFIG_PARSER={chosen}: Daybreak reads Luigi's .cfg files only; unset it")
    for path in paths if paths is not None else luigi_files():
        if not os.path.isfile(path):
            continue  # Luigi skips it (a LUIGI_CONFIG_PATH naming no file: tasks/settings.py)
        if os.path.splitext(path)[1] == ".toml":  # Luigi picks its parser by the extension
            found.append(f"{os.path.abspath(path)}: a .toml config is not read by Daybreak; write it as a .cfg file")
            continue
        parser, error = read(path)
        if error:
            found.append(error)
        else:
            parsed.append((path, parser))
            found += inline_comments(path, parser)
    merged = configparser.ConfigParser(interpolation=None)
    merged.optionxform = str
    for _, parser in parsed:  # as Luigi merges them: a later file's value replaces an earlier one's
        merged.read_dict({"DEFAULT": dict(parser.defaults()), **{s: dict(parser[s]) for s in parser.sections()}})
    for section, key, value in _values(merged):
        problem = _interpolation_error(merged, section, key, value)
        if problem:
            where = next(
                (os.path.abspath(p) for p, q in reversed(parsed) if q.has_option(section, key)), "a config file"
            )
            found.append(f"[{section}] {key} = {value!r} in {where}: {problem}")
    return found


def _values(parser: configparser.ConfigParser):
    """(section, key, raw value) of every value, a [DEFAULT] one once (not again under each section)."""
    defaults = parser.defaults()
    yield from (("DEFAULT", key, value) for key, value in defaults.items())
    for section in parser.sections():
        for key, value in parser.items(section, raw=True):
            if defaults.get(key) != value:
                yield section, key, value


def inline_comments(path: str, parser: configparser.ConfigParser) -> list[str]:
    """A value that ends in a comment (whitespace, then ``;`` or ``#``), which Luigi would read as part of it."""
    found = []
    for section, key, value in _values(parser):
        comment = _INLINE_COMMENT.search(value or "")
        if comment:
            found.append(
                f"[{section}] {key} = {value!r} in {os.path.abspath(path)}: inline comments are not allowed in "
                f"luigi.cfg (Luigi would read {comment.group(1)!r} as part of the value); put the comment on its "
                "own line"
            )
    return found


def _interpolation_error(parser, section: str, key: str, value: str) -> str | None:
    values = dict(parser.defaults() if section == "DEFAULT" else parser.items(section, raw=True))
    try:
        value = configparser.BasicInterpolation().before_get(parser, section, key, value, values)
    except configparser.InterpolationMissingOptionError as exc:
        return f"%({exc.reference})s names no setting of [{section}]; write a literal % as %%"
    except configparser.InterpolationSyntaxError:
        return "a % must be written %% (Luigi reads %(name)s as the value of another setting)"
    except configparser.InterpolationDepthError:
        return "its %(name)s references go round in a circle"
    missing = [name for name in _ENV.findall(value) if name not in os.environ]
    if missing:
        return f"${{{missing[0]}}}: the environment variable {missing[0]} is not set (Luigi reads ${{NAME}} from it)"
    return None
