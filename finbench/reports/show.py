"""One task of a run, in full (``finbench show RUN TASK_ID``), as the run's track views it
(:meth:`~finbench.tracks.base.TrackPlugin.show`), read from the run directory alone; and
that view as strict JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from finbench.core.errors import RunError
from finbench.reports.writers import json_number
from finbench.runlog.rundir import INPUTS, SCORED, check_recorded, finished_run, load_run_config
from finbench.runlog.transcripts import Transcripts
from finbench.tracks import plugin_of


def show(run_dir: str | Path, task_id: str, model: str | None = None) -> dict:
    """Everything the run holds about ``task_id``: ``task`` (with its label), ``models`` (per
    model: forecast, scores, and ``calls``: the transcripts of its calls, every attempt). With
    ``model``, that model and the baselines (each baseline's forecast for the same task)."""
    run_dir = finished_run(run_dir)
    check_recorded(run_dir, INPUTS + SCORED)
    return plugin_of(load_run_config(run_dir)).show(run_dir, task_id, model)


def as_json(found: dict) -> str:
    """:func:`show`'s facts as standard JSON: an infinite number (a Kelly growth of -inf, for
    a probability of 0 or 1 on the wrong side) as the text ``"-inf"`` or ``"inf"`` and a NaN
    as null, since JSON has no such numbers (Python's ``-Infinity`` breaks strict readers
    such as jq)."""
    def strict(value):
        if isinstance(value, float):
            return json_number(value)
        if isinstance(value, dict):
            return {k: strict(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [strict(v) for v in value]
        return value

    return json.dumps(strict(found), indent=2, sort_keys=True, default=str, allow_nan=False)

def task_row(path: Path, task_id: str) -> dict | None:
    """The row of ``task_id`` in a table of one row per task (None: no such task)."""
    rows = task_rows(path, task_id)
    return {k: plain(v) for k, v in rows.iloc[0].items()} if len(rows) else None


def task_rows(path: Path, task_id: str) -> pd.DataFrame:
    """The rows of ``task_id`` in a table, in its order: each row group's ``task_id``
    column read, then only the row groups holding the task read whole. (A filtered read
    decoded every column of every row group: a year's forecasts, their texts among them,
    for the four rows of a task.)"""
    with pq.ParquetFile(path) as file:
        parts = []
        for group in range(file.metadata.num_row_groups):
            ids = file.read_row_group(group, columns=["task_id"]).column("task_id")
            hits = pc.indices_nonzero(pc.equal(ids, task_id))
            if len(hits):
                parts.append(file.read_row_group(group).take(hits))
        table = pa.concat_tables(parts) if parts else file.schema_arrow.empty_table()
    return table.to_pandas()


def first_task_id(run_dir: Path) -> str:
    """The run's first task id, quoted: what an unknown id's error shows task ids look like."""
    ids = pq.read_table(run_dir / "tasks.parquet", columns=["task_id"]).column("task_id")
    return repr(ids[0].as_py()) if len(ids) else "(none: the run has no tasks)"


def plain(value):
    """A table's cell as plain Python (a time as ISO text, NaN as None, numpy scalars as
    Python's)."""
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    if value is None or (isinstance(value, float) and value != value):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def model_views(run_dir: Path, task_id: str, forecasts: pd.DataFrame, scored: pd.DataFrame,
                names: list[str], forecast_columns, score_columns) -> list[dict]:
    """Per model of ``names`` (each with a row of ``task_id`` in ``forecasts``): its
    forecast's ``forecast_columns``, its scored row's ``score_columns`` (None: not scored)
    and ``calls``, the transcripts of its calls of the task, every attempt."""
    transcripts = Transcripts(run_dir)
    try:
        out = []
        for name in names:
            row = forecasts[forecasts["model"] == name].iloc[0]
            entry = {c: plain(row[c]) for c in forecast_columns if c in row}
            mine = scored[scored["model"] == name]
            entry["scores"] = ({c: plain(mine.iloc[0][c]) for c in score_columns}
                               if len(mine) else None)
            entry["calls"] = transcripts.of(task_id, name)
            out.append(entry)
        return out
    finally:
        transcripts.close()


def labelled_task(run_dir: Path, task_id: str) -> dict:
    """The row of ``task_id`` in ``tasks.parquet`` with its label's columns beside it; a
    RunError naming the id (and what ids look like) when the run has no such task."""
    task = task_row(run_dir / "tasks.parquet", task_id)
    if task is None:
        raise RunError(f"{run_dir}: no task {task_id!r} (task ids look like "
                       f"{first_task_id(run_dir)})")
    label = task_row(run_dir / "labels.parquet", task_id) or {}
    return {**task, **{k: v for k, v in label.items() if k != "task_id"}}


def message_lines(message: dict) -> list[str]:
    """One message of a call as ``show`` prints it: its role, then its text; an agent's turn
    with the tool calls it made (tool, arguments), a tool's answer under the call it
    answers."""
    role = message.get("role")
    if role == "tool":
        return [f"[tool answer to {message.get('tool_call_id')}]", message.get("content") or ""]
    lines = [f"[{role}]"] + ([message["content"]] if message.get("content") else [])
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        lines.append(f"-> {call.get('id')}: {function.get('name')} {function.get('arguments')}")
    return lines
