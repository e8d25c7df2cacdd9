"""What a paired comparison can say beside its bootstrap interval (docs/reports.md,
"Power and tests"): the smallest difference it could detect, a test robust to serial
correlation, and p-values adjusted for the many pairs of a table.

- :func:`mde`: the minimum detectable mean difference at power ``1 - beta`` for a two-sided
  test of level ``alpha``, ``(z_{1-alpha/2} + z_{1-beta}) * se``, with ``se`` the
  cluster-robust standard error of the mean difference (clusters summed, the small-sample
  factor ``G / (G - 1)``): with N rows in G clusters, "no difference" reads as "none larger
  than the MDE"; one cluster detects nothing (an infinite MDE).
- :func:`diebold_mariano`: the Diebold-Mariano test on a time series of loss differentials
  (the intraday track: each session's mean differential, sessions in order), with the
  Newey-West (Bartlett) long-run variance at Newey and West's (1994) rule-of-thumb lags and
  Harvey, Leybourne and Newbold's small-sample form (Student's t), as
  ``statsmodels.tsa.stattools.diebold_mariano_test(..., harvey_adj=True)`` computes it (a
  test checks the two agree).
- :func:`holm` and :func:`benjamini_hochberg`: adjusted p-values (Holm's step-down
  family-wise rule; Benjamini and Hochberg's false discovery rate), NaN left out and kept.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

POWER = 0.8
ALPHA = 0.05


def cluster_se(diff: np.ndarray, clusters: np.ndarray) -> tuple[float, int]:
    """(the cluster-robust standard error of ``mean(diff)``, the number of clusters): the
    square root of ``G / (G - 1) * sum_g (S_g - n_g * mean)^2 / N^2``; infinite from one
    cluster (nothing is known of the variance between clusters), NaN without rows."""
    diff = np.asarray(diff, float)
    n = len(diff)
    if n == 0:
        return math.nan, 0
    codes, inverse = np.unique(np.asarray(clusters), return_inverse=True)
    g = len(codes)
    if g < 2:
        return math.inf, g
    mean = diff.mean()
    sums = np.bincount(inverse, weights=diff - mean, minlength=g)
    return math.sqrt(g / (g - 1) * float(np.dot(sums, sums))) / n, g


def mde(diff: np.ndarray, clusters: np.ndarray, *, alpha: float = ALPHA,
        power: float = POWER) -> float:
    """The minimum detectable mean difference of a two-sided level-``alpha`` test at
    ``power``, from the rows' own clustered variance: infinite from a single cluster (one
    session can detect no difference), NaN without rows."""
    se, _ = cluster_se(diff, clusters)
    z = NormalDist()
    return (z.inv_cdf(1 - alpha / 2) + z.inv_cdf(power)) * se


def power_at(effect: float, se: float, *, alpha: float = ALPHA) -> float:
    """The power of the two-sided level-``alpha`` z-test to detect a true mean difference
    ``effect`` when the estimate's standard error is ``se`` (both tails)."""
    z = NormalDist()
    crit = z.inv_cdf(1 - alpha / 2)
    return z.cdf(effect / se - crit) + z.cdf(-effect / se - crit)


def series_of(diff: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The mean differential of each group (``order``: each row's group as a number, the
    groups' order being time's, as session codes in date order are), in that order."""
    order = np.asarray(order, np.int64)
    if not len(order):
        return np.empty(0)
    codes, inverse = np.unique(order, return_inverse=True)
    sums = np.bincount(inverse, weights=np.asarray(diff, float), minlength=len(codes))
    return sums / np.bincount(inverse, minlength=len(codes))


def default_lags(t: int) -> int:
    """Newey and West's (1994) rule of thumb for the Bartlett kernel, ``floor(4 (T / 100) **
    (2 / 9))``: at the few sessions a run has, the cube-root rule's extra lags bias the
    long-run variance down (benchmarks/bench_inference.py measures the coverage of both)."""
    return int(4 * (t / 100) ** (2 / 9)) if t > 0 else 0


def diebold_mariano(d: np.ndarray, lags: int | None = None) -> tuple[float, float, int]:
    """(statistic, two-sided p, lags) of the Diebold-Mariano test that ``d`` (a loss
    differential series, in time order) has mean zero, with Harvey, Leybourne and
    Newbold's (1997) small-sample form: ``DM = mean(d) / sqrt(lrv / T)``, the long-run
    variance ``gamma_0 + 2 sum_{j<=L} (1 - j / (L + 1)) gamma_j`` (autocovariances about
    the mean, divided by T), ``L`` :func:`default_lags` unless given (at most T - 1); the
    statistic scaled by ``sqrt((T - 1) / T)`` (one-step forecasts) and p from Student's t
    with T - 1 degrees of freedom (``statsmodels.tsa.stattools.diebold_mariano_test`` with
    ``harvey_adj=True`` computes the same). NaN with fewer than three points or no variance."""
    d = np.asarray(d, float)
    t = len(d)
    lags = default_lags(t) if lags is None else int(lags)
    lags = max(0, min(lags, t - 1))
    if t < 3:
        return math.nan, math.nan, lags
    e = d - d.mean()
    lrv = float(np.dot(e, e)) / t
    for j in range(1, lags + 1):
        lrv += 2 * (1 - j / (lags + 1)) * float(np.dot(e[j:], e[:-j])) / t
    if not lrv > 0:
        return math.nan, math.nan, lags
    stat = float(d.mean()) / math.sqrt(lrv / t) * math.sqrt((t - 1) / t)
    return stat, student_t_two_sided(stat, t - 1), lags


def student_t_two_sided(stat: float, df: int) -> float:
    """``P(|T| >= |stat|)`` for Student's t with ``df`` degrees of freedom: the regularized
    incomplete beta ``I_x(df / 2, 1 / 2)`` at ``x = df / (df + stat^2)``."""
    square = stat * stat
    return _beta_inc(df / 2, 0.5, df / (df + square), square / (df + square))


def _beta_inc(a: float, b: float, x: float, y: float) -> float:
    """The regularized incomplete beta function ``I_x(a, b)`` (``y = 1 - x``, given apart so
    that neither loses digits) by its continued fraction (modified Lentz), on the side where
    it converges fast."""
    if x <= 0:
        return 0.0
    if y <= 0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log(y))
    if x > (a + 1) / (a + b + 2):
        return 1.0 - front * _fraction(b, a, y) / b
    return front * _fraction(a, b, x) / a


def _fraction(a: float, b: float, x: float) -> float:
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    out = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + num * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + num / c
            c = c if abs(c) > tiny else tiny
            out *= d * c
        if abs(d * c - 1) < 1e-16:
            break
    return out


def holm(p) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN entries left out of the family, kept NaN)."""
    p = np.asarray(p, float)
    out = np.full(len(p), np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = len(ok)
    if not m:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out[order] = np.minimum(adjusted, 1.0)
    return out


def benjamini_hochberg(p) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (NaN entries left out of the family, kept NaN)."""
    p = np.asarray(p, float)
    out = np.full(len(p), np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = len(ok)
    if not m:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    ranked = p[order] * m / np.arange(1, m + 1)
    out[order] = np.minimum(np.minimum.accumulate(ranked[::-1])[::-1], 1.0)
    return out
