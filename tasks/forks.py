"""What a task process resets before its task: after a fork, and before each later task of a process
that runs many. Imports nothing of Daybreak and no Luigi, so any layer registers here."""

from __future__ import annotations

import os
from collections.abc import Callable

_HOOKS: list[Callable[[], None]] = []


def before_each_task(hook: Callable[[], None]) -> Callable[[], None]:
    """Run ``hook`` at every fork and before each later task of a process (a decorator)."""
    _HOOKS.append(hook)
    os.register_at_fork(after_in_child=hook)
    return hook


def next_task() -> None:
    """Run every hook before a process's next task, as if it had just been forked."""
    for hook in _HOOKS:
        hook()
