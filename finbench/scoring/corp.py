"""CORP reliability (Dimitriadis, Gneiting and Jordan 2021, "Stable reliability diagrams for
probabilistic classifiers", PNAS): the forecasts recalibrated by isotonic regression of the
outcomes on them (pool-adjacent-violators, PAV), a diagram that needs no bins, and the Brier
score's CORP decomposition

    Brier(p) = MCB - DSC + UNC,  MCB = S(p) - S(c),  DSC = S(r) - S(c),  UNC = S(r),

with ``S`` the mean Brier score, ``c`` the recalibrated forecasts and ``r`` the outcomes'
mean (the climatology of the same rows). MCB >= 0 (miscalibration), DSC >= 0
(discrimination); the identity holds exactly, in any sample.

Consistency bands: where the forecasts hold at most :data:`MAX_DISTINCT` distinct values,
outcomes are drawn again as if the forecasts were calibrated (``y* ~ Bernoulli(p)``, as
counts per distinct value), recalibrated, and the band at each value is the ``level``
quantiles of the recalibrated values: a diagram leaving its band says the miscalibration is
more than chance would make it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MAX_DISTINCT = 2_000  # distinct forecast values for which bands are drawn
BAND_REPLICATES = 500
BAND_LEVEL = 0.9


def pav(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The weighted isotonic (non-decreasing) fit of ``y`` in the given order, by
    pool-adjacent-violators: blocks merged while a block's mean exceeds the next one's. The
    last block is kept in plain variables and the ones before it on a stack (a report fits
    2,000 sequences of some 600 values); the merges are made in the same order, with the same
    arithmetic, as pushing every value and merging the top two."""
    ys, ws = np.asarray(y, float).tolist(), np.asarray(w, float).tolist()
    if not ys:
        return np.array([])
    means, weights, sizes = [], [], []  # the blocks before the last
    mean, weight, size = ys[0], ws[0], 1  # the last block
    for value, wt in zip(ys[1:], ws[1:], strict=True):
        if mean > value:  # merged into the last block, then it into those before it
            total = weight + wt
            mean, weight, size = (mean * weight + value * wt) / total, total, size + 1
            while means and means[-1] > mean:
                below = weights.pop()
                total = below + weight
                mean, weight = (means.pop() * below + mean * weight) / total, total
                size += sizes.pop()
        else:
            means.append(mean)
            weights.append(weight)
            sizes.append(size)
            mean, weight, size = value, wt, 1
    means.append(mean)
    sizes.append(size)
    return np.repeat(np.array(means), sizes)


def distinct_values(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(p, return_inverse=True, return_counts=True)``, the same arrays, found by
    hashing (a report's 373,500 forecasts per model hold some 600 values: sorting the values
    found, not every forecast, is 8x faster). Forecasts with a missing value, or with both
    zeros (which one ``np.unique`` keeps is its sort's), are left to ``np.unique``."""
    zeros = p[p == 0]
    if not np.isfinite(p).all() or (len(zeros) and np.signbit(zeros).any()
                                    and not np.signbit(zeros).all()):
        return np.unique(p, return_inverse=True, return_counts=True)
    codes, found = pd.factorize(p)
    order = np.argsort(found, kind="stable")
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order))
    inverse = rank[codes]
    return found[order], inverse, np.bincount(inverse, minlength=len(order))


def distinct(p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the distinct forecast values, sorted; how many rows hold each; how many of them
    resolved 1)."""
    values, inverse, counts = distinct_values(np.asarray(p, float))
    ones = np.bincount(inverse, weights=np.asarray(y, float), minlength=len(values))
    return values, counts, ones


def recalibrated(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each row's CORP-recalibrated probability (rows tied in ``p`` share one: the outcomes
    of a distinct value are pooled before the fit)."""
    values, counts, ones = distinct(p, y)
    fit = pav(ones / counts, counts)
    return fit[np.searchsorted(values, np.asarray(p, float))]


def decomposition(p: np.ndarray, y: np.ndarray) -> dict:
    """The CORP decomposition of the mean Brier score of forecasts ``p`` of outcomes ``y``
    (0 or 1): ``brier``, ``mcb``, ``dsc``, ``unc``, ``n``, ``distinct``."""
    return reliability(p, y, seed=None)[0]


def diagram(p: np.ndarray, y: np.ndarray, *, seed: int, replicates: int = BAND_REPLICATES,
            level: float = BAND_LEVEL) -> dict:
    """The CORP diagram's points: each distinct forecast value ``x`` with its recalibrated
    probability ``cep`` and row count, and (with at most :data:`MAX_DISTINCT` values) the
    consistency band ``[lower, upper]`` at each, from ``replicates`` draws of the outcomes
    under calibration (seeded: the same band every time)."""
    return reliability(p, y, seed=seed, replicates=replicates, level=level)[1]


def reliability(p: np.ndarray, y: np.ndarray, *, seed: int | None,
                replicates: int = BAND_REPLICATES, level: float = BAND_LEVEL
                ) -> tuple[dict, dict]:
    """(:func:`decomposition`, :func:`diagram`) of the same rows, their distinct values found
    and fitted once (``seed`` None: the diagram without bands)."""
    p, y = np.asarray(p, float), np.asarray(y, float)
    values, inverse, counts = distinct_values(p)
    ones = np.bincount(inverse, weights=y, minlength=len(values))
    fit = pav(ones / counts, counts) if len(values) else values
    drawn = {"x": values, "cep": fit, "count": counts, "lower": None, "upper": None}
    if seed is not None and 0 < len(values) <= MAX_DISTINCT:
        rng = np.random.default_rng(seed)
        draws = rng.binomial(counts, values, size=(replicates, len(values)))
        fits = np.vstack([pav(d / counts, counts) for d in draws])
        tail = (1 - level) / 2
        drawn["lower"], drawn["upper"] = np.quantile(fits, [tail, 1 - tail], axis=0)
    n = len(p)
    if n == 0:
        return {"n": 0, "distinct": 0, "brier": np.nan, "mcb": np.nan, "dsc": np.nan,
                "unc": np.nan}, drawn
    c = fit[inverse]  # each row's recalibrated probability
    s_p, s_c = float(np.mean((p - y) ** 2)), float(np.mean((c - y) ** 2))
    s_r = float(np.mean((y.mean() - y) ** 2))
    return {"n": n, "distinct": len(values), "brier": s_p, "mcb": s_p - s_c,
            "dsc": s_r - s_c, "unc": s_r}, drawn
