"""The slices an intraday config declares (``[[slices]]``, :mod:`finbench.core.slices`),
each task's value in each: ``slices.parquet`` of the run (one row per slice and task), written
with the labels and derived again by the audit.

The volatility regime is time-valid: a task's realised volatility and its thresholds come
from the returns of its series (ticker, horizon) known strictly before its forecast time, the
label history the rolling baselines read (the run reads it back far enough), and each row
records when the latest of them became known (``rv_known_at``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from finbench.core.slices import (
    EVENT,
    NO_EVENT,
    REGIMES,
    TOO_LITTLE,
    calendar_hits,
    group_values,
)
from finbench.core.times import NO_TIME, from_ns, to_ns
from finbench.data.slice_files import read_slice_files, slice_day
from finbench.tracks.intraday.history import History

SLICE_COLUMNS = ["task_id", "slice", "value", "announcements", "rv", "rv_low", "rv_high",
                 "rv_count", "rv_known_at"]
CELLS = 1 << 22  # earlier values held at a time while thresholds are found (32 MiB)


def volatility_history(config) -> int:
    """The most labels of a series any declared volatility regime reads (0 without one)."""
    return max((s.history for s in config.slices if s.kind == "volatility"), default=0)


def slice_files(config) -> dict:
    """The declared slices' files read and checked (a calendar's key column ``ticker``, a
    grouping's ``ticker``)."""
    return read_slice_files(config.slices, calendar_key="ticker", group_keys=("ticker",))


def task_slices(config, tasks: pd.DataFrame, history: History) -> pd.DataFrame:
    """Every declared slice's value for every task, long: the slices in the config's order,
    the tasks in theirs (:data:`SLICE_COLUMNS`)."""
    files = slice_files(config)
    parts = []
    for s in config.slices:
        n = len(tasks)
        cols = {"announcements": pd.array([None] * n, "Int64"),
                "rv": np.full(n, np.nan), "rv_low": np.full(n, np.nan),
                "rv_high": np.full(n, np.nan), "rv_count": pd.array([None] * n, "Int64"),
                "rv_known_at": from_ns(np.full(n, NO_TIME, np.int64))}
        if s.kind == "calendar":
            hits = calendar_of(s, files[s.name], tasks, config.tasks.timezone)
            value = np.where(hits > 0, EVENT, NO_EVENT).astype(object)
            cols["announcements"] = pd.array(hits, "Int64")
        elif s.kind == "groups":
            mapping = s.groups_by_unit() if s.groups is not None else files[s.name][1]
            value = group_values(tasks["ticker"].to_numpy(object), mapping)
        else:
            found = volatility_regimes(history, tasks, lookback=s.lookback, window=s.window,
                                       min_count=s.min_count)
            value = found.pop("value")
            cols.update(rv=found["rv"], rv_low=found["low"], rv_high=found["high"],
                        rv_count=pd.array(found["count"], "Int64"),
                        rv_known_at=from_ns(found["known_ns"]))
        parts.append(pd.DataFrame({"task_id": tasks["task_id"].to_numpy(object),
                                   "slice": s.name, "value": value, **cols}))
    if not parts:
        return pd.DataFrame(columns=SLICE_COLUMNS)
    return pd.concat(parts, ignore_index=True)[SLICE_COLUMNS]


def calendar_of(s, cal, tasks: pd.DataFrame, timezone: str) -> np.ndarray:
    """How many of the calendar ``cal``'s announcements each task matches."""
    now = to_ns(tasks["t_forecast"])
    if s.match == "day":  # the session's date, and each announcement's in the exchange's zone
        day = pd.to_datetime(tasks["session"].astype(str)).to_numpy("datetime64[D]").astype(
            np.int64)
        return calendar_hits(day, None, tasks["ticker"].to_numpy(object),
                             slice_day(cal.times_ns, timezone), cal.keys, match="day")
    return calendar_hits(now, to_ns(tasks["t_target"]), tasks["ticker"].to_numpy(object),
                         cal.times_ns, cal.keys, match=s.match, minutes=s.minutes)


def volatility_regimes(history: History, tasks: pd.DataFrame, *, lookback: int, window: int,
                       min_count: int) -> dict[str, np.ndarray]:
    """Per task: ``rv``, the root mean square of the last ``lookback`` returns of its series
    known before its forecast time; ``low`` and ``high``, the 1/3 and 2/3 quantiles (numpy's
    linear rule) of the ``rv`` of each of the up to ``window`` positions before it in the
    series (each the root mean square of the ``lookback`` returns before that position, all
    known before the task), ``count`` of them; ``value`` low (``rv <= low``), high (``rv >
    high``) or mid, :data:`TOO_LITTLE` without ``lookback`` returns or with fewer than
    ``min_count`` earlier values; ``known_ns`` when the latest return read became known."""
    first, end = history.locate(tasks)
    first, end = np.asarray(first, np.int64), np.asarray(end, np.int64)
    n = len(tasks)
    # each window's sum of squares added over the window itself, in one order for every
    # window (never a difference of running sums, whose rounding would depend on how far
    # back the history was read): the same bits wherever the window lies
    squares = history.r * history.r
    windows = max(len(squares) - lookback + 1, 0)
    sums = np.zeros(windows)
    for j in range(lookback):
        sums += squares[j:j + windows]
    sums = np.concatenate([np.full(lookback, np.nan), sums])  # at p: the returns [p - k, p)

    def rv_at(p: np.ndarray) -> np.ndarray:  # the lookback returns before position p
        return np.sqrt(sums[p] / lookback)

    has_rv = end - first >= lookback
    rv = np.where(has_rv, rv_at(end), np.nan)
    # the earlier positions q in [max(first + lookback, end - window), end)
    start = np.maximum(first + lookback, end - window)
    count = np.where(has_rv, np.maximum(end - start, 0), 0)
    low, high = np.full(n, np.nan), np.full(n, np.nan)
    ready = np.flatnonzero(has_rv & (count >= min_count))
    offsets = np.arange(window)
    every = rv_at(np.arange(len(history.r) + 1))
    chunk = max(1, CELLS // window)
    for lo in range(0, len(ready), chunk):
        rows = ready[lo:lo + chunk]
        q = end[rows, None] - window + offsets[None, :]
        inside = q >= start[rows, None]
        values = np.sort(np.where(inside, every[np.clip(q, 0, len(every) - 1)], np.nan),
                         axis=1)  # each row's values first, its NaN (outside) last
        low[rows] = row_quantile(values, count[rows], 1 / 3)
        high[rows] = row_quantile(values, count[rows], 2 / 3)
    value = np.full(n, TOO_LITTLE, dtype=object)
    value[ready] = np.where(rv[ready] <= low[ready], REGIMES[0],
                            np.where(rv[ready] > high[ready], REGIMES[2], REGIMES[1]))
    known = np.full(n, NO_TIME, np.int64)
    read = np.flatnonzero(has_rv)
    known[read] = history.known[end[read] - 1]
    return {"value": value, "rv": rv, "low": low, "high": high, "count": count,
            "known_ns": known}


def row_quantile(ordered: np.ndarray, counts: np.ndarray, p: float) -> np.ndarray:
    """The ``p`` quantile of each row's first ``counts`` values (sorted ascending), by
    numpy's default rule (linear between the order statistics at ``(n - 1) p``, interpolated
    as ``numpy.quantile`` does): ``numpy.nanquantile`` of rows sorted, at a sort's cost."""
    h = (counts - 1) * p
    below = np.floor(h).astype(np.int64)
    above = np.minimum(below + 1, counts - 1)
    rows = np.arange(len(ordered))
    a, b = ordered[rows, below], ordered[rows, above]
    t = h - below
    diff = b - a
    return np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)
