"""What each forecast cost, in ``rows.*`` and ``rows3.*``: model calls, tool calls, tokens
and dollars at the configured prices, by hand for the scripted server's usage (every turn
bills 100 prompt and 20 completion tokens); null where FinBench cannot know; the same from
the cache as from the calls that made the answers."""

import json

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from finbench.forecasters.agent import AgentRun
from finbench.runlog.costs import COST_COLUMNS, cost_arrays
from finbench.runlog.tool_calls import TOOL_CALLS
from finbench.runner import run
from tests.test_agents import config


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("FINBENCH_TEST_KEY", "sk-costs-test")
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))


PRICED = "price_input_per_1m = 1.0\nprice_output_per_1m = 2.0\n"


def test_rows_say_what_each_forecast_cost_by_hand_and_the_same_from_the_cache(
        tmp_path, sample_store, server):
    cfg = config(tmp_path, sample_store, server.base_url, agents=["agent-honest"], extra=PRICED)
    cfg.write_text(cfg.read_text()
                   + f'[[models]]\nname = "plain"\nkind = "openai"\nmodel = "agent-honest"\n'
                     f'base_url = "{server.base_url}"\napi_key_env = "FINBENCH_TEST_KEY"\n'
                     'price_input_per_1m = 3.0\nprice_output_per_1m = 4.0\n'
                   + f'[[models]]\nname = "unpriced"\nkind = "openai"\n'
                     f'model = "agent-adversarial"\nbase_url = "{server.base_url}"\n'
                     'api_key_env = "FINBENCH_TEST_KEY"\n'
                     'tools = ["bars", "daily", "headlines", "calendar"]\n')
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    asked = len(server.requests)
    rows = pd.read_parquet(out / "rows.parquet").set_index(["model", "task_id"])
    assert list(rows.columns[-4:]) == list(COST_COLUMNS)
    coin = rows.loc["coin"]
    assert (coin[["calls", "tool_calls", "tokens"]] == 0).all().all()
    assert (coin["dollars"] == 0.0).all()
    receipts = pq.read_table(out / TOOL_CALLS).to_pandas()
    made = receipts.groupby(["model", "task_id"]).size()
    honest = rows.loc["agent-honest"]
    assert len(honest) == 12 and (honest["calls"] == 3).all()  # two turns of calls, an answer
    assert (honest["tool_calls"] == made.loc["agent-honest"].reindex(honest.index)).all()
    assert (honest["tokens"] == 3 * 120).all()
    assert honest["dollars"].to_numpy() == pytest.approx(np.full(12, (300 * 1.0 + 60 * 2.0) / 1e6),
                                                         rel=1e-15)
    plain = rows.loc["plain"]
    assert (plain["calls"] == 1).all() and (plain["tool_calls"] == 0).all()
    assert (plain["tokens"] == 120).all()
    assert plain["dollars"].to_numpy() == pytest.approx(np.full(12, (100 * 3.0 + 20 * 4.0) / 1e6),
                                                        rel=1e-15)
    unpriced = rows.loc["unpriced"]  # no prices: its dollars are not known
    assert unpriced["dollars"].isna().all()
    forecasts = pd.read_parquet(out / "forecasts.parquet").set_index(["model", "task_id"])
    turns = forecasts.loc["unpriced", "detail"].map(lambda d: json.loads(d)["turns"])
    assert (unpriced["calls"] == turns.reindex(unpriced.index)).all()
    assert (unpriced["tokens"] == 120 * unpriced["calls"]).all()
    assert (unpriced["tool_calls"] == made.loc["unpriced"].reindex(unpriced.index)).all()
    # an agent's detail holds its tokens summed over its turns
    detail = json.loads(forecasts.loc[("agent-honest", honest.index[0]), "detail"])
    assert (detail["prompt_tokens"], detail["completion_tokens"]) == (300, 60)
    text = pd.read_csv(out / "rows.csv", keep_default_na=False).set_index(["model", "task_id"])
    assert (text.loc["unpriced", "dollars"] == "").all()
    assert float(text.loc[("plain", plain.index[0]), "dollars"]) == pytest.approx(3.8e-4)
    # a second folder on the same cache: no call made, the same costs (of the answers as made)
    again = run(cfg, tmp_path / "again", echo=lambda *_: None)
    assert len(server.requests) == asked
    pd.testing.assert_frame_equal(
        pd.read_parquet(again / "rows.parquet")[list(COST_COLUMNS)],
        pd.read_parquet(out / "rows.parquet")[list(COST_COLUMNS)])
    from finbench.audit import audit_run

    assert audit_run(out, echo=lambda *_: None) == []
    stored = pq.ParquetFile(out / "rows.parquet")  # dollars of "plain" made 0, group by group
    groups = [stored.read_row_group(g) for g in range(stored.num_row_groups)]
    stored.close()
    with pq.ParquetWriter(out / "rows.parquet", groups[0].schema) as writer:
        for group in groups:
            writer.write_table(group.set_column(
                group.schema.get_field_index("dollars"), "dollars",
                pc.if_else(pc.equal(group.column("model"), "plain"), 0.0,
                           group.column("dollars"))))
    said = audit_run(out, echo=lambda *_: None)
    assert [p for p in said if "model plain" in p][0] == (
        f"rows.parquet (model plain): row {plain.index[0]}, dollars is 0.0; the stored "
        "forecasts and labels give 0.00038")
    assert not any("model agent-honest" in p or "model unpriced" in p for p in said)


def test_what_finbench_cannot_know_is_null_and_a_model_that_calls_nothing_costs_nothing():
    replay = cost_arrays("replay", 2)
    assert all(replay[c].null_count == 2 for c in COST_COLUMNS)
    baseline = cost_arrays("coin", 2)
    assert [baseline[c].to_pylist() for c in COST_COLUMNS] == [[0, 0], [0, 0], [0, 0],
                                                               [0.0, 0.0]]
    mcp = cost_arrays("mcp", 2, [json.dumps({"tool_calls": [{}, {}, {}]}), None], [None, None])
    assert [mcp[c].to_pylist() for c in COST_COLUMNS] == [[None, None], [3, 0], [None, None],
                                                          [None, None]]
    # a provider that billed no usage: the call is counted, its tokens and dollars are not
    llm = cost_arrays("openai", 2, [json.dumps({"prompt_tokens": None}),
                                    json.dumps({"prompt_tokens": 10, "completion_tokens": 5})],
                      [None, 15], (2.0, 4.0))
    assert [llm[c].to_pylist() for c in COST_COLUMNS] == [[1, 1], [0, 0], [None, 15],
                                                          [None, (10 * 2.0 + 5 * 4.0) / 1e6]]
    with pytest.raises(ValueError, match="costs of 3 rows from 2 details"):
        cost_arrays("openai", 3, [None, None], [None, None], None)


def test_an_agents_tokens_are_summed_over_its_turns_and_unknown_once_a_turn_says_none():
    agent = AgentRun([], {})
    agent.count({"prompt_tokens": 100, "completion_tokens": 20,
                 "completion_tokens_details": {"reasoning_tokens": 8}})
    agent.count({"prompt_tokens": 150, "completion_tokens": 30,
                 "completion_tokens_details": {"reasoning_tokens": 12}})
    assert (agent.tokens, agent.prompt_tokens, agent.completion_tokens,
            agent.reasoning_tokens) == (300, 250, 50, 20)
    agent.count({"prompt_tokens": 10})
    assert (agent.tokens, agent.prompt_tokens, agent.completion_tokens,
            agent.reasoning_tokens) == (310, 260, None, None)
