"""A response cache in SQLite (WAL): the same request never costs twice, across runs."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path

from finbench.core.errors import RunError
from finbench.core.outputs import DiskFullError, sqlite_writing
from finbench.core.session_cache import CACHE_ENV, cache_root


def default_cache_path() -> Path:
    """``$FINBENCH_CACHE_DIR/responses.sqlite``, else ``~/.cache/finbench/responses.sqlite``."""
    return cache_root() / "responses.sqlite"


def request_key(*, base_url: str, model: str, params: dict, messages_sha256: str) -> str:
    """Cache key: provider URL, model id, sampling parameters and the prompt hash."""
    text = json.dumps({"base_url": base_url, "model": model, "params": params,
                       "messages": messages_sha256}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


FLUSH_SECONDS = 1.0  # answers put are written together, at most this long after the first
FLUSH_ENTRIES = 256  # ... or once this many wait


OPEN_SECONDS = 5.0  # how long an opening waits for other processes holding the cache


def _write_ahead_log(db: sqlite3.Connection) -> None:
    """Put ``db`` in WAL mode, waiting (up to :data:`OPEN_SECONDS`) for other processes
    opening it too. The cache is shared by runs and by a cluster's workers, and the first
    opening of a new cache file converts it, under an exclusive lock: of several processes
    converting it at once, SQLite refuses all but one at once, without waiting (waiting would
    deadlock them), so two shards starting together failed with "database is locked"."""
    deadline = time.monotonic() + OPEN_SECONDS
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY  # (or one of its kinds)
            if not busy or time.monotonic() > deadline:
                raise
            time.sleep(0.01)  # (the converting process holds it for a few milliseconds)


class ResponseCache:
    """Key → response JSON. Holds answers only (never keys or transport errors).

    An answer put with ``held=True`` (one its caller journals at once: a plain call's) is
    written with others in one transaction every :data:`FLUSH_SECONDS` (or
    :data:`FLUSH_ENTRIES` answers) and on :meth:`close`: a transaction per answer cost
    0.06 ms a call. A process killed meanwhile loses those cache entries only (its journal
    holds the answers); the same process finds them at once. Any other answer (an agent's
    turn, one of a variant's samples: the cache is all that keeps them) is written now."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path else default_cache_path()
        self._lock = threading.Lock()
        self._held: dict[str, str] = {}  # key -> response JSON, not yet written
        self._held_since = 0.0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with sqlite_writing(self.path):
                self._db = sqlite3.connect(self.path, check_same_thread=False,
                                           isolation_level=None, timeout=OPEN_SECONDS)
                _write_ahead_log(self._db)
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, "
                                 "response TEXT NOT NULL)")
        except DiskFullError:
            raise
        except (OSError, sqlite3.DatabaseError) as exc:
            raise RunError(f"{self.path}: the response cache cannot be opened ({exc}); move it "
                           f"aside, or set {CACHE_ENV} to another folder") from None

    def get(self, key: str) -> dict | None:
        with self._lock:
            held = self._held.get(key)
            row = (held,) if held is not None else self._db.execute(
                "SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, response: dict, *, held: bool = False) -> None:
        text = json.dumps(response, sort_keys=True)
        with self._lock:
            if not self._held:
                self._held_since = time.monotonic()
            self._held[key] = text
            if (not held or len(self._held) >= FLUSH_ENTRIES
                    or time.monotonic() - self._held_since >= FLUSH_SECONDS):
                self._write_held()

    def _write_held(self) -> None:
        """Write the answers held, in one transaction (the caller holds the lock)."""
        if not self._held:
            return
        with sqlite_writing(self.path):
            self._db.execute("BEGIN")
            try:
                self._db.executemany("INSERT OR REPLACE INTO responses VALUES (?, ?)",
                                     list(self._held.items()))
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        self._held.clear()

    def close(self) -> None:
        with self._lock:
            try:
                self._write_held()
            finally:
                self._db.close()
