"""The event report's declared slices (``[[slices]]``, docs/reports.md "Declared slices"):
every model's scores in each value of each slice and its skill against each reference on
the value's markets both scored, from the run's rows and its ``slices.parquet``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from finbench.runlog.rundir import SLICES, read_manifest
from finbench.scoring.bootstrap import Draws
from finbench.tracks.events.config import reference_names
from finbench.tracks.events.scores import SKILL_COLUMNS, slice_score_rows, slice_skill_rows


def value_order(kind: str, values) -> list[str]:
    from finbench.core.slices import EVENT, NO_EVENT, UNGROUPED

    present = set(values)
    if kind == "calendar":
        return [v for v in (EVENT, NO_EVENT) if v in present]
    return sorted(present - {UNGROUPED}) + ([UNGROUPED] if UNGROUPED in present else [])


def event_slice_tables(run_dir: Path, config) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(scores, skill) per declared slice and value, as ``scores.parquet`` and
    ``skill.parquet`` give them per category (``slice_kind`` the slice's name), with
    ``tasks``: the run's tasks of the value; both empty without declared slices."""
    if not config.slices or not (run_dir / SLICES).is_file():
        return pd.DataFrame(), pd.DataFrame(columns=SKILL_COLUMNS)
    skipped = read_manifest(run_dir).get("skipped_models", {})
    names = [m.name for m in config.models if m.name not in skipped]
    kinds = {m.name: m.kind for m in config.models}
    refs = [r for r in reference_names(config) if r in names]
    rows = pd.read_parquet(run_dir / "rows.parquet").rename(columns={"p_yes": "p_up"})
    stored = pd.read_parquet(run_dir / SLICES, columns=["task_id", "slice", "value"])
    scores, skill = [], []
    s, draws = config.scores, Draws()  # (as the run's tables: the same bits as drawn afresh)
    for declared in config.slices:
        mine = stored[stored["slice"] == declared.name]
        value_of = pd.Series(mine["value"].to_numpy(object), index=mine["task_id"].to_numpy(
            object))
        counts = value_of.value_counts()
        values = rows["task_id"].map(value_of).to_numpy(object)
        cuts = [(declared.name, v, np.flatnonzero(values == v))
                for v in value_order(declared.kind, value_of.unique())]
        tasks = {v: int(counts.get(v, 0)) for _, v, _ in cuts}
        for name in names:
            scores += [{**r, "tasks": tasks[r["slice"]]}
                       for r in slice_score_rows(rows, name, kinds[name], cuts, s, draws)]
            skill += [{**r, "tasks": tasks[r["slice"]]} for ref in refs if ref != name
                      for r in slice_skill_rows(rows, name, ref, cuts, s, draws)]
    return (pd.DataFrame(scores),
            pd.DataFrame(skill, columns=[*SKILL_COLUMNS, "tasks"]).astype({"tasks": np.int64}))
