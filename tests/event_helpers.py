"""Event stores and configs made in a test's folder: markets as a plain table, prices, a dump
of posts, ingested through the real path."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from finbench.tracks.events.store import EventStore


def market(i: int, outcome: str, *, resolved: str, category: str = "weather",
           group: str | None = None, days_open: int = 20) -> dict:
    end = pd.Timestamp(resolved) - pd.Timedelta(hours=1)
    return {"market_id": f"q{i:04d}", "question": f"Will event {i} happen?",
            "description": "", "category": category, "event_group": group or f"g{i}",
            "opened_at": (end - pd.Timedelta(days=days_open)).isoformat(),
            "closes_at": end.isoformat(), "resolved_at": pd.Timestamp(resolved).isoformat(),
            "outcome": outcome}


def make_store(folder: Path, markets: list[dict], posts: list[dict] | None = None,
               price: float = 0.5) -> Path:
    """A store of ``markets``, each priced ``price`` every 12 hours of its life, and
    ``posts`` (Reddit dump lines; one filler post when none)."""
    folder.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(markets)
    frame.to_csv(folder / "markets.csv", index=False)
    rows = []
    for m in markets:
        for t in pd.date_range(m["opened_at"], m["resolved_at"], freq="12h"):
            rows.append({"market_id": m["market_id"], "time": t.isoformat(), "price": price})
    pd.DataFrame(rows).to_csv(folder / "prices.csv", index=False)
    lines = posts or [{"id": "x1", "created_utc": 1704067200, "subreddit": "misc",
                       "title": "hello", "selftext": ""}]
    (folder / "dump.jsonl").write_text("".join(json.dumps(p) + "\n" for p in lines))
    store = EventStore.open_or_create(folder / "store")
    store.add_markets(folder / "markets.csv", folder / "prices.csv")
    store.add_posts(folder / "dump.jsonl")
    return folder / "store"


def event_config(folder: Path, store: Path, models: str, *, start="2024-03-01",
                 end="2024-12-31", lead_hours=24, extra="") -> Path:
    text = (f'track = "events"\n[data]\nstore = "{store}"\n[tasks]\nresolved_from = {start}\n'
            f'resolved_to = {end}\ncutoff = "lead"\nlead_hours = {lead_hours}\n{extra}\n'
            f'[scores]\nbootstrap_replicates = 200\n{models}')
    path = folder / "events.toml"
    path.write_text(text)
    return path


def constants(*ps: float) -> str:
    return "".join(f'[[models]]\nname = "c{p:g}"\nkind = "constant"\np = {p}\n' for p in ps)
