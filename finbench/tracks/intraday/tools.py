"""The intraday track's agent tools (docs/spec.md §12.2), answered from the run's store
snapshot at the task's forecast instant ``now``:

- ``bars``: a ticker's bars in ``[start, end]`` (``end`` defaults to ``now``), each bar in it
  when it started at or after ``start`` and was complete (start + bar length) by ``end``,
  aggregated to a resolution (1 minute to 1 day; buckets of the local clock from midnight, a
  day being the local date), a bucket's availability that of its last bar;
- ``daily``: a ticker's last regular sessions as daily summaries, each available once its
  last regular-session bar is (the gate's rule, ``gate.daily_summaries``);
- ``headlines``: BM25 (``core/bm25.py``) over the headlines available at ``now`` (their
  statistics counted over those alone), optionally only those tagged with a ticker;
- ``calendar``: a date's session (open, close, whether it closes early, the track's target
  instant by its early-close rule), for dates up to ``now``'s local date.

Whatever a call asks, no item available after ``now`` is answered (:func:`answered` checks
every one); asking for later is refused.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

import numpy as np
import pandas as pd

from finbench.core.bm25 import PostIndex, top_k
from finbench.core.calendar import local_instants, parse_clock, previous_sessions, session_grid
from finbench.core.times import to_ns
from finbench.tracks.tools import answered, arguments_of, function_tool, instant_text, refused

MAX_ITEMS = 1000  # bars one call answers at most: more is refused (ask a coarser resolution)
MAX_SESSIONS = 60
MAX_HEADLINES = 20
RESOLUTIONS = {"1min": 60, "5min": 300, "15min": 900, "30min": 1800, "1h": 3600, "1d": 86400}
TICKER = {"type": "string", "description": "the ticker, as the store names it"}
SCHEMAS = {
    "bars": function_tool(
        "bars", "Bars of a ticker in a time window that ends at or before now, aggregated "
        "to a resolution. Instants are ISO 8601; one without an offset is the exchange's "
        "local time.", {
            "ticker": TICKER,
            "start": {"type": "string", "description": "first instant of the window"},
            "end": {"type": ["string", "null"],
                    "description": "last instant of the window (null: now); never after now"},
            "resolution": {"type": "string", "enum": list(RESOLUTIONS)}}),
    "daily": function_tool(
        "daily", "A ticker's last regular sessions completed by now, as daily open, high, "
        "low, close and volume.", {
            "ticker": TICKER,
            "sessions": {"type": "integer", "minimum": 1, "maximum": MAX_SESSIONS}}),
    "headlines": function_tool(
        "headlines", "Search the news headlines available by now (BM25), newest first "
        "among equal scores.", {
            "query": {"type": "string"},
            "ticker": {"type": ["string", "null"], "description": "only headlines tagged "
                       "with this ticker (null: any)"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_HEADLINES}}),
    "calendar": function_tool(
        "calendar", "The exchange's session on a date up to today: open, close, whether it "
        "closes early, and the benchmark's target instant that day.", {
            "date": {"type": "string", "description": "YYYY-MM-DD"}}),
}


class IntradayTools:
    """The tools over a store snapshot (``store``: a :class:`~finbench.data.store.Store`)
    for the tasks of ``spec`` (the config's ``[tasks]``: calendar, zone, target, early-close
    rule). Holds what the snapshot alone determines (the headlines and their index), nothing
    of any task."""

    names = tuple(SCHEMAS)

    def __init__(self, store, spec) -> None:
        self.store, self.spec = store, spec
        news = store.read_headlines()  # sorted by availability, then id
        self.headlines = news.reset_index(drop=True)
        self.available_ns = to_ns(self.headlines["available_at"])
        self.index = PostIndex(self.headlines["headline"].astype(str).tolist())

    def schemas(self, names: list[str]) -> list[dict]:
        return [SCHEMAS[name] for name in names]

    def now(self, task: Mapping) -> pd.Timestamp:
        return pd.Timestamp(task["t_forecast"]).tz_convert("UTC")

    def call(self, name: str, arguments: str, now: pd.Timestamp):
        if name not in SCHEMAS:
            return refused("unknown_tool", now, f"no tool {name!r}: the tools are "
                           f"{', '.join(SCHEMAS)}")
        args, problem = arguments_of(arguments, SCHEMAS[name]["function"]["parameters"])
        if problem:
            return refused("bad_arguments", now, f"{name}: {problem}")
        return getattr(self, f"_{name}")(now, **args)

    # -- the tools ---------------------------------------------------------------------------
    def _instant(self, text: str, what: str) -> pd.Timestamp | str:
        try:
            ts = pd.Timestamp(text)
        except (ValueError, TypeError):
            return f"{what}: {text!r} is no ISO 8601 instant"
        if pd.isna(ts):
            return f"{what}: {text!r} is no instant"
        return (ts.tz_localize(self.spec.timezone) if ts.tzinfo is None else ts).tz_convert("UTC")

    def _bars(self, now, *, ticker: str, start: str, end: str | None, resolution: str):
        first = self._instant(start, "start")
        last = now if end is None else self._instant(end, "end")
        for bad in (first, last):
            if isinstance(bad, str):
                return refused("bad_arguments", now, f"bars: {bad}")
        if last > now:
            return refused("future", now, f"bars: end {instant_text(last)} is after now "
                           f"({instant_text(now)}); ask for a window ending by then")
        if first > last:
            return refused("bad_arguments", now, "bars: start is after end")
        zone = self.spec.timezone
        bars = self.store.read_bars(tickers=[ticker], start=first.tz_convert(zone).date(),
                                    end=last.tz_convert(zone).date())
        seconds = self.store.bar_seconds
        done = bars["ts"] + pd.Timedelta(seconds=seconds)
        bars = bars[(bars["ts"] >= first) & (done <= last)]
        items, available = _aggregate(bars, RESOLUTIONS[resolution], seconds, zone)
        if len(items) > MAX_ITEMS:
            return refused("too_many", now, f"bars: {len(items)} {resolution} bars in the "
                           f"window, more than {MAX_ITEMS}: narrow it or ask a coarser "
                           "resolution")
        return answered("bars", now, items, available, ticker=ticker, resolution=resolution)

    def _daily(self, now, *, ticker: str, sessions: int):
        from finbench.tracks.intraday.gate import daily_summaries

        zone = self.spec.timezone
        today = now.tz_convert(zone).date()
        # the sessions before today, and today's (complete by now only once it closed)
        back = previous_sessions(self.spec.calendar, today, sessions)[0].date()
        arrays = self.store.read_bar_arrays(tickers=[ticker], start=back, end=today)
        daily, _ = daily_summaries(arrays, calendar=self.spec.calendar, timezone=zone)
        daily = daily[daily["available_ns"] <= now.value].tail(sessions)
        items = [{"session": r.session, "open": r.open, "high": r.high, "low": r.low,
                  "close": r.close, "volume": r.volume,
                  "available_at": instant_text(pd.Timestamp(r.available_ns, tz="UTC"))}
                 for r in daily.itertuples()]
        return answered("daily", now, items,
                        pd.to_datetime(daily["available_ns"].to_numpy(), utc=True),
                        ticker=ticker)

    def _headlines(self, now, *, query: str, ticker: str | None, limit: int):
        hi = int(np.searchsorted(self.available_ns, now.value, side="right"))
        scores = self.index.scores(0, hi, query)
        news = self.headlines.iloc[:hi]
        if ticker is not None:
            tagged = np.fromiter((ticker in list(t) for t in news["tickers"]), bool, hi)
            scores = np.where(tagged, scores, 0.0)
        best = top_k(scores, self.available_ns[:hi], news["id"].to_numpy(dtype=object), limit)
        rows = news.iloc[best]
        items = [{"id": r.id, "headline": r.headline, "source": r.source,
                  "tickers": list(r.tickers), "published_at": instant_text(r.published_at),
                  "available_at": instant_text(r.available_at), "score": round(float(s), 6)}
                 for r, s in zip(rows.itertuples(), scores[best], strict=True)]
        return answered("headlines", now, items, rows["available_at"], query=query,
                        ticker=ticker)

    def _calendar(self, now, *, date: str):
        try:
            day = dt.date.fromisoformat(date)
        except ValueError:
            return refused("bad_arguments", now, f"calendar: {date!r} is no YYYY-MM-DD date")
        today = now.tz_convert(self.spec.timezone).date()
        if day > today:
            return refused("future", now, f"calendar: {date} is after today ({today})")
        spec = self.spec
        item: dict = {"date": date, "session": False}
        grid = session_grid(day, day, horizons={"_": "00:00"}, target=spec.target,
                            timezone=spec.timezone, calendar=spec.calendar,
                            early_close=spec.early_close).table
        if len(grid):
            row = grid.iloc[0]
            clock = local_instants(pd.DatetimeIndex([pd.Timestamp(day)]),
                                   parse_clock(spec.target, what="target"), spec.timezone)[0]
            item.update(session=True, open=instant_text(row["open"]),
                        close=instant_text(row["close"]),
                        early_close=bool(pd.to_datetime(clock, utc=True) >= row["close"]),
                        target=None if row["excluded"] else instant_text(row["t_target"]))
        return answered("calendar", now, [item], [])


def _aggregate(bars: pd.DataFrame, width: int, seconds: int, zone: str
               ) -> tuple[list[dict], list]:
    """Bars (one ticker, by time) in buckets of ``width`` seconds of the local clock from
    midnight (a day: the local date): open of the first, high, low, close of the last, volume
    summed, bars counted; each bucket available when its last bar is."""
    if bars.empty:
        return [], []
    local = bars["ts"].dt.tz_convert(zone).dt.tz_localize(None)
    midnight = local.dt.normalize()
    offset = (local - midnight).dt.total_seconds().astype(np.int64) // width * width
    start = (midnight + pd.to_timedelta(offset, unit="s")).dt.tz_localize(zone)
    frame = bars.assign(bucket=start.to_numpy())
    groups = frame.groupby("bucket", sort=True)
    out = groups.agg(open=("open", "first"), high=("high", "max"), low=("low", "min"),
                     close=("close", "last"), volume=("volume", "sum"), bars=("ts", "size"),
                     last=("ts", "max"))
    available = out["last"] + pd.Timedelta(seconds=seconds)
    items = [{"start": instant_text(bucket), "open": r.open, "high": r.high, "low": r.low,
              "close": r.close, "volume": r.volume, "bars": int(r.bars),
              "available_at": instant_text(a)}
             for bucket, r, a in zip(out.index, out.itertuples(), available, strict=True)]
    return items, list(available)
