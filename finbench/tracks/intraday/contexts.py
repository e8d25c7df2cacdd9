"""The context pass (pass 2 of a run): for the tasks still to forecast, a calendar month at a
time, read the month's bars and headlines and build the gated contexts (daily summaries come
from the label pass).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import numpy as np
import pandas as pd

from finbench.data.bars import BarArrays
from finbench.tracks.intraday.gate import ContextIndex
from finbench.tracks.intraday.label_pass import read_bars
from finbench.tracks.intraday.plan import Plan, in_range, month_ranges


def context_chunks(plan: Plan, tasks: pd.DataFrame, daily: pd.DataFrame
                   ) -> Iterator[tuple[pd.DataFrame, ContextIndex, BarArrays]]:
    """Pass 2: (tasks of a month, their gated contexts, the month's bars), in task order."""
    if tasks.empty:
        return
    ctx, spec = plan.config.context, plan.config.tasks
    first = dt.date.fromisoformat(tasks["session"].min())
    last = dt.date.fromisoformat(tasks["session"].max())
    lookback = dt.timedelta(hours=ctx.headline_hours + 24)
    for start, stop in month_ranges(first, last):
        chunk = in_range(tasks, start, stop).reset_index(drop=True)
        if chunk.empty:
            continue
        bars = read_bars(plan, start, stop)
        news = plan.store.read_headlines(start=start - lookback, end=stop)
        news = news[about_tickers(news["tickers"], spec.tickers)]
        index = ContextIndex(chunk, bars, news.reset_index(drop=True),
                             previous_sessions=ctx.previous_sessions,
                             headline_hours=ctx.headline_hours, max_headlines=ctx.max_headlines,
                             calendar=spec.calendar, timezone=spec.timezone, daily=daily)
        yield chunk, index, bars


def about_tickers(tickers: pd.Series, wanted: list[str]) -> np.ndarray:
    """A boolean mask of the headlines naming one of ``wanted``: an array, so that no
    headline at all selects no row (an empty object Series as a key selects no column)."""
    wanted = set(wanted)
    return np.fromiter((not wanted.isdisjoint(ts) for ts in tickers), dtype=bool,
                       count=len(tickers))
