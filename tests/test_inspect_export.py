"""``finbench export inspect``: a run's language-model samples as Inspect ``.eval`` logs,
read back with ``inspect_ai.log.read_eval_log`` (the SDK's own reader): every forecast row a
sample, its messages as sent, its answer, label and scores those of the run's files."""

import json

import pandas as pd
import pytest

from finbench.core.errors import RunError
from finbench.runlog.tool_calls import TOOL_CALLS
from finbench.runlog.transcripts import Transcripts
from finbench.runner import run
from tests.helpers import cli
from tests.test_agents import config

inspect_log = pytest.importorskip("inspect_ai.log")  # the [inspect] extra (in [dev])


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("FINBENCH_TEST_KEY", "sk-inspect-test")
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))


def test_every_sample_of_each_model_reads_back_with_its_messages_answer_and_scores(
        tmp_path, sample_store, server):
    cfg = config(tmp_path, sample_store, server.base_url, agents=["agent-honest"])
    cfg.write_text(cfg.read_text() + f'[[models]]\nname = "plain"\nkind = "openai"\n'
                                      f'model = "valid"\nbase_url = "{server.base_url}"\n'
                                      'api_key_env = "FINBENCH_TEST_KEY"\n')
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    done = cli("export", "inspect", out)
    assert done.returncode == 0, done.stderr
    assert "inspect view --log-dir" in done.stdout
    forecasts = pd.read_parquet(out / "forecasts.parquet").set_index(["model", "task_id"])
    rows = pd.read_parquet(out / "rows.parquet").set_index(["model", "task_id"])
    labels = pd.read_parquet(out / "labels.parquet").set_index("task_id")
    receipts = pd.read_parquet(out / TOOL_CALLS).groupby("task_id").size()
    manifest = json.loads((out / "manifest.json").read_text())
    transcripts = Transcripts(out)
    try:
        for name in ("agent-honest", "plain"):
            log = inspect_log.read_eval_log(str(out / "inspect" / f"{name}.eval"))
            mine = forecasts.loc[name]
            assert log.status == "success" and log.eval.metadata["model"] == name
            assert log.eval.metadata["snapshot_sha256"] == manifest["data"]["snapshot_sha256"]
            assert len(log.samples) == len(mine) == 12
            assert {s.id for s in log.samples} == set(mine.index)
            for s in log.samples:
                row, label = mine.loc[s.id], labels.loc[s.id]
                assert s.metadata["p_up"] == row["p_up"] and s.metadata["valid"] == row["valid"]
                assert s.metadata["input_sha256"] == row["input_sha256"]
                assert s.target == ({1: "up", 0: "down"}[int(label["y"])]
                                    if label["status"] == "ok" else "")
                assert s.output.completion == row["raw"]
                # the tokens the run kept, every turn's for the agent
                assert sum(u.total_tokens for u in s.model_usage.values()) == row["tokens"]
                scored = rows.loc[(name, s.id)]
                if scored["scored"]:
                    assert s.scores["brier"].value == scored["brier"]
                    assert s.scores["log_loss"].value == scored["log_loss"]
                else:
                    assert "brier" not in s.scores
                sent = transcripts.of(s.id, name)[-1]["messages"]
                prompt = [m for m in sent if m["role"] in ("system", "user")]
                assert [m.text for m in s.input] == [m["content"] for m in prompt]
                tools = [m for m in s.messages if m.role == "tool"]
                assert len(tools) == (receipts.get(s.id, 0) if name == "agent-honest" else 0)
                assert s.messages[-1].role == "assistant" and s.messages[-1].text == row["raw"]
            means = {score.name: score.metrics["mean"].value for score in log.results.scores}
            want = rows.loc[name]
            assert means["brier"] == pytest.approx(want.loc[want["scored"], "brier"].mean(),
                                                   rel=1e-12)
        calls = [m for m in log.samples[0].messages if m.role == "assistant"]
        assert calls[-1].text  # (the plain model's one answer)
        agent = inspect_log.read_eval_log(str(out / "inspect" / "agent-honest.eval"))
        first = next(m for m in agent.samples[0].messages if m.role == "assistant")
        assert first.tool_calls and first.tool_calls[0].function in (
            "bars", "daily", "headlines", "calendar")
    finally:
        transcripts.close()


def test_a_run_without_language_models_has_nothing_to_export(tmp_path, sample_store):
    from finbench.reports.inspect_log import export_inspect
    from tests.helpers import aapl_config

    out = run(aapl_config(tmp_path / "c.toml", sample_store,
                          '[[models]]\nname = "coin"\nkind = "coin"\n'), tmp_path / "run",
              echo=lambda *_: None)
    with pytest.raises(RunError, match="no language model's samples to export"):
        export_inspect(out)


def test_an_event_runs_agent_samples_read_back_with_yes_or_no_targets(tmp_path, server):
    """The event track's language-model samples: target YES/NO from the label, the row's
    Brier score, the agent's tool turns."""
    from pathlib import Path

    from tests.test_agents import EVENT_TOOLS

    root = Path(__file__).resolve().parents[1]
    text = (root / "configs" / "pilot_events.toml").read_text().replace(
        "../data/events_sample/store", str(root / "data" / "events_sample" / "store")).replace(
        '"../data/', f'"{root}/data/')
    text = text[:text.index("[[models]]\nname = \"GPT-4o Mini with posts\"")]
    text += (f'[[models]]\nname = "agent"\nkind = "openai"\nmodel = "agent-event-honest"\n'
             f'base_url = "{server.base_url}"\napi_key_env = "FINBENCH_TEST_KEY"\n'
             f'retrieval = "none"\ntools = {json.dumps(EVENT_TOOLS)}\n')
    cfg = tmp_path / "events.toml"
    cfg.write_text(text)
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    from finbench.reports.inspect_log import export_inspect

    path, = export_inspect(out, models=["agent"])
    log = inspect_log.read_eval_log(str(path))
    labels = pd.read_parquet(out / "labels.parquet").set_index("task_id")
    rows = pd.read_parquet(out / "rows.parquet").set_index(["model", "task_id"])
    assert log.eval.task == "finbench/events" and len(log.samples) == 42
    for s in log.samples:
        assert s.target == ("YES" if labels.loc[s.id, "y"] == 1 else "NO")
        assert s.scores["brier"].value == rows.loc[("agent", s.id), "brier"]
        assert sum(m.role == "tool" for m in s.messages) == 3  # posts, prices, markets
    with pytest.raises(RunError, match="no language model 'nobody' to export"):
        export_inspect(out, models=["nobody"])
