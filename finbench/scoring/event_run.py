"""Every table of an event run's scores (docs/spec.md §11.6), from ``forecasts.parquet``,
``labels.parquet`` and the config alone; ``finbench run``/``score`` write them and
``finbench audit`` recomputes and compares."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from finbench.core.event_config import EventRunConfig, reference_names
from finbench.core.outputs import write_atomic
from finbench.scoring.events import (
    IN_SAMPLE,
    IN_SAMPLE_KIND,
    brier_parts,
    effective_events,
    group_bootstrap,
    log_loss,
    score_rows,
    skill,
    slices,
)

EVENT_FILES = ("scores.parquet", "scores.csv", "skill.parquet", "skill.csv", "rows.parquet",
               "rows.csv", "exclusions.csv", "market_gap.csv")


SKILL_COLUMNS = ["model", "reference", "slice_kind", "slice", "n", "positives",
                 "no_positive_cases", "brier_model", "brier_reference", "bss", "bss_undefined",
                 "bss_lo", "bss_hi", "log_loss_model", "log_loss_reference", "log_loss_skill"]


def event_tables(run_dir: Path, config: EventRunConfig, skipped=()) -> dict[str, pd.DataFrame]:
    """The score tables of an event run: ``scores``, ``skill``, ``rows``, ``exclusions`` and
    ``market_gap``."""
    labels = pd.read_parquet(run_dir / "labels.parquet")
    forecasts = pd.read_parquet(run_dir / "forecasts.parquet")
    s = config.scores
    rows = score_rows(forecasts, labels, s.log_loss_clip)
    names = [m.name for m in config.models if m.name not in skipped]
    kinds = {m.name: m.kind for m in config.models}
    refs = [r for r in reference_names(config) if r in names]
    cuts = slices(rows, s.min_group_cases)
    truth = labels[labels["status"] == "ok"]
    scores = [_score_row(rows, name, kinds[name], cut, s) for name in names for cut in cuts]
    scores += [_in_sample_row(truth, cut, s) for cut in slices(truth, s.min_group_cases)]
    paired = [_skill_row(rows, name, ref, cut, s) for name in names for ref in refs
              if ref != name for cut in cuts]
    counts = labels["status"].value_counts()
    exclusions = pd.DataFrame({"reason": counts.index, "tasks": counts.to_numpy()}).sort_values(
        "reason", kind="stable").reset_index(drop=True)
    markets = [r for r in refs if kinds[r] == "market_price"]
    gap = [_gap_row(rows, name, m) for name in names for m in markets if name != m]
    columns = ["task_id", "model", "kind", "p_up", "valid", "answer_status", "y", "category",
               "event_group", "retrieval_relevant", "scored", "brier", "log_loss"]
    return {"scores": pd.DataFrame(scores), "skill": pd.DataFrame(paired, columns=SKILL_COLUMNS),
            "rows": rows[columns].rename(columns={"p_up": "p_yes"}),
            "exclusions": exclusions,
            "market_gap": pd.DataFrame(gap, columns=["model", "market", "n", "mean_abs_gap",
                                                     "median_abs_gap", "max_abs_gap"])}


def _score_row(rows: pd.DataFrame, name: str, kind: str, cut, s) -> dict:
    slice_kind, value, mask = cut
    mine = rows[mask & (rows["model"] == name).to_numpy(bool)]
    scored = mine[mine["scored"]]
    p, y = scored["p_up"].to_numpy(float), scored["y"].to_numpy(float)
    parts = brier_parts(p, y)
    answered = int((mine["answer_status"] == "answered").sum())
    lo, hi = group_bootstrap([scored["brier"].to_numpy(float)], scored["event_group"].to_numpy(),
                             reps=s.bootstrap_replicates, seed=s.seed, level=s.level,
                             stat=lambda e, n: e / n)
    return {"model": name, "kind": kind, "slice_kind": slice_kind, "slice": value,
            "tasks": len(mine), "n_error": int((mine["answer_status"] == "error").sum()),
            "n_invalid": answered - parts["n"],
            "validity": parts["n"] / answered if answered else np.nan, **parts,
            "no_positive_cases": parts["n"] > 0 and parts["positives"] == 0,
            "log_loss": log_loss(p, y, s.log_loss_clip), "brier_lo": lo, "brier_hi": hi,
            "groups": int(scored["event_group"].nunique()),
            "effective_events": effective_events(scored["event_group"].to_numpy())}


def _in_sample_row(truth: pd.DataFrame, cut, s) -> dict:
    """The frequency of YES among the slice's scored markets, scored on them: descriptive."""
    slice_kind, value, mask = cut
    y = truth.loc[mask, "y"].to_numpy(float)
    p = np.full(len(y), y.mean() if len(y) else np.nan)
    parts = brier_parts(p, y)
    return {"model": IN_SAMPLE, "kind": IN_SAMPLE_KIND, "slice_kind": slice_kind,
            "slice": value, "tasks": len(y), "n_error": 0, "n_invalid": 0,
            "validity": 1.0 if len(y) else np.nan, **parts,
            "no_positive_cases": parts["n"] > 0 and parts["positives"] == 0,
            "log_loss": log_loss(p, y, s.log_loss_clip), "brier_lo": np.nan,
            "brier_hi": np.nan, "groups": int(truth.loc[mask, "event_group"].nunique()),
            "effective_events": effective_events(truth.loc[mask, "event_group"].to_numpy())}


def _skill_row(rows: pd.DataFrame, name: str, ref: str, cut, s) -> dict:
    """Skill of ``name`` against ``ref`` on the rows both scored (same markets), with N,
    positives, both raw scores and a group-bootstrap interval."""
    slice_kind, value, mask = cut
    mine = rows[mask & (rows["model"] == name).to_numpy(bool) & rows["scored"].to_numpy(bool)]
    theirs = rows[mask & (rows["model"] == ref).to_numpy(bool) & rows["scored"].to_numpy(bool)]
    both = mine.merge(theirs[["task_id", "p_up", "brier", "log_loss"]], on="task_id",
                      suffixes=("", "_ref"))
    y = both["y"].to_numpy(float)
    bm, br = brier_parts(both["p_up"].to_numpy(float), y), brier_parts(
        both["p_up_ref"].to_numpy(float), y)
    lm, lr = (log_loss(both[c].to_numpy(float), y, s.log_loss_clip) for c in ("p_up",
                                                                                "p_up_ref"))
    lo, hi = group_bootstrap([both["brier"].to_numpy(float), both["brier_ref"].to_numpy(float)],
                             both["event_group"].to_numpy(), reps=s.bootstrap_replicates,
                             seed=s.seed, level=s.level, stat=lambda a, b, n: 1 - a / b)
    return {"model": name, "reference": ref, "slice_kind": slice_kind, "slice": value,
            "n": bm["n"], "positives": bm["positives"],
            "no_positive_cases": bm["n"] > 0 and bm["positives"] == 0,
            "brier_model": bm["brier"], "brier_reference": br["brier"],
            "bss": skill(bm["brier"], br["brier"]) if bm["n"] else np.nan,
            "bss_undefined": "reference scores 0" if bm["n"] and br["brier"] == 0 else (
                "no paired rows" if not bm["n"] else ""),
            "bss_lo": lo, "bss_hi": hi, "log_loss_model": lm, "log_loss_reference": lr,
            "log_loss_skill": skill(lm, lr) if bm["n"] else np.nan}


def _gap_row(rows: pd.DataFrame, name: str, market: str) -> dict:
    """|p_model - p_market| over the markets both scored."""
    ok = rows[rows["scored"]]
    both = ok[ok["model"] == name].merge(ok[ok["model"] == market][["task_id", "p_up"]],
                                         on="task_id", suffixes=("", "_market"))
    gap = np.abs(both["p_up"].to_numpy(float) - both["p_up_market"].to_numpy(float))
    return {"model": name, "market": market, "n": len(gap),
            "mean_abs_gap": float(gap.mean()) if len(gap) else np.nan,
            "median_abs_gap": float(np.median(gap)) if len(gap) else np.nan,
            "max_abs_gap": float(gap.max()) if len(gap) else np.nan}


def write_event_scores(run_dir: Path, config: EventRunConfig, skipped=()) -> dict:
    """Write every table (Parquet and CSV where both are kept); returns them."""
    tables = event_tables(run_dir, config, skipped)
    for name, frame in tables.items():
        if name in ("scores", "skill", "rows"):
            write_atomic(run_dir / f"{name}.parquet",
                         lambda p, f=frame: f.to_parquet(p, index=False))
        write_atomic(run_dir / f"{name}.csv",
                     lambda p, f=frame: f.to_csv(p, index=False, float_format="%.12g"))
    return tables
