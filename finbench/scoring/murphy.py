"""Murphy diagrams (Ehm, Gneiting, Jordan and Krueger 2016): the mean elementary score of
probability forecasts at each threshold ``theta`` in (0, 1),

    S_theta(p, y) = theta        if y = 0 and p > theta (a false alarm at theta),
                    1 - theta    if y = 1 and p <= theta (a miss at theta),
                    0            otherwise,

whose mixture is the Brier score: ``(p - y)^2 = 2 * integral_0^1 S_theta(p, y) dtheta``. A
forecaster whose curve lies below another's everywhere is better under every proper score
(every decision maker's cost ratio ``theta``), not under the Brier score alone."""

from __future__ import annotations

import numpy as np

THRESHOLDS = np.linspace(0.0, 1.0, 201)[1:-1]  # (0, 1): a step of 0.005


def elementary_scores(p: np.ndarray, y: np.ndarray,
                      thresholds: np.ndarray = THRESHOLDS) -> np.ndarray:
    """The mean elementary score at each threshold: from the forecasts of the 0-outcomes
    above it (each costing ``theta``) and of the 1-outcomes at or below it (each ``1 -
    theta``), counted by a binary search over each group's sorted forecasts."""
    p, y = np.asarray(p, float), np.asarray(y, float)
    n = len(p)
    if n == 0:
        return np.full(len(thresholds), np.nan)
    zeros, ones = np.sort(p[y == 0]), np.sort(p[y == 1])
    alarms = len(zeros) - np.searchsorted(zeros, thresholds, side="right")  # p > theta
    misses = np.searchsorted(ones, thresholds, side="right")  # p <= theta
    return (thresholds * alarms + (1 - thresholds) * misses) / n
