"""Freed memory kept for reuse inside a command, not handed back to the system at once.

A run frees and allocates again, over and over, arrays of megabytes (a date's bars, a row
group of answers, a model's scored rows). glibc's malloc hands the top of its heap back to the
system as soon as 128 KiB of it is free, so each new array is paid again in page faults: a
year of 500 tickers took 255,000-285,000 of them (1.5-3.3 s of system time on a virtual
machine of two cores), 155,000-185,000 with the heap kept. Peak resident memory: the year's
run the same (0.92-1.0 GB); five years' report 3.40 -> 3.49-3.53 GiB, run 2.78 -> 2.79 GiB.

mimalloc (pyarrow's memory pool) is left as it is. Kept from purging too, it saved another
30,000 faults, but what it keeps only it can reuse: the report of five years then peaked at
4.44 GiB.
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3  # glibc's mallopt parameters
KEPT = {
    M_TRIM_THRESHOLD: 1 << 30,  # free bytes at the top of the heap before any goes back
    M_TOP_PAD: 256 << 20,       # grown by this much more than asked (address space only)
    M_MMAP_THRESHOLD: 32 << 20,  # blocks below this come from the heap, so they are kept
}


def keep_freed_memory() -> bool:
    """Set glibc's malloc to keep freed memory (:data:`KEPT`) for the rest of this process;
    False where there is no glibc (another system or C library): nothing changes there."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # musl and others: no mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return all(mallopt(param, value) == 1 for param, value in KEPT.items())
