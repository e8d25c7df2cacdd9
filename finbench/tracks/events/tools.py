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
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from finbench.core.bm25 import PostIndex, top_k, window_scores
from finbench.core.errors import LookaheadError
from finbench.core.times import to_ns
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
MONTHS_HELD = 14  # always held: a look back of MAX_DAYS touches 13 months, calls across a
POSTS_HELD = 1_000_000  # month's end 14; more while the months held hold fewer posts than this
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


@dataclass(frozen=True)
class _Month:
    """The posts made in one month, sorted by time, and their index."""

    index: PostIndex
    created: np.ndarray  # ns
    ids: np.ndarray  # object
    subreddits: list[str]
    texts: list[str]


def _starts(parts: list[tuple[_Month, int, int]]) -> list[int]:
    """Where each part's posts start in the window they make together."""
    return np.cumsum([0] + [hi - lo for _, lo, hi in parts[:-1]]).tolist()


class EventTools(SchemaTools):
    """The tools over an event store snapshot (``store``: its markets, prices and posts)
    for the config ``config``; holds what the snapshot alone determines (the markets'
    question index; the posts of the months last searched, a month's index built once while
    held), nothing of any task: an answer is the same whatever was asked before."""

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
        prices = store.prices().sort_values(["market_id", "time"], kind="stable")
        self.prices = {m: g.reset_index(drop=True) for m, g in prices.groupby("market_id")}
        self._months: dict[pd.Period, _Month] = {}  # the months last searched, the last last

    def now(self, task: Mapping) -> pd.Timestamp:
        return pd.Timestamp(task["t0"]).tz_convert("UTC")

    # -- the tools ---------------------------------------------------------------------------
    def _month(self, month: pd.Period) -> _Month:
        """The posts made in ``month`` (UTC), indexed; read once and held while they are among
        the :data:`MONTHS_HELD` months last searched, or while the months held hold no more
        than :data:`POSTS_HELD` posts (agents run in their cutoffs' order, a few at a time: a
        month is searched again soon after, or not at all)."""
        held = self._months.pop(month, None)
        if held is None:
            start = month.start_time.tz_localize("UTC")
            posts = self.store.read_posts(start, (month + 1).start_time.tz_localize("UTC"))
            texts = posts.column("text").to_pylist()
            held = _Month(PostIndex(texts), posts.column("created_utc").cast(pa.int64())
                          .to_numpy(), np.asarray(posts.column("post_id").to_pylist(),
                                                  dtype=object),
                          posts.column("subreddit").to_pylist(), texts)
        self._months[month] = held  # (the last searched last)
        while (len(self._months) > MONTHS_HELD
               and sum(len(m.created) for m in self._months.values()) > POSTS_HELD):
            self._months.pop(next(iter(self._months)))
        return held

    def _window(self, now: pd.Timestamp, days: int) -> list[tuple[_Month, int, int]]:
        """The posts made in ``[now - days, now)``: each month they fall in, with the range of
        its posts in the window."""
        start = now - pd.Timedelta(days=days)
        first = start.tz_localize(None).to_period("M")
        last = (now - pd.Timedelta(1)).tz_localize(None).to_period("M")
        parts = []
        for month in pd.period_range(first, last, freq="M"):
            held = self._month(month)
            parts.append((held, int(np.searchsorted(held.created, start.value, side="left")),
                          int(np.searchsorted(held.created, now.value, side="left"))))
        return parts  # (strictly before now)

    def _posts(self, now, task, *, query: str, days: int, limit: int):
        parts = self._window(now, days)
        scores = window_scores([(m.index, lo, hi) for m, lo, hi in parts], query)
        keep = np.flatnonzero(scores > 0)  # the posts top_k ranks (window positions)
        starts = _starts(parts)
        cuts = np.searchsorted(keep, [*starts, len(scores)]).tolist()
        local = [keep[a:z] - at + lo  # each part's kept posts, as positions in its month
                 for (_, lo, _), at, a, z in zip(parts, starts, cuts[:-1], cuts[1:], strict=True)]
        created = np.concatenate([np.empty(0, np.int64)]
                                 + [m.created[j] for (m, _, _), j in zip(parts, local, strict=True)])
        ids = np.concatenate([np.empty(0, object)]
                             + [m.ids[j] for (m, _, _), j in zip(parts, local, strict=True)])
        best = top_k(scores[keep], created, ids, limit)  # positions among the kept
        if (created[best] >= now.value).any():  # cannot happen: the window ends before now
            raise LookaheadError(f"tool posts: a post made at or after now ({now}) answered")
        items = []
        for b, at in zip(best.tolist(), instants_text(created[best]), strict=True):
            k = int(np.searchsorted(cuts, b, side="right")) - 1  # its part
            month, j = parts[k][0], int(local[k][b - cuts[k]])
            items.append({"post_id": ids[b], "subreddit": month.subreddits[j],
                          "text": month.texts[j][:self.max_chars], "created_utc": at,
                          "available_at": at, "score": round(float(scores[keep[b]]), 6)})
        return answered("posts", now, items, created[best], query=query, days=days,
                        ids=tuple(i["post_id"] for i in items))

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
        history = self.prices.get(task["market_id"]) if task is not None else None
        times = np.empty(0, np.int64) if history is None else to_ns(history["time"])
        lowest = np.iinfo(np.int64).min if first is None else first.value
        keep = (times <= now.value) & (times >= lowest)
        if int(keep.sum()) > MAX_ITEMS:
            return refused("too_many", now, f"prices: {int(keep.sum())} prices, more than "
                           f"{MAX_ITEMS}: give a later start")
        at = times[keep]
        values = ([] if history is None else history["price"].to_numpy(float)[keep].tolist())
        items = [{"time": t, "price": p, "available_at": t}
                 for t, p in zip(instants_text(at), values, strict=True)]
        return answered("prices", now, items, at, start=start)

    def _markets(self, now, task, *, query: str, limit: int):
        hi = int(np.searchsorted(self.resolved_ns, now.value, side="left"))  # known before
        scores = self.market_index.scores(0, hi, query)
        visible = self.opened_ns[:hi] < now.value  # (a market resolves after it opens)
        scores = np.where(visible, scores, 0.0)
        known = self.markets.iloc[:hi]
        best = top_k(scores, self.resolved_ns[:hi], known["market_id"].to_numpy(object), limit)
        rows = known.iloc[best]
        items = [{"market_id": r.market_id, "question": r.question, "category": r.category,
                  "event_group": r.event_group, "opened_at": instant_text(r.opened_at),
                  "resolved_at": instant_text(r.resolved_at), "available_at":
                  instant_text(r.resolved_at), "outcome": r.outcome,
                  "score": round(float(s), 6)}
                 for r, s in zip(rows.itertuples(), scores[best], strict=True)]
        latest = self.resolved_ns[best]
        if (latest >= now.value).any():  # cannot happen: the window ends before now
            raise LookaheadError(f"tool markets: a market resolved at or after now ({now})")
        return answered("markets", now, items, latest, query=query,
                        ids=tuple(i["market_id"] for i in items))
