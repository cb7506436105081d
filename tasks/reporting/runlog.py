"""What a run prints: by default progress lines and one summary, not Luigi's chatter (docs/operations.md).
Each build, in whichever process, appends what it wrote or failed to one file of the run, which the
summary reads; it asks the store only about the other partitions."""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import json
import logging
import os
import sys
import tempfile
import warnings
from collections import defaultdict

from tasks.luigi_shortcuts import hosts
from tasks.reporting import outcomes
from tasks.reporting.names import capped, dates_span, first_line, key_of, label, partition_name, partition_names, when

logger = logging.getLogger("luigi-interface")

KINDS = ("ran", "written by another run", "superseded", "up to date", "failed", "waiting", "not run", "left out")
KINDS += ("not over yet",)  # a range leaves out a business date not over (tasks.settings.not_over)
# the single-run build's message for each failed date (tasks.backfill.SingleRunBuild): the summary says it
SINGLE_RUN_FAILED = "%s failed; the rest of the range goes on"

# RangeDaily's param_name (None: the first positional parameter) warns on every range run
warnings.filterwarnings("ignore", message=r'Parameter "param_name" with value "None" is not of type string')

_default_mode = False
_watched: dict[str, tuple[object, bool]] = {}  # task id -> (task, complete when first checked)
_started_at: str | None = None  # UTC, ISO: failure records from this time on are this run's
_records: str | None = None  # the file of what this run's builds did: one JSON line each, appended by each build
_went_away = False  # the last summary found a store or server gone (Luigi asks its tasks again after it)
_notes: dict[str, None] = {}  # lines of the summary not about a partition (:func:`note`), in order
_not_over: set[str] = set()  # task ids a range left out: their business day is not over (:func:`not_over`)


def _record(entry: dict) -> None:
    """Append one line to the run's records: one ``write`` of the whole line (O_APPEND), from any process."""
    if _records is not None:
        with open(_records, "ab", buffering=0) as fh:
            fh.write((json.dumps(entry, default=str) + "\n").encode())


def failed(task, exception: BaseException) -> None:
    """A task failed: the summary names its error from this record, not from the store (it may be full or gone)."""
    from tasks.faults import went_away

    if getattr(exception, "superseded", False):  # another host's commit is kept: not a failure of this run
        _record({"superseded": task.task_id})
        return
    from tasks.luigi_shortcuts.messages import unfulfilled

    if unfulfilled(str(exception)):  # Luigi's check before the build: not run, the summary says what changed
        return
    gone = went_away(exception)
    entry = {"failed": task.task_id, "error": first_line(str(exception) or type(exception).__name__)}
    _record(entry | (_gone(gone) if gone else {}))


def _gone(gone) -> dict:
    """The record of a store or server gone (:class:`tasks.faults.Gone`): its fields, and what it is."""
    return {"gone": gone.what, **gone._asdict()}


def unchecked(task_id: str, name: str, gone) -> None:
    """A task whose check failed as a store or server stopped answering: named ``gone`` once, not run."""
    watch([])
    _record(_gone(gone) | {"unchecked": task_id, "name": name})


def quiet() -> bool:
    """True in the default mode: progress every tenth, not every partition."""
    return _default_mode


def watch(tasks_and_states) -> None:
    """Partitions whose completeness the scheduling process checked, with the answer, for the summary."""
    global _started_at, _records, _went_away
    if _started_at is None:
        _started_at, _went_away = dt.datetime.now(dt.UTC).isoformat(), False
        fd, _records = tempfile.mkstemp(prefix="daybreak-run-", suffix=".records")
        os.close(fd)
        atexit.register(_recorded)  # a run that ends before its summary (Ctrl-C, an error) leaves no file
    for task, ok in tasks_and_states:
        _watched.setdefault(task.task_id, (task, ok))
    _set_mode()


def not_over(tasks: list) -> None:
    """Partitions a range left out because their business day is not over, counted ``not over yet``."""
    _not_over.update(task.task_id for task in tasks)
    watch((task, True) for task in tasks)


def note(line: str) -> None:
    """A line of the summary about a run that has no partition to report."""
    watch([])
    _notes.setdefault(line)


def _set_mode() -> None:
    """Turn the default mode on once Luigi set up its handler with the level NOTSET (again should it be reset)."""
    global _default_mode
    if logger.level == logging.NOTSET and logger.handlers:
        logger.setLevel(logging.INFO)  # records of INFO are made, and filtered below
        _default_mode = True


def wrote(task_id: str, warnings: list[str] | None = None) -> None:
    """A build of this run wrote its partition, with the warnings its manifest records."""
    _record({"wrote": task_id, "warnings": list(warnings or [])})


def store_went_away() -> bool:
    """Whether a store or server stopped answering a build or a check of this run."""
    if _records is None:  # the summary is made: asked again as Luigi makes the exit code, before any new run
        from tasks.luigi_shortcuts import run_in_progress

        return _went_away and not run_in_progress()
    try:
        with open(_records, encoding="utf-8") as fh:
            return any('"gone"' in line for line in fh)
    except OSError:
        return False


def unfulfilled_error(task_id: str) -> str:
    """Luigi's error of a task of this run that Luigi did not run, as a requirement was not complete when it was
    to run; '' for any other."""
    return (_in_records("task_id", task_id) or {}).get("error", "")


def superseded_in_run(task_id: str) -> bool:
    """Whether this run recorded the partition superseded already (:func:`failed`): its warning is said."""
    return _in_records("superseded", task_id) is not None


def _in_records(kind: str, task_id: str) -> dict | None:
    """The first record of this run whose ``kind`` is ``task_id``."""
    with contextlib.suppress(OSError, ValueError), open(_records or os.devnull, encoding="utf-8") as fh:
        return next((r for r in map(json.loads, filter(str.strip, fh)) if r.get(kind) == task_id), None)
    return None


def _recorded() -> list[dict]:
    """What this run's builds recorded, in order; the file is deleted."""
    global _records
    path, _records = _records, None
    if path is None:
        return []
    try:
        with open(path, encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except (OSError, ValueError):
        return []
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


class _RunLog(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        from tasks.luigi_shortcuts import messages  # Luigi's texts (loaded: this filter is on Luigi's logger)

        msg = record.msg if isinstance(record.msg, str) else ""
        if msg.startswith("\n" + messages.SUMMARY) or msg.startswith(messages.SUMMARY):
            try:
                errors, text = report()
            except Exception as exc:  # the run is over: a summary that cannot be made must not change its exit
                record.msg, record.args = f"{msg}\n(no Daybreak summary: {type(exc).__name__}: {exc})", ()
                return True
            for line in errors:  # what ended the run, first: a store or luigid that stopped answering
                print(f"daybreak: error: {line}", file=sys.stderr, flush=True)
            if text:
                record.msg, record.args = (text if _default_mode else f"{msg}\n{text}"), ()
            return True
        if msg.startswith(messages.MISSING_DATA) and getattr((record.args or (None,))[0], "declined", ""):
            return False  # not missing: left to a host on newer code or settings, as its warning says
        gone = None
        if msg.startswith(messages.WORKER_FAILED) and record.exc_info and record.exc_info[1] is not None:
            from tasks.faults import went_away

            gone = went_away(record.exc_info[1])  # a task that failed because the store went: one line names it
            if gone:
                _record(_gone(gone))
        _set_mode()  # a warning or error before any partition was checked
        if not _default_mode:
            return True
        if record.levelno < logging.WARNING:
            return msg.startswith("progress: ")
        if msg.startswith(messages.WORKER_FAILED) and len(record.args or ()) == 3:  # a failed task: its traceback
            # stays unless the summary names the failure
            error = str(record.exc_info[1] if record.exc_info else "")
            unfulfilled = messages.unfulfilled(error)
            if unfulfilled:  # the summary names what it requires that is not up to date (:func:`_changed`)
                task = record.args[2]
                _record(
                    {
                        "unfulfilled": getattr(task, "task_family", str(task)),
                        "error": error,
                        "task_id": getattr(task, "task_id", ""),
                    }
                )
            return not gone and not _summarised(record.args[2]) and not unfulfilled
        if msg.startswith(messages.WILL_NOT_RUN) and messages.DUE_TO_ERROR in msg:  # complete() or requires()
            from tasks.faults import fault_in_traceback

            return fault_in_traceback(msg.split("\n", 1)[-1]) is None  # a store's error: the summary names it
        # one line per missing raw folder, per failed single-run date: the summary says it better
        return not msg.startswith((messages.MISSING_DATA, SINGLE_RUN_FAILED))


def _summarised(task) -> bool:
    """Whether the summary reports this task's failure: a watched partition or a single-run build."""
    return getattr(task, "task_id", None) in _watched or getattr(task, "failures_summarised", False)


logger.addFilter(_RunLog())
hosts.own_unfulfilled = unfulfilled_error  # luigid keeps one error a task: another host's may replace this one's


def report() -> tuple[list[str], str]:
    """(the error lines, the summary) of the partitions watched since the last one, then forget them."""
    global _started_at, _went_away
    from tasks.luigi_shortcuts import worker_id
    from tasks.luigi_shortcuts.hosts import FAILED_CHECKS

    watched, started, run = list(_watched.values()), _started_at or "", outcomes.Run(_recorded())
    watched = [(t, ok) for t, ok in watched if ok or not run.unchecked.get(t.task_id)]  # else said as unchecked
    notes, not_over_ids = [f"  {line}" for line in _notes], set(_not_over)
    for kept in (_watched, _notes, _not_over):
        kept.clear()
    _started_at, _went_away = None, run.store_gone
    FAILED_CHECKS.update(dict.fromkeys(run.unchecked, worker_id()))  # whichever process of the run checked it
    seen = {task.task_id for task, _ in watched}  # a partition watched is on the summary's lines already
    unchecked = [name for task_id, name in run.unchecked.items() if name and task_id not in seen]
    notes += capped("  not run  ", unchecked, f"({run.stopped(' while the run checked it')})")

    title = f"summary of this run: {when(started)}"
    if not watched:
        errors = [*run.errors.values(), *([run.luigid] if run.luigid else [])]
        return errors, "\n".join([title, *notes]) if notes else ""
    from tasks import settings
    from tasks.freshness.engine import Engine
    from tasks.luigi_shortcuts.hosts import DONE_IN_SCHEDULER, LEFT_BY_A_LOST_HOST, LEFT_BY_THE_LIMIT, NOT_RUN
    from tasks.luigi_shortcuts.hosts import FAILED_ELSEWHERE as FAILED_ON

    cache = Engine()
    cache.snapshot = True  # a view of the run's end: it warns of nothing the run's own checks warned of
    counts: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    failed, waiting, blocked, warned, others, fenced, cooled = [], defaultdict(list), [], [], [], [], []
    newer_elsewhere = []  # superseded by another host's build meanwhile, with why
    unhanded = []  # not run, reading no partition: the scheduler did not give it to this host
    lost = defaultdict(list)  # luigid's status -> partitions a host it lost left undone
    limited = defaultdict(list)  # a RangeDaily's task_limit -> the partitions it left to the next run
    # a single run's partitions are no Luigi tasks: luigid keeps its one task, done, from this host
    single_run_done = any(t.startswith("SingleRunBuild_") for t in DONE_IN_SCHEDULER)
    with settings.snapshot():
        changed = [] if run.store_gone else outcomes.changed_lines(run, watched, cache, DONE_IN_SCHEDULER)
        for task, ok_at_check in watched:
            family, key = task.task_family, key_of(task)
            if ok_at_check:  # a date before [daybreak] start_date is left out, as a range leaves it out
                kind = (
                    "left out"
                    if task.before_start()
                    else "not over yet"
                    if task.task_id in not_over_ids
                    else "up to date"
                )
                counts[family][kind].append(key)
            elif task.task_id in run.superseded:  # another host's commit is kept (exit 10)
                counts[family]["superseded"].append(key)
                fenced.append((family, key))
            elif task.task_id in run.written:  # committed: built, whatever failed after the commit
                counts[family]["ran"].append(key)
                warned += [f"{label(task)}: {w}" for w in run.written[task.task_id]]
            elif task.task_id in run.failed:
                counts[family]["failed"].append(key)
                failed.append(f"{label(task)}: {run.failed[task.task_id]}")
            else:
                try:
                    if run.store_gone:  # the store not asked: what luigid counts done another host built, or failed
                        kind = "written by another run" if task.task_id in DONE_IN_SCHEDULER else "not run"
                        others += [(family, key)] if kind != "not run" else []
                    else:
                        kind = outcomes.kind_now(task, cache, started, failed, waiting, others, newer_elsewhere)
                except Exception as exc:
                    if not run.unreachable(exc):
                        raise
                    kind = "not run"
                if kind == "not run" and task.task_id in FAILED_ON:  # no record of it: its store or server went
                    kind = "failed"
                    failed.append(f"{label(task)} (on another host): {FAILED_ON[task.task_id]}")
                counts[family][kind].append(key)
                _, limit, by_worker = LEFT_BY_THE_LIMIT.get(task.task_id, (None, 0, None))
                if kind == "not run" and task.task_id in LEFT_BY_A_LOST_HOST:
                    lost[LEFT_BY_A_LOST_HOST[task.task_id]].append(label(task))
                elif kind == "not run" and by_worker == worker_id():  # left by this run's RangeDaily's task_limit
                    limited[limit].append(label(task))
                elif kind == "not run" and task.task_id in run.unfulfilled_and_deps and changed:
                    pass  # the line of what changed says why
                elif kind == "not run":
                    done = task.task_id in DONE_IN_SCHEDULER or single_run_done
                    reads = run.luigid or run.store_gone or task.upstream()  # else: not given to this host
                    (cooled if done else blocked if reads else unhanded).append(label(task))
        zone = None if run.store_gone or not waiting else cache.zone(watched[0][0])
    if not (blocked or unhanded or cooled or changed or limited or any(lost.values())):  # no partition explains a 25
        plain = [t for t in NOT_RUN.values() if t.task_id not in {w.task_id for w, _ in watched}]
        for task in sorted(plain, key=label):  # the store sensor, AllStores
            (cooled if task.task_id in DONE_IN_SCHEDULER else blocked).append(label(task))
    lines = [title, *notes]
    for family, kinds in counts.items():
        keys = [k for ks in kinds.values() for k in ks]
        parts = ", ".join(f"{len(kinds[k])} {k}" for k in KINDS if kinds[k])
        lines.append(f"  {partition_name(family, dates_span(keys) or None)}: {parts}")
    if others:
        lines.append(f"  another run wrote {partition_names(others)} (found done when this run came to it)")
    if fenced:
        kept = "not replaced, a newer build is kept (its warning above says why)"
        lines.append(f"  superseded {partition_names(fenced)}: {kept}")
    lines += capped("  superseded ", newer_elsewhere)
    lines += capped("  failed   ", failed)
    why = f"before [daybreak] start_date {settings.daybreak().start_date}: a run builds no date before it"
    lines += [
        f"  left out {family} {dates_span(kinds['left out'])}: {why}; a partition there is kept as built"
        for family, kinds in counts.items()
        if kinds["left out"]
    ]
    for family, kinds in counts.items():
        if dates := kinds["not over yet"]:  # the rule alone, should the day have ended since
            lines.append(
                f"  not over yet {family} {dates_span(dates)}: {settings.not_over(dates[0]) or settings.NOT_OVER}"
            )
    lines += capped("  warning  ", warned)
    if zone is not None:
        lines += capped(
            "  waiting  ", [outcomes.waiting_line(cache, zone, src, waits) for src, waits in sorted(waiting.items())]
        )
    why = (
        "(luigid stopped answering before they ran)"
        if run.luigid
        else f"({run.stopped()}: not known)"
        if run.store_gone
        else "(a partition it reads failed or waits; or see --log-level INFO)"
    )
    lines += capped("  not run  ", blocked, why)
    by_limit = [(f"its task_limit {limit}", keys) for limit, keys in limited.items()]
    for name, keys in [("unhanded", unhanded), ("cooled", cooled), *lost.items(), *by_limit]:
        lines += capped("  not run  ", keys, outcomes.not_run_why(name))
    lines += capped("  not run  ", changed)
    if failed or blocked or unhanded or waiting or cooled or changed or limited or any(lost.values()):
        lines.append("  daybreak status shows every partition's state and reason; --log-level DEBUG shows everything")
    return [*run.errors.values(), *([run.luigid] if run.luigid else [])], "\n".join(lines)
