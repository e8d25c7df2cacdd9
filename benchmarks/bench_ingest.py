"""Event ingest: a community dump of posts into an event store, as `finbench data ingest
--posts` reads it (zstd, one JSON object a line, Reddit's dump format).

Prints, for dumps of N/4 and N posts (comments of about 600 bytes with the fields a real
dump carries, a submission in ten), each ingested by `finbench data ingest` in a process of
its own: posts a second and peak RSS (targets: >= 100k posts a second, and peak memory flat:
the larger dump within 1.25x the smaller's). Beside it, the reference a line-by-line reader
cannot beat, timed in the same run: decompressing the dump and `json.loads` of every line,
nothing checked, nothing written.
Synthetic posts, generated into a temporary folder; ``--text-times`` writes each post's
``created_utc`` as text (``"1704067200"``), as older dumps do.
Run: .venv/bin/python benchmarks/bench_ingest.py [--posts 5000000 --days 90] [--text-times]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WORDS = np.array("the market rate cut fed vote poll odds yes no will price march june election "
                 "senate house court ruling final game team win lose season player trade deal "
                 "bitcoin etf approval deadline report".split())


def write_dump(path: Path, posts: int, days: int, seed: int = 5, words: np.ndarray = WORDS,
               *, text_times: bool = False) -> None:
    """``posts`` lines over ``days`` days from 2024-01-01, in time order, zstd level 3, each
    text drawn from ``words``; ``text_times``: ``created_utc`` written as text, as older
    dumps have it."""
    import zstandard

    rng = np.random.default_rng(seed)
    start = 1_704_067_200  # 2024-01-01 00:00 UTC
    times = np.sort(rng.integers(start, start + days * 86_400, posts))
    block = 50_000
    with open(path, "wb") as raw, zstandard.ZstdCompressor(level=3).stream_writer(raw) as out:
        for at in range(0, posts, block):
            lines = []
            for k in range(at, min(at + block, posts)):
                text = " ".join(words[rng.integers(0, len(words), 12 + k % 40)])
                common = {"id": f"x{k:09x}",
                          "created_utc": str(times[k]) if text_times else int(times[k]),
                          "subreddit": ("politics", "wallstreetbets", "sports")[k % 3],
                          "author": f"user{k % 9973}", "score": int(k % 50) - 5,
                          "edited": False if k % 7 else int(times[k]) + 60,
                          "distinguished": None, "stickied": False,
                          "author_flair_text": None, "gilded": 0, "controversiality": 0,
                          "retrieved_on": int(times[k]) + 86_400, "subreddit_id": "t5_2cneq",
                          "permalink": f"/r/x/comments/{k:x}/", "all_awardings": []}
                if k % 10 == 0:
                    common.update(title=text[:60], selftext=text, num_comments=k % 300,
                                  url=f"https://example.org/{k}", over_18=False)
                else:
                    common.update(body=text, parent_id=f"t3_{k // 10:x}",
                                  link_id=f"t3_{k // 10:x}")
                lines.append(json.dumps(common))
            out.write(("\n".join(lines) + "\n").encode())


REFERENCE = """
import io, json, sys, zstandard
with open(sys.argv[1], "rb") as raw:
    reader = zstandard.ZstdDecompressor(max_window_size=2**31).stream_reader(raw)
    n = 0
    for line in io.TextIOWrapper(reader, encoding="utf-8"):
        json.loads(line)
        n += 1
print(n)
"""

INGEST = """
import resource, sys
from finbench.cli import main
rc = main(["data", "ingest", "--out", sys.argv[1], "--posts", sys.argv[2]])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(rc)
"""


def timed(code: str, *args: str) -> tuple[float, float, str]:
    """(seconds, peak RSS in GiB, stderr) of ``python -c code args`` as a new process."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - t0
    peak = (int(done.stderr.split()[-1]) / 1024**2 if code is INGEST else float("nan"))
    return seconds, peak, done.stderr


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--posts", type=int, default=5_000_000)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--text-times", action="store_true",
                        help="created_utc written as text, as older dumps have it")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(dir=ROOT / "results") as tmp:
        tmp = Path(tmp)
        for posts in (args.posts // 4, args.posts):
            dump = tmp / f"posts-{posts}.zst"
            t0 = time.perf_counter()
            write_dump(dump, posts, max(1, args.days * posts // args.posts),
                       text_times=args.text_times)
            print(f"generated {posts:,} posts ({dump.stat().st_size / 1e6:.0f} MB) in "
                  f"{time.perf_counter() - t0:.0f}s", file=sys.stderr)
            reference, _, _ = timed(REFERENCE, str(dump))
            seconds, peak, _ = timed(INGEST, str(tmp / f"store-{posts}"), str(dump))
            rows.append((posts, reference, seconds, peak))
            dump.unlink()
    print(f"{'posts':>10}{'json.loads s':>14}{'ingest s':>10}{'posts/s':>10}"
          f"{'vs json.loads':>15}{'peak GiB':>9}")
    for posts, reference, seconds, peak in rows:
        print(f"{posts:>10,}{reference:>14.1f}{seconds:>10.1f}{posts / seconds:>10,.0f}"
              f"{seconds / reference:>14.2f}x{peak:>9.2f}")
    (small, *_, small_peak), (large, *_, large_peak) = rows
    print(f"peak memory, {large:,} posts against {small:,}: {large_peak / small_peak:.2f}x "
          f"(target <= 1.25x: flat); posts a second at {large:,}: "
          f"{large / rows[1][2]:,.0f} (target >= 100,000)")


if __name__ == "__main__":
    main()
