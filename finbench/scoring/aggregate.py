"""Per-model aggregates from stored forecasts and labels only (SPEC §8).

Rows: one per model and slice (``overall``, ``horizon=…``, ``ticker=…``). A forecast is scored
when it is valid (or replaced under ``invalid_policy = "fallback:<baseline>"``) and its label is
``ok``. Skill against a baseline uses the *paired* rows both scored; a zero reference loss
gives an undefined (null) skill, with both raw losses shown.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from finbench.lookup import arrow_text, positions, take
from finbench.scoring import _core

SLICE_KINDS = ("overall", "horizon", "ticker")


def row_scores(forecasts: pd.DataFrame, labels: pd.DataFrame, tasks: pd.DataFrame, *,
               invalid_policy: str = "exclude", clip: float = 1e-6, alpha: float = 0.2,
               ) -> pd.DataFrame:
    """Forecast rows joined with labels, the policy applied, and per-row scores."""
    frame = forecasts.reset_index(drop=True).copy()
    for source, cols in ((labels, ("r", "y", "status")), (tasks, ("ticker", "session",
                                                                     "horizon"))):
        at = positions(frame["task_id"], source["task_id"])
        for col in cols:
            frame[col] = take(source[col], at)
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


METRICS = (("correct", "accuracy"), ("brier", "brier"), ("log_loss", "log_loss"),
           ("covered", "coverage"), ("width", "width"), ("winkler", "winkler"),
           ("kelly", "kelly"))


def aggregate(rows: pd.DataFrame, *, models: list[str], baselines: list[str],
              interval_reference: str | None, composite: dict[str, float] | None = None,
              horizon_order: list[str] | None = None) -> pd.DataFrame:
    """One row per (model, slice) with counts, mean scores and paired skill.

    Vectorised: rows are laid out as a task × model grid once; every count, mean and paired
    skill of every slice is a ``bincount`` over slice codes.
    """
    model_at = positions(rows["model"], list(models))
    listed = model_at >= 0
    rows = rows[listed]
    mcode = model_at[listed]
    encoded = arrow_text(rows["task_id"]).dictionary_encode()
    task_codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    n_tasks = len(encoded.dictionary)
    _, first = np.unique(task_codes, return_index=True)  # first row of each task, by code
    per_task = rows.iloc[first].reset_index(drop=True)
    model_pos = {m: i for i, m in enumerate(models)}

    def grid(values, fill=np.nan) -> np.ndarray:
        out = np.full((len(models), n_tasks), fill, dtype=float)
        out[mcode, task_codes] = values
        return out

    present = grid(1.0, 0.0) > 0
    scored = grid(rows["scored"].to_numpy(float), 0.0) > 0
    metric = {col: grid(rows[col].to_numpy(float)) for col, _ in METRICS}
    metric["y"] = grid(rows["y"].astype("float64").to_numpy())
    metric["tie"] = grid(rows["tie"].to_numpy(float))
    flags = {
        "valid": grid(rows["valid"].to_numpy(float), 0.0),
        "fallback": grid(rows["fallback_used"].to_numpy(float), 0.0),
        "unscorable": grid((rows["status"] != "ok").to_numpy(float), 0.0),
        "no_ref": grid((rows["status"] == "no_reference_price").to_numpy(float), 0.0),
        "no_tgt": grid((rows["status"] == "no_target_price").to_numpy(float), 0.0),
    }
    out = []
    for kind in SLICE_KINDS:
        if kind == "overall":
            codes, values = np.zeros(n_tasks, dtype=np.int64), np.array(["all"], dtype=object)
        else:
            codes, values = pd.factorize(per_task[kind].astype(str))
            values = np.asarray(values, dtype=object)
        k = len(values)

        def total(weights, mask, codes=codes, k=k) -> np.ndarray:
            w = np.where(mask, weights, 0.0)
            return np.bincount(codes, weights=w, minlength=k)

        for model, i in model_pos.items():
            has = present[i]
            n_rows = np.bincount(codes[has], minlength=k)
            sc = scored[i]
            n = total(np.ones(n_tasks), sc)
            recs = {
                "n_tasks": n_rows, "n_valid": total(flags["valid"][i], has),
                "n_fallback": total(flags["fallback"][i], has),
                "n_unscorable": total(flags["unscorable"][i], has),
                "n_no_reference_price": total(flags["no_ref"][i], has),
                "n_no_target_price": total(flags["no_tgt"][i], has),
                "n": n, "positives": total(metric["y"][i], sc), "ties": total(metric["tie"][i], sc),
            }
            with np.errstate(invalid="ignore", divide="ignore"):
                means = {name: total(metric[col][i], sc) / n for col, name in METRICS}
                paired = {}
                for base in baselines:
                    paired.update(_paired(scored, metric["brier"], i, model_pos[base], codes, k,
                                          base, "bss"))
                if interval_reference:
                    paired.update(_paired(scored, metric["winkler"], i,
                                          model_pos[interval_reference], codes, k,
                                          interval_reference, "wss"))
            for j in range(k):
                if n_rows[j] == 0:
                    continue
                rec = {"model": model, "slice_kind": kind, "slice": str(values[j]),
                       "n_tasks": int(recs["n_tasks"][j]),
                       "n_valid": int(recs["n_valid"][j]),
                       "validity": float(recs["n_valid"][j] / recs["n_tasks"][j]),
                       "n_fallback": int(recs["n_fallback"][j]),
                       "n_unscorable": int(recs["n_unscorable"][j]),
                       "n_no_reference_price": int(recs["n_no_reference_price"][j]),
                       "n_no_target_price": int(recs["n_no_target_price"][j]),
                       "n": int(n[j]), "positives": int(recs["positives"][j]),
                       "ties": int(recs["ties"][j])}
                rec.update({name: float(v[j]) if n[j] else np.nan for name, v in means.items()})
                for key, v in paired.items():
                    rec[key] = int(v[j]) if key.endswith("_n") else float(v[j])
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


def _paired(scored, loss, i, b, codes, k, base, prefix) -> dict:
    """Skill of model ``i`` against model ``b`` on the tasks both scored, per slice."""
    both = scored[i] & scored[b]
    n = np.bincount(codes, weights=both.astype(float), minlength=k)
    own_sum = np.bincount(codes, weights=np.where(both, loss[i], 0.0), minlength=k)
    ref_sum = np.bincount(codes, weights=np.where(both, loss[b], 0.0), minlength=k)
    own = np.where(n > 0, own_sum / np.maximum(n, 1), np.nan)
    ref = np.where(n > 0, ref_sum / np.maximum(n, 1), np.nan)
    skill = np.where((n > 0) & (ref_sum != 0), 1.0 - own_sum / np.where(ref_sum == 0, 1, ref_sum),
                     np.nan)
    return {f"{prefix}_{base}": skill, f"{prefix}_{base}_n": n,
            f"{prefix}_{base}_model": own, f"{prefix}_{base}_ref": ref}
