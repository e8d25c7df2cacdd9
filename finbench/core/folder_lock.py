"""One process changes a folder at a time: an exclusive lock on ``FOLDER/.finbench.lock``
(a run directory: :class:`finbench.runlog.runlock.RunLock`; a store:
:func:`finbench.data.commit.store_lock`).

The lock is an ``flock`` on the file: the kernel releases it when its process ends, however it
ends, so a killed process leaves no lock behind. The file keeps its holder's details (process
id, command, start time, host) while the lock is held and is emptied on release; a lock taken
over a file that still holds details means its holder died without releasing it (a ``kill
-9``), and the new holder says so. The file is never deleted (two processes could then lock
two different files). ``flock`` works on local filesystems; on a network filesystem that does
not honour it, use one process per folder by hand.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import socket
from pathlib import Path

from finbench.core.errors import FinbenchError, RunError

LOCK_FILE = ".finbench.lock"


class FolderLock:
    """``with FolderLock(folder, command="..."):`` holds the folder's lock (exclusive, or
    ``shared`` for readers). ``took_over``: the details of a holder that died holding it.
    Subclasses name the folder (:attr:`what`) and the error a refusal raises (:attr:`error`)."""

    what = "folder"
    error: type[FinbenchError] = RunError

    def __init__(self, folder: str | Path, *, command: str, shared: bool = False) -> None:
        self.dir, self.command, self.shared = Path(folder), command, shared
        self.path = self.dir / LOCK_FILE
        self.fd: int | None = None
        self.took_over: dict | None = None

    def __enter__(self) -> FolderLock:
        if self.dir.exists() and not self.dir.is_dir():
            raise self.error(f"{self.dir}: is a file, not a {self.what}")
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _details(fd)
            os.close(fd)
            raise self.error(f"{self.dir}: in use by {describe(holder)}; wait until it ends (or "
                             "stop it), then run this again") from None
        self.fd = fd
        self.took_over = _details(fd) or None  # a writer that died holding the lock
        os.ftruncate(fd, 0)
        if not self.shared:
            os.pwrite(fd, json.dumps({
                "pid": os.getpid(), "command": self.command, "host": socket.gethostname(),
                "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            }).encode(), 0)
            os.fsync(fd)
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is None:
            return
        if not self.shared:
            os.ftruncate(self.fd, 0)  # released cleanly: no holder's details left behind
        os.close(self.fd)  # closing the file releases the lock
        self.fd = None


def describe(holder: dict) -> str:
    """Who holds (or held) a lock, from its details."""
    if not holder:
        return "another process (a reader: finbench audit or paper)"
    return (f"process {holder.get('pid')} ({holder.get('command')}, started "
            f"{holder.get('started_at')} on {holder.get('host')})")


def _details(fd: int) -> dict:
    """The holder's details written in the lock file ({} when empty or unreadable)."""
    try:
        text = os.pread(fd, 4096, 0).decode()
        return json.loads(text) if text.strip() else {}
    except (OSError, ValueError):
        return {}
