"""Daybreak: business-date partitioned pipelines for QSR and hotel data on Luigi.

Importing this package under Luigi (``luigi --module tasks <Family>``, or any program that imported
Luigi first) registers every task family. Without Luigi loaded it registers nothing yet, so the
pure parts (``tasks.freshness``, ``tasks.transforms``, ``tasks.storage.partitions``) load no Luigi; a task
family named as an attribute (``tasks.StgQsrPos``) loads them all.
"""

import importlib
import os
import sys

__version__ = "0.1.0"
JEMALLOC_CONF = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,narenas:1,tcache:false"

# Arrow's C++ allocations go to jemalloc rather than pyarrow's default (mimalloc): a partition build's
# transient buffers then cost about half the resident memory at the same speed (docs/performance.md).
# Arrow reads this when it first allocates, so it applies where Daybreak is imported before pyarrow
# allocates anything (the luigi command, the daybreak command); a value already set is kept.
# jemalloc's own settings (Arrow's copy of it reads JE_ARROW_MALLOC_CONF, also at its first allocation,
# a value already set kept): pages a build frees are reused by its next steps and by the next date's
# build for about a second, then purged by jemalloc's background thread (returned to the system, not
# left "muzzy"): a process between builds gives its memory back, and one building date after date
# does not fault every page in again (docs/performance.md, "Memory of a build").
# One arena (``narenas:1``): a build checks a folder on two threads (tasks/qsr.py), and a thread's own
# arena would keep the pages that thread freed from the next steps of the build, on the main thread.
# No thread caches (``tcache:false``), for the same reason: a build's dozen threads each kept small
# blocks they freed (a build's peak 0.2x its table higher, no faster; docs/performance.md).
if sys.platform == "linux":  # where pyarrow's wheels include jemalloc
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
    os.environ.setdefault("JE_ARROW_MALLOC_CONF", JEMALLOC_CONF)
    # the same for the C library's malloc (numpy's arrays, Python's larger objects such as a raw file's
    # bytes; glibc's, other C libraries are left alone): its threads share one arena, not one each
    # (M_ARENA_MAX); a block under 1 MiB comes from the heap, not from a mapping of its own that is
    # faulted in page by page and unmapped when freed (M_MMAP_THRESHOLD), and the heap keeps up to
    # 128 MiB it has freed for the next blocks (M_TRIM_THRESHOLD): a build's numpy steps then fault a
    # quarter of the pages they did and take a tenth less CPU; larger blocks are still mapped, and given
    # back when freed, so the peak of a build stays where it was (docs/performance.md, "Memory of a build")
    try:
        import ctypes

        if os.confstr("CS_GNU_LIBC_VERSION"):
            libc = ctypes.CDLL(None)
            libc.mallopt(-8, 1)  # M_ARENA_MAX, in glibc's malloc.h
            libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD
            libc.mallopt(-1, 128 << 20)  # M_TRIM_THRESHOLD
    except (OSError, ValueError, AttributeError):
        pass
# numpy's OpenBLAS starts a thread per core when numpy is imported (0.05 to 0.1 s of CPU at every
# start, inherited by nothing: forked tasks have no threads); Daybreak does no linear algebra. Read
# when numpy is first imported, so, as above, where Daybreak is imported first; a value set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from tasks.catalogue import TASK_MODULES  # noqa: E402  (no Luigi)


def register() -> None:
    """Luigi's exit codes and uncapped ranges (tasks/settings.py), then every task family."""
    import luigi.tools.range  # noqa: F401  (RangeDaily on the command line, even with autoload_range off)

    from tasks import faults
    from tasks.luigi_shortcuts import (
        checked_ranges,
        checked_workers,
        linear_local_scheduler,
        many_hosts,
        options_in_full,
        usage,
    )
    from tasks.luigi_shortcuts.remote import checked_remote_scheduler
    from tasks.luigi_shortcuts.runners import long_lived_task_processes
    from tasks.settings import apply_luigi_defaults, host_name
    from tasks.settings_check import check_config

    check_config()  # luigi.cfg: a % Luigi cannot read, an unknown key, a bad value: exit 2, naming file and key
    apply_luigi_defaults()  # exit codes and uncapped ranges, before Luigi reads [retcode]
    options_in_full()  # `--hotel` is not an abbreviation of the [hotels] settings' flags
    linear_local_scheduler()  # a run without luigid schedules in linear time (tasks/luigi_shortcuts/)
    checked_workers(host_name)  # --workers 0: one line and exit 2, as every daybreak command (tasks/guard.py)
    checked_ranges()  # RangeDaily's dates and length: the same check as every daybreak command
    many_hosts()  # hosts sharing a luigid wait for each other and exit as one host would
    checked_remote_scheduler()  # a luigid that does not answer: one line, exit 2 at the start, 30 mid-run
    long_lived_task_processes()  # --workers 2+: a partition task runs in a process that runs many
    usage.install()  # Luigi's usage errors: one line and exit 2 (tasks/luigi_shortcuts/usage.py)
    faults.install()  # a store or server error: one line and exit 30 (tasks/faults.py)
    faults.check_stores()  # a bucket that does not answer: exit 2 before any partition runs
    for module in TASK_MODULES:
        importlib.import_module(module)


def __getattr__(name: str):
    if name[:1].isupper():  # a task family (``StgQsrPos``); a submodule's name is lower case
        register()
        from tasks.catalogue import families

        found = families()
        if name in found:
            return found[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if "luigi" in sys.modules:
    register()
