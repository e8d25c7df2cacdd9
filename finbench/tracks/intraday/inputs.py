"""What forecasters are given, built from a run's plan: the same for a run and its audit."""

from __future__ import annotations

import numpy as np
import pandas as pd

from finbench.data.bars import BarArrays
from finbench.tracks.base import Inputs
from finbench.tracks.intraday.gate import ContextIndex
from finbench.tracks.intraday.label_pass import Resolved
from finbench.tracks.intraday.plan import Plan, tasks_at


def plain_inputs(plan: Plan, resolved: Resolved, rows: np.ndarray) -> Inputs:
    """What forecasters that read no context (baselines) are given for the tasks at ``rows``
    of the plan: the tasks, the label history and where each task lies in it."""
    return Inputs(tasks=tasks_at(plan.tasks, rows), history=resolved.history,
                  history_rows=resolved.history_rows(rows), sessions=resolved.sessions,
                  known=resolved.known)


def context_inputs(plan: Plan, resolved: Resolved, chunk: pd.DataFrame, contexts: ContextIndex,
                   bars: BarArrays, rows: np.ndarray) -> Inputs:
    """What forecasters that read contexts are given for the tasks at ``rows`` of a month's
    chunk (:func:`context_chunks`)."""
    return Inputs(tasks=chunk.iloc[rows].reset_index(drop=True), contexts=contexts.take(rows),
                  history=resolved.history, bars=bars, sessions=resolved.sessions,
                  known=resolved.known)
