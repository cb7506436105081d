"""Where Daybreak leans on Luigi's internals, for speed, and nowhere else.

A status view or a three-year check instantiates each partition task many times, asks every settings
section for ``data_root`` thousands of times, and must know which Luigi run a question belongs to. Luigi
answers each of these through paths that cost tens of microseconds a call (every parameter resolved
against the config, ``dir(cls)`` walked for every instance). Each shortcut below gives Luigi's own answer,
faster; tests/test_luigi_shortcuts.py checks each one against Luigi's own path, so a Luigi upgrade that
changes what they rely on fails there, in one place:

* :class:`CachedInstances`: the task metaclass. Luigi caches one instance per (class, parameter values)
  but resolves the values first; a partition task is made with keyword arguments only, so the same
  keywords give the same instance. Luigi's ``Register.clear_instance_cache()`` (and disabling the cache)
  is honoured: the shortcut reads Luigi's cache attribute (``Register._Register__instance_cache``).
* :class:`FixedParams`: ``get_params`` computed once per class (Luigi walks ``dir(cls)`` for each
  instance); ``get_param_values`` without config lookups when every parameter is given by keyword.
* :class:`SnapshotSections` and :func:`snapshot`: the metaclass of the settings sections; inside the
  block, one instance per section.
* :func:`luigi_run`: the Luigi run this process is in, recognised by its worker's keep-alive thread
  (``luigi.worker.KeepAliveThread``), which Luigi starts when a run begins scheduling and stops after its
  last task. Luigi has no public "run started" event.

* :class:`LocalScheduler` and :func:`linear_local_scheduler`: Luigi's local scheduler (the one a run
  without ``luigid`` makes) prunes its whole task graph and walks every pending task's upstream on each
  ``get_work``, which makes a run of n tasks cost n² (a three-year booking-state chain: 3,285 tasks,
  16 ms of scheduling a date). This one gives the same answers with the prune at most once a second,
  the upstream walk only when a task is disabled (the walk only looks for disabled tasks) and, for a
  one-worker run, the next task taken from a heap of ready tasks (:class:`_IndexedState`).

Two modules beside these hold what Daybreak reads of Luigi's words rather than its code:
``messages.py`` (the texts of the log messages the run log and the error filters recognise, and Luigi's
list of config files) and ``usage.py`` (Luigi's usage errors made one line and exit 2, the value that
failed read from the frame of Luigi's ``_get_task_kwargs``); tests/test_luigi_messages.py makes Luigi
produce each.

One more is not for speed: :func:`options_in_full` makes Luigi's command line take options only as
spelled in full (``CmdlineParser._build_parser``), since a task's ``--hotel`` is a prefix of the
``[hotels]`` settings' flags. And :func:`default_of` reads a parameter's default as declared in the code
(``Parameter._default``), for the settings table of the docs (tasks/docs.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ClassVar

from luigi import interface
from luigi.task_register import Register
from luigi.worker import KeepAliveThread

from tasks import cores
from tasks.luigi_shortcuts.hosts import SUPERSEDED, many_hosts  # noqa: F401 - the adapter's names
from tasks.luigi_shortcuts.local_scheduler import LocalScheduler, linear_local_scheduler  # noqa: F401


def _luigi_instance_cache(cls) -> dict | None:
    """Luigi's own instance cache as ``Register.__call__`` reads it for ``cls`` (None when disabled); a
    new dict after ``clear_instance_cache()``, whichever class it was called on."""
    return cls._Register__instance_cache


class CachedInstances(Register):
    """Luigi's task metaclass, with a faster path to the instance Luigi itself would return.

    The path is taken only when every parameter is given by keyword: a parameter left out takes its
    value from the config or a ``--Family-param`` flag, which may change within a process, so Luigi's
    own path resolves it. Positional arguments, unhashable values and a disabled Luigi cache take
    Luigi's path too."""

    _cache: ClassVar[dict] = {}
    _for: ClassVar[dict | None] = None  # the Luigi cache the entries above belong to (the dict itself)

    def __call__(cls, *args, **kwargs):
        luigi_cache = _luigi_instance_cache(cls)
        if args or luigi_cache is None or not _every_param_given(cls, kwargs):
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


def _every_param_given(cls, kwargs: dict) -> bool:
    """Whether ``kwargs`` names every parameter of ``cls`` (and nothing else)."""
    params = cls.get_params()
    return len(kwargs) == len(params) and all(name in kwargs for name, _ in params)


class FixedParams:
    """Mixin for a ``luigi.Task``: its parameter list computed once, and keyword-only values resolved
    without the config (a value given for every parameter wins over any config default anyway)."""

    @classmethod
    def get_params(cls) -> list:
        if "_fixed_params" not in cls.__dict__:
            cls._fixed_params = super().get_params()
        return cls._fixed_params

    @classmethod
    def get_param_values(cls, params, args, kwargs) -> list:
        if not args and len(kwargs) == len(params) and all(name in kwargs for name, _ in params):
            values = [(name, param.normalize(kwargs[name])) for name, param in params]
            return [(name, tuple(v) if isinstance(v, list | set) else v) for name, v in values]
        return super().get_param_values(params, args, kwargs)


_snapshot: dict | None = None


@contextmanager
def snapshot() -> Iterator[None]:
    """Read each settings section once for the duration of the block (a status view or range check asks
    for ``data_root`` thousands of times; each read resolves every parameter of the section against the
    config). Settings changed inside the block are not seen until it ends. Reentrant."""
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
        if _snapshot is None or args or kwargs:
            return super().__call__(*args, **kwargs)
        if cls not in _snapshot:
            _snapshot[cls] = super().__call__()
        return _snapshot[cls]


def default_of(param):
    """The default a parameter declares in the code, whatever a config file sets (Luigi has no public
    name for it): what Luigi gives for the parameter when no config file sets it."""
    return param._default


def luigi_run() -> object | None:
    """The Luigi run this process is in, if any: its worker's keep-alive thread, which Luigi starts when
    a run (``luigi.build``, the ``luigi`` command) begins scheduling and stops when its last task is done;
    after it, while the run's summary is made, the run's worker (:func:`summarising`).
    tests/test_engine_luigi.py checks this against Luigi."""
    for thread in threading.enumerate():
        if isinstance(thread, KeepAliveThread):
            return thread
    return _SUMMARISED[-1] if _SUMMARISED else None


_SUMMARISED: list[object] = []  # workers whose run's summary is being made


@contextmanager
def summarising(worker: object):
    """The block belongs to ``worker``'s run, which has ended: Luigi makes its summary after its last task
    (twice: the text and the exit code), and the summary of hosts sharing a luigid asks whether each task
    another host ran is complete (tasks/luigi_shortcuts/hosts.py). Those questions share one pass of the
    freshness engine, as the run's own did, instead of listing the data root again for each."""
    _SUMMARISED.append(worker)
    try:
        yield
    finally:
        _SUMMARISED.remove(worker)


def options_in_full() -> None:
    """Make Luigi's command line take options only as spelled in full (argparse ``allow_abbrev=False``).

    Luigi parses the command line once before it knows the root task, and argparse then takes an option
    by any unambiguous prefix: a task's ``--hotel H1`` is a prefix of every ``--hotels-...`` setting flag,
    so with more than one ``[hotels]`` setting that parse stopped with "ambiguous option" (exit 2)."""
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


def checked_workers(host_name: Callable[[], str] | None = None) -> None:
    """Make the ``luigi`` command refuse a worker count below 1 (``--workers 0``: Luigi would start no
    worker, run nothing and exit 25 "not run") with one line and exit 2, as every ``daybreak`` command
    does (:func:`tasks.guard.check_count`): Luigi's ``_WorkerSchedulerFactory.create_worker``, which it
    calls before any task is checked, checks it first. A program's own ``luigi.build(workers=0)`` (no
    command line parsed) is left to Luigi. It also tells :class:`LocalScheduler` how many processes
    the worker has (a range's dates are ranked in as many stretches), and :mod:`tasks.cores` (they
    share this machine's cores: a build's threads). The worker reports ``host_name()`` (``[daybreak]
    host_name``) as its host to the scheduler, in its worker id and in luigid's task history, and its id
    is :func:`worker_id` in this process and the task processes it forks."""
    from luigi.cmdline_parser import CmdlineParser

    from tasks.guard import check_count

    factory = interface._WorkerSchedulerFactory
    if getattr(factory.create_worker, "checked", False):
        return
    create = factory.create_worker

    def create_worker(self, scheduler, worker_processes, assistant=False):
        if CmdlineParser.get_instance() is not None:
            check_count(worker_processes, "--workers")
        if isinstance(scheduler, LocalScheduler):  # it ranks a range's dates by the worker's processes
            scheduler.stretches = max(1, int(worker_processes))
        cores.share(worker_processes)  # a build's threads: the cores shared by the worker's processes
        made = create(self, scheduler, worker_processes, assistant)
        if host_name is not None:
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
    """Make Luigi worker ``made`` report host ``name``: Luigi's ``Worker.__init__`` takes
    ``socket.gethostname()`` for its ``host`` (sent with every ``get_work``: luigid's task history records
    it) and for the ``host=`` of its worker info and generated id (``[worker] id`` set by hand is kept).
    Called before the worker registers with the scheduler (its ``__enter__``, ``add``)."""
    if made.host == name:
        return
    made.host = name
    made._worker_info = [(k, name if k == "host" else v) for k, v in made._worker_info]
    if not made._config.id:
        made._id = made._generate_worker_id(made._worker_info)


def checked_ranges() -> None:
    """Make Luigi's ``RangeDaily`` (every ``RangeDailyBase``) check ``--start`` and ``--stop`` when it is
    made, as every ``daybreak`` command and ``RangeSingleRun`` do (:func:`tasks.guard.check_range`: each
    a date of ``DATES``, ``--start`` not after ``--stop``, at most ``MAX_RANGE_DAYS`` apart). Luigi would
    cut a range at ``days_back`` and run what is left, without a word. Event handlers cannot refuse
    (Luigi logs and drops what they raise), so ``__init__`` checks."""
    from luigi.tools.range import RangeDailyBase

    from tasks.guard import check_range

    init = RangeDailyBase.__init__
    if getattr(init, "checked", False):
        return

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        check_range(self.start, self.stop, type(self).__name__)

    __init__.checked = True
    RangeDailyBase.__init__ = __init__
