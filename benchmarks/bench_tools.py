"""Agent tools: the median time of a call of each intraday tool on a store, as a run makes
them (the tasks of a date together: random tickers at 12:30 of each of some random dates),
against a naive reference measured in the same run (pandas: the partitions the call needs
read whole, then filtered), with the answers' bars checked to agree. Calls on a date whose
partitions the tools hold already ("warm") and the first of a date ("cold") are shown apart.

``headlines`` searches synthetic headlines (HEADLINES of them, default 100,000, over the
store's dates and tickers, their words drawn from a Zipf law so that a query's common words
hold many postings), ingested into a store of their own in a temporary folder: at each
call's ``now``, a random query of two to four words, half the calls for one ticker's
headlines. The first call naming a ticker (which groups every headline's rows by ticker) is
shown apart.
The naive reference, on a few calls: the headlines available by ``now`` filtered by pandas,
a new BM25 index over them, every scoring one ordered in Python; the same ids and scores.

Target (issue: agents with gated tools): a call <= 1 ms median on a 500-ticker store.
Run: .venv/bin/python benchmarks/bench_tools.py STORE [DATES] [CALLS_A_DATE] [HEADLINES]
(a 500-ticker year: ``benchmarks/bench_scale.py``'s store, ``write_store``).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from finbench.core.bm25 import PostIndex  # noqa: E402
from finbench.data.ingest import ingest_headlines  # noqa: E402
from finbench.data.store import Store  # noqa: E402
from finbench.tracks.intraday.config import TasksConfig  # noqa: E402
from finbench.tracks.intraday.tools import IntradayTools  # noqa: E402


def naive_bars(store: Store, ticker: str, start: pd.Timestamp, now: pd.Timestamp) -> int:
    """The bars a ``bars`` call of ``[start, now]`` holds, by pandas over whole partitions."""
    frames = []
    for day in pd.date_range(start.tz_convert(store.timezone).date(),
                             now.tz_convert(store.timezone).date()):
        rel = store.path / f"bars/date={day.date()}/part.parquet"
        if rel.is_file():
            frames.append(pd.read_parquet(rel))
    bars = pd.concat(frames) if frames else pd.DataFrame({"ticker": [], "ts": []})
    done = bars["ts"] + pd.Timedelta(seconds=store.bar_seconds)
    return int(((bars["ticker"] == ticker) & (bars["ts"] >= start) & (done <= now)).sum())


def synthetic_headlines(count: int, days: list, tickers: list[str], timezone: str,
                        rng) -> pd.DataFrame:
    """``count`` headlines published at random minutes of ``days`` (local 06:00 to 20:00),
    each tagged with one to three consecutive ``tickers`` and holding six to twelve words of a
    vocabulary of 5,000 drawn from a Zipf law (the first word, "w0", the most common)."""
    weights = 1.0 / np.arange(1, 5001) ** 1.1
    words = rng.choice(5000, size=(count, 12), p=weights / weights.sum())
    length = rng.integers(6, 13, count)
    day = np.array([pd.Timestamp(d).tz_localize(timezone).value for d in days], np.int64)
    ns = (day[rng.integers(len(days), size=count)]
          + rng.integers(6 * 60, 20 * 60, count) * 60_000_000_000)
    first = rng.integers(len(tickers), size=count)  # and the next ones, each listed once
    tags = (first[:, None] + np.arange(3)) % len(tickers)
    tagged = rng.integers(1, min(3, len(tickers)) + 1, count)
    return pd.DataFrame({
        "id": [f"h{i:07d}" for i in range(count)],
        "published_at": pd.to_datetime(ns, utc=True),
        "tickers": [",".join(tickers[t] for t in row[:n])
                    for row, n in zip(tags, tagged, strict=True)],
        "headline": [" ".join(f"w{w}" for w in row[:n])
                     for row, n in zip(words, length, strict=True)],
        "source": "synthetic"})


def naive_headlines(news: pd.DataFrame, now: pd.Timestamp, query: str, ticker: str | None,
                    limit: int) -> list[tuple[str, float]]:
    """(id, score) of the best ``limit`` headlines available by ``now``: a new index over
    those alone, every scoring one ordered in Python (score, the later first, id)."""
    available = news[news["available_at"] <= now]
    scores = PostIndex(available["headline"].astype(str).tolist()).scores(
        0, len(available), query)
    ranked = sorted((-s, -r.available_at.value, r.id) for r, s in zip(
        available.itertuples(), scores, strict=True)
        if s > 0 and (ticker is None or ticker in list(r.tickers)))
    return [(i, round(float(-s), 6)) for s, _, i in ranked[:limit]]


def time_headlines(count: int, days: list, tickers: list[str], store: Store, calls: int,
                   rng, timed: dict) -> None:
    """``headlines`` calls on ``count`` synthetic headlines (see the module), into ``timed``;
    the first three (and each ticker's first) checked against :func:`naive_headlines`."""
    from finbench.tracks.tools import canonical

    with tempfile.TemporaryDirectory() as tmp:
        frame = synthetic_headlines(count, days, tickers, store.timezone, rng)
        frame.to_parquet(Path(tmp) / "headlines.parquet")
        t0 = time.perf_counter()
        ingest_headlines(Path(tmp) / "headlines.parquet", Path(tmp) / "news")
        news_store = Store(Path(tmp) / "news")
        tools = IntradayTools(news_store, TasksConfig(tickers=[tickers[0]], start=str(days[-1]),
                                                      end=str(days[-1])))
        print(f"headlines: {count:,} ingested and indexed in {time.perf_counter() - t0:.2f} s")
        news = news_store.read_headlines()
        seen: set[str] = set()
        for k in range(calls):
            day = days[int(rng.integers(len(days) // 4, len(days)))]
            now = pd.Timestamp(f"{day} 12:30").tz_localize(store.timezone).tz_convert("UTC")
            query = " ".join(f"w{int(w)}" for w in rng.zipf(1.3, int(rng.integers(2, 5)))
                             if w < 5000) or "w1"
            ticker = tickers[int(rng.integers(len(tickers)))] if k % 2 else None
            args = {"query": query, "ticker": ticker, "limit": 10}
            t0 = time.perf_counter()
            result = tools.call("headlines", canonical(args), now)
            kind = ("first with a ticker" if k == 1 else "a ticker's" if ticker is not None
                    else "any ticker's")
            timed.setdefault(f"headlines, {kind}", []).append(time.perf_counter() - t0)
            new = ticker is not None and ticker not in seen
            if ticker is not None:
                seen.add(ticker)
            if k < 3 or (new and len(seen) <= 3):
                t0 = time.perf_counter()
                want = naive_headlines(news, now, query, ticker, 10)
                timed.setdefault("naive headlines", []).append(time.perf_counter() - t0)
                got = [(i["id"], i["score"]) for i in json.loads(result.content)["items"]]
                assert got == want, (now, args, got, want)


def main() -> None:
    store = Store(sys.argv[1])
    dates = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    per_date = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    headlines = int(sys.argv[4]) if len(sys.argv) > 4 else 100_000
    days = store.dates("bars")
    tickers = sorted(pd.read_parquet(store.path / f"bars/date={days[-1]}/part.parquet",
                                     columns=["ticker"])["ticker"].unique())
    tools = IntradayTools(store, TasksConfig(tickers=[tickers[0]], start=str(days[-1]),
                                             end=str(days[-1])))
    rng = np.random.default_rng(0)
    print(f"{store.path}: {len(tickers)} tickers, {len(days)} dates; {dates} dates x "
          f"{per_date} calls a tool")
    timed: dict[str, list[float]] = {}
    for day in sorted(days[int(i)] for i in rng.choice(np.arange(60, len(days)), dates,
                                                       replace=False)):
        now = pd.Timestamp(f"{day} 12:30").tz_localize(store.timezone).tz_convert("UTC")
        for k in range(per_date):
            ticker = tickers[int(rng.integers(len(tickers)))]
            start = now - pd.Timedelta(hours=3)
            for name, args in (("bars", {"ticker": ticker, "start": start.isoformat(),
                                         "end": None, "resolution": "1min"}),
                               ("daily", {"ticker": ticker, "sessions": 20}),
                               ("calendar", {"date": str(day)})):
                t0 = time.perf_counter()
                result = tools.call(name, json.dumps(args), now)
                timed.setdefault(f"{name} {'cold' if k == 0 else 'warm'}", []).append(
                    time.perf_counter() - t0)
                if name == "bars" and k < 3:
                    t0 = time.perf_counter()
                    want = naive_bars(store, ticker, start, now)
                    timed.setdefault("naive bars", []).append(time.perf_counter() - t0)
                    got = sum(item["bars"] for item in json.loads(result.content)["items"])
                    assert got == want, (ticker, now, got, want)
    time_headlines(headlines, days, tickers, store, dates * per_date, rng, timed)
    medians = {k: float(np.median(v)) * 1000 for k, v in timed.items()}
    for name, ms in sorted(medians.items()):
        print(f"{name:<32} median {ms:8.3f} ms  ({len(timed[name])} calls)")
    print(f"bars (warm) against the naive pandas filter: "
          f"{medians['bars warm'] / medians['naive bars']:.4f}x (target: a call <= 1 ms median)")
    searches = timed.get("headlines, a ticker's", []) + timed.get("headlines, any ticker's", [])
    print(f"headlines (but the first with a ticker) median {np.median(searches) * 1000:.3f} "
          f"ms, against the naive index and filter: "
          f"{np.median(searches) * 1000 / medians['naive headlines']:.4f}x (target: a call <= "
          f"1 ms median)")


if __name__ == "__main__":
    main()
