"""The one way the benchmarks run Luigi: the real command in a subprocess, timed."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Every process a benchmark starts keeps the bytecode of the modules it imports, as an installed package does and
# as the peers' site-packages do: a machine that sets PYTHONDONTWRITEBYTECODE would make each Daybreak command
# compile its sources again (about 0.2 s of CPU a process), a cost no user's installation has.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(), "daybreak-bench-pycache"))


def rotated(systems, rep: int):
    """``systems`` in the order of repetition ``rep``: each system takes each place in turn, so that a
    change of the machine's load does not always hit the same one."""
    k = rep % len(systems)
    return systems[k:] + systems[:k]


LAST_CPU = [0.0]  # CPU seconds (user + system) of the last timed_luigi command: steadier than wall on a busy machine


def children_cpu() -> float:
    """User + system CPU seconds of every finished child process (and the children they waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_luigi(cfg: Path, *args: str, repo: Path = REPO) -> float:
    """Wall seconds of ``luigi --module tasks <args> --local-scheduler --no-lock`` with ``cfg`` as
    its luigi.cfg and the package of ``repo`` (another checkout: a baseline); a run that does not
    exit 0 stops the benchmark with its stderr."""
    cmd = [sys.executable, "-m", "luigi", "--module", "tasks", *args, "--local-scheduler", "--no-lock"]
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(repo)}
    t0, cpu0 = time.perf_counter(), children_cpu()
    # from cfg's folder: ``python -m`` puts the working directory first on sys.path
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=cfg.parent)
    wall = time.perf_counter() - t0
    LAST_CPU[0] = children_cpu() - cpu0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args[:3])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall
