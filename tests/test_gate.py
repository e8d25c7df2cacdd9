"""The time gate against a naive loop, a property test, and the planted leak canaries."""

import datetime as dt

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.core.errors import LookaheadError
from finbench.core.floats import LIBM_ULPS
from finbench.data.bars import BarArrays
from finbench.data.store import Store
from finbench.data.synth import CANARY_MARK
from finbench.tracks.intraday.config import TasksConfig
from finbench.tracks.intraday.gate import ContextIndex
from finbench.tracks.intraday.labels import compute_labels
from finbench.tracks.intraday.tasks import build_tasks
from tests.reference import library_calendar, naive_context, naive_daily, naive_labels

TICKERS = ["AAPL", "MSFT", "NVDA"]


@pytest.fixture(scope="module")
def sample(sample_store):
    store = Store(sample_store)
    spec = TasksConfig(tickers=TICKERS, start="2024-09-20", end="2025-01-15")
    tasks = build_tasks(spec).tasks
    frame = store.read_bars()
    news = store.read_headlines()
    bars = BarArrays.from_frame(frame, bar_seconds=60)
    index = ContextIndex(tasks, bars, news, previous_sessions=5, headline_hours=24,
                         max_headlines=20)
    return tasks, frame, news, bars, index


def test_vectorised_labels_equal_the_naive_loop_on_every_sample_task(sample):
    tasks, frame, _, bars, _ = sample
    fast = compute_labels(tasks, bars)
    slow = naive_labels(tasks, frame)
    assert len(fast) == len(tasks) > 600
    assert list(fast["status"]) == list(slow["status"])
    ok = fast["status"] == "ok"
    # prices read from the store and their mids are exact; r passes through libm (np.log
    # here, math.log in the reference), so it agrees within a few ULP on any CPU
    for price in ("p_ref", "p_target"):
        np.testing.assert_array_equal(fast.loc[ok, price].to_numpy(),
                                      slow.loc[ok, price].to_numpy(float))
    np.testing.assert_array_max_ulp(fast.loc[ok, "r"].to_numpy(), slow.loc[ok, "r"].to_numpy(float),
                                    maxulp=LIBM_ULPS)
    assert list(fast.loc[ok, "y"]) == list(slow.loc[ok, "y"].astype(int))
    assert (fast["status"] == "no_reference_price").sum() > 0  # sample: 09:29 bar sometimes absent


def test_vectorised_contexts_equal_the_naive_loop_on_every_sample_task(sample):
    tasks, frame, news, _, index = sample
    # the reference asks exchange-calendars itself, not FinBench's kept sessions
    daily = naive_daily(frame, library_calendar("XNYS", "2024-09-01", "2025-01-20"))
    bars = frame.assign(local_date=frame["ts"].dt.tz_convert("America/New_York")
                        .dt.strftime("%Y-%m-%d"))
    # each (ticker, local date)'s bars apart: the reference filters them as it would the
    # whole table, and keeps the same rows (a task's bars lie on its session's local date)
    by_day = {key: part for key, part in bars.groupby(["ticker", "local_date"])}
    no_bars = bars.iloc[0:0]
    news_of = {t: news[news["tickers"].map(lambda ts, t=t: t in list(ts))] for t in TICKERS}
    mit = index.max_input_time
    for i, task in enumerate(tasks.itertuples()):
        want = naive_context(task, by_day.get((task.ticker, task.session), no_bars),
                             news_of[task.ticker], daily)
        got = index.context(i)
        assert list(got.bars["ts"]) == want["bars"], task.task_id
        assert list(got.previous_sessions["session"]) == want["sessions"], task.task_id
        assert list(got.headlines["id"]) == want["headlines"], task.task_id
        assert mit.iat[i] == want["max_input_time"], task.task_id
    summary = index.daily.set_index(["ticker", "session"]).sort_index()
    ref = daily.set_index(["ticker", "session"]).sort_index()
    pd.testing.assert_frame_equal(summary[ref.columns], ref, check_dtype=False)


def test_a_store_without_headlines_gives_contexts_of_the_same_columns_and_types(sample):
    tasks, _, news, bars, index = sample
    bare = ContextIndex(tasks, bars, news.iloc[:0], previous_sessions=5, headline_hours=24,
                        max_headlines=20)
    with_news = next(i for i in range(len(index)) if len(index.context(i).headlines))
    got, full = bare.context(with_news), index.context(with_news)
    assert got.headlines.empty
    assert got.headlines.dtypes.to_dict() == full.headlines.dtypes.to_dict()
    pd.testing.assert_frame_equal(got.bars, full.bars)
    assert got.max_input_time <= full.max_input_time


def test_no_canary_reaches_a_context_before_it_is_available(sample):
    tasks, _, news, _, index = sample
    canaries = news[news["headline"].str.contains(CANARY_MARK)]
    assert len(canaries) >= 240 and canaries["first_seen_at"].notna().sum() >= 6
    seen = 0
    for i in range(len(index)):
        ctx = index.context(i)
        hits = ctx.headlines[ctx.headlines["headline"].str.contains(CANARY_MARK)]
        assert (hits["available_at"] <= ctx.t_forecast).all()
        assert not hits["id"].str.contains(ctx.session).any(), ctx.task_id  # own day's canary
        seen += len(hits)
    assert seen > 0  # the previous evening's canaries are legitimately visible next morning


def test_max_input_time_is_never_after_the_horizon(sample):
    tasks, _, _, _, index = sample
    assert (index.max_input_time <= tasks["t_forecast"]).all()


def test_a_planted_future_item_raises_lookahead_error(sample):
    tasks, _, news, bars, _ = sample
    index = ContextIndex(tasks.head(3), bars, news, previous_sessions=2, headline_hours=24,
                         max_headlines=5)
    index.hl_hi[0] += 1  # let the next (later) headline slip in, as a bug would
    index.max_input_ns[0] = max(index.max_input_ns[0], index._h_avail[index.hl_hi[0] - 1])
    with pytest.raises(LookaheadError, match=r"headline .* available .* is after the horizon"):
        index.check()
    with pytest.raises(LookaheadError, match=tasks["task_id"].iat[0].replace("|", r"\|")):
        index.context(0)


# -- property test -----------------------------------------------------------------------------
DAY0 = pd.Timestamp("2025-01-13 09:00", tz="UTC")  # Mon; sessions 13-15 Jan 2025


@st.composite
def market(draw):
    minutes = draw(st.lists(st.integers(0, 3 * 24 * 60 - 1), min_size=0, max_size=60, unique=True))
    news = draw(st.lists(st.tuples(st.integers(0, 3 * 24 * 3600), st.integers(0, 2 * 3600),
                                   st.booleans()), max_size=15))
    horizon = draw(st.sampled_from(["04:30", "09:30", "10:07", "12:30", "15:30"]))
    k = draw(st.integers(0, 6))
    hours = draw(st.sampled_from([0.5, 3.0, 24.0]))
    previous = draw(st.integers(0, 2))
    return minutes, news, horizon, k, hours, previous


@settings(max_examples=60)
@given(market())
def test_property_context_holds_exactly_the_available_items(data):
    minutes, news_spec, horizon, k, hours, previous = data
    ts = sorted(DAY0 + pd.Timedelta(minutes=m) for m in minutes)
    frame = pd.DataFrame({"ticker": "AAPL", "ts": pd.DatetimeIndex(ts, tz="UTC"),
                          "open": 10.0, "high": 11.0, "low": 9.0, "close": 10.0, "volume": 1.0})
    news = pd.DataFrame([
        {"id": f"n{j}", "published_at": DAY0 + pd.Timedelta(seconds=s),
         "first_seen_at": (DAY0 + pd.Timedelta(seconds=s + lag)) if late else pd.NaT,
         "tickers": ["AAPL"], "headline": f"h{j}", "source": "t"}
        for j, (s, lag, late) in enumerate(news_spec)
    ], columns=["id", "published_at", "first_seen_at", "tickers", "headline", "source"])
    news["published_at"] = pd.to_datetime(news["published_at"], utc=True)
    news["first_seen_at"] = pd.to_datetime(news["first_seen_at"], utc=True)
    news["available_at"] = news[["published_at", "first_seen_at"]].max(axis=1)
    spec = TasksConfig(tickers=["AAPL"], start=dt.date(2025, 1, 13), end=dt.date(2025, 1, 15),
                       horizons={"H": horizon})
    tasks = build_tasks(spec).tasks
    bars = BarArrays.from_frame(frame, bar_seconds=60)
    index = ContextIndex(tasks, bars, news, previous_sessions=previous, headline_hours=hours,
                         max_headlines=k)
    daily = index.daily.copy()
    for i, task in enumerate(tasks.itertuples()):
        ctx = index.context(i)
        assert (ctx.bars["available_at"] <= task.t_forecast).all()
        assert (ctx.headlines["available_at"] <= task.t_forecast).all()
        want = naive_context(task, frame, news, daily, previous=previous, hours=hours, k=k)
        assert list(ctx.bars["ts"]) == want["bars"]
        assert list(ctx.headlines["id"]) == want["headlines"]
        assert list(ctx.previous_sessions["session"]) == want["sessions"]
        assert ctx.max_input_time == want["max_input_time"]


@settings(max_examples=200)
@given(data=st.data())
def test_segments_reduced_in_place_equal_their_values_laid_end_to_end(data):
    """``segment_reduce`` (a day's high, low and volume from the bars themselves) gives the
    bits ``reduceat`` gives on a copy of the segments' values laid end to end (what the daily
    summaries computed before): segments adjacent or apart, the last one at the end or not."""
    from finbench.tracks.intraday.gate import segment_reduce

    n = data.draw(st.integers(1, 60))
    values = np.array(data.draw(st.lists(
        st.floats(-1e6, 1e6, allow_nan=False, width=64), min_size=n, max_size=n)))
    cuts = sorted(data.draw(st.sets(st.integers(0, n), min_size=2, max_size=n + 1)))
    pairs = [(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True)
             if data.draw(st.booleans())] or [(cuts[0], cuts[1])]
    first = np.array([a for a, _ in pairs], np.int64)
    last = np.array([b - 1 for _, b in pairs], np.int64)
    laid = np.concatenate([values[a:b] for a, b in pairs])
    starts = np.r_[0, np.cumsum([b - a for a, b in pairs])[:-1]]
    for ufunc in (np.add, np.maximum, np.minimum):
        got = segment_reduce(ufunc, values, first, last)
        assert got.tobytes() == ufunc.reduceat(laid, starts).tobytes()
    assert len(segment_reduce(np.add, values, first[:0], last[:0])) == 0


DAYS0 = pd.Timestamp("2024-11-27", tz="UTC")  # Thanksgiving, an early close, a weekend
_XNYS = library_calendar("XNYS", "2024-11-20", "2024-12-10")
_EDGES = sorted({int((t - DAYS0) / pd.Timedelta(minutes=1)) + d
                 for day in _XNYS.sessions_in_range("2024-11-27", "2024-12-03")
                 for t in (_XNYS.session_open(day), _XNYS.session_close(day))
                 for d in (-2, -1, 0, 1)})


@settings(max_examples=80)
@given(data=st.data())
def test_property_daily_summaries_equal_the_loop_over_sessions(data):
    """Each (ticker, session)'s regular-session summary, with bars before, between and after
    sessions, at an open or a close to the minute, on an early close and around a holiday:
    the bars of each session's local date starting in [open, close), as the naive loop finds
    them (volumes whole, so any order of their sum gives the same bits)."""
    from finbench.tracks.intraday.gate import daily_summaries

    rows = []
    for ticker in data.draw(st.sets(st.sampled_from(["AA", "BB", "CC"]), max_size=3)):
        minutes = data.draw(st.sets(st.one_of(st.sampled_from(_EDGES),
                                              st.integers(0, 7 * 24 * 60 - 1)), max_size=40))
        for m in sorted(minutes):
            price = data.draw(st.floats(1, 1000, allow_nan=False))
            rows.append({"ticker": ticker, "ts": DAYS0 + pd.Timedelta(minutes=m),
                         "open": price, "high": price + data.draw(st.floats(0, 5)),
                         "low": price - data.draw(st.floats(0, 5)), "close": price,
                         "volume": float(data.draw(st.integers(0, 10**6)))})
    frame = pd.DataFrame(rows, columns=["ticker", "ts", "open", "high", "low", "close",
                                        "volume"])
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
    frame = frame.sort_values(["ticker", "ts"], kind="stable").reset_index(drop=True)
    got, bounds = daily_summaries(BarArrays.from_frame(frame, bar_seconds=60),
                                  calendar="XNYS", timezone="America/New_York")
    want = naive_daily(frame, _XNYS)  # (in session order, then ticker)
    assert len(got) == len(want)
    if len(want):
        want = want.sort_values(["ticker", "session"], kind="stable")
        for column in ("ticker", "session", "open", "high", "low", "close", "volume",
                       "available_ns"):
            assert got[column].tolist() == want[column].tolist(), column
    assert bounds == {t: (int(np.flatnonzero(got["ticker"] == t)[0]),
                          int(np.flatnonzero(got["ticker"] == t)[-1]) + 1)
                      for t in got["ticker"].unique()}
