"""Every prompt and answer can be read: transcripts of each call, `finbench show`, and the
audit checking what was stored against the prompt re-rendered from the gated context."""

import os
import sqlite3

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.audit import audit_run
from finbench.core.errors import RunError
from finbench.reports.show import show, task_rows
from finbench.runlog.transcripts import TRANSCRIPTS, Transcripts, pack
from finbench.runner import run
from finbench.tracks.base import messages_sha256
from finbench.tracks.intraday.prompt import TEMPLATE_VERSION
from tests.helpers import aapl_config, cli, scripted_toml
from tests.llm_server import ChatServer
from tests.test_llm import config

TASK = "AAPL|2025-01-15|MIDDAY"


@pytest.fixture(scope="module")
def llm_run(tmp_path_factory, sample_store):
    tmp = tmp_path_factory.mktemp("show")
    server = ChatServer()
    os.environ["FINBENCH_TEST_KEY"] = "sk-test"
    os.environ["FINBENCH_CACHE_DIR"] = str(tmp / "cache")
    try:
        text = config(tmp, sample_store, server.base_url, [("m", "valid")]).read_text()
        text = text.replace('[[models]]\nname = "coin"\nkind = "coin"\n',
                            '[[models]]\nname = "coin"\nkind = "coin"\n[[models]]\n'
                            'name = "rate"\nkind = "base_rate"\nmin_count = 5\n')
        (tmp / "cfg.toml").write_text(text)
        out = run(tmp / "cfg.toml", tmp / "out", echo=lambda *_: None)
        yield out, server
    finally:
        server.close()


def test_each_call_is_kept_as_sent_and_as_received(llm_run):
    out, server = llm_run
    kept = Transcripts(out).last_of_each("m")
    assert len(kept) == 3
    sent = {r["prompt"]: r["body"]["messages"] for r in server.requests}
    rows = pd.read_parquet(out / "forecasts.parquet").query("model == 'm'").set_index("task_id")
    for task_id, call in kept.items():
        assert call["messages"] == sent[call["input_sha256"]]  # exactly what the server got
        assert messages_sha256(call["messages"], TEMPLATE_VERSION) == rows.loc[task_id, "input_sha256"]
        body = call["response"]["body"]
        assert body["choices"][0]["message"]["content"] == rows.loc[task_id, "raw"]
        assert body["usage"]["total_tokens"] == 120


def test_show_gives_prompt_answer_label_scores_and_the_baselines(llm_run):
    out, _ = llm_run
    found = show(out, TASK, "m")
    assert found["task"]["task_id"] == TASK and found["task"]["status"] == "ok"
    labels = pd.read_parquet(out / "labels.parquet").set_index("task_id")
    assert found["task"]["r"] == labels.loc[TASK, "r"]
    by_model = {m["model"]: m for m in found["models"]}
    assert set(by_model) == {"coin", "rate", "m"}  # the model asked, and every baseline
    mine = by_model["m"]
    assert mine["p_up"] == 0.6 and mine["valid"] and len(mine["calls"]) == 1
    rows = pd.read_parquet(out / "rows.parquet").query("model == 'm' and task_id == @TASK")
    assert mine["scores"]["brier"] == pytest.approx(rows["brier"].item(), abs=0)
    assert by_model["coin"]["p_up"] == 0.5 and by_model["coin"]["calls"] == []
    assert mine["calls"][0]["messages"][0]["role"] == "system"


def test_the_show_command_prints_the_messages_as_sent(llm_run):
    out, _ = llm_run
    result = cli("show", out, TASK, "--model", "m")
    assert result.returncode == 0, result.stderr
    call = Transcripts(out).of(TASK, "m")[0]
    for msg in call["messages"]:
        assert f"[{msg['role']}]\n{msg['content']}" in result.stdout
    assert "== m (openai)" in result.stdout and "== coin (coin)" in result.stdout
    result = cli("show", out, "NOPE|x|y")
    assert result.returncode == 2 and "no task 'NOPE|x|y' (task ids look like" in result.stderr
    with pytest.raises(RunError, match="has no forecast of model 'zz'"):
        show(out, TASK, "zz")


def test_the_audit_names_a_transcript_that_is_not_what_was_sent(llm_run, tmp_path):
    import shutil

    out, _ = llm_run
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    call = Transcripts(bad).of(TASK, "m")[0]
    forged = [dict(m) for m in call["messages"]]
    forged[-1]["content"] = forged[-1]["content"].replace("AAPL", "MSFT")
    with sqlite3.connect(bad / TRANSCRIPTS) as db:
        zdict = db.execute("SELECT zdict FROM dictionary").fetchone()[0]
        db.execute("UPDATE transcripts SET messages = ? WHERE task_id = ? AND model = 'm'",
                   (pack(forged, zdict), TASK))
        db.execute("UPDATE transcripts SET response = ? WHERE task_id = ?",
                   (b"not zlib", "AAPL|2025-01-15|MORNING"))
        db.execute("DELETE FROM transcripts WHERE task_id = 'AAPL|2025-01-15|CLOSE'")
    problems = audit_run(bad)
    assert any(TASK in p and "transcript's messages are not the prompt re-rendered" in p
               for p in problems), problems
    assert any("AAPL|2025-01-15|CLOSE" in p and "no transcript" in p for p in problems)
    assert any("AAPL|2025-01-15|MORNING" in p and "cannot be read" in p for p in problems)
    assert audit_run(out) == []


def test_a_run_of_an_older_finbench_is_refused_with_the_missing_column(llm_run, tmp_path):
    import shutil

    import pyarrow.parquet as pq

    out, _ = llm_run
    old = tmp_path / "old"
    shutil.copytree(out, old)
    table = pq.read_table(old / "forecasts.parquet")
    pq.write_table(table.drop_columns(["answer_status"]), old / "forecasts.parquet")
    for call in (lambda: show(old, TASK), lambda: audit_run(old)):
        with pytest.raises(RunError, match="has no column answer_status: the run was made by an "
                                           "older FinBench"):
            call()


def test_merged_shards_keep_every_call_and_audit_clean(tmp_path, sample_store, server,
                                                       monkeypatch):
    from finbench.shards import merge_shards

    monkeypatch.setenv("FINBENCH_TEST_KEY", "sk-test")
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))
    cfg = config(tmp_path, sample_store, server.base_url, [("m", "valid")],
                 start="2025-01-14", end="2025-01-15")
    a = run(cfg, tmp_path / "a", shard=("2025-01-14", "2025-01-14"), echo=lambda *_: None)
    b = run(cfg, tmp_path / "b", shard=("2025-01-15", "2025-01-15"), echo=lambda *_: None)
    merged = merge_shards([a, b], tmp_path / "merged")
    kept = Transcripts(merged).last_of_each("m")
    assert len(kept) == 6 and kept == {**Transcripts(a).last_of_each("m"),
                                       **Transcripts(b).last_of_each("m")}
    assert audit_run(merged) == []
    assert show(merged, "AAPL|2025-01-14|CLOSE", "m")["models"][-1]["calls"]


def test_show_json_is_strict_json_with_an_infinite_kelly_growth_as_text(tmp_path, sample_store):
    """A probability of 0 on a move up grows wealth by log(0) = -inf (ruin): `show --json`
    says "-inf", and a missing score null, so strict readers (jq; Python refusing NaN and
    Infinity) read it."""
    import json

    cfg = aapl_config(tmp_path / "cfg.toml", sample_store, scripted_toml(
        sure_down='{"p_up": 0.0, "lower": -0.01, "upper": 0.01}', mute="not json"))
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    labels = pd.read_parquet(out / "labels.parquet").set_index("task_id")
    task = next(t for t, y in labels["y"].items() if y == 1)  # the move was up
    result = cli("show", out, task, "--json")
    assert result.returncode == 0, result.stderr

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    found = {m["model"]: m for m in json.loads(result.stdout, parse_constant=refuse)["models"]}
    assert found["sure_down"]["scores"]["kelly"] == "-inf"
    assert found["mute"]["scores"]["kelly"] is None


@settings(max_examples=40)
@given(st.lists(st.sampled_from(["A|1", "B|2", "C|3", "\u00c4|4"]), max_size=30),
       st.integers(1, 7), st.sampled_from(["A|1", "\u00c4|4", "Z|9"]))
def test_a_tasks_rows_are_those_a_filter_of_the_whole_table_keeps(tmp_path_factory, ids,
                                                                  group_rows, task_id):
    """A task's rows read from the row groups holding it (spread over several, or none)
    are the whole table's rows of that task, in its order, typed as the whole table's."""
    path = tmp_path_factory.mktemp("rows") / "t.parquet"
    table = pa.table({"task_id": pa.array(ids, pa.string()),
                      "n": pa.array(range(len(ids)), pa.int64()),
                      "note": pa.array([None if i % 3 else f"x{i}" for i in range(len(ids))],
                                       pa.string())})
    pq.write_table(table, path, row_group_size=group_rows)
    whole = pd.read_parquet(path)
    want = whole[whole["task_id"] == task_id].reset_index(drop=True)
    pd.testing.assert_frame_equal(task_rows(path, task_id), want, check_exact=True)
