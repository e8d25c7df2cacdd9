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
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from finbench.core.errors import DataError
from finbench.data.ingest import json_object

POSTS_SCHEMA = pa.schema([("post_id", pa.string()), ("created_utc", pa.timestamp("ns", "UTC")),
                          ("subreddit", pa.string()), ("kind", pa.string()),
                          ("text", pa.string())])
EARLIEST = int(dt.datetime(2005, 1, 1, tzinfo=dt.UTC).timestamp())  # Reddit's first year
LATEST = int(dt.datetime(2100, 1, 1, tzinfo=dt.UTC).timestamp())
BATCH_LINES = 100_000
MAX_PROBLEMS = 50
# the dumps are compressed with long windows (zstd --long=31): the decoder must allow them
MAX_WINDOW = 2 ** 31


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


def _lines(path: Path, hashing: _Hashing) -> Iterator[str]:
    if path.suffix.lower() == ".zst":
        try:
            import zstandard
        except ImportError as exc:  # pragma: no cover - the events extra installs it
            raise DataError(f"{path}: reading .zst dumps needs the zstandard package "
                            "(pip install 'finbench[events]')") from exc
        reader = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW).stream_reader(hashing)
        yield from io.TextIOWrapper(reader, encoding="utf-8", errors="strict", newline="\n")
    else:
        yield from io.TextIOWrapper(io.BufferedReader(hashing), encoding="utf-8",
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
    why = []
    ident = obj.get("id")
    if not isinstance(ident, str) or not ident.strip() or any(c.isspace() for c in ident):
        why.append(f"id {ident!r}: a non-empty text without whitespace")
    created = _seconds(obj.get("created_utc"))
    if created is None:
        why.append(f"created_utc {obj.get('created_utc')!r}: whole seconds since 1970 "
                   "between 2005 and 2100")
    if "title" in obj:
        kind, text = "t3", _join(obj.get("title"), obj.get("selftext"))
    elif "body" in obj:
        kind, text = "t1", obj.get("body")
    else:
        kind, text = None, None
        why.append("neither title (a submission) nor body (a comment)")
    if kind and not isinstance(text, str):
        why.append("title/selftext or body: text")
    subreddit = obj.get("subreddit")
    if not isinstance(subreddit, str) or not subreddit:
        why.append(f"subreddit {subreddit!r}: a non-empty text")
    if why:
        problems.extend(f"line {number}: {w}" for w in why)
        return
    columns["post_id"].append(f"{kind}_{ident}")
    columns["created_utc"].append(created * 1_000_000_000)
    columns["subreddit"].append(subreddit)
    columns["kind"].append("submission" if kind == "t3" else "comment")
    columns["text"].append(text)


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
