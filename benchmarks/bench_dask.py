"""Dask on one machine: the year of 500 tickers (four baselines) as month shards and as
six-month shards on a LocalCluster of this machine's cores, against the same run in one
process, each its CPU with every process it started (workers, nannies, helpers), in turn so
that all three meet the same spells of load: RUNS invocations each, medians and the ratio
of each pair (target: the cluster <= 1.5x the single process's CPU). Then where a cluster
run's CPU goes: an empty LocalCluster started and closed (what Dask costs before any
shard, with the process's imports of Dask and FinBench), one shard of six months run
alone in a new process without scoring (as the cluster's shards run), and the merge of the
two six-month shards in a new process.
Every cluster run's scores are checked equal to the single process's, byte for byte.
Synthetic data as benchmarks/bench_scale.py writes it, in a temporary folder under results/.
Run: .venv/bin/python benchmarks/bench_dask.py [--tickers 500 --sessions 252]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_scale import baselines_config, command_cost, generated_store  # noqa: E402

RUNS = 3

EMPTY_CLUSTER = """\
import resource, sys
from distributed import Client, LocalCluster
from finbench.cluster import _forked_workers, _local_cluster
if __name__ == "__main__":
    with _forked_workers():  # as a run starts its workers
        cluster = _local_cluster(LocalCluster, int(sys.argv[1]))
        with Client(cluster) as client:
            client.submit(int, 1).result()
        cluster.close()
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    print(own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime, file=sys.stderr)
"""

SHARD_ALONE = """\
import resource, sys
from finbench.core.memory import keep_freed_memory
keep_freed_memory(arrow_pages=True)  # as a run and its workers keep freed memory
from finbench.runner import run
run(sys.argv[1], sys.argv[2], shard=(sys.argv[3], sys.argv[4]), echo=lambda *_: None,
    score=False)
own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
print(own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime, file=sys.stderr)
"""


def python_cost(code: str, *args: str) -> float:
    """CPU seconds (with its children) of ``code`` run by a new Python process."""
    done = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True,
                          text=True, cwd=ROOT)
    return float(done.stderr.split()[-1])


def main() -> None:
    import os

    parser = argparse.ArgumentParser()
    parser.add_argument("--tickers", type=int, default=500)
    parser.add_argument("--sessions", type=int, default=252)
    args = parser.parse_args()
    workers = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(dir=ROOT / "results") as tmp:
        tmp = Path(tmp)
        days, _ = generated_store(tmp / "store", args.tickers, args.sessions,
                                  f"; a LocalCluster of {workers} workers")
        base = baselines_config(tmp / "store", args.tickers, days)
        configs = {"one process": tmp / "single.toml", "month shards": tmp / "months.toml",
                   "six-month shards": tmp / "six.toml"}
        configs["one process"].write_text(base)
        configs["month shards"].write_text(base + '[executor]\nkind = "dask"\nmonths = 1\n')
        configs["six-month shards"].write_text(base + '[executor]\nkind = "dask"\nmonths = 6\n')
        cpu: dict[str, list[float]] = {name: [] for name in configs}
        wall: dict[str, list[float]] = {name: [] for name in configs}
        for k in range(RUNS):
            for name, cfg in configs.items():
                out = tmp / f"{cfg.stem}_{k}"
                seconds, _, spent = command_cost("run", str(cfg), "--out", str(out))
                cpu[name].append(spent)
                wall[name].append(seconds)
                if name != "one process":
                    same = ((out / "scores.parquet").read_bytes()
                            == (tmp / "single_0" / "scores.parquet").read_bytes())
                    if not same:
                        raise SystemExit(f"{name}: scores differ from the single process's")
        empty = statistics.median(python_cost(EMPTY_CLUSTER, str(workers)) for _ in range(RUNS))
        half = next(p for p in sorted((tmp / "six_0" / "shards").iterdir()))
        start, end = half.name.split("_")
        alone = python_cost(SHARD_ALONE, str(configs["one process"]), str(tmp / "alone"),
                            start, end)
        shards = sorted(str(p) for p in (tmp / "six_0" / "shards").iterdir())
        _, _, merge = command_cost("merge", *shards, "--out", str(tmp / "merged"))
        startup = python_cost("import resource, sys, finbench.cli, finbench.runner; "
                              "r = resource.getrusage(resource.RUSAGE_SELF); "
                              "print(r.ru_utime + r.ru_stime, file=sys.stderr)")

    single = statistics.median(cpu["one process"])
    print(f"{'':<20}{'CPU (median)':>14}{'wall (median)':>15}   CPU of each invocation")
    for name in configs:
        print(f"{name:<20}{statistics.median(cpu[name]):>12.2f} s"
              f"{statistics.median(wall[name]):>13.2f} s   "
              + ", ".join(f"{c:.2f}" for c in cpu[name]))
    for name in ("month shards", "six-month shards"):
        ratios = [c / s for c, s in zip(cpu[name], cpu["one process"], strict=True)]
        print(f"{name}: {statistics.median(ratios):.2f}x the single process's CPU (each pair: "
              f"{', '.join(f'{r:.2f}x' for r in ratios)}; target <= 1.5x)")
    print("where a cluster run's CPU goes (each its own new process, CPU with its children):")
    print(f"  an empty LocalCluster of {workers} workers (forked from a server forked from "
          f"the process, which imported Dask and FinBench), started and closed, with the "
          f"process's imports: {empty:.2f} s")
    print(f"  Python importing finbench's run (every process pays it): {startup:.2f} s")
    print(f"  one six-month shard alone, unscored ({start}..{end}): {alone:.2f} s")
    print(f"  the merge of the two six-month shards (reads, orders, writes, scores): "
          f"{merge:.2f} s")
    print(f"  the single process, for comparison: {single:.2f} s")


if __name__ == "__main__":
    main()
