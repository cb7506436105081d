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

One more is not for speed: :func:`options_in_full` makes Luigi's command line take options only as
spelled in full (``CmdlineParser._build_parser``), since a task's ``--hotel`` is a prefix of the
``[hotels]`` settings' flags.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

from luigi.task_register import Register
from luigi.worker import KeepAliveThread


def _luigi_instance_cache(cls) -> dict | None:
    """Luigi's own instance cache as ``Register.__call__`` reads it for ``cls`` (None when disabled); a
    new dict after ``clear_instance_cache()``, whichever class it was called on."""
    return cls._Register__instance_cache


class CachedInstances(Register):
    """Luigi's task metaclass, with a faster path to the instance Luigi itself would return.

    Positional arguments, unhashable values and a disabled Luigi cache take Luigi's path."""

    _cache: ClassVar[dict] = {}
    _for: ClassVar[dict | None] = None  # the Luigi cache the entries above belong to (the dict itself)

    def __call__(cls, *args, **kwargs):
        luigi_cache = _luigi_instance_cache(cls)
        if args or luigi_cache is None:
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


def luigi_run() -> threading.Thread | None:
    """The Luigi run this process is in, if any: its worker's keep-alive thread, which Luigi starts when
    a run (``luigi.build``, the ``luigi`` command) begins scheduling and stops when its last task is done.
    tests/test_engine_luigi.py checks this against Luigi."""
    for thread in threading.enumerate():
        if isinstance(thread, KeepAliveThread):
            return thread
    return None


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
