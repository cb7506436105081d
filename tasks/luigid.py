"""``daybreak scheduler``: Luigi's central scheduler (luigid) as Daybreak runs it (docs/scale-out.md):
on 127.0.0.1 unless told otherwise, as luigid has no authentication."""

from __future__ import annotations

import configparser
import os
import socket
import sys
import time
from pathlib import Path

from tasks import settings


def luigid_command(address: str, port: int) -> tuple[list[str], dict[str, str]]:
    """The luigid command line and environment: a config file read after the user's, with SQLite task
    history and the resource caps in force here."""
    import luigi.configuration

    from tasks.storage.partitions import state_dir

    folder = state_dir(settings.data_uri()).resolve() / "luigid"
    state, logs = folder / "state.pickle", folder / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    config = luigi.configuration.get_config()
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_dict(
        {
            "scheduler": {"record_task_history": "true", "state_path": str(state)},
            "task_history": {"db_connection": f"sqlite:///{folder / 'history.db'}"},
            "resources": dict(config.items("resources")) if config.has_section("resources") else {},
        }
    )
    cfg = folder / "luigid.cfg"
    with open(cfg, "w") as fh:
        parser.write(fh)
    cmd = [sys.executable, "-c", "from luigi.cmdline import luigid; luigid()", "--address", address]
    cmd += ["--port", str(port), "--state-path", str(state), "--logdir", str(logs)]
    return cmd, {**os.environ, "LUIGI_CONFIG_PATH": str(cfg)}


def run(address: str = "127.0.0.1", port: int = 8082) -> int:
    """Become luigid (same process id: a service manager's signals reach it), and say where it listens."""
    from tasks.guard import fail

    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(address, address)
    if _answers(host, port):
        fail(f"scheduler: {address} port {port} is in use (another luigid?); give --port")
    cmd, env = luigid_command(address, port)
    shown = f"[{address}]" if ":" in address else address
    line = (
        f"daybreak scheduler: luigid listening on http://{shown}:{port} (visualiser, and /history), "
        f"state in {Path(cmd[-3]).parent}"
    )
    sys.stdout.flush()
    _announce_when_up(os.getpid(), host, port, line)
    os.execvpe(cmd[0], cmd, env)
    return 0  # not reached


def _answers(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


def _announce_when_up(luigid_pid: int, host: str, port: int, line: str, timeout: float = 60) -> None:
    """A detached process that prints ``line`` once luigid (``luigid_pid``) accepts connections."""
    child = os.fork()
    if child:
        os.waitpid(child, 0)
        return
    try:
        if os.fork() == 0:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    os.kill(luigid_pid, 0)
                except OSError:
                    break
                if _answers(host, port):
                    print(line, flush=True)
                    break
                time.sleep(0.1)
    finally:
        os._exit(0)


# [core] settings that name a central scheduler (Luigi's own names, old and new)
SCHEDULER_KEYS = (
    "default_scheduler_host",
    "default_scheduler_port",
    "default_scheduler_url",
    "scheduler_host",
    "scheduler_port",
    "scheduler_url",
)


def central_scheduler() -> str | None:
    """The URL of the central scheduler ``[core]`` names for a ``luigi`` command without
    ``--local-scheduler``; None otherwise (a luigid on Luigi's default address is never joined)."""
    import luigi.configuration
    import luigi.interface

    config = luigi.configuration.get_config()
    core = luigi.interface.core()
    if core.local_scheduler or not any(config.has_option("core", key) for key in SCHEDULER_KEYS):
        return None
    return core.scheduler_url or f"http://{core.scheduler_host}:{core.scheduler_port}/"
