"""Decision layer, reported apart from forecast scores: a Kelly bettor at even odds.

Betting the Kelly fraction ``2p - 1`` on up (or ``1 - 2p`` on down) at even odds grows wealth
by ``1 + (2p - 1)(2y - 1)`` per bet, so the growth rate is ``mean ln(1 + (2p - 1)(2y - 1))``:
zero for p = 0.5, and very negative for confident misses (p = 0.99 wrong: ln 0.02).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from finbench.lookup import arrow_text
from finbench.scoring import _core


def wealth_path(obs, prob) -> np.ndarray:
    """Log wealth after each bet (bets in the given order), starting from 0 = wealth 1."""
    with np.errstate(divide="ignore"):
        return np.cumsum(_core.kelly(np.asarray(obs, float), np.asarray(prob, float)))


def max_drawdown(log_wealth) -> float:
    """Largest fall from a running peak, as a fraction of the peak wealth (0 to 1)."""
    lw = np.r_[0.0, np.asarray(log_wealth, float)]
    peak = np.maximum.accumulate(lw)
    return float(np.max(1.0 - np.exp(lw - peak)))


def bet_order(t_forecast: pd.Series, task_id: pd.Series) -> np.ndarray:
    """Positions putting bets in forecast-time order, ties by task id (one Arrow sort, no
    Python string comparisons)."""
    table = pa.table({"t": pa.array(t_forecast), "id": arrow_text(task_id)})
    order = pc.sort_indices(table, sort_keys=[("t", "ascending"), ("id", "ascending")])
    return order.to_numpy(zero_copy_only=False)


def decision_table(rows: pd.DataFrame, models: list[str]
                   ) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """Per model: bets, growth rate, final log wealth and maximum drawdown (scored rows only,
    ordered by forecast time then task id), and each model's log-wealth path."""
    out, paths = [], {}
    for model in models:
        part = rows[(rows["model"] == model) & rows["scored"]]
        at = bet_order(part["t_forecast"], part["task_id"])
        lw = wealth_path(part["y"].to_numpy(float)[at], part["p_up"].to_numpy(float)[at])
        paths[model] = lw
        out.append({"model": model, "bets": len(part),
                    "growth_rate": float(lw[-1] / len(part)) if len(part) else np.nan,
                    "final_log_wealth": float(lw[-1]) if len(part) else np.nan,
                    "max_drawdown": max_drawdown(lw) if len(part) else np.nan})
    return pd.DataFrame(out), paths
