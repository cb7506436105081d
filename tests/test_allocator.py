"""The allocators a process gets by importing Daybreak first (tasks/__init__.py; docs/performance.md,
"A build on two cores" and "Memory of a build"), seen from a fresh process as the luigi command is."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.system

# A 512 KiB block allocated in a fresh process: does it come from the C library's heap (the ``[heap]``
# line of /proc/self/maps), or from a mapping of its own (glibc's default for a block over 128 KiB)?
PROBE = """
import ctypes
{prelude}
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
block = libc.malloc(512 << 10)
with open("/proc/self/maps") as fh:
    heap = [line.split()[0].split("-") for line in fh if line.rstrip().endswith("[heap]")]
print(any(int(lo, 16) <= block < int(hi, 16) for lo, hi in heap))
"""


def from_heap(prelude: str) -> bool:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(prelude=prelude)], capture_output=True, text=True, check=True
    ).stdout
    return out.strip() == "True"


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's mallopt, read from /proc")
def test_importing_daybreak_keeps_blocks_under_1_mib_on_the_c_librarys_heap():
    assert not from_heap("")  # the control: without Daybreak, a mapping of its own
    assert from_heap("import tasks")


@pytest.mark.skipif(sys.platform != "linux", reason="pyarrow's wheels include jemalloc on Linux")
def test_importing_daybreak_first_gives_arrow_jemalloc_with_one_arena():
    code = "import tasks, os, pyarrow as pa; print(pa.default_memory_pool().backend_name)"
    code += "; print(os.environ['JE_ARROW_MALLOC_CONF'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "jemalloc"
    assert {"narenas:1", "tcache:false"} <= set(out[1].split(","))
