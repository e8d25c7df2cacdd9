"""The event track's time gate (docs/spec.md §11.4): what a forecaster of a market at ``t0``
may see. Posts made strictly before ``t0`` (in the lookback window), ranked by BM25 against
the question over those posts alone; the market's last price at or before ``t0``; the
market's question and terms, public from ``opened_at``. Anything later raises
:class:`~finbench.core.errors.LookaheadError`; every task's context knows its latest input
time and the digest of what it holds (the post ids among it)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from finbench.core.errors import LookaheadError
from finbench.core.times import NO_TIME, to_ns
from finbench.tracks.events.post_months import PostMonths


@dataclass
class Retrieved:
    """The posts retrieved for one task, best first."""

    post_ids: list[str]
    created: list[pd.Timestamp]
    subreddits: list[str]
    texts: list[str]
    scores: list[float]


def retrieve(posts: pa.Table | PostMonths, tasks: pd.DataFrame, *, lookback: pd.Timedelta,
             k: int) -> list[Retrieved]:
    """For each task, the best ``k`` posts made in ``[t0 - lookback, t0)`` against its
    question, scored with that window's statistics alone; ``posts``: a table (sorted by
    created_utc then post_id) or the store's posts by month (:class:`PostMonths`, each
    month's index built once while held)."""
    months = PostMonths.of(posts) if isinstance(posts, pa.Table) else posts
    out = []
    for row in tasks.itertuples(index=False):
        found = months.search(row.t0 - lookback, row.t0, row.question, k)
        if (found.created >= row.t0.value).any():  # cannot happen: the window ends before t0
            raise LookaheadError(f"{row.task_id}: a post made at or after t0 was retrieved")
        out.append(Retrieved(found.ids, [pd.Timestamp(c, tz="UTC") for c in found.created],
                             found.subreddits, found.texts, found.scores))
    return out


@dataclass
class EventContexts:
    """The gated contexts of a batch of tasks (one per row of ``tasks``)."""

    tasks: pd.DataFrame  # task_id, market_id, t0, question, description, category, ...
    price: np.ndarray  # the market's YES price at or before t0 (NaN: none)
    price_time: pd.Series
    retrieved: list[Retrieved]

    def __post_init__(self) -> None:
        t0 = to_ns(self.tasks["t0"])
        post_max = np.array([max(r.created).value if r.created else NO_TIME
                             for r in self.retrieved], dtype=np.int64)
        # NO_TIME is the smallest int64: a missing part never wins the maximum
        latest = np.maximum.reduce([to_ns(self.tasks["opened_at"]),
                                    to_ns(self.price_time), post_max])
        late = (latest > t0) | (post_max >= t0)
        if late.any():
            i = int(np.flatnonzero(late)[0])
            raise LookaheadError(f"{self.tasks['task_id'].iat[i]}: context holds input from "
                                 f"{pd.Timestamp(latest[i], tz='UTC')}, not before t0 "
                                 f"{self.tasks['t0'].iat[i]} (posts must be made before t0; "
                                 "prices and the market's terms at or before it)")
        self.max_input_time = pd.Series(pd.to_datetime(latest, utc=True))

    def digests(self) -> list[str]:
        """SHA-256 of each task's context: its question and terms, price and posts."""
        return [hashlib.sha256(json.dumps(self.record(i), sort_keys=True).encode()).hexdigest()
                for i in range(len(self.tasks))]

    def record(self, i: int) -> dict:
        """What the context of task ``i`` holds, as JSON-ready values."""
        row, r = self.tasks.iloc[i], self.retrieved[i]
        return {"task_id": row["task_id"], "question": row["question"],
                "description": row["description"], "category": row["category"],
                "closes_at": row["closes_at"].isoformat(),
                "price": None if np.isnan(self.price[i]) else float(self.price[i]),
                "price_time": None if pd.isna(self.price_time.iat[i])
                else self.price_time.iat[i].isoformat(),
                "posts": [{"id": p, "created_utc": c.isoformat()}
                          for p, c in zip(r.post_ids, r.created, strict=True)]}
