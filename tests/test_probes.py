"""Recall probes: a model with ``recall_probe`` is asked, with no context, each task's outcome
from memory; the loopback server "remembers" the outcomes of tasks up to a date (the test
gives it them from a first run's labels) and says 0.5 of the rest, so the probes' accuracy is
1 before the cutoff and 1/2 after it, by hand. Resumed runs ask nothing again; the audit
re-renders each probe and reads its answer again."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from finbench.audit import audit_run
from finbench.core.errors import ConfigError
from finbench.reports.probes import recall_hits
from finbench.runner import run
from finbench.scoring.bootstrap import gap_ci
from finbench.tracks.configs import load_config

QUIET = {"echo": lambda *_: None}
CUTOFF = "2025-01-10"


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("FINBENCH_TEST_KEY", "sk-probe-test")
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))


def intraday(tmp_path, sample_store, models: str, name: str = "c"):
    path = tmp_path / f"{name}.toml"
    path.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL", "MSFT"]\n'
                    'start = "2025-01-06"\nend = "2025-01-15"\n'
                    '[context.company_names]\nAAPL = ["Apple"]\nMSFT = ["Microsoft"]\n'
                    '[[models]]\nname = "coin"\nkind = "coin"\n' + models)
    return path


def llm(name, base_url, extra=""):
    return (f'[[models]]\nname = "{name}"\nkind = "openai"\nmodel = "variants"\n'
            f'base_url = "{base_url}"\napi_key_env = "FINBENCH_TEST_KEY"\n'
            f'knowledge_cutoff = {CUTOFF}\nrecall_probe = true\n{extra}')


def remember(server, track, tasks: pd.DataFrame, labels: pd.DataFrame, before) -> None:
    """The server recalls the outcome of every scorable task ``before`` marks."""
    ok = labels.set_index("task_id").loc[tasks["task_id"]]
    keep = (ok["status"] == "ok").to_numpy() & np.asarray(before, bool)
    questions = track.probe_questions(tasks)
    server.recall = {q: int(y) for q, y, k in zip(questions, ok["y"], keep, strict=True) if k}


def test_recall_probes_split_at_the_cutoff_by_hand(tmp_path, sample_store, server):
    from finbench.reports.build import report
    from finbench.tracks import plugin_of

    first = run(intraday(tmp_path, sample_store, "", "plain"), tmp_path / "plain", **QUIET)
    config = load_config(intraday(tmp_path, sample_store, llm("named", server.base_url)))
    track = plugin_of(config).open(config)
    tasks = track.tasks
    remember(server, track, tasks, pd.read_parquet(first / "labels.parquet"),
             tasks["session"].astype(str) <= CUTOFF)
    path = intraday(tmp_path, sample_store, llm("named", server.base_url,
                                                'tools = ["bars"]\n'))
    out = run(path, tmp_path / "out", **QUIET)
    probes = pd.read_parquet(out / "probes.parquet")
    assert probes["task_id"].tolist() == tasks["task_id"].tolist()
    assert probes["valid"].all() and probes["max_input_time"].isna().all()
    # asked once each, as the model is but without its tools, in the probe's own schema
    sent = [r["body"] for r in server.requests
            if r["body"]["messages"][0]["content"].startswith("You are asked what you")]
    assert len(sent) == len(tasks)
    assert all("tools" not in b and b["response_format"]["json_schema"]["name"]
               == "recall_probe" for b in sent)
    assert "On Monday 2025-01-06, a past trading day: was the mid price of AAPL (Apple) " \
           "higher at 15:55 than at 09:30 (America/New_York time)?" in [
               b["messages"][1]["content"] for b in sent]
    report(out)
    table = pd.read_csv(out / "tables" / "recall_probes.csv").iloc[0]
    labels = pd.read_parquet(out / "labels.parquet").set_index("task_id").loc[probes["task_id"]]
    scorable = (labels["status"] == "ok").to_numpy()
    p, y = probes["p_up"].to_numpy(float)[scorable], labels["y"].to_numpy(float)[scorable]
    sessions = tasks["session"].astype(str).to_numpy()[scorable]
    before = sessions <= CUTOFF
    hits = recall_hits(p, y)
    assert (hits[before] == 1).all() and (hits[~before] == 0.5).all()
    assert (table["n_before"], table["n_after"]) == (before.sum(), (~before).sum())
    assert (table["acc_before"], table["acc_after"], table["acc_gap"]) == pytest.approx(
        (1.0, 0.5, 0.5), abs=1e-12)
    assert table["brier_before"] == pytest.approx(0.05 ** 2, abs=1e-12)
    assert table["brier_after"] == pytest.approx(0.25, abs=1e-12)
    codes = pd.factorize(sessions, sort=True)[0]
    after_i, before_i, gap = gap_ci(hits[~before], codes[~before], hits[before],
                                    codes[before], replicates=2000, seed=20250115)
    assert (table["acc_gap_lo"], table["acc_gap_hi"]) == pytest.approx((gap.lower, gap.upper),
                                                                       abs=1e-9)
    assert "Recall probes" in (out / "report.html").read_text()
    assert audit_run(out, echo=lambda *_: None) == []
    asked = len(server.requests)
    run(path, tmp_path / "out", **QUIET)  # resumed: every probe is in its journal
    assert len(server.requests) == asked


def _edited(out, tmp_path, edit):
    from finbench.data.store import sha256_file

    copy = tmp_path / "edited"
    shutil.copytree(out, copy)
    table = pd.read_parquet(copy / "probes.parquet")
    edit(table)
    table.to_parquet(copy / "probes.parquet", index=False)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["files"]["probes.parquet"] = sha256_file(copy / "probes.parquet")
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return audit_run(copy, echo=lambda *_: None)


def test_the_audit_names_an_edited_probe(tmp_path, sample_store, server):
    out = run(intraday(tmp_path, sample_store, llm("named", server.base_url)), tmp_path / "out",
              **QUIET)
    first = pd.read_parquet(out / "probes.parquet")["task_id"].iat[0]

    def answer(t):
        t.loc[0, "p_up"] = 0.9

    def digest(t):
        t.loc[0, "input_sha256"] = "0" * 64

    said = _edited(out, tmp_path, answer)
    assert said == [f"probes.parquet: named, task {first}: p_up 0.9 valid True, but its raw "
                    "answer reads p_yes 0.5 valid True"]
    shutil.rmtree(tmp_path / "edited")
    said = _edited(out, tmp_path, digest)
    assert said == [f"probes.parquet: named, task {first}: input_sha256 is not the digest of "
                    "its probe rendered again"]


def test_a_probe_needs_a_cutoff(tmp_path, sample_store):
    path = intraday(tmp_path, sample_store, '[[models]]\nname = "m"\nkind = "openai"\n'
                    'model = "x"\nrecall_probe = true\n')
    with pytest.raises(ConfigError, match="recall_probe: the probe's accuracy is split at the "
                                          "model's knowledge_cutoff, and it declares none"):
        load_config(path)


def test_event_probes_split_by_the_day_each_market_resolved(tmp_path, server):
    from finbench.reports.build import report
    from finbench.tracks import plugin_of
    from tests.test_mcp import EVENT_STORE

    cutoff = "2024-05-01"
    path = tmp_path / "events.toml"
    path.write_text(f'track = "events"\n[data]\nstore = "{EVENT_STORE}"\n[tasks]\n'
                    'resolved_from = 2024-03-01\nresolved_to = 2024-06-30\ncutoff = "lead"\n'
                    'lead_hours = 72\n[[models]]\nname = "market"\nkind = "market_price"\n'
                    f'[[models]]\nname = "probed"\nkind = "openai"\nmodel = "event-x"\n'
                    f'base_url = "{server.base_url}"\napi_key_env = "FINBENCH_TEST_KEY"\n'
                    f'knowledge_cutoff = {cutoff}\nrecall_probe = true\n')
    config = load_config(path)
    track = plugin_of(config).open(config)
    labels = track.label(contexts=False)
    resolved = track.tasks["resolved_at"].dt.strftime("%Y-%m-%d")
    remember(server, track, track.tasks, labels, resolved <= cutoff)
    question = track.probe_questions(track.tasks.iloc[:1])[0]
    assert question.startswith('A prediction market asked: "Will ') and question.endswith(
        "(UTC). Did it resolve YES?")
    out = run(path, tmp_path / "out", **QUIET)
    report(out)
    table = pd.read_csv(out / "tables" / "event_recall_probes.csv").iloc[0]
    ok = labels[labels["status"] == "ok"]
    before = (ok["resolved_at"].dt.strftime("%Y-%m-%d") <= cutoff).to_numpy()
    assert (table["n_before"], table["n_after"]) == (before.sum(), (~before).sum())
    assert (table["acc_before"], table["acc_after"]) == pytest.approx((1.0, 0.5), abs=1e-12)
    assert audit_run(out, echo=lambda *_: None) == []
