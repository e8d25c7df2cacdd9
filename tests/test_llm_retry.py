"""A call that gets no answer is not an answer: journalled as status "error", left out of
validity, and asked again (once) by the next run of the directory, until its attempts run out.
Against the loopback server dropping the connection of a fifth of the prompts."""

import json
from collections import Counter

import pandas as pd
import pytest

from finbench.audit import audit_run
from finbench.runner import run
from tests.test_llm import config

TICKERS = ("AAPL", "MSFT", "NVDA", "AMZN", "JPM")


pytestmark = pytest.mark.usefixtures("llm_env")


def flaky_config(tmp_path, sample_store, server, attempts=3):
    text = config(tmp_path, sample_store, server.base_url, [("m", "drop20")],
                  tickers=TICKERS, start="2025-01-14", end="2025-01-15",
                  extra=f"max_attempts = {attempts}\n").read_text()
    path = tmp_path / "cfg.toml"
    # (config's generous timeout: only the dropped connections fail, however loaded the
    # machine is)
    path.write_text(text.replace("max_retries = 2", "max_retries = 0"))
    return path


def rows_of(out, model="m") -> pd.DataFrame:
    return pd.read_parquet(out / "forecasts.parquet").query("model == @model")


def test_dropped_calls_end_in_error_and_one_rerun_asks_each_once(tmp_path, sample_store, server):
    cfg = flaky_config(tmp_path, sample_store, server)
    said: list[str] = []
    out = run(cfg, tmp_path / "out", echo=said.append)
    first = rows_of(out)
    errors = first[first["answer_status"] == "error"]
    n_tasks, n_err = len(first), len(errors)
    assert n_tasks == 30 and 2 <= n_err <= 12  # a fifth of 30 prompts, give or take
    assert set(first.loc[first["answer_status"] == "answered", "valid"]) == {True}
    assert (~errors["valid"]).all() and errors["p_up"].isna().all() and (errors["raw"] == "").all()
    assert errors["error"].str.match(r"connection: .* \(attempt 1 of 3\)$").all()
    assert {json.loads(d)["attempt"] for d in errors["detail"]} == {1}
    scores = pd.read_csv(out / "scores.csv").query("model == 'm' and slice_kind == 'overall'")
    assert scores["n_error"].item() == n_err and scores["n_valid"].item() == n_tasks - n_err
    assert scores["validity"].item() == 1.0  # the errors are not invalid answers
    assert scores["n"].item() <= n_tasks - n_err
    assert any(f"m: {n_err} calls got no answer (status error" in x for x in said)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["unanswered"] == {"m": {"retry": n_err, "final": 0}}
    assert audit_run(out) == []

    asked_first = Counter(server.counts)
    server.healed = True
    run(cfg, tmp_path / "out", echo=said.append)
    new = server.counts - asked_first
    # the server keys requests by the same prompt hash the rows keep as input_sha256; a call
    # may have failed before the server saw it, so the first run's counts are not checked
    assert new == Counter({("drop20", sha): 1 for sha in errors["input_sha256"]})
    answered = first.loc[first["answer_status"] == "answered", "input_sha256"]
    assert all(asked_first[("drop20", sha)] >= 1 for sha in answered)
    second = rows_of(out)
    assert len(second) == n_tasks and (second["answer_status"] == "answered").all()
    assert second["valid"].all()
    retried = second[second["task_id"].isin(errors["task_id"])]
    assert (retried["input_sha256"].to_numpy() == errors.set_index("task_id").loc[
        retried["task_id"], "input_sha256"].to_numpy()).all()
    scores = pd.read_csv(out / "scores.csv").query("model == 'm' and slice_kind == 'overall'")
    assert scores["n_error"].item() == 0 and scores["n_valid"].item() == n_tasks
    assert json.loads((out / "manifest.json").read_text())["unanswered"] == {}
    assert audit_run(out) == []

    before = sum(server.counts.values())
    run(cfg, tmp_path / "out", echo=said.append)
    assert sum(server.counts.values()) == before  # no answered task is asked again


def test_attempts_run_out_and_the_error_is_final(tmp_path, sample_store, server):
    cfg = flaky_config(tmp_path, sample_store, server, attempts=2)
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    n_err = int((rows_of(out)["answer_status"] == "error").sum())
    total = sum(server.counts.values())
    said: list[str] = []
    run(cfg, tmp_path / "out", echo=said.append)  # still dropping: attempt 2 of 2
    total_2 = sum(server.counts.values())
    assert total < total_2 <= total + n_err  # (a call may fail before the server sees it)
    errors = rows_of(out).query("answer_status == 'error'")
    assert len(errors) == n_err and errors["error"].str.endswith("(attempt 2 of 2; final)").all()
    assert json.loads((out / "manifest.json").read_text())["unanswered"] == {
        "m": {"retry": 0, "final": n_err}}
    said.clear()
    server.healed = True
    run(cfg, tmp_path / "out", echo=said.append)  # out of attempts: no request
    assert sum(server.counts.values()) == total_2
    assert any(f"m: {n_err} tasks got no answer in 2 attempts: final" in x for x in said)
    scores = pd.read_csv(out / "scores.csv").query("model == 'm' and slice_kind == 'overall'")
    assert scores["n_error"].item() == n_err and scores["validity"].item() == 1.0
    assert audit_run(out) == []


def test_an_invalid_model_answer_is_final_and_never_asked_again(tmp_path, sample_store, server):
    cfg = config(tmp_path, sample_store, server.base_url, [("bad", "notjson")])
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    rows = rows_of(out, "bad")
    assert (rows["answer_status"] == "answered").all() and not rows["valid"].any()
    asked = server.total
    run(cfg, tmp_path / "out", echo=lambda *_: None)
    assert server.total == asked
    scores = pd.read_csv(out / "scores.csv").query("model == 'bad' and slice_kind == 'overall'")
    assert scores["validity"].item() == 0.0 and scores["n_error"].item() == 0
