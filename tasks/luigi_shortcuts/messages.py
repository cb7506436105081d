"""Luigi's own words, which it has no public names for: log messages and the config-file list that
Daybreak recognises (tests/test_luigi_shortcuts.py makes Luigi produce each one)."""

from __future__ import annotations

import configparser
import sys

SUMMARY = "===== Luigi Execution Summary ====="  # luigi.execution_summary, the end of every run
UNCAUGHT = "Uncaught exception in luigi"  # luigi.retcodes: logged with the exception, then exit 40 (or ours)
WILL_NOT_RUN = "Will not run "  # luigi.worker: "... or any dependencies due to error in complete() method:\n<tb>"
DUE_TO_ERROR = "due to error in"  # ... of a WILL_NOT_RUN message whose complete() or deps() raised
MISSING_DATA = "Data for %s does not exist (yet?)"  # luigi.worker, an incomplete external dependency
WORKER_FAILED = "[pid %s] Worker %s failed"  # luigi.worker, a task's run raised: args (pid, worker id, task)
DIED = "died unexpectedly with exit code "  # luigi.worker, Event.PROCESS_FAILURE: "Task <id> died ... -9"
# luigi.worker.TaskProcess: a dependency not complete when the task was to run (one, or several)
UNFULFILLED = ("Unfulfilled dependency at run time", "Unfulfilled dependencies at run time")


def unfulfilled(error: str) -> bool:
    """Whether a task's error is Luigi's :data:`UNFULFILLED`."""
    return any(text in error for text in UNFULFILLED)


REVERSED_RANGE = "Can't have start > stop"  # luigi.tools.range, a RangeDaily's reversed dates
# luigi.tools.range: no --start (and no --stop, or --stop without --reverse)
NO_START = ("At least one of start and stop needs to be specified", "Either start needs to be specified or reverse")

ALREADY_RUNNING = "Pid(s) {} already running"  # luigi.lock.acquire_for, printed when it refuses a run (exit 10)


def config_paths() -> list[str]:
    """The config files Luigi's parser reads in this process, in its order; empty before it is loaded."""
    configuration = sys.modules.get("luigi.configuration")
    if configuration is None:
        return []
    return list(getattr(type(configuration.get_config()), "_config_paths", []))


def last_config_with(has) -> tuple[str, configparser.ConfigParser] | None:
    """(path, parsed) of the last config file Luigi reads for which ``has(parser)`` holds, or None."""
    for path in reversed(config_paths()):
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(path)
        except configparser.Error:
            continue
        if has(parser):
            return path, parser
    return None
