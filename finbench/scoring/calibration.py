"""Reliability tables, ECE and the Murphy decomposition of the Brier score.

For binned forecasts (each probability replaced by its bin's mean forecast) the decomposition
is exact: ``binned Brier = REL - RES + UNC`` with ``REL = Σ n_k (p̄_k - ō_k)² / N``,
``RES = Σ n_k (ō_k - ō)² / N`` and ``UNC = ō (1 - ō)``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

STRATEGIES = ("uniform", "quantile")


def bin_index(prob, *, bins: int = 10, strategy: str = "uniform") -> tuple[np.ndarray, np.ndarray]:
    """Bin of each forecast and the bin edges. ``uniform``: equal width on [0, 1];
    ``quantile``: equal mass (edges at forecast quantiles; ties share a bin)."""
    prob = np.asarray(prob, float)
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy: {strategy!r} is not one of {', '.join(STRATEGIES)}")
    if strategy == "uniform":
        edges = np.linspace(0.0, 1.0, bins + 1)
    else:
        inner = np.quantile(prob, np.linspace(0, 1, bins + 1))[1:-1] if len(prob) else []
        edges = np.unique(np.r_[0.0, inner, 1.0])
    idx = np.clip(np.searchsorted(edges, prob, side="right") - 1, 0, len(edges) - 2)
    return idx, edges


def reliability_table(obs, prob, *, bins: int = 10, strategy: str = "uniform") -> pd.DataFrame:
    """Per bin: edges, count, mean forecast, observed frequency (empty bins kept, count 0)."""
    return calibration(obs, prob, bins=bins, strategy=strategy)[2]


def ece(obs, prob, *, bins: int = 10, strategy: str = "uniform") -> float:
    """Expected calibration error: ``Σ n_k / N |p̄_k - ō_k|``."""
    return calibration(obs, prob, bins=bins, strategy=strategy)[1]


def murphy(obs, prob, *, bins: int = 10, strategy: str = "uniform") -> dict[str, float]:
    """Reliability, resolution, uncertainty and the binned Brier score they add up to."""
    return calibration(obs, prob, bins=bins, strategy=strategy)[0]


def calibration(obs, prob, *, bins: int = 10, strategy: str = "uniform"
                ) -> tuple[dict[str, float], float, pd.DataFrame]:
    """(:func:`murphy`, :func:`ece`, :func:`reliability_table`) of the same forecasts, binned
    once (equal-mass edges are quantiles of every forecast: a sort each time)."""
    obs, prob = np.asarray(obs, float), np.asarray(prob, float)
    idx, edges = bin_index(prob, bins=bins, strategy=strategy)
    k = len(edges) - 1
    count = np.bincount(idx, minlength=k)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_p = np.bincount(idx, weights=prob, minlength=k) / count
        freq = np.bincount(idx, weights=obs, minlength=k) / count
    table = pd.DataFrame({"bin": np.arange(k), "lower": edges[:-1], "upper": edges[1:],
                          "count": count, "mean_prob": mean_p, "obs_freq": freq})
    used = table[table["count"] > 0]
    n = used["count"].sum()
    error = float((used["count"] * (used["mean_prob"] - used["obs_freq"]).abs()).sum() / n)
    base = obs.mean()
    rel = float((used["count"] * (used["mean_prob"] - used["obs_freq"]) ** 2).sum() / n)
    res = float((used["count"] * (used["obs_freq"] - base) ** 2).sum() / n)
    unc = float(base * (1 - base))
    binned = table["mean_prob"].to_numpy()[idx]
    terms = {"reliability": rel, "resolution": res, "uncertainty": unc,
             "brier_binned": float(np.mean((binned - obs) ** 2)),
             "brier": float(np.mean((prob - obs) ** 2)), "n": int(n)}
    return terms, error, table
