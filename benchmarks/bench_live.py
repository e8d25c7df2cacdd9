"""A simulated live season: 60 sessions x 20 tickers x 3 horizons x 3 models, on a fake
clock, against the tests' own RFC 3161 authority (tests/tsa_server.py), the bars fed into the
store as the clock passes (tests/live_feed.py) from a SYNTHETIC source of 20 tickers.

Prints: the seals on time and late, whether ``finbench verify`` passes, whether the season's
run scores exactly as a backtest of the same config on the same bars, and the seal latency
(wall seconds from a horizon's last answer to its seal in the ledger, the TSA's round trip
and the token's check included) at p50 / p99 / max, against the target p99 <= 5 s. Also the
wall time of a horizon's run (its plan, label pass and answers). About 5 minutes.

Run: .venv/bin/python benchmarks/bench_live.py [SESSIONS] [TICKERS]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import finbench.live.season as season  # noqa: E402
from finbench.data.store import Store  # noqa: E402
from finbench.data.synth import TickerSpec, generate  # noqa: E402
from finbench.live.clock import FakeClock  # noqa: E402
from finbench.live.ledger import Ledger  # noqa: E402
from finbench.live.verify import verify_live  # noqa: E402
from finbench.runner import run  # noqa: E402
from tests.live_feed import LiveFeed  # noqa: E402
from tests.tsa_server import TimestampAuthority  # noqa: E402

HISTORY = 20  # sessions of bars before the season (the baselines' windows)


def source_store(path: Path, tickers: int, sessions: int) -> tuple[list[str], list]:
    specs = tuple(TickerSpec(f"T{i:02d}", f"Company {i}", 50.0 + 10 * i, 0.015, 5_000.0)
                  for i in range(tickers))
    bars, news = generate(seed=20261205, sessions=sessions + HISTORY, tickers=specs)
    store = Store.open_or_create(path, synthetic=True, description="SYNTHETIC live benchmark")
    store.add_bars(bars, sources=[{"generator": "bench_live"}])
    store.add_headlines(news, sources=[{"generator": "bench_live"}])
    days = sorted(bars["ts"].dt.tz_convert("America/New_York").dt.date.unique())
    return [s.ticker for s in specs], days[HISTORY:]


def main() -> None:
    sessions = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    n_tickers = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    with tempfile.TemporaryDirectory(prefix="finbench-bench-live-") as tmp:
        tmp = Path(tmp)
        import os

        os.environ["FINBENCH_CACHE_DIR"] = str(tmp / "cache")
        tickers, days = source_store(tmp / "source", n_tickers, sessions)
        first, last = days[0], days[-1]
        feed = LiveFeed(tmp / "source", tmp / "store", tickers, first, history=HISTORY)
        start = pd.Timestamp(first, tz="America/New_York").replace(hour=8).tz_convert(
            "UTC").to_pydatetime()
        clock = FakeClock(start, on_advance=feed)
        feed(start)
        tsa = TimestampAuthority(clock=clock.now)
        (tmp / "root.pem").write_bytes(tsa.ca_pem())
        body = (f'[data]\nstore = "store"\n[tasks]\ntickers = {tickers!r}\n'
                f'start = "{first}"\nend = "{last}"\n'
                '[[models]]\nname = "coin"\nkind = "coin"\n'
                '[[models]]\nname = "momentum"\nkind = "momentum"\nmin_count = 5\n'
                '[[models]]\nname = "scripted"\nkind = "scripted"\n'
                'answers = [\'{"p_up": 0.52, "lower": -0.01, "upper": 0.012}\']\n')
        (tmp / "live.toml").write_text(body + f'[live]\ntsa_url = "{tsa.url}"\n'
                                              'tsa_root = "root.pem"\n')
        latencies, horizon_runs = [], []
        sealing, running = season.seal_horizon, season.run

        def timed(fn, into: list):
            """``fn``, each call's seconds appended to ``into``."""
            def call(*args, **kw):
                t = time.perf_counter()
                try:
                    return fn(*args, **kw)
                finally:
                    into.append(time.perf_counter() - t)
            return call

        season.seal_horizon, season.run = timed(sealing, latencies), timed(running, horizon_runs)
        t0 = time.perf_counter()
        out = season.live(tmp / "live.toml", tmp / "season", clock=clock, until=last,
                          echo=lambda *_: None)
        wall = time.perf_counter() - t0
        season.seal_horizon, season.run = sealing, running
        seals = [e for e in Ledger(out).entries() if e["kind"] == "seal"]
        on_time = sum(e["on_time"] for e in seals)
        problems, facts = verify_live(out)
        (tmp / "backtest.toml").write_text(body)
        backtest = run(tmp / "backtest.toml", tmp / "backtest", echo=lambda *_: None)
        cols = ["slice_kind", "slice", "model", "n", "brier", "log_loss", "coverage",
                "winkler"]
        same = pd.read_parquet(out / "run" / "scores.parquet")[cols].equals(
            pd.read_parquet(backtest / "scores.parquet")[cols])
        lat = np.array(latencies)
        runs = np.array(horizon_runs)
        print(f"{len(days)} sessions x {n_tickers} tickers x 3 horizons x 3 models: "
              f"{facts.get('commits')} answers in {len(seals)} seals, {on_time} on time, "
              f"{len(seals) - on_time} late; verify {'passes' if not problems else problems[:3]}"
              f"; the season's run scores {'exactly as' if same else 'NOT as'} a backtest")
        print(f"seal latency after a horizon's last answer: p50 {np.percentile(lat, 50):.3f} s, "
              f"p99 {np.percentile(lat, 99):.3f} s, max {lat.max():.3f} s (target p99 <= 5 s)")
        print(f"a horizon's run (plan, labels, answers): p50 {np.percentile(runs, 50):.2f} s, "
              f"max {runs.max():.2f} s; the season {wall:.0f} s wall on the fake clock")
        tsa.close()


if __name__ == "__main__":
    main()
