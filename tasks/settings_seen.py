"""When this host first saw each of its settings' current values. A dataset's settings are as new as the newest
of its own: an edit of another section, or of a setting its rules do not read, leaves them as they were, so a
host left behind on a rollout stays behind after an unrelated edit (docs/scale-out.md, "A rollout cannot be
undone"). One JSON file in ``[daybreak] cache_dir``; without it, a setting counts from the time of the config
files it was first seen under, as every setting did before."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

FILE = "settings_seen.json"  # {entry: {"value": text, "at": seconds}}
SETTING_OF_RULE = {"window_days": "rolling_window_days", "timezones": "reference_file"}  # where not the same name

_read_at: dict[Path, tuple[tuple[int, int], dict]] = {}  # path -> (its stat, its entries): read once per change


def path() -> Path:
    from tasks.settings import cache_dir

    return cache_dir() / FILE


def changed_at(entries: dict[str, str], files_at: Callable[[], float], group: str) -> float:
    """The newest time this host first saw each of ``entries`` (name -> value, each name starting with ``group``,
    a dataset) as it is now, recorded as first seen:

    - a value other than the one recorded: ``files_at()``, the config files' modification time (an edit);
    - a name not recorded, of a group with names recorded (a hotel's first extract adds its timezone): the
      newest time of those, for new input is no new settings; of a group without any: ``files_at()``;
    - a setting given on the command line (:func:`tasks.settings_check.given_on_command_line`), of a value
      other than the one recorded or not recorded, is as old as any (0.0) and not recorded: for one run.

    Nothing recorded (a folder that cannot be written): each counts from ``files_at()``."""
    from tasks.settings_check import given_on_command_line

    where = path()
    seen = _read(where)
    if all(seen.get(k, {}).get("value") == v for k, v in entries.items()):
        return max((seen[k]["at"] for k in entries), default=0.0)
    given = given_on_command_line()
    entries = {  # left out: a value given on the command line, other than the one recorded (for this run only)
        k: v for k, v in entries.items() if seen.get(k, {}).get("value") == v or _setting(k, group) not in given
    }
    try:
        with _locked(where):
            seen = dict(_read(where))  # again under the lock: another process may have recorded it
            known = [e["at"] for k, e in seen.items() if k.startswith(group + " ")]
            new = {}
            for k, v in entries.items():
                if k not in seen:
                    new[k] = {"value": v, "at": max(known) if known else files_at()}
                elif seen[k].get("value") != v:
                    new[k] = {"value": v, "at": files_at()}
            seen.update(new)
            if new:
                _write(where, seen)
    except OSError:
        return files_at()
    return max((seen[k]["at"] for k in entries), default=0.0)


def _setting(entry: str, group: str) -> str:
    """The key of the setting an entry's value comes from (``window_days``: ``rolling_window_days``)."""
    rule = entry.removeprefix(group + " ").split("[")[0]
    return SETTING_OF_RULE.get(rule, rule)


def _read(where: Path) -> dict:
    try:
        st = where.stat()
    except OSError:
        return {}
    stamp = (st.st_mtime_ns, st.st_ino)
    kept = _read_at.get(where)
    if kept is not None and kept[0] == stamp:
        return kept[1]
    try:
        seen = json.loads(where.read_text())
    except (OSError, ValueError):
        seen = {}
    if not isinstance(seen, dict):
        seen = {}
    seen = {k: e for k, e in seen.items() if isinstance(e, dict) and isinstance(e.get("at"), int | float)}
    _read_at[where] = (stamp, seen)
    return seen


def _write(where: Path, seen: dict) -> None:
    fd, tmp = tempfile.mkstemp(dir=where.parent, prefix=".settings_seen-")
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(seen, out, indent=1, sort_keys=True)
        os.replace(tmp, where)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _locked(where: Path) -> Iterator[None]:
    import fcntl

    where.parent.mkdir(parents=True, exist_ok=True)
    with open(where.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
