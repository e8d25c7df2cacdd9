"""Freed memory kept for reuse inside a command, not handed back to the system at once.

A run frees and allocates again, over and over, arrays of megabytes (a date's bars, a row
group of answers, a model's scored rows). glibc's malloc hands the top of its heap back to the
system as soon as 128 KiB of it is free, so each new array is paid again in page faults: a
year of 500 tickers took 255,000-285,000 of them (1.5-3.3 s of system time on a virtual
machine of two cores), 155,000-185,000 with the heap kept. Peak resident memory: the year's
run the same (0.92-1.0 GB); five years' report 3.40 -> 3.49-3.53 GiB, run 2.78 -> 2.79 GiB.

mimalloc (pyarrow's memory pool) purges the pages it frees (hands them back) after 10 ms, so a
run pays again for each date's bars and each row group's texts. ``finbench run`` keeps them
too (:func:`keep_freed_memory` with ``arrow_pages``): a run holds one date, one row group and
one model's rows at a time, so what mimalloc keeps is soon used again. Page faults, a year of
500 tickers: 160,000-180,000 -> 130,000-134,000 (system time, median of 8 runs, 1.77 -> 1.50
s); five years: 392,000-396,000 -> 181,000-184,000, system time 11.4-14.7 -> 9.2-9.7 s, wall
27.1-29.3 -> 25.5-27.9 s, peak 2.75-2.77 -> 3.06-3.14 GiB. The other commands leave mimalloc
as it is: the report of five years, which holds whole tables while numpy works on others,
peaked at 4.44 GiB with it (what one allocator keeps, the other cannot reuse).

Transparent huge pages are turned off for each command and the processes it starts
(``prctl(PR_SET_THP_DISABLE)``). Where the kernel backs memory with pages of 2 MiB, each
first touch of memory handed back zeroes 2 MiB, and a virtual machine that reclaims memory as
it goes hands much back: on one of 2 vCPUs, the year of 500 tickers spent 7.4-8.9 s of
system time in its run, 8.7-8.9 s in its report and 9.6-13.4 s in its audit, most of it the
kernel zeroing pages; with them off, 1.3-1.4 s, 1.6-2.5 s and 2.4-3.8 s, and each command's
CPU 0.64x, 0.75x and 0.64x (three pairs each, in turn); five years' report 0.48x, its run
0.98x (the CHANGELOG's entry).
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
# mimalloc's option, read from the environment when pyarrow's library loads: -1, never purge
ARROW_PAGES_KEPT = ("MIMALLOC_PURGE_DELAY", "-1")
PR_SET_THP_DISABLE = 41  # Linux's prctl: no transparent huge pages, inherited by children


def keep_freed_memory(*, arrow_pages: bool = False) -> bool:
    """Set glibc's malloc to keep freed memory (:data:`KEPT`) for the rest of this process,
    and ask Linux for no transparent huge pages (for this process and those it starts);
    False where there is no glibc (another system or C library): the heap is as it was.
    ``arrow_pages``: pyarrow's mimalloc keeps the pages it frees as well
    (:data:`ARROW_PAGES_KEPT`, for this process and those it starts), unless the environment
    already says how it purges; False when pyarrow is already loaded (too late to say)."""
    _no_huge_pages()  # (where Linux refuses, pages stay as they were: nothing to report)
    arrow_kept = _keep_arrow_pages() if arrow_pages else True
    return _keep_heap() and arrow_kept


def _libc(name: str, argtypes: list):
    """glibc's function ``name`` (its arguments ``argtypes``, an int returned), or None off
    Linux or where the C library has none (musl and others: no mallopt)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = getattr(ctypes.CDLL("libc.so.6"), name)
    except (OSError, AttributeError):
        return None
    function.argtypes, function.restype = argtypes, ctypes.c_int
    return function


def _keep_heap() -> bool:
    mallopt = _libc("mallopt", [ctypes.c_int, ctypes.c_int])
    return mallopt is not None and all(mallopt(param, value) == 1
                                       for param, value in KEPT.items())


def _no_huge_pages() -> bool:
    prctl = _libc("prctl", [ctypes.c_int] + [ctypes.c_ulong] * 4)
    return prctl is not None and prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0


def _keep_arrow_pages() -> bool:
    if "pyarrow.lib" in sys.modules:  # mimalloc has read its options
        return False
    name, value = ARROW_PAGES_KEPT
    os.environ.setdefault(name, value)  # a setting of the user's own is kept
    return True
