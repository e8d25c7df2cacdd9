"""A run directory on object storage (``--out s3://bucket/runs/x``).

Object stores have no append, no rename and no locks, and a run needs all three (its journal
grows line by line, its files are renamed into place, its folder is locked). So a run whose
directory is a URI works in a local scratch folder and :class:`Mirror` keeps the URI a copy of
it: what the URI already holds is pulled first (a resumed run, or a shard retried on another
worker, carries on from its journal), every :data:`EVERY` seconds (or nine times as long as
the last upload took, when that is longer) the files that changed are uploaded, and at the
end the URI is made equal to the folder. Each object is replaced whole.

A copy taken while the run writes is one the run itself can resume from, as from a kill:
``journal.jsonl`` is copied before the transcripts and sent after them (a call's transcript is
written before its journal line, so every journalled answer has its transcript in the copy);
its torn last line, if any, is dropped on resume. A worker that dies loses what its run did
since the last upload: those calls are made again by the retry. ``transcripts.sqlite`` is sent
as an SQLite backup (a consistent snapshot, its write-ahead log folded in); temporary files and
the lock are never sent. Object storage has no lock: two processes given the same URI at once
would each upload their own folder, so one process per URI is the caller's to keep (the Dask
executor runs each shard as one task at a time).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

from finbench.core.errors import RunError
from finbench.core.folder_lock import LOCK_FILE
from finbench.core.location import copy_file, files_under, filesystem, is_uri, join
from finbench.runlog.journal import JOURNAL

EVERY = 2.0  # seconds between uploads of what changed, at least
BUSY = 9  # ... and at least 9 times the last upload's duration: uploading takes at most a
# tenth of a run's time, however large its journal and transcripts grow
SCRATCH_ENV = "FINBENCH_SCRATCH"  # where scratch folders go (default: the system's temp dir)
_LIVE = ("-wal", "-shm", "-journal")  # an open SQLite database's own files (sent as a backup)


def copied(rel: str) -> bool:
    """Whether a file of a run folder (its path relative to the folder) is copied elsewhere:
    not the lock, not a file being written under a temporary name."""
    return rel != LOCK_FILE and not rel.endswith(".tmp")


def _sent(rel: str) -> bool:
    return copied(rel) and not rel.endswith(_LIVE)


class Mirror:
    """Keeps ``remote`` (a URI, or any folder) a copy of the local folder ``local``."""

    def __init__(self, local: Path, remote: str, *, every: float = EVERY) -> None:
        self.local, self.remote, self.every = Path(local), remote, every
        self.fs, self.root = filesystem(remote)
        self._local_fs = filesystem(self.local)[0]
        self._seen: dict[str, tuple] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def pull(self) -> int:
        """Copy what ``remote`` holds into ``local``; returns how many files."""
        local_root = str(self.local.absolute())
        names = [r for r in files_under(self.fs, self.root) if _sent(r)]
        for rel in names:
            copy_file(self.fs, join(self.root, rel), self._local_fs, join(local_root, rel))
            self._seen[rel] = self._signature(rel)
        return len(names)

    def _signature(self, rel: str) -> tuple:
        path = self.local / rel
        files = [path] + ([Path(f"{path}-wal")] if rel.endswith(".sqlite") else [])
        return tuple((s.st_size, s.st_mtime_ns) for s in (f.stat() for f in files if f.exists()))

    def sync(self, *, final: bool = False) -> list[str]:
        """Upload the files changed since the last sync (``final``: and remove from ``remote``
        what the folder no longer has). Returns the relative paths uploaded.

        The journal is copied first and sent last: the transcripts, copied after it, hold the
        call of every answer it names, and whatever fails midway, ``remote`` never holds a
        journal newer than its transcripts."""
        local = sorted(p.relative_to(self.local).as_posix()
                       for p in self.local.rglob("*") if p.is_file())
        sent = []
        with tempfile.TemporaryDirectory() as tmp:
            journal = None
            if JOURNAL in local and self._changed(JOURNAL):
                journal = (Path(tmp) / JOURNAL, self._signature(JOURNAL))
                shutil.copyfile(self.local / JOURNAL, journal[0])
            for rel in (r for r in local if _sent(r) and r != JOURNAL):
                try:
                    signature = self._signature(rel)
                    if self._seen.get(rel) == signature:
                        continue
                    self._upload(rel, tmp)
                except FileNotFoundError:  # renamed away or deleted by the run meanwhile
                    continue
                self._seen[rel] = signature
                sent.append(rel)
            if journal is not None:
                copy_file(self._local_fs, str(journal[0]), self.fs, join(self.root, JOURNAL))
                self._seen[JOURNAL] = journal[1]
                sent.append(JOURNAL)
        if final:
            for rel in set(files_under(self.fs, self.root)) - set(local):
                self.fs.delete_file(join(self.root, rel))
        return sent

    def _changed(self, rel: str) -> bool:
        return self._seen.get(rel) != self._signature(rel)

    def _upload(self, rel: str, tmp: str) -> None:
        if not rel.endswith(".sqlite"):
            copy_file(self._local_fs, str((self.local / rel).absolute()), self.fs,
                      join(self.root, rel))
            return
        snapshot = os.path.join(tmp, "copy.sqlite")  # a consistent copy of the database
        source = sqlite3.connect(f"file:{self.local / rel}?mode=ro", uri=True, timeout=60)
        target = sqlite3.connect(snapshot)
        try:
            source.backup(target)
        finally:
            source.close()
            target.close()
        copy_file(self._local_fs, snapshot, self.fs, join(self.root, rel))
        os.remove(snapshot)

    # -- in the background, while a run writes --------------------------------------------
    def _loop(self) -> None:
        wait = self.every
        while not self._stop.wait(wait):
            started = time.monotonic()
            try:
                self.sync()
            except Exception:  # noqa: BLE001, S110 - tried again next time; the final sync
                pass            # (in the run's own thread) raises what stays broken
            wait = max(self.every, BUSY * (time.monotonic() - started))

    def __enter__(self) -> Mirror:
        """Pull what ``remote`` holds, then upload what changes every ``every`` seconds."""
        self.pull()
        self._thread = threading.Thread(target=self._loop, name="finbench-mirror", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:  # also after a failure: what was written is kept for a resume
            self.sync(final=True)
        except Exception as failed:
            if exc is None:
                raise
            exc.add_note(f"and the last upload to {self.remote} failed too: {failed}")


def scratch_folder(name: str = "run") -> tempfile.TemporaryDirectory:
    """A new local folder ``finbench-NAME-XXXX`` for one run's files (under
    ``$FINBENCH_SCRATCH`` when set, else the system's temporary folder); removed when done."""
    root = os.environ.get(SCRATCH_ENV)
    if root:
        Path(root).mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix=f"finbench-{name}-", dir=root or None)


@contextlib.contextmanager
def local_copy(where, *, write_back: bool = False):
    """A local folder holding the run directory ``where``: the folder itself, or for a URI a
    scratch copy pulled from it (with ``write_back``, the files added or changed in it are
    uploaded when the block ends without an error). For the verbs that read a finished run."""
    if not is_uri(where):
        yield Path(where)
        return
    name = str(where).rstrip("/").rsplit("/", 1)[-1]
    with scratch_folder(name) as tmp:
        mirror = Mirror(Path(tmp) / name, str(where))
        if mirror.pull() == 0:
            raise RunError(f"{where}: no run directory there (nothing under that prefix)")
        yield mirror.local
        if write_back:
            mirror.sync()
