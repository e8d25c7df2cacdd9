"""``finbench data fetch``: vendor bars into a store, resumable per (ticker, day), idempotent.

Each (ticker, day) is staged as its own Parquet file the moment it arrives (so a killed fetch
loses at most the one in flight); when every ticker of a day is staged, the day lands in the
store in one atomic partition write and each (ticker, day) is logged with its provenance in
``fetched.jsonl``. Ticker-days already logged for the same vendor and feed are never fetched
again, so fetching the same range twice leaves the store unchanged.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pandas as pd

from finbench.core.calendar import get_calendar, parse_session_date
from finbench.core.errors import DataError
from finbench.core.names import ticker_problem
from finbench.core.progress import Countdown
from finbench.data.schema import BARS_SCHEMA, validate_bars
from finbench.data.store import Store
from finbench.data.vendors.base import CANONICAL, Vendor

EXTENDED_START = pd.Timedelta(hours=4)   # 04:00 local
EXTENDED_END = pd.Timedelta(hours=20)    # 20:00 local
LOG = "fetched.jsonl"
STAGING = ".staging"


def fetched_keys(store: Store) -> set[str]:
    path = store.path / LOG
    if not path.is_file():
        return set()
    keys = set()
    for line in path.read_text().splitlines():
        if line.endswith("}"):
            keys.add(json.loads(line)["key"])
    return keys


def fetch(vendor: Vendor, tickers: list[str], start, end, store_path, *, calendar="XNYS",
          echo=print) -> dict:
    """Fetch every (ticker, session) in ``[start, end]`` not yet fetched from this vendor/feed."""
    first = parse_session_date(start, what="--start")
    last = parse_session_date(end, what="--end")
    problems = request_problems(tickers, first, last)
    if problems:
        raise DataError(f"{vendor.name}: nothing fetched: {'; '.join(problems)}")
    sessions = get_calendar(calendar, first, last).sessions_in_range(first, last)
    if not len(sessions):
        raise DataError(f"{vendor.name}: nothing fetched: {first.date()}..{last.date()} holds "
                        f"no session of the exchange {calendar}")
    store = Store.open_or_create(store_path)
    done = fetched_keys(store)
    total = len(sessions) * len(tickers)
    skipped = sum(_key(vendor, t, d) in done for d in sessions for t in tickers)
    echo(f"{vendor.name}: {skipped}/{total} ticker-days already fetched")
    fetched = rows = 0
    progress = Countdown(vendor.name, total, echo, unit="ticker-days", done=skipped)
    for day in sessions:
        todo = [t for t in tickers if _key(vendor, t, day) not in done]
        if not todo:
            continue
        stage = store.path / STAGING / f"{vendor.name}-{vendor.feed or ''}" / str(day.date())
        stage.mkdir(parents=True, exist_ok=True)
        local = pd.Timestamp(day).tz_localize(store.timezone)
        start_utc = (local + EXTENDED_START).tz_convert("UTC")
        end_utc = (local + EXTENDED_END).tz_convert("UTC")
        for ticker in todo:
            staged = stage / f"{ticker}.parquet"
            if not staged.is_file():
                raw = vendor.fetch_day(ticker, pd.Timestamp(day), start_utc, end_utc)
                _stage(raw, staged, vendor, ticker, day, store.bar_seconds)
            fetched += 1
            progress.add()
        parts = [pd.read_parquet(stage / f"{t}.parquet") for t in todo]
        bars = pd.concat(parts, ignore_index=True).sort_values(["ticker", "ts"], kind="stable")
        rows += len(bars)
        if len(bars):
            store.add_bars(bars.reset_index(drop=True), sources=[])
        store.append_log(LOG, [json.dumps(_provenance(vendor, ticker, day, len(part)))
                               for ticker, part in zip(todo, parts, strict=True)])
        shutil.rmtree(stage)
    if fetched:
        store.add_source({
            "table": "bars", "vendor": vendor.name, "feed": vendor.feed,
            "sdk": vendor.package, "sdk_version": vendor.sdk_version(),
            "request": {"tickers": tickers, "start": str(first.date()), "end": str(last.date())},
            "bar_timestamp": vendor.bar_timestamp, "zone": vendor.zone,
            "fetched_at": _now(), "ticker_days": fetched, "log": LOG})
    return {"fetched": fetched, "rows": rows, "skipped": skipped,
            "snapshot_sha256": store.snapshot_sha256}


def fetch_until(vendor: Vendor, tickers: list[str], day, until, store_path) -> int:
    """The bars of ``day`` (a session) each ticker's vendor gives from the extended day's
    start to ``until`` (a UTC instant; at most the extended day's end), those that ended by
    then, validated and added to the
    store (replacing the ticker-days: a live day's bars so far, `finbench live`); the day is
    not recorded as fetched, so a later ``fetch`` of it takes it whole. Returns the bars."""
    store = Store.open_or_create(store_path)
    local = pd.Timestamp(pd.Timestamp(day).date()).tz_localize(store.timezone)
    start_utc = (local + EXTENDED_START).tz_convert("UTC")
    until = min(pd.Timestamp(until).tz_convert("UTC"), (local + EXTENDED_END).tz_convert("UTC"))
    length = pd.Timedelta(seconds=store.bar_seconds)
    parts = []
    for ticker in tickers:
        raw = vendor.fetch_day(ticker, local, start_utc, until)
        if not len(raw):
            continue
        bars, problems = validate_bars(raw, file=f"{vendor.name}:{ticker}:{local.date()}",
                                       ticker=None, timezone=None, bar_timestamp="start",
                                       bar_seconds=store.bar_seconds)
        if problems:
            raise DataError(f"{vendor.name} {ticker} {local.date()}: the vendor's bars break "
                            "validation rules; nothing of that day was written", problems)
        parts.append(bars[CANONICAL][bars["ts"] + length <= until])
    bars = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=CANONICAL)
    if len(bars):
        store.add_bars(bars.sort_values(["ticker", "ts"], kind="stable").reset_index(drop=True),
                       sources=[{"vendor": vendor.name, "feed": vendor.feed, "live": True,
                                 "day": str(local.date()), "until": until.isoformat()}])
    return len(bars)


def request_problems(tickers: list[str], first: pd.Timestamp, last: pd.Timestamp) -> list[str]:
    """What is wrong with a fetch request (before a store is made): dates out of order,
    no ticker, a ticker that is none (an empty entry of ``--tickers``) or listed twice."""
    problems = [f"--end {last.date()} is before --start {first.date()}"] if last < first else []
    if not tickers:
        problems.append("--tickers names no ticker")
    problems += [f"--tickers: {why}" for t in tickers if (why := ticker_problem(t))]
    twice = sorted({t for t in tickers if tickers.count(t) > 1})
    if twice:
        problems.append(f"--tickers: {', '.join(twice)} listed more than once")
    return problems


def _stage(raw: pd.DataFrame, path: Path, vendor: Vendor, ticker: str, day, bar_seconds: int):
    if len(raw):
        bars, problems = validate_bars(raw, file=f"{vendor.name}:{ticker}:{day.date()}",
                                       ticker=None, timezone=None, bar_timestamp="start",
                                       bar_seconds=bar_seconds)
        if problems:
            raise DataError(f"{vendor.name} {ticker} {day.date()}: the vendor's bars break "
                            "validation rules; nothing of that day was written", problems)
    else:
        bars = BARS_SCHEMA.empty_table().to_pandas()
    tmp = path.with_suffix(".tmp")
    bars[CANONICAL].to_parquet(tmp, index=False)
    tmp.replace(path)


def _provenance(vendor: Vendor, ticker: str, day, rows: int) -> dict:
    return {"key": _key(vendor, ticker, day), "vendor": vendor.name, "feed": vendor.feed,
            "request": vendor.request(ticker, pd.Timestamp(day)), "rows": rows,
            "sdk_version": vendor.sdk_version(), "fetched_at": _now()}


def _key(vendor: Vendor, ticker: str, day) -> str:
    return f"{vendor.name}|{vendor.feed or ''}|{ticker}|{pd.Timestamp(day).date()}"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
