"""Freed memory kept inside a command (finbench.core.memory): glibc's heap keeps a freed block
of 16 MiB where it would have handed it back, once the function has run or once a command has
started; in ``finbench run`` (and only there), pyarrow's allocator keeps the pages it frees;
no command (nor what it starts) is given transparent huge pages.
And every command gives numpy's OpenBLAS one thread (finbench.core.blas)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.heap_probe import BLOCK

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import sys
if sys.argv[1] == "kept":
    from finbench.core.memory import keep_freed_memory
    assert keep_freed_memory()
elif sys.argv[1] == "command":
    from finbench.cli import main
    main(["audit", "/no/such/run"])  # fails at once, its set-up done
from tests.heap_probe import free_after_a_freed_block
print(free_after_a_freed_block(), file=sys.stderr)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_freed_block_stays_in_the_heap_once_kept():
    def free_bytes(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True,
                              text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        return int(done.stderr.split()[-1])

    assert free_bytes("plain") < BLOCK  # a block of 16 MiB is mapped, and handed back
    assert free_bytes("kept") >= BLOCK  # kept in the heap for the next one
    assert free_bytes("command") >= BLOCK  # every command keeps it


ARROW_PROBE = """
import os, resource, sys
from finbench.cli import main
main(sys.argv[1:])  # a command that fails at once (no such config or run): its set-up is done
import numpy as np
import pyarrow as pa

def touched() -> int:  # 64 MiB of Arrow buffers written, held until the caller lets go
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    buffers = [pa.allocate_buffer(1 << 20) for _ in range(64)]
    for b in buffers:
        np.frombuffer(b, np.uint8)[:] = 1
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before, buffers

_, held = touched()
del held
pa.default_memory_pool().release_unused()  # what it purges, it purges now
print(pa.default_memory_pool().backend_name, touched()[0], os.environ.get("MIMALLOC_PURGE_DELAY"))
"""


def _arrow_probe(*command: str, **env: str) -> tuple[str, int, str]:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("MIMALLOC_PURGE_DELAY", "ARROW_DEFAULT_MEMORY_POOL")}
    done = subprocess.run([sys.executable, "-c", ARROW_PROBE, *command], capture_output=True,
                          text=True, check=True,
                          env={**clean, "PYTHONPATH": str(ROOT), **env})
    backend, faults, setting = done.stdout.split()
    return backend, int(faults), setting


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="page faults as Linux counts")
def test_a_run_keeps_the_pages_pyarrow_frees_and_other_commands_do_not(tmp_path):
    backend, kept, setting = _arrow_probe("run", str(tmp_path / "missing.toml"))
    if backend != "mimalloc":
        pytest.skip(f"pyarrow's pool here is {backend}")
    assert setting == "-1"
    _, handed_back, setting = _arrow_probe("audit", str(tmp_path / "missing"))
    assert setting == "None"
    # 64 MiB handed back are paid again (at least half of them, were they 2 MiB pages); kept,
    # next to none
    assert handed_back >= 16 and kept * 4 < handed_back, (kept, handed_back)
    # a user's own setting is kept
    _, faults, setting = _arrow_probe("run", str(tmp_path / "missing.toml"),
                                      MIMALLOC_PURGE_DELAY="10")
    assert setting == "10" and faults >= 16 and kept * 4 < faults


THP_PROBE = """
import ctypes, subprocess, sys
ctypes.CDLL("libc.so.6").prctl(41, 0, 0, 0, 0)  # on, whatever the test's own process says
if sys.argv[1] == "command":
    from finbench.cli import main
    main(["audit", "/no/such/run"])  # fails at once, its set-up done
def huge(status):
    return [line.split()[1] for line in status.splitlines() if line.startswith("THP_enabled:")]
child = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True).stdout
print(*huge(open("/proc/self/status").read()), *huge(child))
"""
_STATUS = Path("/proc/self/status")


@pytest.mark.skipif(not _STATUS.exists() or "THP_enabled" not in _STATUS.read_text(),
                    reason="Linux 5.0 or later says whether huge pages are on")
def test_a_command_and_the_processes_it_starts_use_no_transparent_huge_pages():
    """A process with huge pages on (and its child) may be given them; a command turns them
    off, for itself and any process it starts (a store check's helper, a cluster's workers).
    (A test process that called a command in-process has them off: the probe turns them on.)"""
    def enabled(mode: str) -> list[str]:
        done = subprocess.run([sys.executable, "-c", THP_PROBE, mode], capture_output=True,
                              text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        return done.stdout.split()

    assert enabled("plain") == ["1", "1"]
    assert enabled("command") == ["0", "0"]


def test_too_late_to_keep_arrow_pages_once_pyarrow_is_loaded(monkeypatch):
    import pyarrow  # noqa: F401 - loaded, as in this test process

    from finbench.core.memory import keep_freed_memory

    monkeypatch.delenv("MIMALLOC_PURGE_DELAY", raising=False)
    assert keep_freed_memory(arrow_pages=True) is False
    assert "MIMALLOC_PURGE_DELAY" not in os.environ  # nothing said that would not be heard


BLAS_PROBE = """
import ctypes, glob, os, sys
from finbench.cli import main
main(sys.argv[1:])  # a command that fails at once: its set-up is done
import numpy as np
found = glob.glob(os.path.join(os.path.dirname(np.__file__) + ".libs", "*openblas*.so*"))
threads = -1
for path in found:  # numpy's own OpenBLAS (PyPI wheels): how many threads it was given
    lib = ctypes.CDLL(path)
    for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads"):
        if hasattr(lib, name):
            threads = getattr(lib, name)()
            break
print(os.environ.get("OPENBLAS_NUM_THREADS"), threads)
"""


@pytest.mark.parametrize(("given", "want"), [(None, "1"), ("2", "2")])
def test_a_command_gives_numpy_one_blas_thread_unless_told(tmp_path, given, want):
    """Every command asks OpenBLAS for one thread (finbench.core.blas), before numpy loads
    it; a user's own setting is kept. Where numpy's library can be asked, it has them."""
    clean = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env = {**clean, "PYTHONPATH": str(ROOT), **({"OPENBLAS_NUM_THREADS": given} if given else {})}
    done = subprocess.run([sys.executable, "-c", BLAS_PROBE, "report", str(tmp_path / "none")],
                          capture_output=True, text=True, check=True, env=env)
    setting, threads = done.stdout.split()
    assert setting == want
    if int(threads) >= 0:  # (-1: not numpy's wheel of OpenBLAS; the setting alone is checked)
        assert int(threads) == min(int(want), os.cpu_count() or 1)


def test_too_late_to_ask_for_one_blas_thread_once_numpy_is_loaded(monkeypatch):
    import numpy  # noqa: F401 - loaded, as in this test process

    from finbench.core.blas import one_blas_thread

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert one_blas_thread() is False
    assert "OPENBLAS_NUM_THREADS" not in os.environ
