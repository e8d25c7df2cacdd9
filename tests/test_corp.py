"""CORP reliability (finbench/scoring/corp.py): by hand, against scikit-learn's isotonic
regression, the decomposition's identity and signs, the consistency bands under calibration,
and the report's table and figure."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.scoring.corp import decomposition, diagram, pav, recalibrated


def test_corp_by_hand():
    # sorted by p the outcomes are 0, 1, 0, 1: the middle two pool to 0.5
    p, y = np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.0, 1.0, 0.0, 1.0])
    assert recalibrated(p, y).tolist() == [0.0, 0.5, 0.5, 1.0]
    # S(p) = (0.01 + 0.64 + 0.09 + 0.36) / 4; S(c) = (0 + 0.25 + 0.25 + 0) / 4; S(r) = 0.25
    got = decomposition(p, y)
    assert got["brier"] == pytest.approx(0.275, abs=1e-15)
    assert (got["mcb"], got["dsc"], got["unc"]) == pytest.approx((0.15, 0.125, 0.25),
                                                                 abs=1e-15)
    # ties in p share one recalibrated value: their outcomes pooled first
    assert recalibrated(np.array([0.3, 0.3, 0.6]), np.array([1.0, 0.0, 0.0])).tolist() == [
        1 / 3, 1 / 3, 1 / 3]
    # 3, 1 pool to 2 (weight 2); then 2 > 1 (weight 2): (2 x 2 + 1 x 2) / 4 = 1.5
    assert pav(np.array([3.0, 1.0, 1.0]), np.array([1.0, 1.0, 2.0])).tolist() == [1.5] * 3
    assert pav(np.array([3.0, 1.0, 2.0]), np.array([1.0, 1.0, 2.0])).tolist() == [2.0] * 3


@settings(max_examples=80)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.1, 0.25, 0.3, 0.5, 0.7, 0.9, 1.0]),
                          st.booleans()), min_size=1, max_size=60))
def test_the_recalibration_is_scikit_learns_isotonic_regression(rows):
    from sklearn.isotonic import IsotonicRegression

    p = np.array([r[0] for r in rows])
    y = np.array([float(r[1]) for r in rows])
    want = IsotonicRegression(out_of_bounds="clip").fit(p, y).predict(p)
    np.testing.assert_allclose(recalibrated(p, y), want, rtol=0, atol=1e-12)
    got = decomposition(p, y)
    assert got["brier"] == pytest.approx(got["mcb"] - got["dsc"] + got["unc"], abs=1e-12)
    assert got["mcb"] >= -1e-12 and got["dsc"] >= -1e-12


def test_a_calibrated_forecaster_stays_in_its_band_and_a_biased_one_leaves_it():
    rng = np.random.default_rng(4)
    p = np.round(rng.uniform(0.05, 0.95, 4000), 2)
    y = (rng.uniform(size=len(p)) < p).astype(float)
    honest = diagram(p, y, seed=1)
    inside = (honest["cep"] >= honest["lower"] - 1e-12) & (honest["cep"] <= honest["upper"] + 1e-12)
    assert inside.mean() > 0.85
    biased = np.clip(p + 0.2, 0, 1)  # says 0.2 more than it should
    off = diagram(biased, y, seed=1)
    assert ((off["cep"] < off["lower"]) | (off["cep"] > off["upper"])).mean() > 0.5
    assert decomposition(biased, y)["mcb"] > 10 * decomposition(p, y)["mcb"]
    # the bands are the same every time (seeded)
    again = diagram(p, y, seed=1)
    assert np.array_equal(again["lower"], honest["lower"])


def test_too_many_distinct_values_get_no_band():
    from finbench.scoring.corp import MAX_DISTINCT

    p = np.linspace(0.001, 0.999, MAX_DISTINCT + 1)
    y = (np.arange(len(p)) % 2).astype(float)
    drawn = diagram(p, y, seed=0)
    assert drawn["lower"] is None and len(drawn["x"]) == MAX_DISTINCT + 1


def test_the_pilot_report_has_the_corp_table_and_figure(tmp_path):
    from finbench.reports.build import report
    from finbench.runner import run
    from tests.test_golden import _copy

    out = run(_copy(tmp_path), tmp_path / "run", echo=lambda *_: None)
    report(out)
    table = pd.read_csv(out / "tables" / "calibration_corp.csv").set_index("model")
    rows = pd.read_parquet(out / "rows.parquet")
    for model in ("coin", "base_rate", "momentum"):
        mine = rows[(rows["model"] == model) & rows["scored"]]
        want = decomposition(mine["p_up"].to_numpy(float), mine["y"].to_numpy(float))
        assert table.loc[model, "n"] == want["n"] == len(mine)
        for term in ("brier", "mcb", "dsc", "unc"):
            assert table.loc[model, term] == pytest.approx(want[term], rel=1e-9, abs=1e-15)
    assert table.loc["coin", "dsc"] == 0.0  # a constant forecast discriminates nothing
    points = pd.read_csv(out / "tables" / "reliability_corp.csv")
    assert set(points["model"]) >= {"coin", "base_rate"}
    assert (out / "figures" / "reliability_corp.png").stat().st_size > 10_000
    assert "CORP reliability" in (out / "report.html").read_text()


def test_the_event_pilot_report_has_the_corp_table_and_figure(tmp_path):
    from finbench.reports.build import report
    from finbench.runner import run
    from tests.test_events import ROOT, SAMPLE

    cfg = tmp_path / "p.toml"
    cfg.write_text((ROOT / "configs" / "pilot_events.toml").read_text().replace(
        "../data/events_sample/store", str(SAMPLE / "store")).replace(
        '"../data/', f'"{ROOT}/data/'))
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    report(out)
    table = pd.read_csv(out / "tables" / "event_corp.csv").set_index("model")
    rows = pd.read_parquet(out / "rows.parquet")
    for model in table.index:
        mine = rows[(rows["model"] == model) & rows["scored"]]
        want = decomposition(mine["p_yes"].to_numpy(float), mine["y"].to_numpy(float))
        for term in ("n", "brier", "mcb", "dsc", "unc"):
            assert table.loc[model, term] == pytest.approx(want[term], rel=1e-9, abs=1e-15)
        assert table.loc[model, "brier"] == pytest.approx(
            table.loc[model, "mcb"] - table.loc[model, "dsc"] + table.loc[model, "unc"],
            abs=1e-9)
    assert (out / "figures" / "event_reliability_corp.png").stat().st_size > 10_000


def _pav_pushing_every_value(y, w):
    """Pool-adjacent-violators as first written: every value pushed as a block of its own,
    then the top two merged while the lower one's mean exceeds the upper's."""
    means, weights, sizes = [], [], []
    for value, weight in zip(np.asarray(y, float).tolist(), np.asarray(w, float).tolist(),
                             strict=True):
        means.append(value)
        weights.append(weight)
        sizes.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            m, wt, k = means.pop(), weights.pop(), sizes.pop()
            total = weights[-1] + wt
            means[-1] = (means[-1] * weights[-1] + m * wt) / total
            weights[-1] = total
            sizes[-1] += k
    return np.repeat(np.array(means), sizes)


@settings(max_examples=400)
@given(st.lists(st.tuples(st.one_of(st.floats(-5, 5, allow_nan=False),
                                    st.sampled_from([0.0, 1.0, 0.5, np.nan])),
                          st.floats(0.01, 1000)), min_size=0, max_size=60))
def test_pav_merges_as_pushing_every_value_does_bit_for_bit(pairs):
    """The fit keeping its last block apart is the push-and-merge fit, to the last bit (the
    CORP table's bands rest on it): ties, long runs of violators, missing values."""
    y = np.array([v for v, _ in pairs], float)
    w = np.array([wt for _, wt in pairs], float)
    assert np.array_equal(pav(y, w), _pav_pushing_every_value(y, w), equal_nan=True)


@settings(max_examples=300)
@given(st.lists(st.one_of(st.sampled_from([0.0, -0.0, 0.25, 0.5, 1.0, 1e-300, np.nan]),
                          st.floats(0, 1)), max_size=80))
def test_distinct_values_are_numpys_unique(values):
    """The distinct forecasts found by hashing: the values, each forecast's place among them
    and their counts are ``np.unique``'s (missing values and both zeros included)."""
    from finbench.scoring.corp import distinct_values

    p = np.array(values, float)
    want = np.unique(p, return_inverse=True, return_counts=True)
    got = distinct_values(p)
    for a, b in zip(got, want, strict=True):
        assert np.array_equal(a, b, equal_nan=True) and a.dtype == b.dtype
    if len(p):
        assert np.array_equal(np.signbit(got[0]), np.signbit(want[0]))
