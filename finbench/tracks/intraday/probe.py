"""The intraday track's recall probe (:mod:`finbench.forecasters.probe`): whether the task's
mid price rose from its forecast time to its target on its session, asked of a past day by
its ticker, company names and date."""

from __future__ import annotations

import datetime as dt

import pandas as pd


def probe_questions(config, tasks: pd.DataFrame) -> list[str]:
    """Each task's question: its session (weekday and date), ticker and company names (from
    ``context.company_names``), forecast and target clock times in the run's zone.

    >>> from types import SimpleNamespace as NS
    >>> c = NS(tasks=NS(horizons={"MORNING": "09:30"}, target="15:55",
    ...                 timezone="America/New_York"),
    ...        context=NS(company_names={"AAPL": ["Apple"]}))
    >>> print(probe_questions(c, pd.DataFrame({"ticker": ["AAPL"], "session": ["2025-01-15"],
    ...                                        "horizon": ["MORNING"]}))[0])
    ... # doctest: +NORMALIZE_WHITESPACE
    On Wednesday 2025-01-15, a past trading day: was the mid price of AAPL (Apple) higher at
    15:55 than at 09:30 (America/New_York time)?
    """
    spec, names = config.tasks, config.context.company_names
    out = []
    for ticker, session, horizon in zip(tasks["ticker"], tasks["session"].astype(str),
                                        tasks["horizon"], strict=True):
        day = dt.date.fromisoformat(session)
        company = f" ({', '.join(names[ticker])})" if names.get(ticker) else ""
        out.append(f"On {day:%A} {session}, a past trading day: was the mid price of "
                   f"{ticker}{company} higher at {spec.target} than at "
                   f"{spec.horizons[horizon]} ({spec.timezone} time)?")
    return out
