"""Daybreak's tests (tests/conftest.py: the fixtures and the tiers).

Where ``PYTHONDONTWRITEBYTECODE`` is set, every pytest process compiled the test modules with pytest's
assertion rewriting again, and every ``luigi`` command a test starts compiled the package again: 5 s of a
fast run's collection in each process. Here they are compiled once into a folder of the machine's
temporary one (``sys.pycache_prefix``, the source tree mirrored under it), and still nothing is written
beside the sources. This package is imported before any test module, tests/conftest.py included."""

import os
import sys
import tempfile

if sys.dont_write_bytecode and not sys.pycache_prefix:
    sys.pycache_prefix = os.path.join(tempfile.gettempdir(), f"daybreak-pycache-{os.getuid()}")
    sys.dont_write_bytecode = False
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix  # the commands tests start: the same cache
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
