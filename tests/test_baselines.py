"""Time validity of baselines on a hand-built label history."""

import numpy as np
import pandas as pd
import pytest

from finbench.forecasters.baselines import History, rolling_quantiles, rolling_rate

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
    from finbench.forecasters import baselines as b

    hist = frame()
    hist["momentum_sign"] = [1.0, 1.0, -1.0, 1.0, 1.0]
    history = b.History(hist)
    # for the last task (sign +1) the window holds days 0..3: signs +,+,-,+ with y 1,0,1,1
    rows, k, g = history.positions(hist.iloc[[4]])[("X", "CLOSE")]
    s = g["momentum_sign"].to_numpy()[: k[0]]
    y = g["y"].to_numpy()[: k[0]]
    n_plus, up_plus = int((s == 1).sum()), int(((s == 1) & (y == 1)).sum())
    assert (n_plus, up_plus) == (3, 2)
    assert (up_plus + 1) / (n_plus + 2) == pytest.approx(0.6)


def test_baseline_receipt_names_the_labels_known_and_the_momentum_sign():
    import hashlib

    from finbench.forecasters.baselines import baseline_digests, baseline_input_text

    hist = frame()
    hist["momentum_sign_30"] = [1.0, np.nan, -1.0, 0.0, 1.0]
    lines = baseline_input_text(History(hist), hist, hist).to_pylist()
    known = pd.Timestamp("2025-01-10 20:55", tz="UTC").value
    assert lines[0] == ("finbench-baseline-input-v1|X|2025-01-06|CLOSE|"
                        "labels_known_through_ns=-1|momentum_sign_30=1")
    assert lines[1].endswith("momentum_sign_30=none")
    assert lines[4] == ("finbench-baseline-input-v1|X|2025-01-13|CLOSE|"
                        f"labels_known_through_ns={known}|momentum_sign_30=1")
    digests = baseline_digests(History(hist), hist, hist)
    assert digests[4] == hashlib.sha256(lines[4].encode()).hexdigest()


def test_baseline_receipt_does_not_depend_on_how_far_back_history_reaches():
    from finbench.forecasters.baselines import baseline_input_text

    hist = frame()
    short = hist.iloc[2:].reset_index(drop=True)  # a shard's history starts later
    full = baseline_input_text(History(hist), hist.iloc[3:], hist).to_pylist()
    part = baseline_input_text(History(short), short.iloc[1:], short).to_pylist()
    assert full == part
