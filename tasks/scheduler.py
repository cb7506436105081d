"""``daybreak scheduler``: Luigi's central scheduler (luigid) as Daybreak runs it.

luigid binds to every interface by default and has no authentication; here it binds to 127.0.0.1
unless told otherwise. Its state, logs and task history (SQLite) live in the data root's state folder
(``<data_root>/_state``; for a data root in a bucket, this host's ``[daybreak] cache_dir``):

    _state/luigid/state.pickle   scheduler state across restarts
    _state/luigid/logs/          luigid's log folder (luigid needs it to exist)
    _state/luigid/history.db     task history, browsable at /history
"""

from __future__ import annotations

import configparser
import os
import sys
from pathlib import Path

from tasks import settings


def scheduler_files(state: Path) -> dict[str, Path]:
    folder = state / "luigid"
    return {
        "folder": folder,
        "state": folder / "state.pickle",
        "logs": folder / "logs",
        "history": folder / "history.db",
    }


def luigid_command(address: str, port: int) -> tuple[list[str], dict[str, str]]:
    """The luigid command line and environment: a config file read after the user's (luigid reads
    ./luigi.cfg and /etc/luigi/luigi.cfg too) that turns SQLite task history on and gives luigid the
    resource caps in force here (``[resources]``, e.g. ``sftp``: the user's, else the package's)."""
    import luigi.configuration

    from tasks.storage.partitions import state_dir

    files = scheduler_files(state_dir(settings.data_uri()).resolve())
    files["logs"].mkdir(parents=True, exist_ok=True)
    config = luigi.configuration.get_config()
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_dict(
        {
            "scheduler": {"record_task_history": "true", "state_path": str(files["state"])},
            "task_history": {"db_connection": f"sqlite:///{files['history']}"},
            "resources": dict(config.items("resources")) if config.has_section("resources") else {},
        }
    )
    cfg = files["folder"] / "luigid.cfg"
    with open(cfg, "w") as fh:
        parser.write(fh)
    cmd = [sys.executable, "-c", "from luigi.cmdline import luigid; luigid()"]
    cmd += [
        "--address",
        address,
        "--port",
        str(port),
        "--state-path",
        str(files["state"]),
        "--logdir",
        str(files["logs"]),
    ]
    return cmd, {**os.environ, "LUIGI_CONFIG_PATH": str(cfg)}


def run(address: str = "127.0.0.1", port: int = 8082) -> int:
    cmd, env = luigid_command(address, port)
    print(f"luigid on http://{address}:{port} (visualiser; history at /history); state under {Path(cmd[-3]).parent}")
    os.execvpe(cmd[0], cmd, env)
    return 0  # not reached


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
    """The URL of the central scheduler that a ``luigi`` command without ``--local-scheduler`` would use
    when ``[core]`` names one (:data:`SCHEDULER_KEYS`); None otherwise, or when ``[core] local_scheduler``
    is on. A luigid that merely answers on Luigi's default address (localhost:8082) is not one the user
    chose: it may be anyone's, so it is never probed or joined."""
    import luigi.configuration
    import luigi.interface

    config = luigi.configuration.get_config()
    core = luigi.interface.core()
    if core.local_scheduler or not any(config.has_option("core", key) for key in SCHEDULER_KEYS):
        return None
    return core.scheduler_url or f"http://{core.scheduler_host}:{core.scheduler_port}/"
