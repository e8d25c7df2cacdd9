"""Freed memory kept inside a command (finbench.core.memory): glibc's heap keeps a freed block
of 16 MiB where it would have handed it back; mimalloc's setting is set unless the user set
it; and every command sets both before it loads pyarrow."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from finbench.cli import main

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import ctypes, sys
from finbench.core.memory import keep_freed_memory
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                               "usmblks", "fsmblks", "uordblks", "fordblks",
                                               "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype, libc.malloc.restype = Info, ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "keep":
    assert keep_freed_memory()
block = libc.malloc(16 << 20)
ctypes.memset(block, 1, 16 << 20)
libc.free(block)
print(libc.mallinfo2().fordblks)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_freed_block_stays_in_the_heap_once_kept():
    def free_bytes(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True,
                              text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        return int(done.stdout)

    assert free_bytes("plain") < 16 << 20  # a block of 16 MiB is mapped, and handed back
    assert free_bytes("keep") >= 16 << 20  # kept in the heap for the next one


def test_every_command_keeps_freed_memory_before_it_loads_pyarrow(monkeypatch):
    monkeypatch.delenv("MIMALLOC_PURGE_DELAY", raising=False)
    with pytest.raises(SystemExit):
        main(["--help"])
    assert os.environ["MIMALLOC_PURGE_DELAY"] == "-1"
    monkeypatch.setenv("MIMALLOC_PURGE_DELAY", "250")  # the user's own setting stays
    with pytest.raises(SystemExit):
        main(["--help"])
    assert os.environ["MIMALLOC_PURGE_DELAY"] == "250"
    loaded = subprocess.run([sys.executable, "-c", "import sys, finbench.cli; "
                             "print('pyarrow' in sys.modules)"], capture_output=True,
                            text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert loaded.stdout.strip() == "False"  # so main() comes before pyarrow's allocator
