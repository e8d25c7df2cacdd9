"""The recall probes' table of a report (docs/reports.md, "Recall probes"): per probed model,
how often its answer from memory alone names the outcome, on tasks up to its knowledge cutoff
(possibly in its training data) and after it, the gap, and the probes' Brier score on each
side; both tracks (each gives the outcome, cluster and day of its tasks)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from finbench.reports.stats import descriptive
from finbench.reports.writers import fmt, with_ci
from finbench.scoring.bootstrap import gap_ci

COLUMNS = ["model", "cutoff", "asked", "valid", "n_before", "clusters_before", "acc_before",
           "acc_before_lo", "acc_before_hi", "n_after", "clusters_after", "acc_after",
           "acc_after_lo", "acc_after_hi", "acc_gap", "acc_gap_lo", "acc_gap_hi",
           "unsure_before", "unsure_after", "brier_before", "brier_after", "brier_gap",
           "brier_gap_lo", "brier_gap_hi", "flag"]


def recall_hits(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    """1 where the answer leans to the outcome (``p > 0.5`` and it happened, ``p < 0.5`` and
    it did not), 0 where it leans away, 1/2 where it says 0.5 (no recall).

    >>> recall_hits(np.array([0.9, 0.2, 0.5, 0.7]), np.array([1.0, 1.0, 0.0, 0.0])).tolist()
    [1.0, 0.0, 0.5, 0.0]
    """
    return np.where(p == 0.5, 0.5, ((p > 0.5) == (y == 1)).astype(float))


def probe_table(probes: pd.DataFrame, truth: pd.DataFrame, cutoffs: dict, *, replicates: int,
                seed: int, level: float, min_n: int, min_clusters: int) -> pd.DataFrame:
    """Per model of ``cutoffs`` with probes: the probes asked and valid; on the valid ones
    of scorable tasks (``truth``: ``task_id``, ``y`` (NaN: not scorable), ``cluster`` (an
    integer, what the report's intervals resample), ``day`` (ISO date: a session, a
    resolution)) up to the cutoff and after it: N and clusters, the mean of
    :func:`recall_hits` (accuracy) with its CI, the share answered 0.5 and the mean Brier
    score; the gaps before less after with CIs, each side's clusters resampled within it
    (:func:`~finbench.scoring.bootstrap.gap_ci`)."""
    out = []
    boot = {"replicates": replicates, "seed": seed, "level": level}
    for model, cutoff in cutoffs.items():
        mine = probes[probes["model"] == model]
        if mine.empty:
            continue
        rows = mine.merge(truth, on="task_id")
        ok = rows["valid"].to_numpy(bool) & rows["y"].notna().to_numpy()
        rows = rows[ok]
        p, y = rows["p_up"].to_numpy(float), rows["y"].to_numpy(float)
        cluster = rows["cluster"].to_numpy(np.int64)
        before = (rows["day"].astype(str) <= cutoff.isoformat()).to_numpy(bool)
        hits, brier = recall_hits(p, y), (p - y) ** 2
        # gap_ci gives the second less the first: after less before, so the sides are given
        # swapped to read "before less after" (memory shows as a positive accuracy gap)
        after_acc, before_acc, acc_gap = gap_ci(hits[~before], cluster[~before], hits[before],
                                                cluster[before], **boot)
        after_b, before_b, brier_gap = gap_ci(brier[~before], cluster[~before], brier[before],
                                              cluster[before], **boot)
        unsure = p == 0.5
        out.append({
            "model": model, "cutoff": cutoff.isoformat(), "asked": len(mine),
            "valid": int(mine["valid"].sum()), "n_before": before_acc.n,
            "clusters_before": before_acc.clusters, "acc_before": before_acc.estimate,
            "acc_before_lo": before_acc.lower, "acc_before_hi": before_acc.upper,
            "n_after": after_acc.n, "clusters_after": after_acc.clusters,
            "acc_after": after_acc.estimate, "acc_after_lo": after_acc.lower,
            "acc_after_hi": after_acc.upper, "acc_gap": acc_gap.estimate,
            "acc_gap_lo": acc_gap.lower, "acc_gap_hi": acc_gap.upper,
            "unsure_before": float(unsure[before].mean()) if before.any() else np.nan,
            "unsure_after": float(unsure[~before].mean()) if (~before).any() else np.nan,
            "brier_before": before_b.estimate, "brier_after": after_b.estimate,
            "brier_gap": brier_gap.estimate, "brier_gap_lo": brier_gap.lower,
            "brier_gap_hi": brier_gap.upper,
            "flag": descriptive(min(before_acc.n, after_acc.n),
                                min(before_acc.clusters, after_acc.clusters), min_n=min_n,
                                min_clusters=min_clusters)})
    return pd.DataFrame(out, columns=COLUMNS)


CAPTION = ("Recall probes: each model that asks them was asked, for every task and with no "
           "context, what it remembers of the outcome (p_yes: the probability it happened; "
           "0.5: no recall). Accuracy: the share of valid probes leaning to the outcome (0.5 "
           "counted as half), on tasks up to the model's knowledge cutoff (the outcome may be "
           "in its training data) and after it; the gap, before less after, is a "
           "memorisation index: a model can only recall outcomes before its cutoff, and "
           "after it any accuracy above 0.5 is chance. Brier: the probes' mean Brier score. "
           "Each side's clusters are resampled within it.")


def probe_display(table: pd.DataFrame, clusters: str) -> pd.DataFrame:
    """The table as a report shows it (``clusters``: what its N's clusters are called)."""
    def ci(r, key):
        return with_ci(r[key], r[f"{key}_lo"], r[f"{key}_hi"])

    return pd.DataFrame([{
        "model": r["model"], "cutoff": r["cutoff"],
        "valid / asked": f"{r['valid']} / {r['asked']}",
        f"before: n ({clusters})": f"{r['n_before']} ({r['clusters_before']})",
        "before: accuracy [95% CI]": ci(r, "acc_before"),
        f"after: n ({clusters})": f"{r['n_after']} ({r['clusters_after']})",
        "after: accuracy [95% CI]": ci(r, "acc_after"),
        "gap before - after [95% CI]": ci(r, "acc_gap"),
        "share 0.5 before / after": f"{fmt(r['unsure_before'])} / {fmt(r['unsure_after'])}",
        "Brier before / after": f"{fmt(r['brier_before'], 4)} / {fmt(r['brier_after'], 4)}",
        "note": r["flag"]} for r in table.to_dict("records")])
