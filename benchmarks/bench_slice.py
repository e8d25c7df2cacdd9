"""Reading a slice of a store: what a run over 50 of a 500-ticker store's tickers reads,
against what a run over all of them reads (target <= 0.2x), all timed in this run.

The store is written (a year of 500 tickers by default, as ``bench_scale.py`` writes it) and
copied laid out by ticker (``finbench data copy --layout ticker``:
:mod:`finbench.data.by_ticker`). The full run's read is the label pass's over the store:
every date partition read as it lies (ticker, ts, high and low) and made bar arrays
(``Store.read_day_table``, ``Store.day_arrays``). The slice's read is the label pass's over
the copy: its 50 tickers' files, a calendar quarter at a time (``Store.read_bar_arrays``);
beside it, the slice read from the store itself (each date partition read whole, its rows
kept). CPU seconds, the median of :data:`TIMES` reads of each in turn, in a new process that
keeps freed memory as a run does. Then whole runs over the slice (the four baselines), on the
store and on the copy, as processes of their own (median of three CPU times), whose rows and
scores must be the same bytes. Last, why a date partition cannot skip to a slice: the same
day written with row groups of fewer tickers, each read with pyarrow's own row-group
selection (each group's ticker statistics against the slice); pyarrow reads whole column
chunks (it uses no page index to skip pages), so a row group is the least a read can skip.
50 tickers drawn at random (seeded), as a user's universe falls across the alphabet.
Run: .venv/bin/python benchmarks/bench_slice.py [--tickers 500 --slice 50 --sessions 252]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_scale import RUNS, baselines_config, process_cost, write_store  # noqa: E402

from finbench.core.memory import ARROW_PAGES_KEPT, keep_freed_memory  # noqa: E402
from finbench.data.by_ticker import copy_by_ticker  # noqa: E402
from finbench.data.store import ROW_GROUP_ROWS, Store  # noqa: E402
from finbench.tracks.intraday.plan import MID_COLUMNS, quarter_ranges  # noqa: E402

COLUMNS = ["ticker", "ts", "high", "low"]
REPEATS = 15
TIMES = 9  # reads of a year timed in turn


def best(fn) -> float:
    """Fastest of :data:`REPEATS` calls, in milliseconds."""
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def slice_read(path: Path, wanted: list[str]):
    """The row groups of ``path`` whose ticker range holds one of ``wanted``, read."""
    with pq.ParquetFile(path, read_dictionary=["ticker"]) as file:
        meta, keep = file.metadata, []
        column = meta.schema.names.index("ticker")
        for i in range(meta.num_row_groups):
            stats = meta.row_group(i).column(column).statistics
            if any(stats.min <= t <= stats.max for t in wanted):
                keep.append(i)
        return file.read_row_groups(keep, columns=COLUMNS, use_threads=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tickers", type=int, default=500)
    parser.add_argument("--slice", type=int, default=50)
    parser.add_argument("--sessions", type=int, default=252,
                        help="sessions of the store (default a year)")
    parser.add_argument("--reads-of", nargs=3, metavar=("STORE", "COPY", "TICKERS"),
                        help=argparse.SUPPRESS)  # (the reads timed in a process of their own)
    args = parser.parse_args()
    if args.reads_of:
        store, copy, wanted = args.reads_of
        print(json.dumps(read_times(store, copy, wanted.split(","))))
        return
    rng = np.random.default_rng(7)
    names = [f"T{i:03d}" for i in range(args.tickers)]
    wanted = sorted(rng.choice(names, args.slice, replace=False).tolist())
    with tempfile.TemporaryDirectory(dir=ROOT / "results") as tmp:
        tmp = Path(tmp)
        copied(tmp, args.tickers, args.sessions, wanted)
        layouts(tmp, args.tickers, wanted)


def read_times(store_path: str, copy_path: str, wanted: list[str]) -> dict[str, float]:
    """CPU seconds of the full read, the slice's from the store and the slice's from the
    copy, each the median of :data:`TIMES` taken in turn, in this process: a new one, which
    keeps freed memory as a run does (pyarrow's pages too, which must be said before pyarrow
    loads), and holds none the copy's writing left."""
    keep_freed_memory()  # (pyarrow's pages: ARROW_PAGES_KEPT, set by the caller)
    store, copy = Store(store_path), Store(copy_path)
    dates = store.dates("bars")

    def full() -> None:
        for day in dates:
            store.day_arrays(store.read_day_table(day, columns=MID_COLUMNS))

    def from_store() -> None:
        for day in dates:
            store.day_arrays(store.read_day_table(day, columns=MID_COLUMNS), tickers=wanted)

    def from_copy() -> None:
        for first, last in quarter_ranges(dates[0], dates[-1]):
            copy.read_bar_arrays(tickers=wanted, start=first, end=last, columns=MID_COLUMNS)

    cpu: dict = {f: [] for f in (full, from_store, from_copy)}
    for _ in range(TIMES):
        for f in cpu:
            t0 = time.process_time()
            f()
            cpu[f].append(time.process_time() - t0)
    return {f.__name__: statistics.median(times) for f, times in cpu.items()}


def copied(tmp: Path, tickers: int, sessions: int, wanted: list[str]) -> None:
    """The slice's read from a copy laid out by ticker against the store's full read, then
    whole runs over the slice on each."""
    days, rows = write_store(tmp / "store", tickers, sessions)
    t0 = time.process_time()
    copy_by_ticker(tmp / "store", tmp / "copy")
    copy_cpu = time.process_time() - t0
    name, value = ARROW_PAGES_KEPT  # read as pyarrow loads: given to the new process
    med = json.loads(subprocess.run(
        [sys.executable, __file__, "--reads-of", str(tmp / "store"), str(tmp / "copy"),
         ",".join(wanted)], check=True, capture_output=True, text=True,
        env={**os.environ, name: value}).stdout)
    size = sum(p.stat().st_size for p in (tmp / "copy").rglob("*.parquet"))
    print(f"{sessions} sessions of {tickers} tickers ({rows:,} bars); a slice of {len(wanted)} "
          f"tickers drawn at random; the copy laid out by ticker: {copy_cpu:.1f} CPU s, "
          f"{size / 1e6:.0f} MB")
    print(f"the full run's read (the store, every ticker): {med['full']:.3f} CPU s (median of "
          f"{TIMES})")
    print(f"the slice's read from the copy: {med['from_copy']:.3f} s: "
          f"{med['from_copy'] / med['full']:.2f}x the full read (target <= 0.2x)")
    print(f"the slice's read from the store: {med['from_store']:.3f} s: "
          f"{med['from_store'] / med['full']:.2f}x")
    runs = {}
    for label, where in (("store", tmp / "store"), ("copy", tmp / "copy")):
        cfg = tmp / f"{label}.toml"
        cfg.write_text(baselines_config(where, wanted, days))
        costs = []
        for i in range(RUNS):
            out = tmp / f"run-{label}-{i}"
            costs.append(process_cost("from finbench.cli import main; rc = main(sys.argv[1:])",
                                      "run", str(cfg), "--out", str(out))[2])
        runs[label] = (statistics.median(costs), out)
    same = all((runs["store"][1] / f).read_bytes() == (runs["copy"][1] / f).read_bytes()
               for f in ("rows.parquet", "scores.parquet"))
    if not same:
        raise SystemExit("a run over the slice on the copy differs from the run on the store")
    print(f"a run over the slice (four baselines), CPU, median of {RUNS}: on the store "
          f"{runs['store'][0]:.2f} s, on the copy {runs['copy'][0]:.2f} s "
          f"({runs['copy'][0] / runs['store'][0]:.2f}x); the same rows and scores")


def layouts(tmp: Path, tickers: int, wanted: list[str]) -> None:
    """Why a date partition cannot skip to a slice: its day written with row groups of fewer
    tickers, each read with pyarrow's row-group selection."""
    days, rows = write_store(tmp / "day", tickers, 1)
    store = Store(tmp / "day")
    day = store.dates("bars")[0]
    table = store.read_day_table(day, columns=("high", "low"))
    whole = pq.read_table(store.path / f"bars/date={day.isoformat()}/part.parquet")
    per = int(np.median(np.unique(table.column("ticker").to_numpy(), return_counts=True)[1]))
    print(f"a day of {tickers} tickers ({rows:,} bars) written again with smaller row groups:")
    print(f"{'layout of the partition':<34}{'groups':>7}{'size':>9}{'footer':>9}"
          f"{'full read':>11}{'slice':>9}{'ratio':>7}{'vs store':>10}")
    reference = None
    for label, group in (("the store's (131,072 rows)", ROW_GROUP_ROWS),
                         ("16 tickers a row group", 16 * per),
                         ("4 tickers a row group", 4 * per),
                         ("a row group per ticker", per)):
        path = tmp / f"{group}.parquet"
        pq.write_table(whole, path, compression="zstd", row_group_size=group,
                       write_statistics=True)
        full = best(lambda p=path: pq.ParquetFile(p, read_dictionary=["ticker"]).read(
            columns=COLUMNS, use_threads=False))
        part = best(lambda p=path: slice_read(p, wanted))
        got = slice_read(path, wanted)
        held = set(got.column("ticker").to_pylist())
        if not set(wanted) <= held:
            raise SystemExit(f"{label}: the slice's read lost tickers")
        meta = pq.read_metadata(path)
        reference = reference or full
        print(f"{label:<34}{meta.num_row_groups:>7}{path.stat().st_size / 1e6:>7.2f}MB"
              f"{meta.serialized_size / 1e3:>7.0f}kB{full:>9.2f}ms{part:>7.2f}ms"
              f"{part / full:>7.2f}{part / reference:>9.2f}x")
    print("ratio: the slice's read over the same layout's full read; vs store: over the "
          "store's own full read (best of 15 reads each)")


if __name__ == "__main__":
    main()
