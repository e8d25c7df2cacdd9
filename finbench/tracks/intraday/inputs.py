"""What forecasters are given, built from a run's plan: the same for a run and its audit."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from finbench.tracks.base import Inputs
from finbench.tracks.intraday.gate import ContextIndex
from finbench.tracks.intraday.history import History
from finbench.tracks.intraday.label_pass import Resolved
from finbench.tracks.intraday.plan import Plan, tasks_at


@dataclass
class IntradayInputs(Inputs):
    """:class:`~finbench.tracks.base.Inputs` with what the intraday track's baselines read
    beside the label history: where each task lies in it (``history_rows``, when the caller
    knows), the exchange's sessions over it (days since 1970, sorted: windows count the
    sessions they skip) and the history indexed for look-ups (``known``, built once per run;
    None: a baseline indexes ``history`` itself)."""

    history_rows: np.ndarray | None = None
    sessions: np.ndarray | None = None
    known: History | None = None


def plain_inputs(plan: Plan, resolved: Resolved, rows: np.ndarray) -> IntradayInputs:
    """What forecasters that read no context (baselines) are given for the tasks at ``rows``
    of the plan: the tasks, the label history and where each task lies in it."""
    return IntradayInputs(tasks=tasks_at(plan.tasks, rows), history=resolved.history,
                  history_rows=resolved.history_rows(rows), sessions=resolved.sessions,
                  known=resolved.known)


def context_inputs(plan: Plan, resolved: Resolved, chunk: pd.DataFrame, contexts: ContextIndex,
                   rows: np.ndarray) -> IntradayInputs:
    """What forecasters that read contexts are given for the tasks at ``rows`` of a month's
    chunk (:func:`context_chunks`)."""
    return IntradayInputs(tasks=chunk.iloc[rows].reset_index(drop=True),
                          contexts=contexts.take(rows), history=resolved.history,
                          sessions=resolved.sessions, known=resolved.known)
