"""LLM engine throughput: 2,000 calls at concurrency 64 against a loopback server answering
after 100 ms, in three layers measured in one run so each can be told from the next:

1. the server alone, driven by a bare asyncio client (raw HTTP/1.1): shows it is not the
   bottleneck (its own process; its CPU read from /proc);
2. the official ``openai`` client alone (``client.post`` of the same request bodies, nothing
   else) on its default transport (httpcore): the reference; and (2b) the same client on the
   transport the engine gives it (aiohttp, ``finbench/forecasters/transport.py``), so the
   engine's own work is told from what its transport saves;
3. FinBench's engine (``OpenAIForecaster.run_stream``: cache, rate limits, answer validation,
   journal, transcripts), prompts rendered beforehand and timed apart.

4. the same tasks asked of an agent: one tool call (``daily``, answered by the intraday
   track's tools over the sample store), then its answer, two turns a task.

Prints throughput as a share of the ideal (calls x latency / concurrency; target >= 90%;
agents, their two turns a task: >= 70%),
client CPU per call (target <= 2 ms for the engine), and prompt rendering per task (target
<= 0.5 ms). Run: .venv/bin/python benchmarks/bench_llm.py
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
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
from finbench.tracks.intraday.config import TasksConfig  # noqa: E402
from finbench.tracks.intraday.gate import ContextIndex  # noqa: E402
from finbench.tracks.intraday.inputs import IntradayInputs  # noqa: E402
from finbench.tracks.intraday.prompt import PromptSettings  # noqa: E402
from finbench.tracks.intraday.tasks import build_tasks  # noqa: E402

CALLS, CONCURRENCY, LATENCY = 2000, 64, 0.100
PAIRS = 9  # the client alone and the engine, timed in turn this many times
IDEAL = CALLS * LATENCY / CONCURRENCY


def server_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def raw_client(url: str, bodies: list[bytes]) -> None:
    """The server alone: keep-alive connections sending the request bytes, nothing parsed."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    queue = list(range(len(bodies)))

    async def worker() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        while queue:
            body = bodies[queue.pop()]
            writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: "
                         b"application/json\r\ncontent-length: " + str(len(body)).encode()
                         + b"\r\n\r\n" + body)
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
        writer.close()

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


async def sdk_alone(url: str, bodies: list[bytes], transport: str = "httpx") -> None:
    """The openai client alone: the same POSTs through ``client.post`` (bodies as the engine
    sends them: JSON bytes), answers discarded; ``transport``: the client's default
    (``httpx``) or the engine's (``aiohttp``: one client, as the engine makes it)."""
    from openai import AsyncOpenAI, DefaultAsyncHttpxClient

    from finbench.forecasters.llm import tls_context
    from finbench.forecasters.transport import AiohttpTransport

    n = 1 if transport == "aiohttp" else CONCURRENCY // 8
    clients = [AsyncOpenAI(api_key="sk-bench", base_url=url, timeout=30, max_retries=0,
                           http_client=DefaultAsyncHttpxClient(
                               verify=tls_context(),
                               transport=AiohttpTransport(tls_context())
                               if transport == "aiohttp" else None))
               for _ in range(n)]
    semaphore = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        async with semaphore:
            await clients[i % len(clients)].post("/chat/completions", cast_to=dict,
                                                 content=bodies[i])

    await asyncio.gather(*(one(i) for i in range(len(bodies))))
    for client in clients:
        await client.close()


def prerendered(forecaster, inputs, plan) -> None:
    """Make ``forecaster`` take the prompts rendered beforehand (rendering is timed apart)."""
    rendered, prompt = forecaster.prompt.render(inputs), forecaster.prompt

    class Prerendered:  # the forecaster's prompt (frozen), its render made once
        def render(self, _inputs):
            return rendered

        def __getattr__(self, name):
            return getattr(prompt, name)

    forecaster.prompt = Prerendered()
    forecaster.plan = lambda _inputs, _rendered=None: plan


def timed(label: str, pid: int, work) -> tuple[float, float]:
    """Run ``work``; print wall, throughput, client and server CPU per call."""
    cpu0, server0, wall0 = time.process_time(), server_cpu(pid), time.perf_counter()
    work()
    wall = time.perf_counter() - wall0
    cpu, served = time.process_time() - cpu0, server_cpu(pid) - server0
    print(f"{label:<34} wall {wall:5.2f} s  throughput {IDEAL / wall:4.0%} of ideal  client "
          f"CPU {cpu / CALLS * 1000:.2f} ms/call  server CPU {served / CALLS * 1000:.2f} ms/call")
    return wall, cpu


def agents(url: str, inputs: IntradayInputs, plan, pid: int) -> None:
    """4. The same tasks asked of an agent (one tool call, ``daily``, then its answer: two
    turns a task), its tools the intraday track's over the sample store; the ideal is twice
    the calls' (target: >= 70% of it)."""
    from finbench.tracks.intraday.tools import IntradayTools

    model = OpenAIModel(name="agent", kind="openai", model="valid", base_url=url,
                        api_key_env="BENCH_KEY", concurrency=CONCURRENCY, timeout=30,
                        tools=["daily"])
    forecaster = OpenAIForecaster(model, PromptSettings())
    forecaster.use_tools(IntradayTools(Store(ROOT / "data" / "sample"), TasksConfig(
        tickers=["AAPL"], start="2025-01-15", end="2025-01-15")))
    prerendered(forecaster, inputs, plan)
    with tempfile.TemporaryDirectory() as tmp:
        cache = ResponseCache(Path(tmp) / "c.sqlite")
        out: dict = {}
        cpu0, wall0 = time.process_time(), time.perf_counter()
        out.update(forecaster.run_stream(inputs, Journal(Path(tmp)), echo=lambda *_: None,
                                         cache=cache))
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        cache.close()
    ideal = 2 * IDEAL
    print(f"{'4. agents (2 turns, 1 tool call)':<34} wall {wall:5.2f} s  throughput "
          f"{ideal / wall:4.0%} of ideal ({ideal:.2f} s)  client CPU "
          f"{cpu / out['requests'] * 1000:.2f} ms/request")
    print(f"agents: {out['done']} tasks, {out['requests']} requests, {out['valid']} valid "
          "(target: >= 70% of ideal)")


def main() -> None:
    store = Store(ROOT / "data" / "sample")
    base = build_tasks(TasksConfig(tickers=["AAPL", "MSFT", "NVDA"], start="2024-09-20",
                                   end="2025-01-15")).tasks
    reps = -(-CALLS // len(base))
    tasks = pd.concat([base.assign(task_id=base["task_id"] + f"#{k}") for k in range(reps)],
                      ignore_index=True).head(CALLS)
    index = ContextIndex(tasks, store.read_bar_arrays(), store.read_headlines(),
                         previous_sessions=5, headline_hours=24, max_headlines=20)
    server = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "async_chat_server.py"),
                               "--latency", str(LATENCY)], stdout=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip()
        os.environ["BENCH_KEY"] = "sk-bench"
        model = OpenAIModel(name="bench", kind="openai", model="valid", base_url=url,
                            api_key_env="BENCH_KEY", concurrency=CONCURRENCY, timeout=30)
        forecaster = OpenAIForecaster(model, PromptSettings())
        inputs = IntradayInputs(tasks=tasks, contexts=index, history=pd.DataFrame())
        cpu0 = time.process_time()
        plan = forecaster.plan(inputs)
        render = time.process_time() - cpu0
        bodies = [forecaster.request_body(messages) for messages, _ in plan]
        raw = [json.dumps(b, ensure_ascii=False).encode() for b in bodies]
        print(f"{CALLS} calls, concurrency {CONCURRENCY}, server latency {LATENCY * 1000:.0f} "
              f"ms: ideal {IDEAL:.2f} s")
        print(f"prompt rendering: {render / CALLS * 1000:.3f} ms/task (target <= 0.5 ms)")
        timed("1. server alone (raw asyncio client)", server.pid,
              lambda: asyncio.run(raw_client(url, raw)))
        prerendered(forecaster, inputs, plan)  # the engine without rendering again
        out: dict = {}

        def engine() -> None:
            with tempfile.TemporaryDirectory() as tmp:
                cache = ResponseCache(Path(tmp) / "c.sqlite")
                out.update(forecaster.run_stream(inputs, Journal(Path(tmp)),
                                                 echo=lambda *_: None, cache=cache))
                cache.close()

        # the client alone (on each transport) and the engine in turn, so that all three
        # meet the same spells of load
        ratios, own = [], []
        for k in range(PAIRS):
            _, alone = timed(f"2. openai client alone ({k + 1})", server.pid,
                             lambda: asyncio.run(sdk_alone(url, raw)))
            _, alone_aio = timed(f"2b. the client on aiohttp ({k + 1})", server.pid,
                                 lambda: asyncio.run(sdk_alone(url, raw, "aiohttp")))
            _, mine = timed(f"3. FinBench engine ({k + 1})", server.pid, engine)
            ratios.append(mine / alone)
            own.append(mine / alone_aio)
        print(f"engine: {out['done']} calls, {out['requests']} requests, {out['valid']} valid "
              "(targets: >= 90% of ideal, <= 2 ms client CPU per call)")
        print(f"engine's CPU per call / the client's alone, each in turn: "
              f"{', '.join(f'{r:.2f}x' for r in ratios)}; median {statistics.median(ratios):.2f}x "
              "(target <= 1.2x)")
        print(f"engine's CPU per call / the client's on the engine's transport: "
              f"{', '.join(f'{r:.2f}x' for r in own)}; median {statistics.median(own):.2f}x")
        agents(url, inputs, plan, server.pid)
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
