"""Daybreak's tests (tests/conftest.py: the fixtures and the tiers). This package is imported before any
test module, tests/conftest.py included.

The fast tier (``DAYBREAK_TEST_TIER=fast``) keeps its temporary files (every test's raw zone and data
root) on the machine's RAM disk when ``TMPDIR`` names no folder of its own and the RAM disk has 2 GiB free:
its Luigi runs write and fsync thousands of small partition files, and a wait for the disk is no part of
what they check.

Where ``PYTHONDONTWRITEBYTECODE`` is set, every pytest process compiled the test modules with pytest's
assertion rewriting again, and every ``luigi`` command a test starts compiled the package again: 5 s of a
fast run's collection in each process. Here they are compiled once into a folder of the temporary one
(``sys.pycache_prefix``, the source tree mirrored under it), and still nothing is written beside the sources.
"""

import os
import shutil
import sys
import tempfile

RAM_DISK = "/dev/shm"


def _roomy(folder: str, least: int = 2 << 30) -> bool:
    """Whether ``folder`` is writable with ``least`` bytes free (a container's RAM disk may hold 64 MB)."""
    try:
        return os.access(folder, os.W_OK) and shutil.disk_usage(folder).free >= least
    except OSError:
        return False


if os.environ.get("DAYBREAK_TEST_TIER") == "fast" and "TMPDIR" not in os.environ and _roomy(RAM_DISK):
    os.environ["TMPDIR"] = RAM_DISK  # this process's tmp_path, and the commands tests start
    tempfile.tempdir = None  # read again from TMPDIR

if sys.dont_write_bytecode and not sys.pycache_prefix:
    sys.pycache_prefix = os.path.join(tempfile.gettempdir(), f"daybreak-pycache-{os.getuid()}")
    sys.dont_write_bytecode = False
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix  # the commands tests start: the same cache
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
