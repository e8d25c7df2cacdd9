"""From a config to tasks, labels and gated contexts, reading the store once."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pandas as pd

from finbench.bars import BarArrays
from finbench.calendar import previous_sessions
from finbench.config import RunConfig
from finbench.data.store import Store
from finbench.gate import ContextIndex
from finbench.labels import compute_labels, status_counts
from finbench.tasks import build_tasks


@dataclass
class Prepared:
    """Tasks, labels and data of a run; ``history_*`` hold earlier sessions for baselines."""

    config: RunConfig
    store: Store
    tasks: pd.DataFrame
    excluded: pd.DataFrame
    labels: pd.DataFrame
    bars: BarArrays
    headlines: pd.DataFrame
    history_tasks: pd.DataFrame
    history_labels: pd.DataFrame

    def summary(self) -> dict:
        return {
            "tasks": len(self.tasks),
            "excluded": self.excluded["reason"].value_counts().sort_index().to_dict(),
            "labels": status_counts(self.labels),
            "history_tasks": len(self.history_tasks),
            "store_snapshot_sha256": self.store.snapshot_sha256,
            "synthetic": self.store.synthetic,
        }

    def contexts(self, tasks: pd.DataFrame | None = None) -> ContextIndex:
        ctx = self.config.context
        spec = self.config.tasks
        return ContextIndex(
            self.tasks if tasks is None else tasks, self.bars, self.headlines,
            previous_sessions=ctx.previous_sessions, headline_hours=ctx.headline_hours,
            max_headlines=ctx.max_headlines, calendar=spec.calendar, timezone=spec.timezone,
        )


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


def prepare_tasks_and_labels(config: RunConfig) -> Prepared:
    """Build tasks for the evaluation range and the history before it, with labels."""
    spec = config.tasks
    store = Store(config.data.store)
    taskset = build_tasks(spec)
    first = history_start(config)
    history = build_tasks(spec, start=first, end=spec.end).tasks
    history = history[~history["task_id"].isin(taskset.tasks["task_id"])].reset_index(drop=True)
    bars = store.read_bar_arrays(tickers=spec.tickers, start=first - dt.timedelta(days=1),
                                 end=spec.end)
    lookback = dt.timedelta(hours=config.context.headline_hours + 24)
    headlines = store.read_headlines(start=first - lookback, end=spec.end)
    headlines = headlines[headlines["tickers"].map(lambda ts: any(t in spec.tickers for t in ts))]
    window = spec.ref_window_seconds
    return Prepared(
        config=config,
        store=store,
        tasks=taskset.tasks,
        excluded=taskset.excluded,
        labels=compute_labels(taskset.tasks, bars, window_seconds=window),
        bars=bars,
        headlines=headlines.reset_index(drop=True),
        history_tasks=history,
        history_labels=compute_labels(history, bars, window_seconds=window),
    )
