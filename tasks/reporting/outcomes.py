"""What a run recorded of itself (:class:`Run`), and what became of the partitions it did not write, asked of
the store and the raw zone as the summary is made."""

from __future__ import annotations

import datetime as dt

from tasks.contract import printable
from tasks.reporting.names import first_line, key_of, label, partition_name, partition_names


class Run:
    """What this run recorded of itself (``runlog.wrote``, ``runlog.failed``) and the errors that ended it."""

    def __init__(self, records: list[dict]):
        from tasks.faults import Gone
        from tasks.luigi_shortcuts.hosts import UNFULFILLED_ELSEWHERE as OTHERS
        from tasks.luigi_shortcuts.remote import lost

        self.written = {r["wrote"]: r.get("warnings") or [] for r in records if "wrote" in r}
        self.failed = {r["failed"]: r.get("error", "") for r in records if "failed" in r}
        self.superseded = {r["superseded"] for r in records if "superseded" in r}
        # a task whose requirements were done, not complete when it was to run, here or on another host: (family, error)
        self.unfulfilled = [(r["unfulfilled"], r["error"]) for r in records if "unfulfilled" in r] + [*OTHERS.values()]
        self.unfulfilled_and_deps = repr([*(r.get("task_id") for r in records), *OTHERS, *self.unfulfilled])  # ids

        self.unchecked = {r["unchecked"]: r["name"] for r in records if "unchecked" in r}  # the store went
        self.gone = [Gone(*(r[f] for f in Gone._fields)) for r in records if "gone" in r]  # in order
        self.sides = dict.fromkeys(r.get("who", "") for r in records if "gone" in r)  # which failed, in order
        self.starts = [bool(r.get("at_start")) for r in records if "gone" in r]  # down before the run started
        self.luigid = lost()
        self.store_gone = bool(self.gone)  # the store is not asked again: the summary comes from the records

    @property
    def errors(self) -> dict[str, str]:  # the line of each store or server gone (tasks.faults.gone_lines)
        from tasks.faults import gone_lines

        return gone_lines(self.gone)

    def unreachable(self, exc: Exception) -> bool:
        """A store or server that failed while the summary asked it: named once; nothing more is asked."""
        from tasks.faults import STORAGE, Gone, fault_line, went_away

        if fault_line(exc) is None:
            return False
        gone = went_away(exc) or Gone("", fault_line(exc), STORAGE)
        self.gone.append(gone)
        self.sides.setdefault(gone.who)
        self.starts.append(gone.at_start)
        self.store_gone = True
        return True

    def stopped(self, when: str = "") -> str:
        """The side that stopped answering (``<when>``) or never answered this run, as the summary says it."""
        side = " and ".join(side for side in self.sides if side) or "the storage"
        return f"{side} {'was not answering when the run started' if all(self.starts) else 'stopped answering' + when}"


def changed_lines(run, watched: list, cache, built_elsewhere: set[str]) -> list[str]:
    """A line for each task Luigi did not run, here or on another host, because a partition it reads changed
    meanwhile, with its state; or was built by another host (``built_elsewhere``, luigid's done) and is not up to
    date here."""
    out: dict[str, None] = {}
    for family, error in run.unfulfilled:
        for task, ok in watched:
            elsewhere = task.task_id in built_elsewhere and task.task_id not in run.written
            if task.task_id not in error or not (ok or task.task_id in run.written or elsewhere):
                continue
            state = task.state(cache)
            if state.state not in ("ok", "newer"):  # newer: superseded by another host (its warning says so)
                done = "found it up to date" if ok else "built it"
                how = "was built by another host in this run" if elsewhere else f"changed after this run {done}"
                line = f"{family}: {partition_name(task.task_family, key_of(task))} {how}, now "
                out[line + state.state + (f": {state.reason}" if state.reason else "") + "; rerun"] = None
    return list(out)


def kind_now(task, cache, started: str, failed: list, waiting: dict, others: list, kept: list) -> str:
    """The kind of a partition this run neither wrote nor failed: failed elsewhere, up to date, waiting,
    superseded (built elsewhere meanwhile under settings this host never replaces: ``kept`` says why), not run."""
    family, key = task.task_family, key_of(task)
    record = task.store().read_failure(task.key)
    if record and record.get("failed_at", "") >= started:  # another host's run failed it meanwhile
        from tasks.settings import host_name

        on = f" (on host {record['host']})" if record.get("host") not in (None, host_name()) else ""
        failed.append(f"{label(task)}{on}: {first_line(record.get('error', ''))}")
        return "failed"
    if _ran(task, cache, started):  # up to date, nothing written by this run
        manifest = cache.summary(cache.store(task), task.key) or {}
        if manifest.get("finished_at", "") >= started:  # another run wrote it meanwhile
            others.append((family, key))
            return "written by another run"
        return "up to date"  # found up to date once its upstream was rebuilt to the same rows
    if folders := _missing(task, cache):
        for source, date in folders:
            waiting[source].append((date, family, key))
        return "waiting"
    state = task.state(cache)
    if state.state == "newer":  # another host built it meanwhile, under settings this host never replaces
        kept.append(f"{label(task)}: {state.reason}")
        return "superseded"
    return "not run"


def _ran(task, cache, started: str) -> bool:
    """Whether the partition is up to date now (the raw zone gone: whether this run wrote its manifest)."""
    from tasks.faults import fault_line

    try:
        return task.state(cache).ok
    except Exception as exc:
        if fault_line(exc) is None:
            raise
        return (cache.summary(cache.store(task), task.key) or {}).get("finished_at", "") >= started


def _missing(task, cache) -> frozenset:
    """The raw folders the partition waits for; none known when the raw zone cannot be reached."""
    from tasks.faults import fault_line

    try:
        return cache.blocked(task).missing
    except Exception as exc:
        if fault_line(exc) is None:
            raise
        return frozenset()


def waiting_line(cache, zone, source: str, waits: list[tuple[dt.date, str, object]]) -> str:
    """One line per raw source: the folders not there yet and the partitions waiting."""
    folders = sorted({d for d, _, _ in waits})
    first = f"{zone.describe()}/{zone.folder_relpath(source, folders[0])}/"
    if len(folders) == 1:
        where = f"folder {first}"
    elif (folders[-1] - folders[0]).days + 1 == len(folders):  # every day between
        where = f"folders {first} .. {folders[-1]}/ ({len(folders)})"
    elif len(folders) <= 4:
        where = "folders " + ", ".join([first, *(f"{d}/" for d in folders[1:])])
    else:
        where = f"folders {first} .. {folders[-1]}/ ({len(folders)}, not every day between)"
    why = {d: cache.absent_because(zone, source, d) for d in folders}
    notes = "; ".join(dict.fromkeys(f"{printable(r.name)} is {r.reason}" for r in why.values() if r))
    state = "not there yet" if not notes else f"not read: {notes}" if all(why.values()) else f"not there yet; {notes}"
    state = cache.empty_root(zone) or state  # the whole raw root holds nothing: a typo, or nothing sent yet
    there = {d: note for d in folders if (note := cache.without_file(zone, source, d))}  # made before its files
    if len(there) == len(folders):
        state = there[folders[0]]
    elif there:
        state += "".join(f"; {d}/ {note}" for d, note in there.items())
    return f"for raw {where} ({state}): {partition_names([(f, k) for _, f, k in waits])}"


_NOT_RUN_WHY = {
    "unhanded": "this run did not get to build it, and it reads no partition: luigid gave it to another host (its "
    "/history says how that run ended), or --log-level INFO says why; rerun",
    "cooled": "luigid counts it done by a run less than [scheduler] stable_done_cooldown_secs ago, this host's or "
    "another's, but this host finds it stale: deleted or changed since, or built under other rules? Rerun in a few "
    "seconds",
    "FAILED": "the host building it disconnected from luigid mid-build, and so did the host that took it over: rerun",
    "DISABLED": "the host building it disconnected from luigid mid-build, and luigid disabled it: [scheduler] "
    "retry_count; re-enable it in luigid's visualiser, then rerun",
}


def not_run_why(kind: str) -> str:
    """Why the summary's partitions of ``kind`` were not run: not handed to this host (``unhanded``), done in
    luigid seconds ago (``cooled``), left by lost hosts (luigid's ``FAILED``, ``DISABLED``), or left by a range's
    ``its task_limit N``."""
    why = _NOT_RUN_WHY.get(kind) or f"RangeDaily left it for the next run, {kind}: rerun the same command"
    return f"({why})"
