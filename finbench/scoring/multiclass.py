"""Scores of a forecast over ``K`` ordered classes (the intraday track's three: ``down``,
``flat``, ``up``, class 0, 1, 2). Each function takes the observed class per row (``-1``: no
scorable label) and the forecast probabilities as an ``n x K`` array whose rows sum to 1,
and gives one number per row (NaN where there is no label).

- Brier: ``sum_k (p_k - o_k)^2`` over the classes (0 to 2 for three).
- Log loss: ``-ln(clip(p_y))`` with ``p_y`` clipped to ``[clip, 1 - clip]``.
- Ranked probability score: ``sum_{k=1}^{K-1} (P_k - O_k)^2`` over the cumulative
  probabilities of the first ``k`` classes (0 to 2 for three; it knows ``up`` is farther
  from ``down`` than ``flat`` is).
- Accuracy: 1 when the observed class is the most probable one; shared maxima share the credit
  (``1/m`` for ``m`` tied classes).
"""

from __future__ import annotations

import numpy as np


def _observed(y: np.ndarray, n: int, k: int) -> np.ndarray:
    onehot = np.zeros((n, k))
    has = y >= 0
    onehot[np.flatnonzero(has), y[has]] = 1.0
    return onehot


def brier(y, p) -> np.ndarray:
    """Multiclass Brier score per row.

    >>> brier([2], [[0.125, 0.375, 0.5]]).round(6).tolist()
    [0.40625]
    """
    y, p = np.asarray(y, np.int64), np.asarray(p, float)
    out = ((p - _observed(y, len(y), p.shape[1])) ** 2).sum(axis=1)
    return np.where(y >= 0, out, np.nan)


def log_loss(y, p, clip: float = 1e-6) -> np.ndarray:
    """Log loss of the observed class per row.

    >>> log_loss([2], [[0.125, 0.375, 0.5]]).round(6).tolist()
    [0.693147]
    """
    y, p = np.asarray(y, np.int64), np.asarray(p, float)
    picked = p[np.arange(len(y)), np.maximum(y, 0)]
    return np.where(y >= 0, -np.log(np.clip(picked, clip, 1 - clip)), np.nan)


def rps(y, p) -> np.ndarray:
    """Ranked probability score per row (cumulative over the ordered classes).

    >>> rps([2, 0], [[0.125, 0.375, 0.5], [0.125, 0.375, 0.5]]).round(6).tolist()
    [0.265625, 1.015625]
    """
    y, p = np.asarray(y, np.int64), np.asarray(p, float)
    cum_p = np.cumsum(p, axis=1)[:, :-1]
    cum_o = np.cumsum(_observed(y, len(y), p.shape[1]), axis=1)[:, :-1]
    return np.where(y >= 0, ((cum_p - cum_o) ** 2).sum(axis=1), np.nan)


def accuracy(y, p) -> np.ndarray:
    """1 when the observed class is the most probable, shared among tied maxima.

    >>> accuracy([2, 1, 0], [[0.1, 0.2, 0.7], [0.4, 0.4, 0.2], [0.1, 0.2, 0.7]]).tolist()
    [1.0, 0.5, 0.0]
    """
    y, p = np.asarray(y, np.int64), np.asarray(p, float)
    top = p == p.max(axis=1, keepdims=True)
    hit = top[np.arange(len(y)), np.maximum(y, 0)]
    return np.where(y >= 0, hit / top.sum(axis=1), np.nan)
