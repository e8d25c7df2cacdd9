"""Scale: 500 tickers x 252 sessions of minute bars, a baselines-only run over every task.

Prints, measured in one invocation on this machine (the reads, the run, the floor and its
parts each the fastest of three: on a shared machine one timing varies by 15% or more; the
run and the floor are timed in turn, so that both meet the same spells of load):
  - a bare pyarrow read of the columns a run needs (tickers as text, and dictionary-encoded
    as the run reads them: the stricter reference), and a baselines-only `finbench run`
    (subprocess: wall time and peak RSS), as a ratio (RSS <= 4 GB, 3.73 GiB);
  - a floor under any such run: starting Python with the run's imports, the reference read,
    and writing the run's outputs (its forecast table, docs/spec.md §9's forecasts.parquet,
    encoded once; every other file the run writes, as bytes), computing nothing; timed as the
    run is, as one new process (its parts are also printed, timed on their own: the read and
    the table's write in this process, warm, which a new process is not);
  - the naive per-task reference (pandas filters over the whole frame) timed on a sample of
    tasks and extrapolated, as a speed-up (target >= 300x);
  - 10M rows of scoring with the validated public rules against bare numpy one-liners
    (target <= 1.5x), and a 1,000-replicate session bootstrap on those rows;
  - `finbench audit` of the run, then `finbench report` (every table with its 2,000-replicate
    session bootstraps, 500 tickers' rows among them, and the figures), each the median CPU of
    three (with the processes they start) against the median CPU of the three runs (target
    <= 1x), with wall time and peak RSS; then, measured the same way, `finbench score` (every
    score again and the scores digest) and `finbench show` of one task, and a leaderboard of
    the run and its copy (the board alone: each run taken as audited);
  - where the run's time goes: each step's wall time and CPU (all threads and the helper
    process hashing receipts, and the main thread's), and the two lower bounds they set on
    any run doing that work: start-up plus the CPU spread over every core, and start-up plus
    the main thread's CPU.
Synthetic data (random walks, 09:00-16:00 ET), generated into a temporary folder.
Run: .venv/bin/python benchmarks/bench_scale.py [--tickers 500 --sessions 252] [--no-naive]
(the last ``--sessions`` sessions up to 2024-12-31; 1258 = 2020-2024, five years, where
``--no-naive`` leaves out the naive reference, which holds every bar in one pandas frame)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _timing import best_of  # noqa: E402

from finbench.core.calendar import get_calendar  # noqa: E402
from finbench.data.schema import BARS_SCHEMA  # noqa: E402
from finbench.data.store import Store, sha256_file, snapshot_hash  # noqa: E402
from finbench.runlog.forecast_table import write_forecasts  # noqa: E402
from finbench.scoring import kernels  # noqa: E402
from finbench.scoring.bootstrap import mean_ci  # noqa: E402
from finbench.scoring.rules import brier_loss, coverage_score, log_loss, winkler_loss  # noqa: E402
from tests.reference import naive_labels  # noqa: E402

NEEDED = ["ticker", "ts", "high", "low"]
RUNS = 3  # the run, the reads and the floor's parts: each the fastest of this many
SCORED_ROWS = 10_000_000  # rows of the scoring rules' timing and the bootstrap's


def write_store(path: Path, tickers: int, sessions: int, seed: int = 3) -> tuple[list, int]:
    cal = get_calendar("XNYS", pd.Timestamp("2005-01-01"), pd.Timestamp("2025-03-01"))
    available = cal.sessions_in_range("2005-01-03", "2024-12-31")
    if not 0 < sessions <= len(available):
        raise SystemExit(f"--sessions {sessions}: between 1 and {len(available)} "
                         "(the sessions up to 2024-12-31)")
    days = list(available[-sessions:])  # the last sessions up to 2024-12-31: 252 = 2024
    names = np.array([f"T{i:03d}" for i in range(tickers)])
    rng = np.random.default_rng(seed)
    store = Store.open_or_create(path, synthetic=True, description="SYNTHETIC benchmark data")
    partitions, rows = {}, 0
    price = np.full(tickers, 100.0)
    for day in days:
        local = pd.Timestamp(day).tz_localize("America/New_York")
        minutes = pd.date_range(local + pd.Timedelta(hours=9), local + pd.Timedelta(hours=16),
                                freq="1min", inclusive="left").tz_convert("UTC")
        n = len(minutes)
        steps = rng.normal(0, 0.0008, size=(tickers, n))
        path_ = price[:, None] * np.exp(np.cumsum(steps, axis=1))
        price = path_[:, -1]
        o = np.round(path_, 2).ravel()
        table = pa.table({
            "ticker": np.repeat(names, n), "ts": np.tile(minutes.as_unit("ns"), tickers),
            "open": o, "high": o + 0.02, "low": o - 0.02, "close": o,
            "volume": np.full(tickers * n, 100.0)}, schema=BARS_SCHEMA)
        rel = f"bars/date={pd.Timestamp(day).date()}/part.parquet"
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path / rel, compression="zstd", row_group_size=128 * 1024)
        partitions[rel] = sha256_file(path / rel)
        rows += table.num_rows
    store.manifest["partitions"] = dict(sorted(partitions.items()))
    store.manifest["snapshot_sha256"] = snapshot_hash(partitions, store.manifest)
    store.save_manifest()
    return days, rows


def generated_store(path: Path, tickers: int, sessions: int, said: str = "") -> tuple[list, int]:
    """:func:`write_store`, saying how many bars it wrote and how long it took (``said``:
    more to say on that line)."""
    t0 = time.perf_counter()
    days, rows = write_store(path, tickers, sessions)
    print(f"generated {rows:,} bars ({tickers} tickers x {len(days)} sessions) in "
          f"{time.perf_counter() - t0:.0f}s{said}")
    return days, rows


def baselines_config(store: Path, tickers: int | list[str], days: list) -> str:
    """A config over the ``tickers`` of :func:`write_store`'s ``store`` (a number: the
    first so many; or their names) and its ``days``, with the four binary baselines."""
    if isinstance(tickers, int):
        tickers = [f"T{i:03d}" for i in range(tickers)]
    names = ", ".join(f'"{name}"' for name in tickers)
    return (f'[data]\nstore = "{store}"\n[tasks]\ntickers = [{names}]\n'
            f'start = "{pd.Timestamp(days[0]).date()}"\nend = "{pd.Timestamp(days[-1]).date()}"\n'
            + "".join(f'[[models]]\nname = "{k}"\nkind = "{k}"\n'
                      for k in ("coin", "base_rate", "momentum", "climatology")))


def phase_times(cfg: Path, run_dir: Path) -> list[tuple[str, float, float, float]]:
    """Where a run's time goes: the same run again in this process, :data:`RUNS` times, step
    by step: (step, wall seconds, CPU seconds of all threads, CPU seconds of the main thread),
    each the least of the runs."""
    from finbench.runner import run

    best: dict[str, list[float]] = {}
    for _ in range(RUNS):
        shutil.rmtree(run_dir, ignore_errors=True)
        timings: dict[str, float] = {}
        cpu: dict[str, tuple[float, float]] = {}
        run(cfg, run_dir, echo=lambda *_: None, timings=timings, cpu_timings=cpu)
        for name, wall in timings.items():
            got = (wall, *cpu[name])
            best[name] = [min(a, b) for a, b in zip(best.get(name, got), got, strict=True)]
    return [(name, *values) for name, values in best.items()]


def command_cost(*args: str) -> tuple[float, float, float]:
    """(seconds, peak RSS in GiB, CPU seconds: user and system, with the processes it started)
    of the command ``finbench ARGS`` in a subprocess of its own (its output discarded)."""
    return process_cost("from finbench.cli import main; rc = main(sys.argv[1:])", *args)


def process_cost(code: str, *args: str) -> tuple[float, float, float]:
    """(seconds, peak RSS in GiB, CPU seconds with the processes it started) of Python
    running ``code`` (which sets ``rc``, the exit status) with ``args`` in a subprocess of
    its own, its output discarded."""
    code = ("import resource, sys; " + code + "; own, kids = (resource.getrusage(w) for w in "
            "(resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)); "
            "print(own.ru_maxrss, own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime, "
            "file=sys.stderr); sys.exit(rc)")
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], check=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - t0
    rss, cpu = done.stderr.split()[-2:]
    return seconds, int(rss) / 1024**2, float(cpu)


def board_cpu(runs: list[Path], out: Path) -> tuple[float, float]:
    """(CPU seconds, peak RSS in GiB) of a leaderboard of ``runs`` in a subprocess of its own,
    each run taken as audited (the audits are timed apart: ``finbench leaderboard`` runs
    one per run), the median of :data:`RUNS`."""
    code = ("from finbench.reports.leaderboard import leaderboard; "
            "leaderboard(sys.argv[2:], sys.argv[1], audit=lambda d: [], echo=lambda *_: None); "
            "rc = 0")
    costs = [process_cost(code, str(out), *map(str, runs)) for _ in range(RUNS)]
    return float(np.median([c for *_, c in costs])), max(g for _, g, _ in costs)


def floor_parts(run_dir: Path) -> tuple[float, float]:
    """(seconds to start Python and import what `finbench run` imports, in a subprocess;
    seconds to write the run's forecast table once, as the run writes it, from memory)."""
    startup = best_of(lambda: subprocess.run(
        [sys.executable, "-c", "import finbench.cli, finbench.runner"], check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)}), RUNS)
    table = pq.read_table(run_dir / "forecasts.parquet")
    write = best_of(lambda: write_forecasts(run_dir / "floor.parquet", [table]), RUNS)
    (run_dir / "floor.parquet").unlink()
    return startup, write


FLOOR_PROCESS = f"""\
import sys, time
from finbench.core.memory import keep_freed_memory
keep_freed_memory(arrow_pages=True)  # as `finbench run` does first (finbench.cli.main)
import finbench.cli, finbench.runner
from pathlib import Path
import pyarrow.parquet as pq
from finbench.runlog.forecast_table import write_forecasts
t0 = time.perf_counter()
# what a run would hold, not part of the floor: the forecast table, and the bytes of every
# other file it writes
table = pq.read_table(sys.argv[1])
run, out = Path(sys.argv[2]), Path(sys.argv[3])
others = {{f.relative_to(run): f.read_bytes() for f in sorted(run.rglob("*"))
          if f.is_file() and f.name != "forecasts.parquet"}}
load = time.perf_counter() - t0
for f in sys.argv[4:]:  # the reference read: one partition at a time, tickers as a dictionary
    pq.read_table(f, columns={NEEDED!r}, read_dictionary=["ticker"])
write_forecasts(out / "forecasts.parquet", [table])  # the table encoded once
for rel, data in others.items():  # every other file of the run, written as it is
    (out / rel).parent.mkdir(parents=True, exist_ok=True)
    (out / rel).write_bytes(data)
print(load)
"""


def floor_process(run_dir: Path, files: list[Path]) -> float:
    """The floor as one new process, timed as the run is: start Python with the run's
    imports, read the bars as the reference read does, write the run's outputs (its forecast
    table encoded once, every other file it wrote as bytes), exit. The seconds it spends
    loading what it writes (which a run makes rather than reads) are left out."""
    out = run_dir.with_name(run_dir.name + "-floor")
    out.mkdir()
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", FLOOR_PROCESS, str(run_dir / "forecasts.parquet"),
                           str(run_dir), str(out), *map(str, files)], check=True,
                          capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - t0 - float(done.stdout)
    shutil.rmtree(out)
    return seconds


def naive_seconds(store: Path, tasks: pd.DataFrame) -> float:
    """The naive per-task reference's seconds for every task of ``tasks``: its pandas
    filters over the whole frame of ``store``'s bars, timed on 8 tasks and extrapolated."""
    frame = Store(store).read_bars()
    sample = tasks.sample(8, random_state=1)
    t0 = time.perf_counter()
    naive_labels(sample, frame)
    return (time.perf_counter() - t0) / len(sample) * len(tasks)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tickers", type=int, default=500)
    parser.add_argument("--sessions", type=int, default=252)
    parser.add_argument("--no-naive", dest="naive", action="store_false",
                        help="leave out the naive reference (it holds every bar in memory)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=ROOT / "results") as tmp:
        tmp = Path(tmp)
        days, rows = generated_store(tmp / "store", args.tickers, args.sessions)
        files = sorted((tmp / "store").glob("bars/date=*/part.parquet"))

        def read_each(**options) -> None:  # one partition held at a time, as a run holds them
            for f in files:
                pq.read_table(f, columns=NEEDED, **options)

        # a baselines-only run reads ticker, ts, high and low (for mids)
        bare_text = best_of(read_each, RUNS)
        # the same, tickers kept dictionary-encoded, as the run reads them
        bare = best_of(lambda: read_each(read_dictionary=["ticker"]), RUNS)

        cfg = tmp / "scale.toml"
        cfg.write_text(baselines_config(tmp / "store", args.tickers, days))
        # the run and the floor in turn, so that both are timed in the same spells of this
        # machine's load (the first run follows the store's writing)
        run_times, rss, floors, run_cpu = [], [], [], []
        for k in range(RUNS):  # each run into a new folder: a whole run each time
            out = tmp / ("run" if k == 0 else f"run_{k}")
            seconds, peak, cpu = command_cost("run", str(cfg), "--out", str(out))
            run_times.append(seconds)
            rss.append(peak)
            run_cpu.append(cpu)
            if k:
                shutil.rmtree(out)
            floors.append(floor_process(tmp / "run", files))
        run_time, rss_gb, floor = min(run_times), max(rss), min(floors)
        tasks = pd.read_parquet(tmp / "run" / "tasks.parquet")
        n_forecasts = len(pd.read_parquet(tmp / "run" / "forecasts.parquet",
                                          columns=["task_id"]))

        # what a user does next, each against the run's CPU (the median of its runs): the
        # audit of the run (before its report: an audit of a run with a report draws the
        # report again), then the report
        audits = [command_cost("audit", str(tmp / "run")) for _ in range(RUNS)]
        reports = [command_cost("report", str(tmp / "run")) for _ in range(RUNS)]
        # then: the scores computed again and their digest, one task shown, and (below,
        # once the run has been made again) a leaderboard of the two runs' boards
        scores = [command_cost("score", str(tmp / "run")) for _ in range(RUNS)]
        task_id = str(tasks["task_id"].iloc[len(tasks) // 2])
        shows = [command_cost("show", str(tmp / "run"), task_id) for _ in range(RUNS)]
        run_cpu_median = float(np.median(run_cpu))
        phases = phase_times(cfg, tmp / "run_again")
        boards = board_cpu([tmp / "run", tmp / "run_again"], tmp / "board")
        startup, table_write = floor_parts(tmp / "run_again")
        parts_floor = startup + bare + table_write

        # naive reference: per-task pandas filters over the whole frame (labels only)
        naive_total = naive_seconds(tmp / "store", tasks) if args.naive else None

        n = SCORED_ROWS
        rng = np.random.default_rng(0)
        y = (rng.random(n) < 0.5).astype(float)
        p = rng.random(n)
        r = rng.normal(0, 0.01, n)
        lo, hi = r - rng.random(n) * 0.02, r + rng.random(n) * 0.02
        def bare_rules():
            (p - y) ** 2
            kernels.log_loss(y, p, 1e-6)
            kernels.winkler(r, lo, hi, 0.2)
            (lo <= r) & (r <= hi)

        def public_rules():
            brier_loss(y, p)
            log_loss(y, p)
            winkler_loss(r, lo, hi)
            coverage_score(r, lo, hi)

        bare_score, public_score = best_of(bare_rules, 5), best_of(public_rules, 5)
        sessions = rng.integers(0, 250, n)
        t0 = time.perf_counter()
        mean_ci((p - y) ** 2, sessions, replicates=1000, seed=1)
        boot = time.perf_counter() - t0

    print(f"tasks {len(tasks):,}, forecasts {n_forecasts:,} (4 baselines)")
    print(f"{'step':<52}{'seconds':>10}")
    print(f"{'bare pyarrow read of the needed columns (text)':<52}{bare_text:>10.2f}")
    print(f"{'  the same, ticker dictionary-encoded (reference)':<52}{bare:>10.2f}")
    print(f"{'finbench run, baselines only (all tasks)':<52}{run_time:>10.2f}"
          f"   (fastest of {', '.join(f'{t:.2f}' for t in run_times)})")
    if naive_total is not None:
        print(f"{'naive per-task labels (extrapolated)':<52}{naive_total:>10.0f}")
    many = f"{SCORED_ROWS / 1e6:g}M rows"
    print(f"{f'score {many}: numpy one-liners (best of 5)':<52}{bare_score:>10.3f}")
    print(f"{f'score {many}: finbench.scoring.rules (validated)':<52}{public_score:>10.3f}")
    print(f"{f'session bootstrap, 1,000 replicates, {many}':<52}{boot:>10.3f}")
    print(f"{'start-up: python importing finbench.runner':<52}{startup:>10.2f}")
    print(f"{'writing forecasts.parquet once, from memory':<52}{table_write:>10.2f}")
    print(f"{'  their sum, each part timed on its own':<52}{parts_floor:>10.2f}")
    print(f"{'floor: one new process doing the three (as the run)':<52}{floor:>10.2f}"
          f"   (fastest of {', '.join(f'{t:.2f}' for t in floors)}, each after a run)")
    for name, costs in (("audit", audits), ("report", reports), ("score", scores),
                        ("show", shows)):
        cpu = float(np.median([c for *_, c in costs]))
        target = ", target <= 1x" if name in ("audit", "report") else ""
        print(f"{'finbench ' + name + ' of the run, CPU (median)':<52}{cpu:>10.2f}   "
              f"({cpu / run_cpu_median:.2f}x the run's {run_cpu_median:.2f} s of CPU{target}; "
              f"wall {min(t for t, *_ in costs):.2f} s, peak RSS "
              f"{max(g for _, g, _ in costs):.2f} GiB)")
    cpu, peak = boards
    print(f"{'a leaderboard of two such runs, audits aside':<52}{cpu:>10.2f}   "
          f"({cpu / run_cpu_median:.2f}x the run's CPU; peak RSS {peak:.2f} GiB)")
    print("where a run's time goes (steps timed in this process, fastest of "
          f"{RUNS}; CPU seconds of all threads and the receipts' hashing helper process, and "
          "of the main thread):")
    print(f"  {'step':<34}{'wall':>8}{'CPU':>8}{'main':>8}")
    for name, wall, cpu, main_cpu in phases:
        print(f"  {name:<34}{wall:>8.2f}{cpu:>8.2f}{main_cpu:>8.2f}")
    cores = os.cpu_count() or 1
    total_cpu = sum(cpu for _, _, cpu, _ in phases)
    total_main = sum(main_cpu for _, _, _, main_cpu in phases)
    spread, serial = startup + total_cpu / cores, startup + total_main
    print(f"bounds: start-up + the steps' CPU spread over {cores} cores = {spread:.2f} s "
          f"({spread / floor:.1f}x the floor); start-up + the main thread's CPU = "
          f"{serial:.2f} s ({serial / floor:.1f}x): no run doing this work gets below the "
          "larger")
    print(f"run vs bare read: {run_time / bare:.1f}x ({run_time / bare_text:.1f}x against the "
          f"text read; the target is against the floor, below); peak RSS {rss_gb:.2f} GiB "
          "(target <= 4 GB, 3.73 GiB)")
    print(f"floor vs bare read: {floor / bare:.1f}x (what any run that starts Python, reads the "
          f"bars and writes the forecast table spends, computing nothing); run vs floor: "
          f"{run_time / floor:.2f}x (target <= 2x; {run_time / parts_floor:.2f}x against the sum "
          "of its parts, each timed on its own, the read and the write in this process; each "
          "run against the floor timed after it: "
          + ", ".join(f"{a / b:.2f}x" for a, b in zip(run_times, floors, strict=True)) + ")")
    naive = ("not measured (--no-naive)" if naive_total is None
             else f"{naive_total / run_time:,.0f}x (target >= 300x)")
    print(f"run vs naive: {naive}; scoring: {public_score / bare_score:.2f}x numpy "
          "(target <= 1.5x)")


if __name__ == "__main__":
    main()
