"""Report tables computed from a run's stored rows: scores with session-bootstrap CIs, paired
differences, calibration, coverage by horizon and the decision layer. No drawing here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from finbench.config import BASELINE_KINDS, RunConfig
from finbench.scoring.aggregate import row_scores
from finbench.scoring.bootstrap import mean_ci, paired_difference, skill_ci
from finbench.scoring.calibration import ece, murphy, reliability_table
from finbench.scoring.decision import decision_table, wealth_path

DESCRIPTIVE = "descriptive only"


@dataclass
class RunData:
    """What a report reads from one run directory."""

    name: str
    config: RunConfig
    manifest: dict
    rows: pd.DataFrame
    models: list[str]
    baselines: list[str]


def load_run(run_dir: str | Path) -> RunData:
    run_dir = Path(run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    config = RunConfig.model_validate(manifest["config"])
    tasks = pd.read_parquet(run_dir / "tasks.parquet")
    labels = pd.read_parquet(run_dir / "labels.parquet")
    forecasts = pd.read_parquet(run_dir / "forecasts.parquet")
    rows = row_scores(forecasts, labels, tasks, invalid_policy=config.invalid_policy,
                      clip=config.scores.log_loss_clip, alpha=config.scores.alpha)
    rows = rows.merge(tasks[["task_id", "t_forecast"]], on="task_id", how="left")
    skipped = manifest.get("skipped_models", {})
    models = [m.name for m in config.models if m.name not in skipped]
    baselines = [m.name for m in config.models if m.kind in BASELINE_KINDS and m.name in models]
    return RunData(run_dir.name, config, manifest, rows, models, baselines)


def clusters_of(rows: pd.DataFrame, cluster: str) -> np.ndarray:
    if cluster == "session":
        return rows["session"].to_numpy()
    return (rows["session"] + "|" + rows["ticker"]).to_numpy()


def caption_facts(data: RunData) -> str:
    """N, positives, exclusions and the data source, for every caption."""
    m = data.manifest
    labels = m["tasks"]["labels"]
    excluded = m["tasks"]["excluded"] or {}
    scored = data.rows[data.rows["model"] == data.models[0]] if data.models else data.rows
    ok = scored[scored["status"] == "ok"]
    source = (m["data"]["description"] if m["data"]["synthetic"]
              else f"data store {Path(m['data']['store']).name}")
    excl = ", ".join(f"{k} {v}" for k, v in sorted(excluded.items())) or "none"
    unsc = ", ".join(f"{k} {v}" for k, v in labels.items() if k != "ok" and v) or "none"
    return (f"{m['tasks']['tasks']} tasks, {labels.get('ok', 0)} with labels "
            f"({int(ok['y'].sum())} positive, {int((ok['r'] == 0).sum())} ties); excluded "
            f"sessions: {excl}; unscorable: {unsc}. Source: {source}.")


def score_table(data: RunData, *, slice_kind: str) -> pd.DataFrame:
    """Model × slice (overall, horizon or ticker) with CIs for BS, BSS vs coin and Winkler."""
    rep = data.config.report
    coin = next((b for b in data.baselines if b == "coin"), None) or (
        data.baselines[0] if data.baselines else None)
    out = []
    slices = [("all", data.rows)] if slice_kind == "overall" else list(
        data.rows.groupby(slice_kind, sort=False))
    if slice_kind == "horizon":
        order = {h: i for i, h in enumerate(data.config.tasks.horizons)}
        slices.sort(key=lambda kv: order.get(kv[0], 99))
    for value, part in slices:
        for model in data.models:
            own = part[(part["model"] == model) & part["scored"]]
            n = len(own)
            cl = clusters_of(own, rep.cluster)
            seed = rep.seed
            bs = mean_ci(own["brier"], cl, replicates=rep.bootstrap_replicates, seed=seed,
                         level=rep.level)
            wk = mean_ci(own["winkler"], cl, replicates=rep.bootstrap_replicates, seed=seed,
                         level=rep.level)
            rec = {"slice": value, "model": model, "n": n,
                   "sessions": int(own["session"].nunique()),
                   "positives": int(own["y"].sum()) if n else 0,
                   "accuracy": own["correct"].mean() if n else np.nan,
                   "brier": bs.estimate, "brier_lo": bs.lower, "brier_hi": bs.upper,
                   "log_loss": own["log_loss"].mean() if n else np.nan,
                   "coverage": own["covered"].mean() if n else np.nan,
                   "width": own["width"].mean() if n else np.nan,
                   "winkler": wk.estimate, "winkler_lo": wk.lower, "winkler_hi": wk.upper,
                   "validity": part.loc[part["model"] == model, "valid"].mean()}
            if coin:
                ref = part[(part["model"] == coin) & part["scored"]][["task_id", "brier"]]
                pair = own[["task_id", "brier", "session", "ticker"]].merge(
                    ref, on="task_id", suffixes=("", "_ref"))
                sk = skill_ci(pair["brier"], pair["brier_ref"], clusters_of(pair, rep.cluster),
                              replicates=rep.bootstrap_replicates, seed=seed, level=rep.level)
                rec.update(bss_ref=coin, bss=sk.estimate, bss_lo=sk.lower, bss_hi=sk.upper,
                           bss_n=sk.n)
            if data.config.scores.composite:
                rec["composite_secondary"] = np.nan  # filled from scores below
            rec["flag"] = DESCRIPTIVE if (n < rep.min_n or rec["sessions"] < rep.min_sessions) \
                else ""
            out.append(rec)
    table = pd.DataFrame(out)
    if data.config.scores.composite and len(table):
        table["composite_secondary"] = sum(
            w * _composite_source(table, col) for col, w in data.config.scores.composite.items())
    return table


def _composite_source(table: pd.DataFrame, col: str) -> pd.Series:
    mapping = {"bss_coin": "bss", "brier": "brier", "winkler": "winkler",
               "coverage": "coverage", "accuracy": "accuracy"}
    return table[mapping.get(col, col)] if mapping.get(col, col) in table else np.nan


def paired_table(data: RunData, *, metric: str = "brier") -> pd.DataFrame:
    """Every pair of models on their shared scored rows: mean difference, CI, p-value."""
    rep = data.config.report
    out = []
    for a, b in combinations(data.models, 2):
        ra = data.rows[(data.rows["model"] == a) & data.rows["scored"]]
        rb = data.rows[(data.rows["model"] == b) & data.rows["scored"]]
        pair = ra[["task_id", metric, "session", "ticker"]].merge(
            rb[["task_id", metric]], on="task_id", suffixes=("_a", "_b"))
        ci, p = paired_difference(pair[f"{metric}_a"], pair[f"{metric}_b"],
                                  clusters_of(pair, rep.cluster),
                                  replicates=rep.bootstrap_replicates, seed=rep.seed,
                                  level=rep.level)
        out.append({"model_a": a, "model_b": b, "metric": metric, "n": ci.n,
                    "sessions": ci.clusters if rep.cluster == "session" else int(
                        pair["session"].nunique()),
                    "diff": ci.estimate, "diff_lo": ci.lower, "diff_hi": ci.upper, "p_value": p,
                    "flag": DESCRIPTIVE if ci.n < rep.min_n or int(pair["session"].nunique())
                    < rep.min_sessions else ""})
    return pd.DataFrame(out)


def calibration_tables(data: RunData) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(summary per model: Murphy terms and ECE for both binnings; reliability bins, long)."""
    bins = data.config.report.bins
    summary, reliab = [], []
    for model in data.models:
        own = data.rows[(data.rows["model"] == model) & data.rows["scored"]]
        if own.empty:
            continue
        y, p = own["y"].astype(float).to_numpy(), own["p_up"].to_numpy()
        for strategy in ("uniform", "quantile"):
            mur = murphy(y, p, bins=bins, strategy=strategy)
            summary.append({"model": model, "binning": strategy, "n": mur["n"],
                            "brier": mur["brier"], "brier_binned": mur["brier_binned"],
                            "reliability": mur["reliability"], "resolution": mur["resolution"],
                            "uncertainty": mur["uncertainty"],
                            "ece": ece(y, p, bins=bins, strategy=strategy)})
            table = reliability_table(y, p, bins=bins, strategy=strategy)
            reliab.append(table.assign(model=model, binning=strategy))
    return pd.DataFrame(summary), (pd.concat(reliab, ignore_index=True) if reliab
                                   else pd.DataFrame())


def decision(data: RunData) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Kelly growth per model and the wealth paths (log wealth per bet)."""
    table = decision_table(data.rows, data.models)
    paths = {}
    for model in data.models:
        part = data.rows[(data.rows["model"] == model) & data.rows["scored"]].sort_values(
            ["t_forecast", "task_id"], kind="stable")
        paths[model] = wealth_path(part["y"].astype(float), part["p_up"])
    return table, paths
