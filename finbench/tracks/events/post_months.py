"""The posts of an event store searched by window, for the gate's retrieval (docs/spec.md
§11.4) and the agents' ``posts`` tool (§12.3): an index a calendar month (UTC), read and
built once while held, and a window ``[start, end)`` scored across the months it covers
with its own statistics (:func:`~finbench.core.bm25.window_scores`: the same scores, bit
for bit, as one index over the window's posts alone). What is held depends on what was
searched before; what a search answers never does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from finbench.core.bm25 import PostIndex, candidates, top_k, window_scores
from finbench.tracks.events.store import posts_between

POSTS_HELD = 500_000  # months held beyond the last window's (about 670 bytes a post)


@dataclass(frozen=True)
class Month:
    """The posts made in one month, sorted by time then id, and their index."""

    index: PostIndex
    created: np.ndarray  # ns
    ids: np.ndarray  # object
    subreddits: list[str]
    texts: list[str]


@dataclass(frozen=True)
class Found:
    """The best posts of a window for a query, best first."""

    ids: list[str]
    created: np.ndarray  # ns
    subreddits: list[str]
    texts: list[str]
    scores: list[float]


class PostMonths:
    """Posts by month from ``read(start, end)``: the posts made in ``[start, end)``, sorted
    by time then id (:meth:`~finbench.tracks.events.store.EventStore.read_posts`). A month is
    held while it is one of the last window's or the one searched before them (a run asks
    its tasks in their cutoffs' order, a few at a time, so the next window's months are
    those or the month after), and the months searched earlier while the months held hold
    no more than :data:`POSTS_HELD` posts, the longest unsearched let go first."""

    def __init__(self, read: Callable[[pd.Timestamp, pd.Timestamp], pa.Table]) -> None:
        self.read = read
        self.held: dict[pd.Period, Month] = {}  # the months last searched, the last last

    @classmethod
    def of(cls, posts: pa.Table) -> PostMonths:
        """The posts of a table in memory (sorted by time then id)."""
        return cls(lambda start, end: posts_between(posts, start, end))

    def month(self, month: pd.Period) -> Month:
        """The posts made in ``month``, indexed."""
        held = self.held.pop(month, None)
        if held is None:
            start = month.start_time.tz_localize("UTC")
            posts = self.read(start, (month + 1).start_time.tz_localize("UTC"))
            texts = posts.column("text").to_pylist()
            held = Month(PostIndex(texts), posts.column("created_utc").cast(pa.int64())
                         .to_numpy(), np.asarray(posts.column("post_id").to_pylist(),
                                                 dtype=object),
                         posts.column("subreddit").to_pylist(), texts)
        self.held[month] = held  # (the last searched last)
        return held

    def window(self, start: pd.Timestamp, end: pd.Timestamp) -> list[tuple[Month, int, int]]:
        """The posts made in ``[start, end)``: each month they fall in, with the range of its
        posts in the window."""
        if start >= end:
            return []
        first, last = (t.tz_convert("UTC").tz_localize(None).to_period("M")
                       for t in (start, end - pd.Timedelta(1)))
        parts = []
        for month in pd.period_range(first, last, freq="M"):
            held = self.month(month)
            parts.append((held, int(np.searchsorted(held.created, start.value, side="left")),
                          int(np.searchsorted(held.created, end.value, side="left"))))
        while (len(self.held) > len(parts) + 1
               and sum(len(m.created) for m in self.held.values()) > POSTS_HELD):
            self.held.pop(next(iter(self.held)))
        return parts

    def search(self, start: pd.Timestamp, end: pd.Timestamp, query: str, k: int) -> Found:
        """The ``k`` best posts made in ``[start, end)`` against ``query`` (BM25 with the
        window's statistics; ties by time, the later first, then id)."""
        parts = self.window(start, end)
        touched: list[np.ndarray] = []
        scores = window_scores([(m.index, lo, hi) for m, lo, hi in parts], query,
                               touched=touched)
        keep = candidates(scores, touched, k)  # the posts top_k ranks (positions in the window)
        starts = np.cumsum([0] + [hi - lo for _, lo, hi in parts])[:-1].tolist()
        cuts = np.searchsorted(keep, [*starts, len(scores)]).tolist()
        local = [keep[a:z] - at + lo  # each month's kept posts, as positions in that month
                 for (_, lo, _), at, a, z in zip(parts, starts, cuts[:-1], cuts[1:],
                                                 strict=True)]
        months = [m for m, _, _ in parts]
        created = np.concatenate([np.empty(0, np.int64)]
                                 + [m.created[j] for m, j in zip(months, local, strict=True)])
        ids = np.concatenate([np.empty(0, object)]
                             + [m.ids[j] for m, j in zip(months, local, strict=True)])
        best = top_k(scores[keep], created, ids, k).tolist()  # positions among the kept
        where = [(months[p], int(local[p][b - cuts[p]]))
                 for b in best for p in [int(np.searchsorted(cuts, b, side="right")) - 1]]
        return Found(ids[best].tolist(), created[best], [m.subreddits[j] for m, j in where],
                     [m.texts[j] for m, j in where], scores[keep[best]].tolist())
