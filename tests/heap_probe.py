"""A probe of glibc's heap for another process to run (a subprocess, a Dask worker): how many
free bytes the heap keeps once a block of :data:`BLOCK` bytes has been written and freed.
Handed back, the block leaves fewer than :data:`BLOCK`; kept for reuse, at least that many.
It imports ctypes alone: a library that allocates large blocks as it loads would move glibc's
own mmap threshold before the probe measures."""

import ctypes

BLOCK = 16 << 20


class _Info(ctypes.Structure):  # glibc's struct mallinfo2
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def free_after_a_freed_block() -> int:
    """The heap's free bytes (``fordblks``) after :data:`BLOCK` bytes written and freed."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype, libc.malloc.restype = _Info, ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    block = libc.malloc(BLOCK)
    ctypes.memset(block, 1, BLOCK)
    libc.free(block)
    return libc.mallinfo2().fordblks
