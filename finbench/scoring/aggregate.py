"""Per-model aggregates from stored forecasts and labels only (SPEC §8).

Rows: one per model and slice (``overall``, ``horizon=…``, ``ticker=…``). A forecast is scored
when it is valid (or replaced under ``invalid_policy = "fallback:<baseline>"``) and its label is
``ok``. Skill against a baseline uses the *paired* rows both scored; a zero reference loss
gives an undefined (null) skill, with both raw losses shown.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from finbench.scoring import _core

SLICE_KINDS = ("overall", "horizon", "ticker")


def row_scores(forecasts: pd.DataFrame, labels: pd.DataFrame, tasks: pd.DataFrame, *,
               invalid_policy: str = "exclude", clip: float = 1e-6, alpha: float = 0.2,
               ) -> pd.DataFrame:
    """Forecast rows joined with labels, the policy applied, and per-row scores."""
    frame = forecasts.merge(labels[["task_id", "r", "y", "status"]], on="task_id", how="left")
    frame = frame.merge(tasks[["task_id", "ticker", "session", "horizon"]], on="task_id",
                        how="left")
    frame["fallback_used"] = False
    if invalid_policy.startswith("fallback:"):
        base = invalid_policy.split(":", 1)[1]
        ref = forecasts[(forecasts["model"] == base) & forecasts["valid"]].set_index("task_id")
        swap = ~frame["valid"] & frame["task_id"].isin(ref.index) & (frame["model"] != base)
        for col in ("p_up", "lower", "upper"):
            frame.loc[swap, col] = ref.loc[frame.loc[swap, "task_id"], col].to_numpy()
        frame["fallback_used"] = swap
    usable = frame["valid"] | frame["fallback_used"]
    frame["scored"] = usable & (frame["status"] == "ok")
    s = frame["scored"].to_numpy()
    y = frame["y"].astype("float64").to_numpy()
    r = frame["r"].to_numpy(float)
    p, lo, hi = (frame[c].to_numpy(float) for c in ("p_up", "lower", "upper"))
    nan = np.full(len(frame), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        frame["brier"] = np.where(s, _core.brier(y, p), nan)
        frame["log_loss"] = np.where(s, _core.log_loss(y, p, clip), nan)
        frame["winkler"] = np.where(s, _core.winkler(r, lo, hi, alpha), nan)
        frame["covered"] = np.where(s, _core.covered(r, lo, hi), nan)
        frame["width"] = np.where(s, hi - lo, nan)
        frame["correct"] = np.where(s, _core.correct(y, p), nan)
        frame["kelly"] = np.where(s, _core.kelly(y, p), nan)
        frame["tie"] = np.where(s, r == 0, nan)
    return frame


def _slices(frame: pd.DataFrame):
    yield "overall", "all", frame
    for kind in ("horizon", "ticker"):
        for value, part in frame.groupby(kind, sort=False):
            yield kind, str(value), part


def aggregate(rows: pd.DataFrame, *, models: list[str], baselines: list[str],
              interval_reference: str | None, composite: dict[str, float] | None = None,
              horizon_order: list[str] | None = None) -> pd.DataFrame:
    """One row per (model, slice) with counts, mean scores and paired skill."""
    out = []
    by_model = {m: rows[rows["model"] == m] for m in models}
    for model in models:
        part = by_model[model]
        for kind, value, sl in _slices(part):
            scored = sl[sl["scored"]]
            n = len(scored)
            rec = {
                "model": model, "slice_kind": kind, "slice": value,
                "n_tasks": len(sl), "n_valid": int(sl["valid"].sum()),
                "validity": float(sl["valid"].mean()) if len(sl) else np.nan,
                "n_fallback": int(sl["fallback_used"].sum()),
                "n_unscorable": int((sl["status"] != "ok").sum()),
                "n_no_reference_price": int((sl["status"] == "no_reference_price").sum()),
                "n_no_target_price": int((sl["status"] == "no_target_price").sum()),
                "n": n, "positives": int(scored["y"].sum()) if n else 0,
                "ties": int(scored["tie"].sum()) if n else 0,
            }
            for col, name in (("correct", "accuracy"), ("brier", "brier"),
                              ("log_loss", "log_loss"), ("covered", "coverage"),
                              ("width", "width"), ("winkler", "winkler"), ("kelly", "kelly")):
                rec[name] = float(scored[col].mean()) if n else np.nan
            for base in baselines:
                rec.update(_paired(scored, by_model[base], kind, value, base, "brier", "bss"))
            if interval_reference:
                rec.update(_paired(scored, by_model[interval_reference], kind, value,
                                   interval_reference, "winkler", "wss"))
            out.append(rec)
    table = pd.DataFrame(out)
    if composite:
        table["composite_secondary"] = sum(w * table[col] for col, w in composite.items())
    order = {m: i for i, m in enumerate(models)}
    kinds = {k: i for i, k in enumerate(SLICE_KINDS)}
    hz = {h: i for i, h in enumerate(horizon_order or [])}
    table["_k"] = table["slice_kind"].map(kinds)
    table["_m"] = table["model"].map(order)
    table["_s"] = [hz.get(v, len(hz)) if k == "horizon" else 0
                   for k, v in zip(table["slice_kind"], table["slice"], strict=True)]
    table = table.sort_values(["_k", "_s", "slice", "_m"], kind="stable")
    return table.drop(columns=["_k", "_m", "_s"]).reset_index(drop=True)


def _paired(scored, base_rows, kind, value, base, col, prefix) -> dict:
    if kind != "overall":
        base_rows = base_rows[base_rows[kind].astype(str) == value]
    ref = base_rows[base_rows["scored"]][["task_id", col]]
    pair = scored[["task_id", col]].merge(ref, on="task_id", suffixes=("", "_ref"))
    n = len(pair)
    own = float(pair[col].mean()) if n else np.nan
    other = float(pair[f"{col}_ref"].mean()) if n else np.nan
    skill = (1.0 - own / other) if n and other != 0 else np.nan
    return {f"{prefix}_{base}": skill, f"{prefix}_{base}_n": n,
            f"{prefix}_{base}_model": own, f"{prefix}_{base}_ref": other}
