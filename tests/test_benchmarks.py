"""The benchmark scripts still run: each at a tiny size in a process of its own, printing the
line its figures come from. (Two of them had stopped running while the code they time
changed: a script nobody runs rots.) Their figures are not checked here, only that they are
printed: speed is measured by the scripts themselves (docs/performance.md). The checks a
script makes of its own (the cluster's scores byte for byte the single process's, the tools'
bars the naive reference's, the live season verified and scored as a backtest) fail it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_report_html import BROWSER  # the browser the page's own tests use

ROOT = Path(__file__).resolve().parents[1]

SMALL = {
    "bench_spine": ("import bench_spine as b; b.N_TICKERS, b.N_SESSIONS, b.NAIVE_SAMPLE, "
                    "b.REPEATS = 3, 8, 2, 1; b.main()", [],
                    ["ratio vs bare read: ", "speed-up vs naive: "]),
    "bench_llm": ("import bench_llm as b; b.CALLS, b.CONCURRENCY, b.LATENCY, b.PAIRS = "
                  "40, 8, 0.01, 1; b.IDEAL = b.CALLS * b.LATENCY / b.CONCURRENCY; b.main()",
                  [], ["engine: 40 calls, 40 requests, 40 valid",
                       "engine's CPU per call / the client's alone", "4. agents"]),
    "bench_scale": ("import bench_scale as b; b.RUNS, b.SCORED_ROWS = 1, 100_000; b.main()",
                    ["--tickers", "3", "--sessions", "3"],
                    ["finbench audit of the run, CPU (median)",
                     "finbench report of the run, CPU (median)",
                     "finbench score of the run, CPU (median)",
                     "finbench show of the run, CPU (median)",
                     "a leaderboard of two such runs, audits aside", "run vs floor: ",
                     "x (target >= 300x); scoring: "]),
    # five years are measured without the naive reference, which holds every bar in memory
    "bench_scale --no-naive": ("import bench_scale as b; b.RUNS, b.SCORED_ROWS = 1, 100_000; "
                               "b.main()", ["--tickers", "2", "--sessions", "2", "--no-naive"],
                               ["run vs naive: not measured (--no-naive); scoring: ",
                                "finbench report of the run, CPU (median)"]),
    "bench_scores3": ("import bench_scores3 as b; b.REPEATS = 1; b.main()", ["4", "3"],
                      ["the same table bit for bit", "speed-up vs naive: ",
                       "the report's intervals of that table: "]),
    "bench_slice": ("import bench_slice as b; b.REPEATS = 1; b.main()",
                    ["--tickers", "20", "--slice", "4", "--sessions", "3"],
                    ["the slice's read from the copy: ", "the same rows and scores",
                     "a row group per ticker"]),
    "bench_retrieval": ("import bench_retrieval as b; b.main()", ["20000", "20", "5000"],
                        ["the same posts and scores, bit for bit: True",
                         "this run's retrieval: "]),
    "bench_dask": ("import bench_dask as b; b.RUNS = 1; b.main()",
                   ["--tickers", "3", "--sessions", "25"],
                   ["month shards: ", "six-month shards: ",
                    "the merge of the two six-month shards"]),
    "bench_ingest": ("import bench_ingest as b; b.main()", ["--posts", "20000", "--days", "5"],
                     ["peak memory, 20,000 posts against 5,000: "]),
    "bench_live": ("import bench_live as b; b.main()", ["2", "3"],
                   ["verify passes; the season's run scores exactly as a backtest",
                    "seal latency after a horizon's last answer: "]),
    "bench_event_tools": ("import bench_event_tools as b; b.main()",
                          ["--posts", "3000", "--days", "60", "--tasks", "4"],
                          ["the same posts, order and scores as the reference on those calls, "
                           "and in both orders: True", "shuffled ",
                           "the gate's retrieval of the sample's 46 tasks"]),
    "bench_tools": ("import bench_tools as b; b.main()",
                    [str(ROOT / "data" / "sample"), "2", "5", "2000"],
                    ["bars (warm) against the naive pandas filter: ",
                     "headlines (but the first with a ticker) median "]),
    "bench_object_store": ("import bench_object_store as b; b.main()",
                           ["--tickers", "3", "--sessions", "5"],
                           ["store and run directory in the bucket ",
                            "month shards on a LocalCluster of 2 workers, all in the bucket "]),
}

# the page's script measures a run's report.html in Chromium: here the pilot's, drawn first
PAGE = """
import sys, tempfile
from pathlib import Path
import bench_report_page as b
from finbench.reports.build import report
from finbench.runner import run
with tempfile.TemporaryDirectory() as tmp:
    cfg = Path(tmp) / "pilot.toml"
    cfg.write_text((b.ROOT / "configs" / "pilot.toml").read_text().replace(
        '"../data/', f'"{b.ROOT}/data/'))
    mine = run(cfg, Path(tmp) / "mine", echo=lambda *_: None)
    report(mine)
    sys.argv = ["bench_report_page.py", str(mine)]
    b.main()
"""


def script(code: str, args: list[str]) -> subprocess.CompletedProcess:
    """``code`` run in a new Python in benchmarks/, the scripts and finbench importable."""
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT / "benchmarks",
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'benchmarks'}"})


@pytest.mark.parametrize("name", sorted(SMALL))
def test_each_benchmark_script_runs_at_a_tiny_size(name):
    code, args, said = SMALL[name]
    done = script(code, args)
    assert done.returncode == 0, done.stderr[-3000:]
    for line in said:
        assert line in done.stdout, (line, done.stdout[-2000:])


def test_the_report_page_script_runs():
    if BROWSER is None:
        pytest.skip("no chromium installed (Debian: apt-get install chromium; .ci/run does)")
    pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    done = script(PAGE, [])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "mine's page (" in done.stdout and "x the pilot's" in done.stdout, done.stdout
