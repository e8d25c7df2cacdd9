"""Vendor fixtures in each vendor's documented shape, parsed through its SDK, fetched into a
store: labels equal those of the same bars as a plain CSV. Fetch is resumable and idempotent."""

import io
import json
import re

import pandas as pd
import pytest

from finbench.core.errors import DataError
from finbench.data.fetch import fetch
from finbench.data.ingest import ingest_bars
from finbench.data.store import Store
from finbench.data.vendors import sources
from finbench.tracks.intraday.config import TasksConfig
from finbench.tracks.intraday.labels import compute_labels
from finbench.tracks.intraday.tasks import build_tasks
from tests.helpers import HEADER, store_files, write

DAY = "2025-01-15"
BARS = {  # bar start UTC -> (open, high, low, close, volume)
    "AAPL": {"2025-01-15T09:10:00Z": (99.0, 99.5, 98.9, 99.2, 300),
             "2025-01-15T14:29:00Z": (100.0, 100.2, 99.8, 100.1, 500),
             "2025-01-15T17:29:00Z": (100.4, 101.0, 100.0, 100.9, 700),
             "2025-01-15T20:29:00Z": (101.6, 102.5, 101.5, 102.0, 900),
             "2025-01-15T20:54:00Z": (102.0, 102.1, 101.9, 102.0, 1100)},
    "MSFT": {"2025-01-15T14:29:00Z": (420.0, 420.5, 419.5, 420.1, 50),
             "2025-01-15T20:54:00Z": (421.0, 421.0, 420.0, 420.5, 80)},
}


def csv_labels(tmp_path):
    lines = "".join(f"{t},{ts},{o},{h},{lo},{c},{v}\n" for t, bars in BARS.items()
                    for ts, (o, h, lo, c, v) in bars.items())
    ingest_bars(write(tmp_path / "plain.csv", HEADER + lines), tmp_path / "csv_store")
    return labels_of(tmp_path / "csv_store")


def labels_of(store_path):
    store = Store(store_path)
    tasks = build_tasks(TasksConfig(tickers=list(BARS), start=DAY, end=DAY)).tasks
    return compute_labels(tasks, store.read_bar_arrays())


def alpaca_fixture(ticker):
    from alpaca.data.models import BarSet

    raw = {ticker: [{"t": ts, "o": o, "h": h, "l": lo, "c": c, "v": v, "n": 1, "vw": c}
                    for ts, (o, h, lo, c, v) in BARS[ticker].items()]}
    return sources.alpaca_bars(BarSet(raw), ticker)


def databento_fixture(ticker):
    import databento as db
    import databento_dbn as dbn

    start = pd.Timestamp("2025-01-15T09:00Z").value
    meta = dbn.Metadata(dataset="XNAS.ITCH", start=start, stype_out=dbn.SType.INSTRUMENT_ID,
                        symbols=[ticker], partial=[], not_found=[], mappings=[],
                        schema=dbn.Schema.OHLCV_1M, stype_in=dbn.SType.RAW_SYMBOL,
                        end=start + 12 * 3600 * 10**9)
    body = b"".join(bytes(dbn.OHLCVMsg(
        rtype=0x21, publisher_id=2, instrument_id=7, ts_event=pd.Timestamp(ts).value,
        open=round(o * 1e9), high=round(h * 1e9), low=round(lo * 1e9), close=round(c * 1e9),
        volume=v)) for ts, (o, h, lo, c, v) in BARS[ticker].items())
    return sources.databento_bars(db.DBNStore.from_bytes(io.BytesIO(bytes(meta.encode()) + body)),
                                  ticker)


def massive_fixture(ticker):
    from massive.rest.models import Agg

    aggs = [Agg.from_dict({"o": o, "h": h, "l": lo, "c": c, "v": v, "vw": c, "n": 1,
                           "t": pd.Timestamp(ts).value // 10**6})
            for ts, (o, h, lo, c, v) in BARS[ticker].items()]
    return sources.massive_bars(aggs, ticker)


def yfinance_fixture(ticker):
    # yf.download's shape: index in the exchange zone, columns (Price, Ticker)
    index = pd.DatetimeIndex([pd.Timestamp(ts) for ts in BARS[ticker]]).tz_convert(
        "America/New_York").rename("Datetime")
    values = list(BARS[ticker].values())
    columns = pd.MultiIndex.from_tuples([(f, ticker) for f in
                                         ("Open", "High", "Low", "Close", "Volume")],
                                        names=["Price", "Ticker"])
    return sources.yfinance_bars(pd.DataFrame(values, index=index, columns=columns), ticker)


FIXTURES = {"alpaca": (sources.Alpaca, alpaca_fixture),
            "databento": (sources.Databento, databento_fixture),
            "massive": (sources.Massive, massive_fixture),
            "yfinance": (sources.YFinance, yfinance_fixture)}


def fixture_vendor(name, calls=None, fail_on=None):
    base, make = FIXTURES[name]

    class FromFixture(base):
        def fetch_day(self, ticker, day, start_utc, end_utc):
            if calls is not None:
                calls.append(ticker)
            if fail_on == ticker:
                raise ConnectionError("network went away")
            out = make(ticker)
            return out[(out["ts"] >= start_utc) & (out["ts"] < end_utc)]

    return FromFixture()


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_vendor_bars_give_the_same_labels_as_the_plain_csv(tmp_path, name):
    fetch(fixture_vendor(name), list(BARS), DAY, DAY, tmp_path / "s", echo=lambda *_: None)
    got = labels_of(tmp_path / "s")
    pd.testing.assert_frame_equal(got, csv_labels(tmp_path))
    assert (got["status"] == "ok").sum() == 4  # AAPL x 3, MSFT MORNING


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_every_vendor_declares_bar_starts_and_its_zone(name):
    vendor = FIXTURES[name][0]
    assert vendor.bar_timestamp == "start"
    assert vendor.zone == ("America/New_York" if name == "yfinance" else "UTC")


def test_fetching_the_same_range_twice_leaves_the_store_unchanged(tmp_path):
    calls = []
    fetch(fixture_vendor("alpaca", calls), list(BARS), DAY, DAY, tmp_path / "s",
          echo=lambda *_: None)
    before = store_files(tmp_path / "s")
    summary = fetch(fixture_vendor("alpaca", calls), list(BARS), DAY, DAY, tmp_path / "s",
                    echo=lambda *_: None)
    assert summary["fetched"] == 0 and summary["skipped"] == 2 and calls == ["AAPL", "MSFT"]
    assert store_files(tmp_path / "s") == before


def test_an_interrupted_fetch_resumes_without_duplicates(tmp_path):
    calls = []
    with pytest.raises(ConnectionError):
        fetch(fixture_vendor("massive", calls, fail_on="MSFT"), list(BARS), DAY, DAY,
              tmp_path / "s", echo=lambda *_: None)
    fetch(fixture_vendor("massive", calls), list(BARS), DAY, DAY, tmp_path / "s",
          echo=lambda *_: None)
    assert calls == ["AAPL", "MSFT", "MSFT"]  # AAPL was staged, never fetched again
    store = Store(tmp_path / "s")
    assert store.verify() == []
    bars = store.read_bars()
    assert len(bars) == 7 and not bars.duplicated(["ticker", "ts"]).any()
    log = (tmp_path / "s" / "fetched.jsonl").read_text().splitlines()
    assert len(log) == 2 and '"sdk_version"' in log[0]
    assert store.manifest["sources"][-1]["vendor"] == "massive"


@pytest.mark.parametrize(("tickers", "start", "end", "said"), [
    (["AAPL"], "2025-01-16", "2025-01-15", "--end 2025-01-15 is before --start 2025-01-16"),
    (["AAPL", ""], DAY, DAY, "--tickers: '' is not a non-empty text"),
    (["AAPL", "MSFT", "AAPL"], DAY, DAY, "--tickers: AAPL listed more than once"),
    ([], DAY, DAY, "--tickers names no ticker"),
    (["AAPL"], "2025-01-18", "2025-01-19", "2025-01-18..2025-01-19 holds no session of the "
                                           "exchange XNYS"),
])
def test_a_request_that_can_fetch_nothing_is_refused_before_a_store_is_made(
        tmp_path, tickers, start, end, said):
    """Each made an empty store and said "fetched 0 ticker-days" (a ticker listed twice was
    fetched twice); an empty entry of --tickers was dropped without a word."""
    calls = []
    with pytest.raises(DataError, match=re.escape("alpaca: nothing fetched: ") + ".*"
                       + re.escape(said)):
        fetch(fixture_vendor("alpaca", calls), tickers, start, end, tmp_path / "s",
              echo=lambda *_: None)
    assert calls == [] and not (tmp_path / "s").exists()


def test_missing_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("MASSIVE_API_KEY", raising=False)
    with pytest.raises(DataError, match="MASSIVE_API_KEY"):
        sources.Massive().keys()


def test_store_is_readable_by_duckdb_and_polars(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    pl = pytest.importorskip("polars")
    fetch(fixture_vendor("alpaca"), list(BARS), DAY, DAY, tmp_path / "s", echo=lambda *_: None)
    pattern = str(tmp_path / "s" / "bars" / "**" / "*.parquet")
    n = duckdb.sql(f"SELECT count(*) FROM read_parquet('{pattern}', hive_partitioning=true)"
                   ).fetchall()[0][0]
    assert n == 7
    frame = pl.scan_parquet(pattern, hive_partitioning=True).collect()
    assert frame.height == 7 and "date" in frame.columns


class _YahooTicker:
    """Stands in for ``yfinance.Ticker`` (Yahoo cannot be reached offline): ``history``
    answers in Yahoo's shape (one level of columns, index in the exchange zone) or fails as
    yfinance does once its exceptions are not hidden."""

    answer: object = None
    seen_hidden: list = []

    def __init__(self, ticker):
        self.ticker = ticker

    def history(self, **kwargs):
        import yfinance as yf

        self.seen_hidden.append(yf.config.debug.hide_exceptions)
        assert kwargs["interval"] == "1m" and kwargs["prepost"] is True
        if isinstance(self.answer, Exception):
            raise self.answer
        if self.answer == "empty":
            return pd.DataFrame(columns=["Open", "High", "Low", "Close", "Volume"])
        bars = BARS[self.ticker]
        index = pd.DatetimeIndex([pd.Timestamp(ts) for ts in bars]).tz_convert(
            "America/New_York")
        return pd.DataFrame(list(bars.values()), index=index,
                            columns=["Open", "High", "Low", "Close", "Volume"])


@pytest.mark.parametrize("answer", ["bars", "empty", ConnectionError("Could not resolve host")])
def test_yfinance_failures_stop_the_fetch_and_record_nothing(tmp_path, monkeypatch, answer):
    """yfinance hides a failed download behind an empty frame unless told not to; a failure
    must not be recorded as a day without bars (it would never be fetched again)."""
    import yfinance as yf

    from finbench.core.errors import DataError

    monkeypatch.setattr(yf, "Ticker", _YahooTicker)
    monkeypatch.setattr(_YahooTicker, "answer", answer)
    monkeypatch.setattr(_YahooTicker, "seen_hidden", [])
    before = yf.config.debug.hide_exceptions
    out = tmp_path / "s"
    old_day = pytest.warns(UserWarning, match="older than 30 days")  # DAY is long past
    if isinstance(answer, Exception):
        with old_day, pytest.raises(DataError, match=r"yfinance AAPL 2025-01-15: the download "
                                    r"failed \(Could not resolve host\); nothing .* retries"):
            fetch(sources.YFinance(), ["AAPL"], DAY, DAY, out, echo=lambda *_: None)
        assert not (out / "fetched.jsonl").exists()
    else:
        with old_day:
            fetch(sources.YFinance(), list(BARS), DAY, DAY, out, echo=lambda *_: None)
        log = [json.loads(line) for line in (out / "fetched.jsonl").read_text().splitlines()]
        if answer == "bars":
            pd.testing.assert_frame_equal(labels_of(out), csv_labels(tmp_path))
            assert [r["rows"] for r in log] == [5, 2]
        else:
            assert [r["rows"] for r in log] == [0, 0]  # a day without bars, recorded so
    assert set(_YahooTicker.seen_hidden) == {False}  # exceptions shown during the call
    assert yf.config.debug.hide_exceptions == before  # and the setting restored after
