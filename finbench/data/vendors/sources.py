"""Adapters for Alpaca, Databento, Massive (formerly Polygon) and yfinance.

Conventions (all checked against the vendors' documentation):

| source | bar timestamp | zone | notes |
|---|---|---|---|
| alpaca | start (`t`) | UTC | a bar only when trades occurred; free plan = IEX feed |
| databento | start (`ts_event`) | UTC ns | `ohlcv-1m`; no record without trades |
| massive | start (`t`, ms) | UTC | aggregates; the closing auction lands in the 16:00 bar |
| yfinance | start (index) | exchange zone | 1-minute bars for the last 30 days only, 7 days per request |

The ``*_bars`` functions are pure: they turn the SDK's own objects into store columns, so tests
feed them fixtures parsed through the SDKs' models, with no network.
"""

from __future__ import annotations

import os
import warnings

import pandas as pd

from finbench.core.errors import DataError
from finbench.data.vendors.base import Vendor, frame, register


def alpaca_bars(barset, ticker: str) -> pd.DataFrame:
    """An ``alpaca.data.models.BarSet`` → store columns."""
    bars = barset.data.get(ticker, [])
    return frame(ticker, [b.timestamp for b in bars], [b.open for b in bars],
                 [b.high for b in bars], [b.low for b in bars], [b.close for b in bars],
                 [b.volume for b in bars])


def databento_bars(store, ticker: str) -> pd.DataFrame:
    """A ``databento.DBNStore`` of ``ohlcv-1m`` records → store columns (prices as floats)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The inplace keyword")  # inside databento
        df = store.to_df(price_type="float", pretty_ts=True)
    return frame(ticker, df.index, df["open"], df["high"], df["low"], df["close"], df["volume"])


def massive_bars(aggs, ticker: str) -> pd.DataFrame:
    """``massive.rest.models.Agg`` objects (``timestamp`` in epoch ms) → store columns."""
    aggs = list(aggs)
    return frame(ticker, pd.to_datetime([a.timestamp for a in aggs], unit="ms", utc=True),
                 [a.open for a in aggs], [a.high for a in aggs], [a.low for a in aggs],
                 [a.close for a in aggs], [a.volume for a in aggs])


def yfinance_bars(df: pd.DataFrame, ticker: str) -> pd.DataFrame:
    """A ``yfinance`` 1-minute frame (``Ticker.history``, or ``download``'s with ticker
    columns; index in the exchange zone) → store columns. An empty frame is a day without
    bars."""
    if df.empty:
        return frame(ticker, pd.DatetimeIndex([], tz="UTC"), [], [], [], [], [])
    if isinstance(df.columns, pd.MultiIndex):  # yf.download with one or more tickers
        df = df.xs(ticker, axis=1, level=-1) if ticker in df.columns.get_level_values(-1) else (
            df.droplevel(-1, axis=1))
    index = df.index
    if index.tz is None:
        raise ValueError("yfinance frame has a naive index; expected the exchange zone")
    return frame(ticker, index.tz_convert("UTC"), df["Open"], df["High"], df["Low"],
                 df["Close"], df["Volume"])


@register
class Alpaca(Vendor):
    name, package, zone = "alpaca", "alpaca-py", "UTC"
    key_env = ("ALPACA_API_KEY", "ALPACA_SECRET_KEY")
    notes = "bars only for minutes with trades; the free plan's feed is IEX"

    def fetch_day(self, ticker, day, start_utc, end_utc):
        self.require_sdk("alpaca")
        from alpaca.data.enums import DataFeed
        from alpaca.data.historical import StockHistoricalDataClient
        from alpaca.data.requests import StockBarsRequest
        from alpaca.data.timeframe import TimeFrame

        key, secret = self.keys()
        # ALPACA_DATA_URL: another endpoint of the same API (a proxy; the tests' loopback one)
        client = StockHistoricalDataClient(key, secret,
                                           url_override=os.environ.get("ALPACA_DATA_URL"))
        request = StockBarsRequest(symbol_or_symbols=ticker, timeframe=TimeFrame.Minute,
                                   start=start_utc.to_pydatetime(), end=end_utc.to_pydatetime(),
                                   feed=DataFeed(self.feed or "iex"))
        return alpaca_bars(client.get_stock_bars(request), ticker)


@register
class Databento(Vendor):
    name, package, zone = "databento", "databento", "UTC"
    key_env = ("DATABENTO_API_KEY",)
    notes = "ohlcv-1m; ts_event is the bar start; no record without trades"

    def fetch_day(self, ticker, day, start_utc, end_utc):
        db = self.require_sdk("databento")
        (key,) = self.keys()
        client = db.Historical(key)
        store = client.timeseries.get_range(dataset=self.feed or "XNAS.ITCH", schema="ohlcv-1m",
                                            symbols=[ticker], start=start_utc.isoformat(),
                                            end=end_utc.isoformat())
        return databento_bars(store, ticker)


@register
class Massive(Vendor):
    name, package, zone = "massive", "massive", "UTC"
    key_env = ("MASSIVE_API_KEY",)
    notes = "aggregates; t is the window start in epoch ms"

    def fetch_day(self, ticker, day, start_utc, end_utc):
        massive = self.require_sdk("massive")
        (key,) = self.keys()
        client = massive.RESTClient(key)
        aggs = client.list_aggs(ticker, 1, "minute", int(start_utc.value // 1_000_000),
                                int(end_utc.value // 1_000_000), adjusted=False, sort="asc",
                                limit=50_000)
        out = massive_bars(aggs, ticker)
        return out[(out["ts"] >= start_utc) & (out["ts"] < end_utc)]


@register
class YFinance(Vendor):
    name, package, zone = "yfinance", "yfinance", "America/New_York"
    notes = "1-minute bars for the last 30 days only, at most 7 days per request"

    def fetch_day(self, ticker, day, start_utc, end_utc):
        yf = self.require_sdk("yfinance")
        if pd.Timestamp.now(tz="UTC") - start_utc > pd.Timedelta(days=30):
            warnings.warn(f"yfinance: {day.date()} is older than 30 days; Yahoo serves no "
                          "1-minute bars that far back", stacklevel=2)
        # yfinance logs a failed download and returns an empty frame, which would be recorded
        # as a day without bars and never fetched again: have it raise instead
        debug = getattr(getattr(yf, "config", None), "debug", None)
        hidden = getattr(debug, "hide_exceptions", None)
        kwargs = {"raise_errors": True} if debug is None else {}
        try:
            if debug is not None:
                debug.hide_exceptions = False
            df = yf.Ticker(ticker).history(
                start=start_utc.to_pydatetime(), end=end_utc.to_pydatetime(), interval="1m",
                prepost=True, auto_adjust=False, actions=False, **kwargs)
        except Exception as error:
            raise DataError(f"yfinance {ticker} {day.date()}: the download failed ({error}); "
                            "nothing of that day was recorded, so running the same command "
                            "again retries it") from error
        finally:
            if debug is not None:
                debug.hide_exceptions = hidden
        return yfinance_bars(df, ticker)
