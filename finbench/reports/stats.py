"""The rule every report table follows: a row is "descriptive only" when it holds too few
rows or clusters for its interval to hold its level."""

from __future__ import annotations

import numpy as np

DESCRIPTIVE = "descriptive only"


def descriptive(n, clusters, *, min_n: int, min_clusters: int):
    """The flag of a table's row: "descriptive only" when it holds fewer than ``min_n``
    forecasts or fewer than ``min_clusters`` of the clusters its intervals resample, else
    empty. The one rule of every table: a percentile cluster bootstrap's 95% interval covers
    92% or more only from 20 clusters (sessions, or event groups: 84% at 5, 89-90% at 10;
    ``benchmarks/bench_bootstrap_coverage.py``), and with ``cluster = "session_ticker"`` the
    clusters counted are still the sessions, which a market-wide factor moves together.
    ``n`` and ``clusters``: numbers, or arrays of them (then an array of flags)."""
    below = (np.asarray(n) < min_n) | (np.asarray(clusters) < min_clusters)
    return np.where(below, DESCRIPTIVE, "") if below.ndim else (DESCRIPTIVE if below else "")


