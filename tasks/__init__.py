"""Daybreak: business-date partitioned pipelines for QSR and hotel data on Luigi. ``luigi --module tasks``
registers every task family; otherwise no Luigi loads until a family is named (``tasks.StgQsrPos``)."""

import importlib
import os
import sys
import warnings

__version__ = "0.1.0"
JEMALLOC_CONF = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,narenas:1,tcache:false"

# allocator settings, read at the first allocation (docs/performance.md, "Memory of a build")
if sys.platform == "linux":  # where pyarrow's wheels include jemalloc
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
    os.environ.setdefault("JE_ARROW_MALLOC_CONF", JEMALLOC_CONF)
    try:
        import ctypes

        if os.confstr("CS_GNU_LIBC_VERSION"):
            libc = ctypes.CDLL(None)
            libc.mallopt(-8, 1)  # M_ARENA_MAX
            libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD
            libc.mallopt(-1, 128 << 20)  # M_TRIM_THRESHOLD
    except (OSError, ValueError, AttributeError):
        pass
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# a LUIGI_CONFIG_PATH that names no file is Daybreak's one line (exit 2), not first Luigi's warning
warnings.filterwarnings("ignore", message=r"Config file does not exist: ")
# Luigi reads these [core] keys itself, and its ``core`` section then warns they are "not consumed"
warnings.filterwarnings(
    "ignore",
    message=r"The configuration contains the parameter '(rpc[-_](retry[-_]attempts|retry[-_]wait|log[-_]retries|"
    r"connect[-_]timeout)|default[-_]scheduler[-_](host|port|url))' with value .* that is not consumed by the task "
    r"'core'",
)

from tasks.catalogue import TASK_MODULES  # noqa: E402  (no Luigi)


def register() -> None:
    """Install Daybreak's checks and behaviour into Luigi (docs/architecture.md), then every task family."""
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
    from tasks.luigi_shortcuts.pidlock import per_data_root
    from tasks.luigi_shortcuts.remote import checked_remote_scheduler
    from tasks.luigi_shortcuts.runners import long_lived_task_processes
    from tasks.reporting import checks
    from tasks.settings import apply_luigi_defaults, host_name, lock_folder
    from tasks.settings_check import check_config

    check_config()
    apply_luigi_defaults()  # before Luigi reads [retcode]
    options_in_full()
    linear_local_scheduler()
    checked_workers(host_name, checked_run)
    checked_ranges()
    many_hosts()
    checked_remote_scheduler()
    per_data_root(lock_folder)
    long_lived_task_processes()
    usage.install()
    faults.install()
    checks.install()
    faults.check_stores()
    for module in TASK_MODULES:
        importlib.import_module(module)


def checked_run() -> None:
    """What a ``luigi`` run checks before it schedules a task: the command line's settings and the hotels list."""
    from tasks import reference
    from tasks.settings_check import check_config

    check_config(command_line=True)
    reference.hotels()


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
