"""The intraday report's declared slices (``[[slices]]``, docs/reports.md "Declared
slices"): every model's scores in each value of each slice, its skill paired with its
reference on the slice's own rows, from the run's rows and its ``slices.parquet``."""

from __future__ import annotations

import numpy as np
import pandas as pd

from finbench.core.slices import EVENT, NO_EVENT, REGIMES, TOO_LITTLE, UNGROUPED
from finbench.runlog.rundir import SLICES
from finbench.tracks.intraday.report_data import RunData, score_table

COLUMNS = ["slice", "kind", "value", "tasks", "model", "n", "sessions", "positives", "brier",
           "brier_lo", "brier_hi", "bss_ref", "bss", "bss_lo", "bss_hi", "bss_n",
           "bss_model_brier", "bss_ref_brier", "coverage", "n_interval", "flag"]


def value_order(kind: str, values) -> list[str]:
    """A slice's values in the order tables show them: regimes low to high, events before
    none, groups by name with the ungrouped last."""
    fixed = {"volatility": [*REGIMES, TOO_LITTLE], "calendar": [EVENT, NO_EVENT]}.get(kind)
    if fixed is not None:
        return [v for v in fixed if v in set(values)]
    return sorted(set(values) - {UNGROUPED}) + ([UNGROUPED] if UNGROUPED in set(values) else [])


def slice_scores(data: RunData) -> pd.DataFrame:
    """Per declared slice, value and model: the run's tasks of that value (``tasks``), and on
    the model's rows of it the scores of :func:`score_table` (N, sessions, Brier with its
    CI, skill against its reference on the rows both scored with its CI and paired N,
    coverage); the slices in the config's order (none without ``slices.parquet``)."""
    if data.run_dir is None or not data.config.slices or not (data.run_dir / SLICES).is_file():
        return pd.DataFrame(columns=COLUMNS)
    stored = pd.read_parquet(data.run_dir / SLICES, columns=["task_id", "slice", "value"])
    out = []
    for s in data.config.slices:
        mine = stored[stored["slice"] == s.name]
        value_of = pd.Series(mine["value"].to_numpy(object), index=mine["task_id"].to_numpy(
            object))
        order = value_order(s.kind, value_of.unique())
        column = "_slice"
        data.rows[column] = pd.Categorical(value_of.reindex(data.rows["task_id"]).to_numpy(
            object), categories=order)
        try:
            table = score_table(data, slice_kind=column, composite=False)
        finally:
            del data.rows[column]
        if table.empty:
            continue
        counts = value_of.value_counts()
        table = table.assign(slice=s.name, kind=s.kind, value=table["slice"].astype(str),
                             tasks=table["slice"].astype(str).map(counts).astype(np.int64))
        rank = {v: i for i, v in enumerate(order)}
        table = table.sort_values(by="value", key=lambda v: v.map(rank), kind="stable")
        out.append(table.reindex(columns=COLUMNS))
    return (pd.concat(out, ignore_index=True) if out
            else pd.DataFrame(columns=COLUMNS))
