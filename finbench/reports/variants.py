"""Prompt variants of one model compared (both tracks): each model asked in a prompt variant
(:mod:`finbench.core.prompting`) against the same provider's same model asked the track's
own prompt, paired on the tasks both were asked: valid answers of each, mean Brier of each on
the tasks both scored and their difference with its CI, the interval's Winkler difference
where both gave one, tokens and dollars per forecast, and a sampled variant's spread."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from finbench.reports.stats import descriptive
from finbench.scoring.bootstrap import paired_difference

# what must be the same for two models to be one model asked two ways: the provider, the
# model, and the question it is asked (its format and head, what its prompt shows)
SAME_QUESTION = ("kind", "model", "base_url", "base_url_env", "format", "head", "labels",
                 "anonymize", "retrieval", "show_market_price")
VARIANT_COLUMNS = ["model", "base", "variant", "asked", "valid", "valid_base", "n", "clusters",
                   "brier", "brier_base", "diff", "diff_lo", "diff_hi", "p_value", "mde",
                   "dm_stat", "dm_p", "dm_lags", "n_interval",
                   "winkler_diff", "winkler_lo", "winkler_hi", "spread", "tokens",
                   "tokens_base", "dollars", "dollars_base", "flag", "p_holm", "dm_p_holm"]


def describe(variant) -> str:
    """A prompt variant in a few words: ``think; examples 3; samples 5 (mean)``."""
    parts = []
    if variant.user is not None:
        from finbench.core.prompting import variant_tag

        parts.append("user template " + variant_tag(variant).split("+")[1][5:])
    if variant.reasoning == "think":
        parts.append("think")
    if variant.examples:
        parts.append(f"examples {variant.examples}")
    if variant.samples > 1:
        parts.append(f"samples {variant.samples} ({variant.aggregate}, "
                     f"{variant.needed} valid needed)")
    return "; ".join(parts) or "the track's prompt"


def variant_pairs(config) -> list[tuple[str, str]]:
    """(variant, base) for each model of the config asked in a prompt variant whose run
    also asks the same model the track's own prompt without tools (its base: the first, in
    the config's order)."""
    models = [m for m in config.models if getattr(m, "prompt", None) is not None]
    out = []
    for m in models:
        if m.prompt.is_default or m.tools:
            continue
        for other in models:
            if (other.name != m.name and other.prompt.is_default and not other.tools
                    and _question(other) == _question(m)):
                out.append((m.name, other.name))
                break
    return out


def _question(model) -> tuple:
    return tuple(json.dumps(getattr(model, key, None), sort_keys=True, default=str)
                 for key in SAME_QUESTION)


def sample_spread(run_dir: Path, models: list[str]) -> dict[str, float]:
    """Per sampled model: the mean over its valid rows of its samples' standard deviation
    of the probability (``p_up``; a three-class model's ``q_up``)."""
    if not models:
        return {}
    table = pq.read_table(Path(run_dir) / "forecasts.parquet", columns=["model", "valid", "detail"],
                          filters=[("model", "in", models)])
    sds: dict[str, list[float]] = {m: [] for m in models}
    for rec in table.to_pylist():
        if not rec["valid"] or not rec["detail"]:
            continue
        spread = json.loads(rec["detail"]).get("spread") or {}
        field = spread.get("p_up") or spread.get("q_up")
        if field is not None:
            sds[rec["model"]].append(field["sd"])
    return {m: float(np.mean(v)) if v else float("nan") for m, v in sds.items()}


def variant_table(rows: pd.DataFrame, config, cluster: np.ndarray, *, replicates: int,
                  seed: int, level: float, min_n: int, min_clusters: int,
                  spread: dict[str, float] | None = None,
                  series: np.ndarray | None = None) -> pd.DataFrame:
    """One row per (variant, base) of :func:`variant_pairs` from a run's ``rows`` (columns
    ``task_id, model, valid, scored, brier`` and, where the track has them,
    ``interval_scored, winkler, tokens, dollars``), ``cluster``: each row's bootstrap
    cluster (session or event group, as an integer). The Brier difference is the variant's
    less its base's (negative: the variant scored better), with its minimum detectable
    difference at 80% power and, given ``series`` (each row's place in time, as session
    codes in date order), the Diebold-Mariano test on its groups' mean differentials; the
    p-values Holm-adjusted over the table's rows."""
    from finbench.scoring.inference import diebold_mariano, holm, mde, series_of

    spread = spread or {}
    by = config.models
    rows = rows.assign(_cluster=np.asarray(cluster),
                       _series=np.asarray(series) if series is not None else 0)
    keep = [c for c in ("task_id", "valid", "scored", "brier", "interval_scored", "winkler",
                        "tokens", "dollars", "_cluster", "_series") if c in rows.columns]
    out = []
    for variant, base in variant_pairs(config):
        mine = rows.loc[rows["model"] == variant, keep]
        theirs = rows.loc[rows["model"] == base, keep]
        asked = mine.merge(theirs, on="task_id", suffixes=("", "_base"))
        both = asked[asked["scored"].to_numpy(bool) & asked["scored_base"].to_numpy(bool)]
        ci, p = paired_difference(both["brier"].to_numpy(float),
                                  both["brier_base"].to_numpy(float),
                                  both["_cluster"].to_numpy(np.int64), replicates=replicates,
                                  seed=seed, level=level)
        row = {"model": variant, "base": base,
               "variant": describe(next(m for m in by if m.name == variant).prompt),
               "asked": len(asked), "valid": int(asked["valid"].sum()),
               "valid_base": int(asked["valid_base"].sum()), "n": ci.n,
               "clusters": ci.clusters, "brier": _mean(both["brier"]),
               "brier_base": _mean(both["brier_base"]), "diff": ci.estimate,
               "diff_lo": ci.lower, "diff_hi": ci.upper, "p_value": p,
               "mde": mde(both["brier"].to_numpy(float) - both["brier_base"].to_numpy(float),
                          both["_cluster"].to_numpy(np.int64)),
               "dm_stat": np.nan, "dm_p": np.nan, "dm_lags": None,
               "n_interval": 0, "winkler_diff": np.nan, "winkler_lo": np.nan,
               "winkler_hi": np.nan, "spread": spread.get(variant, np.nan),
               "flag": descriptive(ci.n, ci.clusters, min_n=min_n, min_clusters=min_clusters)}
        if series is not None:
            row["dm_stat"], row["dm_p"], row["dm_lags"] = diebold_mariano(series_of(
                both["brier"].to_numpy(float) - both["brier_base"].to_numpy(float),
                both["_series"].to_numpy(np.int64)))
        if "winkler" in asked.columns:
            both_i = asked[asked["interval_scored"].to_numpy(bool)
                           & asked["interval_scored_base"].to_numpy(bool)]
            if len(both_i):
                wi, _ = paired_difference(both_i["winkler"].to_numpy(float),
                                          both_i["winkler_base"].to_numpy(float),
                                          both_i["_cluster"].to_numpy(np.int64),
                                          replicates=replicates, seed=seed, level=level)
                row.update(n_interval=wi.n, winkler_diff=wi.estimate, winkler_lo=wi.lower,
                           winkler_hi=wi.upper)
        for col in ("tokens", "dollars"):
            row[col] = _mean(asked[col]) if col in asked.columns else np.nan
            row[f"{col}_base"] = _mean(asked[f"{col}_base"]) if col in asked.columns else np.nan
        out.append(row)
    table = pd.DataFrame(out, columns=VARIANT_COLUMNS[:-2])
    return table.assign(p_holm=holm(table["p_value"].to_numpy(float)),
                        dm_p_holm=holm(table["dm_p"].to_numpy(float)))


def _mean(values: pd.Series) -> float:
    values = pd.to_numeric(values, errors="coerce").astype(float).dropna()
    return float(values.mean()) if len(values) else float("nan")
