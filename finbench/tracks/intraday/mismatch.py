"""The rationale–probability mismatch (the paper's pattern to measure at scale): per model with
rationales, how often the rationale's stance (:mod:`finbench.tracks.intraday.stance`) argues one side
while ``p_up`` takes the other, and the Brier score of those rows beside the others'."""

from __future__ import annotations

import numpy as np
import pandas as pd

from finbench.reports.stats import descriptive
from finbench.scoring.bootstrap import mean_ci
from finbench.tracks.intraday.report_data import RunData
from finbench.tracks.intraday.stance import METHOD, mismatched


def stance_method(config) -> str:
    """How the run's stances were read: the lexicon's version, or the judge and its model."""
    spec = config.analysis.stance
    return METHOD if spec.method == "lexicon" else (
        f"judge:{spec.judge.name} ({spec.judge.model})")


def mismatch_table(data: RunData) -> pd.DataFrame:
    """One row per model that gave any rationale: scored rows, with a rationale, stances
    (up, down, neutral; ``unjudged``: a judge gave none), rows that take a side
    (``stated``), ``mismatched`` and its rate among stated rows, and the mean Brier score
    (bootstrap CI by cluster) of mismatched and of matched stated rows, each with its N."""
    rep = data.config.report
    boot = {"replicates": rep.bootstrap_replicates, "seed": rep.seed, "level": rep.level,
            "draws": data.draws}
    rows = data.rows
    clusters = data.cluster_codes(rep.cluster)
    out = []
    for name in data.models:
        mine = (rows["model"] == name).to_numpy(bool) & rows["scored"].to_numpy(bool)
        stances = _stances_at(rows["stance"], mine)
        if not (stances != "none").any():
            continue
        stated = np.isin(stances, ["up", "down"])
        wrong = mismatched(stances, rows["p_up"].to_numpy(float)[mine]) & stated
        brier, cl = rows["brier"].to_numpy(float)[mine], clusters[mine]
        bad = mean_ci(brier[wrong], cl[wrong], **boot)
        good = mean_ci(brier[stated & ~wrong], cl[stated & ~wrong], **boot)
        n_stated = int(stated.sum())
        sessions = int(pd.Series(rows["session"].to_numpy(object)[mine][stated]).nunique())
        out.append({
            "model": name, "method": stance_method(data.config), "n": int(mine.sum()),
            "with_rationale": int((stances != "none").sum()),
            "up": int((stances == "up").sum()), "down": int((stances == "down").sum()),
            "neutral": int((stances == "neutral").sum()),
            "unjudged": int((stances == "unjudged").sum()), "stated": n_stated,
            "mismatched": int(wrong.sum()),
            "mismatch_rate": wrong.sum() / n_stated if n_stated else np.nan,
            "brier_mismatched": bad.estimate, "brier_mismatched_lo": bad.lower,
            "brier_mismatched_hi": bad.upper, "n_mismatched": bad.n,
            "brier_matched": good.estimate, "brier_matched_lo": good.lower,
            "brier_matched_hi": good.upper, "n_matched": good.n,
            "flag": descriptive(n_stated, sessions, min_n=rep.min_n,
                                min_clusters=rep.min_sessions)})
    return pd.DataFrame(out)


def _stances_at(column: pd.Series, where: np.ndarray) -> np.ndarray:
    """The texts of ``column`` at ``where``; a categorical one (``stance``) read through its
    codes, each category one shared object (as ``to_numpy`` would make a new text per row)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        words = np.asarray(list(column.cat.categories), dtype=object)
        return words[column.cat.codes.to_numpy()[where]]
    return column.to_numpy(object)[where]
