"""The one-line numpy cores of the scoring rules, unvalidated: for vectorised callers that
validated their inputs once (the rules of :mod:`finbench.scoring.rules` validate each call)."""

import numpy as np


def brier(obs, prob):
    return (prob - obs) ** 2


def log_loss(obs, prob, clip):
    p = np.clip(prob, clip, 1.0 - clip)
    return -(obs * np.log(p) + (1 - obs) * np.log(1 - p))


def winkler(obs, lower, upper, alpha):
    with np.errstate(over="ignore"):  # finite bounds past the float range score inf
        below, above = (lower - obs) * (obs < lower), (obs - upper) * (obs > upper)
        return (upper - lower) + (2.0 / alpha) * (below + above)


def width(lower, upper):
    with np.errstate(over="ignore"):  # as wide as [-1.7e308, 1.7e308]: inf
        return upper - lower


def covered(obs, lower, upper):
    return (lower <= obs) & (obs <= upper)


def correct(obs, prob):
    return (prob > 0.5) == (obs == 1)


def kelly(obs, prob):
    return np.log1p((2 * prob - 1) * (2 * obs - 1))
