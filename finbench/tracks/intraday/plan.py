"""The intraday plan: the tasks of a run and the earlier tasks its baselines learn from
(no market data read), and how they split into calendar months.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pandas as pd

from finbench.core.calendar import previous_sessions
from finbench.core.lookup import groups
from finbench.data.store import Store
from finbench.tracks.intraday.config import BASELINE_KINDS, CLASS_BASELINE_KINDS, RunConfig
from finbench.tracks.intraday.tasks import build_tasks

LOCAL_TZ_DEFAULT = "America/New_York"


@dataclass
class Plan:
    """The tasks of a run, the earlier tasks baselines learn from, and the store."""

    config: RunConfig
    store: Store
    tasks: pd.DataFrame
    excluded: pd.DataFrame
    history_tasks: pd.DataFrame
    first_date: dt.date

    @property
    def all_tasks(self) -> pd.DataFrame:
        return pd.concat([self.history_tasks, self.tasks], ignore_index=True)


def history_start(config: RunConfig) -> dt.date:
    """First session a baseline window or the context lookback may need."""
    need = max(
        [getattr(m, "window", 0) for m in config.models] + [config.context.previous_sessions, 1]
    )
    first = config.tasks.start
    for m in config.models:
        if getattr(m, "train_start", None):
            first = min(first, m.train_start)
    earlier = previous_sessions(config.tasks.calendar, config.tasks.start, need)
    if len(earlier):
        first = min(first, earlier[0].date())
    return first


MID_COLUMNS = ("high", "low")  # what the label pass reads of a bar for mids
DAILY_COLUMNS = ("open", "high", "low", "close", "volume")  # ... and for daily summaries too


def plan_run(config: RunConfig, *, read_ahead: bool = False) -> Plan:
    """Tasks of the evaluation range and of the history before it (no market data read).
    ``read_ahead``: the label pass's reads of the evaluated dates begin now, on a thread of
    their own (:meth:`~finbench.data.store.Store.read_ahead`), while the tasks are planned
    here; the label pass stops them."""
    spec = config.tasks
    store = Store(config.data.store)
    # (the label pass reads date partitions only of a store laid out by date in the tasks' zone)
    if read_ahead and store.partitioned_by_date_in(spec.timezone):
        store.read_ahead([d for d in store.dates("bars") if spec.start <= d <= spec.end],
                         DAILY_COLUMNS if reads_contexts(config) else MID_COLUMNS)
    try:
        taskset = build_tasks(spec)
        first = history_start(config)
        # the history is every task of the sessions before the evaluated ones
        before = spec.start - dt.timedelta(days=1)
        history = (build_tasks(spec, start=first, end=before).tasks if first <= before
                   else taskset.tasks.iloc[:0])
    except BaseException:
        store.stop_reading_ahead()  # no plan, so no label pass to read for
        raise
    return Plan(config, store, taskset.tasks, taskset.excluded, history, first)


def reads_contexts(config: RunConfig) -> bool:
    """Whether a model of the config may read contexts (all but the baselines may)."""
    return any(m.kind not in (*BASELINE_KINDS, *CLASS_BASELINE_KINDS) for m in config.models)


def month_rows(tasks: pd.DataFrame) -> list[np.ndarray]:
    """Row numbers of the tasks of each calendar month (by session), months in order."""
    if tasks.empty:
        return []
    months, code = np.unique(tasks["session"].to_numpy(dtype=object).astype("U7"),
                             return_inverse=True)
    return groups(code, len(months))


def month_ranges(first: dt.date, last: dt.date, months: int = 1) -> list[tuple[dt.date, dt.date]]:
    """Consecutive calendar-month ranges covering ``[first, last]``."""
    out, start = [], first
    while start <= last:
        y, m = start.year, start.month + months
        y, m = y + (m - 1) // 12, (m - 1) % 12 + 1
        stop = min(dt.date(y, m, 1) - dt.timedelta(days=1), last)
        out.append((start, stop))
        start = stop + dt.timedelta(days=1)
    return out


def quarter_ranges(first: dt.date, last: dt.date) -> list[tuple[dt.date, dt.date]]:
    """Consecutive calendar-quarter ranges covering ``[first, last]`` (the first and last
    cut to them)."""
    spans: dict[tuple[int, int], list[dt.date]] = {}
    for start, stop in month_ranges(first, last):
        spans.setdefault((start.year, (start.month - 1) // 3), [start, stop])[1] = stop
    return [(start, stop) for start, stop in spans.values()]


def in_range(tasks: pd.DataFrame, start: dt.date, stop: dt.date) -> pd.DataFrame:
    s = tasks["session"]
    return tasks[(s >= start.isoformat()) & (s <= stop.isoformat())]


def tasks_at(frame: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """``frame``'s rows at ``rows`` (renumbered from 0): a slice, not a copy, when they are
    consecutive (a month of tasks, all still to answer), since every month's inputs are kept
    until the last forecaster has answered it."""
    if len(rows) and rows[-1] - rows[0] + 1 == len(rows) and (np.diff(rows) == 1).all():
        return frame.iloc[rows[0]:rows[-1] + 1].reset_index(drop=True)
    return frame.iloc[rows].reset_index(drop=True)
