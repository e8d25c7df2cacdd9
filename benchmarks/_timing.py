"""Timing helper shared by the benchmark scripts."""

from __future__ import annotations

import time


def best_of(fn, repeats: int = 3) -> float:
    """Fastest of ``repeats`` timed calls (the usual way to time on a shared machine)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)
