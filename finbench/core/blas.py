"""One thread for numpy's linear algebra (OpenBLAS) inside a command.

FinBench's products are small: a bootstrap weights a few hundred to a few thousand clusters'
sums by each replicate's counts (2,000 x 252 for a year's sessions), thousands of times in a
report. OpenBLAS splits each product over every core and its threads then wait for work by
spinning, so on two cores a year's `finbench report` spent 11.2-11.9 s of CPU for 8.1-9.4 s of
wall time, and 8.4-9.8 s of CPU with one thread, in the same wall time and with the same
tables byte for byte (a product's element is summed by one thread either way). The cores are
better left to what runs beside it (Arrow's readers, the store check's helper process).
"""

from __future__ import annotations

import os
import sys

BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "1")  # read by OpenBLAS when numpy loads it


def one_blas_thread() -> bool:
    """Ask for one OpenBLAS thread in this process and those it starts, unless the
    environment already says how many; False when numpy is already loaded (too late to
    say) and nothing changed."""
    if "numpy" in sys.modules:
        return False
    name, value = BLAS_THREADS
    os.environ.setdefault(name, value)  # a setting of the user's own is kept
    return True
