"""Cluster bootstrap: resample whole sessions (rows of one session are correlated).

Every statistic here is a ratio of sums, so a replicate is a weighted sum over clusters: draw
``B × C`` multinomial cluster counts once (seeded; a block of replicates at a time when that
is large), multiply by per-cluster sums. A row bootstrap is the same with every row its own
cluster. Percentile intervals; paired differences get a two-sided p-value from the share of
replicates on either side of zero. With fewer than two clusters there is no interval (NaN),
whatever the number of rows.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

DEFAULT_REPLICATES = 2000
MIN_CLUSTERS = 2  # with one cluster every replicate is the sample: no interval exists
KEEP_DRAWS = 8                   # recent draws kept ...
KEEP_DRAW_BYTES = 64 * 2**20     # ... each at most this large (2,000 × 4,000 clusters)
KEEP_PRODUCT_BYTES = 32 * 2**20  # products of a kept draw kept, at most this many bytes


@dataclass(frozen=True)
class Interval:
    estimate: float
    lower: float
    upper: float
    n: int
    clusters: int


class Draws:
    """Cluster counts drawn once and kept (read-only) while small: a report asks for the same
    draw for every slice with as many clusters (thousands of times at 500 tickers). The
    report that owns one passes it to every interval it computes; without one, each call
    draws afresh. ``keep``: how many recent draws are kept; ``keep_bytes``: the largest kept
    (a larger draw is made a block of replicates at a time)."""

    def __init__(self, keep: int = KEEP_DRAWS, keep_bytes: int = KEEP_DRAW_BYTES,
                 product_bytes: int = KEEP_PRODUCT_BYTES) -> None:
        self.keep, self.keep_bytes, self.product_bytes = keep, keep_bytes, product_bytes
        self.kept: dict[tuple[int, int, int], np.ndarray] = {}
        self.products: dict[tuple, np.ndarray] = {}
        self._product_held = 0

    def weights(self, n_clusters: int, *, replicates: int, seed: int) -> np.ndarray:
        """``replicates × n_clusters`` counts: how often each cluster is drawn in each
        replicate (as floats, exact, so that weighting sums by them is one BLAS product with
        no cast). The draw depends on its three arguments only."""
        key = (n_clusters, replicates, seed)
        if key in self.kept:
            self.kept[key] = self.kept.pop(key)  # most recently used last
            return self.kept[key]
        w = _draw(np.random.default_rng(seed), n_clusters, replicates)
        w.flags.writeable = False
        if w.nbytes <= self.keep_bytes:
            self.kept[key] = w
            while len(self.kept) > self.keep:
                del self.kept[next(iter(self.kept))]
        return w

    def product(self, n_clusters: int, sums: np.ndarray, *, replicates: int, seed: int
                ) -> np.ndarray:
        """``weights(...) @ sums``: each replicate's weighted sum (read-only). A report asks
        the same product many times (a coin's Brier sums are the same in every ticker's
        cell; a reference's sums again for each model paired with it on the same rows), so
        products of a kept draw are kept too, by the sums' bytes, up to
        :attr:`product_bytes` (the oldest let go): the same inputs, the same product, the
        same bits."""
        w = self.weights(n_clusters, replicates=replicates, seed=seed)
        drawn = (n_clusters, replicates, seed)
        if drawn not in self.kept or self.product_bytes <= 0:  # (a draw too large to keep)
            return w @ sums
        key = (*drawn, sums.dtype.str, sums.tobytes())
        got = self.products.get(key)
        if got is None:
            got = w @ sums
            got.flags.writeable = False
            self.products[key] = got
            self._product_held += got.nbytes + len(key[-1])
            while self._product_held > self.product_bytes and self.products:
                oldest = next(iter(self.products))
                self._product_held -= self.products.pop(oldest).nbytes + len(oldest[-1])
        return got


def cluster_weights(n_clusters: int, *, replicates: int, seed: int) -> np.ndarray:
    """The counts of :meth:`Draws.weights`, drawn afresh."""
    return Draws(keep=0).weights(n_clusters, replicates=replicates, seed=seed)


def _ratios(top: np.ndarray, bottom: np.ndarray, *, replicates: int, seed: int,
            draws: Draws | None) -> np.ndarray:
    """``(w @ top) / (w @ bottom)`` for each replicate's cluster counts ``w``. A draw too large
    to keep (e.g. sessions × tickers as clusters over a year of 500 tickers: 2,000 × 126,000
    counts, 2 GB) is made and used a block of replicates at a time, from the same seeded
    stream, so memory stays bounded however many clusters there are."""
    n, draws = len(top), draws or Draws(keep=0)
    block = max(1, draws.keep_bytes // (8 * n)) if n else replicates
    whole = _constant_count(bottom)
    with np.errstate(invalid="ignore", divide="ignore"):
        if block >= replicates:
            def product(sums):
                return draws.product(n, sums, replicates=replicates, seed=seed)
            return product(top) / (product(bottom) if whole is None else whole)
        rng, out = np.random.default_rng(seed), np.empty(replicates)
        for start in range(0, replicates, block):
            w = _draw(rng, n, min(block, replicates - start))
            out[start:start + len(w)] = (w @ top) / (w @ bottom if whole is None else whole)
        return out


def _constant_count(bottom: np.ndarray) -> float | None:
    """``w @ bottom`` for every replicate's counts ``w`` when ``bottom`` is one whole number
    repeated (clusters of equal size, as a mean's row counts mostly are): each replicate draws
    ``len(bottom)`` clusters, so the product is that number times ``len(bottom)``, exactly
    (whole numbers below 2**53 sum exactly in any order: the product's bits); else None."""
    if not len(bottom) or bottom[0] != bottom[-1]:
        return None
    first = float(bottom[0])
    if not first.is_integer() or abs(first) * len(bottom) >= 2.0**53 or not (
            bottom == first).all():
        return None
    return first * len(bottom)


def _draw(rng: np.random.Generator, n_clusters: int, replicates: int) -> np.ndarray:
    """The next ``replicates`` rows of cluster counts from ``rng`` (equal chances), as floats."""
    if n_clusters == 0:
        return np.zeros((replicates, 0))
    return rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters),
                           size=replicates).astype(float)


def _sums(values: np.ndarray, clusters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each cluster's sum of ``values`` and its count of rows, clusters in ascending order
    (only those with rows). Each sum adds its rows in row order, whichever way the clusters
    are found: by their codes directly where they are small non-negative integers (a report's
    cluster codes: no sort), else through their sorted distinct values."""
    if (clusters.dtype.kind in "iu" and len(clusters)
            and 0 <= clusters.min() and (k := int(clusters.max()) + 1) <= 4 * len(clusters)):
        counts = np.bincount(clusters, minlength=k)
        sums = np.bincount(clusters, weights=values, minlength=k)
        if counts.all():
            return sums, counts
        kept = counts > 0
        return sums[kept], counts[kept]
    _, inverse = np.unique(clusters, return_inverse=True)
    k = inverse.max() + 1 if len(inverse) else 0
    return np.bincount(inverse, weights=values, minlength=k), np.bincount(inverse, minlength=k)


def _percentile(reps: np.ndarray, level: float) -> tuple[float, float]:
    """The two-sided percentile interval of the finite replicates at ``level``: numpy's
    default rule (``np.percentile``, linear interpolation between order statistics, Hyndman
    and Fan's 7th), computed as numpy computes it, bit for bit (a test holds the two
    together), without its general machinery, which cost 180 us a call: a report asks
    thousands (where each order statistic lies is worked out once per count and level)."""
    finite = np.isfinite(reps)
    if not finite.all():
        reps = reps[finite]
    n = len(reps)
    if n == 0:
        return np.nan, np.nan
    lower, upper, gamma, kth, late = _order_statistics(n, float(level))
    ordered = np.partition(reps, kth)
    out = _between(ordered[lower], ordered[upper], gamma, late)
    return float(out[0]), float(out[1])


def _between(a: np.ndarray, b: np.ndarray, gamma: np.ndarray, late: np.ndarray) -> np.ndarray:
    """numpy's linear interpolation between order statistics ``a`` and ``b`` (the bounds on
    the last axis) with weights ``gamma``, from the upper end where ``late``."""
    diff = b - a
    out = a + diff * gamma
    out[..., late] = (b - diff * (1 - gamma))[..., late]
    return out


@functools.lru_cache(maxsize=64)
def _order_statistics(n: int, level: float) -> tuple:
    """For :func:`_percentile` of ``n`` replicates at ``level``: the order statistics below
    and above each bound, numpy's weight between them, the distinct ones to partition at,
    and where numpy interpolates from the upper one (read-only arrays)."""
    tail = (1 - level) / 2 * 100
    virtual = (n - 1) * np.true_divide(np.array([tail, 100 - tail]), 100)
    below = np.floor(virtual)
    last = virtual >= n - 1  # at or past the largest: the largest itself
    below[last] = n - 1
    lower = below.astype(np.intp)
    upper = np.where(last, n - 1, lower + 1)
    gamma = virtual - np.where(last, -1.0, below)  # (numpy's weight there; it multiplies 0)
    kth = np.unique(np.r_[lower, upper])
    late = gamma >= 0.5
    for array in (lower, upper, gamma, kth, late):
        array.flags.writeable = False
    return lower, upper, gamma, kth, late


def mean_ci(values, clusters, *, replicates: int = DEFAULT_REPLICATES, seed: int = 0,
            level: float = 0.95, draws: Draws | None = None) -> Interval:
    """Percentile CI of a mean, resampling clusters."""
    values = np.asarray(values, float)
    sums, counts = _sums(values, np.asarray(clusters))
    reps = _ratios(sums, counts, replicates=replicates, seed=seed, draws=draws)
    lo, hi = _percentile(reps, level) if len(sums) >= MIN_CLUSTERS else (np.nan, np.nan)
    est = float(values.mean()) if len(values) else np.nan
    return Interval(est, lo, hi, len(values), len(sums))


def skill_ci(loss, reference_loss, clusters, *, replicates: int = DEFAULT_REPLICATES,
             seed: int = 0, level: float = 0.95, draws: Draws | None = None) -> Interval:
    """CI of ``1 - mean(loss) / mean(reference_loss)`` on paired rows, resampling clusters."""
    loss, ref = np.asarray(loss, float), np.asarray(reference_loss, float)
    clusters = np.asarray(clusters)
    s_loss, counts = _sums(loss, clusters)
    s_ref, _ = _sums(ref, clusters)
    reps = 1.0 - _ratios(s_loss, s_ref, replicates=replicates, seed=seed, draws=draws)
    lo, hi = _percentile(reps, level) if len(counts) >= MIN_CLUSTERS else (np.nan, np.nan)
    total_ref = ref.sum()
    est = float(1.0 - loss.sum() / total_ref) if len(loss) and total_ref != 0 else np.nan
    return Interval(est, lo, hi, len(loss), len(counts))


def paired_difference(loss_a, loss_b, clusters, *, replicates: int = DEFAULT_REPLICATES,
                      seed: int = 0, level: float = 0.95, draws: Draws | None = None
                      ) -> tuple[Interval, float]:
    """CI of ``mean(loss_a - loss_b)`` on shared rows and a two-sided bootstrap p-value."""
    diff = np.asarray(loss_a, float) - np.asarray(loss_b, float)
    sums, counts = _sums(diff, np.asarray(clusters))
    reps = _ratios(sums, counts, replicates=replicates, seed=seed, draws=draws)
    reps = reps[np.isfinite(reps)]
    lo, hi = _percentile(reps, level)
    if len(reps) == 0 or len(sums) < MIN_CLUSTERS:
        lo = hi = p = np.nan
    else:
        p = float(min(1.0, 2 * min((reps <= 0).mean(), (reps >= 0).mean())))
    est = float(diff.mean()) if len(diff) else np.nan
    return Interval(est, lo, hi, len(diff), len(sums)), p


CELL_SUM_BINS = 16_000_000  # cells x clusters summed in one pass at most (128 MB of sums)


def cell_mean_cis(values, cells: list[np.ndarray], clusters, *,
                  replicates: int = DEFAULT_REPLICATES, seed: int = 0, level: float = 0.95,
                  draws: Draws | None = None) -> list[Interval]:
    """:func:`mean_ci` of ``values[rows]`` (clusters ``clusters[rows]``) for the rows of each
    cell, bit for bit, their work shared: every cell's cluster sums in one pass, its
    intervals' order statistics found together. A table of 2,000 cells (500 tickers x 4
    models) asks this once per column instead of 2,000 times."""
    at, cuts = _laid(cells)
    v = np.asarray(values, float)[at]
    sums = _cell_sums([v], cuts, np.asarray(clusters)[at])
    reps = [_ratios(top, count, replicates=replicates, seed=seed, draws=draws)
            for (top,), count in sums]
    bounds = _cell_percentiles(reps, [len(count) for _, count in sums], replicates, level)
    return [Interval(float(v[i:j].mean()) if j > i else np.nan, lo, hi, j - i, len(count))
            for i, j, (lo, hi), (_, count) in zip(cuts[:-1], cuts[1:], bounds, sums,
                                                   strict=True)]


def cell_skill_cis(loss, reference_loss, pairs: list[tuple[np.ndarray, np.ndarray]], clusters,
                   *, replicates: int = DEFAULT_REPLICATES, seed: int = 0, level: float = 0.95,
                   draws: Draws | None = None) -> list[Interval]:
    """:func:`skill_ci` of ``loss[a]`` against ``reference_loss[b]`` (clusters
    ``clusters[a]``) for the paired rows ``(a, b)`` of each cell, bit for bit, their work
    shared as in :func:`cell_mean_cis`."""
    at, cuts = _laid([a for a, _ in pairs])
    theirs, _ = _laid([b for _, b in pairs])
    mine, ref = np.asarray(loss, float)[at], np.asarray(reference_loss, float)[theirs]
    sums = _cell_sums([mine, ref], cuts, np.asarray(clusters)[at])
    estimates, reps = [], []
    for i, j, ((s_loss, s_ref), _) in zip(cuts[:-1], cuts[1:], sums, strict=True):
        reps.append(1.0 - _ratios(s_loss, s_ref, replicates=replicates, seed=seed,
                                  draws=draws))
        total_ref = ref[i:j].sum()
        estimates.append(float(1.0 - mine[i:j].sum() / total_ref)
                         if j > i and total_ref != 0 else np.nan)
    bounds = _cell_percentiles(reps, [len(count) for _, count in sums], replicates, level)
    return [Interval(est, lo, hi, j - i, len(count))
            for est, i, j, (lo, hi), (_, count) in zip(estimates, cuts[:-1], cuts[1:], bounds,
                                                        sums, strict=True)]


def _laid(cells: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(every cell's rows laid end to end, where each cell starts and the last ends)."""
    cuts = np.zeros(len(cells) + 1, np.int64)
    cuts[1:] = np.cumsum([len(rows) for rows in cells])
    at = np.concatenate(cells).astype(np.int64, copy=False) if len(cells) \
        else np.empty(0, np.int64)
    return at, cuts


def _cell_sums(columns: list[np.ndarray], cuts: np.ndarray, clusters: np.ndarray
               ) -> list[tuple[list[np.ndarray], np.ndarray]]:
    """Per cell (rows ``cuts[i]:cuts[i + 1]`` of ``columns`` and ``clusters``), :func:`_sums`
    of each column: (each column's cluster sums, the clusters' row counts), clusters in
    ascending order, only those with rows. Where the clusters are small codes, one
    ``bincount`` over (cell, cluster) does every cell (each bin adds its rows in row order,
    as a cell's own ``bincount`` does: the same bits); else each cell alone."""
    n = len(cuts) - 1
    k = int(clusters.max()) + 1 if len(clusters) and clusters.dtype.kind in "iu" else 0
    if not (k and clusters.min() >= 0 and n * k <= CELL_SUM_BINS):
        out = []
        for i, j in zip(cuts[:-1], cuts[1:], strict=True):
            found = [_sums(column[i:j], clusters[i:j]) for column in columns]
            out.append(([total for total, _ in found], found[0][1] if found else None))
        return out
    key = np.repeat(np.arange(n, dtype=np.int64) * k, np.diff(cuts)) + clusters
    counts = np.bincount(key, minlength=n * k).reshape(n, k)
    totals = [np.bincount(key, weights=column, minlength=n * k).reshape(n, k)
              for column in columns]
    out = []
    for i in range(n):
        has = counts[i] > 0
        out.append(([total[i][has] for total in totals], counts[i][has]))
    return out


def _cell_percentiles(reps: list[np.ndarray], clusters: list[int], replicates: int,
                      level: float) -> list[tuple[float, float]]:
    """:func:`_percentile` of each cell's replicates (none with fewer than
    :data:`MIN_CLUSTERS` clusters), those all finite and of full count partitioned together
    (the same order statistics, the same arithmetic: the same bits)."""
    out: list[tuple[float, float]] = [(np.nan, np.nan)] * len(reps)
    whole = []
    for i, (r, c) in enumerate(zip(reps, clusters, strict=True)):
        if c < MIN_CLUSTERS:
            continue
        if len(r) == replicates and np.isfinite(r).all():
            whole.append(i)
        else:
            out[i] = _percentile(r, level)
    if whole:
        lower, upper, gamma, kth, late = _order_statistics(replicates, float(level))
        ordered = np.vstack([reps[i] for i in whole])
        ordered.partition(kth, axis=1)  # (in place: the stack is a new array)
        got = _between(ordered[:, lower], ordered[:, upper], gamma, late)
        for i, (lo, hi) in zip(whole, got.tolist(), strict=True):
            out[i] = (lo, hi)
    return out


def gap_ci(first, first_clusters, second, second_clusters, *,
           replicates: int = DEFAULT_REPLICATES, seed: int = 0, level: float = 0.95,
           draws: Draws | None = None) -> tuple[Interval, Interval, Interval]:
    """CIs of ``mean(first)``, ``mean(second)`` and of their gap ``mean(second) -
    mean(first)``, two samples of disjoint clusters (the sessions before and after a
    model's cutoff), each resampled within itself (``seed`` and ``seed + 1``), the gap's
    replicates the differences of theirs. The gap's ``n`` and ``clusters`` count both."""
    out, reps = [], []
    for i, (values, clusters) in enumerate(((first, first_clusters),
                                            (second, second_clusters))):
        values = np.asarray(values, float)
        sums, counts = _sums(values, np.asarray(clusters))
        r = _ratios(sums, counts, replicates=replicates, seed=seed + i, draws=draws)
        ok = len(sums) >= MIN_CLUSTERS
        lo, hi = _percentile(r, level) if ok else (np.nan, np.nan)
        out.append(Interval(float(values.mean()) if len(values) else np.nan, lo, hi,
                            len(values), len(sums)))
        reps.append(r if ok else None)
    a, b = out
    if reps[0] is None or reps[1] is None:
        lo = hi = np.nan
    else:
        diff = reps[1] - reps[0]
        lo, hi = _percentile(diff[np.isfinite(diff)], level)
    return a, b, Interval(b.estimate - a.estimate, lo, hi, a.n + b.n, a.clusters + b.clusters)
