"""Power and tests beside the bootstrap (finbench/scoring/inference.py): the minimum
detectable difference, the Diebold-Mariano test with a Newey-West variance, Holm and
Benjamini-Hochberg adjustments; by hand, against statsmodels, and the power formula against
a simulation of clustered losses."""

import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.scoring.inference import (
    benjamini_hochberg,
    cluster_se,
    default_lags,
    diebold_mariano,
    holm,
    mde,
    power_at,
    series_of,
    student_t_two_sided,
)


def test_diebold_mariano_by_hand():
    # d = 1, 2, 3, 4 at one lag: mean 2.5; deviations -1.5, -0.5, 0.5, 1.5; gamma_0 = 5 / 4,
    # gamma_1 = (0.75 - 0.25 + 0.75) / 4 = 0.3125, Bartlett weight 1/2: lrv = 1.5625,
    # var(mean) = 1.5625 / 4, sd 0.625: 2.5 / 0.625 = 4, times sqrt(3 / 4) (HLN): 2 sqrt 3.
    # Student's t with 3 df: P(|T| >= 2 sqrt 3) = 1 - (2 / pi) (2 / 5 + atan 2)
    stat, p, lags = diebold_mariano(np.array([1.0, 2.0, 3.0, 4.0]), lags=1)
    assert lags == 1 and stat == pytest.approx(2 * math.sqrt(3), rel=1e-15)
    assert p == pytest.approx(1 - 2 / math.pi * (0.4 + math.atan(2)), rel=1e-12)
    # default lags: Newey and West's rule of thumb floor(4 (T / 100) ** (2/9))
    assert [default_lags(t) for t in (3, 20, 27, 100, 1000)] == [1, 2, 2, 4, 6]
    assert diebold_mariano(np.arange(27.0) % 5)[2] == 2
    assert all(math.isnan(x) for x in diebold_mariano(np.array([1.0, 2.0]))[:2])
    assert all(math.isnan(x) for x in diebold_mariano(np.ones(5))[:2])  # no variance


@settings(max_examples=60)
@given(st.integers(3, 80), st.integers(0, 6), st.integers(0, 2**32 - 1))
def test_diebold_mariano_is_statsmodels(n, lags, seed):
    from statsmodels.tsa.stattools import diebold_mariano_test

    rng = np.random.default_rng(seed)
    a, b = rng.gamma(2.0, size=n), rng.gamma(2.0, size=n) + rng.normal(0, 0.3)
    want = diebold_mariano_test(np.zeros(n), a, b, lags=min(lags, n - 1), harvey_adj=True,
                                criterion=lambda y, f: np.asarray(f, float))
    stat, p, used = diebold_mariano(a - b, lags=lags)
    assert used == min(lags, n - 1)
    assert stat == pytest.approx(want.statistic, rel=1e-9, abs=1e-12)
    assert p == pytest.approx(want.pvalue, rel=1e-9, abs=1e-15)


@settings(max_examples=300)
@given(st.floats(0, 60), st.integers(1, 2000))
def test_the_t_distribution_is_the_incomplete_beta_at_fifty_digits(t, df):
    """P(|T| >= t) = I_{df / (df + t^2)}(df / 2, 1 / 2), by mpmath at 50 significant digits.
    (scipy's ``2 * t.sf`` was the reference before: near p = 1 it rounds, e.g. 1.0 at t =
    1e-9 and one degree of freedom, where the Cauchy law's 1 - (2 / pi) atan(1e-9) is
    0.99999999936338..., this function's answer.)"""
    import mpmath

    with mpmath.workdps(50):
        x = mpmath.mpf(df) / (df + mpmath.mpf(t) ** 2)
        want = float(mpmath.betainc(mpmath.mpf(df) / 2, mpmath.mpf(1) / 2, 0, x,
                                    regularized=True))
    assert student_t_two_sided(t, df) == pytest.approx(want, rel=1e-10, abs=1e-300)


def test_a_tiny_t_of_one_degree_of_freedom_by_hand():
    import math

    assert student_t_two_sided(1e-9, 1) == pytest.approx(1 - 2 / math.pi * math.atan(1e-9),
                                                         rel=1e-15)


def test_mde_by_hand():
    # diffs 1, 3 | 2, 6: mean 3, cluster sums of deviations -2 and 2, G / (G - 1) = 2:
    # se = sqrt(2 * 8) / 4 = 1; MDE = z_0.975 + z_0.8
    diff, clusters = np.array([1.0, 3.0, 2.0, 6.0]), np.array([0, 0, 1, 1])
    assert cluster_se(diff, clusters) == (1.0, 2)
    assert mde(diff, clusters) == pytest.approx(1.959963984540054 + 0.8416212335729143,
                                                rel=1e-12)
    assert mde(diff, np.zeros(4)) == math.inf  # one session detects nothing
    assert math.isnan(mde(np.empty(0), np.empty(0)))
    # power at the MDE is the power asked
    assert power_at(mde(diff, clusters), 1.0) == pytest.approx(0.8, abs=1e-4)


@pytest.mark.parametrize("clusters", [30, 60, 120])
def test_the_power_formula_holds_in_a_simulation_of_clustered_losses(clusters):
    """Sessions of 6 loss differentials correlated within the session (rho = 0.3): the
    z-test with the clustered standard error, run on 4,000 simulated runs at the true
    effect the formula says it detects with 80% power, rejects 80% of them within 2 points."""
    rng = np.random.default_rng(clusters)
    sims, size, rho = 4000, 6, 0.3
    true_se = math.sqrt((rho + (1 - rho) / size) / clusters)  # unit variance per row
    effect = (1.959963984540054 + 0.8416212335729143) * true_se
    shared = rng.normal(0, math.sqrt(rho), (sims, clusters, 1))
    own = rng.normal(0, math.sqrt(1 - rho), (sims, clusters, size))
    d = (effect + shared + own).reshape(sims, -1)
    codes = np.repeat(np.arange(clusters), size)
    rejected = 0
    for row in d:
        se, _ = cluster_se(row, codes)
        rejected += abs(row.mean() / se) > 1.959963984540054
    assert power_at(effect, true_se) == pytest.approx(0.8, abs=1e-3)
    assert rejected / sims == pytest.approx(0.8, abs=0.02)


def test_series_are_each_groups_mean_in_the_groups_order():
    got = series_of(np.array([1.0, 3.0, 10.0, 5.0]), np.array([2, 2, 0, 1]))
    assert got.tolist() == [10.0, 5.0, 2.0]


@settings(max_examples=80)
@given(st.lists(st.one_of(st.floats(0, 1), st.just(math.nan)), max_size=30))
def test_holm_and_bh_are_statsmodels_with_nan_left_out(p):
    from statsmodels.stats.multitest import multipletests

    p = np.array(p, float)
    ok = np.isfinite(p)
    for ours, method in ((holm, "holm"), (benjamini_hochberg, "fdr_bh")):
        got = ours(p)
        assert np.isnan(got[~ok]).all()
        if ok.any():
            # statsmodels' Holm ends in gc.collect(): a full collection of this process's
            # heap each call (25 s of the suite), which changes no value
            with mock.patch("gc.collect", return_value=0):
                want = multipletests(p[ok], method=method)[1]
            np.testing.assert_allclose(got[ok], want, rtol=1e-12, atol=1e-15)
