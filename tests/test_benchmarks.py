"""The benchmark scripts still run: each at a tiny size in a process of its own, printing the
line its figures come from. (Two of them had stopped running while the code they time
changed: a script nobody runs rots.) Their figures are not checked here, only that they are
printed: speed is measured by the scripts themselves (docs/performance.md)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SMALL = {
    "bench_spine": ("import bench_spine as b; b.N_TICKERS, b.N_SESSIONS, b.NAIVE_SAMPLE, "
                    "b.REPEATS = 3, 8, 2, 1; b.main()", [],
                    ["ratio vs bare read: ", "speed-up vs naive: "]),
    "bench_llm": ("import bench_llm as b; b.CALLS, b.CONCURRENCY, b.LATENCY, b.PAIRS = "
                  "40, 8, 0.01, 1; b.IDEAL = b.CALLS * b.LATENCY / b.CONCURRENCY; b.main()",
                  [], ["engine: 40 calls, 40 requests, 40 valid",
                       "engine's CPU per call / the client's alone", "4. agents"]),
    "bench_scale": ("import bench_scale as b; b.RUNS = 1; b.main()",
                    ["--tickers", "3", "--sessions", "3"],
                    ["finbench audit of the run, CPU (median)",
                     "finbench report of the run, CPU (median)", "run vs floor: "]),
    "bench_slice": ("import bench_slice as b; b.REPEATS = 1; b.main()",
                    ["--tickers", "20", "--slice", "4"],
                    ["the store as a run reads it: ", "a row group per ticker"]),
    "bench_retrieval": ("import bench_retrieval as b; b.main()", ["20000", "20", "5000"],
                        ["the same posts and scores, bit for bit: True",
                         "this run's retrieval: "]),
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_each_benchmark_script_runs_at_a_tiny_size(name):
    code, args, said = SMALL[name]
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT / "benchmarks",
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'benchmarks'}"})
    assert done.returncode == 0, done.stderr[-3000:]
    for line in said:
        assert line in done.stdout, (line, done.stdout[-2000:])
