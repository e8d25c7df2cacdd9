"""Agents of kind "mcp" (docs/spec.md §12.5) driven by the MCP SDK's own client: a run waits
for them and writes each task's prompt; ``finbench tools serve`` (a real process, on stdio
and on streamable HTTP) serves a task's prompt, its gated tools and ``submit_forecast``; the
next run journals every session, and the audit executes each call again."""

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from finbench.audit import audit_run
from finbench.core.errors import ConfigError, RunError
from finbench.data.synth import CANARY_MARK
from finbench.runlog.sessions import Session, waiting
from finbench.runlog.tool_calls import TOOL_CALLS
from finbench.runner import run
from tests.helpers import cli

mcp = pytest.importorskip("mcp")  # the [mcp] extra (in [dev])
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ["bars", "daily", "headlines", "calendar"]
EVENT_STORE = ROOT / "data" / "events_sample" / "store"
QUIET = {"echo": lambda *_: None}


def intraday_config(tmp: Path, store, *, max_calls: int = 4) -> Path:
    path = tmp / "mcp.toml"
    path.write_text(f'[data]\nstore = "{store}"\n[tasks]\ntickers = ["AAPL", "MSFT"]\n'
                    'start = "2025-01-14"\nend = "2025-01-15"\n[[models]]\nname = "coin"\n'
                    'kind = "coin"\n[[models]]\nname = "harness"\nkind = "mcp"\n'
                    f'tools = {json.dumps(TOOLS)}\nmax_tool_calls = {max_calls}\n')
    return path


def served(run_dir: Path, task: str, model: str = "harness") -> StdioServerParameters:
    """``finbench tools serve`` as a harness starts it: a process talking MCP on stdio."""
    return StdioServerParameters(
        command=sys.executable, args=["-m", "finbench", "tools", "serve", str(run_dir),
                                      "--model", model, "--task", task],
        env={**os.environ, "PYTHONPATH": str(ROOT)})


async def honest(client: Client, now: str) -> list[str]:
    """Reads the prompt, asks for the morning's bars and a headline search, answers."""
    prompt = await client.get_prompt("forecast")
    ticker = re.search(r"Ticker: (\w+)", prompt.messages[-1].content.text).group(1)
    day = now[:10]
    texts = []
    for name, args in (("calendar", {"date": day}),
                       ("bars", {"ticker": ticker, "start": f"{day}T14:30:00Z", "end": None,
                                 "resolution": "15min"}),
                       ("headlines", {"query": f"{ticker} shares", "ticker": ticker,
                                      "limit": 5})):
        result = await client.call_tool(name, args)
        assert not result.is_error, result.content[0].text
        texts.append(result.content[0].text)
    result = await client.call_tool("submit_forecast", {
        "p_up": 0.55, "lower": -0.01, "upper": 0.012, "rationale": "bars and headlines"})
    assert not result.is_error and "valid" in result.content[0].text
    return texts


async def adversary(client: Client, now: str) -> list[tuple[str, bool]]:
    """Asks for the day's close, searches for the canary, sends bad arguments and a tool it
    has not, then answers out of range."""
    day, out = now[:10], []
    for name, args in (("bars", {"ticker": "MSFT", "start": f"{day}T14:30:00Z",
                                 "end": f"{day}T20:55:00Z", "resolution": "1min"}),
                       ("headlines", {"query": f"{CANARY_MARK} ABOVE BELOW", "ticker": None,
                                      "limit": 20}),
                       ("bars", {"ticker": "AAPL", "start": "tomorrow", "resolution": "1d"}),
                       ("orders", {"side": "buy"})):
        result = await client.call_tool(name, args)
        out.append((result.content[0].text, result.is_error))
    result = await client.call_tool("submit_forecast", {
        "p_up": 1.5, "lower": -0.01, "upper": 0.01, "rationale": None})
    assert result.is_error and "invalid" in result.content[0].text
    return out


def drive(run_dir: Path, task: str, agent) -> object:
    async def session():
        async with Client(served(run_dir, task)) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == [*TOOLS, "submit_forecast"]
            return await agent(client, Session(run_dir, "harness", task).prompt()["now"])

    return asyncio.run(session())


@pytest.fixture(scope="module")
def mcp_run(tmp_path_factory, sample_store):
    """A run waiting for the agent, every task served over stdio (the adversary on the
    MSFT tasks, the honest agent on AAPL's), then run again."""
    tmp = tmp_path_factory.mktemp("mcp")
    path, out = intraday_config(tmp, sample_store), tmp / "out"
    run(path, out, **QUIET)
    assert not (out / "forecasts.parquet").exists()  # it waits: nothing scored yet
    tasks = waiting(out)["harness"]
    answers = {task: drive(out, task, adversary if task.startswith("MSFT") else honest)
               for task in tasks}
    run(path, out, **QUIET)
    return path, out, tasks, answers


def test_a_run_waits_for_the_agent_and_writes_each_prompt(tmp_path, sample_store):
    lines = []
    out = run(intraday_config(tmp_path, sample_store), tmp_path / "out", echo=lines.append)
    assert len(waiting(out)["harness"]) == 12
    said = next(line for line in lines if "wait for the agent" in line)
    assert "12 task(s)" in said and "finbench tools serve" in said
    facts = Session(out, "harness", "AAPL|2025-01-15|MIDDAY").prompt()
    assert facts["now"] == "2025-01-15T17:30:00Z" and facts["max_tool_calls"] == 4
    assert [t["function"]["name"] for t in facts["tools"]] == TOOLS
    assert "Ticker: AAPL" in facts["messages"][-1]["content"]
    assert sorted(facts["answer_schema"]["required"]) == ["lower", "p_up", "rationale",
                                                          "upper"]
    listed = cli("tools", "tasks", out)
    assert listed.returncode == 0
    assert listed.stdout.splitlines()[0] == "harness\tAAPL|2025-01-14|CLOSE"
    assert len(listed.stdout.splitlines()) == 12


def test_every_session_is_journalled_receipted_and_audited(mcp_run):
    _, out, tasks, _ = mcp_run
    rows = pq.read_table(out / "forecasts.parquet").to_pandas()
    mine = rows[rows["model"] == "harness"].set_index("task_id")
    assert len(mine) == 12 and not waiting(out)["harness"]
    assert mine["valid"].sum() == 6  # the honest agent's six; the adversary's p_up 1.5 not
    assert mine.loc["AAPL|2025-01-15|MIDDAY", "p_up"] == 0.55
    bad = mine.loc["MSFT|2025-01-15|MIDDAY"]
    assert not bad["valid"] and "p_up" in bad["error"] and '"p_up":1.5' in bad["raw"]
    calls = pq.read_table(out / TOOL_CALLS).to_pandas()
    calls = calls[calls["model"] == "harness"]
    assert len(calls) == 6 * 3 + 6 * 4  # the honest agent's three calls a task, the adversary's four
    assert (calls["max_available"].dropna() <= calls.loc[calls["max_available"].notna(),
                                                         "now"]).all()
    adversarial = calls[calls["task_id"].str.startswith("MSFT")]
    assert adversarial["refusal"].value_counts().to_dict() == {
        "future": 6, "bad_arguments": 6, "unknown_tool": 6}
    detail = json.loads(mine.loc["AAPL|2025-01-15|MIDDAY", "detail"])
    assert detail["served"] == "mcp" and detail["turns"] == 4
    assert detail["client"]["name"]  # the SDK client's own name, as it said at start
    # what each cost: its tool calls are known, its model's calls and tokens are not
    scored = pq.read_table(out / "rows.parquet").to_pandas()
    scored = scored[scored["model"] == "harness"].set_index("task_id")
    assert (scored["tool_calls"] == calls.groupby("task_id").size().reindex(scored.index)).all()
    assert set(scored["tool_calls"]) == {3, 4}
    assert scored[["calls", "tokens", "dollars"]].isna().all().all()
    assert audit_run(out, echo=lambda *_: None) == []


def test_no_canary_of_a_tasks_own_day_is_ever_served(mcp_run):
    _, out, tasks, answers = mcp_run
    for task in tasks:
        if not task.startswith("MSFT"):
            continue
        day = task.split("|")[1]
        search = json.loads(answers[task][1][0])
        for item in search["items"]:
            assert not (CANARY_MARK in item["headline"] and day in item["headline"]), item
            assert item["available_at"] <= search["now"]


def test_the_honest_agent_sees_bars_up_to_now_only(mcp_run):
    _, out, _, answers = mcp_run
    bars = json.loads(answers["AAPL|2025-01-15|MIDDAY"][1])
    assert bars["items"] and bars["items"][-1]["available_at"] <= "2025-01-15T17:30:00Z"
    assert bars["items"][0]["start"] == "2025-01-15T14:30:00Z"


def test_show_prints_the_session_turn_by_turn(mcp_run):
    _, out, _, _ = mcp_run
    shown = cli("show", out, "AAPL|2025-01-15|MIDDAY", "--model", "harness")
    assert shown.returncode == 0
    assert "-> call-1: calendar" in shown.stdout and "-> call-3: headlines" in shown.stdout


def test_an_edited_session_answer_is_named_by_the_audit(mcp_run, tmp_path):
    import shutil

    _, out, _, _ = mcp_run
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    table = pq.read_table(copy / TOOL_CALLS).to_pandas()
    table.loc[0, "result_sha256"] = "0" * 64
    table.to_parquet(copy / TOOL_CALLS, index=False)
    assert any(TOOL_CALLS in v for v in audit_run(copy, echo=lambda *_: None))


def test_streamable_http_serves_a_task_and_stops_once_it_is_answered(tmp_path, sample_store):
    out = run(intraday_config(tmp_path, sample_store), tmp_path / "out", **QUIET)
    task = "AAPL|2025-01-15|CLOSE"
    proc = subprocess.Popen([sys.executable, "-m", "finbench", "tools", "serve", str(out),
                             "--model", "harness", "--task", task, "--http", "0"],
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stderr=subprocess.PIPE, text=True)
    try:
        url = re.search(r"http://127\.0\.0\.1:\d+/mcp", proc.stderr.readline()).group(0)

        async def session():
            async with Client(url) as client:
                return await honest(client, "2025-01-15T20:30:00Z")

        texts = asyncio.run(session())
        assert proc.wait(timeout=30) == 0  # it stops by itself once the task has ended
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()
    assert json.loads(texts[0])["items"][0]["target"] == "2025-01-15T20:55:00Z"
    assert Session(out, "harness", task).answer()["arguments"]["p_up"] == 0.55
    assert waiting(out)["harness"].count(task) == 0


def test_a_call_past_the_budget_ends_the_task_and_a_restart_counts_the_calls_made(
        tmp_path, sample_store):
    path = intraday_config(tmp_path, sample_store, max_calls=2)
    out = run(path, tmp_path / "out", **QUIET)
    task = "MSFT|2025-01-14|MORNING"

    async def calls(n: int):
        async with Client(served(out, task)) as client:
            return [await client.call_tool("calendar", {"date": "2025-01-14"})
                    for _ in range(n)]

    first = asyncio.run(calls(1))  # a session that goes away without answering ...
    assert not first[0].is_error
    again = asyncio.run(calls(2))  # ... and a second: its first call is the task's second
    assert not again[0].is_error and again[1].is_error
    assert "agent: budget: 3 tool calls asked, at most 2" in again[1].content[0].text
    ended = cli("tools", "serve", out, "--model", "harness", "--task", task)
    assert ended.returncode == 2 and "answered already" in ended.stderr
    for other in waiting(out)["harness"]:  # the other tasks answered without a call
        Session(out, "harness", other).write_answer(arguments={
            "p_up": 0.5, "lower": -0.01, "upper": 0.01, "rationale": None}, ended=None,
            client={})
    run(path, out, **QUIET)
    rows = pq.read_table(out / "forecasts.parquet").to_pandas().set_index(["model", "task_id"])
    row = rows.loc[("harness", task)]
    assert not row["valid"] and row["error"].startswith("agent: budget: 3 tool calls")
    assert audit_run(out, echo=lambda *_: None) == []


def test_serve_refuses_what_it_cannot_serve(tmp_path, sample_store):
    out = run(intraday_config(tmp_path, sample_store), tmp_path / "out", **QUIET)
    unknown = cli("tools", "serve", out, "--model", "harness", "--task", "AAPL|1999-01-01|CLOSE")
    assert unknown.returncode == 2 and "no prompt" in unknown.stderr
    other = cli("tools", "serve", out, "--model", "coin", "--task", "AAPL|2025-01-15|CLOSE")
    assert other.returncode == 2 and "no agent of kind 'mcp'" in other.stderr
    assert "harness" in other.stderr


def test_one_server_a_task(tmp_path, sample_store):
    from finbench.core.folder_lock import FolderLock

    out = run(intraday_config(tmp_path, sample_store), tmp_path / "out", **QUIET)
    task = "AAPL|2025-01-15|CLOSE"
    with FolderLock(Session(out, "harness", task).folder, command="another server"):
        busy = cli("tools", "serve", out, "--model", "harness", "--task", task)
    assert busy.returncode == 2 and "in use by" in busy.stderr and "another server" in busy.stderr


def test_a_session_served_another_prompt_is_refused_by_the_run(tmp_path, sample_store):
    path = intraday_config(tmp_path, sample_store)
    out = run(path, tmp_path / "out", **QUIET)
    session = Session(out, "harness", "AAPL|2025-01-15|CLOSE")
    facts = session.prompt()
    session.write_prompt({**facts, "now": "2025-01-15T20:55:00Z"})  # later than the task's
    session.write_answer(arguments={"p_up": 0.5, "lower": -0.01, "upper": 0.01,
                                    "rationale": None}, ended=None, client={})
    with pytest.raises(RunError, match=r"prompt\.json: its now is not the run's"):
        run(path, out, **QUIET)


def test_batch_refuses_an_mcp_agent(tmp_path, sample_store):
    with pytest.raises(ConfigError, match="answer over MCP"):
        run(intraday_config(tmp_path, sample_store), tmp_path / "out", batch=True, **QUIET)


def test_dask_refuses_an_mcp_agent_before_any_worker_starts(tmp_path, sample_store):
    from finbench.cluster import run_on_dask

    with pytest.raises(ConfigError, match="--executor dask: harness answer over MCP"):
        run_on_dask(intraday_config(tmp_path, sample_store), tmp_path / "out", **QUIET)
    assert not (tmp_path / "out").exists()


def test_shards_served_apart_merge_into_the_unsharded_run(tmp_path, sample_store):
    """Each session a shard with its own sessions, each answered, then merged: the rows,
    scores and receipts of the run made whole, and the merged run audits clean."""
    import pandas as pd

    from finbench.shards import merge_shards

    path = intraday_config(tmp_path, sample_store)

    def answered(out, shard=None):
        for task in waiting(out)["harness"]:
            Session(out, "harness", task).write_answer(arguments={
                "p_up": 0.5 if task.startswith("AAPL") else 0.4, "lower": -0.01,
                "upper": 0.01, "rationale": None}, ended=None, client={"name": "t"})
        return run(path, out, shard=shard, **QUIET)

    whole = answered(run(path, tmp_path / "whole", **QUIET))
    shards = [answered(run(path, tmp_path / day, shard=(day, day), **QUIET), (day, day))
              for day in ("2025-01-14", "2025-01-15")]
    merged = merge_shards(shards, tmp_path / "merged")
    keys = ["task_id", "model", "p_up", "valid", "error", "input_sha256", "max_input_time"]
    assert pq.read_table(merged / "forecasts.parquet").select(keys).equals(
        pq.read_table(whole / "forecasts.parquet").select(keys))
    for name in ("rows.parquet", "scores.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(merged / name),
                                      pd.read_parquet(whole / name))
    assert audit_run(merged, echo=lambda *_: None) == []


def test_the_event_track_serves_its_tools_over_mcp(tmp_path):
    path = tmp_path / "events.toml"
    path.write_text(f'track = "events"\n[data]\nstore = "{EVENT_STORE}"\n[tasks]\n'
                    'resolved_from = 2024-03-01\nresolved_to = 2024-03-20\ncutoff = "lead"\n'
                    'lead_hours = 72\n[[models]]\nname = "market"\nkind = "market_price"\n'
                    '[[models]]\nname = "harness"\nkind = "mcp"\n'
                    'tools = ["posts", "prices", "markets"]\n')
    out = run(path, tmp_path / "out", **QUIET)
    tasks = waiting(out)["harness"]
    assert tasks

    async def agent(client, now):
        names = [t.name for t in (await client.list_tools()).tools]
        assert names == ["posts", "prices", "markets", "submit_forecast"]
        posts = await client.call_tool("posts", {"query": f"{CANARY_MARK} resolved",
                                                 "days": 30, "limit": 10})
        markets = await client.call_tool("markets", {"query": "will", "limit": 10})
        await client.call_tool("submit_forecast", {"p_yes": 0.4, "rationale": None})
        return json.loads(posts.content[0].text), json.loads(markets.content[0].text)

    async def session(task):
        async with Client(served(out, task)) as client:
            return await agent(client, None)

    for task in tasks:
        posts, markets = asyncio.run(session(task))
        assert all(p["created_utc"] < posts["now"] for p in posts["items"])
        assert all(m["resolved_at"] < markets["now"] for m in markets["items"])
        market = task.split("|")[0]
        assert all(m["market_id"] != market for m in markets["items"])
    run(path, out, **QUIET)
    rows = pq.read_table(out / "forecasts.parquet").to_pandas()
    assert (rows.loc[rows["model"] == "harness", "p_up"] == 0.4).all()
    assert audit_run(out, echo=lambda *_: None) == []


def test_the_report_counts_the_sessions_calls_and_shows_them(mcp_run):
    import pandas as pd

    _, out, _, _ = mcp_run
    assert cli("report", out).returncode == 0
    agents = pd.read_csv(out / "tables" / "agents.csv").set_index("model")
    assert agents.loc["harness", "tasks"] == 12
    assert agents.loc["harness", "calls_per_task"] == pytest.approx(42 / 12)
    assert agents.loc["harness", "refused_future"] == 6
    assert agents.loc["harness", "valid"] == 6
    assert "call-3" in (out / "report.html").read_text()  # the sample browser's exchange


def test_an_mcp_agent_has_no_twin_to_compare_with(tmp_path, sample_store):
    from finbench.reports.agents import twin_of
    from finbench.tracks.configs import load_config

    path = intraday_config(tmp_path, sample_store)
    path.write_text(path.read_text() + '[[models]]\nname = "bare"\nkind = "mcp"\n')
    assert twin_of(load_config(path), "harness") is None


def test_an_ending_its_calls_do_not_give_is_named_by_the_audit(tmp_path, sample_store):
    path = intraday_config(tmp_path, sample_store)
    out = run(path, tmp_path / "out", **QUIET)
    cut = "AAPL|2025-01-14|MIDDAY"
    for task in waiting(out)["harness"]:  # answered without a call; one said to be over budget
        Session(out, "harness", task).write_answer(
            arguments=None if task == cut else {"p_up": 0.5, "lower": -0.01, "upper": 0.01,
                                                "rationale": None},
            ended="agent: budget: 5 tool calls asked, at most 4 a task (max_tool_calls)"
            if task == cut else None, client={})
    run(path, out, **QUIET)
    found = audit_run(out, echo=lambda *_: None)
    assert len(found) == 1 and cut in found[0] and "do not give" in found[0], found
