"""The one way the benchmarks run Luigi: the real command in a subprocess, timed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def timed_luigi(cfg: Path, *args: str, repo: Path = REPO) -> float:
    """Wall seconds of ``luigi --module tasks <args> --local-scheduler --no-lock`` with ``cfg`` as
    its luigi.cfg and the package of ``repo`` (another checkout: a baseline); a run that does not
    exit 0 stops the benchmark with its stderr."""
    cmd = [sys.executable, "-m", "luigi", "--module", "tasks", *args, "--local-scheduler", "--no-lock"]
    env = {**os.environ, "LUIGI_CONFIG_PATH": str(cfg), "PYTHONPATH": str(repo)}
    t0 = time.perf_counter()
    # from cfg's folder: ``python -m`` puts the working directory first on sys.path
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=cfg.parent)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args[:3])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall
