"""Progress of long steps: counts, elapsed time and an ETA, printed now and then."""

from __future__ import annotations

import time
from collections.abc import Callable


class Countdown:
    """Prints ``what: done/total unit, elapsed, ETA`` through ``echo`` when the count moves,
    at most once per ``every`` seconds and always when it reaches ``total``; with ``echo``
    None it prints nothing. ``done``: what was done before (a resumed step), counted but
    left out of the rate the ETA assumes."""

    def __init__(self, what: str, total: int, echo: Callable[[str], object] | None, *,
                 unit: str = "", done: int = 0, every: float = 2.0,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.what, self.total, self.echo, self.unit = what, total, echo, unit
        self.every, self.clock = every, clock
        self.done = self.before = done
        self.t0 = self.last = clock()

    def add(self, n: int = 1) -> None:
        self.done += n
        if self.echo is None:
            return
        now = self.clock()
        if self.done < self.total and now - self.last < self.every:
            return
        self.last = now
        elapsed = now - self.t0
        now_done = self.done - self.before
        left = elapsed / now_done * (self.total - self.done) if now_done else 0.0
        unit = f" {self.unit}" if self.unit else ""
        self.echo(f"{self.what}: {self.done}/{self.total}{unit}, {elapsed:.1f}s elapsed, "
                  f"ETA {left:.1f}s")
