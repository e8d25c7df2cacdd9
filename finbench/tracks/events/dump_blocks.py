"""A block of a posts dump's lines read at once by Arrow's JSON reader, and the lines it
cannot vouch for handed to the line-by-line reader (``posts._post``), so that a block gives
the posts and the problems that reader gives line by line.

Arrow reads a block's fields into columns in C++, on every core, where ``json.loads`` makes
a Python object of each line's every field (about 15 of them in a Reddit dump, of which five
are read). What the two readers agree on, and what is left to the line reader:

- a line Arrow reads is one object from its first character (``{``) to its last (``}``, a
  carriage return after it allowed); then the block's rows are its lines, in turn, exactly
  when Arrow gives as many rows as there are such lines (an object cannot run over to a line
  that begins with ``{``). Any other line (not blank) is read by the line reader.
- Arrow refuses what ``json.loads`` would give in another type (a number where the schema
  says text, a fraction or an integer of 20 digits where it says an integer), two of one
  read key, an unpaired surrogate, a control character in a text: a block it refuses is read
  line by line. It does not check UTF-8, so the block is decoded first.
- older dumps write ``created_utc`` as text (``"1234567890"``): a block Arrow refuses for
  that field is read again with it as text, and a row's time taken where the text is 1-15
  digits (what ``float`` and ``int`` read alike); any other text (a fraction, an exponent,
  white space) goes to the line reader.
- a row Arrow gives null for ``title`` and a text for ``body`` is a comment only where the
  line has no ``title`` key: a line holding ``"title"`` or an escape ``\\u00..`` (a key's
  letters written escaped) goes to the line reader, as does a row breaking any rule or with
  an id outside printable ASCII (``\\S`` is decided by Python's ``str.isspace``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from finbench.tracks.events.posts import EARLIEST, LATEST, POSTS_SCHEMA, _join, _table

READ = pa.schema([("id", pa.string()), ("created_utc", pa.int64()),
                  ("subreddit", pa.string()), ("title", pa.string()),
                  ("selftext", pa.string()), ("body", pa.string())])
_PARSE = pj.ParseOptions(explicit_schema=READ, unexpected_field_behavior="ignore")
_TEXT_TIMES = pj.ParseOptions(  # an older dump's times, written as text
    explicit_schema=READ.set(READ.get_field_index("created_utc"),
                             pa.field("created_utc", pa.string())),
    unexpected_field_behavior="ignore")
_SECONDS_TEXT = "^[0-9]{1,15}$"  # whole seconds a double holds exactly, as text
_OPTIONS = pj.ReadOptions(use_threads=True, block_size=1 << 20)  # parts read on every core
_ID = "^[!-~]+$"  # printable ASCII, no space: a subset of what ``\S+`` matches
_TITLE_KEY = (b'"title"', b"\\u00")  # a key title, or a key's letter escaped
_LINE, _OPEN, _CLOSE, _CR = ord("\n"), ord("{"), ord("}"), ord("\r")
Take = Callable[[str, int, dict, list], None]


class Block:
    """The lines of ``data`` (whole lines: it ends with a line feed, or at the dump's end),
    the first of them line ``first`` of the dump."""

    def __init__(self, data: bytes, first: int) -> None:
        self.data, self.first = data, first
        a = np.frombuffer(data, np.uint8)
        ends = np.flatnonzero(a == _LINE)
        if len(a) and a[-1] != _LINE:  # the dump's last line, without a line feed
            ends = np.append(ends, len(a))
        self.bytes, self.ends = a, ends  # ends: where each line's line feed is (or would be)
        self.starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)

    def __len__(self) -> int:
        return len(self.ends)

    def line(self, k: int) -> str:
        """Line ``k`` as the line reader takes it (with its line feed, where it has one)."""
        return self.data[self.starts[k]:self.ends[k] + 1].decode("utf-8")

    def undecodable(self) -> tuple[int, UnicodeDecodeError] | None:
        """The first line that is not UTF-8 and why (its position counted in the line), or
        None."""
        try:
            self.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            k = int(np.searchsorted(self.ends, exc.start, side="left"))
            try:
                self.data[self.starts[k]:self.ends[k]].decode("utf-8")
            except UnicodeDecodeError as own:
                return k, own
            raise AssertionError("an undecodable byte outside its line") from exc
        return None

    def read(self, take: Take, columns: dict[str, list], problems: list[str]) -> pa.Table:
        """The block's posts, in line order. ``take(line, number, columns, problems)`` (the
        line reader) adds the post of a line it is handed to ``columns`` (empty before) or
        its problems to ``problems``."""
        a, starts, ends = self.bytes, self.starts, self.ends
        if not len(self):
            return POSTS_SCHEMA.empty_table()
        cr = (ends > starts) & (a[np.maximum(ends - 1, 0)] == _CR)
        last = ends - 1 - cr  # a line's last character before a carriage return
        blank = last < starts
        whole = ~blank & (a[np.minimum(starts, len(a) - 1)] == _OPEN) & (
            a[np.maximum(last, 0)] == _CLOSE)
        fast, at = _arrow_rows(self, np.flatnonzero(whole), blank)
        done = np.zeros(len(self), bool)
        done[at] = True
        slow = np.flatnonzero(~blank & ~done)
        counts = []
        for k in slow.tolist():
            before = len(columns["post_id"])
            text = self.line(k)
            if text.strip():
                take(text, self.first + k, columns, problems)
            counts.append(len(columns["post_id"]) - before)
        if not sum(counts):
            return fast
        if not fast.num_rows:
            return _table(columns)
        order = np.argsort(np.concatenate([at, np.repeat(slow, counts)]), kind="stable")
        return pa.concat_tables([fast, _table(columns)]).take(pa.array(order))


def _arrow_rows(block: Block, lines: np.ndarray, blank: np.ndarray
                ) -> tuple[pa.Table, np.ndarray]:
    """The posts Arrow reads from ``lines`` (positions of lines that are one object each)
    that keep every rule, and their lines; no posts when Arrow refuses the lines or does not
    give one row a line (``blank``: the lines that are empty)."""
    none = POSTS_SCHEMA.empty_table(), np.empty(0, np.int64)
    if not len(lines):
        return none
    data = block.data
    if len(lines) + int(blank.sum()) < len(block):  # other lines are left to the line reader
        data = b"\n".join(data[s:e] for s, e in zip(block.starts[lines].tolist(),
                                                     block.ends[lines].tolist(), strict=True))
    got = _json(data)
    if got is None or got.num_rows != len(lines):
        return none
    ident, created, subreddit, title, selftext, body = (
        pa.concat_arrays(got.column(n).chunks) for n in READ.names)
    if pa.types.is_string(created.type):  # times as text: digits alone, the others (0) fail
        digits = pc.fill_null(pc.match_substring_regex(created, _SECONDS_TEXT), False)
        created = pc.if_else(digits, created, pa.scalar("0")).cast(pa.int64())
    t3 = title.is_valid().to_numpy(zero_copy_only=False)
    t1 = ~t3 & body.is_valid().to_numpy(zero_copy_only=False)
    rules = pc.and_kleene(
        pc.and_kleene(pc.match_substring_regex(ident, _ID), pc.greater(pc.utf8_length(
            subreddit), 0)),
        pc.and_kleene(pc.greater_equal(created, EARLIEST), pc.less(created, LATEST)))
    keep = pc.fill_null(rules, False).to_numpy(zero_copy_only=False) & (t3 | t1)
    if _title_keys_doubtful(data, int(t3.sum())):  # a comment's line may hold one
        keep &= ~(t1 & np.isin(lines, _lines_holding(block, _TITLE_KEY)))
    rows = np.flatnonzero(keep)
    at, subs = pa.array(rows), pa.array(rows[t3[rows]])
    t3 = t3[rows]
    text = body.take(at)
    if len(subs):
        joined = [_join(t, s) for t, s in zip(title.take(subs).to_pylist(),
                                              selftext.take(subs).to_pylist(), strict=True)]
        text = pc.replace_with_mask(text, pa.array(t3), pa.array(joined, pa.string()))
    table = pa.Table.from_arrays([
        pc.binary_join_element_wise(pa.array(np.where(t3, "t3", "t1")), ident.take(at), "_"),
        pc.multiply(created.take(at), 1_000_000_000).cast(pa.timestamp("ns", "UTC")),
        subreddit.take(at), pa.array(np.where(t3, "submission", "comment")), text],
        schema=POSTS_SCHEMA)
    return table, lines[rows]


def _json(data: bytes) -> pa.Table | None:
    """The block's lines read by Arrow (with ``created_utc`` as text where it refuses that
    field as a number), or None where it refuses them (a line of another type, a line
    longer than Arrow's block, ...)."""
    try:
        return pj.read_json(pa.BufferReader(pa.py_buffer(data)), read_options=_OPTIONS,
                            parse_options=_PARSE)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        if "created_utc" not in str(exc):
            return None
    try:
        return pj.read_json(pa.BufferReader(pa.py_buffer(data)), read_options=_OPTIONS,
                            parse_options=_TEXT_TIMES)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None


def _title_keys_doubtful(data: bytes, submissions: int) -> bool:
    """Whether a line without a title (Arrow's null) may hold a ``title`` key: unless no
    key is written escaped and ``"title"`` is found exactly once in each line with a title
    (a line with one holds the key, so none is left for the others)."""
    return (b"\\u00" in data or data.count(b'"title"') != submissions)


def _lines_holding(block: Block, needles: tuple[bytes, ...]) -> np.ndarray:
    """The lines of the block holding any of ``needles`` (maybe repeated)."""
    found, data = [], block.data
    for needle in needles:
        at = data.find(needle)
        while at >= 0:
            found.append(at)
            at = data.find(needle, at + 1)
    return np.searchsorted(block.ends, np.array(found, np.int64), side="left")
