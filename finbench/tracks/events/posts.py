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
import math
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from finbench.core.errors import DataError
from finbench.data.user_files import json_object

POSTS_SCHEMA = pa.schema([("post_id", pa.string()), ("created_utc", pa.timestamp("ns", "UTC")),
                          ("subreddit", pa.string()), ("kind", pa.string()),
                          ("text", pa.string())])
EARLIEST = int(dt.datetime(2005, 1, 1, tzinfo=dt.UTC).timestamp())  # Reddit's first year
LATEST = int(dt.datetime(2100, 1, 1, tzinfo=dt.UTC).timestamp())
BATCH_LINES = 100_000
BLOCK_BYTES = 8 << 20  # a dump read a block of lines at a time
BOM = "\ufeff".encode()
MAX_PROBLEMS = 50
# the dumps are compressed with long windows (zstd --long=31): the decoder must allow them
MAX_WINDOW = 2 ** 31
_NO_SPACE = re.compile(r"\S+")  # \S: what str.isspace() says is not whitespace


class _Hashing:
    """A binary file read through, its SHA-256 taken on the way (one pass over the dump)."""

    def __init__(self, fh) -> None:
        self.fh, self.sha, self.size = fh, hashlib.sha256(), 0

    def read(self, n: int) -> bytes:
        data = self.fh.read(n)
        self.sha.update(data)
        self.size += len(data)
        return data


class _Truncated(Exception):
    """The compressed stream ended inside a frame (``offset``: where that frame began)."""

    def __init__(self, offset: int, size: int) -> None:
        self.offset, self.size = offset, size
        super().__init__(offset, size)


class _Frames:
    """The decompressed bytes of a zstd file of one frame or several, read through
    ``source``. At the end of the file every frame must be complete: a frame that never
    completes (a dump cut short by a failed download or a full disk) raises
    :class:`_Truncated`, where a stream reader would end quietly with what it had (nothing,
    for a dump shorter than one block)."""

    CHUNK = 1 << 17

    def __init__(self, source: _Hashing, zstandard) -> None:
        self.source = source
        self.dctx = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
        self.frame = None  # the decompressor of the frame being read
        self.frame_start = self.consumed = 0  # compressed bytes: where it began, read so far

    def pieces(self) -> Iterator[bytes]:
        """The decompressed bytes, a piece at a time."""
        while data := self.source.read(self.CHUNK):
            if out := self._decompress(data):
                yield out
        if self.frame is not None:
            raise _Truncated(self.frame_start, self.consumed)

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


def _pieces(path: Path, hashing: _Hashing) -> Iterator[bytes]:
    """The dump's bytes (decompressed, for a ``.zst`` file), a piece at a time."""
    if path.suffix.lower() == ".zst":
        try:
            import zstandard
        except ImportError as exc:  # pragma: no cover - the events extra installs it
            raise DataError(f"{path}: reading .zst dumps needs the zstandard package "
                            "(pip install 'finbench[events]')") from exc
        yield from _Frames(hashing, zstandard).pieces()
    else:
        while data := hashing.read(BLOCK_BYTES):
            yield data


def _blocks(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """Whole lines, about :data:`BLOCK_BYTES` at a time (a line longer than that whole:
    the bytes held are joined again only when they have doubled). Where ``pieces`` raises,
    the whole lines held are given first."""
    held: list[bytes] = []
    size, enough = 0, BLOCK_BYTES
    try:
        for piece in pieces:
            held.append(piece)
            size += len(piece)
            if size >= enough:
                data = b"".join(held)
                cut = data.rfind(b"\n") + 1
                held, size = [data[cut:]], len(data) - cut
                enough = BLOCK_BYTES if cut else 2 * size
                if cut:
                    yield data[:cut]
    except Exception:
        data = b"".join(held)
        if cut := data.rfind(b"\n") + 1:
            yield data[:cut]
        raise
    if data := b"".join(held):
        yield data


def read_dump(path: str | Path, facts: dict) -> Iterator[pa.Table]:
    """The dump's posts, :data:`BATCH_LINES` at a time, as tables of :data:`POSTS_SCHEMA`:
    a block of lines read at once (:mod:`~finbench.tracks.events.dump_blocks`), exactly as
    :func:`_post` reads each line. Every broken rule is collected with its line number and
    raised as one :class:`DataError` at the end (after the whole file is read); the caller
    writes nothing then. Once read through, ``facts`` holds the dump's name, SHA-256, bytes
    and lines."""
    from finbench.tracks.events.dump_blocks import Block

    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    problems: list[str] = []
    columns: dict[str, list] = {name: [] for name in POSTS_SCHEMA.names}
    held: list[pa.Table] = []  # posts read and not yet given
    with open(path, "rb") as raw:
        hashing = _Hashing(raw)
        number = 0  # the lines read
        try:
            for data in _blocks(_pieces(path, hashing)):
                if not number:  # a UTF-8 byte-order mark at the start is dropped, as in
                    data = data.removeprefix(BOM)  # every user file (TEXT_ENCODING)
                block = Block(data, number + 1)
                bad = block.undecodable()
                if bad is not None:  # the lines before it are read; reading stops there
                    k, exc = bad
                    held.append(Block(data[:block.starts[k]], number + 1).read(
                        _post, columns, problems))
                    problems.append(f"line {number + k + 1}: cannot be decoded ({exc})")
                    number += k
                    break
                held.append(block.read(_post, columns, problems))
                number += len(block)
                yield from _batches(held)
        except _Truncated as cut:
            problems.append(f"the zstd stream ends inside a frame that began at byte "
                            f"{cut.offset} and never completes: the file is truncated at byte "
                            f"{cut.size} (after line {number}); download or copy it again")
        except OSError as exc:
            problems.append(f"line {number + 1}: cannot be read ({exc})")
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
    yield from _batches(held, every=True)
    facts.update({"file": path.name, "sha256": hashing.sha.hexdigest(),
                  "bytes": hashing.size, "lines": number})


def _batches(held: list[pa.Table], *, every: bool = False) -> Iterator[pa.Table]:
    """Tables of :data:`BATCH_LINES` posts (one chunk each; with ``every``, then one of the
    rest) taken from the front of ``held``; what is left stays there."""
    rows = sum(t.num_rows for t in held)
    while rows >= BATCH_LINES or (every and rows):
        table = pa.concat_tables(held) if len(held) > 1 else held[0]
        size = min(BATCH_LINES, rows)
        yield table.slice(0, size).combine_chunks()
        held[:] = [table.slice(size)]
        rows -= size


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
            and type(subreddit) is str and subreddit and _unicode(ident, subreddit, text)):
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
    for name, value in (("id", ident), ("subreddit", subreddit),
                        ("title/selftext or body", text)):
        if isinstance(value, str) and not _unicode(value):
            why.append(f"{name}: holds an unpaired surrogate (an escape \\ud800-\\udfff "
                       "alone), which is no Unicode text")
    return why


def _unicode(*texts: str) -> bool:
    """Whether every text is Unicode that UTF-8 can hold: ``json.loads`` reads an unpaired
    surrogate escape (``"\\ud800"``) into a text no file can store."""
    try:
        for text in texts:
            text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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
