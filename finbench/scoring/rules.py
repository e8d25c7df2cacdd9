"""Per-row scoring rules over plain arrays, validated (docs/spec.md §8).

Naming: ``*_loss`` lower is better, ``*_score`` higher is better, ``skill`` is relative to a
reference (``1 - loss / reference_loss``). Argument names are fixed: ``obs`` (0/1 outcome or
realised log return), ``prob`` (probability of up), ``lower``/``upper`` (interval), ``alpha``.
Functions return per-row arrays; take the mean for the aggregate.

>>> float(brier_loss([1, 0], [0.5, 0.5]).mean())
0.25
"""

from __future__ import annotations

import numpy as np

from finbench.scoring import kernels

LOG_LOSS_CLIP = 1e-6
ALPHA = 0.2


def _array(name: str, values) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    # A finite sum proves every value finite without a boolean temporary; only a non-finite
    # sum (or an overflow) pays for the full check that names the row.
    if not np.isfinite(arr.sum()) and not np.isfinite(arr).all():
        first = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{name}: every value must be finite (row {first})")
    return arr


def _binary(obs) -> np.ndarray:
    # NaN and infinities are neither 0 nor 1, so one check proves both rules; a failure
    # names the first non-finite row if there is one
    arr = np.asarray(obs, dtype=float)
    if not ((arr == 0.0) | (arr == 1.0)).all():
        _array("obs", arr)
        raise ValueError("obs: outcomes must be 0 or 1")
    return arr


def _prob(prob, n: int) -> np.ndarray:
    arr = np.asarray(prob, dtype=float)
    if arr.shape != (n,) and arr.shape != ():
        raise ValueError(f"prob: {arr.shape} does not match obs ({n},)")
    # min and max are NaN when any value is, and fail the range check for NaN or infinities
    if arr.size and not (arr.min() >= 0 and arr.max() <= 1):
        _array("prob", arr)
        raise ValueError("prob: probabilities must lie in [0, 1]")
    return arr


def _interval(lower, upper, n: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = _array("lower", lower), _array("upper", upper)
    if lo.shape != hi.shape or lo.shape not in ((n,), ()):
        raise ValueError("lower/upper: shapes must match obs")
    if (lo > hi).any():
        raise ValueError(f"lower/upper: lower > upper in row {int(np.flatnonzero(lo > hi)[0])}")
    return lo, hi


def brier_loss(obs, prob) -> np.ndarray:
    """Brier score ``(prob - obs)**2`` per row."""
    y = _binary(obs)
    return kernels.brier(y, _prob(prob, len(y)))


def log_loss(obs, prob, *, clip: float = LOG_LOSS_CLIP) -> np.ndarray:
    """Negative log likelihood per row, ``prob`` clipped to ``[clip, 1 - clip]`` (declared)."""
    if not 0 < clip < 0.5:
        raise ValueError(f"clip: {clip} is not in (0, 0.5)")
    y = _binary(obs)
    return kernels.log_loss(y, _prob(prob, len(y)), clip)


def winkler_loss(obs, lower, upper, *, alpha: float = ALPHA) -> np.ndarray:
    """Winkler interval score of a central ``1 - alpha`` interval for realised ``obs``; inf
    where the interval is wider than the float range holds (finite bounds, width overflows)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: {alpha} is not in (0, 1)")
    r = _array("obs", obs)
    lo, hi = _interval(lower, upper, len(r))
    return kernels.winkler(r, lo, hi, alpha)


def coverage_score(obs, lower, upper) -> np.ndarray:
    """1.0 where ``lower <= obs <= upper``, else 0.0."""
    r = _array("obs", obs)
    lo, hi = _interval(lower, upper, len(r))
    return kernels.covered(r, lo, hi).astype(float)


def interval_width(lower, upper) -> np.ndarray:
    """``upper - lower`` per row (inf past the float range)."""
    lo, hi = _interval(lower, upper, np.asarray(lower).size)
    return kernels.width(lo, hi)


def accuracy_score(obs, prob) -> np.ndarray:
    """1.0 where the call (up when ``prob > 0.5``) matches the outcome."""
    y = _binary(obs)
    return kernels.correct(y, _prob(prob, len(y))).astype(float)


def kelly_growth_score(obs, prob) -> np.ndarray:
    """Log growth of a Kelly bettor at even odds, ``ln(1 + (2p - 1)(2y - 1))`` (−inf at ruin)."""
    y = _binary(obs)
    with np.errstate(divide="ignore"):
        return kernels.kelly(y, _prob(prob, len(y)))


def skill(loss: float, reference_loss: float) -> float:
    """``1 - loss / reference_loss``; NaN (undefined: FinBench's one representation of an
    undefined number, null in Parquet and empty in CSV) when the reference loss is zero.

    >>> skill(0.2, 0.25), skill(0.1, 0.0)
    (0.19999999999999996, nan)
    """
    if reference_loss == 0:
        return float("nan")
    return 1.0 - loss / reference_loss
