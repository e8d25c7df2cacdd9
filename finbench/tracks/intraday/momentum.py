"""Momentum features: the sign of the mid log return over the last minutes of a session's
gated bars, and when its later bar became available.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from finbench.core.times import NO_TIME, NS, local_midnights_ns, to_ns
from finbench.data.bars import BarArrays
from finbench.tracks.intraday.plan import LOCAL_TZ_DEFAULT


def momentum_sign(bars: BarArrays, tasks: pd.DataFrame, minutes: int, *,
                  timezone: str = LOCAL_TZ_DEFAULT, with_time: bool = False):
    """Sign (−1, 0, +1) of the log mid return over the last ``minutes`` of the session's gated
    bars; NaN when either end has no bar of the session's local day available by then.
    ``with_time`` also returns when the later bar became available (ns; NO_TIME without a sign):
    the latest input a momentum forecast reads."""
    sign, seen = momentum_arrays(bars, tasks["ticker"].to_numpy(dtype=object),
                                 to_ns(tasks["t_forecast"]), day_starts(tasks, timezone),
                                 minutes)
    return (sign, seen) if with_time else sign


def day_starts(tasks: pd.DataFrame, timezone: str) -> np.ndarray:
    """Local midnight (UTC ns) of each task's session."""
    return local_midnights_ns(tasks["session"], timezone)


def momentum_arrays(bars: BarArrays, tickers: np.ndarray, t: np.ndarray, day_start: np.ndarray,
                    minutes: int, *, slices: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`momentum_sign` on arrays: (sign, availability of the later bar or NO_TIME).
    ``slices``: ``bars.slices_of(tickers)``, when known."""
    first = day_start + bars.bar_ns
    now = bars.last_available(tickers, t, not_before=first, slices=slices)
    then = bars.last_available(tickers, t - minutes * 60 * NS, not_before=first, slices=slices)
    ok = (now >= 0) & (then >= 0)
    if not len(bars.avail):
        return np.full(len(t), np.nan), np.full(len(t), NO_TIME, np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        ret = np.log(bars.mid_at(now) / bars.mid_at(then))
    return np.where(ok, np.sign(ret), np.nan), np.where(ok, bars.avail[np.maximum(now, 0)], NO_TIME)
