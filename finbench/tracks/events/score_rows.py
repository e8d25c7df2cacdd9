"""The event track's scores (docs/spec.md §11.6), from a run's forecasts and labels alone.

Per model and slice (all scored markets, each category, whether retrieval found relevant
posts before ``t0``, each event group with enough cases): n, positives, Brier score and log
loss, and the Brier penalty split into its YES and NO parts (which must sum to the total).
Skill against each reference is computed on the rows both answered validly, shown with N,
positives and both raw scores; it is undefined when the reference scores 0. Confidence
intervals resample whole event groups. A frequency fitted on the evaluated labels appears
only as a descriptive row, labelled in-sample, never as a reference.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from finbench.core.errors import RunError
from finbench.core.lookup import groups, spans
from finbench.scoring import bootstrap, rules

IN_SAMPLE = "in-sample frequency"  # the descriptive row's model name
IN_SAMPLE_KIND = "in_sample (descriptive, fitted on the evaluated labels: not a forecast)"


def brier_parts(p: np.ndarray, y: np.ndarray) -> dict:
    """Brier score (:func:`finbench.scoring.rules.brier_loss`) with its YES and NO penalty
    totals, each summed on its own; the two must add up to the total penalty (else a
    RuntimeError: two counts of one set disagree).

    >>> parts = brier_parts(np.full(100, 0.01), np.r_[1, np.zeros(99)])
    >>> round(parts["brier"], 6), round(parts["yes_penalty"], 4), round(parts["no_penalty"], 4)
    (0.0099, 0.9801, 0.0099)
    """
    penalty = rules.brier_loss(y, p)
    yes, no = float(np.sum(penalty[y == 1])), float(np.sum(penalty[y == 0]))
    total = float(np.sum(penalty))
    if abs(yes + no - total) > 1e-9 * max(1.0, total):
        raise RuntimeError(f"YES ({yes}) and NO ({no}) penalties do not sum to {total}")
    n = len(p)
    return {"n": n, "positives": int(np.sum(y == 1)), "brier": total / n if n else np.nan,
            "yes_penalty": yes, "no_penalty": no, "penalty_total": total}


def log_loss(p: np.ndarray, y: np.ndarray, clip: float) -> float:
    """Mean log loss (:func:`finbench.scoring.rules.log_loss`, probabilities clipped to
    ``[clip, 1 - clip]``); NaN of no rows."""
    return float(rules.log_loss(y, p, clip=clip).mean()) if len(p) else np.nan


def distinct(groups: np.ndarray) -> int:
    """How many distinct groups ``groups`` holds, missing ones aside (a Series' ``nunique``,
    without making a Series of the texts)."""
    found = pd.unique(np.asarray(groups, dtype=object))
    return int(len(found) - pd.isna(found).sum())


def effective_events(groups: np.ndarray) -> float:
    """Kish's effective number of independent events when rows of one group move together:
    ``(sum n_g)^2 / sum n_g^2`` (the number of groups when they are equal in size)."""
    _, n = np.unique(groups, return_counts=True)
    return float(n.sum() ** 2 / np.sum(n.astype(float) ** 2)) if len(n) else 0.0


def brier_interval(brier: np.ndarray, groups: np.ndarray, s,
                   draws: bootstrap.Draws | None = None) -> tuple[float, float]:
    """The event-group bootstrap interval of a mean Brier score
    (:func:`finbench.scoring.bootstrap.mean_ci`: whole groups drawn, ``s``: the config's
    ``[scores]``; NaN with fewer than two groups). ``draws``: the draws kept for every
    interval of a run's tables (the same bits as drawn afresh)."""
    ci = bootstrap.mean_ci(brier, groups, replicates=s.bootstrap_replicates, seed=s.seed,
                           level=s.level, draws=draws)
    return ci.lower, ci.upper


def skill_interval(brier: np.ndarray, reference: np.ndarray, groups: np.ndarray, s,
                   draws: bootstrap.Draws | None = None) -> tuple[float, float]:
    """The event-group bootstrap interval of the Brier skill ``1 - model / reference`` on
    paired rows (:func:`finbench.scoring.bootstrap.skill_ci`; ``draws`` as
    :func:`brier_interval`'s)."""
    ci = bootstrap.skill_ci(brier, reference, groups, replicates=s.bootstrap_replicates,
                            seed=s.seed, level=s.level, draws=draws)
    return ci.lower, ci.upper


def score_rows(forecasts: pd.DataFrame, labels: pd.DataFrame, clip: float) -> pd.DataFrame:
    """One row per forecast of a scored market (status ok): its label, slices and scores."""
    scored = labels[labels["status"] == "ok"]
    bad = ~scored["y"].isin([0, 1]).to_numpy(bool)
    if bad.any():  # (an outcome the label pass never gives: the labels were edited)
        raise RunError(f"labels.parquet: task {scored['task_id'].iloc[int(np.argmax(bad))]} "
                       f"is scored with y {scored['y'].iloc[int(np.argmax(bad))]!r}, neither "
                       f"0 (NO) nor 1 (YES) ({int(bad.sum())} task(s))")
    rows = forecasts.merge(scored[["task_id", "y", "category", "event_group",
                                   "retrieval_relevant"]], on="task_id", how="inner")
    p = rows["p_up"].to_numpy(float)
    y = rows["y"].to_numpy(float)
    ok = rows["valid"].to_numpy(bool) & (rows["answer_status"] == "answered").to_numpy(bool)
    brier, loss = np.full(len(rows), np.nan), np.full(len(rows), np.nan)
    brier[ok] = rules.brier_loss(y[ok], p[ok])
    loss[ok] = rules.log_loss(y[ok], p[ok], clip=clip)
    return rows.assign(scored=ok, brier=brier, log_loss=loss)


def slices(rows: pd.DataFrame, min_group: int) -> list[tuple[str, str, np.ndarray]]:
    """(slice kind, slice, the slice's rows: their positions, ascending) of the rows: all,
    each category, retrieval found relevant posts or not, each event group of at least
    ``min_group`` scored markets. (Positions, not a mask over every row: thousands of event
    groups would hold as many masks as long as the rows.)"""
    out = [("overall", "all", np.arange(len(rows)))]
    for c in sorted(rows["category"].unique()):
        out.append(("category", c, np.flatnonzero((rows["category"] == c).to_numpy(bool))))
    relevant = rows["retrieval_relevant"].to_numpy(bool)
    out += [("retrieval", "relevant posts before t0", np.flatnonzero(relevant)),
            ("retrieval", "no relevant posts before t0", np.flatnonzero(~relevant))]
    size = rows.drop_duplicates("task_id")["event_group"].value_counts()
    code, found = pd.factorize(rows["event_group"])  # (codes grouped once, not texts compared)
    at = {g: k for k, g in enumerate(found)}
    of_group = groups(code, len(found))
    for g in sorted(size.index[size >= min_group]):
        out.append(("event_group", g, of_group[at[g]]))
    return out


def within(at: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Where in ``at`` (row positions, non-decreasing) a row of ``rows`` (positions,
    ascending) stands, ascending: ``np.flatnonzero(mask[at])`` for the mask of ``rows``, in
    time of ``rows`` alone."""
    return spans(np.searchsorted(at, rows, "left"), np.searchsorted(at, rows, "right"))
