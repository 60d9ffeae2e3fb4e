"""Steadier CPU timings: ask the C allocator to keep freed memory in the process (Linux, glibc).

Applied by ``labkit.start`` (and in worker processes). glibc's malloc hands large freed blocks back to the operating
system and page-faults them in again at the next allocation. PyTorch frees and reallocates
activations, gradients and optimizer temporaries of the same sizes every step, so on machines
where page faults are slow (small virtual machines especially) a step's time then swings
from run to run, and a short run looks slower than a long one. Keeping freed memory in
the process removes that noise at the cost of holding on to memory the process has already used.
PyTorch's CPU performance guide suggests a caching allocator (jemalloc, tcmalloc) for the same
reason; this needs no extra library. Set ``LABKIT_MALLOPT=0`` to leave the allocator alone.
"""

from __future__ import annotations

import ctypes
import sys

from . import environment

_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3  # from glibc's malloc.h
_SETTINGS = {_M_MMAP_THRESHOLD: 1 << 30, _M_TRIM_THRESHOLD: (1 << 31) - 1, _M_TOP_PAD: 256 << 20}

applied = False


def keep_freed_memory() -> bool:
    """Apply the settings once; True if the allocator accepted them (glibc on Linux), else False."""
    global applied
    if applied:
        return True
    if not environment.get("LABKIT_MALLOPT") or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # elsewhere than glibc (musl, say): nothing to tune
        return False
    applied = all(mallopt(option, value) == 1 for option, value in _SETTINGS.items())
    return applied
