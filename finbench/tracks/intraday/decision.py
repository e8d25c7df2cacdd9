"""Decision layer, reported apart from forecast scores: a Kelly bettor at even odds who could
exist.

One bet at even odds, staking the Kelly fraction ``f = 2p - 1`` of wealth on up (a negative
``f`` stakes ``|f|`` on down), multiplies wealth by ``1 + f(2y - 1)``.

Bets placed at the same time share one wealth. Every bet of a session resolves at the
session's target (15:55), after all of that session's horizons, so none of its outcomes is
known when the next one is placed: a bettor sizes all of a session's bets on the wealth known
before the session. A model asked ``K`` tasks in a session stakes ``f_i / K`` of that wealth on
each (the ``K`` stakes together never exceed the wealth); a task it gave no scored answer for
(an invalid answer, an unscorable label) is a stake returned. Wealth grows by

    ln(1 + (1/K) * sum_i f_i (2 y_i - 1))

per session; the growth rate is its mean over sessions. ``K`` is known in advance (the run's
task list), so the rule uses nothing a bettor would not have. Sessions are taken in date order
and the bets of a session summed in task-id order, so the result does not depend on the order
of the rows. A session whose stakes are all lost (``K`` certain answers, ``p = 0`` or ``1``, all
wrong) ruins the bettor: that is reported as ruin, with its session, never averaged as
``-inf``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from finbench.core.lookup import arrow_text
from finbench.scoring import kernels


def wealth_path(obs, prob) -> np.ndarray:
    """Log wealth after each of single bets placed one after the other (each resolved before
    the next), starting from 0 = wealth 1."""
    with np.errstate(divide="ignore"):
        return np.cumsum(kernels.kelly(np.asarray(obs, float), np.asarray(prob, float)))


def max_drawdown(log_wealth) -> float:
    """Largest fall from a running peak, as a fraction of the peak wealth (0 to 1)."""
    lw = np.r_[0.0, np.asarray(log_wealth, float)]
    peak = np.maximum.accumulate(lw)
    with np.errstate(invalid="ignore"):
        return float(np.max(np.where(np.isneginf(lw), 1.0, 1.0 - np.exp(lw - peak))))


def session_growth(session: pd.Series, task_id: pd.Series, obs, prob, scored
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(sessions in date order, log growth of each) for one model's rows: every row a task
    it was asked, ``scored`` where its answer and label count (see the module docstring)."""
    order = pc.sort_indices(pa.table({"s": arrow_text(session), "t": arrow_text(task_id)}),
                            sort_keys=[("s", "ascending"), ("t", "ascending")])
    at = order.to_numpy(zero_copy_only=False)
    # sessions as codes in date order (ISO dates sort as text), no text made per row
    codes, sessions = pd.factorize(pd.Series(session), sort=True)
    code, sessions = codes[at], np.asarray(sessions, dtype=str)
    y, p = np.asarray(obs, float)[at], np.asarray(prob, float)[at]
    bet = np.where(np.asarray(scored, bool)[at], (2 * p - 1) * (2 * y - 1), 0.0)
    asked = np.bincount(code, minlength=len(sessions))
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = 1.0 + np.bincount(code, weights=bet, minlength=len(sessions)) / asked
        return sessions, np.log(np.maximum(factor, 0.0))


def decision_table(rows: pd.DataFrame, models: list[str]
                   ) -> tuple[pd.DataFrame, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """Per model: bets (scored rows), sessions, growth rate per session, final log wealth,
    maximum drawdown and the session of ruin (empty: none); and each model's path (session
    dates, log wealth after each session)."""
    out, paths = [], {}
    y, p = rows["y"].astype("float64").to_numpy(), rows["p_up"].to_numpy(float)
    every_scored = rows["scored"].to_numpy(bool)
    for model in models:  # one model's columns at a time, taken by position
        mine = np.flatnonzero((rows["model"] == model).to_numpy(bool))
        scored = every_scored[mine]
        sessions, growth = session_growth(rows["session"].iloc[mine],
                                          rows["task_id"].iloc[mine], y[mine], p[mine], scored)
        lw = np.cumsum(growth)
        ruined = np.flatnonzero(np.isneginf(growth))
        paths[model] = (pd.to_datetime(sessions).to_numpy(), lw)
        some = len(sessions) > 0 and scored.any()
        out.append({"model": model, "bets": int(scored.sum()), "sessions": len(sessions),
                    "growth_rate": float(lw[-1] / len(sessions)) if some and not len(ruined)
                    else np.nan,
                    "final_log_wealth": float(lw[-1]) if some and not len(ruined) else np.nan,
                    "max_drawdown": max_drawdown(lw) if some else np.nan,
                    "ruin": str(sessions[ruined[0]]) if len(ruined) else ""})
    return pd.DataFrame(out), paths
