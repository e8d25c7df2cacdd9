"""Time validity of baselines on a hand-built label history."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.core.times import NO_TIME
from finbench.tracks.intraday.history import History, rolling_quantiles, rolling_rate, session_days

SESSIONS = ["2025-01-06", "2025-01-07", "2025-01-08", "2025-01-10", "2025-01-13"]
Y = [1, 0, 1, 1, 0]
R = [0.01, -0.02, 0.03, 0.005, -0.01]


def frame(horizon="CLOSE", clock="20:30"):
    rows = []
    for s, y, r in zip(SESSIONS, Y, R, strict=True):
        rows.append({"task_id": f"X|{s}|{horizon}", "ticker": "X", "session": s,
                     "horizon": horizon, "t_forecast": pd.Timestamp(f"{s} {clock}", tz="UTC"),
                     "t_target": pd.Timestamp(f"{s} 20:55", tz="UTC"),
                     "label_known_at": pd.Timestamp(f"{s} 20:55", tz="UTC"), "status": "ok",
                     "y": y, "r": r})
    return pd.DataFrame(rows)


def test_label_of_day_d_is_not_used_on_day_d_and_is_used_from_day_d_plus_1():
    hist = frame()
    p, count, last = rolling_rate(History(hist), hist, window=60, min_count=1)
    # day k (15:30 ET) sees exactly the labels of days 0..k-1
    assert list(count) == [0, 1, 2, 3, 4]
    assert p[1] == 1.0 and p[2] == pytest.approx(1 / 2) and p[3] == pytest.approx(2 / 3)
    assert p[4] == pytest.approx(3 / 4)
    assert p[0] == 0.5  # no history: the 0.5 fallback
    assert last[4] == pd.Timestamp("2025-01-10 20:55", tz="UTC").value


def test_window_and_min_count():
    hist = frame()
    p, count, _ = rolling_rate(History(hist), hist, window=2, min_count=2)
    assert list(count) == [0, 1, 2, 2, 2]
    assert p[1] == 0.5  # one label < min_count 2: fallback
    assert p[2] == pytest.approx((1 + 0) / 2) and p[3] == pytest.approx((0 + 1) / 2)
    assert p[4] == pytest.approx((1 + 1) / 2)


def test_unscorable_labels_do_not_count():
    hist = frame()
    hist.loc[1, "status"] = "no_target_price"
    p, count, _ = rolling_rate(History(hist), hist, window=60, min_count=1)
    assert list(count) == [0, 1, 1, 2, 3] and p[4] == pytest.approx(3 / 3)


def test_climatology_quantiles_use_only_past_returns():
    hist = frame()
    lower, upper = rolling_quantiles(History(hist), hist, window=60)
    assert np.isnan(lower[0])
    past = np.array(R[:4])
    assert lower[4] == pytest.approx(np.quantile(past, 0.1))
    assert upper[4] == pytest.approx(np.quantile(past, 0.9))


def test_momentum_conditional_probability_with_add_one_smoothing():
    from types import SimpleNamespace

    from finbench.tracks.intraday import baselines as b
    from finbench.tracks.intraday import history as hist_module
    from finbench.tracks.intraday.inputs import IntradayInputs as Inputs

    hist = frame()
    hist["momentum_sign_30"] = [1.0, 1.0, -1.0, 1.0, 1.0]
    model = b.Momentum(SimpleNamespace(name="m", window=60, min_count=3, lookback_minutes=30))
    inputs = Inputs(tasks=hist, history=hist)
    p, details, fallback, _ = model._probability(hist_module.History(hist), inputs)
    fallback = fallback.to_pylist()  # an Arrow text column
    # the last task (sign +1) sees days 0..3: signs +,+,-,+ with y 1,0,1,1: 2 ups in 3
    assert (details["sign_count"].iloc[4], details["sign_up"].iloc[4]) == (3, 2)
    assert p[4] == pytest.approx((2 + 1) / (3 + 2)) and fallback[4] is None
    # day 3 sees signs +,+,- : two with its sign (+), below min_count 3: the base rate of
    # its 3 labels (min_count 3 reached: no further fallback)
    assert fallback[3] == "base_rate: 2 labels with sign +1 < min_count 3"
    assert p[3] == pytest.approx(2 / 3)
    # day 1 sees one label: momentum falls back to the base rate, which falls back to 0.5
    assert fallback[1] == ("base_rate: 1 labels with sign +1 < min_count 3; its 0.5: 1 labels"
                           " in the window < min_count 3") and p[1] == 0.5


def test_baseline_receipt_names_the_labels_known_and_the_momentum_sign():
    import hashlib

    from finbench.tracks.intraday.history import baseline_digests, baseline_input_text

    hist = frame()
    hist["momentum_sign_30"] = [1.0, np.nan, -1.0, 0.0, 1.0]
    signs = ("momentum_sign_30",)  # what a 30-minute momentum reads
    lines = baseline_input_text(History(hist), hist, hist, signs=signs).to_pylist()
    known = pd.Timestamp("2025-01-10 20:55", tz="UTC").value
    assert lines[0] == ("finbench-baseline-input-v1|X|2025-01-06|CLOSE|"
                        "labels_known_through_ns=-1|momentum_sign_30=1")
    assert lines[1].endswith("momentum_sign_30=none")
    assert lines[4] == ("finbench-baseline-input-v1|X|2025-01-13|CLOSE|"
                        f"labels_known_through_ns={known}|momentum_sign_30=1")
    digests = baseline_digests(History(hist), hist, hist, signs=signs).to_pylist()
    assert digests[4] == hashlib.sha256(lines[4].encode()).hexdigest()
    # a baseline reading no sign (coin, base rate, climatology): the same line without it,
    # whatever sign columns the run's history holds for its momentum models
    plain = baseline_input_text(History(hist), hist, hist).to_pylist()
    assert plain[4] == ("finbench-baseline-input-v1|X|2025-01-13|CLOSE|"
                        f"labels_known_through_ns={known}")
    # a line with signs made from the line without them (as a run makes it) is the same
    extended = baseline_input_text(History(hist), hist, hist, signs=signs,
                                   line=pa.array(plain)).to_pylist()
    assert extended == lines


def test_baseline_receipt_does_not_depend_on_how_far_back_history_reaches():
    from finbench.tracks.intraday.history import baseline_input_text

    hist = frame()
    short = hist.iloc[2:].reset_index(drop=True)  # a shard's history starts later
    full = baseline_input_text(History(hist), hist.iloc[3:], hist).to_pylist()
    part = baseline_input_text(History(short), short.iloc[1:], short).to_pylist()
    assert full == part


@settings(max_examples=40)
@given(seed=st.integers(0, 2**31 - 1), window=st.integers(1, 7))
def test_vectorised_history_equals_the_naive_reference(seed, window):
    """Random histories (two tickers x two horizons, unscorable rows, labels known at the
    same instant, tasks with no history): counts, rates, quantiles, latest label time and
    momentum counts equal a per-task pandas filter."""
    from types import SimpleNamespace

    from finbench.tracks.intraday import baselines as b
    from finbench.tracks.intraday import history as hist_module
    from finbench.tracks.intraday.inputs import IntradayInputs as Inputs
    from tests.reference import naive_baseline_stats

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    day = pd.Timestamp("2015-01-06 20:55", tz="UTC")
    # days apart, or years apart (times in ns then need 58 bits), some at the same instant
    known = day + pd.to_timedelta(rng.integers(0, 12, n) * rng.choice([1, 300]), unit="D")
    tickers = [f"T{i}" for i in range(int(rng.choice([3, 90])))]
    hist = pd.DataFrame({
        "task_id": [f"t{i}" for i in range(n)],
        "ticker": rng.choice(tickers, n), "horizon": rng.choice(["H1", "H2"], n),
        "session": [str(k.date()) for k in known],
        "t_forecast": known - pd.to_timedelta(rng.integers(0, 3, n), unit="D"),
        "label_known_at": known,
        "status": rng.choice(["ok", "ok", "ok", "no_target_price"], n),
        "y": rng.integers(0, 2, n), "r": np.round(rng.normal(0, 0.01, n), 3),
        "momentum_sign_30": rng.choice([-1.0, 0.0, 1.0, np.nan], n)})
    history = hist_module.History(hist)
    p, count, last = hist_module.rolling_rate(history, hist, window=window, min_count=2)
    lower, upper = hist_module.rolling_quantiles(history, hist, window=window)
    model = b.Momentum(SimpleNamespace(name="m", window=window, min_count=1,
                                       lookback_minutes=30))
    _, details, _, _ = model._probability(history, Inputs(tasks=hist, history=hist))
    for i, task in enumerate(hist.itertuples()):
        ref = naive_baseline_stats(task, hist, window=window, sign_column="momentum_sign_30")
        assert count[i] == ref["count"]
        expected_p = ref["ups"] / ref["count"] if ref["count"] >= 2 else 0.5
        assert p[i] == pytest.approx(expected_p, abs=1e-15)
        assert last[i] == (ref["last"].value if ref["last"] is not None else NO_TIME)
        np.testing.assert_allclose([lower[i], upper[i]], [ref["q_lo"], ref["q_hi"]],
                                   rtol=0, atol=1e-15)
        if not np.isnan(task.momentum_sign_30):
            assert details["sign_count"].iloc[i] == ref["sign_count"]
            assert details["sign_up"].iloc[i] == ref["sign_up"]


@settings(max_examples=40)
@given(seed=st.integers(0, 2**31 - 1), window=st.integers(1, 9))
def test_window_spans_equal_the_naive_reference(seed, window):
    """Histories as runs make them (one task per series and session; some sessions not asked,
    for every horizon or one; random unscorable labels): each task's window span and the
    labels it skipped, by kind, equal a per-task pandas filter."""
    from finbench.tracks.intraday import history as hist_module
    from tests.reference import naive_window_span

    rng = np.random.default_rng(seed)
    days = pd.bdate_range("2025-02-03", periods=int(rng.integers(2, 30)))
    sessions = [str(d.date()) for d in days]
    skipped = set(rng.choice(sessions, size=len(sessions) // 6, replace=False))
    rows = []
    for s in sessions:
        for t in ("A", "B"):
            for h, clock in (("H1", "14:30"), ("H2", "20:30")):
                if s in skipped and (h == "H2" or rng.random() < 0.5):
                    continue  # an early close: the session or its late horizon not asked
                rows.append({"task_id": f"{t}|{s}|{h}", "ticker": t, "horizon": h,
                             "session": s, "t_forecast": pd.Timestamp(f"{s} {clock}", tz="UTC"),
                             "label_known_at": pd.Timestamp(f"{s} 20:55", tz="UTC"),
                             "status": rng.choice(["ok", "ok", "ok", "no_reference_price"]),
                             "y": int(rng.integers(0, 2)), "r": 0.0})
    hist = pd.DataFrame(rows)
    history = hist_module.History(hist, session_days(sessions))
    got = hist_module.window_details(history, hist, window)
    first, last = got["window_first"].to_pylist(), got["window_last"].to_pylist()
    for i, task in enumerate(hist.itertuples()):
        want = naive_window_span(task, hist, sessions, window=window)
        assert (first[i], last[i]) == (want["first"], want["last"])
        for kind in ("unscorable", "early_close", "not_known"):
            assert got[f"skipped_{kind}"][i] == want[kind], (task.task_id, kind)


@pytest.mark.parametrize("lengths", [[1700, 1400, 1900], [1, 5999], [6000]])
def test_window_quantiles_across_blocks_equal_pandas_rolling_quantiles(lengths):
    """A window of 1,000 makes blocks of 2,000 rows: the rows of a few series span three
    blocks, and every row equals pandas' rolling quantile of its own series. In the first
    layout every block holds windows cut short by a series' start; in the others the later
    blocks hold only full windows (their quantiles taken as one column)."""
    from finbench.tracks.intraday.history import _window_quantiles

    rng = np.random.default_rng(7)
    r = np.round(rng.normal(0, 0.01, sum(lengths)), 4)
    starts = np.r_[0, np.cumsum(lengths)[:-1]]
    first = np.repeat(starts, lengths)
    lower, upper = _window_quantiles(r, first, 1000)
    for lo, n in zip(starts, lengths, strict=True):
        roll = pd.Series(r[lo:lo + n]).rolling(1000, min_periods=1)
        assert np.array_equal(lower[lo:lo + n], roll.quantile(0.1).to_numpy())
        assert np.array_equal(upper[lo:lo + n], roll.quantile(0.9).to_numpy())


@settings(max_examples=60)
@given(lengths=st.lists(st.integers(1, 40), min_size=0, max_size=6),
       window=st.integers(1, 12), seed=st.integers(0, 2**31 - 1))
def test_window_quantiles_equal_pandas_rolling_quantiles(lengths, window, seed):
    """Random series lengths and windows (series shorter and longer than the window, one
    row long, none at all, repeated returns): each row's quantiles equal pandas' rolling
    quantile of its own series, exactly."""
    from finbench.tracks.intraday.history import _window_quantiles

    rng = np.random.default_rng(seed)
    r = np.round(rng.normal(0, 0.01, sum(lengths)), 3)
    starts = np.cumsum([0, *lengths])[:-1].astype(np.int64)
    lower, upper = _window_quantiles(r, np.repeat(starts, lengths), window)
    assert len(lower) == len(upper) == len(r)
    for lo, n in zip(starts, lengths, strict=True):
        roll = pd.Series(r[lo:lo + n]).rolling(window, min_periods=1)
        assert np.array_equal(lower[lo:lo + n], roll.quantile(0.1).to_numpy())
        assert np.array_equal(upper[lo:lo + n], roll.quantile(0.9).to_numpy())


@settings(max_examples=60)
@given(st.lists(st.tuples(st.booleans(), st.integers(-3, 3), st.integers(-10**6, 10**6)),
                max_size=40))
def test_reason_texts_equal_formatting_each_row(rows):
    """A fallback or abstention reason is written once per distinct combination of its
    numbers, and lands on every row holding that combination (None elsewhere)."""
    from finbench.tracks.intraday.baselines import _text_array

    mask = np.array([m for m, _, _ in rows], bool)
    a = np.array([x for _, x, _ in rows], np.int64)
    b = np.array([y for _, _, y in rows], np.int64)
    got = _text_array(mask, "{} labels with sign {:+d}", b, a)
    want = [f"{y} labels with sign {x:+d}" if m else None for m, x, y in rows]
    assert (got.to_pylist() if got is not None else [None] * len(rows)) == want
    assert (got is None) == (not mask.any())  # no reason anywhere: no column
