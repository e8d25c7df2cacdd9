"""The intraday track's agent tools (docs/spec.md §12.2), answered from the run's store
snapshot at the task's forecast instant ``now``:

- ``bars``: a ticker's bars in ``[start, end]`` (``end`` defaults to ``now``), each bar in it
  when it started at or after ``start`` and was complete (start + bar length) by ``end``,
  aggregated to a resolution (1 minute to 1 day; buckets of the local clock from midnight, a
  day being the local date), a bucket's availability that of its last bar;
- ``daily``: a ticker's daily summaries of the calendar's last sessions complete by
  ``now``, each available once its last regular-session bar is (the gate's rule,
  ``gate.daily_summaries``);
- ``headlines``: BM25 (``core/bm25.py``) over the headlines available at ``now`` (their
  statistics counted over those alone), optionally only those tagged with a ticker;
- ``calendar``: a date's session (open, close, whether it closes early, the track's target
  instant by its early-close rule), for dates up to ``now``'s local date.

Whatever a call asks, no item available after ``now`` is answered (:func:`answered` checks
every one); asking for later is refused. The last date partitions read are held (each a date
of every ticker, as the store holds it: what a call answers is a function of ``now``, its
arguments and the snapshot, whatever was asked before).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from finbench.core.bm25 import PostIndex, candidates, top_k, window_scores
from finbench.core.calendar import local_instants, parse_clock, previous_sessions, session_grid
from finbench.core.times import NS, local_midnights_ns, to_ns
from finbench.data.schema import HEADLINES_SCHEMA
from finbench.tracks.tools import (
    ItemsText,
    SchemaTools,
    answered,
    function_tool,
    instant_text,
    instants_text,
    items_text,
    refused,
)

BAR_COLUMNS = ("open", "high", "low", "close", "volume")
# date partitions of bars held at once (a date of 500 tickers: about 10 MB): more than a
# month, so that a context chunk's agents (a month of tasks, asked together) find theirs held
DAYS_HELD = 32
SUMMARIES_HELD = 1024  # dates of daily summaries held (a row per ticker each)
# a store laid out by ticker: a ticker's bars of a date read from its own file and held,
# about as much memory as the dates above (a ticker's date: about 20 kB), and its summaries
TICKER_DAYS_HELD = 16_384
TICKER_SUMMARIES_HELD = 65_536
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


class IntradayTools(SchemaTools):
    """The tools over a store snapshot (``store``: a :class:`~finbench.data.store.Store`)
    for the tasks of ``spec`` (the config's ``[tasks]``: calendar, zone, target, early-close
    rule). Holds what the snapshot alone determines (the headlines and their index), nothing
    of any task."""

    SCHEMAS = SCHEMAS

    def __init__(self, store, spec) -> None:
        self.store, self.spec = store, spec
        self.snapshot_sha256 = store.snapshot_sha256
        self._dates = set(store.dates("bars"))
        self._days: OrderedDict = OrderedDict()  # date (or date, ticker): its bars (:meth:`_day`)
        self._summaries: OrderedDict = OrderedDict()  # likewise: its sessions summed up
        self._by_ticker = store.by_ticker  # (a ticker's bars read from its own files)
        self._sessions: dict = {}  # date: the calendar's session (the calendar tool)
        self._midnights: dict = {}  # date: its local midnight
        news = store.read_headlines()  # sorted by availability, then id
        self.headlines = news.reset_index(drop=True)
        self.available_ns = to_ns(self.headlines["available_at"])
        self.index = PostIndex(self.headlines["headline"].astype(str).tolist())
        self._ids = self.headlines["id"].to_numpy(dtype=object)  # (a call's ties rank by id)
        # what an item shows, in Arrow's columns (as compact as the frame's): a call takes
        # its few rows at once (a pandas row apiece cost about 1 ms a call)
        self._published_ns = to_ns(self.headlines["published_at"])
        shown = ["headline", "source", "tickers"]
        self._shown = pa.Table.from_pandas(
            self.headlines[shown], schema=pa.schema([HEADLINES_SCHEMA.field(c) for c in shown]),
            preserve_index=False).combine_chunks()
        self._tags = None  # every headline's tags, grouped by ticker once (:meth:`_tagged`)

    def now(self, task: Mapping) -> pd.Timestamp:
        return pd.Timestamp(task["t_forecast"]).tz_convert("UTC")

    # -- the tools ---------------------------------------------------------------------------
    def _instant(self, text: str, what: str) -> pd.Timestamp | str:
        try:
            ts = pd.Timestamp(text)
        except (ValueError, TypeError):
            return f"{what}: {text!r} is no ISO 8601 instant"
        if pd.isna(ts):
            return f"{what}: {text!r} is no instant"
        if ts.tzinfo is not None:
            return ts.tz_convert("UTC")
        try:
            return ts.tz_localize(self.spec.timezone).tz_convert("UTC")
        except ValueError:  # a local time the clock skips or shows twice (a DST change)
            return (f"{what}: {text!r} is no single instant in {self.spec.timezone} (a clock "
                    "change): give its offset")

    def _bars(self, now, _task, *, ticker: str, start: str, end: str | None, resolution: str):
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
        items, available = self._bar_items(ticker, first, last, RESOLUTIONS[resolution])
        if len(items) > MAX_ITEMS:
            return refused("too_many", now, f"bars: {len(items)} {resolution} bars in the "
                           f"window, more than {MAX_ITEMS}: narrow it or ask a coarser "
                           "resolution")
        return answered("bars", now, items, available, ticker=ticker, resolution=resolution)

    def _daily(self, now, _task, *, ticker: str, sessions: int):
        today = now.tz_convert(self.spec.timezone).date()
        # the sessions before today, and today's (complete by now only once it closed)
        days = [*sessions_before(self.spec.calendar, today, sessions), today]
        rows = [row for day in days if (row := self._summary(day, ticker)) is not None
                and row["available_ns"] <= now.value][-sessions:]
        available = np.array([r["available_ns"] for r in rows], dtype=np.int64)
        items = [{"session": r["session"], "open": r["open"], "high": r["high"],
                  "low": r["low"], "close": r["close"], "volume": r["volume"],
                  "available_at": at} for r, at in zip(rows, instants_text(available),
                                                        strict=True)]
        return answered("daily", now, items, available, ticker=ticker)

    def _session(self, day: dt.date) -> dict:
        """The calendar's session of ``day`` as the ``calendar`` tool answers it."""
        spec = self.spec
        item: dict = {"date": day.isoformat(), "session": False}
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
        return item

    # -- the snapshot's dates, held ----------------------------------------------------------
    def _key(self, day: dt.date, ticker: str):
        """What :meth:`_day` and :meth:`_summary` hold ``ticker``'s bars of ``day`` under:
        the date (its partition holds every ticker's), or on a store laid out by ticker the
        date and the ticker (its own file)."""
        return (day, ticker) if self._by_ticker else day

    def _day(self, day: dt.date, ticker: str):
        """Bars of date ``day`` holding ``ticker``'s, as BarArrays (None without any): its
        partition's of every ticker, or on a store laid out by ticker the ticker's alone;
        the last :data:`DAYS_HELD` dates (:data:`TICKER_DAYS_HELD` tickers' dates) held (a
        function of the snapshot alone: what a call answers never depends on the calls
        before it)."""
        key = self._key(day, ticker)
        if key in self._days:
            self._days.move_to_end(key)
            return self._days[key]
        arrays = self._days[key] = self._read(day, ticker)
        if len(self._days) > (TICKER_DAYS_HELD if self._by_ticker else DAYS_HELD):
            self._days.popitem(last=False)
        return arrays

    def _midnight(self, day: dt.date) -> int:
        """The local midnight of ``day`` in UTC nanoseconds."""
        if day not in self._midnights:
            self._midnights[day] = int(local_midnights_ns(pd.Series([day.isoformat()]),
                                                          self.spec.timezone)[0])
        return self._midnights[day]

    def _read(self, day: dt.date, ticker: str):
        """:meth:`_day`'s bars, read."""
        if day not in self._dates:
            return None
        table = self.store.read_day_now(day, BAR_COLUMNS,
                                        ticker=ticker if self._by_ticker else None)
        return None if table is None else self.store.day_arrays(table)

    def _summary(self, day: dt.date, ticker: str) -> dict | None:
        """``ticker``'s regular session of date ``day`` summed up (the gate's daily summaries;
        None without a session or bars), from the bars :meth:`_day` holds it under (each of
        their tickers summed up at once); the last :data:`SUMMARIES_HELD` dates
        (:data:`TICKER_SUMMARIES_HELD` tickers' dates) held."""
        from finbench.tracks.intraday.gate import daily_summaries

        key = self._key(day, ticker)
        if key not in self._summaries:  # read apart: the dates held are those of bars asked
            arrays = self._days.get(key) if key in self._days else self._read(day, ticker)
            rows = {} if arrays is None else {
                r["ticker"]: r for r in daily_summaries(
                    arrays, calendar=self.spec.calendar, timezone=self.spec.timezone
                )[0].to_dict("records") if r["session"] == day.isoformat()}
            self._summaries[key] = rows
            if len(self._summaries) > (TICKER_SUMMARIES_HELD if self._by_ticker
                                       else SUMMARIES_HELD):
                self._summaries.popitem(last=False)
        return self._summaries[key].get(ticker)

    def _bar_items(self, ticker: str, first: pd.Timestamp, last: pd.Timestamp, width: int
                   ) -> tuple[ItemsText, np.ndarray]:
        """The ticker's bars that started at or after ``first`` and were complete by
        ``last``, in buckets of ``width`` seconds of the local clock from midnight (a day:
        the local date; the buckets of a date are those of its partition, the local date of
        each bar's start), with each bucket's availability (UTC nanoseconds)."""
        zone, bar_ns = self.spec.timezone, self.store.bar_seconds * NS
        lo_day, hi_day = first.tz_convert(zone).date(), last.tz_convert(zone).date()
        parts = []
        for day in (lo_day + dt.timedelta(days=k) for k in range((hi_day - lo_day).days + 1)):
            arrays = self._day(day, ticker)
            if arrays is None or ticker not in arrays.bounds:
                continue
            lo, hi = arrays.bounds[ticker]
            ts = arrays.ts[lo:hi]
            keep = np.flatnonzero((ts >= first.value) & (ts + bar_ns <= last.value)) + lo
            if len(keep):
                midnight = self._midnight(day)
                step = min(width, 86400) * NS
                bucket = midnight + (arrays.ts[keep] - midnight) // step * step
                parts.append((bucket, keep, arrays))
        return _buckets(parts, bar_ns)

    def _headlines(self, now, _task, *, query: str, ticker: str | None, limit: int):
        hi = int(np.searchsorted(self.available_ns, now.value, side="right"))
        if ticker is None:  # the headlines that can be best, from the query's postings
            touched: list = []
            scores = window_scores([(self.index, 0, hi)], query, touched=touched)
            keep = candidates(scores, touched, limit)
        else:  # the ticker's headlines available by now, alone scored (with the statistics
            # of every headline available by now)
            keep = self._tagged(ticker)
            keep = keep[:np.searchsorted(keep, hi)]
            scores = window_scores([(self.index, 0, hi)], query, at=keep)
        best = keep[top_k(scores[keep], self.available_ns[keep], self._ids[keep], limit)]
        shown = self._shown.take(best).to_pydict()
        items = [{"id": i, "headline": text, "source": source, "tickers": tags,
                  "published_at": published, "available_at": seen, "score": round(s, 6)}
                 for i, text, source, tags, published, seen, s in zip(
                     self._ids[best].tolist(), shown["headline"], shown["source"],
                     shown["tickers"], instants_text(self._published_ns[best]),
                     instants_text(self.available_ns[best]), scores[best].tolist(),
                     strict=True)]
        return answered("headlines", now, items, self.available_ns[best], query=query,
                        ticker=ticker, ids=tuple(i["id"] for i in items))

    def _tagged(self, ticker: str) -> np.ndarray:
        """The rows (ascending) of the headlines tagged ``ticker``: every ticker's found at
        once on the first call naming one, from every headline's tags flattened and grouped
        by ticker (a loop over every headline before ``now`` on each call made a call's cost
        grow with the store's headlines; a pass over every tag for each new ticker, 3.5 ms a
        ticker at 100,000 headlines)."""
        if self._tags is None:
            tags = self._shown.column("tickers").combine_chunks()
            row = pc.list_parent_indices(tags).to_numpy().astype(np.int64)
            codes, names = pd.factorize(tags.flatten().to_numpy(zero_copy_only=False))
            order = np.lexsort((row, codes))  # by ticker, each ticker's rows ascending
            codes, row = codes[order], row[order]
            once = np.ones(len(codes), bool)
            once[1:] = (codes[1:] != codes[:-1]) | (row[1:] != row[:-1])
            codes, row = codes[once], row[once]  # (a ticker listed twice by one: once)
            self._tags = ({name: i for i, name in enumerate(names.tolist())}, row,
                          np.searchsorted(codes, np.arange(len(names) + 1)))
        code, rows, bounds = self._tags[0].get(ticker), self._tags[1], self._tags[2]
        if code is None:
            return np.empty(0, np.int64)
        return rows[bounds[code]:bounds[code + 1]]

    def _calendar(self, now, _task, *, date: str):
        try:
            day = dt.date.fromisoformat(date)
        except ValueError:
            return refused("bad_arguments", now, f"calendar: {date!r} is no YYYY-MM-DD date")
        today = now.tz_convert(self.spec.timezone).date()
        if day > today:
            return refused("future", now, f"calendar: {date} is after today ({today})")
        if day not in self._sessions:
            self._sessions[day] = self._session(day)
        item = self._sessions[day]
        return answered("calendar", now, [item], [])


def _buckets(parts: list, bar_ns: int) -> tuple[ItemsText, np.ndarray]:
    """Bars in buckets (``parts``: per date, each bar's bucket start, its rows and the
    date's arrays, in time order): open of the first, high, low, close of the last, volume
    summed in time order, bars counted; each bucket available when its last bar is. The
    items written as JSON already (:func:`items_text`)."""
    if not parts:
        return items_text({}), np.empty(0, np.int64)
    bucket = np.concatenate([b for b, _, _ in parts])
    column = {c: np.concatenate([getattr(a, c)[rows] for _, rows, a in parts])
              for c in ("ts", "open", "high", "low", "close", "volume")}
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    ends = np.r_[starts[1:], len(bucket)] - 1
    # summed in time order, one bar after another from 0 (numpy's sum pairs them): a
    # bucket of one bar, its volume plus 0 (-0.0 as 0.0, as ``sum`` gives it)
    volume = column["volume"][starts] + 0.0
    several = np.flatnonzero(ends > starts)
    if len(several):
        volumes = column["volume"].tolist()
        volume[several] = [float(sum(volumes[a:e + 1])) for a, e in zip(
            starts[several].tolist(), ends[several].tolist(), strict=True)]
    available = column["ts"][ends] + bar_ns
    return items_text({
        "start": instants_text(bucket[starts]), "open": column["open"][starts],
        "high": np.maximum.reduceat(column["high"], starts),
        "low": np.minimum.reduceat(column["low"], starts),
        "close": column["close"][ends], "volume": volume,
        "bars": ends - starts + 1, "available_at": instants_text(available)}
    ), available


@functools.lru_cache(maxsize=4096)
def sessions_before(calendar: str, day: dt.date, count: int) -> tuple[dt.date, ...]:
    """The ``count`` sessions of ``calendar`` strictly before ``day``, oldest first (the
    calendar's alone: held once asked, as a date's answers are the same for every task)."""
    return tuple(d.date() for d in previous_sessions(calendar, day, count))
