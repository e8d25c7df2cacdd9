"""Min-K% probability of each task's text: the user message a model was sent, scored through
the loopback completions endpoint (``echo`` with ``logprobs``, vLLM's answer), each word a
token whose log-probability the test computes again; a provider without the endpoint is said
so and skipped; the report's terciles recomputed from the rows; the audit names an edit."""

import json
import math
import shutil

import numpy as np
import pandas as pd
import pytest

from finbench.audit import audit_run
from finbench.forecasters.min_k import Unsupported, min_k, prompt_logprobs
from finbench.runlog.transcripts import Transcripts
from finbench.runner import run
from finbench.scoring.bootstrap import skill_ci
from tests.llm_server import word_logprob

QUIET = {"echo": lambda *_: None}


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("FINBENCH_TEST_KEY", "sk-min-k-test")
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))


def config(tmp_path, sample_store, base_url, models=("variants",)):
    text = (f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL", "MSFT"]\n'
            'start = "2025-01-06"\nend = "2025-01-15"\n[[models]]\nname = "coin"\n'
            'kind = "coin"\n')
    for model in models:
        text += (f'[[models]]\nname = "{model}"\nkind = "openai"\nmodel = "{model}"\n'
                 f'base_url = "{base_url}"\napi_key_env = "FINBENCH_TEST_KEY"\n'
                 'min_k_percent = 20\n')
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


def expected(text: str) -> tuple[float, int]:
    """Min-20% of a text as the loopback server scores it, by hand: the words after the
    first (the first token has no log-probability), the lowest ceil(20% of them) averaged."""
    values = sorted(word_logprob(w) for w in text.split()[1:])
    m = math.ceil(len(values) * 0.2)
    return sum(values[:m]) / m, len(values)


def test_each_tasks_text_is_scored_and_the_report_splits_skill_by_tercile(
        tmp_path, sample_store, server):
    from finbench.reports.build import report

    out = run(config(tmp_path, sample_store, server.base_url, ("variants", "chat-only")),
              tmp_path / "out", **QUIET)
    table = pd.read_parquet(out / "min_k.parquet")
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(table["model"]) == {"variants"}  # the other's provider has no endpoint
    assert "refused the request (HTTP 404" in manifest["min_k_unsupported"]["chat-only"]
    transcripts = Transcripts(out)
    sent = {e["task_id"]: e["messages"] for e in transcripts.each_last("variants")}
    transcripts.close()
    assert len(table) == len(sent) == 42
    for row in table.itertuples():
        text = next(m["content"] for m in sent[row.task_id] if m["role"] == "user")
        score, tokens = expected(text)
        assert row.tokens == tokens and row.k == 20
        assert row.min_k == pytest.approx(score, rel=1e-12)
    report(out)
    shown = pd.read_csv(out / "tables" / "min_k.csv")
    assert shown["tercile"].tolist() == ["lowest", "middle", "highest"]
    rows = pd.read_parquet(out / "rows.parquet")
    mine = rows[(rows["model"] == "variants") & rows["scored"]].set_index("task_id")
    coin = rows[(rows["model"] == "coin") & rows["scored"]].set_index("task_id")
    both = table.set_index("task_id").loc[mine.index.intersection(coin.index)]
    low, high = np.quantile(both["min_k"], [1 / 3, 2 / 3])
    assert shown["n"].sum() == len(both)
    first = both[both["min_k"] <= low].index
    a, b = mine.loc[first, "brier"].to_numpy(), coin.loc[first, "brier"].to_numpy()
    sessions = pd.factorize(mine.loc[first, "session"], sort=True)[0]
    sk = skill_ci(a, b, sessions, replicates=2000, seed=20250115)
    r = shown.iloc[0]
    assert r["n"] == len(first)
    assert r["bss"] == pytest.approx(1 - a.sum() / b.sum(), abs=1e-9)
    assert (r["bss_lo"], r["bss_hi"]) == pytest.approx((sk.lower, sk.upper), abs=1e-9)
    d = mine.loc[both.index, "brier"].to_numpy() - coin.loc[both.index, "brier"].to_numpy()
    rho = np.corrcoef(pd.Series(both["min_k"].to_numpy()).rank(), pd.Series(d).rank())[0, 1]
    assert r["spearman"] == pytest.approx(rho, abs=1e-9)
    assert audit_run(out, echo=lambda *_: None) == []
    def asked(model):
        return len([q for q in server.requests if q.get("completions") and q["model"] == model])

    scored, refused = asked("variants"), asked("chat-only")
    assert scored == 42 and 1 <= refused <= 8  # the calls in flight at the first refusal
    run(config(tmp_path, sample_store, server.base_url, ("variants", "chat-only")),
        tmp_path / "out", **QUIET)
    # resumed: the texts scored are kept; the provider without the endpoint is asked again
    assert asked("variants") == scored and asked("chat-only") > refused


def test_the_audit_names_an_edited_score(tmp_path, sample_store, server):
    from finbench.data.store import sha256_file

    out = run(config(tmp_path, sample_store, server.base_url), tmp_path / "out", **QUIET)
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    table = pd.read_parquet(copy / "min_k.parquet")
    table.loc[0, "min_k"] = table.loc[0, "min_k"] + 0.5
    table.to_parquet(copy / "min_k.parquet", index=False)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["files"]["min_k.parquet"] = sha256_file(copy / "min_k.parquet")
    (copy / "manifest.json").write_text(json.dumps(manifest))
    problems = audit_run(copy, echo=lambda *_: None)
    assert len(problems) == 1 and problems[0].startswith(
        f"min_k.parquet: variants, task {table.loc[0, 'task_id']}: min_k ")


def test_min_k_by_hand_and_a_response_without_log_probabilities():
    assert min_k([None, -1.0, -3.0, -2.0, -0.5], 25) == (-3.0, 4, [-3.0])
    assert min_k([None, -1.0, -3.0, -2.0, -0.5], 100)[0] == pytest.approx(-1.625)
    assert math.isnan(min_k([None], 20)[0])
    body = {"choices": [{"logprobs": {"token_logprobs": [None, -1.0, -2.0, -0.7]}}],
            "usage": {"prompt_tokens": 3}}
    assert prompt_logprobs(body) == [None, -1.0, -2.0]  # the generated token left out
    with pytest.raises(Unsupported, match="no token log-probabilities"):
        prompt_logprobs({"choices": [{"text": "x", "logprobs": None}]})


def test_event_runs_score_texts_and_report_against_the_market(tmp_path, server):
    from finbench.reports.build import report
    from tests.test_mcp import EVENT_STORE

    path = tmp_path / "events.toml"
    path.write_text(f'track = "events"\n[data]\nstore = "{EVENT_STORE}"\n[tasks]\n'
                    'resolved_from = 2024-03-01\nresolved_to = 2024-06-30\ncutoff = "lead"\n'
                    'lead_hours = 72\n[[models]]\nname = "market"\nkind = "market_price"\n'
                    f'[[models]]\nname = "reader"\nkind = "openai"\nmodel = "event-x"\n'
                    f'base_url = "{server.base_url}"\napi_key_env = "FINBENCH_TEST_KEY"\n'
                    'min_k_percent = 20\n')
    out = run(path, tmp_path / "out", **QUIET)
    report(out)
    table = pd.read_csv(out / "tables" / "event_min_k.csv")
    assert set(table["reference"]) == {"market"}
    assert table["n"].sum() == len(pd.read_parquet(out / "min_k.parquet"))
    assert audit_run(out, echo=lambda *_: None) == []


def test_shards_merge_probes_and_scores_as_one_run_makes_them(tmp_path, sample_store, server):
    """Each shard asks its tasks' probes and scores its tasks' texts; the merge orders them as
    the single process does, and audits clean."""
    from finbench.shards import merge_shards

    path = config(tmp_path, sample_store, server.base_url)
    path.write_text(path.read_text() + "knowledge_cutoff = 2025-01-10\nrecall_probe = true\n")
    whole = run(path, tmp_path / "whole", **QUIET)
    a = run(path, tmp_path / "a", shard=("2025-01-06", "2025-01-09"), **QUIET)
    b = run(path, tmp_path / "b", shard=("2025-01-10", "2025-01-15"), **QUIET)
    merged = merge_shards([b, a], tmp_path / "merged")
    assert (merged / "min_k.parquet").read_bytes() == (whole / "min_k.parquet").read_bytes()
    timed = ["latency", "detail"]  # how long each took, and whether from the cache
    pd.testing.assert_frame_equal(
        pd.read_parquet(merged / "probes.parquet").drop(columns=timed),
        pd.read_parquet(whole / "probes.parquet").drop(columns=timed))
    assert audit_run(merged, echo=lambda *_: None) == []
