"""Replay: score forecasts made elsewhere, read from CSV/Parquet and validated row by row.

A replay file holds rows keyed by ``task_id``, by ``ticker, session, horizon`` or (an event
run's) by ``market_id``, with ``p_up`` (an event forecaster's ``p_yes``) and, for a
forecaster that gives intervals, ``lower`` and ``upper`` (a file without
both is a probability-only forecaster: a replayed market price, say); ``rationale`` is
optional. A file may hold several models' rows in a ``model`` column, as the paper's pilot
CSV does: the config's ``model`` picks one. A task of the run without a row is an invalid
answer (``missing = "invalid"``) or was not asked (``missing = "not_asked"``, e.g. a model the
pilot asked at some horizons only). Rows for tasks outside the run are counted and named in
the run's notes, never scored. A file's own ``y``, ``r``, ``brier``, ``log_loss``,
``winkler`` or ``composite_score`` (:data:`CLAIM_FIELDS`) are kept as each row's claims and
compared with FinBench's values in the report; they never change a score.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from finbench.core.errors import DataError
from finbench.data.user_files import read_table_file
from finbench.forecasters.answers import ParsedAnswer, parse_answer
from finbench.forecasters.base import Forecaster, register
from finbench.tracks.base import Inputs

ANSWER_FIELDS = ("p_up", "lower", "upper", "rationale")
# what a file may claim of its rows beside its answers (the paper's pilot CSV carries its own
# labels and scores): kept in each row's detail, ``claimed``, and compared with FinBench's by
# the report (its table ``replay_claims``), never used to score
CLAIM_FIELDS = ("y", "r", "brier", "log_loss", "winkler", "composite_score")


def load_replay(path, model: str | None = None) -> pd.DataFrame:
    """Read a replay file keyed by ``task_id``, by ``market_id`` (an event run's: one task a
    market) or by ``ticker, session, horizon``: the rows of ``model`` when the file has a
    ``model`` column (which must then name one). The probability is ``p_up``, or an event
    forecaster's ``p_yes`` (read as ``p_up``, the probability of the positive outcome)."""
    frame = read_table_file(path)
    if frame.empty:
        raise DataError(f"{path}: replay file has no rows")
    if "p_up" in frame and "p_yes" in frame:
        raise DataError(f"{path}: has both p_up and p_yes; give the probability once")
    if "p_up" not in frame and "p_yes" not in frame:
        raise DataError(f"{path}: has no p_up (or an event forecaster's p_yes) column "
                        f"(columns: {', '.join(map(str, frame))})")
    frame = frame.rename(columns={"p_yes": "p_up"})
    _filled(frame, path, ["model"] if "model" in frame else [])
    frame = _model_rows(frame, path, model)
    if "task_id" not in frame and "market_id" in frame:
        _filled(frame, path, ["market_id"])
        frame["market_id"] = frame["market_id"].astype(str)
        _unique(frame, "market_id", path)
        return frame
    if "task_id" not in frame:
        missing = [c for c in ("ticker", "session", "horizon") if c not in frame]
        if missing:
            raise DataError(f"{path}: needs a task_id column or ticker, session, horizon "
                            f"(missing: {', '.join(missing)})")
    _filled(frame, path, ["task_id"] if "task_id" in frame else ["ticker", "session", "horizon"])
    if "task_id" not in frame:
        session = pd.to_datetime(frame["session"].astype(str), format="%Y-%m-%d",
                                 errors="coerce")
        bad = frame.index[session.isna().to_numpy()]
        if len(bad):
            raise DataError(f"{path}: row {bad[0] + 1}: session "
                            f"{frame['session'].iloc[bad[0]]!r} is not a date YYYY-MM-DD")
        frame["task_id"] = (frame["ticker"].astype(str) + "|" + session.dt.strftime("%Y-%m-%d")
                            + "|" + frame["horizon"].astype(str))
    _unique(frame, "task_id", path)
    if ("lower" in frame) != ("upper" in frame):
        raise DataError(f"{path}: has {'lower' if 'lower' in frame else 'upper'} but not "
                        f"{'upper' if 'lower' in frame else 'lower'}: give both columns of the "
                        "interval, or neither for a probability-only forecaster")
    return frame


def _unique(frame: pd.DataFrame, key: str, path) -> None:
    """A DataError naming the rows whose key is given twice."""
    dup = frame[key].duplicated(keep=False)
    if dup.any():
        rows = [str(i + 1) for i in frame.index[dup][:5]]
        what = "task" if key == "task_id" else "market"
        raise DataError(f"{path}: rule 'one forecast per {what}' broken in rows "
                        f"{', '.join(rows)}")


def _filled(frame: pd.DataFrame, path, keys: list[str]) -> None:
    """A DataError naming the rows where a key column (what names a row's model or task) is
    empty."""
    for key in keys:
        empty = frame[key].isna() | (frame[key].astype("string").str.strip() == "")
        if empty.any():
            rows = [str(i + 1) for i in frame.index[empty.to_numpy(bool)][:5]]
            raise DataError(f"{path}: rule '{key} is not empty' broken in rows "
                            f"{', '.join(rows)} (a row names its model and task)")


def _model_rows(frame: pd.DataFrame, path, model: str | None) -> pd.DataFrame:
    """The rows of ``model`` (row numbers as in the file)."""
    if "model" not in frame:
        if model is not None:
            raise DataError(f"{path}: has no model column, but the config picks model {model!r}")
        return frame
    names = sorted(frame["model"].astype(str).unique())
    if model is None:
        if len(names) > 1:
            raise DataError(f"{path}: holds rows of several models ({', '.join(names)}); pick "
                            "one with model = \"...\" in this model's config")
        return frame.drop(columns="model")
    if model not in names:
        raise DataError(f"{path}: no rows of model {model!r} (the file holds "
                        f"{', '.join(names)})")
    return frame[frame["model"].astype(str) == model].drop(columns="model")


@register("replay")
class Replay(Forecaster):
    def __init__(self, config, prompt=None) -> None:
        super().__init__(config, prompt)
        table = load_replay(config.path, config.model)
        # what a row names its task by: the task's id, or its market (an event run's)
        self.key = "task_id" if "task_id" in table else "market_id"
        self.table = table.set_index(self.key)
        self.interval = "lower" in self.table

    def _keys(self, tasks: pd.DataFrame) -> pd.Series:
        if self.key not in tasks:
            raise DataError(f"{self.config.path}: its rows name {self.key}s, which this run's "
                            "tasks have not (key its rows by task_id)")
        return tasks[self.key].astype(str)

    def asked(self, tasks: pd.DataFrame) -> np.ndarray:
        asked = super().asked(tasks)
        if self.config.missing == "not_asked":
            asked &= self._keys(tasks).isin(self.table.index).to_numpy(bool)
        return asked

    def notes(self, tasks: pd.DataFrame) -> list[str]:
        outside = self.table.index[~self.table.index.isin(self._keys(tasks))]
        if not len(outside):
            return []
        shown = ", ".join(outside[:3]) + (", ..." if len(outside) > 3 else "")
        return [f"{len(outside)} row(s) of {self.config.path.name} are for no task of this run "
                f"and are not scored ({shown})"]

    def _answer(self, inputs: Inputs) -> tuple[list, dict]:
        answers, details = [], []
        claims = [c for c in CLAIM_FIELDS if c in self.table.columns]
        for tid in self._keys(inputs.tasks):
            if tid not in self.table.index:
                answers.append(ParsedAnswer(False, "missing: no row for this task in the replay "
                                            "file", ""))
                details.append(None)
                continue
            row = self.table.loc[tid]
            claimed = {c: _claim(row[c]) for c in claims if not _blank(row[c])}
            details.append(json.dumps({"claimed": claimed}, sort_keys=True, allow_nan=False)
                           if claimed else None)
            answer = {}
            for field in ANSWER_FIELDS:
                if field in row.index and not _blank(row[field]):
                    answer[field] = _number(row[field]) if field != "rationale" else str(row[field])
                elif field != "rationale" and field in row.index:
                    answer[field] = None
            answers.append(parse_answer(answer, interval=self.interval))
        return answers, ({"detail": details} if claims else {})


def _claim(value):
    """A claimed cell as the report compares it: a number (a flag as 0 or 1), else its
    text."""
    if isinstance(value, bool | np.bool_):
        return int(value)
    number = _number(value.item() if isinstance(value, np.generic) else value)
    return float(number) if _is_number(number) and math.isfinite(number) else str(value)


def _blank(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _number(value):
    """CSV cells arrive as text: a JSON number becomes that number; anything else stays text
    for the schema to refuse (``true`` is no probability, though Python counts it as 1)."""
    if _is_number(value):
        return value
    try:
        number = json.loads(str(value))
    except ValueError:
        return str(value)
    return number if _is_number(number) else str(value)


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
