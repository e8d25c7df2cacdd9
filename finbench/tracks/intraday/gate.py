"""The time gate: each task's context holds only what was available at its forecast instant.

Contexts are index ranges into arrays sorted by (ticker, availability), found with one
``searchsorted`` per ticker for all tasks at once (docs/spec.md §4):

- the ticker's bars of the session's local date so far (available = start + bar length <= T);
- the last ``previous_sessions`` regular sessions as daily OHLCV summaries (a summary is
  available when its last regular-session bar is);
- headlines tagged with the ticker, available (``max(published_at, first_seen_at)``) in
  ``(T - headline_hours, T]``, newest ``max_headlines`` of them, newest first.

``max_input_time`` is the latest availability of anything in the context; a context with an
item later than ``T`` raises :class:`LookaheadError`, whatever built it.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from finbench.core.calendar import get_calendar
from finbench.core.errors import LookaheadError
from finbench.core.times import NO_TIME, NS, from_ns, local_midnights_ns, to_ns
from finbench.data.bars import BarArrays, lows_of, packed_keys, search_by_ticker, ticker_bounds

DIGEST_VERSION = 1


@dataclass(frozen=True)
class Context:
    """What a forecaster may see for one task; every table is already gated."""

    task_id: str
    ticker: str
    session: str
    horizon: str
    t_forecast: pd.Timestamp
    t_target: pd.Timestamp
    bars: pd.DataFrame
    previous_sessions: pd.DataFrame
    headlines: pd.DataFrame
    max_input_time: pd.Timestamp | None


def daily_summaries(
    bars: BarArrays, *, calendar: str, timezone: str
) -> tuple[pd.DataFrame, dict[str, tuple[int, int]]]:
    """Regular-session OHLCV per (ticker, session), sorted by ticker then session.

    A bar is in the session of the last open at or before its start, and regular when it
    starts before that session's close: a session's regular bars of a ticker are the run of
    its slice starting in ``[open, min(close, next open))``, found by two ``searchsorted`` of
    the sessions' bounds in each ticker's sorted starts (a search of every bar among the
    sessions cost a pass over each bar several times over).
    """
    if len(bars.ts) == 0:
        return empty_daily(), {}
    first = pd.Timestamp(int(bars.ts.min()), tz="UTC").tz_convert(timezone).tz_localize(None)
    last = pd.Timestamp(int(bars.ts.max()), tz="UTC").tz_convert(timezone).tz_localize(None)
    cal = get_calendar(calendar, first.normalize(), last.normalize())
    sessions, opens, closes = cal.session_bounds_ns(first.normalize(), last.normalize())
    if len(sessions) == 0:
        return empty_daily(), {}
    ends = np.minimum(closes, np.r_[opens[1:], np.iinfo(np.int64).max])
    names = sorted(bars.bounds, key=lambda t: bars.bounds[t][0])
    lo = np.empty((len(names), len(sessions)), np.int64)  # per ticker and session, its run
    hi = np.empty_like(lo)
    for i, t in enumerate(names):
        a, b = bars.bounds[t]
        lo[i] = a + np.searchsorted(bars.ts[a:b], opens, side="left")
        hi[i] = a + np.searchsorted(bars.ts[a:b], ends, side="left")
    ticker, session = np.nonzero(hi > lo)  # (ticker, session) order: row-major
    if len(ticker) == 0:
        return empty_daily(), {}
    first_i, last_i = lo[ticker, session], hi[ticker, session] - 1
    daily = pd.DataFrame(
        {
            "ticker": np.asarray(names, dtype=object)[ticker],
            "session": sessions.strftime("%Y-%m-%d")[session],
            "open": bars.open[first_i],
            "high": segment_reduce(np.maximum, bars.high, first_i, last_i),
            "low": segment_reduce(np.minimum, bars.low, first_i, last_i),
            "close": bars.close[last_i],
            "volume": segment_reduce(np.add, bars.volume, first_i, last_i),
            "session_open_ns": opens[session],
            "available_ns": bars.avail[last_i],
        }
    )
    return daily, ticker_bounds(daily["ticker"].to_numpy())


def segment_reduce(ufunc, values: np.ndarray, first: np.ndarray, last: np.ndarray
                   ) -> np.ndarray:
    """``ufunc.reduce`` of each ``values[first[i]:last[i] + 1]`` (segments in order, not
    overlapping, each non-empty), on ``values`` itself: ``reduceat`` over the segments' bounds
    interleaved, the gaps between them reduced too and left out. Each segment is reduced as
    ``ufunc.reduceat`` reduces a copy of its values laid end to end: the same bits, without
    the copy (four columns of every bar, a day's summaries)."""
    if len(first) == 0:
        return np.empty(0, values.dtype)
    bounds = np.empty(2 * len(first), np.int64)
    bounds[0::2], bounds[1::2] = first, last + 1
    if bounds[-1] == len(values):  # the last segment runs to the end
        bounds = bounds[:-1]
    return ufunc.reduceat(values, bounds)[0::2]


DAILY_DTYPES = {"ticker": object, "session": object, "open": np.float64, "high": np.float64,
                "low": np.float64, "close": np.float64, "volume": np.float64,
                "session_open_ns": np.int64, "available_ns": np.int64}


def empty_daily() -> pd.DataFrame:
    """Daily summaries of no bars, with the column types of any other."""
    return pd.DataFrame({c: np.empty(0, dtype=t) for c, t in DAILY_DTYPES.items()})


def explode_headlines(headlines: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, tuple[int, int]]]:
    """One row per (ticker, headline), sorted by ticker, availability, id (typed as the
    headlines are, none among them included)."""
    rows = headlines.explode("tickers").rename(columns={"tickers": "ticker"})
    rows = rows[rows["ticker"].notna()].astype({"ticker": "str"})  # text, rows or none
    rows["available_ns"] = to_ns(rows["available_at"])
    rows = rows.sort_values(["ticker", "available_ns", "id"], kind="stable").reset_index(drop=True)
    keep = ["ticker", "available_ns", "id", "published_at", "available_at", "headline", "source"]
    rows = rows[keep]
    return rows, ticker_bounds(rows["ticker"].to_numpy())


class ContextIndex:
    """Gated contexts of many tasks as index ranges; build once, materialise on demand."""

    def __init__(
        self,
        tasks: pd.DataFrame,
        bars: BarArrays,
        headlines: pd.DataFrame,
        *,
        previous_sessions: int,
        headline_hours: float,
        max_headlines: int,
        calendar: str = "XNYS",
        timezone: str = "America/New_York",
        daily: pd.DataFrame | None = None,
    ) -> None:
        """``daily``: precomputed summaries (sorted by ticker, session); else from ``bars``."""
        self.tasks = tasks.reset_index(drop=True)
        self.bars = bars
        self.timezone = timezone
        n = len(self.tasks)
        tick = self.tasks["ticker"].to_numpy(dtype=object)
        self.t_fc = to_ns(self.tasks["t_forecast"])
        day_start = local_midnights_ns(self.tasks["session"], timezone)
        slices = bars.slices_of(tick)  # (the bars' packed keys, built with them, searched)
        self.bar_lo = bars.search(tick, day_start, on="ts", side="left", slices=slices)
        self.bar_hi = bars.search(tick, self.t_fc, on="avail", side="right", slices=slices)
        self.bar_hi = np.maximum(self.bar_hi, self.bar_lo)

        if daily is None:
            self.daily, dbounds = daily_summaries(bars, calendar=calendar, timezone=timezone)
        else:
            self.daily, dbounds = daily, ticker_bounds(daily["ticker"].to_numpy())
        d_keys = self.daily["session_open_ns"].to_numpy(np.int64)
        d_avail = self.daily["available_ns"].to_numpy(np.int64)
        open_ns = to_ns(self.tasks["session_open"])
        self.sum_hi = search_by_ticker(dbounds, d_keys, tick, open_ns, side="left")
        self.sum_lo = np.maximum(lows_of(dbounds, tick), self.sum_hi - previous_sessions)
        self.sum_lo = np.minimum(self.sum_lo, self.sum_hi)

        self.news, hbounds = explode_headlines(headlines)
        h_avail = self.news["available_ns"].to_numpy(np.int64)
        span = int(round(headline_hours * 3600 * NS))
        packed = packed_keys(hbounds, h_avail)  # (packed once for both searches)
        self.hl_hi = search_by_ticker(hbounds, h_avail, tick, self.t_fc, side="right",
                                      packed=packed)
        self.hl_lo = search_by_ticker(hbounds, h_avail, tick, self.t_fc - span, side="right",
                                      packed=packed)
        self.hl_lo = np.minimum(np.maximum(self.hl_lo, self.hl_hi - max_headlines), self.hl_hi)

        self._h_avail = h_avail
        self._d_avail = d_avail
        # digests hash these bytes: fixed types, whatever types the frame arrived with
        self._d_cols = [
            np.ascontiguousarray(self.daily[c].to_numpy(DAILY_DTYPES[c]))
            for c in ("session_open_ns", "open", "high", "low", "close", "volume", "available_ns")
        ]
        self._h_id = self.news["id"].astype(str).tolist()
        self._h_text = self.news["headline"].astype(str).tolist()
        self._task_ids = self.tasks["task_id"].astype(str).tolist()
        latest = np.full(n, NO_TIME, dtype=np.int64)
        has = self.bar_hi > self.bar_lo
        latest[has] = np.maximum(latest[has], bars.avail[self.bar_hi[has] - 1])
        has = self.sum_hi > self.sum_lo
        if has.any():
            # Summaries are in session order, each available before the next session opens.
            latest[has] = np.maximum(latest[has], d_avail[self.sum_hi[has] - 1])
        has = self.hl_hi > self.hl_lo
        latest[has] = np.maximum(latest[has], h_avail[self.hl_hi[has] - 1])
        self.max_input_ns = latest
        self.check()

    def take(self, rows) -> ContextIndex:
        """The contexts of tasks ``rows`` (positions), sharing this index's data arrays."""
        rows = np.asarray(rows, dtype=np.int64)
        out = copy.copy(self)
        out.tasks = self.tasks.iloc[rows].reset_index(drop=True)
        for name in ("t_fc", "bar_lo", "bar_hi", "sum_lo", "sum_hi", "hl_lo", "hl_hi",
                     "max_input_ns"):
            setattr(out, name, getattr(self, name)[rows])
        out._task_ids = [self._task_ids[i] for i in rows]
        digests = self.digests()  # hashed once per chunk
        out._digest_cache = [digests[i] for i in rows]
        return out

    def __len__(self) -> int:
        return len(self.tasks)

    @property
    def max_input_time(self) -> pd.Series:
        """Latest availability in each context (NaT for an empty context)."""
        return from_ns(self.max_input_ns)

    def check(self) -> None:
        """Raise :class:`LookaheadError` naming the first item available after its horizon."""
        late = np.flatnonzero(self.max_input_ns > self.t_fc)
        if len(late):
            i = int(late[0])
            raise LookaheadError(self._describe_late(i) + f" ({len(late)} task(s) affected)")

    def _describe_late(self, i: int) -> str:
        task = self.tasks.iloc[i]
        horizon = _iso(self.t_fc[i])
        where = f"{task['task_id']}"
        b = np.arange(self.bar_lo[i], self.bar_hi[i])
        late_b = b[self.bars.avail[b] > self.t_fc[i]]
        if len(late_b):
            j = late_b[0]
            return (f"bar {task['ticker']} {_iso(self.bars.ts[j])} available "
                    f"{_iso(self.bars.avail[j])} is after the horizon {horizon} ({where})")
        h = np.arange(self.hl_lo[i], self.hl_hi[i])
        late_h = h[self._h_avail[h] > self.t_fc[i]]
        if len(late_h):
            j = late_h[0]
            return (f"headline {self.news['id'].iat[j]} available {_iso(self._h_avail[j])} "
                    f"is after the horizon {horizon} ({where})")
        d = np.arange(self.sum_lo[i], self.sum_hi[i])
        j = d[self._d_avail[d] > self.t_fc[i]][0]
        return (f"daily summary {task['ticker']} {self.daily['session'].iat[j]} available "
                f"{_iso(self._d_avail[j])} is after the horizon {horizon} ({where})")

    # -- per-task views ---------------------------------------------------------------------
    def context(self, i: int) -> Context:
        """The gated context of task ``i`` as small frames (for prompts and inspection)."""
        task = self.tasks.iloc[i]
        b = slice(self.bar_lo[i], self.bar_hi[i])
        bars = pd.DataFrame(
            {
                "ts": pd.to_datetime(self.bars.ts[b], utc=True),
                "available_at": pd.to_datetime(self.bars.avail[b], utc=True),
                "open": self.bars.open[b], "high": self.bars.high[b], "low": self.bars.low[b],
                "close": self.bars.close[b], "volume": self.bars.volume[b],
            }
        )
        summaries = self.daily.iloc[self.sum_lo[i]:self.sum_hi[i]].reset_index(drop=True)
        news = self.news.iloc[self.hl_lo[i]:self.hl_hi[i]].iloc[::-1].reset_index(drop=True)
        t = pd.Timestamp(self.t_fc[i], tz="UTC")
        for kind, avail, label in (
            ("bar", bars["available_at"], bars["ts"].astype(str)),
            ("headline", news["available_at"], news["id"]),
            ("daily summary", pd.to_datetime(summaries["available_ns"], utc=True),
             summaries["session"]),
        ):
            over = np.flatnonzero((avail > t).to_numpy())
            if len(over):
                j = over[0]
                raise LookaheadError(
                    f"{kind} {label.iat[j]} available {avail.iat[j].isoformat()} is after the "
                    f"horizon {t.isoformat()} ({task['task_id']})"
                )
        latest = None if self.max_input_ns[i] == NO_TIME else pd.Timestamp(
            self.max_input_ns[i], tz="UTC")
        return Context(
            task_id=task["task_id"], ticker=task["ticker"], session=task["session"],
            horizon=task["horizon"], t_forecast=t, t_target=pd.Timestamp(task["t_target"]),
            bars=bars, previous_sessions=summaries.drop(columns=["session_open_ns"]),
            headlines=news, max_input_time=latest,
        )

    def digest(self, i: int) -> str:
        """SHA-256 over the exact content of context ``i`` (a receipt the audit re-derives)."""
        h = hashlib.sha256()
        h.update(f"finbench-context-v{DIGEST_VERSION}|{self._task_ids[i]}|"
                 f"{self.t_fc[i]}|".encode())
        b = slice(self.bar_lo[i], self.bar_hi[i])
        for arr, dtype in ((self.bars.ts, np.int64), (self.bars.open, np.float64),
                           (self.bars.high, np.float64), (self.bars.low, np.float64),
                           (self.bars.close, np.float64), (self.bars.volume, np.float64)):
            h.update(np.ascontiguousarray(arr[b], dtype=dtype).tobytes())
        d = slice(self.sum_lo[i], self.sum_hi[i])
        for arr in self._d_cols:
            h.update(arr[d].tobytes())
        for j in range(self.hl_hi[i] - 1, self.hl_lo[i] - 1, -1):
            h.update(f"|{self._h_id[j]}|{self._h_avail[j]}|{self._h_text[j]}".encode())
        return h.hexdigest()

    def digests(self) -> list[str]:
        """Digests of every task, in task order (computed once, then cached)."""
        if getattr(self, "_digest_cache", None) is None:
            self._digest_cache = [self.digest(i) for i in range(len(self))]
        return self._digest_cache


def _iso(ns: int) -> str:
    return pd.Timestamp(int(ns), tz="UTC").isoformat()
