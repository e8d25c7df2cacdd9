"""A frozen snapshot of posts from a community dump (docs/spec.md §11.1): Reddit's dump
format, one JSON object a line, zstd-compressed (``.zst``) or plain, read as a stream and
written as Parquet partitions by UTC date, never held whole.

A submission (a line with ``title``) becomes ``t3_<id>`` with text ``title`` and ``selftext``;
a comment (a line with ``body``) becomes ``t1_<id>`` with text ``body``: Reddit's own full
names, so the two id spaces never meet. A post is available at ``created_utc``; the dump
holds each post as it was when it was archived.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import math
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from finbench.core.errors import DataError
from finbench.data.user_files import TEXT_ENCODING, json_object

POSTS_SCHEMA = pa.schema([("post_id", pa.string()), ("created_utc", pa.timestamp("ns", "UTC")),
                          ("subreddit", pa.string()), ("kind", pa.string()),
                          ("text", pa.string())])
EARLIEST = int(dt.datetime(2005, 1, 1, tzinfo=dt.UTC).timestamp())  # Reddit's first year
LATEST = int(dt.datetime(2100, 1, 1, tzinfo=dt.UTC).timestamp())
BATCH_LINES = 100_000
MAX_PROBLEMS = 50
# the dumps are compressed with long windows (zstd --long=31): the decoder must allow them
MAX_WINDOW = 2 ** 31
_NO_SPACE = re.compile(r"\S+")  # \S: what str.isspace() says is not whitespace


class _Hashing(io.RawIOBase):
    """A binary file read through, its SHA-256 taken on the way (one pass over the dump)."""

    def __init__(self, fh) -> None:
        self.fh, self.sha, self.size = fh, hashlib.sha256(), 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.fh.read(len(buffer))
        self.sha.update(data)
        self.size += len(data)
        buffer[:len(data)] = data
        return len(data)


class _Truncated(Exception):
    """The compressed stream ended inside a frame (``offset``: where that frame began)."""

    def __init__(self, offset: int, size: int) -> None:
        self.offset, self.size = offset, size
        super().__init__(offset, size)


class _Frames(io.RawIOBase):
    """The decompressed bytes of a zstd file of one frame or several, read through
    ``source``. At the end of the file every frame must be complete: a frame that never
    completes (a dump cut short by a failed download or a full disk) raises
    :class:`_Truncated`, where a stream reader would end quietly with what it had (nothing,
    for a dump shorter than one block)."""

    CHUNK = 1 << 17

    def __init__(self, source, zstandard) -> None:
        self.source = source
        self.dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
        self.frame = None  # the decompressor of the frame being read
        self.frame_start = self.consumed = 0  # compressed bytes: where it began, read so far
        self.out, self.at = memoryview(b""), 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while self.at >= len(self.out):
            data = self.source.read(self.CHUNK)
            if not data:
                if self.frame is not None:
                    raise _Truncated(self.frame_start, self.consumed)
                return 0
            self.out, self.at = memoryview(self._decompress(data)), 0
        n = min(len(buffer), len(self.out) - self.at)
        buffer[:n] = self.out[self.at:self.at + n]
        self.at += n
        return n

    def _decompress(self, data: bytes) -> bytes:
        parts = []
        while data:
            if self.frame is None:
                self.frame, self.frame_start = self.dctx.decompressobj(), self.consumed
            parts.append(self.frame.decompress(data))
            if self.frame.eof:  # the frame is whole; what follows starts the next one
                rest = self.frame.unused_data
                self.consumed += len(data) - len(rest)
                data, self.frame = rest, None
            else:
                self.consumed += len(data)
                data = b""
        return b"".join(parts)


def _lines(path: Path, hashing: _Hashing) -> Iterator[str]:
    """The dump's lines, UTF-8 (a byte-order mark at its start skipped, as in every user
    file: :data:`~finbench.data.user_files.TEXT_ENCODING`)."""
    if path.suffix.lower() == ".zst":
        try:
            import zstandard
        except ImportError as exc:  # pragma: no cover - the events extra installs it
            raise DataError(f"{path}: reading .zst dumps needs the zstandard package "
                            "(pip install 'finbench[events]')") from exc
        frames = io.BufferedReader(_Frames(hashing, zstandard), buffer_size=1 << 20)
        yield from io.TextIOWrapper(frames, encoding=TEXT_ENCODING, errors="strict",
                                    newline="\n")
    else:
        yield from io.TextIOWrapper(io.BufferedReader(hashing), encoding=TEXT_ENCODING,
                                    newline="\n")


def read_dump(path: str | Path, facts: dict) -> Iterator[pa.Table]:
    """The dump's posts, a batch (:data:`BATCH_LINES` lines) at a time, as tables of
    :data:`POSTS_SCHEMA`. Every broken rule is collected with its line number and raised as
    one :class:`DataError` at the end (after the whole file is read); the caller writes
    nothing then. Once read through, ``facts`` holds the dump's name, SHA-256, bytes and
    lines."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    problems: list[str] = []
    columns: dict[str, list] = {name: [] for name in POSTS_SCHEMA.names}
    with open(path, "rb") as raw:
        hashing = _Hashing(raw)
        number = 0
        try:
            for number, line in enumerate(_lines(path, hashing), 1):
                if line.strip():
                    _post(line, number, columns, problems)
                if len(columns["post_id"]) >= BATCH_LINES:
                    yield _table(columns)
        except _Truncated as cut:
            problems.append(f"the zstd stream ends inside a frame that began at byte "
                            f"{cut.offset} and never completes: the file is truncated at byte "
                            f"{cut.size} (after line {number}); download or copy it again")
        except (UnicodeDecodeError, OSError) as exc:
            problems.append(f"line {number + 1}: cannot be decoded ({exc})")
        except Exception as exc:  # zstandard.ZstdError: a damaged or truncated frame
            if type(exc).__module__.startswith("zstandard") or "zstd" in repr(exc).lower():
                problems.append(f"after line {number}: the zstd stream is damaged ({exc})")
            else:
                raise
    if problems:
        more = len(problems) - MAX_PROBLEMS
        raise DataError(f"{path}: {len(problems)} problem(s); nothing was written",
                        [f"{path}: {p}" for p in problems[:MAX_PROBLEMS]]
                        + ([f"... and {more} more"] if more > 0 else []))
    if columns["post_id"]:
        yield _table(columns)
    facts.update({"file": path.name, "sha256": hashing.sha.hexdigest(),
                      "bytes": hashing.size, "lines": number})


def _post(line: str, number: int, columns: dict[str, list], problems: list[str]) -> None:
    """One dump line checked and added to ``columns`` (or its problems to ``problems``)."""
    obj = json_object(line)
    if isinstance(obj, str):
        problems.append(f"line {number}: {obj}")
        return
    ident, created, subreddit = obj.get("id"), obj.get("created_utc"), obj.get("subreddit")
    if "title" in obj:
        kind, text = "t3", _join(obj.get("title"), obj.get("selftext"))
    elif "body" in obj:
        kind, text = "t1", obj.get("body")
    else:
        kind, text = None, None
    # what nearly every line of a dump is (a text id, whole seconds as a JSON integer): taken
    # at once; any other line is checked rule by rule below, and named where it breaks one
    if not (type(ident) is str and _NO_SPACE.fullmatch(ident) and type(created) is int
            and EARLIEST <= created < LATEST and kind and type(text) is str
            and type(subreddit) is str and subreddit):
        why = _problems(obj, ident, kind, text, subreddit)
        if why:
            problems.extend(f"line {number}: {w}" for w in why)
            return
        created = _seconds(created)
    columns["post_id"].append(f"{kind}_{ident}")
    columns["created_utc"].append(created * 1_000_000_000)
    columns["subreddit"].append(subreddit)
    columns["kind"].append("submission" if kind == "t3" else "comment")
    columns["text"].append(text)


def _problems(obj: dict, ident, kind, text, subreddit) -> list[str]:
    """The rules a dump line's object breaks."""
    why = []
    if not isinstance(ident, str) or not ident.strip() or any(c.isspace() for c in ident):
        why.append(f"id {ident!r}: a non-empty text without whitespace")
    if _seconds(obj.get("created_utc")) is None:
        why.append(f"created_utc {obj.get('created_utc')!r}: whole seconds since 1970 "
                   "between 2005 and 2100")
    if kind is None:
        why.append("neither title (a submission) nor body (a comment)")
    elif not isinstance(text, str):
        why.append("title/selftext or body: text")
    if not isinstance(subreddit, str) or not subreddit:
        why.append(f"subreddit {subreddit!r}: a non-empty text")
    return why


def _seconds(value) -> int | None:
    """``created_utc`` as whole seconds (dumps hold numbers or numeric text)."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer of 400 digits
        return None
    if not math.isfinite(number) or number != int(number):
        return None
    number = int(number)
    return number if EARLIEST <= number < LATEST else None


def _join(title, selftext) -> str | None:
    if not isinstance(title, str):
        return None
    body = selftext if isinstance(selftext, str) else ""
    return title if not body.strip() else f"{title}\n\n{body}"


def _table(columns: dict[str, list]) -> pa.Table:
    arrays = [pa.array(columns["post_id"], pa.string()),
              pa.array(np.array(columns["created_utc"], dtype=np.int64)).cast(
                  pa.timestamp("ns", "UTC")),
              pa.array(columns["subreddit"], pa.string()), pa.array(columns["kind"], pa.string()),
              pa.array(columns["text"], pa.string())]
    for values in columns.values():
        values.clear()
    return pa.Table.from_arrays(arrays, schema=POSTS_SCHEMA)
