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
from finbench.core.lookup import groups, spans
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
    """The three-class scores per model and slice, from every such model's rows: the rows
    grouped once per kind of slice, by value and model (each cell's rows in the order they
    stand), and each cell reduced from its own rows (:class:`_Cells`), so that the cost grows
    with the rows and the cells, not with their product."""
    references = [m.name for m in config.models
                  if m.kind in CLASS_BASELINE_KINDS and m.name in names]
    order = {h: i for i, h in enumerate(config.tasks.horizons)}
    model = pd.Series(rows["model"].to_numpy(object)).map(
        {n: i for i, n in enumerate(names)}).fillna(-1).to_numpy(np.int64)
    cells = _Cells(rows)
    out = []
    for kind in SLICE_KINDS:
        if kind == "overall":
            values, at = ["all"], np.zeros(len(rows), np.int64)
        else:
            codes, uniques = pd.factorize(rows[kind].to_numpy(object))
            ranked = sorted(range(len(uniques)),
                            key=lambda i: (order.get(uniques[i], 99), uniques[i]))
            values = [uniques[i] for i in ranked]
            rank = np.empty(len(uniques), np.int64)
            rank[ranked] = np.arange(len(values))
            at = np.where(codes >= 0, rank[np.maximum(codes, 0)], -1) if len(rank) else codes
        cells_of = groups(np.where((at >= 0) & (model >= 0), at * len(names) + model, -1),
                          len(values) * len(names))
        for v, value in enumerate(values):
            mine = {name: cells_of[v * len(names) + i] for i, name in enumerate(names)}
            for name in names:
                out.append(cells.row(mine[name], name, kind, value,
                                     {ref: mine[ref] for ref in references}))
    return pd.DataFrame(out)


class _Cells:
    """One cell's row of the three-class table from the positions of its model's rows in it
    (in the rows' order), each value reduced as pandas reduces the cell's own Series (its
    mean: the sum of the values, a missing one as 0, over the count of those present; its
    sum likewise; the median of those present): the same numbers, bit for bit, as the cell's
    rows filtered out of the whole frame (``tests/reference.py``'s ``naive_class_table``)."""

    def __init__(self, rows: pd.DataFrame) -> None:
        def column(c: str) -> np.ndarray:
            return rows[c].to_numpy(float)

        self.scored = rows["scored"].to_numpy(bool)
        self.valid = rows["valid"].to_numpy(bool)
        self.answered = rows["answered"].to_numpy(bool)
        self.losses = {m: column(m) for m in ("brier", "log_loss", "rps", "accuracy")}
        self.excluded = column("excluded_mass")
        self.below_min = rows["error"].fillna("").str.startswith(BELOW_MIN).to_numpy(bool)
        self.fallback = rows["p_fallback"].notna().to_numpy(bool)
        self.task = pd.factorize(rows["task_id"].to_numpy(object))[0]

    def row(self, at: np.ndarray, name: str, kind: str, value,
            references: dict[str, np.ndarray]) -> dict:
        scored = at[self.scored[at]]
        valid = at[self.valid[at]]
        answered = int(self.answered[at].sum())
        excluded = self.excluded[valid]
        excluded = excluded[~np.isnan(excluded)]
        row = {"model": name, "slice_kind": kind, "slice": str(value), "n_tasks": len(at),
               "n_valid": len(valid), "n_error": len(at) - answered,
               "validity": len(valid) / answered if answered else np.nan, "n": len(scored),
               **{m: _mean(self.losses[m][scored]) if len(scored) else np.nan
                  for m in ("brier", "log_loss", "rps", "accuracy")},
               "excluded_mass_mean": _mean(excluded) if len(excluded) else np.nan,
               "excluded_mass_median": np.nanmedian(excluded) if len(excluded) else np.nan,
               "excluded_mass_max": excluded.max() if len(excluded) else np.nan,
               "n_below_min_mass": int(self.below_min[at].sum()),
               "n_fallback": int(self.fallback[valid].sum())}
        for ref, theirs in references.items():
            theirs = theirs[self.scored[theirs]]
            both, matched = matched_tasks(self.task[scored], self.task[theirs])
            both, matched = scored[both], theirs[matched]
            for loss, prefix in (("brier", "bss3"), ("rps", "rpss3")):
                own = _sum(self.losses[loss][both])
                other = _sum(self.losses[loss][matched])
                row[f"{prefix}_{ref}"] = 1 - own / other if len(both) and other else np.nan
            row[f"bss3_{ref}_n"] = len(both)
        return row


def matched_tasks(mine: np.ndarray, theirs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(which of ``mine``'s tasks ``theirs`` has, in ``mine``'s order; for each of those, in
    that order, the positions in ``theirs`` of its task, each task's in ``theirs``' order): a
    filter on ``isin`` and a ``.loc`` by task on a frame indexed by ``theirs``."""
    order = np.argsort(theirs, kind="stable")
    ranked = theirs[order]
    left, right = np.searchsorted(ranked, mine, "left"), np.searchsorted(ranked, mine, "right")
    both = np.flatnonzero(right > left)
    return both, order[spans(left[both], right[both])]


def _sum(values: np.ndarray) -> np.float64:
    """A Series' ``sum()``: its values summed, a missing one as 0."""
    missing = np.isnan(values)
    return (np.where(missing, 0.0, values) if missing.any() else values).sum()


def _mean(values: np.ndarray) -> np.float64:
    """A Series' ``mean()``: its values summed, a missing one as 0, over the count of those
    present (NaN with none)."""
    missing = np.isnan(values)
    count = np.float64(len(values) - int(missing.sum()))
    return _sum(values) / count if count > 0 else np.nan
