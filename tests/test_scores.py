"""Scoring rules: hand-computed fixtures (arithmetic in the test) and property tests."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.scoring import log_loss
from finbench.scoring.rules import brier_loss, coverage_score, skill, winkler_loss
from finbench.tracks.intraday.score_cells import aggregate, row_scores


def test_frozen_reference_versus_in_sample_rate():
    y = np.r_[np.ones(30), np.zeros(70)]
    frozen = brier_loss(y, np.full(100, 0.20)).mean()
    in_sample = brier_loss(y, np.full(100, 0.30)).mean()  # descriptive only, not a baseline
    assert frozen == pytest.approx((30 * 0.8**2 + 70 * 0.2**2) / 100) == pytest.approx(0.22)
    assert in_sample == pytest.approx((30 * 0.7**2 + 70 * 0.3**2) / 100) == pytest.approx(0.21)


@pytest.mark.parametrize(("p", "brier", "skill_vs_1pct"), [
    (0.00, 0.0100, -0.0101), (0.01, 0.0099, 0.0), (0.10, 0.0180, -0.8182), (0.50, 0.2500, -24.2525),
])
def test_rare_event_constants(p, brier, skill_vs_1pct):
    y = np.r_[1.0, np.zeros(99)]
    # 0.01: (0.99**2 + 99 * 0.01**2) / 100 = (0.9801 + 0.0099) / 100 = 0.0099
    got = brier_loss(y, np.full(100, p)).mean()
    ref = brier_loss(y, np.full(100, 0.01)).mean()
    assert got == pytest.approx(brier, abs=5e-5)
    assert skill(got, ref) == pytest.approx(skill_vs_1pct, abs=5e-5)


def test_zero_reference_loss_gives_undefined_skill():
    y = np.zeros(20)  # a window without a positive
    ref = brier_loss(y, np.zeros(20)).mean()
    assert ref == 0.0
    assert math.isnan(skill(brier_loss(y, np.full(20, 0.1)).mean(), ref))  # NaN: undefined


@pytest.mark.parametrize(("r", "expected"), [
    (-0.02, 0.02 + 10 * 0.01),  # below: width + (2/0.2)(L - r)
    (0.0, 0.02),                # inside: width only
    (0.01, 0.02),               # on the upper edge: inside
    (0.03, 0.02 + 10 * 0.02),   # above: width + (2/0.2)(r - U)
])
def test_winkler_fixtures(r, expected):
    assert winkler_loss([r], [-0.01], [0.01], alpha=0.2)[0] == pytest.approx(expected)
    assert coverage_score([r], [-0.01], [0.01])[0] == (1.0 if -0.01 <= r <= 0.01 else 0.0)


def test_an_interval_wider_than_the_float_range_scores_inf_without_a_warning():
    """Finite bounds whose width overflows: the score is inf (no RuntimeWarning: the suite
    turns warnings into errors), in the public rule and in the run's row scores."""
    assert winkler_loss([0.0, 0.0], [-1.7e308, -0.01], [1.7e308, 0.01]).tolist() == [
        math.inf, pytest.approx(0.02)]


def test_log_loss_of_a_half_is_ln2_on_either_outcome():
    assert log_loss([0, 1], [0.5, 0.5]) == pytest.approx([0.693147, 0.693147], abs=1e-6)
    assert log_loss([1], [0.0])[0] == pytest.approx(-math.log(1e-6))  # the declared clip


def test_bad_inputs_are_rejected_with_the_argument_named():
    with pytest.raises(ValueError, match="prob"):
        brier_loss([1], [1.2])
    with pytest.raises(ValueError, match="obs"):
        brier_loss([2], [0.5])
    with pytest.raises(ValueError, match="lower > upper"):
        winkler_loss([0.0], [0.1], [0.0])


@pytest.mark.parametrize("obs, prob, message", [
    ([1, 0], [0.5, float("nan")], r"prob: every value must be finite \(row 1\)"),
    ([1, 0], [float("-inf"), 0.5], r"prob: every value must be finite \(row 0\)"),
    ([0, float("nan")], [0.5, 0.5], r"obs: every value must be finite \(row 1\)"),
    ([float("inf"), 1], [0.5, 0.5], r"obs: every value must be finite \(row 0\)"),
    ([1, 0.5], [0.5, 0.5], "obs: outcomes must be 0 or 1"),
    ([1, 0], [0.5, -0.01], r"prob: probabilities must lie in \[0, 1\]"),
])
def test_non_finite_or_out_of_range_inputs_name_the_argument_and_row(obs, prob, message):
    for rule in (brier_loss, log_loss):
        with pytest.raises(ValueError, match=message):
            rule(obs, prob)


@settings(max_examples=50)
@given(st.floats(0.02, 0.98))
def test_expected_scores_are_lowest_at_the_true_probability(q):
    grid = np.linspace(0.001, 0.999, 999)
    for rule in (brier_loss, log_loss):
        expected = q * rule(np.ones_like(grid), grid) + (1 - q) * rule(np.zeros_like(grid), grid)
        assert abs(grid[np.argmin(expected)] - q) <= 0.0011


def _rows(n, seed):
    rng = np.random.default_rng(seed)
    tasks = pd.DataFrame({"task_id": [f"T{i}|2025-01-15|H{i % 3}" for i in range(n)],
                          "ticker": [f"T{i % 4}" for i in range(n)], "session": "2025-01-15",
                          "horizon": [f"H{i % 3}" for i in range(n)]})
    r = rng.normal(0, 0.01, n)
    labels = pd.DataFrame({"task_id": tasks["task_id"], "r": r, "y": (r > 0).astype(int),
                           "status": "ok"})
    forecasts = []
    for model in ("a", "b"):
        lo = rng.normal(-0.01, 0.003, n)
        forecasts.append(pd.DataFrame({
            "task_id": tasks["task_id"], "model": model, "p_up": rng.uniform(0, 1, n),
            "lower": lo, "upper": lo + rng.uniform(0, 0.03, n), "valid": rng.random(n) > 0.1}))
    return pd.concat(forecasts, ignore_index=True), labels, tasks


@settings(max_examples=20)
@given(st.integers(5, 60), st.integers(0, 10_000))
def test_aggregates_equal_row_means_and_ignore_row_order(n, seed):
    forecasts, labels, tasks = _rows(n, seed)
    kw = {"models": ["a", "b"], "baselines": ["b"], "interval_reference": "b"}
    rows = row_scores(forecasts, labels, tasks)
    table = aggregate(rows, **kw)
    shuffled = aggregate(row_scores(forecasts.sample(frac=1, random_state=seed), labels,
                                    tasks.sample(frac=1, random_state=seed + 1)), **kw)
    pd.testing.assert_frame_equal(table, shuffled, rtol=1e-12)
    a = rows[(rows["model"] == "a") & rows["scored"]]
    overall = table[(table["model"] == "a") & (table["slice_kind"] == "overall")].iloc[0]
    assert overall["brier"] == pytest.approx(((a["p_up"] - a["y"]) ** 2).mean())
    assert overall["n"] == len(a) == forecasts[(forecasts["model"] == "a")]["valid"].sum()


def test_paired_skill_excludes_only_the_rows_a_model_left_invalid():
    forecasts, labels, tasks = _rows(30, 1)
    forecasts["valid"] = True
    forecasts.loc[(forecasts["model"] == "a") & (forecasts.index < 5), "valid"] = False
    table = aggregate(row_scores(forecasts, labels, tasks), models=["a", "b"], baselines=["b"],
                      interval_reference=None)
    overall = table[table["slice_kind"] == "overall"].set_index("model")
    assert overall.loc["a", "n"] == 25 and overall.loc["a", "bss_b_n"] == 25
    assert overall.loc["b", "n"] == 30 and overall.loc["b", "bss_b_n"] == 30
    assert overall.loc["a", "n_valid"] == 25
    assert overall.loc["a", "validity"] == pytest.approx(25 / 30)
    rows = row_scores(forecasts, labels, tasks)
    paired = rows[(rows["model"] == "b") & rows["task_id"].isin(
        rows[(rows["model"] == "a") & rows["scored"]]["task_id"])]
    assert overall.loc["a", "bss_b_ref"] == pytest.approx(paired["brier"].mean())


def test_fallback_policy_scores_the_baseline_answer_in_place_of_an_invalid_one():
    forecasts, labels, tasks = _rows(10, 2)
    forecasts["valid"] = True
    forecasts.loc[0, "valid"] = False  # model a, first task
    rows = row_scores(forecasts, labels, tasks, invalid_policy="fallback:b")
    first = rows[(rows["model"] == "a") & (rows["task_id"] == tasks["task_id"][0])].iloc[0]
    b_first = forecasts[(forecasts["model"] == "b")].iloc[0]
    assert first["fallback_used"] and first["scored"] and first["p_up"] == b_first["p_up"]


def test_two_kelly_growths_each_say_what_it_is_by_hand():
    """``kelly`` is each bet alone; ``kelly_session`` a session's bets sized together, the
    decision table's growth rate: the two had opposite signs under one name. Two sessions,
    two tickers each: session 1 bets p = 0.9 (up, y=1) and p = 0.2 (down stake 0.6, y=1:
    lost); session 2 p = 0.7 (y=0: lost) and p = 0.5 (no stake)."""
    days = ["2025-01-14", "2025-01-14", "2025-01-15", "2025-01-15"]
    tasks = pd.DataFrame({"task_id": [f"{t}|{d}|H" for t, d in zip("ABAB", days, strict=True)],
                          "ticker": ["A", "B", "A", "B"], "session": days, "horizon": "H"})
    labels = pd.DataFrame({"task_id": tasks["task_id"], "r": [0.01, 0.01, -0.01, 0.01],
                           "y": [1, 1, 0, 1], "status": "ok"})
    forecasts = pd.DataFrame({"task_id": tasks["task_id"], "model": "m",
                              "p_up": [0.9, 0.2, 0.7, 0.5], "lower": np.nan, "upper": np.nan,
                              "valid": True})
    table = aggregate(row_scores(forecasts, labels, tasks), models=["m"], baselines=[],
                      interval_reference=None).set_index(["slice_kind", "slice"])
    alone = [math.log(1 + 0.8), math.log(1 - 0.6), math.log(1 - 0.4), math.log(1 + 0)]
    session = [math.log(1 + (0.8 - 0.6) / 2), math.log(1 + (-0.4 + 0) / 2)]
    assert table.loc[("overall", "all"), "kelly"] == pytest.approx(sum(alone) / 4)
    assert table.loc[("overall", "all"), "kelly_session"] == pytest.approx(sum(session) / 2)
    # a ticker's row: a bettor asked that ticker's tasks alone (one bet a session)
    assert table.loc[("ticker", "B"), "kelly_session"] == pytest.approx(
        (math.log(1 - 0.6) + math.log(1)) / 2)
    from finbench.tracks.intraday.decision import decision_table

    rows = row_scores(forecasts, labels, tasks)
    growth = decision_table(rows, ["m"])[0].iloc[0]["growth_rate"]
    assert growth == pytest.approx(table.loc[("overall", "all"), "kelly_session"], rel=1e-15)
    # a certain answer lost: the bet alone and its session ruin
    forecasts.loc[2, "p_up"] = 1.0
    table = aggregate(row_scores(forecasts, labels, tasks), models=["m"], baselines=[],
                      interval_reference=None).set_index(["slice_kind", "slice"])
    assert table.loc[("ticker", "A"), "kelly_session"] == -math.inf
    assert table.loc[("overall", "all"), "kelly_session"] == pytest.approx(
        (session[0] + math.log(1 + (-1 + 0) / 2)) / 2)
