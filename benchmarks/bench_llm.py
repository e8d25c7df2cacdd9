"""LLM engine throughput: 2,000 calls at concurrency 64 against a loopback server (100 ms).

Prints achieved throughput as a share of the ideal (calls x latency / concurrency), target
>= 90%, and client-side CPU per call (target <= 2 ms), the prompt rendering shown apart.
The server runs in its own process so its CPU is not counted.
Run: .venv/bin/python benchmarks/bench_llm.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from finbench.core.config import OpenAIModel  # noqa: E402
from finbench.data.store import Store  # noqa: E402
from finbench.forecasters.cache import ResponseCache  # noqa: E402
from finbench.forecasters.llm import OpenAIForecaster  # noqa: E402
from finbench.runlog.journal import Journal  # noqa: E402
from finbench.tracks.base import Inputs  # noqa: E402
from finbench.tracks.intraday.gate import ContextIndex  # noqa: E402
from finbench.tracks.intraday.prompt import PromptSettings  # noqa: E402
from finbench.tracks.intraday.tasks import build_tasks  # noqa: E402

CALLS, CONCURRENCY, LATENCY = 2000, 64, 0.100
SERVER = """
import sys, time
sys.path.insert(0, {root!r})
from tests.llm_server import ChatServer
s = ChatServer(delay={latency})
print(s.base_url, flush=True)
time.sleep(3600)
"""


def main() -> None:
    from finbench.core.config import TasksConfig

    store = Store(ROOT / "data" / "sample")
    base = build_tasks(TasksConfig(tickers=["AAPL", "MSFT", "NVDA"], start="2024-09-20",
                                   end="2025-01-15")).tasks
    reps = -(-CALLS // len(base))
    tasks = pd.concat([base.assign(task_id=base["task_id"] + f"#{k}") for k in range(reps)],
                      ignore_index=True).head(CALLS)
    index = ContextIndex(tasks, store.read_bar_arrays(), store.read_headlines(),
                         previous_sessions=5, headline_hours=24, max_headlines=20)
    server = subprocess.Popen([sys.executable, "-c", SERVER.format(root=str(ROOT),
                                                                    latency=LATENCY)],
                              stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip()
        os.environ["BENCH_KEY"] = "sk-bench"
        model = OpenAIModel(name="bench", kind="openai", model="valid", base_url=url,
                            api_key_env="BENCH_KEY", concurrency=CONCURRENCY, timeout=30)
        forecaster = OpenAIForecaster(model, PromptSettings())
        inputs = Inputs(tasks=tasks, contexts=index, history=pd.DataFrame(), bars=None)
        with tempfile.TemporaryDirectory() as tmp:
            cpu0 = time.process_time()
            plan = forecaster.plan(inputs)
            render_cpu = time.process_time() - cpu0
            forecaster.plan = lambda _inputs: plan  # measure the engine without re-rendering
            cache = ResponseCache(Path(tmp) / "c.sqlite")
            cpu0, wall0 = time.process_time(), time.perf_counter()
            stats = forecaster.run_stream(inputs, Journal(Path(tmp)), echo=lambda *_: None,
                                          cache=cache)
            wall = time.perf_counter() - wall0
            engine_cpu = time.process_time() - cpu0
    finally:
        server.kill()
    ideal = CALLS * LATENCY / CONCURRENCY
    print(f"calls {stats['done']}, requests {stats['requests']}, valid {stats['valid']}")
    print(f"wall {wall:.2f} s, ideal {ideal:.2f} s -> throughput {ideal / wall:.0%} of ideal "
          f"(target >= 90%)")
    print(f"client CPU per call: engine {engine_cpu / CALLS * 1000:.2f} ms (target <= 2 ms), "
          f"prompt rendering {render_cpu / CALLS * 1000:.2f} ms")


if __name__ == "__main__":
    main()
