"""The live mode's clock, given to it: the wall clock, or a test's, which jumps to each time
it is asked to wait for (running ``on_advance`` first, so a test's feed can append the bars
of the time reached), so that a whole season runs in seconds."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable


class SystemClock:
    """The machine's clock: :meth:`sleep_until` sleeps."""

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    def sleep_until(self, when: dt.datetime) -> None:
        while (left := (when - self.now()).total_seconds()) > 0:
            time.sleep(min(left, 60.0))


class FakeClock:
    """A clock that moves only when told: :meth:`sleep_until` jumps to the time (never
    back), calling ``on_advance(time)`` first; :meth:`advance` moves it by a span (the time a
    step took, as a test says)."""

    def __init__(self, start: dt.datetime,
                 on_advance: Callable[[dt.datetime], None] | None = None) -> None:
        self.t = start.astimezone(dt.UTC)
        self.on_advance = on_advance

    def now(self) -> dt.datetime:
        return self.t

    def sleep_until(self, when: dt.datetime) -> None:
        when = when.astimezone(dt.UTC)
        if when > self.t:
            if self.on_advance is not None:
                self.on_advance(when)
            self.t = when

    def advance(self, seconds: float) -> None:
        self.sleep_until(self.t + dt.timedelta(seconds=seconds))
