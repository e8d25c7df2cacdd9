"""Replay: score forecasts made elsewhere, read from CSV/Parquet and validated row by row."""

from __future__ import annotations

import json
import math

import pandas as pd

from finbench.data.ingest import read_table_file
from finbench.errors import DataError
from finbench.forecast import ParsedAnswer
from finbench.forecasters.base import Forecaster, Inputs, register

ANSWER_FIELDS = ("p_up", "lower", "upper", "rationale")


def load_replay(path) -> pd.DataFrame:
    """Read a replay file keyed by ``task_id`` or by ``ticker, session, horizon``."""
    frame = read_table_file(path)
    if frame.empty:
        raise DataError(f"{path}: replay file has no rows")
    if "task_id" not in frame:
        missing = [c for c in ("ticker", "session", "horizon") if c not in frame]
        if missing:
            raise DataError(f"{path}: needs a task_id column or ticker, session, horizon "
                            f"(missing: {', '.join(missing)})")
        session = pd.to_datetime(frame["session"].astype(str)).dt.strftime("%Y-%m-%d")
        frame["task_id"] = (frame["ticker"].astype(str) + "|" + session + "|"
                            + frame["horizon"].astype(str))
    dup = frame["task_id"].duplicated(keep=False)
    if dup.any():
        rows = [str(i + 1) for i in frame.index[dup][:5]]
        raise DataError(f"{path}: rule 'one forecast per task' broken in rows {', '.join(rows)}")
    return frame


@register("replay")
class Replay(Forecaster):
    def __init__(self, config) -> None:
        super().__init__(config)
        self.table = load_replay(config.path).set_index("task_id")
        self.unmatched = 0

    def _answer(self, inputs: Inputs) -> tuple[list, dict]:
        answers = []
        wanted = set(inputs.tasks["task_id"])
        self.unmatched = int((~self.table.index.isin(wanted)).sum())
        for tid in inputs.tasks["task_id"]:
            if tid not in self.table.index:
                answers.append(ParsedAnswer(False, "missing: no row for this task in the replay "
                                            "file", ""))
                continue
            row = self.table.loc[tid]
            answer = {}
            for field in ANSWER_FIELDS:
                if field in row.index and not _blank(row[field]):
                    answer[field] = _number(row[field]) if field != "rationale" else str(row[field])
                elif field != "rationale":
                    answer[field] = None
            answers.append(answer)
        return answers, {}


def _blank(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _number(value):
    """CSV cells arrive as text: numbers become floats; anything else stays for the schema."""
    if isinstance(value, int | float):
        return value
    try:
        return float(json.loads(str(value)))
    except (ValueError, TypeError):
        return str(value)
