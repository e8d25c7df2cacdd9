"""Spine speed: labels + contexts vs a naive per-task loop and vs a bare pyarrow read.

Generates 100 tickers x 60 sessions of regular-hours minute bars (synthetic), stores them
date-partitioned, then prints, measured in this run:
  - vectorised labels + contexts time, and the naive per-task pandas loop (timed on a sample of
    tasks and extrapolated), as a speed-up ratio (target >= 100x);
  - the same work against reading the needed columns with pyarrow (target <= 3x), the
    reference keeping tickers dictionary-encoded as the store reads them (and, for comparison,
    the read with tickers as text).
Both in one process that keeps freed memory for reuse, as `finbench run` does from its
first line (:mod:`finbench.core.memory`): without it every repetition pays the bars'
columns again in page faults, and their timings spread by half.
Run: make bench  (or .venv/bin/python benchmarks/bench_spine.py)
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from finbench.core.memory import keep_freed_memory  # noqa: E402  (before pyarrow loads)

keep_freed_memory(arrow_pages=True)

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from _timing import best_of  # noqa: E402

from finbench.core.calendar import get_calendar  # noqa: E402
from finbench.data.store import Store  # noqa: E402
from finbench.tracks.intraday.config import TasksConfig  # noqa: E402
from finbench.tracks.intraday.gate import ContextIndex  # noqa: E402
from finbench.tracks.intraday.labels import compute_labels  # noqa: E402
from finbench.tracks.intraday.tasks import build_tasks  # noqa: E402
from tests.reference import library_calendar, naive_context, naive_daily, naive_labels  # noqa: E402,E501

N_TICKERS, N_SESSIONS, NAIVE_SAMPLE, REPEATS = 100, 60, 60, 7


def make_bars(seed: int = 7) -> tuple[pd.DataFrame, list]:
    cal = get_calendar("XNYS", pd.Timestamp("2024-09-01"), pd.Timestamp("2025-01-31"))
    sessions = list(cal.sessions_in_range("2024-10-01", "2025-01-31")[:N_SESSIONS])
    rng = np.random.default_rng(seed)
    frames = []
    for day in sessions:
        minutes = pd.date_range(cal.session_open(day) - pd.Timedelta(minutes=30),
                                cal.session_close(day), freq="1min", inclusive="left")
        n = len(minutes)
        steps = rng.normal(0, 0.0007, size=(N_TICKERS, n))
        price = 100 * np.exp(np.cumsum(steps, axis=1))
        tick = np.repeat([f"T{i:03d}" for i in range(N_TICKERS)], n)
        o = np.round(price.ravel(), 2)
        frames.append(pd.DataFrame({
            "ticker": tick, "ts": np.tile(minutes, N_TICKERS), "open": o, "high": o + 0.02,
            "low": o - 0.02, "close": o, "volume": 100.0}))
    return pd.concat(frames, ignore_index=True), sessions


def main() -> None:
    bars, sessions = make_bars()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open_or_create(Path(tmp) / "s", description="SYNTHETIC benchmark data")
        store.add_bars(bars.sort_values(["ticker", "ts"]), sources=[{"generator": "bench"}])
        spec = TasksConfig(tickers=[f"T{i:03d}" for i in range(N_TICKERS)],
                           start=sessions[5].date(), end=sessions[-1].date())
        tasks = build_tasks(spec).tasks
        files = sorted(store.path.glob("bars/date=*/*.parquet"))

        columns = ["ticker", "ts", "high", "low", "open", "close", "volume"]

        def bare_read_text():
            for f in files:
                pq.read_table(f, columns=columns)

        def bare_read():  # tickers dictionary-encoded, as the store reads them: the reference
            for f in files:
                pq.read_table(f, columns=columns, read_dictionary=["ticker"])

        def spine():
            arrays = store.read_bar_arrays()
            labels = compute_labels(tasks, arrays)
            index = ContextIndex(tasks, arrays, store.read_headlines(), previous_sessions=5,
                                 headline_hours=24, max_headlines=20)
            _ = index.max_input_time
            return labels

        bare_text = best_of(bare_read_text, REPEATS)
        bare = best_of(bare_read, REPEATS)
        fast = best_of(spine, REPEATS)
        labels = spine()

        frame = store.read_bars()
        sample = tasks.sample(NAIVE_SAMPLE, random_state=1)
        cal = library_calendar("XNYS", "2024-09-01", "2025-01-31")
        t0 = time.perf_counter()
        daily = naive_daily(frame, cal)
        daily_time = time.perf_counter() - t0
        t0 = time.perf_counter()
        naive_labels(sample, frame)
        for task in sample.itertuples():
            naive_context(task, frame, store.read_headlines(), daily)
        per_task = (time.perf_counter() - t0) / NAIVE_SAMPLE
        naive_total = daily_time + per_task * len(tasks)

    print(f"bars: {len(bars):,} rows, {N_TICKERS} tickers x {N_SESSIONS} sessions; "
          f"tasks: {len(tasks):,}; labels ok: {(labels['status'] == 'ok').sum():,}")
    print(f"{'step (best of ' + str(REPEATS) + ')':<42}{'seconds':>10}")
    print(f"{'bare pyarrow read of the columns (text)':<42}{bare_text:>10.3f}")
    print(f"{'  the same, ticker dictionary-encoded':<42}{bare:>10.3f}")
    print(f"{'finbench read + labels + contexts':<42}{fast:>10.3f}")
    print(f"{'naive loop (extrapolated from ' + str(NAIVE_SAMPLE) + ' tasks)':<42}"
          f"{naive_total:>10.1f}")
    print(f"ratio vs bare read: {fast / bare:.2f}x (target <= 3x; {fast / bare_text:.2f}x "
          "against the text read)")
    print(f"speed-up vs naive:  {naive_total / fast:,.0f}x (target >= 100x)")


if __name__ == "__main__":
    main()
