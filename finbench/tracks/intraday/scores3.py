"""Three-class scores of a run (``scores3.parquet`` and ``scores3.csv``): one row per model that
forecasts down / flat / up, and slice (``overall``, ``horizon=…``, ``ticker=…``).

A row is scored when its answer is valid and its label ``ok`` (class 0, 1 or 2). Per model and
slice: the tasks asked, valid answers, calls without answer (``n_error``), validity (valid over
answered), ``n`` scored, the means of multiclass Brier, log loss, ranked probability score and
accuracy (:mod:`finbench.scoring.multiclass`), the excluded probability mass of valid rows
(mean, median, max: a native head's answers that were none of the labels), the rows a minimum
mass rule made invalid, the fallbacks; and skill against each three-class baseline on the
*paired* rows both scored, for Brier (``bss3_<b>``) and RPS (``rpss3_<b>``), with that N.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from finbench.core.errors import RunError
from finbench.runlog.costs import COST_COLUMNS, cost_frame
from finbench.runlog.rows import ERROR
from finbench.scoring import multiclass as mc
from finbench.tracks.intraday.config import CLASS_BASELINE_KINDS, RunConfig, class_names

SLICE_KINDS = ("overall", "horizon", "ticker")
READ = ["task_id", "model", "q_down", "q_flat", "q_up", "excluded_mass", "valid", "error",
        "answer_status", "p_fallback", "detail", "tokens"]
BELOW_MIN = "candidate_mass_below_min"


def class_rows(forecasts: pd.DataFrame, labels: pd.DataFrame, tasks: pd.DataFrame, *,
               clip: float) -> pd.DataFrame:
    """Three-class forecast rows with their task, label class and per-row scores."""
    frame = forecasts.merge(tasks[["task_id", "ticker", "horizon", "session"]], on="task_id",
                            how="left")
    frame = frame.merge(labels[["task_id", "cls", "status"]], on="task_id", how="left")
    y = frame["cls"].fillna(-1).to_numpy(np.int64)
    bad = ~np.isin(y, (-1, 0, 1, 2))
    if bad.any():  # (a class the label pass never gives: the labels were edited)
        raise RunError(f"labels.parquet: task {frame['task_id'].iat[int(np.argmax(bad))]} has "
                       f"class {int(y[bad][0])}, none of down 0, flat 1, up 2 or -1 "
                       f"(unscorable) ({int(bad.sum())} row(s))")
    q = frame[["q_down", "q_flat", "q_up"]].to_numpy(float)
    valid = frame["valid"].to_numpy(bool)
    scored = valid & (y >= 0)
    frame["scored"] = scored
    frame["answered"] = (frame["answer_status"] != ERROR).to_numpy(bool)
    yy = np.where(scored, y, -1)
    qq = np.where(scored[:, None], q, 1 / 3)
    for name, rule in (("brier", mc.brier), ("rps", mc.rps), ("accuracy", mc.accuracy)):
        frame[name] = rule(yy, qq)
    frame["log_loss"] = mc.log_loss(yy, qq, clip)
    return frame


# rows3.*: one row per three-class forecast, its label's class and its per-row scores
ROW3_COLUMNS = ["task_id", "model", "ticker", "session", "horizon", "q_down", "q_flat", "q_up",
                "excluded_mass", "valid", "answer_status", "error", "status", "cls", "scored",
                "brier", "log_loss", "rps", "accuracy", *COST_COLUMNS]


def class_scores(config: RunConfig, forecasts_path: Path, labels: pd.DataFrame,
                 tasks: pd.DataFrame, skipped: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The three-class scores table and its rows (:data:`ROW3_COLUMNS`, each model's in task
    order); both empty when the run has no three-class model."""
    names = [n for n in class_names(config) if n not in skipped]
    if not names:
        return pd.DataFrame(), pd.DataFrame(columns=ROW3_COLUMNS)
    forecasts = pq.read_table(forecasts_path, columns=READ,
                              filters=[("model", "in", names)]).to_pandas()
    rows = class_rows(forecasts, labels, tasks, clip=config.scores.log_loss_clip)
    return _class_table(config, rows, names), _row3_table(rows, names, tasks, config.models)


def _row3_table(rows: pd.DataFrame, names: list[str], tasks: pd.DataFrame,
                models) -> pd.DataFrame:
    """The rows of ``rows3.*``: the models in the config's order, each model's rows in task
    order, unscored ones' scores empty, and what each cost (``models``: the run's)."""
    order = pd.Series(np.arange(len(tasks)), index=tasks["task_id"].to_numpy())
    out = rows.assign(_m=rows["model"].map({n: i for i, n in enumerate(names)}),
                      _t=order.reindex(rows["task_id"].to_numpy()).to_numpy())
    out = out.sort_values(["_m", "_t"], kind="stable").reset_index(drop=True)
    scored = out["scored"].to_numpy(bool)
    for col in ("brier", "log_loss", "rps", "accuracy"):
        out[col] = np.where(scored, out[col].to_numpy(float), np.nan)
    out["cls"] = out["cls"].astype("Int8")
    out[list(COST_COLUMNS)] = cost_frame(out, models)
    return out[ROW3_COLUMNS]


def _class_table(config: RunConfig, rows: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """The three-class scores per model and slice, from every such model's rows."""
    references = [m.name for m in config.models
                  if m.kind in CLASS_BASELINE_KINDS and m.name in names]
    order = {h: i for i, h in enumerate(config.tasks.horizons)}
    out = []
    for kind in SLICE_KINDS:
        key = None if kind == "overall" else kind
        values = ["all"] if key is None else sorted(
            rows[key].dropna().unique(), key=lambda v: (order.get(v, 99), v))
        for value in values:
            part = rows if key is None else rows[rows[key] == value]
            for name in names:
                out.append(_cell(part, name, kind, value, references))
    return pd.DataFrame(out)


def _cell(part: pd.DataFrame, name: str, kind: str, value, references: list[str]) -> dict:
    mine = part[part["model"] == name]
    scored = mine[mine["scored"]]
    answered = int(mine["answered"].sum())
    valid = mine[mine["valid"]]
    excluded = valid["excluded_mass"].dropna()
    row = {"model": name, "slice_kind": kind, "slice": str(value), "n_tasks": len(mine),
           "n_valid": len(valid), "n_error": len(mine) - answered,
           "validity": len(valid) / answered if answered else np.nan, "n": len(scored),
           **{m: scored[m].mean() if len(scored) else np.nan
              for m in ("brier", "log_loss", "rps", "accuracy")},
           "excluded_mass_mean": excluded.mean() if len(excluded) else np.nan,
           "excluded_mass_median": excluded.median() if len(excluded) else np.nan,
           "excluded_mass_max": excluded.max() if len(excluded) else np.nan,
           "n_below_min_mass": int(mine["error"].fillna("").str.startswith(BELOW_MIN).sum()),
           "n_fallback": int(valid["p_fallback"].notna().sum())}
    for ref in references:
        theirs = part[(part["model"] == ref) & part["scored"]].set_index("task_id")
        both = scored[scored["task_id"].isin(theirs.index)]
        for loss, prefix in (("brier", "bss3"), ("rps", "rpss3")):
            own = both[loss].sum()
            other = theirs.loc[both["task_id"], loss].sum()
            row[f"{prefix}_{ref}"] = 1 - own / other if len(both) and other else np.nan
        row[f"bss3_{ref}_n"] = len(both)
    return row
