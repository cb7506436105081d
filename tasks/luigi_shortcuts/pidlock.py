"""Luigi's lock of a ``luigi`` command, kept per data root: keyed on the command line's text alone, the
same cron line over two data roots would refuse each other."""

from __future__ import annotations

import contextlib
import io
import re
import sys
from collections.abc import Callable

from tasks.luigi_shortcuts.messages import ALREADY_RUNNING

_REFUSED = re.compile(re.escape(ALREADY_RUNNING).replace(r"\{\}", r"\{([\d, ]*)\}"))


def set_by_user() -> bool:
    """Whether ``[core] lock_pid_dir`` is set in a config file or on the command line (``--lock-pid-dir``)."""
    import luigi.configuration
    from luigi.cmdline_parser import CmdlineParser

    config = luigi.configuration.get_config()
    if any(config.has_option("core", key) for key in ("lock_pid_dir", "lock-pid-dir")):
        return True
    parser = CmdlineParser.get_instance()
    return parser is not None and getattr(parser.known_args, "core_lock_pid_dir", None) is not None


def per_data_root(folder: Callable[[], tuple[str, str]]) -> None:
    """Make Luigi take a command's lock in ``folder()[0]``, the lock folder of data root ``folder()[1]``;
    a refusal is one line (exit 10). Idempotent."""
    from luigi import interface, lock

    acquire = lock.acquire_for
    if getattr(acquire, "per_data_root", False):
        return
    default = interface.core.lock_pid_dir._default

    def acquire_for(pid_dir, num_available=1, kill_signal=None):
        where = f"in lock folder {pid_dir} ([core] lock_pid_dir)"
        if pid_dir == default and not set_by_user():
            pid_dir, root = folder()
            where = f"on data root {root}"
        said = io.StringIO()
        with contextlib.redirect_stdout(said):
            taken = acquire(pid_dir, num_available, kill_signal)
        for line in said.getvalue().splitlines():
            refused = _REFUSED.fullmatch(line.strip())
            if refused is None:
                print(line)  # --take-lock's notes
                continue
            pids = refused.group(1).replace(" ", "")
            print(
                f"daybreak: error: another run of this command {where} is running (pid{'s' if ',' in pids else ''} "
                f"{pids}); this one ran nothing (exit 10): let that one end, then run the command again if it is "
                "still needed",
                file=sys.stderr,
                flush=True,
            )
        return taken

    acquire_for.per_data_root = True
    acquire_for.luigis = acquire
    lock.acquire_for = acquire_for
