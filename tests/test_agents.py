"""Agents with gated tools through the real openai client against scripted agents on a
loopback server: every call answered at the task's ``now``, receipted, executed again by the
audit; an adversary asking for the future gets refusals and no canary."""

import json
import shutil

import pandas as pd
import pyarrow.parquet as pq
import pytest

from finbench.audit import audit_run
from finbench.audit.agents import agent_problems
from finbench.core.errors import ConfigError
from finbench.data.synth import CANARY_MARK
from finbench.runlog.tool_calls import TOOL_CALLS
from finbench.runlog.transcripts import Transcripts
from finbench.runner import run
from finbench.tracks.tools import ToolResult, agent_input_sha256

TOOLS = ["bars", "daily", "headlines", "calendar"]
AGENTS = ["agent-honest", "agent-parallel", "agent-adversarial", "agent-malformed"]


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("FINBENCH_TEST_KEY", "sk-agents-test")
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))


def config(tmp_path, sample_store, base_url, agents=AGENTS, tools=TOOLS, extra=""):
    blocks = "".join(
        f'[[models]]\nname = "{a}"\nkind = "openai"\nmodel = "{a}"\nbase_url = "{base_url}"\n'
        f'api_key_env = "FINBENCH_TEST_KEY"\ntools = {json.dumps(tools)}\n{extra}'
        for a in agents)
    path = tmp_path / "agents.toml"
    path.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL", "MSFT"]\n'
                    'start = "2025-01-14"\nend = "2025-01-15"\n[[models]]\nname = "coin"\n'
                    f'kind = "coin"\n{blocks}')
    return path


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory, sample_store):
    """One run of the four scripted agents over two sessions of two tickers."""
    from tests.llm_server import ChatServer

    tmp = tmp_path_factory.mktemp("agents")
    server = ChatServer()
    mp = pytest.MonkeyPatch()
    mp.setenv("FINBENCH_TEST_KEY", "sk-agents-test")
    mp.setenv("FINBENCH_CACHE_DIR", str(tmp / "cache"))
    try:
        out = run(config(tmp, sample_store, server.base_url), tmp / "out", echo=lambda *_: None)
        yield out, server, tmp
    finally:
        mp.undo()
        server.close()


def rows_of(out):
    return pq.read_table(out / "forecasts.parquet").to_pandas()


def test_agents_answer_through_their_tools_and_end_invalid_when_they_break_the_rules(
        agent_run):
    out, server, _ = agent_run
    rows = rows_of(out)
    by = {m: g for m, g in rows.groupby("model")}
    assert all(len(by[m]) == 12 for m in AGENTS)  # 2 tickers x 2 sessions x 3 horizons
    assert by["agent-honest"]["valid"].all() and by["agent-parallel"]["valid"].all()
    assert set(by["agent-adversarial"]["error"]) == {
        "agent: budget: 9 tool calls asked, at most 8 a task (max_tool_calls)"}
    assert set(by["agent-malformed"]["error"]) == {
        "agent: malformed tool call (a tool call without an id)"}
    # the honest agent answered from what its tools gave: today's bars after the open
    assert (by["agent-honest"].set_index("task_id")["p_up"].filter(like="MIDDAY") == 0.6).all()
    details = {(r.task_id, r.model): json.loads(r.detail) for r in rows.itertuples()
               if r.model in AGENTS}
    adversary = [d for (_, m), d in details.items() if m == "agent-adversarial"]
    assert all(d["refusals"] == {"bad_arguments": 2, "future": 3, "unknown_tool": 1}
               for d in adversary)
    assert all(d["turns"] == 3 for (_, m), d in details.items() if m == "agent-honest")
    # each request of an agent carried the tools by name, the model to decide
    bodies = [r["body"] for r in server.requests if r["model"] == "agent-honest"]
    assert all([t["function"]["name"] for t in b["tools"]] == TOOLS
               and b["tool_choice"] == "auto" for b in bodies)
    assert len(bodies) == 12 * 3  # three turns a task, each asked once
    parallel = [r["body"] for r in server.requests if r["model"] == "agent-parallel"]
    assert len(parallel) == 24  # one turn of three calls at once, then the answer


def test_every_tool_answer_is_of_its_tasks_now_and_receipted(agent_run):
    """Over every call of the run (the adversary's included): no item available after the
    task's forecast instant, no canary of the task's own day (each is available only after
    its day's target: the adversary searches for them; those of earlier days are seen),
    each answer in the transcript is the one receipted, and the row's input digest and
    max_input_time cover what the tools answered."""
    out, _, _ = agent_run
    rows = rows_of(out)
    tasks = pd.read_parquet(out / "tasks.parquet").set_index("task_id")
    table = pq.read_table(out / TOOL_CALLS).to_pandas()
    transcripts = Transcripts(out)
    answers, old_canaries = 0, 0
    try:
        for model in AGENTS:
            for call in transcripts.each_last(model):
                now = tasks.loc[call["task_id"], "t_forecast"]
                for message in call["messages"]:
                    if message["role"] != "tool":
                        continue
                    answers += 1
                    body = json.loads(message["content"])
                    session = tasks.loc[call["task_id"], "session"]
                    for item in body.get("items", []):
                        if "available_at" in item:
                            assert pd.Timestamp(item["available_at"]) <= now
                        if CANARY_MARK in item.get("headline", ""):
                            assert session not in item["id"]
                            old_canaries += 1
    finally:
        transcripts.close()
    assert old_canaries > 0  # the adversary's search reached canaries, earlier days' only
    assert answers == len(table) == 12 * (3 + 3 + 8)  # honest, parallel, adversarial
    answered = table["max_available"].notna()
    assert answered.sum() >= 80 and (table["max_available"][answered]
                                     <= table["now"][answered]).all()
    for r in rows[rows["model"].isin(AGENTS)].itertuples():
        detail = json.loads(r.detail)
        assert r.input_sha256 == agent_input_sha256(
            detail["prompt_sha256"], [c["result_sha256"] for c in detail["tool_calls"]])
        assert r.max_input_time <= tasks.loc[r.task_id, "t_forecast"]
        latest = [pd.Timestamp(c["max_available"]) for c in detail["tool_calls"]
                  if c["max_available"]]
        assert r.max_input_time == max([r.context_max_input_time, *latest])
    honest = rows[rows["model"] == "agent-honest"]
    assert (honest["input_sha256"] != honest["task_id"]).all()
    assert table.groupby("model").size().to_dict() == {
        "agent-adversarial": 96, "agent-honest": 36, "agent-parallel": 36}


def test_the_audit_executes_every_call_again_and_passes(agent_run, tmp_path):
    out, _, _ = agent_run
    assert audit_run(out, echo=lambda *_: None) == []
    from finbench.reports.build import report

    copy = tmp_path / "reported"
    shutil.copytree(out, copy)
    report(copy)  # agents, none with a twin without tools: no empty table of what tools add
    assert (copy / "tables" / "agents.csv").is_file()
    assert not (copy / "tables" / "tools_effect.csv").exists()
    assert "What tools add" not in (copy / "report.html").read_text()


def test_a_tool_answer_the_snapshot_does_not_give_is_a_violation_naming_the_call(
        agent_run, sample_store):
    """The audit's re-execution against tools that answer otherwise (a snapshot with one
    more headline) or give an item after now: each such call is named."""
    from finbench.data.store import Store
    from finbench.tracks.intraday.config import TasksConfig
    from finbench.tracks.intraday.tools import IntradayTools

    out, _, _ = agent_run
    real = IntradayTools(Store(sample_store), TasksConfig(tickers=["AAPL"], start="2025-01-15",
                                                          end="2025-01-15"))

    class Otherwise:
        names, snapshot_sha256, now = real.names, real.snapshot_sha256, real.now

        def __init__(self, late: bool) -> None:
            self.late = late

        def call(self, name, arguments, now, task=None):
            result = real.call(name, arguments, now, task)
            if name != "daily" or result.refusal:
                return result
            if self.late:
                from finbench.tracks.tools import answered

                return answered("daily", now, [{}], [(now + pd.Timedelta(minutes=1)).value])
            return ToolResult(result.content.replace("}]", ',"x":1}]'), result.items,
                              result.max_available)

    tasks = pd.read_parquet(out / "tasks.parquet")
    rows = rows_of(out)
    honest = rows[rows["model"] == "agent-honest"]
    prompts = {r.task_id: json.loads(r.detail)["prompt_sha256"] for r in honest.itertuples()}
    from finbench.core.config import OpenAIModel

    model = OpenAIModel(name="agent-honest", kind="openai", model="agent-honest", tools=TOOLS)
    clean, _ = agent_problems(out, model, real, tasks, prompts)
    assert clean == []
    found, _ = agent_problems(out, model, Otherwise(late=False), tasks, prompts)
    assert any("call call_0_0 (daily" in p and "result_sha256" in p for p in found)
    found, _ = agent_problems(out, model, Otherwise(late=True), tasks, prompts)
    assert any("call call_0_0 (daily" in p and "an item available at" in p for p in found)


def test_a_run_again_on_the_cache_asks_no_turn_twice_and_gives_the_same_rows(
        agent_run, tmp_path, sample_store):
    """Every turn's completion is cached by the exchange so far (with the tools, ``now``
    and the snapshot): a fresh folder on the same cache makes no request, and its rows are
    the first run's but for latency and the cache flag."""
    out, server, tmp = agent_run
    before = len(server.requests)
    cfg = tmp_path / "again.toml"
    shutil.copy(tmp / "agents.toml", cfg)
    mp = pytest.MonkeyPatch()
    mp.setenv("FINBENCH_CACHE_DIR", str(tmp / "cache"))
    try:
        again = run(cfg, tmp_path / "again", echo=lambda *_: None)
    finally:
        mp.undo()
    assert len(server.requests) == before
    first, second = rows_of(out), rows_of(again)
    same = [c for c in first.columns if c not in ("latency", "detail")]
    pd.testing.assert_frame_equal(first[same], second[same])
    strip = [{k: v for k, v in json.loads(d).items() if k != "cached"}
             if d else None for d in first["detail"]]
    assert strip == [{k: v for k, v in json.loads(d).items() if k != "cached"}
                     if d else None for d in second["detail"]]
    assert pq.read_table(out / TOOL_CALLS).equals(pq.read_table(again / TOOL_CALLS))


def test_tools_a_track_does_not_have_are_refused_before_any_call(tmp_path, sample_store,
                                                                  server):
    cfg = config(tmp_path, sample_store, server.base_url, agents=["agent-honest"],
                 tools=["bars", "orders"])
    with pytest.raises(ConfigError, match=r"models.agent-honest.tools: 'orders' not among "
                                          r"the track's tools \(bars, daily, headlines, "
                                          r"calendar\)"):
        run(cfg, tmp_path / "out", echo=lambda *_: None)
    assert server.requests == [] and not (tmp_path / "out" / "forecasts.parquet").exists()


def test_an_agent_config_is_checked():
    from pydantic import ValidationError

    from finbench.core.config import OpenAIModel

    with pytest.raises(ValidationError, match="a tool named twice"):
        OpenAIModel(name="a", kind="openai", model="m", tools=["bars", "bars"])
    with pytest.raises(ValidationError, match="head 'native'"):
        OpenAIModel(name="a", kind="openai", model="m", tools=["bars"], format="multiclass",
                    head="native")
    with pytest.raises(ValidationError, match="max_turns"):
        OpenAIModel(name="a", kind="openai", model="m", tools=["bars"], max_turns=1)


def test_agents_refuse_the_batch_api_and_a_dry_run_states_its_turns(tmp_path, sample_store,
                                                                    server):
    cfg = config(tmp_path, sample_store, server.base_url, agents=["agent-honest"],
                 extra="max_turns = 4\nprice_input_per_1m = 1.0\nprice_output_per_1m = 2.0\n")
    with pytest.raises(ConfigError, match="--batch: agent-honest call tools, turn by turn"):
        run(cfg, tmp_path / "batch", batch=True, echo=lambda *_: None)
    said = []
    run(cfg, tmp_path / "dry", dry_run=True, echo=said.append, results=said.append)
    line = next(s for s in said if s.startswith("dry run agent-honest"))
    assert line.startswith("dry run agent-honest: 48 calls")  # 12 tasks x 4 turns
    assert "each task taken as 4 turns, its max_turns" in line
    assert server.requests == []


def test_agent_shards_merge_into_the_unsharded_run_with_its_receipts(agent_run, tmp_path):
    """Each session a shard (the same cache: no turn asked again), merged: the tool calls'
    receipts are the unsharded run's, and the merged run audits clean."""
    from finbench.shards import merge_shards

    out, server, tmp = agent_run
    before = len(server.requests)
    mp = pytest.MonkeyPatch()
    mp.setenv("FINBENCH_CACHE_DIR", str(tmp / "cache"))
    try:
        shards = [run(tmp / "agents.toml", tmp_path / day, shard=(day, day),
                      echo=lambda *_: None) for day in ("2025-01-14", "2025-01-15")]
        merged = merge_shards(shards, tmp_path / "merged")
    finally:
        mp.undo()
    assert len(server.requests) == before
    assert pq.read_table(merged / TOOL_CALLS).equals(pq.read_table(out / TOOL_CALLS))
    assert audit_run(merged, echo=lambda *_: None) == []


def _rows_but_timing(path):
    rows = pq.read_table(path / "forecasts.parquet").to_pandas()
    rows["detail"] = [json.dumps({k: v for k, v in json.loads(d).items() if k != "cached"},
                                 sort_keys=True) if d else d for d in rows["detail"]]
    return rows.drop(columns=["latency"])


@pytest.mark.slow
def test_a_run_killed_during_agent_turns_resumes_paying_no_turn_twice(tmp_path, sample_store,
                                                                      monkeypatch):
    """SIGKILL while the agents converse, then the same command: every turn (the exchange so
    far) was asked once, but those in flight at the kill; the rows are those of a run never
    killed, on a cache of its own."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from tests.llm_server import ChatServer

    slow = ChatServer(delay=0.1)
    try:
        cfg = config(tmp_path, sample_store, slow.base_url,
                     agents=["agent-honest", "agent-adversarial"], extra="concurrency = 2\n")
        out = tmp_path / "out"
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        proc = subprocess.Popen([sys.executable, "-m", "finbench", "run", str(cfg), "--out",
                                 str(out)], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        journal = out / "journal.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (journal.is_file() and sum(
                '"model": "agent-' in x for x in journal.read_text().splitlines()) >= 3):
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        asked_before = slow.total
        run(cfg, out, echo=lambda *_: None)
        repeated = [key for key, n in slow.counts.items() if n > 1]
        assert asked_before > 3 and len(repeated) <= 2 * 2  # in flight: 2 per agent
        monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "another-cache"))
        fresh = run(cfg, tmp_path / "fresh", echo=lambda *_: None)
        pd.testing.assert_frame_equal(_rows_but_timing(out), _rows_but_timing(fresh))
        assert pq.read_table(out / TOOL_CALLS).equals(pq.read_table(fresh / TOOL_CALLS))
        assert audit_run(out, echo=lambda *_: None) == []
    finally:
        slow.close()


def _rehash(run_dir, name):
    import hashlib

    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["files"][name] = hashlib.sha256((run_dir / name).read_bytes()).hexdigest()
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))


def test_an_edited_receipt_or_transcript_answer_is_named_by_the_audit(agent_run, tmp_path):
    """``tool_calls.parquet`` with a refusal taken out (its hash made again in the manifest),
    and a transcript whose tool answer was changed (transcripts are not hashed): each named."""
    import sqlite3

    from finbench.runlog.transcripts import pack, unpack

    out, _, _ = agent_run
    edited = tmp_path / "edited"
    shutil.copytree(out, edited)
    table = pq.read_table(edited / TOOL_CALLS).to_pandas()
    table.loc[table["refusal"].notna().idxmax(), "refusal"] = None
    pq.write_table(pq.read_table(edited / TOOL_CALLS).from_pandas(
        table, schema=pq.read_schema(edited / TOOL_CALLS), preserve_index=False),
        edited / TOOL_CALLS)
    _rehash(edited, TOOL_CALLS)
    db = sqlite3.connect(edited / "transcripts.sqlite")
    zdict = db.execute("SELECT zdict FROM dictionary WHERE id = 1").fetchone()[0]
    task, blob = db.execute("SELECT task_id, messages FROM transcripts WHERE model = "
                            "'agent-honest' ORDER BY task_id LIMIT 1").fetchone()
    messages = unpack(blob, zdict)
    tool = next(m for m in messages if m["role"] == "tool")
    tool["content"] = tool["content"].replace('"items":[', '"items":[{"close":1.0},', 1)
    db.execute("UPDATE transcripts SET messages = ? WHERE model = 'agent-honest' AND "
               "task_id = ?", (pack(messages, zdict), task))
    db.commit()
    db.close()
    problems = audit_run(edited, echo=lambda *_: None)
    assert any(p.startswith(f"{TOOL_CALLS}: the rows of model agent-adversarial")
               for p in problems), problems
    assert any(f"({task}, agent-honest) call call_0_0: the answer in the transcript is not "
               "the one receipted" in p for p in problems), problems


EVENT_TOOLS = ["posts", "prices", "markets"]


def test_event_agents_see_only_what_was_known_at_their_cutoff(tmp_path, server):
    """The event pilot with a scripted honest and adversarial agent: no post at or after a
    task's ``t0`` (the adversary searches a year of posts for its own question's canary), no
    price after it, no market not yet resolved before it (its own included); refusals
    counted; the audit executes every call again and passes."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    text = (root / "configs" / "pilot_events.toml").read_text().replace(
        "../data/events_sample/store", str(root / "data" / "events_sample" / "store")).replace(
        '"../data/', f'"{root}/data/')
    text = text[:text.index("[[models]]\nname = \"GPT-4o Mini with posts\"")]
    for agent in ("agent-event-honest", "agent-event-adversarial"):
        text += (f'[[models]]\nname = "{agent}"\nkind = "openai"\nmodel = "{agent}"\n'
                 f'base_url = "{server.base_url}"\napi_key_env = "FINBENCH_TEST_KEY"\n'
                 f'retrieval = "none"\ntools = {json.dumps(EVENT_TOOLS)}\n')
    text += (f'[[models]]\nname = "plain"\nkind = "openai"\nmodel = "agent-event-honest"\n'
             f'base_url = "{server.base_url}"\napi_key_env = "FINBENCH_TEST_KEY"\n'
             'retrieval = "none"\n')  # the honest agent's model, asked without tools
    cfg = tmp_path / "events_agents.toml"
    cfg.write_text(text)
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    rows = rows_of(out).set_index(["model", "task_id"])
    tasks = pd.read_parquet(out / "tasks.parquet").set_index("task_id")
    markets = pd.read_parquet(root / "data" / "events_sample" / "store" / "markets.parquet"
                              ).set_index("market_id")
    honest = rows.loc["agent-event-honest"]
    assert honest["valid"].all() and len(honest) == 42
    adversary = rows.loc["agent-event-adversarial"]
    assert set(adversary["error"]) == {"agent: budget: no answer after 6 turns (max_turns 6)"}
    table = pq.read_table(out / TOOL_CALLS).to_pandas()
    assert len(table) == 42 * (3 + 7)  # the adversary's sixth turn asks a call it cannot make
    refusals = table[table["model"] == "agent-event-adversarial"]["refusal"].value_counts()
    assert refusals.to_dict() == {"future": 42, "bad_arguments": 42}
    transcripts = Transcripts(out)
    seen = 0
    try:
        for model in ("agent-event-honest", "agent-event-adversarial"):
            for call in transcripts.each_last(model):
                t0 = tasks.loc[call["task_id"], "t0"]
                own = tasks.loc[call["task_id"], "market_id"]
                question = markets.loc[own, "question"]
                for message in (m for m in call["messages"] if m["role"] == "tool"):
                    for item in json.loads(message["content"]).get("items", []):
                        seen += 1
                        at = pd.Timestamp(item["available_at"])
                        assert at <= t0 and (at < t0 or "price" in item)
                        assert not ("CANARY" in item.get("text", "")
                                    and question in item["text"])
                        if "market_id" in item:
                            assert item["market_id"] != own
                            assert pd.Timestamp(item["opened_at"]) < t0
    finally:
        transcripts.close()
    assert seen > 1000
    # what each forecast cost (every turn of the scripted server bills 100 + 20 tokens)
    cost = pd.read_parquet(out / "rows.parquet").set_index(["model", "task_id"])
    made = table.groupby(["model", "task_id"]).size()
    for agent in ("agent-event-honest", "agent-event-adversarial"):
        mine = cost.loc[agent]
        turns = rows.loc[agent, "detail"].map(lambda d: json.loads(d)["turns"])
        assert (mine["calls"] == turns.reindex(mine.index)).all()
        assert (mine["tool_calls"] == made.loc[agent].reindex(mine.index)).all()
        assert (mine["tokens"] == 120 * mine["calls"]).all() and mine["dollars"].isna().all()
    assert (cost.loc["agent-event-honest", "calls"] == 2).all()  # three calls at once, then
    # its answer
    assert (cost.loc["plain", ["calls", "tool_calls", "tokens"]] == [1, 0, 120]).all().all()
    from finbench.reports.build import report

    report(out)
    effect = pd.read_csv(out / "tables" / "event_tools_effect.csv")
    scored = pd.read_parquet(out / "rows.parquet")
    both = scored[scored["scored"]].pivot(index="task_id", columns="model", values="brier")
    both = both[["agent-event-honest", "plain"]].dropna()
    assert effect[["model", "without_tools", "n"]].to_dict("records") == [
        {"model": "agent-event-honest", "without_tools": "plain", "n": len(both)}]
    assert effect.loc[0, "diff"] == pytest.approx(
        (both["agent-event-honest"] - both["plain"]).mean(), rel=1e-9)
    usage = pd.read_csv(out / "tables" / "event_agents.csv").set_index("model")
    assert usage.loc["agent-event-honest", "calls_per_task"] == 3.0
    assert usage.loc["agent-event-adversarial", "refused_future"] == 42
    assert usage.loc["agent-event-honest", "citing"] > 0  # it cites the posts it read
    from finbench.reports.show import show
    from finbench.tracks.events.show import render_task

    task = tasks.index[0]
    text = render_task(show(out, task, "agent-event-honest"))
    assert "-> call_0_0: posts" in text and "-> call_0_1: prices" in text
    assert "[tool answer to call_0_2]" in text
    assert audit_run(out, echo=lambda *_: None) == []


def test_the_report_says_what_tools_add_against_the_same_model_without_them(
        tmp_path, sample_store, server):
    """An agent and the same model asked without tools: the report's ``agents`` table counts
    its calls, turns and citing answers, and ``tools_effect`` pairs the two on the tasks both
    scored (means and difference equal to the rows' own)."""
    from finbench.reports.build import report

    cfg = config(tmp_path, sample_store, server.base_url, agents=["agent-honest"])
    text = cfg.read_text() + (f'[[models]]\nname = "plain"\nkind = "openai"\n'
                              f'model = "agent-honest"\nbase_url = "{server.base_url}"\n'
                              'api_key_env = "FINBENCH_TEST_KEY"\n')
    cfg.write_text(text)
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    sent = [r["body"] for r in server.requests]
    plain = [b for b in sent if not b.get("tools")]  # the model without tools: asked once
    assert len(plain) == 12 and len(sent) == 12 + 12 * 3
    report(out)
    usage = pd.read_csv(out / "tables" / "agents.csv")
    effect = pd.read_csv(out / "tables" / "tools_effect.csv")
    rows = pd.read_parquet(out / "rows.parquet")
    both = rows[rows["scored"]].pivot(index="task_id", columns="model", values="brier").dropna()
    assert len(effect) == 1 and effect.loc[0, "n"] == len(both) == 11  # a task unscored
    assert effect.loc[0, "brier"] == pytest.approx(both["agent-honest"].mean(), rel=1e-9)
    assert effect.loc[0, "brier_twin"] == pytest.approx(both["plain"].mean(), rel=1e-9)
    assert effect.loc[0, "diff"] == pytest.approx(
        (both["agent-honest"] - both["plain"]).mean(), rel=1e-9, abs=1e-15)
    want_skill = (both["plain"] - both["agent-honest"]).sum() / both["coin"].sum()
    assert effect.loc[0, "bss_diff"] == pytest.approx(want_skill, rel=1e-9, abs=1e-15)
    assert usage.to_dict("records")[0] | {"citing_share": 0} == {
        "model": "agent-honest", "tasks": 12, "calls_per_task": 3.0, "turns_per_task": 3.0,
        "refused_future": 0, "refused_bad_arguments": 0, "refused_unknown_tool": 0,
        "refused_too_many": 0, "valid": 12, "citing": usage.loc[0, "citing"],
        "citing_share": 0}
    assert usage.loc[0, "citing"] > 0  # its rationale names the headlines it read


def test_a_tool_the_agent_was_not_given_is_refused_though_the_track_has_it(
        tmp_path, sample_store, server):
    cfg = config(tmp_path, sample_store, server.base_url, agents=["agent-honest"],
                 tools=["bars", "headlines"])
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    table = pq.read_table(out / TOOL_CALLS).to_pandas()
    daily = table[table["tool"] == "daily"]
    assert len(daily) == 12 and (daily["refusal"] == "unknown_tool").all()
    assert (table.loc[table["tool"] != "daily", "refusal"].isna()).all()
    sent = [r["body"] for r in server.requests]
    assert all([t["function"]["name"] for t in b["tools"]] == ["bars", "headlines"]
               for b in sent)
    transcripts = Transcripts(out)
    try:
        call = transcripts.each_last("agent-honest").__next__()
    finally:
        transcripts.close()
    answer = next(m for m in call["messages"] if m.get("tool_call_id") == "call_0_0")
    assert json.loads(answer["content"])["message"] == (
        "no tool 'daily': the tools are bars, headlines")
    assert audit_run(out, echo=lambda *_: None) == []


def test_show_prints_an_agents_exchange_turn_by_turn(agent_run):
    from finbench.reports.show import show
    from finbench.tracks.intraday.show import render_show

    out, _, _ = agent_run
    text = render_show(show(out, "AAPL|2025-01-15|MIDDAY", "agent-honest"))
    assert '-> call_0_0: daily {"ticker": "AAPL", "sessions": 5}' in text
    assert "[tool answer to call_0_0]" in text and "-> call_1_0: bars" in text
    assert text.index("[tool answer to call_0_1]") < text.index("-> call_1_0: bars")


def test_an_agents_row_depends_on_its_task_and_the_snapshot_not_the_runs_range(
        agent_run, tmp_path, sample_store, monkeypatch):
    """The same agents over one session instead of two, on a cache of their own (every turn
    asked again): the session's rows and receipts are those of the two-session run."""
    out, server, _ = agent_run
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "own-cache"))
    cfg = config(tmp_path, sample_store, server.base_url)
    cfg.write_text(cfg.read_text().replace('start = "2025-01-14"', 'start = "2025-01-15"'))
    before = len(server.requests)
    alone = run(cfg, tmp_path / "alone", echo=lambda *_: None)
    assert len(server.requests) > before  # asked again, not read from the first run's cache
    first = _rows_but_timing(out)
    first = first[first["task_id"].str.contains("2025-01-15")].reset_index(drop=True)
    pd.testing.assert_frame_equal(first, _rows_but_timing(alone))
    calls = pq.read_table(out / TOOL_CALLS).to_pandas()
    calls = calls[calls["task_id"].str.contains("2025-01-15")].reset_index(drop=True)
    pd.testing.assert_frame_equal(calls, pq.read_table(alone / TOOL_CALLS).to_pandas())
