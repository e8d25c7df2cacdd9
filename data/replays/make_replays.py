"""Writes the SYNTHETIC replay files beside it: the answers of a made-up "memoriser", a model
that remembers the outcomes it was trained on, to show in the pilots' reports what memorised
outcomes look like (docs/reports.md, "Memorisation"). It knows each outcome up to its
knowledge cutoff and leans to it; after the cutoff it knows nothing and says 0.5 (intraday)
or the market's price at t0 (events). No real model answered these.

Run from the repository's root: .venv/bin/python data/replays/make_replays.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from finbench.runner import run  # noqa: E402

HERE = Path(__file__).resolve().parent
INTRADAY_CUTOFF, EVENTS_CUTOFF = "2024-12-31", "2024-04-30"


def labels_of(config: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The tasks and labels of a run of ``config`` (baselines only: no key is needed)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.toml"
        path.write_text(config)
        out = run(path, Path(tmp) / "run", echo=lambda *_: None)
        return pd.read_parquet(out / "tasks.parquet"), pd.read_parquet(out / "labels.parquet")


def intraday() -> None:
    tasks, labels = labels_of(
        f'[data]\nstore = "{ROOT / "data" / "sample"}"\n[tasks]\n'
        'tickers = ["AAPL", "MSFT", "NVDA"]\nstart = "2024-12-02"\nend = "2025-01-15"\n'
        '[[models]]\nname = "coin"\nkind = "coin"\n')
    both = tasks.merge(labels, on="task_id")
    known = (both["session"].astype(str) <= INTRADAY_CUTOFF) & (both["status"] == "ok")
    up = (both["y"].fillna(0) == 1).to_numpy(bool)
    p = np.where(known, np.where(up, 0.8, 0.2), 0.5)
    pd.DataFrame({"task_id": both["task_id"], "p_up": p}).to_csv(
        HERE / "intraday_memoriser.csv", index=False, lineterminator="\n")


def events() -> None:
    tasks, labels = labels_of(
        f'track = "events"\n[data]\nstore = "{ROOT / "data" / "events_sample" / "store"}"\n'
        '[tasks]\nresolved_from = 2024-03-01\nresolved_to = 2024-06-30\ncutoff = "lead"\n'
        'lead_hours = 72\n[[models]]\nname = "market"\nkind = "market_price"\n')
    ok = labels[labels["status"] == "ok"]
    known = ok["resolved_at"].dt.strftime("%Y-%m-%d") <= EVENTS_CUTOFF
    yes = (ok["y"] == 1).to_numpy(bool)
    p = np.where(known, np.where(yes, 0.85, 0.15), ok["price"].round(2))
    pd.DataFrame({"market_id": ok["market_id"], "p_yes": p}).to_csv(
        HERE / "events_memoriser.csv", index=False, lineterminator="\n")


if __name__ == "__main__":
    intraday()
    events()
