"""What a language model was sent and what came back, per call: ``transcripts.sqlite`` in the
run directory, one row per (model, task, attempt) holding the rendered messages exactly as
sent and the response as received (each JSON, zlib-compressed with a preset dictionary made
from the run's first call, kept in the file), written just before the call's journal line, so
every journalled answer has its transcript.

SQLite in WAL mode: a killed run loses at most the calls in flight; a call asked again after
a kill replaces its transcript of the same attempt. The write-ahead log is checkpointed every
:data:`CHECKPOINT_PAGES` pages and kept at most :data:`WAL_BYTES` long (truncated when the
file is closed), so it never holds much more than the calls of the last few seconds; a full
disk (or a file-size limit) while it is written is the run's one-line DiskFullError.
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from pathlib import Path

from finbench.core.errors import RunError
from finbench.core.outputs import sqlite_writing

TRANSCRIPTS = "transcripts.sqlite"
LEVEL = 1  # zlib level: with the preset dictionary (prompts of one run share most of their
# text) level 6 made a 4.2 KB prompt 905 bytes in 0.088 ms, level 1 1,072 bytes in 0.038 ms


WINDOW = 1 << 15  # zlib's window: a preset dictionary longer than this is not used
CHECKPOINT_PAGES = 64  # pages of 4 KiB: the log is copied into the database past 256 KiB
WAL_BYTES = 1 << 20  # ... and truncated back to this after a checkpoint


def _text(value) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False).encode()


def pack(value, zdict: bytes = b"") -> bytes:
    """``value`` as compressed JSON; ``zdict``: the preset dictionary (the run's first call,
    whose text later prompts mostly repeat: 3-6x smaller than compressing each alone)."""
    packer = zlib.compressobj(LEVEL, zdict=zdict) if zdict else zlib.compressobj(LEVEL)
    return packer.compress(_text(value)) + packer.flush()


def unpack(blob: bytes, zdict: bytes = b""):
    unpacker = zlib.decompressobj(zdict=zdict) if zdict else zlib.decompressobj()
    return json.loads(unpacker.decompress(blob) + unpacker.flush())


class Transcripts:
    """The run directory's transcripts, opened on first use."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / TRANSCRIPTS
        self._db: sqlite3.Connection | None = None
        self._zdict: bytes | None = None

    def _open(self, create: bool) -> sqlite3.Connection | None:
        if self._db is None and (create or self.path.is_file()):
            try:
                with sqlite_writing(self.path):
                    self._db = self._connect()
            except sqlite3.DatabaseError as exc:
                self._db = None
                raise self._damaged(exc) from None
        return self._db

    def _damaged(self, exc: sqlite3.DatabaseError) -> RunError:
        return RunError(f"{self.path}: cannot be read as the run's transcripts ({exc}); the "
                        "file is damaged: restore it from a copy of the run")

    def _rows(self, cursor: sqlite3.Cursor, batch: int):
        """The cursor's rows, ``batch`` at a time; a damaged page is a RunError naming the
        file."""
        try:
            while rows := cursor.fetchmany(batch):
                yield rows
        except sqlite3.DatabaseError as exc:
            raise self._damaged(exc) from None

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            return self._prepared(db)
        except sqlite3.DatabaseError:
            db.close()
            raise

    def _prepared(self, db: sqlite3.Connection) -> sqlite3.Connection:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute(f"PRAGMA wal_autocheckpoint={CHECKPOINT_PAGES}")
        db.execute(f"PRAGMA journal_size_limit={WAL_BYTES}")
        db.execute(
            "CREATE TABLE IF NOT EXISTS transcripts (model TEXT NOT NULL, task_id TEXT NOT "
            "NULL, attempt INTEGER NOT NULL, input_sha256 TEXT NOT NULL, messages BLOB NOT "
            "NULL, response BLOB NOT NULL, PRIMARY KEY (model, task_id, attempt))")
        db.execute("CREATE TABLE IF NOT EXISTS dictionary (id INTEGER PRIMARY KEY, "
                   "zdict BLOB NOT NULL)")
        row = db.execute("SELECT zdict FROM dictionary WHERE id = 1").fetchone()
        self._zdict = row[0] if row else None
        return db

    def _dictionary(self, first: dict) -> bytes:
        """The run's preset dictionary, made from its first call when there is none yet."""
        if self._zdict is None:
            text = _text(first["messages"]) + _text(first["response"])
            self._db.execute("INSERT OR IGNORE INTO dictionary VALUES (1, ?)", (text[-WINDOW:],))
            self._zdict = self._db.execute(
                "SELECT zdict FROM dictionary WHERE id = 1").fetchone()[0]
        return self._zdict

    def put(self, entries: list[dict]) -> None:
        """Store calls: each a dict of model, task_id, attempt, input_sha256, messages (the
        list sent) and response (what came back, as JSON)."""
        if not entries:
            return
        db = self._open(create=True)
        with sqlite_writing(self.path):
            zdict = self._dictionary(entries[0])
            db.executemany("INSERT OR REPLACE INTO transcripts VALUES (?, ?, ?, ?, ?, ?)",
                           [(e["model"], e["task_id"], int(e["attempt"]), e["input_sha256"],
                             pack(e["messages"], zdict), pack(e["response"], zdict))
                            for e in entries])

    def of(self, task_id: str, model: str | None = None) -> list[dict]:
        """Every stored call of ``task_id`` (of ``model`` only, when given), by model and
        attempt."""
        db = self._open(create=False)
        if db is None:
            return []
        query = ("SELECT model, task_id, attempt, input_sha256, messages, response FROM "
                 "transcripts WHERE task_id = ?" + (" AND model = ?" if model else "")
                 + " ORDER BY model, attempt")
        rows = db.execute(query, (task_id, model) if model else (task_id,)).fetchall()
        return [self._entry(row) for row in rows]

    def last_of_each(self, model: str) -> dict[str, dict]:
        """Per task id, the latest attempt's call of ``model`` (all in memory: see
        :meth:`each_last` for a whole run)."""
        return {entry["task_id"]: entry for entry in self.each_last(model)}

    def each_last(self, model: str):
        """The latest attempt's call of each task of ``model``, one at a time."""
        db = self._open(create=False)
        if db is None:
            return
        cursor = db.execute("SELECT model, task_id, MAX(attempt), input_sha256, messages, "
                            "response FROM transcripts WHERE model = ? GROUP BY task_id",
                            (model,))
        for rows in self._rows(cursor, 1000):
            # SQLite takes the other columns from the row holding the MAX
            yield from (self._entry(row) for row in rows)

    def each(self, batch: int = 1000):
        """Every stored call, a list of up to ``batch`` at a time (each as :meth:`put` takes
        them), in (model, task, attempt) order."""
        db = self._open(create=False)
        if db is None:
            return
        cursor = db.execute("SELECT model, task_id, attempt, input_sha256, messages, response "
                            "FROM transcripts ORDER BY model, task_id, attempt")
        for rows in self._rows(cursor, batch):
            yield [self._entry(row) for row in rows]

    def close(self) -> None:
        """Close the file, its write-ahead log copied in and truncated (when the disk lets
        it: a run stopping on a full disk keeps the log, which the next run reads)."""
        if self._db is not None:
            try:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.DatabaseError:
                pass
            self._db.close()
            self._db = None

    def _entry(self, row) -> dict:
        model, task_id, attempt, sha, messages, response = row
        zdict = self._zdict or b""
        entry = {"model": model, "task_id": task_id, "attempt": attempt, "input_sha256": sha}
        try:
            entry.update(messages=unpack(messages, zdict), response=unpack(response, zdict))
        except (zlib.error, ValueError) as exc:  # damaged: said, not raised (the audit names it)
            entry.update(messages=None, response={}, unreadable=str(exc))
        return entry
