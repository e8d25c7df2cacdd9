"""Reading a slice of a store: what a run over 50 of a 500-ticker store's tickers reads,
against what a run over all of them reads (target <= 0.2x), and what other layouts of a date
partition would give, all timed in this run on the same synthetic day.

A run reads each date partition as the label pass does (``Store.read_day_table``: ticker,
ts, high and low), then keeps its tickers' rows (``Store.day_arrays``); so today a slice
costs what the whole store costs. The layouts a slice could skip by, each the same day
written again and read with pyarrow's own row-group selection (each row group's ticker
statistics against the slice), are printed beside it: the store's own (row groups of
131,072 rows), a row group per ticker, and row groups of 4 and of 16 tickers; for each, the
file's size, its footer's, the full read, the slice's read and their ratio. pyarrow reads
whole column chunks (it uses no page index to skip pages), so a row group is the least a
read can skip. Then the other layout: partitions by ticker (a file per ticker holding a
month of sessions, every column) against the store's date partitions, the month read whole
and the slice's files alone. Best of 15 reads each; 50 tickers drawn at random (seeded), as
a user's universe falls across the alphabet.
Run: .venv/bin/python benchmarks/bench_slice.py [--tickers 500 --slice 50 --sessions 21]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_scale import write_store  # noqa: E402

from finbench.data.store import ROW_GROUP_ROWS, Store  # noqa: E402

COLUMNS = ["ticker", "ts", "high", "low"]
REPEATS = 15


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
    parser.add_argument("--sessions", type=int, default=21,
                        help="sessions of the by-ticker comparison (default a month)")
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    names = [f"T{i:03d}" for i in range(args.tickers)]
    wanted = sorted(rng.choice(names, args.slice, replace=False).tolist())
    with tempfile.TemporaryDirectory(dir=ROOT / "results") as tmp:
        tmp = Path(tmp)
        days, rows = write_store(tmp / "store", args.tickers, 1)
        store = Store(tmp / "store")
        day = store.dates("bars")[0]
        table = store.read_day_table(day, columns=("high", "low"))
        every = best(lambda: store.day_arrays(store.read_day_table(day, columns=("high", "low"))))
        mine = best(lambda: store.day_arrays(store.read_day_table(day, columns=("high", "low")),
                                             tickers=wanted))
        print(f"a day of {args.tickers} tickers ({rows:,} bars); a slice of {args.slice} "
              "tickers drawn at random")
        print(f"the store as a run reads it: all tickers {every:.2f} ms, the slice "
              f"{mine:.2f} ms: {mine / every:.2f}x (target <= 0.2x)")
        whole = pq.read_table(store.path / f"bars/date={day.isoformat()}/part.parquet")
        per = int(np.median(np.unique(table.column("ticker").to_numpy(), return_counts=True)[1]))
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
              "store's own full read")
        by_ticker(tmp, args.tickers, args.sessions, wanted)


def by_ticker(tmp: Path, tickers: int, sessions: int, wanted: list[str]) -> None:
    """The other layout a slice could skip by: partitions by ticker (a file per ticker
    holding ``sessions`` sessions) against the store's date partitions, each read whole as
    the label pass reads, over the same bars."""
    _, rows = write_store(tmp / "month", tickers, sessions)
    store = Store(tmp / "month")
    days = store.dates("bars")
    folder = tmp / "by_ticker"
    folder.mkdir()
    every = pa.concat_tables([pq.read_table(store.path / f"bars/date={d.isoformat()}/part.parquet")
                              for d in days])  # every column, as a store by ticker would hold
    for name in pc.unique(every.column("ticker")).to_pylist():
        pq.write_table(every.filter(pc.equal(every.column("ticker"), name)),
                       folder / f"{name}.parquet", compression="zstd", write_statistics=True)

    def read_files(names: list[str]) -> None:  # each file as the store reads a partition
        for name in names:
            with pq.ParquetFile(folder / f"{name}.parquet", read_dictionary=["ticker"]) as file:
                file.read(columns=COLUMNS, use_threads=False)

    names = sorted(p.stem for p in folder.glob("*.parquet"))
    store_full = best(lambda: [store.day_arrays(store.read_day_table(d, columns=("high", "low")))
                               for d in days])
    store_mine = best(lambda: [store.day_arrays(store.read_day_table(d, columns=("high", "low")),
                                                tickers=wanted) for d in days])
    files_full, files_mine = best(lambda: read_files(names)), best(lambda: read_files(wanted))
    print(f"{sessions} sessions of {tickers} tickers ({rows:,} bars), read whole:")
    print(f"  the store's date partitions: all tickers {store_full:.1f} ms, the slice "
          f"{store_mine:.1f} ms ({store_mine / store_full:.2f}x)")
    print(f"  a file per ticker: all tickers {files_full:.1f} ms ({files_full / store_full:.2f}x "
          f"the store's), the slice {files_mine:.1f} ms ({files_mine / store_full:.2f}x the "
          "store's full read)")


if __name__ == "__main__":
    main()
