"""The event agents' posts tool on a store of many months: calls as a run of event agents
makes them (each task's cutoff ``now``, a look back of a year and one of a month), against
the reference of an index built from each call's window alone, measured in this run on the
same store, with the answers checked to be the same posts in the same order and scores.

The tool holds an index a month (``post_months.PostMonths``: read and built once while
held) and answers a window from the months it covers with the window's own statistics.
Printed: the calls' CPU, the posts indexed and the day partitions read, with the tasks in
time order and shuffled (agents run concurrently, so cutoffs interleave); the median call
once its months are held; what the tools hold after the calls; the reference's time a call
(timed on a few calls) and the tool's calls against the reference's year-long ones alone;
and the gate's retrieval of the event pilot's tasks over the same posts, a year's look back.
Synthetic posts (``bench_ingest.write_dump``, words drawn from 5,000) added to the event sample's store in a
temporary folder.
Run: .venv/bin/python benchmarks/bench_event_tools.py [--posts 300000 --days 540 --tasks 200]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_ingest import write_dump  # noqa: E402

import finbench.core.bm25 as bm25  # noqa: E402
import finbench.tracks.events.store as event_store  # noqa: E402
from finbench.tracks.events.synth import write_event_sample  # noqa: E402
from finbench.tracks.events.tools import EventTools  # noqa: E402
from tests.test_tools import event_config, naive_posts  # noqa: E402

START = pd.Timestamp("2024-01-01", tz="UTC")  # the first day of write_dump's posts
SAMPLE = 3  # calls the reference is timed on
WORDS = np.array([f"w{i}" for i in range(5000)])  # each in about 0.6% of the posts


class Counted:
    """Counts the day partitions read and the posts indexed while it is entered."""

    def __enter__(self):
        self.partitions = self.posts = 0
        self._read, self._index = event_store.pq.read_table, bm25.PostIndex.__init__

        def read(*args, **kwargs):
            self.partitions += 1
            return self._read(*args, **kwargs)

        def index(obj, texts):
            self.posts += len(texts)
            return self._index(obj, texts)

        event_store.pq.read_table, bm25.PostIndex.__init__ = read, index
        return self

    def __exit__(self, *exc):
        event_store.pq.read_table, bm25.PostIndex.__init__ = self._read, self._index


def calls_of(tasks: int, days: int, seed: int) -> list[tuple[pd.Timestamp, int, str]]:
    """Two calls a task, cutoffs spread over the last third of the posts' days, in time
    order: a look back of 365 days and one of 30, each with a query of four of the posts'
    words."""
    rng = np.random.default_rng(seed)
    first = START + pd.Timedelta(days=days * 2 // 3)
    span = (days - days * 2 // 3) * 86_400
    cutoffs = sorted(first + pd.Timedelta(seconds=int(s)) for s in rng.integers(0, span, tasks))
    return [(now, back, " ".join(rng.choice(WORDS, 4))) for now in cutoffs for back in (365, 30)]


def resident() -> float:
    """This process's resident memory, in MB."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def sweep(store, calls) -> tuple[float, int, int, list[float], list, tuple[int, int, float]]:
    """The calls made by one tools object: (CPU seconds, partitions read, posts indexed,
    the seconds of each call that read nothing, the answers, (posts and months it holds
    after them, the MB more resident then))."""
    before = resident()
    tools = EventTools(store, event_config())
    warm, answers = [], []
    with Counted() as counted:
        cpu = time.process_time()
        for now, back, query in calls:
            t, read = time.perf_counter(), counted.partitions
            result = tools.call("posts", json.dumps({"query": query, "days": back,
                                                     "limit": 10}), now)
            if counted.partitions == read:
                warm.append(time.perf_counter() - t)
            answers.append(json.loads(result.content)["items"])
        cpu = time.process_time() - cpu
    held = (sum(len(m.created) for m in tools.posts.held.values()), len(tools.posts.held),
            resident() - before)
    return cpu, counted.partitions, counted.posts, warm, answers, held


def gate_retrieval(tmp: Path, store) -> tuple[int, float]:
    """The event pilot's retrieval on ``store`` with a look back of 365 days, as a run makes
    it: (tasks, CPU seconds)."""
    from finbench.core.config import ConfigText
    from finbench.tracks.configs import load_config_file
    from finbench.tracks.events.track import EventsTrack

    text = (ROOT / "configs" / "pilot_events.toml").read_text()
    path = tmp / "events.toml"
    mine = (text.replace('"../data/events_sample/store"', f'"{store.path}"')
            .replace("lookback_days = 30", "lookback_days = 365"))
    if mine.count(str(store.path)) != 1 or "lookback_days = 365" not in mine:
        raise SystemExit(f"{path}: the pilot's store and look back were not found to change")
    path.write_text(mine)
    track = EventsTrack(load_config_file(ConfigText.read(path))[0])
    cpu = time.process_time()
    found = track._retrieve_all(lambda *_, **__: None)
    cpu = time.process_time() - cpu
    return len(found), cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--posts", type=int, default=300_000)
    parser.add_argument("--days", type=int, default=540)
    parser.add_argument("--tasks", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=ROOT / "results") as tmp:
        store = write_event_sample(Path(tmp) / "events")
        write_dump(Path(tmp) / "posts.zst", args.posts, args.days, words=WORDS)
        store.add_posts(Path(tmp) / "posts.zst")
        calls = calls_of(args.tasks, args.days, seed=3)
        shuffled = [calls[i] for i in np.random.default_rng(4).permutation(len(calls))]
        rows = {"in time order": sweep(store, calls)}
        gc.collect()  # (the first tools' months freed before the second's are counted)
        rows["shuffled"] = sweep(store, shuffled)
        retrieval = gate_retrieval(Path(tmp), store)
        reference, same = [], True
        year_long = [(c, got) for c, got in zip(calls, rows["in time order"][4], strict=True)
                     if c[1] == 365][-SAMPLE:]
        for (now, back, query), got in year_long:
            with Counted():
                t = time.process_time()
                want = naive_posts(store.read_posts(now - pd.Timedelta(days=back), now), now,
                                   back, query, 10, 10**9)
                reference.append(time.process_time() - t)
            same &= [(i["post_id"], i["score"]) for i in got] == [(w[0], w[4]) for w in want]
        order = dict(zip(map(tuple, shuffled), rows["shuffled"][4], strict=True))
        same &= [order[tuple(c)] for c in calls] == rows["in time order"][4]
    per_call = float(np.median(reference))
    print(f"{args.posts:,} posts over {args.days} days; {args.tasks} tasks, {len(calls)} "
          "posts calls (look backs of 365 and 30 days)")
    print(f"{'tasks':<15}{'CPU s':>8}{'ms a call':>11}{'partitions':>12}{'posts indexed':>15}"
          f"{'warm p50 ms':>13}")
    for label, (cpu, partitions, posts, warm, _, _) in rows.items():
        warm = np.median(warm) if warm else float("nan")
        print(f"{label:<15}{cpu:>8.2f}{cpu / len(calls) * 1e3:>11.2f}{partitions:>12,}"
              f"{posts:>15,}{warm * 1e3:>13.2f}")
    posts, months, grown = rows["in time order"][5]
    print(f"held after the calls in time order: {posts:,} posts in {months} months; the "
          f"process {grown:.0f} MB larger ({grown * 1e6 / max(posts, 1):,.0f} bytes a post)")
    year_long = per_call * len(calls) / 2
    print(f"reference, an index of each call's window alone: {per_call:.2f} s CPU a call "
          f"(median of the last {SAMPLE} year-long windows), {year_long:,.0f} s for the "
          f"year-long calls alone; the tool's {len(calls)} calls in time order against it: "
          f"{rows['in time order'][0] / year_long:.3f}x")
    tasks, cpu = retrieval
    print(f"the gate's retrieval of the sample's {tasks} tasks over the same posts, a look back "
          f"of 365 days: {cpu:.2f} s CPU ({cpu / tasks * 1e3:.0f} ms a task)")
    print(f"the same posts, order and scores as the reference on those calls, and in both orders: {same}")
    if not same:
        raise SystemExit("the posts tool and the reference disagree")


if __name__ == "__main__":
    main()
