"""Freed memory kept inside a command (finbench.core.memory): glibc's heap keeps a freed block
of 16 MiB where it would have handed it back, once the function has run or once a command has
started."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import ctypes, sys
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                               "usmblks", "fsmblks", "uordblks", "fordblks",
                                               "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype, libc.malloc.restype = Info, ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "kept":
    from finbench.core.memory import keep_freed_memory
    assert keep_freed_memory()
elif sys.argv[1] == "command":
    from finbench.cli import main
    try:
        main(["--help"])
    except SystemExit:
        pass
block = libc.malloc(16 << 20)
ctypes.memset(block, 1, 16 << 20)
libc.free(block)
print(libc.mallinfo2().fordblks, file=sys.stderr)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_freed_block_stays_in_the_heap_once_kept():
    def free_bytes(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True,
                              text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        return int(done.stderr.split()[-1])

    assert free_bytes("plain") < 16 << 20  # a block of 16 MiB is mapped, and handed back
    assert free_bytes("kept") >= 16 << 20  # kept in the heap for the next one
    assert free_bytes("command") >= 16 << 20  # every command keeps it
