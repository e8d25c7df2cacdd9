"""Every table of an event run's scores (docs/spec.md §11.6), from ``forecasts.parquet``,
``labels.parquet`` and the config alone; ``finbench run``/``score`` write them and
``finbench audit`` recomputes and compares."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from finbench.core.outputs import write_atomic
from finbench.runlog.costs import cost_frame
from finbench.scoring.bootstrap import Draws
from finbench.scoring.rules import skill
from finbench.tracks.events.config import EventRunConfig, reference_names
from finbench.tracks.events.score_rows import (
    IN_SAMPLE,
    IN_SAMPLE_KIND,
    brier_interval,
    brier_parts,
    distinct,
    effective_events,
    log_loss,
    score_rows,
    skill_interval,
    slices,
    within,
)

EVENT_FILES = ("scores.parquet", "scores.csv", "skill.parquet", "skill.csv", "rows.parquet",
               "rows.csv", "exclusions.csv", "market_gap.csv")


ROW_COLUMNS = ["task_id", "model", "kind", "p_up", "valid", "answer_status", "y", "category",
               "event_group", "retrieval_relevant", "scored", "brier", "log_loss"]  # rows.*
SKILL_COLUMNS = ["model", "reference", "slice_kind", "slice", "n", "positives",
                 "no_positive_cases", "brier_model", "brier_reference", "bss", "bss_undefined",
                 "bss_lo", "bss_hi", "log_loss_model", "log_loss_reference", "log_loss_skill",
                 "groups"]


def event_tables(run_dir: Path, config: EventRunConfig, skipped=()) -> dict[str, pd.DataFrame]:
    """The score tables of an event run: ``scores``, ``skill``, ``rows``, ``exclusions`` and
    ``market_gap``."""
    labels = pd.read_parquet(run_dir / "labels.parquet")
    forecasts = pd.read_parquet(run_dir / "forecasts.parquet")
    s = config.scores
    # the columns the tables read (not the answers' texts: every slice of the rows below
    # would copy them)
    scored = score_rows(forecasts, labels, s.log_loss_clip)
    rows = scored[ROW_COLUMNS]
    names = [m.name for m in config.models if m.name not in skipped]
    kinds = {m.name: m.kind for m in config.models}
    refs = [r for r in reference_names(config) if r in names]
    cuts = slices(rows, s.min_group_cases)
    truth = labels[labels["status"] == "ok"]
    draws = Draws()  # a draw of as many groups is the same for every slice, model and pair
    scores = [row for name in names
              for row in slice_score_rows(rows, name, kinds[name], cuts, s, draws)]
    scores += [_in_sample_row(truth, cut, s) for cut in slices(truth, s.min_group_cases)]
    paired = [row for name in names for ref in refs if ref != name
              for row in slice_skill_rows(rows, name, ref, cuts, s, draws)]
    counts = labels["status"].value_counts()
    exclusions = pd.DataFrame({"reason": counts.index, "tasks": counts.to_numpy()}).sort_values(
        "reason", kind="stable").reset_index(drop=True)
    markets = [r for r in refs if kinds[r] == "market_price"]
    gap = [_gap_row(rows, name, m) for name in names for m in markets if name != m]
    return {"scores": pd.DataFrame(scores), "skill": pd.DataFrame(paired, columns=SKILL_COLUMNS),
            "rows": pd.concat([rows.rename(columns={"p_up": "p_yes"}),
                               cost_frame(scored, config.models)], axis=1),
            "exclusions": exclusions,
            "market_gap": pd.DataFrame(gap, columns=["model", "market", "n", "mean_abs_gap",
                                                     "median_abs_gap", "max_abs_gap"])}


def slice_score_rows(rows: pd.DataFrame, name: str, kind: str, cuts, s,
                     draws: Draws | None = None) -> list[dict]:
    """A model's scores in each slice of ``cuts``: its rows picked once, then each slice's
    (``draws``: the bootstrap's draws kept across calls; the same bits without)."""
    at = np.flatnonzero((rows["model"] == name).to_numpy(bool))
    mine = rows.iloc[at]
    status = mine["answer_status"].to_numpy()
    columns = {"error": status == "error", "answered": status == "answered",
               "scored": mine["scored"].to_numpy(bool), "p": mine["p_up"].to_numpy(float),
               "y": mine["y"].to_numpy(float), "brier": mine["brier"].to_numpy(float),
               "group": mine["event_group"].to_numpy()}
    out = []
    for slice_kind, value, where in cuts:
        keep = within(at, where)
        out.append(_score_row({c: v[keep] for c, v in columns.items()}, name, kind,
                              slice_kind, value, s, draws))
    return out


def _score_row(mine: dict[str, np.ndarray], name: str, kind: str, slice_kind: str,
               value: str, s, draws: Draws | None) -> dict:
    ok = mine["scored"]
    p, y, groups = mine["p"][ok], mine["y"][ok], mine["group"][ok]
    parts = brier_parts(p, y)
    answered = int(mine["answered"].sum())
    lo, hi = brier_interval(mine["brier"][ok], groups, s, draws)
    return {"model": name, "kind": kind, "slice_kind": slice_kind, "slice": value,
            "tasks": len(ok), "n_error": int(mine["error"].sum()),
            "n_invalid": answered - parts["n"],
            "validity": parts["n"] / answered if answered else np.nan, **parts,
            "no_positive_cases": parts["n"] > 0 and parts["positives"] == 0,
            "log_loss": log_loss(p, y, s.log_loss_clip), "brier_lo": lo, "brier_hi": hi,
            "groups": distinct(groups),
            "effective_events": effective_events(groups)}


def _in_sample_row(truth: pd.DataFrame, cut, s) -> dict:
    """The frequency of YES among the slice's scored markets, scored on them: descriptive."""
    slice_kind, value, where = cut
    y = truth["y"].to_numpy(float)[where]
    groups = truth["event_group"].to_numpy()[where]
    p = np.full(len(y), y.mean() if len(y) else np.nan)
    parts = brier_parts(p, y)
    return {"model": IN_SAMPLE, "kind": IN_SAMPLE_KIND, "slice_kind": slice_kind,
            "slice": value, "tasks": len(y), "n_error": 0, "n_invalid": 0,
            "validity": 1.0 if len(y) else np.nan, **parts,
            "no_positive_cases": parts["n"] > 0 and parts["positives"] == 0,
            "log_loss": log_loss(p, y, s.log_loss_clip), "brier_lo": np.nan,
            "brier_hi": np.nan, "groups": distinct(groups),
            "effective_events": effective_events(groups)}


def slice_skill_rows(rows: pd.DataFrame, name: str, ref: str, cuts, s,
                     draws: Draws | None = None) -> list[dict]:
    """Skill of ``name`` against ``ref`` in each slice of ``cuts``, on the rows both scored
    (same markets), with N, positives, both raw scores and a group-bootstrap interval. The
    rows are paired once; a slice (a set of markets) keeps the pairs of its markets, in the
    rows' order (``draws`` as :func:`slice_score_rows`')."""
    scored = rows["scored"].to_numpy(bool)
    mine_at = np.flatnonzero(scored & (rows["model"] == name).to_numpy(bool))
    theirs = rows[scored & (rows["model"] == ref).to_numpy(bool)]
    both = rows.iloc[mine_at][["task_id", "y", "event_group", "p_up", "brier"]].assign(
        row=mine_at).merge(theirs[["task_id", "p_up", "brier"]], on="task_id",
                           suffixes=("", "_ref"))
    at = both["row"].to_numpy()
    if len(at) > 1 and (at[1:] < at[:-1]).any():  # (an inner merge keeps the left's order)
        raise RuntimeError("paired rows are not in the order of the model's rows")
    columns = {c: both[c].to_numpy(float) for c in ("y", "p_up", "p_up_ref", "brier",
                                                    "brier_ref")}
    groups = both["event_group"].to_numpy()
    out = []
    for slice_kind, value, where in cuts:
        keep = within(at, where)
        out.append(_skill_row({c: v[keep] for c, v in columns.items()}, groups[keep], name,
                              ref, slice_kind, value, s, draws))
    return out


def _skill_row(pairs: dict[str, np.ndarray], groups: np.ndarray, name: str, ref: str,
               slice_kind: str, value: str, s, draws: Draws | None) -> dict:
    y = pairs["y"]
    bm, br = brier_parts(pairs["p_up"], y), brier_parts(pairs["p_up_ref"], y)
    lm, lr = (log_loss(pairs[c], y, s.log_loss_clip) for c in ("p_up", "p_up_ref"))
    lo, hi = skill_interval(pairs["brier"], pairs["brier_ref"], groups, s, draws)
    return {"model": name, "reference": ref, "slice_kind": slice_kind, "slice": value,
            "n": bm["n"], "positives": bm["positives"],
            "no_positive_cases": bm["n"] > 0 and bm["positives"] == 0,
            "brier_model": bm["brier"], "brier_reference": br["brier"],
            "bss": skill(bm["brier"], br["brier"]) if bm["n"] else np.nan,
            "bss_undefined": "reference scores 0" if bm["n"] and br["brier"] == 0 else (
                "no paired rows" if not bm["n"] else ""),
            "bss_lo": lo, "bss_hi": hi, "log_loss_model": lm, "log_loss_reference": lr,
            "log_loss_skill": skill(lm, lr) if bm["n"] else np.nan,
            "groups": distinct(groups)}


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
                     lambda p, f=frame: Path(p).write_text(event_csv(f)))
    return tables


def event_csv(frame: pd.DataFrame) -> str:
    """The CSV text of an event run's table (floats to 12 significant digits)."""
    return frame.to_csv(index=False, float_format="%.12g")
