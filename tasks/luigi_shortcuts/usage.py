"""Luigi's own usage errors, one line and exit 2, as Daybreak's: caught on their way out by a filter on
the ``luigi-interface`` logger and ``sys.excepthook`` (which also makes Ctrl-C one line)."""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import sys

from tasks.guard import INTERRUPTED, TERMINATED_EXIT, Terminated, check_range, fail, nearest
from tasks.luigi_shortcuts.messages import NO_START, REVERSED_RANGE, UNCAUGHT


def _families() -> list[str]:
    """The task families a user can name: the ones ``tasks`` exports, and RangeDaily."""
    from tasks.catalogue import families

    return sorted({*families(), "RangeDaily"})


def _unknown_task(exc: Exception) -> str:
    from tasks.catalogue import named

    match = re.match(r"No task (\S+?)\.", str(exc))
    name = match.group(1) if match else str(exc)
    families = _families()
    spec = named(name)  # a dataset's name, as the daybreak command takes it
    hint = (
        f"; did you mean {spec.task.get_task_family()}? (the task that builds dataset {spec.name})"
        if spec
        else nearest(name, families)
    )
    return f"no task {name}{hint or '.'} Daybreak's tasks: {', '.join(families)}"


def describe(exc: BaseException, tb=None) -> str | None:
    """One line for a Luigi usage error (unknown task, bad or missing parameter); None for anything else."""
    from luigi.parameter import ParameterException
    from luigi.task_register import TaskClassNotFoundException

    param, value = parsed_parameter(tb)
    if isinstance(exc, TaskClassNotFoundException):
        text = _unknown_task(exc)
        return f"--{param.replace('_', '-')} {value}: {text}" if param else text
    if param is not None:  # raised while Luigi parsed a command-line value
        return f"--{param.replace('_', '-')} {value!r}: {exc}"
    default = re.match(r"(\w+)\[.*\]: Error when parsing the default value of '(\w+)'", str(exc))
    if default and exc.__cause__ is not None:  # a value of Luigi's own sections ([core]: --workers, --log-level)
        return _bad_setting(*default.groups(), exc.__cause__)
    if isinstance(exc, ParameterException):
        missing = re.match(r"(\w+)\[.*\]: requires the '(\w+)' parameter to be set", str(exc))
        if missing:
            return f"{missing.group(1)} needs --{missing.group(2).replace('_', '-')}"
        return str(exc)
    return None


def _bad_setting(section: str, name: str, cause: BaseException) -> str:
    """``--workers 'x': expected a whole number``: a value of a Luigi section that did not parse."""
    import luigi
    from luigi.cmdline_parser import CmdlineParser
    from luigi.task_register import Register

    parser = CmdlineParser.get_instance()
    value = getattr(parser.known_args, f"{section}_{name}", None) if parser is not None else None
    flags = {f"--{name.replace('_', '-')}", f"--{section}-{name.replace('_', '-')}"}
    for i, arg in enumerate(sys.argv if value is None else ()):  # the run is over: its parser is gone
        flag, equals, given = arg.partition("=")
        if flag in flags:
            value = given if equals else (sys.argv[i + 1] if i + 1 < len(sys.argv) else None)
    param = dict(Register.get_task_cls(section).get_params()).get(name)
    if isinstance(param, luigi.IntParameter):
        why = "expected a whole number"
    elif isinstance(param, luigi.ChoiceParameter):
        why = f"expected one of {', '.join(sorted(map(str, param._choices)))}"
    else:
        why = str(cause)
    if value is not None:
        return f"--{name.replace('_', '-')} {value!r}: {why}"
    return f"{_config_setting(section, name)}: {why}"


def _config_setting(section: str, name: str) -> str:
    """``[core] scheduler_port = 'abc' in /srv/daybreak/luigi.cfg``: a setting's value and the file that sets it."""
    from tasks.luigi_shortcuts.messages import last_config_with

    keys = (name, name.replace("_", "-"))
    found = last_config_with(lambda parser: any(parser.has_option(section, key) for key in keys))
    if found is None:
        return f"[{section}] {name}"
    path, parser = found
    key = next(key for key in keys if parser.has_option(section, key))
    return f"[{section}] {key} = {parser.get(section, key)!r} in {os.path.abspath(path)}"


def parsed_parameter(tb) -> tuple[str | None, object]:
    """(name, command-line value) when the traceback went through Luigi parsing a command-line value."""
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "_get_task_kwargs" and "param_name" in frame.f_locals:
            return frame.f_locals["param_name"], frame.f_locals.get("attr")
        tb = tb.tb_next
    return None, None


_REVERSED = re.compile(
    r"Will not run (\w+)\(.*?start=(\S+?), stop=(\S+?)[,)].*ParameterException: Can't have start > stop", re.S
)


class _UsageFilter(logging.Filter):
    """On the ``luigi-interface`` logger: a usage error Luigi is about to log with a traceback exits 2
    with one line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None and record.getMessage() == UNCAUGHT:
            text = describe(record.exc_info[1], record.exc_info[2])
            if text is not None:
                fail(text)
        if record.levelno == logging.WARNING and any(text in record.getMessage() for text in NO_START):  # exit 0
            family = re.search(r"Will not run (\w+)\(", record.getMessage())
            fail(f"{family.group(1) if family else 'RangeDaily'} needs --start (with --days-back N: its last N days)")
        if record.levelno == logging.WARNING and REVERSED_RANGE in str(record.msg):
            reversed_range = _REVERSED.search(record.getMessage())
            if reversed_range:
                family, start, stop = reversed_range.groups()
                check_range(dt.date.fromisoformat(start), dt.date.fromisoformat(stop), family)
        return True


def _excepthook(previous):
    def hook(kind, exc, tb):
        if isinstance(exc, KeyboardInterrupt):  # Ctrl-C: one line; Python then exits as SIGINT does (130)
            print(INTERRUPTED, file=sys.stderr, flush=True)
            if isinstance(exc, Terminated):
                raise SystemExit(TERMINATED_EXIT)
            return None
        text = describe(exc, tb) if isinstance(exc, Exception) else None
        if text is None:
            return previous(kind, exc, tb)
        fail(text)  # a SystemExit raised by the hook: Python exits with its code, 2

    hook.daybreak = True
    return hook


def install() -> None:
    """Hook the usage errors of the ``luigi`` command (see the module doc). Idempotent."""
    logger = logging.getLogger("luigi-interface")
    if not any(isinstance(f, _UsageFilter) for f in logger.filters):
        logger.addFilter(_UsageFilter())
    if not getattr(sys.excepthook, "daybreak", False):
        sys.excepthook = _excepthook(sys.excepthook)
