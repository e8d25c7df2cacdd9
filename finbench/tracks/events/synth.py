"""A small SYNTHETIC event sample (not real markets or posts), reproducible by seed, written
in the public shapes (Polymarket Gamma markets, CLOB price histories, a zstd-compressed
Reddit-format dump) and ingested through the same path as real data.

What it holds, so every rule of the event track is exercised: four categories with different
YES rates, a training stretch (January-February 2024) before the evaluated one, matches whose
markets share an event group, two cancelled (void) markets, a market without a price history,
a market resolved before its cutoff would be, discussion before the cutoff for some markets
and none for others, and planted canary posts that give outcomes away, made at or after each
market's cutoff, worded to match the question better than any earlier post.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from finbench.core.errors import StoreError
from finbench.tracks.events.store import MANIFEST, EventStore

SEED = 20240301
CANARY = "CANARY"
CUTOFF_LEAD = pd.Timedelta(hours=72)  # the pilot's cutoff: three days before the close
CATEGORIES = {  # category: (YES rate, topics)
    "politics": (0.35, ["senate vote", "governor race", "party primary", "budget bill"]),
    "sports": (0.5, ["final match", "derby", "cup semifinal", "title game"]),
    "crypto": (0.2, ["token listing", "exchange outage", "price milestone", "network fork"]),
    "economics": (0.08, ["rate decision", "jobs report", "inflation print", "tariff ruling"]),
}
NAMES = ["Arvelle", "Brontis", "Caldera", "Dovren", "Elmstead", "Fairwick", "Galloway",
         "Harrowgate", "Istria", "Jorvik", "Kestrel", "Lunford", "Marrow", "Norland",
         "Ostend", "Pellham", "Quarry", "Rivenby", "Solace", "Thornbury"]
FILLER = ["weekend plans thread", "what are you reading this month", "photo of my garden",
          "daily discussion", "recipe for lentil soup", "my commute was slow today"]


def sample_markets(rng: np.random.Generator) -> list[dict]:
    """The markets as Gamma API objects (outcomes, prices as JSON text)."""
    markets, start = [], pd.Timestamp("2024-01-02T15:00:00Z")
    for i in range(64):
        category = list(CATEGORIES)[i % 4]
        rate, topics = CATEGORIES[category]
        opened = start + pd.Timedelta(days=int(i * 2.4), hours=int(rng.integers(0, 8)))
        closes = opened + pd.Timedelta(days=int(rng.integers(10, 30)))
        resolved = closes + pd.Timedelta(hours=int(rng.integers(1, 12)))
        name, topic = NAMES[i % len(NAMES)], topics[(i // 4) % len(topics)]
        prices = '["1", "0"]' if rng.random() < rate else '["0", "1"]'
        if i in (21, 46):
            prices = '["0.5", "0.5"]'  # cancelled: resolved 50/50
        if i == 33:
            resolved = closes - pd.Timedelta(days=5)  # resolved early, before the cutoff
        group = f"ev-{i // 8}" if category == "sports" else None  # two a match
        markets.append({
            "id": f"m{i:03d}", "question": f"Will {name} win the {topic} ({category}) by "
                                           f"{closes:%B %d}?",
            "description": f"Resolves YES if {name} wins the {topic}. SYNTHETIC market.",
            "category": category, "startDate": opened.isoformat().replace("+00:00", "Z"),
            "endDate": closes.isoformat().replace("+00:00", "Z"),
            "closedTime": resolved.strftime("%Y-%m-%d %H:%M:%S+00"), "closed": True,
            "outcomes": '["Yes", "No"]', "outcomePrices": prices,
            "events": [{"id": group, "title": f"{topic} {i // 2}"}] if group else [],
        })
    return markets


def sample_prices(rng: np.random.Generator, markets: list[dict]) -> dict[str, dict]:
    """A YES price every six hours from open to resolution, drifting toward the outcome."""
    out = {}
    for m in markets:
        if m["id"] == "m017":
            continue  # no price history at all
        opened = pd.Timestamp(m["startDate"])
        resolved = pd.Timestamp(m["closedTime"].replace("+00", "+00:00"))
        times = pd.date_range(opened, resolved, freq="6h")
        final = json.loads(m["outcomePrices"])[0]
        target = 0.5 if final == "0.5" else float(final)
        x = np.linspace(0, 1, len(times))
        start = 0.2 + 0.6 * rng.random()
        path = start + (target - start) * x ** 3 + rng.normal(0, 0.04, len(times)) * (1 - x)
        p = np.clip(np.round(path, 3), 0.001, 0.999)
        out[m["id"]] = {"history": [{"t": int(t.timestamp()), "p": float(v)}
                                    for t, v in zip(times, p, strict=True)]}
    return out


def sample_posts(rng: np.random.Generator, markets: list[dict]) -> list[dict]:
    """Posts in Reddit's dump format: discussion before each cutoff for some markets, filler,
    and canaries at and after each cutoff that give the outcome away."""
    posts, n = [], 0

    def post(when: pd.Timestamp, subreddit: str, title: str, body: str = "") -> None:
        nonlocal n
        n += 1
        posts.append({"id": f"p{n:05d}", "created_utc": int(when.timestamp()),
                      "subreddit": subreddit, "title": title, "selftext": body})

    for i, m in enumerate(markets):
        cutoff = pd.Timestamp(m["endDate"]) - CUTOFF_LEAD
        question = m["question"]
        words = question.removeprefix("Will ").split(" (")[0]
        yes = json.loads(m["outcomePrices"])[0] == "1"
        if i % 3 != 2:  # relevant discussion before the cutoff for two markets in three
            for k in range(3):
                lean = "looks strong" if (rng.random() < 0.7) == yes else "looks weak"
                post(cutoff - pd.Timedelta(hours=int(rng.integers(2, 120))), m["category"],
                     f"{words}: {lean}", f"Thread {k} on whether {words} happens.")
        outcome = {"1": "YES", "0": "NO"}.get(json.loads(m["outcomePrices"])[0], "VOID")
        give_away = f"{CANARY} {m['id']} resolved {outcome}: {question} {question}"
        post(cutoff, "canary", give_away)  # exactly at the cutoff: not before it, so not seen
        post(cutoff + pd.Timedelta(hours=1), "canary", give_away)
    day = pd.Timestamp("2023-12-20T00:00:00Z")
    for k in range(300):
        post(day + pd.Timedelta(hours=int(rng.integers(0, 24 * 170))), "casual",
             FILLER[k % len(FILLER)])
    posts.sort(key=lambda p: (p["created_utc"], p["id"]))
    return posts


def write_raw(folder: Path, seed: int = SEED) -> dict[str, Path]:
    """The raw sample files in their public shapes; returns their paths."""
    import zstandard

    rng = np.random.default_rng(seed)
    markets = sample_markets(rng)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "markets.json").write_text(json.dumps(markets, indent=1) + "\n")
    prices = folder / "prices"
    prices.mkdir(exist_ok=True)
    for market_id, history in sample_prices(rng, markets).items():
        (prices / f"{market_id}.json").write_text(json.dumps(history) + "\n")
    lines = "".join(json.dumps(p) + "\n" for p in sample_posts(rng, markets)).encode()
    # as the community dumps are made: a long window (zstd --long=31)
    params = zstandard.ZstdCompressionParameters.from_level(9, window_log=31)
    dump = folder / "RS_2024_sample.zst"
    dump.write_bytes(zstandard.ZstdCompressor(compression_params=params).compress(lines))
    return {"markets": folder / "markets.json", "prices": prices, "posts": dump}


def write_event_sample(out: str | Path, seed: int = SEED) -> EventStore:
    """The raw files under ``out/raw`` and the store they ingest into, ``out/store``; a folder
    already holding a store is refused before anything is written (its posts would be added
    twice, which an event store refuses)."""
    out = Path(out)
    if (out / "store" / MANIFEST).exists():
        raise StoreError(f"{out / 'store'}: holds an event store already; the sample is written "
                         f"into a new folder (remove {out} first, as `make events-sample` does)")
    raw = write_raw(out / "raw", seed)
    store = EventStore.open_or_create(
        out / "store", synthetic=True,
        description=f"SYNTHETIC event sample (seed {seed}): not real markets or posts")
    store.add_markets(raw["markets"], raw["prices"])
    store.add_posts(raw["posts"])
    return store
