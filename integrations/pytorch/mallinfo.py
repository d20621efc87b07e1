"""Bytes in use by the process, from glibc's allocator (no torch import here).

Contract: live_bytes() is mallinfo2().uordblks + hblkhd. It is the exact
number of bytes in use (tensor data plus malloc chunk headers and C++ objects
such as autograd nodes) when the process runs with one malloc arena and a
fixed mmap threshold; ensure_malloc_env() re-execs the script under those
settings before torch is imported. Python's small objects live in pymalloc
arenas, which are mmapped directly and are not counted. Run torch with
torch.set_num_threads(1) so that no worker thread allocates behind the scenes.
"""
import ctypes
import os
import sys

# glibc ignores a fixed mmap threshold above 32 MiB on 64-bit
# (HEAP_MAX_SIZE / 2); a fixed one also stops the threshold from adapting.
MALLOC_ENV = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": str(32 * 1024 * 1024),
              # Freed chunks parked in the per-thread cache would count as in use.
              "GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"}


def ensure_malloc_env() -> None:
    """Re-executes this script with MALLOC_ENV unless already set."""
    if all(os.environ.get(k) == v for k, v in MALLOC_ENV.items()):
        return
    os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, **MALLOC_ENV))


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                 "uordblks", "fordblks", "keepcost")]


_libc = ctypes.CDLL("libc.so.6")
_libc.mallinfo2.restype = _MallInfo2


def live_bytes() -> int:
    m = _libc.mallinfo2()
    return m.uordblks + m.hblkhd
