"""One process writes a run directory at a time: an exclusive lock on ``RUN/.finbench.lock``.

``finbench run`` holds it from start to end, and ``score``, ``merge`` (on the merged folder)
and ``report`` while they write; ``audit`` and ``paper`` take it shared, so they read no
folder a writer is changing. A second process fails at once with an error naming the holder
(process id, command, start time, host), instead of repeating paid calls or writing files
under the first one.

How the lock works (an ``flock``, released by the kernel however its holder ends):
:mod:`finbench.core.folder_lock`.
"""

from __future__ import annotations

from finbench.core.errors import RunError
from finbench.core.folder_lock import LOCK_FILE, FolderLock, describe

__all__ = ["LOCK_FILE", "RunLock", "describe"]


class RunLock(FolderLock):
    """``with RunLock(run_dir, command="finbench run"):`` holds the run directory's lock
    (exclusive, or ``shared`` for readers). ``took_over``: the details of a holder that died
    holding it."""

    what = "run directory"
    error = RunError
