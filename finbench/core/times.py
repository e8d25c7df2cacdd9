"""Instants inside FinBench (docs/spec.md §1): UTC always; in vectorised code, int64
nanoseconds since 1970 with one missing value, :data:`NO_TIME`, which has the bits of
pandas' and numpy's NaT, so a missing instant stays missing through every conversion here.

User input is parsed once, at the edge (:mod:`finbench.data.timestamps`); the calendar's
sessions are made instants in :mod:`finbench.core.calendar`. Everything else converts
through the functions below.

>>> ns = to_ns(pd.Series(pd.to_datetime(["2025-01-15 14:30", None], utc=True)))
>>> ns[0], ns[1] == NO_TIME
(np.int64(1736951400000000000), np.True_)
>>> [str(t) for t in from_ns(ns)]
['2025-01-15 14:30:00+00:00', 'NaT']
>>> int(local_midnights_ns(pd.Series(["2025-01-15"]), "America/New_York")[0]) == int(
...     pd.Timestamp("2025-01-15 05:00", tz="UTC").value)
True
"""

from __future__ import annotations

import numpy as np
import pandas as pd

NS = 1_000_000_000  # nanoseconds in a second
NO_TIME = np.iinfo(np.int64).min  # a missing instant (the bits of NaT)


def to_ns(values) -> np.ndarray:
    """UTC instants (Series, Index, array of datetime64 or Timestamps) as int64 nanoseconds;
    NaT becomes :data:`NO_TIME`. Times with a zone are converted to UTC first."""
    if isinstance(values, pd.Series | pd.Index):
        if isinstance(values.dtype, pd.DatetimeTZDtype):
            values = values.dt.tz_convert("UTC") if isinstance(values, pd.Series) else (
                values.tz_convert("UTC")
            )
            values = values.dt.tz_localize(None) if isinstance(values, pd.Series) else (
                values.tz_localize(None)
            )
        return values.to_numpy(dtype="datetime64[ns]").astype("int64")
    return np.asarray(values, dtype="datetime64[ns]").astype("int64")


def from_ns(ns: np.ndarray) -> pd.Series:
    """int64 nanoseconds as a pandas Series of UTC timestamps (:data:`NO_TIME` is NaT)."""
    return pd.Series(np.asarray(ns, np.int64).view("datetime64[ns]")).dt.tz_localize("UTC")


def local_midnights_ns(sessions: pd.Series, timezone: str) -> np.ndarray:
    """The local midnight of each session date (``YYYY-MM-DD`` text) in ``timezone``, as UTC
    nanoseconds."""
    return to_ns(pd.to_datetime(sessions).dt.tz_localize(timezone).dt.tz_convert("UTC"))


def known(ns: np.ndarray) -> np.ndarray:
    """Where an int64-nanosecond array holds an instant (not :data:`NO_TIME`)."""
    return np.asarray(ns) != NO_TIME
