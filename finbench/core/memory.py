"""Freed memory kept for reuse inside a command, not handed back to the system at once.

A run frees and allocates again, over and over, arrays of megabytes (a date's bars, a row
group of answers, a model's scored rows). glibc's malloc hands the top of its heap back to the
system as soon as 128 KiB of it is free, and mimalloc (pyarrow's memory pool) its pages 10 ms
after they are freed, so each new array is paid again in page faults: a year of 500 tickers
took 255,000-285,000 of them (1.5-3.3 s of system time on a virtual machine of two cores),
120,000-135,000 with both kept. The peak resident memory stays the same: what is kept is what
the command used a moment before.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3  # glibc's mallopt parameters
KEPT = {
    M_TRIM_THRESHOLD: 1 << 30,  # free bytes at the top of the heap before any goes back
    M_TOP_PAD: 256 << 20,       # grown by this much more than asked (address space only)
    M_MMAP_THRESHOLD: 32 << 20,  # blocks below this come from the heap, so they are kept
}


MIMALLOC = {"MIMALLOC_PURGE_DELAY": "-1"}  # never purge (read when pyarrow is first loaded)


def keep_freed_memory() -> bool:
    """Set glibc's malloc to keep freed memory (:data:`KEPT`) for the rest of this process,
    and mimalloc (:data:`MIMALLOC`, unless the environment says otherwise) when pyarrow is
    loaded after this. False where there is no glibc (another system or C library): its
    malloc is left as it is."""
    for name, value in MIMALLOC.items():
        os.environ.setdefault(name, value)
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # musl and others: no mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return all(mallopt(param, value) == 1 for param, value in KEPT.items())
