"""The Min-K% table of a report (docs/reports.md, "Min-K% probability"): per model whose
tasks' texts were scored, its skill against its reference within terciles of Min-K% (how
familiar the model finds each task's text, lowest to highest), and the rank correlation of
Min-K% with the model's Brier less the reference's; both tracks (each gives its pairs and
clusters)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from finbench.reports.stats import descriptive
from finbench.reports.writers import fmt, with_ci
from finbench.scoring.bootstrap import skill_ci

COLUMNS = ["model", "reference", "k", "tercile", "n", "clusters", "min_k_lo", "min_k_hi",
           "brier", "brier_ref", "bss", "bss_lo", "bss_hi", "spearman", "flag"]
TERCILES = ("lowest", "middle", "highest")


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN below three pairs or for a
    constant side."""
    if len(x) < 3:
        return np.nan
    rx, ry = pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy()
    if rx.std() == 0 or ry.std() == 0:
        return np.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def min_k_table(scores: pd.DataFrame, pairs: pd.DataFrame, *, replicates: int, seed: int,
                level: float, min_n: int, min_clusters: int) -> pd.DataFrame:
    """Per model of ``scores`` (``min_k.parquet``'s rows) and tercile of its Min-K% on the
    tasks it scored paired with its reference (``pairs``: ``task_id, model, reference,
    brier, brier_ref, cluster``): N and clusters, the tercile's Min-K% range, both mean
    Brier scores and the skill ``1 - sum(brier) / sum(brier_ref)`` with its CI (clusters
    resampled); beside each, the model's Spearman correlation of Min-K% with ``brier -
    brier_ref`` over all its pairs (negative: more familiar texts, better than the
    reference). Terciles split at the 1/3 and 2/3 quantiles of the model's own Min-K%."""
    out = []
    for model in dict.fromkeys(scores["model"]):
        mine = scores[(scores["model"] == model) & scores["min_k"].notna()]
        both = mine[["task_id", "k", "min_k"]].merge(pairs[pairs["model"] == model],
                                                    on="task_id")
        if both.empty:
            continue
        x = both["min_k"].to_numpy(float)
        a, b = both["brier"].to_numpy(float), both["brier_ref"].to_numpy(float)
        cluster = both["cluster"].to_numpy(np.int64)
        rho = spearman(x, a - b)
        low, high = np.quantile(x, [1 / 3, 2 / 3])
        part = np.where(x <= low, 0, np.where(x > high, 2, 1))
        for i, name in enumerate(TERCILES):
            at = part == i
            sk = skill_ci(a[at], b[at], cluster[at], replicates=replicates, seed=seed,
                          level=level)
            out.append({"model": model, "reference": both["reference"].iat[0],
                        "k": int(both["k"].iat[0]), "tercile": name, "n": int(at.sum()),
                        "clusters": len(np.unique(cluster[at])),
                        "min_k_lo": float(x[at].min()) if at.any() else np.nan,
                        "min_k_hi": float(x[at].max()) if at.any() else np.nan,
                        "brier": float(a[at].mean()) if at.any() else np.nan,
                        "brier_ref": float(b[at].mean()) if at.any() else np.nan,
                        "bss": sk.estimate, "bss_lo": sk.lower, "bss_hi": sk.upper,
                        "spearman": rho,
                        "flag": descriptive(int(at.sum()), len(np.unique(cluster[at])),
                                            min_n=min_n, min_clusters=min_clusters)})
    return pd.DataFrame(out, columns=COLUMNS)


CAPTION = ("Min-K% probability (Shi et al. 2024): the mean log-probability of the k% least "
           "likely tokens of the text each task showed the model, under the model itself "
           "(a text seen in training scores higher). Per model, its Brier skill against its "
           "reference within terciles of its own Min-K% (the tercile's range beside), and "
           "the Spearman correlation of Min-K% with its Brier less the reference's over all "
           "its paired tasks: skill that rises with familiarity is what remembered text "
           "looks like.")


def min_k_display(table: pd.DataFrame, clusters: str) -> pd.DataFrame:
    return pd.DataFrame([{
        "model": r["model"], "reference": r["reference"], "k": r["k"],
        "Min-K% tercile": f"{r['tercile']} [{fmt(r['min_k_lo'])}, {fmt(r['min_k_hi'])}]",
        f"n ({clusters})": f"{r['n']} ({r['clusters']})",
        "Brier / reference": f"{fmt(r['brier'], 4)} / {fmt(r['brier_ref'], 4)}",
        "BSS [95% CI]": with_ci(r["bss"], r["bss_lo"], r["bss_hi"]),
        "Spearman (Min-K%, Brier - reference)": fmt(r["spearman"]), "note": r["flag"]}
        for r in table.to_dict("records")])
