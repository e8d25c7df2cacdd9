"""A posts dump read a block of lines at a time by Arrow's JSON reader
(finbench/tracks/events/dump_blocks.py) gives the posts and the problems that reading each
line in turn gives (tests/reference.py), in any mix of lines, blocks and batches."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
import zstandard
from hypothesis import example, given, settings
from hypothesis import strategies as st

import finbench.tracks.events.posts as posts
from finbench.core.errors import DataError
from tests.reference import naive_dump_post
from tests.test_events import DUMP_LINES

DAY = 1704207600  # 2024-01-02 15:00 UTC
GOOD = st.builds(lambda n, t, s, sub, kind, text: json.dumps(
    {"id": f"k{n}", "created_utc": DAY + t, "subreddit": sub, "score": n % 7,
     "edited": bool(n % 2), "all_awardings": [],
     **({"title": text, "selftext": s} if kind else {"body": text})}),
    st.integers(0, 10**6), st.integers(0, 10**6), st.sampled_from(["", " \n ", "more", "é"]),
    st.sampled_from(["x", "wallstreetbets"]), st.booleans(),
    st.text(st.characters(codec="utf-8"), max_size=12))
_ok = '"created_utc": 1704207600, "subreddit": "x"'
# lines where the two readers could part: the title key (null, escaped, nested, inside a
# text), keys escaped, a second object, an object over two lines, white space, carriage
# returns, NaN, numbers no double holds, unpaired surrogates (in a read field or another)
ODD = st.sampled_from([
    "", "\r", "   ", "\t", "\u3000", "\x0b", "\x1c", "\ufeff",
    '{"id": "n1", ' + _ok + ', "title": null, "body": "b"}',
    '{"id": "e1", ' + _ok + ', "t\\u0069tle": "T", "body": "b"}',
    '{"id": "e2", ' + _ok + ', "titl\\u0065": null, "body": "b"}',
    '{"i\\u0064": "e3", ' + _ok + ', "body": "b"}',
    '{"id": "e4", ' + _ok + ', "body": "\\u00e9t\\u00e9"}',
    '{"id": "m1", ' + _ok + ', "body": "b", "media": {"title": "m"}}',
    '{"id": "m2", ' + _ok + ', "body": "it said \\"title"}',
    '{"id": "m3", ' + _ok + ', "body": "\\"title\\" \\"title\\""}',
    '{"id": "d1", ' + _ok + ', "body": "b", "body": "c"}',
    '{"id": "d2", ' + _ok + ', "body": "b", "x": 1, "x": 2}',
    '{"id": "two", ' + _ok + ', "body": "b"}{"id": "three", ' + _ok + ', "body": "c"}',
    '{"id": "split", ' + _ok + ',\n"body": "b"}',
    '  {"id": "lead", ' + _ok + ', "body": "b"}',
    '{"id": "trail", ' + _ok + ', "body": "b"}  ',
    '{"id": "cr", ' + _ok + ', "body": "b"}\r',
    '{"id": "nan", ' + _ok + ', "body": "b", "q": NaN}',
    '{"id": "inf", ' + _ok + ', "body": "b", "q": 1e999}',
    '{"id": "big", ' + _ok + ', "body": "b", "q": 123456789012345678901234567890}',
    '{"id": "s1", ' + _ok + ', "body": "a\\ud800"}',
    '{"id": "s2", ' + _ok + ', "body": "b", "q": "\\udc00"}',
    '{"id": "s3", ' + _ok + ', "body": "\\ud83d\\ude00"}',
    '{"id": "f1", "created_utc": 1704207600.0, "subreddit": "x", "body": "b"}',
    '{"id": "k1", "created_utc": "1704207600", "subreddit": "x", "body": "b"}',
    '{"id": "x\\u2003y", ' + _ok + ', "body": "b"}',
    '{"id": "ü", ' + _ok + ', "body": "b"}',
    '{"id": "u", ' + _ok + ', "body": "b\\u0000c"}',
    '{"id": "t", ' + _ok + ', "title": "T", "selftext": "\\u001c"}',
    '{"id": "t2", ' + _ok + ', "title": "", "body": null}',
    "[1, 2]", "{x", "{}",
])
# an older dump's times written as text: digits, and texts ``float`` reads otherwise than
# ``int`` or not at all (a block of these alone is read by Arrow with the times as text)
TEXT_TIMES = st.one_of(st.integers(0, 10**6).map(lambda t: str(DAY + t)), st.sampled_from([
    "01704207600", "001704207600", " 1704207600", "1704207600 ", "1704207600.0", "1.7042076e9",
    "1_704_207_600", "+1704207600", "-1704207600", "", "nan", "inf", "17042076000000000",
    "1704207600000000", "١٧٠٤٢٠٧٦٠٠", "0x65941e70", "12"]))
TEXT_TIMED = st.builds(lambda n, at, kind: json.dumps(
    {"id": f"o{n}", "created_utc": at, "subreddit": "x",
     **({"title": "T", "selftext": ""} if kind else {"body": "b"})}),
    st.integers(0, 10**6), TEXT_TIMES, st.booleans())
LINES = st.one_of(st.lists(st.one_of(GOOD, GOOD, DUMP_LINES, ODD, TEXT_TIMED), min_size=1,
                           max_size=30),
                  st.lists(TEXT_TIMED, min_size=1, max_size=30))


def _naive(raw: bytes) -> tuple[list[tuple], list[str], int]:
    """Each line decoded and read in turn (reading stops at a line that is not UTF-8):
    the posts, the problems and the lines read."""
    raw = raw.removeprefix(posts.BOM)
    pieces = raw.split(b"\n")
    lines = [p + b"\n" for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    rows, problems = [], []
    for number, line in enumerate(lines, 1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            try:
                line.removesuffix(b"\n").decode("utf-8")
            except UnicodeDecodeError as exc:
                problems.append(f"line {number}: cannot be decoded ({exc})")
            return rows, problems, number - 1
        if text.strip():
            row, why = naive_dump_post(text, number)
            problems += why
            rows += [row] if row else []
    return rows, problems, len(lines)


def _read(path) -> tuple[list[tuple], list[str], list[int], dict]:
    """What ``read_dump`` gives: the posts, the problems, each batch's size, the facts."""
    facts: dict = {}
    tables = []
    try:
        for table in posts.read_dump(path, facts):
            tables.append(table)
    except DataError as exc:
        return [], exc.problems, [t.num_rows for t in tables], facts
    every = pa.concat_tables([posts.POSTS_SCHEMA.empty_table(), *tables])
    every = every.set_column(1, "created_utc", every.column("created_utc").cast(pa.int64()))
    return ([tuple(r.values()) for r in every.to_pylist()], [],
            [t.num_rows for t in tables], facts)


@settings(max_examples=400)
@given(LINES, st.lists(st.sampled_from(["\n", "\r\n"]), min_size=30, max_size=30),
       st.booleans(), st.booleans(), st.booleans(), st.integers(1, 600), st.integers(1, 9),
       st.sampled_from([None, 3, 5]))
@example([json.dumps({"id": "a", "created_utc": DAY, "subreddit": "x", "body": "b"})],
         ["\n"] * 30, False, False, False, 600, 1, None)
@example([  # a line of two objects beside an object over two lines: as many rows as lines
    '{"id": "two", ' + _ok + ', "body": "b"}{"id": "three", ' + _ok + ', "body": "c"}',
    '{"id": "split", ' + _ok + ',\n"body": "b"}'], ["\n"] * 30, True, False, False, 600, 9,
    None)
def test_a_dump_read_by_blocks_is_read_as_line_by_line(tmp_path_factory, lines, ends, last,
                                                       bom, zst, block, batch, bad):
    """Any lines (well-formed, breaking any rule, or where Arrow and ``json.loads`` could
    read otherwise), any line ends, a byte-order mark, plain or zstd, in blocks of any size:
    the same posts in the same order, in batches of ``BATCH_LINES``, or the same problems;
    ``bad``: a line that is not UTF-8 (reading stops there)."""
    raw = "".join(line + end for line, end in zip(lines, ends, strict=False)).encode()
    if not last:
        raw = raw[:-1] if raw.endswith(b"\n") else raw
    if bad is not None:
        cut = raw.split(b"\n")
        cut.insert(min(bad, len(cut)), b'{"id": "\xff"}')
        raw = b"\n".join(cut)
    raw = (posts.BOM if bom else b"") + raw
    path = tmp_path_factory.mktemp("dump") / ("d.zst" if zst else "d.jsonl")
    path.write_bytes(zstandard.ZstdCompressor().compress(raw) if zst else raw)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(posts, "BLOCK_BYTES", block)
        patch.setattr(posts, "BATCH_LINES", batch)
        rows, problems, sizes, facts = _read(path)
    want_rows, want_problems, read = _naive(raw)
    if want_problems:
        more = len(want_problems) - posts.MAX_PROBLEMS
        assert problems == ([f"{path}: {p}" for p in want_problems[:posts.MAX_PROBLEMS]]
                            + ([f"... and {more} more"] if more > 0 else []))
        return
    assert not problems
    assert rows == want_rows
    assert sizes == [batch] * (len(rows) // batch) + ([len(rows) % batch] if len(rows) % batch
                                                      else [])
    assert facts["lines"] == read and facts["bytes"] == path.stat().st_size


def test_well_formed_lines_are_read_by_arrow_and_the_others_by_the_line_reader(
        tmp_path, monkeypatch):
    """A dump of well-formed lines is read with no line handed to the line reader; a line
    Arrow cannot vouch for (an explicit null title beside a body) is handed over alone, and
    named as the line reader names it."""
    handed = []
    real = posts._post
    monkeypatch.setattr(posts, "_post", lambda line, n, *a: handed.append(n) or real(
        line, n, *a))
    good = [json.dumps({"id": f"a{i}", "created_utc": DAY + i, "subreddit": "x",
                        **({"title": "T", "selftext": "s"} if i % 3 else {"body": "b"})})
            for i in range(50)]
    dump = tmp_path / "good.jsonl"
    dump.write_text("\n".join(good) + "\n")
    rows, problems, _, facts = _read(dump)
    assert len(rows) == 50 and not problems and facts["lines"] == 50 and handed == []
    assert rows[1] == ("t3_a1", (DAY + 1) * 10**9, "x", "submission", "T\n\ns")
    assert rows[0] == ("t1_a0", DAY * 10**9, "x", "comment", "b")
    good[7] = '{"id": "n", ' + _ok + ', "title": null, "body": "b"}'
    dump.write_text("\n".join(good) + "\n")
    _, problems, _, _ = _read(dump)
    assert handed == [8]
    assert problems == [f"{dump}: line 8: title/selftext or body: text"]


def test_an_older_dumps_times_as_text_are_read_by_arrow(tmp_path, monkeypatch):
    """A dump whose times are text (``"1704207600"``) is read by Arrow, no line handed to
    the line reader, the times those of the numbers; a time that is other text (a fraction)
    is handed over alone, and read as the line reader reads it."""
    handed = []
    real = posts._post
    monkeypatch.setattr(posts, "_post", lambda line, n, *a: handed.append(n) or real(
        line, n, *a))
    lines = [json.dumps({"id": f"a{i}", "created_utc": str(DAY + i), "subreddit": "x",
                         "body": "b"}) for i in range(20)]
    dump = tmp_path / "old.jsonl"
    dump.write_text("\n".join(lines) + "\n")
    rows, problems, _, _ = _read(dump)
    assert not problems and handed == []
    assert [r[1] for r in rows] == [(DAY + i) * 10**9 for i in range(20)]
    lines[3] = lines[3].replace(f'"{DAY + 3}"', f'"{DAY + 3}.0"')
    dump.write_text("\n".join(lines) + "\n")
    rows, problems, _, _ = _read(dump)
    assert not problems and handed == [4] and rows[3][1] == (DAY + 3) * 10**9


def test_an_unpaired_surrogate_is_named_not_raised(tmp_path):
    """``json.loads`` reads ``"\\ud800"`` into a text UTF-8 cannot hold; the ingest ended in
    a UnicodeEncodeError before. Now the line is named; a pair is one character."""
    dump = tmp_path / "s.jsonl"
    dump.write_text('{"id": "s", ' + _ok + ', "body": "a\\ud800"}\n'
                    '{"id": "p", ' + _ok + ', "body": "\\ud83d\\ude00"}\n')
    _, problems, _, _ = _read(dump)
    assert problems == [f"{dump}: line 1: title/selftext or body: holds an unpaired "
                        "surrogate (an escape \\ud800-\\udfff alone), which is no Unicode text"]
    dump.write_text('{"id": "p", ' + _ok + ', "body": "\\ud83d\\ude00"}\n')
    assert _read(dump)[0] == [("t1_p", DAY * 10**9, "x", "comment", "\U0001f600")]
