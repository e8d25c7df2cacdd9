"""Per-row scores as a table (``rows.parquet`` and ``rows.csv`` of a run): one row per forecast
with its task, answer, label and scores, and for each baseline the baseline's probability
for the same task and the row's skill against it.

A row's skill against a baseline is ``1 - brier / brier_baseline`` on that task, defined when
both were scored and the baseline's Brier score is not 0 (empty otherwise); against the
interval reference, ``1 - winkler / winkler_reference`` where both gave an interval. These
are per-row numbers, as the paper's pilot CSV gives them; the tables' skills are ratios of
means over paired rows, not means of these.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from finbench.core.lookup import arrow_text
from finbench.runlog.costs import cost_arrays
from finbench.scoring import kernels

ROW_COLUMNS = ["task_id", "model", "ticker", "session", "horizon", "p_up", "lower", "upper",
               "valid", "fallback_used", "scored", "interval_scored", "status", "r", "y",
               "brier", "log_loss", "winkler", "covered", "width", "kelly"]


class Reference:
    """A baseline's answer and scores per task (positions in the run's task list): ``p_up``,
    and Brier and Winkler where the answer is valid and the label ``ok`` (NaN elsewhere)."""

    def __init__(self, at: np.ndarray, p_up, lower, upper, valid, y, r, n_tasks: int, *,
                 alpha: float) -> None:
        """``at``: each row's task (-1: none); ``y``, ``r``: labels per task (NaN when not
        ``ok``)."""
        mine = at >= 0
        task = at[mine]
        p, lo, hi = (np.asarray(v, float)[mine] for v in (p_up, lower, upper))
        ok = np.asarray(valid, bool)[mine] & ~np.isnan(y[task])
        self.p_up, self.brier, self.winkler = (np.full(n_tasks, np.nan) for _ in range(3))
        self.p_up[task] = p
        with np.errstate(invalid="ignore"):
            self.brier[task] = np.where(ok, kernels.brier(y[task], p), np.nan)
            self.winkler[task] = np.where(ok, kernels.winkler(r[task], lo, hi, alpha), np.nan)


TASK_TEXT = ("ticker", "session", "horizon", "status")  # text columns of the task or label


def task_text(tasks: pd.DataFrame, status: pd.Series) -> dict[str, pa.DictionaryArray]:
    """:data:`TASK_TEXT` per task (``status``: each task's label status, in task order), each
    encoded once as codes and its few distinct texts, for :func:`row_table` to pick from."""
    return {c: arrow_text(status if c == "status" else tasks[c]).dictionary_encode()
            for c in TASK_TEXT}


def row_table(model: str, rows: pd.DataFrame, references: dict[str, Reference],
              interval_reference: str | None, text: dict[str, pa.DictionaryArray],
              cutoff: dt.date | None = None,
              costs: dict[str, pa.Array] | None = None) -> pa.Table:
    """The export of one model's scored rows (:func:`~finbench.tracks.intraday.score_cells.row_scores`,
    each a task's): :data:`ROW_COLUMNS`, then ``p_up_<b>`` and ``bss_<b>`` per baseline
    ``b``, ``wss_<interval_reference>``, ``possibly_memorised`` (the session is on or
    before the model's ``cutoff``; empty when it declares none), and what each row cost
    (``costs``: :data:`~finbench.runlog.costs.COST_COLUMNS`, each row's, by default those
    of a forecaster that calls no model); built column by column in
    Arrow (text stays Arrow text). ``model`` and the columns of ``text`` (:func:`task_text`
    of the run) are dictionary-encoded text: codes picked per row, no text made per row (a
    Parquet writer writes the codes as they are)."""
    at = rows["task_row"].to_numpy(np.int64)
    if len(at) and at.min() < 0:
        raise ValueError("row_table: a row of no task of the run")
    coded = {c: pa.DictionaryArray.from_arrays(text[c].indices.take(pa.array(at)),
                                               text[c].dictionary) for c in TASK_TEXT}
    coded["model"] = pa.DictionaryArray.from_arrays(pa.array(np.zeros(len(at), np.int32)),
                                                    pa.array([model], pa.string()))
    columns = {c: coded[c] if c in coded else _arrow(rows[c]) for c in ROW_COLUMNS}
    columns["y"] = pa.array(rows["y"].astype("float64").to_numpy(na_value=np.nan),
                            pa.float64())
    with np.errstate(invalid="ignore", divide="ignore"):
        for name, ref in references.items():
            columns[f"p_up_{name}"] = pa.array(_at(ref.p_up, at))
            columns[f"bss_{name}"] = pa.array(_skill(rows["brier"].to_numpy(float),
                                                     _at(ref.brier, at)))
        if interval_reference in references:
            columns[f"wss_{interval_reference}"] = pa.array(_skill(
                rows["winkler"].to_numpy(float), _at(references[interval_reference].winkler, at)))
    if cutoff is None:
        columns["possibly_memorised"] = pa.nulls(len(rows), pa.bool_())
    else:
        columns["possibly_memorised"] = pc.less_equal(_arrow(rows["session"]),
                                                      pa.scalar(cutoff.isoformat()))
    columns.update(cost_arrays("", len(rows)) if costs is None else costs)
    return pa.table(columns)


def _arrow(column: pd.Series) -> pa.Array:
    """A column as Arrow: text as text (no Python objects), numbers and flags as they are."""
    if column.dtype.kind in "biuf":
        return pa.array(column.to_numpy())
    return pa.array(column, pa.string(), from_pandas=True)


def _at(values: np.ndarray, at: np.ndarray) -> np.ndarray:
    return np.where(at >= 0, values[np.maximum(at, 0)], np.nan) if len(values) else (
        np.full(len(at), np.nan))


def _skill(loss: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``1 - loss / reference`` where both exist and the reference is not 0; NaN elsewhere."""
    ok = np.isfinite(loss) & np.isfinite(reference) & (reference != 0)
    return np.where(ok, 1.0 - loss / np.where(ok, reference, 1.0), np.nan)
