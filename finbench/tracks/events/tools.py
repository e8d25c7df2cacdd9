"""The event track's agent tools (docs/spec.md §12.3), answered from the run's frozen snapshot
at the task's cutoff ``now`` (its ``t0``):

- ``posts``: BM25 (``core/bm25.py``) over the posts made in ``[now - days, now)``, strictly
  before ``now`` as the gate's retrieval (§11.4), the statistics counted over that window
  alone; each post's text cut at the config's ``max_post_chars``;
- ``prices``: the task's own market's YES price history at or before ``now`` (from
  ``start``), each price available at its time;
- ``markets``: other markets whose question was created and whose outcome was known before
  ``now`` (``opened_at`` and ``resolved_at`` before it), searched by their questions (BM25
  over those markets alone), with their outcomes: a market created later, or one (a sibling
  of the same event among them) not yet resolved at ``now``, is never answered.

No item available at or after ``now`` is answered for posts and markets (strictly before),
none after it for prices (at or before, as the gate's price); asking for later is refused.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import pyarrow as pa

from finbench.core.bm25 import PostIndex, candidates, top_k, window_scores
from finbench.core.errors import LookaheadError
from finbench.core.times import to_ns
from finbench.tracks.events.post_months import PostMonths
from finbench.tracks.tools import (
    SchemaTools,
    answered,
    function_tool,
    instant_text,
    instants_text,
    refused,
)

MAX_ITEMS = 1000  # prices one call answers at most
MAX_HITS = 20
MAX_DAYS = 365
SCHEMAS = {
    "posts": function_tool(
        "posts", "Search the posts made before now, in the last `days` days (BM25), best "
        "first.", {
            "query": {"type": "string"},
            "days": {"type": "integer", "minimum": 1, "maximum": MAX_DAYS},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_HITS}}),
    "prices": function_tool(
        "prices", "This market's YES price history up to now. Instants are ISO 8601, one "
        "without an offset in UTC.", {
            "start": {"type": ["string", "null"],
                      "description": "first instant (null: the whole history)"}}),
    "markets": function_tool(
        "markets", "Search other markets whose question was asked and whose outcome was "
        "known before now, by their questions (BM25), with their outcomes.", {
            "query": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_HITS}}),
}


class EventTools(SchemaTools):
    """The tools over an event store snapshot (``store``: its markets, prices and posts)
    for the config ``config``; holds what the snapshot alone determines (the markets'
    question index; the posts of the months last searched, :class:`PostMonths`), nothing of
    any task: an answer is the same whatever was asked before."""

    SCHEMAS = SCHEMAS

    def __init__(self, store, config) -> None:
        self.store, self.max_chars = store, config.context.max_post_chars
        self.snapshot_sha256 = store.snapshot_sha256
        markets = store.markets()
        known = markets[markets["outcome"].notna()].sort_values(
            ["resolved_at", "market_id"], kind="stable").reset_index(drop=True)
        self.markets = known
        self.resolved_ns = to_ns(known["resolved_at"])
        self.opened_ns = to_ns(known["opened_at"])
        self.market_index = PostIndex(known["question"].astype(str).tolist())
        self.market_ids = known["market_id"].to_numpy(object)  # (ties rank by id)
        # what an item shows, in Arrow's columns: a call takes its few rows at once (a pandas
        # row apiece cost about 1 ms a call)
        self._shown = pa.Table.from_pandas(known[["question", "category", "event_group",
                                                  "outcome"]], preserve_index=False
                                           ).combine_chunks()
        # each market's prices in time order, rows [lo, hi) of two arrays (a frame per
        # market took 1.4 s to make for 20,000 markets of 100 prices)
        prices = store.prices().sort_values(["market_id", "time"], kind="stable")
        self.price_ns = to_ns(prices["time"])
        self.price_values = prices["price"].to_numpy(float)
        ids = prices["market_id"].to_numpy(object)
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]]) if len(ids) else np.empty(
            0, np.int64)
        ends = np.r_[starts[1:], len(ids)] if len(ids) else starts
        self.price_rows = {m: (lo, hi) for m, lo, hi in zip(
            ids[starts].tolist(), starts.tolist(), ends.tolist(), strict=True)}
        self.posts = PostMonths(store.read_posts)

    def now(self, task: Mapping) -> pd.Timestamp:
        return pd.Timestamp(task["t0"]).tz_convert("UTC")

    # -- the tools ---------------------------------------------------------------------------
    def _posts(self, now, task, *, query: str, days: int, limit: int):
        found = self.posts.search(now - pd.Timedelta(days=days), now, query, limit)
        if (found.created >= now.value).any():  # cannot happen: the window ends before now
            raise LookaheadError(f"tool posts: a post made at or after now ({now}) answered")
        items = [{"post_id": i, "subreddit": sub, "text": text[:self.max_chars],
                  "created_utc": at, "available_at": at, "score": round(score, 6)}
                 for i, sub, text, at, score in zip(found.ids, found.subreddits, found.texts,
                                                    instants_text(found.created),
                                                    found.scores, strict=True)]
        return answered("posts", now, items, found.created, query=query, days=days,
                        ids=tuple(found.ids))

    def _prices(self, now, task, *, start: str | None):
        first = None
        if start is not None:
            try:
                first = pd.Timestamp(start)
            except (ValueError, TypeError):
                return refused("bad_arguments", now, f"prices: start {start!r} is no ISO 8601 "
                               "instant")
            first = first.tz_localize("UTC") if first.tzinfo is None else first.tz_convert("UTC")
            if first > now:
                return refused("future", now, f"prices: start {instant_text(first)} is after "
                               f"now ({instant_text(now)})")
        lo, hi = self.price_rows.get(task["market_id"], (0, 0)) if task is not None else (0, 0)
        times = self.price_ns[lo:hi]
        lowest = np.iinfo(np.int64).min if first is None else first.value
        keep = (times <= now.value) & (times >= lowest)
        if int(keep.sum()) > MAX_ITEMS:
            return refused("too_many", now, f"prices: {int(keep.sum())} prices, more than "
                           f"{MAX_ITEMS}: give a later start")
        at = times[keep]
        values = self.price_values[lo:hi][keep].tolist()
        items = [{"time": t, "price": p, "available_at": t}
                 for t, p in zip(instants_text(at), values, strict=True)]
        return answered("prices", now, items, at, start=start)

    def _markets(self, now, task, *, query: str, limit: int):
        hi = int(np.searchsorted(self.resolved_ns, now.value, side="left"))  # known before
        touched: list = []
        scores = window_scores([(self.market_index, 0, hi)], query, touched=touched)
        # the markets that can be best: of the query's postings, those opened before now
        # (a market resolves after it opens), so that no pass is made over every score
        touched = [at[self.opened_ns[at] < now.value] for at in touched]
        keep = candidates(scores, touched, limit)
        best = keep[top_k(scores[keep], self.resolved_ns[keep], self.market_ids[keep], limit)]
        shown = self._shown.take(best).to_pydict()
        items = [{"market_id": i, "question": question, "category": category,
                  "event_group": group, "opened_at": opened, "resolved_at": resolved,
                  "available_at": resolved, "outcome": outcome, "score": round(s, 6)}
                 for i, question, category, group, opened, resolved, outcome, s in zip(
                     self.market_ids[best].tolist(), shown["question"], shown["category"],
                     shown["event_group"], instants_text(self.opened_ns[best]),
                     instants_text(self.resolved_ns[best]), shown["outcome"],
                     scores[best].tolist(), strict=True)]
        latest = self.resolved_ns[best]
        if (latest >= now.value).any():  # cannot happen: the window ends before now
            raise LookaheadError(f"tool markets: a market resolved at or after now ({now})")
        return answered("markets", now, items, latest, query=query,
                        ids=tuple(i["market_id"] for i in items))
