"""Date partitions read before they are asked for, on threads of their own.

A run plans its tasks (the calendar, the task table: Python on one core) before its label pass
reads the first partition, so the second core waits. :class:`ReadAhead` reads the partitions
the label pass will ask for meanwhile, in date order, holding at most :data:`BUDGET` bytes of
tables read and not yet taken. A read that fails is raised to whoever takes that date, with
the error the read gave. From local disk one thread reads (a read is work for a core, and the
label pass needs the other); from object storage several do, as a read there is mostly a
round trip's wait.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future

import pyarrow as pa

BUDGET = 512 * 2**20  # bytes of tables read ahead and not yet taken (a year of 500 tickers:
# 5.5 MB a date with high and low)


class ReadAhead:
    """``read(day)`` (a table, or None for no bars) of each of ``days``, begun in order by
    ``readers`` threads, which stop while :data:`BUDGET` bytes wait to be taken (each may
    finish the read it began). :meth:`take` hands a date over (once): read here, or by the
    caller when it had not begun; :meth:`close` stops the threads and lets go of what was not
    taken."""

    def __init__(self, read: Callable[[object], pa.Table | None], days: Iterable,
                 columns: tuple[str, ...], budget: int | None = None, readers: int = 1
                 ) -> None:
        self.columns = columns
        self._read, self._budget = read, BUDGET if budget is None else budget
        self._todo = deque(days)
        self._futures: dict[object, Future] = {day: Future() for day in self._todo}
        self._sizes: dict[object, int] = {}
        self._held = 0
        self._closed = False
        self._cond = threading.Condition()
        self._threads = [threading.Thread(target=self._work, name="read-ahead", daemon=True)
                         for _ in range(max(1, min(readers, len(self._todo))))]
        for thread in self._threads:
            thread.start()

    def take(self, day) -> pa.Table | None | bool:
        """``day``'s table (None: no bars that day), waited for if it is being read; False
        when it was not to be read ahead or has not begun: the caller reads it then (and it
        is not read here). A read that failed raises its error here."""
        with self._cond:
            future = self._futures.pop(day, None)
            if future is None:
                return False
            if future.cancel():  # not begun
                self._todo.remove(day)
                return False
        try:
            return future.result()
        finally:
            with self._cond:
                self._held -= self._sizes.pop(day, 0)
                self._cond.notify_all()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._closed and self._todo and self._held >= self._budget:
                    self._cond.wait()
                if self._closed or not self._todo:
                    return
                day = self._todo.popleft()
                future = self._futures[day]  # take() removes a date not begun from both
                future.set_running_or_notify_cancel()
            try:
                table = self._read(day)
            except BaseException as exc:  # raised to whoever takes the date
                future.set_exception(exc)
                continue
            with self._cond:
                size = table.nbytes if table is not None else 0
                self._sizes[day] = size
                self._held += size
            future.set_result(table)

    def close(self) -> None:
        """Read no more; what was read and not taken is let go."""
        with self._cond:
            self._closed = True
            self._futures.clear()
            self._todo.clear()
            self._cond.notify_all()
        for thread in self._threads:
            thread.join()
