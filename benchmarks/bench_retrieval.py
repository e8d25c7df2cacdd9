"""Event retrieval: one index of a batch of posts, queried per task with its window's own
statistics, against the reference of a bm25s index built from each task's window alone (what
the event track did before), both measured in this run on the same synthetic posts.

Prints: the index's build time per post, the query time per task (p50, p95) over windows of
the given size (a query: the window's scores, then its best 5 posts, as the event track's
search finds them; the scores alone too), the reference's per-task time (timed on a few
tasks), their ratio, that both rank the same posts with the same scores (bit for bit) on
those tasks, and a projection to 20,000 markets over 5M posts (the build grows with the
posts, a query with the postings of its terms inside its window).
Run: .venv/bin/python benchmarks/bench_retrieval.py [POSTS] [TASKS] [WINDOW]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from finbench.core.memory import keep_freed_memory  # noqa: E402

keep_freed_memory(arrow_pages=True)  # as `finbench run` does first, where a search is made

from finbench.core.bm25 import PostIndex, candidates, top_k, window_scores  # noqa: E402
from tests.reference import naive_bm25_scores  # noqa: E402

VOCABULARY = 20_000  # distinct words of the synthetic posts (Zipf-distributed)


def synthetic_posts(n: int, seed: int = 1) -> list[str]:
    """``n`` posts of 5-40 words drawn from a Zipf law over :data:`VOCABULARY` words."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(VOCABULARY)])
    ranks = np.minimum(rng.zipf(1.2, size=n * 40), VOCABULARY) - 1
    lengths = rng.integers(5, 41, n)
    ends = np.cumsum(lengths)
    flat = words[ranks[:ends[-1]]]
    return [" ".join(flat[e - k:e]) for e, k in zip(ends, lengths, strict=True)]


def main() -> None:
    posts = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    tasks = int(sys.argv[2]) if len(sys.argv) > 2 else 500
    window = int(sys.argv[3]) if len(sys.argv) > 3 else 50_000
    texts = synthetic_posts(posts)
    rng = np.random.default_rng(2)
    queries = [" ".join(f"w{int(i)}" for i in rng.integers(0, 2000, 8)) for _ in range(tasks)]
    his = rng.integers(window, posts + 1, tasks)

    t = time.process_time()
    index = PostIndex(texts)
    build = time.process_time() - t
    # each post's time and id: its position (no two posts share a time here, so no tie of
    # score and time is broken by id)
    order = np.arange(posts, dtype=np.int64)
    spent, scoring = [], []
    cpu0 = time.process_time()
    for hi, q in zip(his, queries, strict=True):
        lo, hi = int(hi) - window, int(hi)
        t = time.perf_counter()
        touched: list = []  # a query as the event track's search makes it: the scores of the
        got = window_scores([(index, lo, hi)], q, touched=touched)  # window, then its best 5
        scored = time.perf_counter()
        keep = candidates(got, touched, 5)
        keep[top_k(got[keep], order[lo:hi][keep], order[lo:hi][keep], 5)]
        spent.append(time.perf_counter() - t)
        scoring.append(scored - t)
    querying = time.process_time() - cpu0
    p50, p95 = np.percentile(spent, [50, 95])
    scoring50 = float(np.median(scoring))

    sample = 5
    ref, same = [], True
    for hi, q in zip(his[:sample], queries[:sample], strict=True):
        lo, hi = int(hi) - window, int(hi)
        t = time.perf_counter()
        want = naive_bm25_scores(texts[lo:hi], q)
        ref.append(time.perf_counter() - t)
        touched = []
        got = window_scores([(index, lo, hi)], q, touched=touched)
        ids = np.array([f"p{i}" for i in range(hi - lo)], object)
        created = np.arange(hi - lo)
        keep = candidates(got, touched, 5)
        same &= got.tolist() == want.tolist() and \
            keep[top_k(got[keep], created[keep], ids[keep], 5)].tolist() == top_k(
                want, created, ids, 5).tolist()
    per_task = float(np.median(ref))

    print(f"{posts:,} posts, {tasks} tasks, windows of {window:,} posts")
    print(f"index built once: {build:.2f} s CPU ({build / posts * 1e6:.1f} us a post)")
    print(f"query (the window's scores, then its best 5): p50 {p50 * 1e3:.3f} ms, p95 "
          f"{p95 * 1e3:.3f} ms; the scores alone p50 {scoring50 * 1e3:.3f} ms")
    print(f"reference, an index of the window per task: {per_task * 1e3:.1f} ms a task "
          f"(median of {sample})")
    print(f"speed-up per task: {per_task / p50:,.0f}x; the same posts and scores, bit for "
          f"bit: {same}")
    print(f"this run's retrieval: the build and its {tasks:,} queries, "
          f"{(build + querying) / 60:.1f} CPU-minutes")
    projected = build / posts * 5e6 + 2e4 * p50 * (window_scale := 5e6 / posts)
    print(f"projected, 20,000 markets over 5M posts (build linear in posts, a query linear "
          f"in its window's postings, windows {window_scale:.0f}x these): "
          f"{projected / 60:.1f} CPU-minutes")


if __name__ == "__main__":
    main()
