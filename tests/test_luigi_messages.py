"""Luigi's own words that Daybreak recognises (tasks/luigi_shortcuts/messages.py, usage.py): Luigi is made
to log each message and raise each usage error on its own path, with Daybreak's filters taken off its
logger, and the adapter's reading of it is checked beside. A Luigi upgrade that rewords one fails here."""

from __future__ import annotations

import datetime as dt
import logging

import luigi
import luigi.retcodes
import pytest
from luigi.tools.range import RangeDaily, RangeDailyBase

import tasks
from tasks.luigi_shortcuts import failed_checks, messages, usage
from tests.conftest import reload_config

pytestmark = pytest.mark.luigi


class _MsgMissing(luigi.ExternalTask):
    def complete(self):
        return False


class _MsgNeedsMissing(luigi.Task):
    def requires(self):
        return _MsgMissing()


class _MsgFails(luigi.Task):
    def run(self):
        raise RuntimeError("boom")


class _MsgBadComplete(luigi.Task):
    def complete(self):
        raise RuntimeError("cannot tell")


class _MsgBadRequires(luigi.Task):
    def requires(self):
        raise RuntimeError("cannot list")


class _MsgDaily(luigi.Task):
    date = luigi.DateParameter()

    def complete(self):
        return True


class _MsgInt(luigi.Task):
    x = luigi.IntParameter()


@pytest.fixture
def luigi_log(monkeypatch):
    """Every record Luigi's logger makes, seen before any filter of Daybreak's (which are taken off)."""
    tasks.register()  # Daybreak's process, as `luigi --module tasks` has it
    logger = logging.getLogger("luigi-interface")
    records: list[logging.LogRecord] = []

    class Capture(logging.Filter):
        def filter(self, record):
            records.append(record)
            return False

    monkeypatch.setattr(logger, "filters", [Capture()])
    return records


def _raw(records) -> list[str]:
    return [r.msg for r in records if isinstance(r.msg, str)]


def test_luigi_logs_the_worker_messages_the_run_log_replaces(luigi_log):
    result = luigi.build([_MsgNeedsMissing(), _MsgFails()], local_scheduler=True, workers=1, detailed_summary=True)
    missing = [r for r in luigi_log if r.msg.startswith(messages.MISSING_DATA)]
    assert [r.args for r in missing] == [(_MsgMissing(),)], _raw(luigi_log)
    failed = [r for r in luigi_log if r.msg.startswith(messages.WORKER_FAILED)]
    assert len(failed) == 1 and len(failed[0].args) == 3 and failed[0].args[2] == _MsgFails(), _raw(luigi_log)
    assert failed[0].levelno == logging.ERROR and failed[0].exc_info[0] is RuntimeError
    assert result.summary_text.lstrip("\n").startswith(messages.SUMMARY)  # what Luigi logs as the run ends


def test_luigi_says_it_will_not_run_a_task_whose_check_raised(luigi_log):
    luigi.build([_MsgBadComplete()], local_scheduler=True, workers=1)
    warned = [r for r in luigi_log if r.levelno == logging.WARNING and r.msg.startswith(messages.WILL_NOT_RUN)]
    assert len(warned) == 1 and messages.DUE_TO_ERROR in warned[0].msg, _raw(luigi_log)
    assert "cannot tell" in warned[0].msg  # the traceback follows the first line


def test_what_a_check_or_a_requires_raises_reaches_daybreak_before_luigi_logs_it(luigi_log, monkeypatch):
    """tasks/luigi_shortcuts failed_checks: the error itself (Luigi logs only its traceback's text); complete()'s
    before Luigi's warning that it will not run the task, requires()'s (Luigi's BROKEN_TASK event) after it."""
    from luigi import worker

    monkeypatch.setattr(worker, "check_complete_cached", worker.check_complete_cached)  # put back after
    handlers = {cls: {event: set(f) for event, f in d.items()} for cls, d in luigi.Task._event_callbacks.items()}
    monkeypatch.setattr(luigi.Task, "_event_callbacks", handlers)
    seen = []

    def record(task, exc):
        warned = [r for r in luigi_log if r.msg.startswith(messages.WILL_NOT_RUN)]
        seen.append((task, str(exc), len(warned)))

    failed_checks(record)
    failed_checks(record)  # once
    luigi.build([_MsgBadComplete(), _MsgBadRequires()], local_scheduler=True, workers=1)
    assert seen == [(_MsgBadComplete(), "cannot tell", 0), (_MsgBadRequires(), "cannot list", 2)], _raw(luigi_log)


def test_luigi_refuses_a_reversed_range_in_the_words_the_usage_filter_reads(luigi_log, monkeypatch, capsys):
    # Luigi's own RangeDaily, without Daybreak's check when it is made (tasks/luigi_shortcuts checked_ranges)
    monkeypatch.setattr(RangeDailyBase, "__init__", luigi.Task.__init__)
    start, stop = dt.date(2026, 9, 10), dt.date(2026, 9, 1)
    luigi.build([RangeDaily(of=_MsgDaily, start=start, stop=stop)], local_scheduler=True, workers=1)
    warned = [r for r in luigi_log if messages.REVERSED_RANGE in r.getMessage()]
    assert len(warned) == 1 and warned[0].getMessage().startswith(messages.WILL_NOT_RUN), _raw(luigi_log)
    # the record, through Daybreak's filter on Luigi's logger: the luigi command's one line and exit 2
    logger = logging.getLogger("luigi-interface")
    monkeypatch.setattr(logger, "filters", [])
    usage.install()
    with pytest.raises(SystemExit) as refused:
        logger.handle(warned[0])
    assert refused.value.code == 2
    assert capsys.readouterr().err.startswith(f"daybreak: error: RangeDaily: --start {start} is after --stop {stop};")


def test_a_bad_command_line_value_is_read_from_luigis_own_traceback(luigi_log):
    from luigi.retcodes import run_with_retcodes

    with pytest.raises(SystemExit) as ended:
        run_with_retcodes(["_MsgInt", "--x", "seven", "--local-scheduler", "--no-lock"])
    # Luigi's exit for an unhandled exception ([retcode], which Daybreak sets): no filter of Daybreak's ran
    assert ended.value.code == luigi.retcodes.retcode().unhandled_exception != 2
    uncaught = [r for r in luigi_log if r.getMessage() == messages.UNCAUGHT]
    assert len(uncaught) == 1 and uncaught[0].exc_info is not None, _raw(luigi_log)
    _, exc, tb = uncaught[0].exc_info
    assert usage.parsed_parameter(tb) == ("x", "seven")
    assert usage.describe(exc, tb).startswith("--x 'seven': ")


def test_the_config_files_are_luigis_own_list_in_its_order(tmp_path, monkeypatch, setting):
    config = luigi.configuration.get_config()
    monkeypatch.setattr(type(config), "_config_paths", list(type(config)._config_paths))  # restored after
    first, last = tmp_path / "first.cfg", tmp_path / "last.cfg"
    first.write_text("[msg_probe]\nvalue = first\n")
    last.write_text("[msg_probe]\nvalue = last\n")
    luigi.configuration.add_config_path(str(first))
    luigi.configuration.add_config_path(str(last))
    assert messages.config_paths()[-2:] == [str(first), str(last)]
    assert config.get("msg_probe", "value") == "last"  # Luigi's own reading: the last file read wins
    monkeypatch.undo()
    reload_config()


class _MsgGone(luigi.Task):
    """Complete when the run is scheduled, gone by the time its reader runs (another host's rules)."""

    n = luigi.IntParameter()
    asked: dict = {}

    def complete(self):
        self.asked[self.n] = self.asked.get(self.n, 0) + 1
        return self.asked[self.n] == 1


class _MsgReadsGone(luigi.Task):
    count = luigi.IntParameter()

    def requires(self):
        return [_MsgGone(n=self.count * 10 + k) for k in range(self.count)]

    def run(self):
        pass


@pytest.mark.parametrize("count", [1, 2])
def test_luigi_says_a_requirement_is_unfulfilled_at_run_time_in_the_words_daybreak_reads(luigi_log, count):
    _MsgGone.asked.clear()
    luigi.build([_MsgReadsGone(count=count)], local_scheduler=True, workers=1)
    failed = [r for r in luigi_log if r.msg.startswith(messages.WORKER_FAILED)]
    assert failed and all(r.args[2] == _MsgReadsGone(count=count) for r in failed), _raw(luigi_log)
    assert all(messages.unfulfilled(str(r.exc_info[1])) for r in failed)


def test_luigi_refuses_a_second_run_of_a_command_in_the_words_the_lock_wrapper_reads(tmp_path, capsys):
    import os

    from luigi import lock

    from tasks.luigi_shortcuts import pidlock

    tasks.register()
    acquire = lock.acquire_for.luigis  # Luigi's own, under Daybreak's per-data-root wrapper
    folder = str(tmp_path / "locks")
    assert acquire(folder)  # this process runs "the command"
    assert not acquire(folder)  # a second run of it (this process's command line again) is refused
    said = capsys.readouterr().out
    assert said == messages.ALREADY_RUNNING.format({os.getpid()}) + "\n"
    assert pidlock._REFUSED.fullmatch(said.strip()).group(1) == str(os.getpid())
