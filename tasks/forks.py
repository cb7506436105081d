"""What a task process resets before its task: after a fork, and before each task after the first in a
process that runs many (tasks/luigi_shortcuts/runners.py: a run's worker processes, ``--workers`` 2 and
more). Imports nothing of Daybreak and no Luigi, so any layer registers here.
"""

from __future__ import annotations

import os
from collections.abc import Callable

_HOOKS: list[Callable[[], None]] = []


def before_each_task(hook: Callable[[], None]) -> Callable[[], None]:
    """Run ``hook`` in every process forked from this one, at the fork, and before each later task of a
    process that runs several (:func:`next_task`). Returns ``hook`` (usable as a decorator)."""
    _HOOKS.append(hook)
    os.register_at_fork(after_in_child=hook)
    return hook


def next_task() -> None:
    """Called by a process that has run a task and is about to run another one: every hook, as if the
    process had just been forked for the new task."""
    for hook in _HOOKS:
        hook()
