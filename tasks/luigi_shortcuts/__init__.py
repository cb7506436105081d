"""Where Daybreak leans on Luigi's internals, and nowhere else: shortcuts that give Luigi's own answer
faster, a linear-time local scheduler, and command-line patches that refuse bad input with one line.
tests/test_luigi_shortcuts.py checks each against Luigi's own path (docs/architecture.md)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ClassVar

from luigi import interface
from luigi.task_register import Register
from luigi.worker import KeepAliveThread

from tasks import cores
from tasks.luigi_shortcuts.hosts import many_hosts  # noqa: F401 - the adapter's names
from tasks.luigi_shortcuts.local_scheduler import LocalScheduler, linear_local_scheduler  # noqa: F401


class CachedInstances(Register):
    """Luigi's task metaclass, returning Luigi's cached instance without resolving parameters when every
    parameter is given by keyword (one left out may come from a config that changes)."""

    _cache: ClassVar[dict] = {}
    _for: ClassVar[dict | None] = None  # the Luigi cache the entries above belong to (the dict itself)

    def __call__(cls, *args, **kwargs):
        luigi_cache = cls._Register__instance_cache  # None when disabled, new after clear_instance_cache()
        if args or luigi_cache is None or not _every_param_given(cls.get_params(), kwargs):
            return super().__call__(*args, **kwargs)
        if CachedInstances._for is not luigi_cache:  # Luigi's cache was cleared: so is this one
            CachedInstances._cache = {}
            CachedInstances._for = luigi_cache
        try:
            key = (cls, *sorted(kwargs.items()))
            return CachedInstances._cache[key]
        except KeyError:
            task = CachedInstances._cache[key] = super().__call__(**kwargs)
            return task
        except TypeError:  # an unhashable or unorderable value
            return super().__call__(**kwargs)


def _every_param_given(params: list, kwargs: dict) -> bool:
    """Whether ``kwargs`` names every one of ``params`` (and nothing else)."""
    return len(kwargs) == len(params) and all(name in kwargs for name, _ in params)


class FixedParams:
    """Mixin for a ``luigi.Task``: ``get_params`` computed once per class, and values given for every
    parameter by keyword resolved without the config."""

    @classmethod
    def get_params(cls) -> list:
        if "_fixed_params" not in cls.__dict__:
            cls._fixed_params = super().get_params()
        return cls._fixed_params

    @classmethod
    def get_param_values(cls, params, args, kwargs) -> list:
        if not args and _every_param_given(params, kwargs):
            values = [(name, param.normalize(kwargs[name])) for name, param in params]
            return [(name, tuple(v) if isinstance(v, list | set) else v) for name, v in values]
        return super().get_param_values(params, args, kwargs)


_snapshot: dict | None = None


@contextmanager
def snapshot() -> Iterator[None]:
    """Read each settings section once for the duration of the block. Reentrant."""
    global _snapshot
    if _snapshot is not None:
        yield
        return
    _snapshot = {}
    try:
        yield
    finally:
        _snapshot = None


class SnapshotSections(Register):
    """Luigi's metaclass for the settings sections; inside :func:`snapshot`, one instance per section."""

    def __call__(cls, *args, **kwargs):
        taken = _snapshot  # once: another thread may end the snapshot meanwhile
        if taken is None or args or kwargs:
            return super().__call__(*args, **kwargs)
        if cls not in taken:
            taken[cls] = super().__call__()
        return taken[cls]


def default_of(param):
    """The default ``param`` declares in the code, whatever a config file sets."""
    return param._default


def luigi_run() -> object | None:
    """The Luigi run this process is in, if any: its worker's keep-alive thread (Luigi has no "run started"
    event), or while its summary is made, the run's worker."""
    for thread in threading.enumerate():
        if isinstance(thread, KeepAliveThread):
            return thread
    return _SUMMARISED[-1] if _SUMMARISED else None


def run_in_progress() -> bool:
    """Whether a Luigi run of this process is scheduling or running tasks, not only making its summary."""
    return any(isinstance(thread, KeepAliveThread) for thread in threading.enumerate())


_SUMMARISED: list[object] = []  # workers whose run's summary is being made


def summarising_now() -> bool:
    """Whether this process is making a run's summary (its questions are the run's, asked again)."""
    return bool(_SUMMARISED)


@contextmanager
def summarising(worker: object):
    """The block belongs to ``worker``'s ended run, so that the summary's completeness questions share one
    pass of the freshness engine, as the run's own did."""
    _SUMMARISED.append(worker)
    try:
        yield
    finally:
        _SUMMARISED.remove(worker)


def options_in_full() -> None:
    """Make Luigi's command line take options only as spelled in full: a task's ``--hotel`` is a
    prefix of every ``--hotels-...`` setting flag, which argparse would call ambiguous."""
    from luigi.cmdline_parser import CmdlineParser

    build = CmdlineParser._build_parser
    if getattr(build, "options_in_full", False):
        return

    def build_parser(root_task=None, help_all=False):
        parser = build(root_task, help_all)
        parser.allow_abbrev = False
        return parser

    build_parser.options_in_full = True
    CmdlineParser._build_parser = staticmethod(build_parser)


def checked_workers(host_name: Callable[[], str], check_settings: Callable[[], None]) -> None:
    """Make the ``luigi`` command refuse ``--workers`` below 1 (exit 2), check the settings first, and
    report the worker's process count, host (``host_name()``) and id (:func:`worker_id`)."""
    from luigi.cmdline_parser import CmdlineParser

    from tasks.guard import check_count, stop_on_sigterm

    factory = interface._WorkerSchedulerFactory
    if getattr(factory.create_worker, "checked", False):
        return
    create = factory.create_worker

    def create_worker(self, scheduler, worker_processes, assistant=False):
        if CmdlineParser.get_instance() is not None:
            check_count(worker_processes, "--workers")
            check_settings()
            stop_on_sigterm()  # the luigi command: SIGTERM stops the run as Ctrl-C does
        if isinstance(scheduler, LocalScheduler):  # it ranks a range's dates by the worker's processes
            scheduler.stretches = max(1, int(worker_processes))
        cores.share(worker_processes)
        made = create(self, scheduler, worker_processes, assistant)
        name_host(made, host_name())
        global _worker_id
        _worker_id = made._id
        return made

    create_worker.checked = True
    factory.create_worker = create_worker


_worker_id = ""  # the Luigi worker of this process (or of the process that forked it); '' outside a run


def worker_id() -> str:
    """The id of the Luigi worker this process runs tasks for (``Worker(salt=..., host=..., pid=...)``)."""
    return _worker_id


def name_host(made, name: str) -> None:
    """Make Luigi worker ``made`` report host ``name`` instead of ``socket.gethostname()``."""
    if made.host == name:
        return
    made.host = name
    made._worker_info = [(k, name if k == "host" else v) for k, v in made._worker_info]
    if not made._config.id:
        made._id = made._generate_worker_id(made._worker_info)


def checked_ranges() -> None:
    """Make every ``RangeDailyBase`` check ``--start``, ``--stop`` and ``--of`` when made (Luigi would cut
    the range at ``days_back`` silently; an event handler cannot refuse)."""
    from luigi.tools.range import RangeDailyBase

    from tasks.guard import check_of, check_range

    init = RangeDailyBase.__init__
    if getattr(init, "checked", False):
        return

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        check_range(self.start, self.stop, type(self).__name__)
        if self.param_name is None and isinstance(self.of, type):  # the date: its first positional parameter
            check_of(type(self).__name__, self.of, self.of_params, self.start, self.stop)

    __init__.checked = True
    RangeDailyBase.__init__ = __init__


def failed_checks(record: Callable[[object, BaseException], None]) -> None:
    """Call ``record(task, error)`` with what a task's ``complete()`` or ``requires()`` raises while Luigi's
    worker schedules it (of a ``complete()`` Luigi keeps only the traceback's text). Idempotent."""
    import luigi
    from luigi import worker

    check = worker.check_complete_cached
    if getattr(check, "record", None) is record:
        return
    check = getattr(check, "luigis", check)

    def check_complete_cached(task, completion_cache=None):
        try:
            return check(task, completion_cache)
        except Exception as exc:  # the worker catches it: its traceback, then "failed scheduling"
            record(task, exc)
            raise

    check_complete_cached.record, check_complete_cached.luigis = record, check
    worker.check_complete_cached = check_complete_cached
    luigi.Task.event_handler(luigi.Event.BROKEN_TASK)(record)
