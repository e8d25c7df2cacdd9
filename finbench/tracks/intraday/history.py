"""The label history of the intraday track: resolved labels laid out for baselines.

Every statistic a baseline needs (the last ``window`` resolved labels of a task's ticker and
horizon known before its ``t_forecast``, their rate, quantiles and momentum counts, the
sessions the window spans and what it skipped) is a difference of cumulative sums or a window
of rows, found with one ``searchsorted`` for all tasks. The line naming a baseline's input
(its receipt) is built here too, so the audit re-derives it from the store.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from numpy.lib.stride_tricks import sliding_window_view

from finbench.core.digests import sha256_hex
from finbench.core.lookup import arrow_text, encoded, positions
from finbench.core.times import NO_TIME, to_ns

DEFAULT_WINDOW = 60
DEFAULT_MIN_COUNT = 20
QUANTILES = (0.1, 0.9)


class History:
    """Resolved labels laid out flat, by series (ticker, horizon) and then by the time each
    became known, so every baseline statistic is a difference of cumulative sums (or a
    window of rows) looked up with one ``searchsorted`` for all tasks.

    Every row (any status) is also laid out by series and session day, so that what a window
    skips can be counted (:meth:`spans`); ``sessions``, the exchange's sessions as days since
    1970 (sorted), lets it count the sessions a series was not asked (early closes)."""

    def __init__(self, history: pd.DataFrame, sessions: np.ndarray | None = None) -> None:
        tickers = arrow_text(history["ticker"]).dictionary_encode()
        horizons = arrow_text(history["horizon"]).dictionary_encode()
        self._tickers, self._horizons = tickers.dictionary, horizons.dictionary
        every = (tickers.indices.to_numpy(zero_copy_only=False).astype(np.int64)
                 * len(self._horizons)
                 + horizons.indices.to_numpy(zero_copy_only=False))
        day = session_days(history["session"])
        scorable = (history["status"] == "ok").to_numpy(bool)
        ok = history if scorable.all() else history[scorable]  # no copy when every row is ok
        known = to_ns(ok["label_known_at"])
        series = every[scorable]
        order = np.lexsort((known, series))  # stable: equal times keep their table order
        self._ok, self._order = ok, order
        self.series, self.known = series[order], known[order]
        self.day = day[scorable][order]
        self.y = ok["y"].to_numpy(dtype=float, na_value=np.nan)[order]
        self.r = ok["r"].to_numpy(float)[order]
        n_series = len(self._tickers) * len(self._horizons)
        self.start = np.searchsorted(self.series, np.arange(n_series + 1))
        # search keys: series number, then the rank of the time among the distinct times
        self._times = np.unique(self.known)
        self._shift = len(self._times).bit_length()
        if self._shift + n_series.bit_length() > 62:
            raise ValueError(f"{n_series} series x {len(self._times)} label times do not "
                             "fit one 63-bit search key")
        self._keys = (self.series << self._shift) + np.searchsorted(self._times, self.known)
        # every row by (series, session day), with the running count of unscorable ones
        self._day_keys = np.sort(_day_key(every, day))
        unscorable = np.sort(_day_key(every[~scorable], day[~scorable]))
        self._unscorable_keys = unscorable
        self.sessions = None if sessions is None else np.asarray(sessions, np.int64)
        self._memo: dict = {}

    def column(self, name: str) -> np.ndarray:
        """A column of the resolved labels, in this layout's order."""
        if ("column", name) not in self._memo:
            self._memo[("column", name)] = self._ok[name].to_numpy()[self._order]
        return self._memo[("column", name)]

    def text_codes(self, name: str) -> tuple[np.ndarray, pa.Array]:
        """A text column of the resolved labels as (a code per row in this layout's order,
        the distinct texts the codes name, as Arrow text): a column of few distinct values
        (sessions) without a text per row."""
        if ("codes", name) not in self._memo:
            names, codes = encoded(self._ok[name])
            self._memo[("codes", name)] = (codes[self._order].astype(np.int32),
                                           pa.array(names.tolist(), pa.string()))
        return self._memo[("codes", name)]

    def frame(self) -> pd.DataFrame:
        """The resolved labels in this layout's order, with ``known_ns``."""
        return self._ok.iloc[self._order].assign(known_ns=self.known)

    def locate(self, tasks: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Per task: (first row of its series, end of the labels known strictly before its
        ``t_forecast``); rows ``[first, end)`` are what it may use (both 0 without a series).
        Remembered for the last tasks frame asked about (every baseline asks about the same)."""
        return self._located(tasks)[:2]

    def _located(self, tasks: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`locate` and each task's series number (-1 without one)."""
        last = self._memo.get("locate")
        if last is not None and last[0] is tasks:
            return last[1]
        t = positions(tasks["ticker"], self._tickers)
        h = positions(tasks["horizon"], self._horizons)
        has = (t >= 0) & (h >= 0)
        series = np.where(has, t * len(self._horizons) + h, 0)
        before = np.searchsorted(self._times, to_ns(tasks["t_forecast"]), side="left")
        end = np.searchsorted(self._keys, (series << self._shift) + before, side="left")
        first = np.where(has, self.start[series], 0)
        out = (first, np.where(has, end, 0), np.where(has, series, -1))
        self._memo["locate"] = (tasks, out)
        return out

    def spans(self, tasks: pd.DataFrame, window: int) -> dict[str, np.ndarray]:
        """What each task's window (its last ``window`` resolved labels) covers: ``first`` and
        ``last``, the rows (in this layout) of the oldest and newest label used, -1 when none;
        and, over the sessions from the oldest label used up to the task's own (excluded),
        the labels of its series that were skipped: ``unscorable`` (a task without a
        reference or target price), ``early_close`` (a session of the exchange on which the
        series was not asked; counted only when the history knows the sessions),
        ``not_known`` (labels not yet known at ``t_forecast``)."""
        lo, end = window_rows(self, tasks, window)
        series = self._located(tasks)[2]
        used = end - lo
        has = used > 0
        first_day = np.where(has, self.day[np.minimum(lo, max(len(self.day) - 1, 0))]
                             if len(self.day) else 0, 0)
        task_day = session_days(tasks["session"])
        since, until = _day_key(series, first_day), _day_key(series, task_day)
        rows = _between(self._day_keys, since, until)
        unscorable = _between(self._unscorable_keys, since, until)
        sessions = rows if self.sessions is None else (
            np.searchsorted(self.sessions, task_day) - np.searchsorted(self.sessions, first_day))
        zero = np.zeros(len(tasks), np.int64)
        return {"first": np.where(has, lo, -1), "last": np.where(has, end - 1, -1),
                "unscorable": np.where(has, unscorable, zero),
                "early_close": np.where(has, sessions - rows, zero),
                "not_known": np.where(has, rows - unscorable - used, zero)}

    def cumulative(self, name: str, values) -> np.ndarray:
        """``r_[0, cumsum(values)]``, remembered under ``name`` (``values``: an array, or what
        makes it when it is first asked for)."""
        if ("cum", name) not in self._memo:
            values = values() if callable(values) else values
            self._memo[("cum", name)] = np.r_[0.0, np.cumsum(values, dtype=float)]
        return self._memo[("cum", name)]

    def quantiles(self, window: int) -> tuple[np.ndarray, np.ndarray]:
        """Per row j: the 10% and 90% quantiles (linear interpolation, as pandas' rolling
        quantile) of the returns of rows ``[max(first, j - window + 1), j]`` of its series."""
        if ("q", window) not in self._memo:
            self._memo[("q", window)] = _window_quantiles(self.r, self.start[self.series],
                                                          window)
        return self._memo[("q", window)]


def session_days(sessions) -> np.ndarray:
    """Session dates (``YYYY-MM-DD`` text) as days since 1970 (int64)."""
    days = arrow_text(sessions).cast(pa.date32())
    return days.to_numpy(zero_copy_only=False).astype(np.int64)


_DAY_BITS = 21  # days since 1970 offset by 2**20: any date from 841 to 4840


def _day_key(series: np.ndarray, day: np.ndarray) -> np.ndarray:
    """One sortable integer per (series, session day)."""
    return (np.asarray(series, np.int64) << _DAY_BITS) + (np.asarray(day, np.int64) + (1 << 20))


def _between(keys: np.ndarray, since: np.ndarray, until: np.ndarray) -> np.ndarray:
    """How many of the sorted ``keys`` lie in ``[since, until)``, per pair."""
    return np.searchsorted(keys, until, side="left") - np.searchsorted(keys, since, side="left")


def _window_quantiles(r: np.ndarray, first: np.ndarray, window: int):
    """:meth:`History.quantiles`: each row's window laid out as a matrix row (a view of the
    returns, copied a block of about two million cells at a time) and sorted. Rows whose
    window reaches back before their series' first row hold NaN there (sorted last); the
    quantile's two order statistics are one column for rows with a full window, and picked
    row by row for the others."""
    n = len(r)
    out = (np.full(n, np.nan), np.full(n, np.nan))
    if not n:
        return out
    view = sliding_window_view(np.r_[np.full(window - 1, np.nan), r], window)  # row j: r[j-w+1..j]
    count = np.minimum(np.arange(n) - first + 1, window)
    steps = np.arange(window)
    block = max(1, 2_000_000 // window)
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        values, have = view[lo:hi].copy(), count[lo:hi]
        short = np.flatnonzero(have < window)
        if len(short):  # cells before the series' first row: NaN
            values[short] = np.where(steps >= window - have[short, None], values[short], np.nan)
        values.sort(axis=1)  # NaN last
        for q, target in zip(QUANTILES, out, strict=True):
            f = q * (have - 1)
            i = f.astype(np.int64)
            low = values[:, i[0]] if not len(short) else np.take_along_axis(
                values, i[:, None], axis=1)[:, 0]
            high = values[:, min(i[0] + 1, window - 1)] if not len(short) else (
                np.take_along_axis(values, np.minimum(i + 1, window - 1)[:, None], axis=1)[:, 0])
            target[lo:hi] = np.where(f == i, low, low + (high - low) * (f - i))
    return out


def window_rows(history: History, tasks: pd.DataFrame, window: int):
    """Per task: (first, end) rows of the last ``window`` labels known before it."""
    first, end = history.locate(tasks)
    return np.maximum(end - window, first), end


def rolling_rate(history: History, tasks: pd.DataFrame, window: int, min_count: int):
    """(p, count, latest label time used in ns or NO_TIME) per task."""
    lo, end = window_rows(history, tasks, window)
    count = end - lo
    cum = history.cumulative("y", history.y)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = (cum[end] - cum[lo]) / count
    p = np.where(count >= min_count, rate, 0.5)
    return p, count, latest_label_known(history, tasks)


def rolling_class_frequencies(history: History, tasks: pd.DataFrame, window: int,
                              min_count: int) -> tuple[np.ndarray, np.ndarray]:
    """(n x 3 frequencies of down, flat, up; labels counted) per task over the same window
    as :func:`rolling_rate`; 1/3 each below ``min_count``. The history must hold ``cls``
    (the config declares ``[tasks.classes]``)."""
    lo, end = window_rows(history, tasks, window)
    count = end - lo
    cls = history.column("cls").astype(np.int64) if len(history.y) else np.empty(0, np.int64)
    down = history.cumulative("cls_down", cls == 0)
    up = history.cumulative("cls_up", cls == 2)
    n_down, n_up = down[end] - down[lo], up[end] - up[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.column_stack([n_down, count - n_down - n_up, n_up]) / count[:, None]
    q[count < min_count] = 1 / 3
    return q, count


def rolling_quantiles(history: History, tasks: pd.DataFrame, window: int):
    """Empirical 10% / 90% quantiles of the past ``window`` returns per task (NaN if none)."""
    first, end = history.locate(tasks)
    q_lo, q_hi = history.quantiles(window)
    last = np.maximum(end - 1, 0)
    some = end > first
    nan = np.full(len(tasks), np.nan)
    return (np.where(some, q_lo[last], nan) if len(q_lo) else nan,
            np.where(some, q_hi[last], nan) if len(q_hi) else nan)


def latest_label_known(history: History, tasks: pd.DataFrame) -> np.ndarray:
    """Per task: when the latest label of its series known before ``t_forecast`` became
    known (ns; NO_TIME when none). With the store, this names every label a baseline may
    use."""
    first, end = history.locate(tasks)
    if not len(history.known):
        return np.full(len(tasks), NO_TIME, np.int64)
    return np.where(end > first, history.known[np.maximum(end - 1, 0)], NO_TIME)


def baseline_input_text(history: History, tasks: pd.DataFrame, frame: pd.DataFrame,
                        rows: np.ndarray | None = None, signs: Sequence[str] = (),
                        line: pa.Array | None = None) -> pa.Array:
    """One line per task naming a baseline's input: ``task_id``, the time through which its
    series' labels are known, and the ``momentum_sign_<minutes>`` columns of ``frame`` (the
    run's history; ``rows``: :func:`history_rows` when known) named in ``signs``: those the
    baseline reads (a momentum baseline its own; the others none). Nothing in it depends on
    how far back the run's history reaches, nor on the run's other models, so a shard, the
    whole run and a run with more models give the same line. ``line``: these tasks' line
    without signs, when already made (a line with signs is that line, then the signs)."""
    if line is None:
        last = latest_label_known(history, tasks)
        last = np.where(last == NO_TIME, -1, last)  # the line's format: -1 when none is known
        line = pc.binary_join_element_wise(
            pa.scalar("finbench-baseline-input-v1"), arrow_text(tasks["task_id"]),
            pc.binary_join_element_wise(pa.scalar("labels_known_through_ns"),
                                        pa.array(last).cast(pa.string()), "="), "|")
    signs = sorted(signs)
    if not signs:
        return line
    rows = history_rows(tasks, frame) if rows is None else rows
    parts = []
    for col in signs:
        value = pick(frame[col].to_numpy(float), rows)
        text = pa.array(np.where(np.isnan(value), 0, value).astype(np.int64)).cast(pa.string())
        text = pc.if_else(pa.array(np.isnan(value)), pa.scalar("none"), text)
        parts.append(pc.binary_join_element_wise(pa.scalar(col), text, "="))
    return pc.binary_join_element_wise(line, *parts, "|")


def history_rows(tasks: pd.DataFrame, frame: pd.DataFrame) -> np.ndarray:
    """Row of ``frame`` (the run's history) holding each task; -1 when absent."""
    return positions(tasks["task_id"], frame["task_id"])


def pick(values: np.ndarray, rows: np.ndarray, fill=np.nan) -> np.ndarray:
    out = values[np.maximum(rows, 0)] if len(values) else np.full(len(rows), fill)
    return np.where(rows >= 0, out, fill)


def baseline_digests(history: History, tasks: pd.DataFrame, frame: pd.DataFrame,
                     rows: np.ndarray | None = None, signs: Sequence[str] = ()) -> pa.Array:
    """SHA-256 of :func:`baseline_input_text`, per task (hex text)."""
    return sha256_hex(baseline_input_text(history, tasks, frame, rows, signs))


def window_details(history: History, tasks: pd.DataFrame, window: int) -> dict[str, object]:
    """Per task, the sessions its window spans and what it skipped (:meth:`History.spans`),
    as detail columns."""
    span = history.spans(tasks, window)
    codes, sessions = history.text_codes("session")
    return {"window_first": pick_text(sessions, codes, span["first"]),
            "window_last": pick_text(sessions, codes, span["last"]),
            "skipped_unscorable": span["unscorable"],
            "skipped_early_close": span["early_close"],
            "skipped_not_known": span["not_known"]}


def pick_text(names: pa.Array, codes: np.ndarray, rows: np.ndarray) -> pa.DictionaryArray:
    """The text ``names[codes[row]]`` at each of ``rows``, missing where a row is -1, as
    codes and ``names`` (dictionary-encoded: no text made per row)."""
    picked = codes[np.maximum(rows, 0)] if len(codes) else np.zeros(len(rows), np.int32)
    return pa.DictionaryArray.from_arrays(pa.array(picked, pa.int32(), mask=rows < 0), names)
