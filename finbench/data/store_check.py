"""A store's check (:meth:`~finbench.data.store.Store.verify`) made beside other work.

The audit derives a run again from its store while the store's partitions are re-hashed and
re-checked: two passes that share nothing but the files. In threads of one process they would
share Python's lock, so a store of :data:`HELPER_BYTES` or more is checked by a helper process
(a new Python running :data:`_CHILD`, with this process's ``finbench`` first on its path) on
another core while the caller goes on; a smaller one, or one where no process can be started,
is checked in this process when its problems are asked for. Either way the problems are those
of :meth:`Store.verify`, in its order, and its progress lines reach ``echo`` as they come (from
a thread of this process, in the helper's case).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from finbench.core.errors import FinbenchError, RunError
from finbench.core.location import files_under
from finbench.data.store import Store

HELPER_BYTES = 256 << 20  # stores of this many bytes or more are checked by a helper process

# The helper: checks the store at argv[1] and writes, one line each, "progress\t<JSON text>"
# (when argv[2] is "1"), then "problems\t<JSON list>" or "error\t<JSON [class, message]>"
# (an error not of the project's classes is raised here as a RunError naming its class).
# It holds a partition per checking thread at a time and frees it, so it keeps freed memory
# for reuse, pyarrow's pages too (finbench.core.memory): a year of 500 tickers, 605,000 page
# faults -> 24,000, at the same peak (0.3 GB).
_CHILD = r"""
import json, sys, traceback
from finbench.core.memory import keep_freed_memory
keep_freed_memory(arrow_pages=True)
from finbench.core.errors import FinbenchError
from finbench.data.store import Store

def say(kind, value):
    sys.stdout.write(kind + "\t" + json.dumps(value) + "\n")
    sys.stdout.flush()

echo = (lambda line: say("progress", line)) if sys.argv[2] == "1" else None
try:
    found = Store(sys.argv[1]).verify(echo=echo)
except Exception as exc:  # any other than the project's own: its traceback on stderr too
    if not isinstance(exc, FinbenchError):
        traceback.print_exc()
    say("error", [type(exc).__name__, str(exc)])
else:
    say("problems", found)
"""


class StoreCheck:
    """The check of ``store``, begun on creation (in a helper process for a store of
    ``helper_bytes`` or more); :meth:`problems` waits for it. A context manager: leaving it
    ends a helper still checking (an error elsewhere, Ctrl-C)."""

    def __init__(self, store: Store, echo=None, *, helper_bytes: int | None = None) -> None:
        self.store, self.echo = store, echo
        self.process: subprocess.Popen | None = None
        self._answer: tuple[str, object] | None = None
        least = HELPER_BYTES if helper_bytes is None else helper_bytes
        if sum(files_under(store.fs, store.root).values()) >= least:
            self._start()

    @property
    def helped(self) -> bool:
        """Whether a helper process checks the store."""
        return self.process is not None

    def _start(self) -> None:
        where = str(self.store.path) if self.store.remote else self.store.root
        package_dir = str(Path(__file__).resolve().parents[2])  # the folder holding finbench/
        path = os.pathsep.join([package_dir, *filter(None, [os.environ.get("PYTHONPATH")])])
        try:
            # a session of its own: Ctrl-C at the terminal reaches the caller alone, which
            # ends the helper on leaving the block (no second traceback)
            self.process = subprocess.Popen(
                [sys.executable, "-c", _CHILD, where, "1" if self.echo else "0"],
                stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": path},
                start_new_session=True)
        except OSError:  # no subprocess here (a sandbox): checked in this process instead
            self.process = None
            return
        self._reader = threading.Thread(target=self._read, name="store_check", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        """The helper's lines: progress handed to ``echo``, then its answer kept."""
        for line in self.process.stdout:
            kind, _, value = line.rstrip("\n").partition("\t")
            if kind == "progress":
                self.echo(json.loads(value))
            elif kind in ("problems", "error"):
                self._answer = (kind, json.loads(value))

    def problems(self) -> list[str]:
        """The store's problems (:meth:`Store.verify`); its errors raised here."""
        if self.process is None:
            return self.store.verify(echo=self.echo)
        self._reader.join()
        code = self.process.wait()
        self.process.stdout.close()
        if self._answer is None:
            raise RunError(f"store {self.store.path}: the process checking it ended without an "
                           f"answer (exit code {code})")
        kind, value = self._answer
        if kind == "error":
            name, message = value
            error = _error_class(name)
            raise error(message if error.__name__ == name else f"{name}: {message}")
        return list(value)

    def close(self) -> None:
        """End the helper if it still checks (its answer no longer wanted)."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self._reader.join()
            self.process.stdout.close()

    def __enter__(self) -> StoreCheck:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _error_class(name: str) -> type[FinbenchError]:
    """The project's error class of that name (RunError when none is)."""
    todo, seen = [FinbenchError], {}
    while todo:
        cls = todo.pop()
        seen[cls.__name__] = cls
        todo += cls.__subclasses__()
    return seen.get(name, RunError)
