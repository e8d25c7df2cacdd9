"""Epoch numbers read as instants (Parquet or JSON timestamps given as numbers): the unit from
the magnitude, integers exact, floats rounded up to the microsecond (never to an earlier
instant), anything out of the bands flagged, not guessed. Checked against exact rational
arithmetic."""

import datetime as dt
import math
from fractions import Fraction

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.core.errors import DataError
from finbench.data.ingest import ingest_bars, ingest_headlines
from finbench.data.store import Store
from finbench.data.timestamps import parse_utc
from tests.helpers import HEADER, bar_rows, write

BANDS = {10**9: 10**9, 10**12: 10**6, 10**15: 10**3, 10**18: 1}  # band's low end: ns per unit
# read below 2262-01-01 (the years int64 nanoseconds hold whole), counted in days here
LAST_NS = Fraction((dt.date(2262, 1, 1) - dt.date(1970, 1, 1)).days * 86_400 * 10**9)


def reference(value: int | float) -> int | None:
    """The instant in nanoseconds that ``value`` names, by exact arithmetic; None: flagged."""
    exact = Fraction(value)
    for low, scale in BANDS.items():
        if low <= exact < 10 * low:
            if math.floor(exact) * scale >= LAST_NS:
                return None
            ns = exact * scale
            return int(ns) if isinstance(value, int) else math.ceil(ns / 1000) * 1000
    return None


def parsed(values: list) -> list[int | None]:
    result = parse_utc(pd.Series(values), timezone=None)
    return [None if bad else int(v.value)
            for v, bad in zip(result.values, result.unparseable, strict=True)]


def in_bands(draw_number):
    return st.one_of(*[draw_number(low, 10 * low) for low in BANDS], draw_number(-10**10, 10**19))


@settings(max_examples=300)
@given(st.lists(in_bands(lambda a, b: st.integers(max(a, -2**63), min(b, 2**63 - 1))),
                min_size=1, max_size=8))
def test_integer_epochs_are_exact_in_their_unit_or_flagged(values):
    assert parsed(values) == [reference(v) for v in values]


@settings(max_examples=300)
@given(st.lists(in_bands(lambda a, b: st.floats(a, b, allow_nan=False)), min_size=1,
                max_size=8))
def test_float_epochs_round_up_to_the_microsecond_never_down(values):
    got = parsed(values)
    assert got == [reference(v) for v in values]
    for v, ns in zip(values, got, strict=True):
        if ns is not None:  # never before the instant the float holds, less than 1 us after
            scale = next(s for low, s in BANDS.items() if low <= v < 10 * low)
            assert 0 <= ns - Fraction(v) * scale < 1000 and ns % 1000 == 0


def test_a_headline_stamped_with_epoch_numbers(tmp_path):
    """The same instant in seconds, milliseconds, microseconds and nanoseconds; a half
    second kept, not cut off (cut, the headline would be available half a second early);
    a number past 2261 named as the file wrote it."""
    lines = [f'{{"id": {i}, "published_at": {v}, "tickers": ["AAPL"], "headline": "h{i}", '
             f'"source": "s"}}' for i, v in enumerate(
                 [1736949600, 1736949600000, 1736949600000000, 1736949600000000000,
                  1736949600.5, 1736949600.1])]
    ingest_headlines(write(tmp_path / "news.jsonl", "\n".join(lines) + "\n"), tmp_path / "s")
    got = Store(tmp_path / "s").read_headlines().set_index("id")["published_at"]
    whole = pd.Timestamp("2025-01-15 14:00:00", tz="UTC")
    assert [got[str(i)] for i in range(4)] == [whole] * 4
    assert got["4"] == whole + pd.Timedelta(milliseconds=500)
    assert got["5"] == whole + pd.Timedelta(milliseconds=100)  # the float is 0.09999990 s

    bad = write(tmp_path / "late.jsonl", '{"id": 1, "published_at": 9999999999, "tickers": '
                '["AAPL"], "headline": "h", "source": "s"}\n')
    with pytest.raises(DataError) as info:
        ingest_headlines(bad, tmp_path / "s2")
    assert ("rule 'published_at given as a number: a number is a Unix epoch count: seconds "
            "from 1e9, milliseconds from 1e12, microseconds from 1e15, nanoseconds from 1e18 "
            "(each from 2001), before 2262' broken in 1 row(s): row 1 (9999999999)"
            in str(info.value))


FAR = ["9999-01-15T14:30:00Z", "2262-05-01T00:00:00Z", "1600-01-01T00:00:00Z"]


@pytest.mark.parametrize("form", ["aware text", "naive text", "datetime64[us]",
                                  "datetime64[us, UTC]"])
def test_instants_int64_nanoseconds_cannot_hold_are_flagged_in_every_form(form):
    """A year past 2261 or before 1678 (a typo: 9999, 2300) ended ingest in pandas'
    OutOfBoundsDatetime; it is now a flagged row like any unreadable one, the rows beside it
    read."""
    given = [*FAR, "2261-12-31T00:00:00Z", "1678-01-01T00:00:00Z", "2025-01-15T14:30:00Z"]
    if form == "naive text":
        raw = pd.Series([t.removesuffix("Z") for t in given])
    elif form == "aware text":
        raw = pd.Series(given)
    else:
        raw = pd.Series(pd.to_datetime([t.removesuffix("Z") for t in given]).as_unit("us"))
        if form.endswith("UTC]"):
            raw = raw.dt.tz_localize("UTC")
    parsed = parse_utc(raw, timezone="UTC")
    assert parsed.unparseable.tolist() == [True] * 3 + [False] * 3
    assert parsed.values.isna().tolist() == [True] * 3 + [False] * 3
    assert [str(t) for t in parsed.values[3:]] == ["2261-12-31 00:00:00+00:00",
                                                   "1678-01-01 00:00:00+00:00",
                                                   "2025-01-15 14:30:00+00:00"]


def test_a_bar_file_with_a_far_year_is_named_as_the_file_wrote_it(tmp_path):
    text = HEADER + bar_rows("AAPL", [("2025-01-15T14:30:00Z", 101.0, 100.0),
                                      ("9999-01-15T14:31:00Z", 101.0, 100.0)])
    with pytest.raises(DataError) as info:
        ingest_bars(write(tmp_path / "bars.csv", text), tmp_path / "s")
    assert ("rule 'timestamp parses as a date-time of the years 1678-2261' broken in 1 row(s): "
            "row 2 (ts='9999-01-15T14:31:00Z')") in str(info.value)
