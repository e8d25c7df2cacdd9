"""The packed-key as-of search equals a per-ticker ``searchsorted``, whatever the keys."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.data.bars import _search_per_ticker, lows_of, search_by_ticker

NAMES = ["A", "B", "C", "D"]


@st.composite
def sliced_keys(draw):
    sizes = draw(st.lists(st.integers(0, 6), min_size=1, max_size=4))
    keys, bounds, at = [], {}, 0
    for name, size in zip(NAMES, sizes, strict=False):
        values = sorted(draw(st.lists(st.integers(-10**12, 10**12), min_size=size,
                                      max_size=size)))
        if size:
            bounds[name] = (at, at + size)
        keys += values
        at += size
    n = draw(st.integers(0, 12))
    tickers = draw(st.lists(st.sampled_from([*NAMES, "ZZ"]), min_size=n, max_size=n))
    instants = draw(st.lists(st.integers(-2 * 10**12, 2 * 10**12) | st.sampled_from(keys or [0]),
                             min_size=n, max_size=n))
    return bounds, np.array(keys, np.int64), np.array(tickers, object), np.array(instants, np.int64)


@settings(max_examples=300)
@given(sliced_keys(), st.sampled_from(["left", "right"]))
def test_packed_search_equals_per_ticker_search(case, side):
    bounds, keys, tickers, instants = case
    fast = search_by_ticker(bounds, keys, tickers, instants, side=side)
    slow = _search_per_ticker(bounds, keys, tickers, instants, side=side,
                              out=np.zeros(len(instants), np.int64))
    np.testing.assert_array_equal(fast, slow)


def test_wide_keys_fall_back_to_per_ticker_search():
    keys = np.array([-(2**62), 2**62, 0, 5], np.int64)  # span does not pack into 63 bits
    bounds = {"A": (0, 2), "B": (2, 4)}
    got = search_by_ticker(bounds, keys, np.array(["B", "A", "Q"], object),
                           np.array([4, 0, 1], np.int64), side="right")
    np.testing.assert_array_equal(got, [3, 1, 0])


def test_lows_of_unknown_ticker_is_zero():
    np.testing.assert_array_equal(lows_of({"A": (0, 2), "B": (2, 5)},
                                          np.array(["B", "X", "A"], object)), [2, 0, 0])


def _runs(names, ts):
    from finbench.data.bars import BarArrays

    ts = np.asarray(ts, np.int64)
    starts = np.flatnonzero(np.r_[True, np.asarray(names[1:]) != np.asarray(names[:-1])])
    run_names = [names[i] for i in starts]
    return BarArrays.from_runs(starts=starts, names=run_names, ts=ts, bar_seconds=60,
                               **{c: np.ones(len(ts)) for c in ("open", "high", "low", "close",
                                                                 "volume")})


def test_runs_build_the_slices_and_keys_the_search_uses():
    bars = _runs(["A", "A", "B", "C", "C", "C"], [5, 9, 1, 2, 3, 70])
    assert bars.bounds == {"A": (0, 2), "B": (2, 3), "C": (3, 6)}
    np.testing.assert_array_equal(bars.avail, bars.ts + 60 * 10**9)
    _, shift, base, keys, _ = bars._packed["ts"]
    number = np.repeat([0, 1, 2], [2, 1, 3])
    np.testing.assert_array_equal(keys, (number << shift) + bars.ts - base)
    np.testing.assert_array_equal(
        bars.search(np.array(["C", "A", "B", "Z"], object), np.array([3, 9, 0, 4]),
                    on="ts", side="left"), [4, 1, 2, 0])


@pytest.mark.parametrize("names, ts", [
    (["B", "B", "A"], [1, 2, 3]),        # tickers out of text order
    (["A", "B", "A"], [1, 2, 3]),        # a ticker in two runs
    (["A", "A", "B"], [2, 1, 3]),        # time going back within a ticker
    (["A", "A", "B"], [2, 2, 3]),        # two bars at one instant
])
def test_runs_out_of_order_are_refused(names, ts):
    with pytest.raises(ValueError, match="sorted by ticker then ts"):
        _runs(names, ts)


def test_a_day_without_the_tickers_asked_reads_as_no_bars(sample_store):
    """A partition holding only other tickers' bars gives empty arrays (no slice), as the
    month reader does; a partition holding some gives theirs."""
    from finbench.data.store import Store

    store = Store(sample_store)
    day = store.dates("bars")[2]
    table = store.read_day_table(day)
    names = sorted(set(table.column("ticker").to_pylist()))
    none = store.day_arrays(table, tickers=["NOT-A-TICKER"])
    assert none.bounds == {} and len(none.ts) == 0
    assert none.bounds == store.read_bar_arrays(tickers=["NOT-A-TICKER"], start=day,
                                                end=day).bounds
    last = store.day_arrays(table, tickers=[names[-1]])
    month = store.read_bar_arrays(tickers=[names[-1]], start=day, end=day)
    assert last.bounds == month.bounds == {names[-1]: (0, len(month.ts))}
    np.testing.assert_array_equal(last.ts, month.ts)
