"""Agent tools: the median time of a call of each intraday tool on a store, as a run makes
them (the tasks of a date together: random tickers at 12:30 of each of some random dates),
against a naive reference measured in the same run (pandas: the partitions the call needs
read whole, then filtered), with the answers' bars checked to agree. Calls on a date whose
partitions the tools hold already ("warm") and the first of a date ("cold") are shown apart.

Target (issue: agents with gated tools): a call <= 1 ms median on a 500-ticker store.
Run: .venv/bin/python benchmarks/bench_tools.py STORE [DATES] [CALLS_A_DATE]
(a 500-ticker year: ``benchmarks/bench_scale.py``'s store, ``write_store``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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


def main() -> None:
    store = Store(sys.argv[1])
    dates = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    per_date = int(sys.argv[3]) if len(sys.argv) > 3 else 25
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
    medians = {k: float(np.median(v)) * 1000 for k, v in timed.items()}
    for name, ms in sorted(medians.items()):
        print(f"{name:<14} median {ms:8.3f} ms  ({len(timed[name])} calls)")
    print(f"bars (warm) against the naive pandas filter: "
          f"{medians['bars warm'] / medians['naive bars']:.4f}x (target: a call <= 1 ms median)")


if __name__ == "__main__":
    main()
