"""Tasks: (ticker, session, horizon) with UTC forecast and target instants (docs/spec.md §3)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from finbench.core.calendar import session_grid
from finbench.tracks.intraday.config import TasksConfig

TIME_COLUMNS = ("t_forecast", "t_target", "session_open", "session_close")
UTC_NS = "datetime64[ns, UTC]"


def task_id(ticker: str, session: str, horizon: str) -> str:
    """The stable text id ``{ticker}|{YYYY-MM-DD}|{horizon}``."""
    return f"{ticker}|{session}|{horizon}"


@dataclass(frozen=True)
class TaskSet:
    """The tasks of a run and the (ticker, session, horizon) triples left out, by reason."""

    tasks: pd.DataFrame
    excluded: pd.DataFrame

    def excluded_counts(self) -> dict[str, int]:
        return self.excluded["reason"].value_counts().sort_index().to_dict()


def build_tasks(spec: TasksConfig, *, start=None, end=None) -> TaskSet:
    """Expand tickers × sessions in ``[start, end]`` × horizons into tasks.

    ``start``/``end`` default to the spec's; the baselines call this with an earlier start to
    get the history their windows need. Columns: ``task_id, ticker, session`` (``YYYY-MM-DD``),
    ``horizon, t_forecast, t_target, session_open, session_close``; sorted by session, horizon
    order as configured, then ticker.
    """
    grid = session_grid(
        start or spec.start,
        end or spec.end,
        horizons=spec.horizons,
        target=spec.target,
        timezone=spec.timezone,
        calendar=spec.calendar,
        early_close=spec.early_close,
    ).table
    columns = ["task_id", "ticker", "session", "horizon", "t_forecast", "t_target",
               "session_open", "session_close"]
    if grid.empty:  # typed as tasks are (text; UTC instants), so that frames joined keep types
        empty = pd.DataFrame({c: pd.Series(dtype=UTC_NS if c in TIME_COLUMNS else "str")
                              for c in columns})
        return TaskSet(empty, pd.DataFrame({c: pd.Series(dtype="str")
                                            for c in ("task_id", "reason")}))
    grid = grid.rename(columns={"open": "session_open", "close": "session_close"})
    grid["session"] = grid["session"].dt.strftime("%Y-%m-%d")
    asked = (grid["excluded"] == "").to_numpy(bool)
    tasks = _with_tickers(grid[asked], spec.tickers)[columns]
    excluded = _with_tickers(grid[~asked], spec.tickers)[["task_id", "excluded"]]
    return TaskSet(tasks, excluded.rename(columns={"excluded": "reason"}))


def _with_tickers(grid: pd.DataFrame, tickers: list[str]) -> pd.DataFrame:
    """Each row of ``grid`` (a session and horizon) once per ticker, tickers in their order,
    with its ``task_id``: one take of the grid, the ids joined by Arrow in one pass."""
    rows = grid.iloc[np.repeat(np.arange(len(grid)), len(tickers))].reset_index(drop=True)
    text = pd.Series(tickers).dtype
    rows["ticker"] = pd.array(np.tile(np.asarray(tickers, dtype=object), len(grid)), dtype=text)
    text_type = pa.large_string()
    ids = pc.binary_join_element_wise(*(pa.array(rows[c]).cast(text_type)
                                        for c in ("ticker", "session", "horizon")),
                                      pa.scalar("|", text_type))
    rows["task_id"] = pd.array(ids, dtype=text)
    return rows
