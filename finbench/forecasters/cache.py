"""A response cache in SQLite (WAL): the same request never costs twice, across runs."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
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


class ResponseCache:
    """Key → response JSON. Holds answers only (never keys or transport errors)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path else default_cache_path()
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with sqlite_writing(self.path):
                self._db = sqlite3.connect(self.path, check_same_thread=False,
                                           isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
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
            row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, response: dict) -> None:
        with self._lock, sqlite_writing(self.path):
            self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?)",
                             (key, json.dumps(response, sort_keys=True)))

    def close(self) -> None:
        with self._lock:
            self._db.close()
