"""A live feed for the tests: a store that fills as a fake clock passes, as a user's own feed
(or a vendor's stream) would append to one. Its bars and headlines are the bundled sample's:
before the season every bar is there; during it, at any time ``t`` the store holds the bars
that ended by ``t`` and the headlines available by ``t``, added through FinBench's own
ingest (replacing the day's bars so far, as a feed rewriting today's partition does);
``history``: only that many sessions before the season."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd

from finbench.data.ingest import ingest_files

BAR = pd.Timedelta(minutes=1)


class LiveFeed:
    def __init__(self, sample: Path, store: Path, tickers: list[str], first: dt.date,
                 zone: str = "America/New_York", history: int | None = None) -> None:
        self.sample, self.store, self.tickers, self.zone = Path(sample), Path(store), tickers, zone
        self.first = first
        self.scratch = self.store.parent / (self.store.name + "-feed")
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.fed_through: pd.Timestamp | None = None
        self.complete: set[dt.date] = set()
        self._source: dict[Path, pd.DataFrame] = {}
        self._ours: pd.DataFrame | None = None
        days = sorted({dt.date.fromisoformat(p.parent.name.removeprefix("date="))
                       for p in (self.sample / "bars").glob("date=*/*.parquet")})
        before = [d for d in days if d < first]
        since = before[-history] if history and len(before) >= history else None
        self.since = since
        history = self._bars(lambda d: d < first and (since is None or d >= since))
        start = pd.Timestamp(first, tz=zone).tz_convert("UTC")
        self._ingest(bars=history, headlines=self._headlines(start))
        self.fed_through = start

    def _bars(self, keep) -> pd.DataFrame:
        parts = [self._read(p) for p in sorted((self.sample / "bars").glob("date=*/*.parquet"))
                 if keep(dt.date.fromisoformat(p.parent.name.removeprefix("date=")))]
        bars = pd.concat(parts, ignore_index=True)
        return bars[bars["ticker"].isin(self.tickers)]

    def _read(self, path: Path) -> pd.DataFrame:
        """A bar partition of the source, read once (the source never changes: a season's feed
        asks for the same partitions at every step of its clock)."""
        if path not in self._source:
            self._source[path] = pd.read_parquet(path)
        return self._source[path]

    def _headlines(self, until: pd.Timestamp) -> pd.DataFrame:
        """The headlines about the feed's tickers available from its history's first session
        to ``until``."""
        if self._ours is None:  # the source's headlines about the tickers, found once
            parts = [pd.read_parquet(p) for p in sorted(
                (self.sample / "headlines").glob("date=*/*.parquet"))]
            heads = pd.concat(parts, ignore_index=True)
            self._ours = heads[heads["tickers"].map(lambda t: any(x in self.tickers for x in t))]
        heads = self._ours
        since = pd.Timestamp(self.since or dt.date(1970, 1, 1), tz=self.zone).tz_convert("UTC")
        return heads[(heads["available_at"] >= since) & (heads["available_at"] <= until)]

    def _ingest(self, *, bars: pd.DataFrame | None = None,
                headlines: pd.DataFrame | None = None) -> None:
        files = {}
        if bars is not None and len(bars):
            path = self.scratch / "bars.parquet"
            bars.to_parquet(path, index=False)
            files["bars"] = path
        if headlines is not None and len(headlines):
            path = self.scratch / "headlines.parquet"
            headlines.drop(columns=["first_seen_at"]).to_parquet(path, index=False)
            files["headlines"] = path
        if files:
            ingest_files(self.store, **files)

    def __call__(self, now: dt.datetime) -> None:
        """The store as a feed leaves it at ``now``: every bar that ended by then (each
        ticker-day given whole, as a day's partition is rewritten), every headline available."""
        now = pd.Timestamp(now).tz_convert("UTC")
        local = now.tz_convert(self.zone).date()
        bars = self._bars(lambda d: self.first <= d <= local and d not in self.complete)
        day = bars["ts"].dt.tz_convert(self.zone).dt.date
        self._ingest(bars=bars[bars["ts"] + BAR <= now])
        self.complete |= {d for d in set(day) if d < local}
        heads = self._headlines(now)
        if self.fed_through is not None:
            heads = heads[heads["available_at"] > self.fed_through]
        self._ingest(headlines=heads)
        self.fed_through = now
