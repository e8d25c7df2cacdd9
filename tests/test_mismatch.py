"""The rationale-probability mismatch: the lexicon's stances (hand-labelled cases), and the
report's table equal to a count made row by row from the stored forecasts and scores."""

import json

import numpy as np
import pandas as pd
import pytest

from finbench.reports.build import report
from finbench.runner import run
from finbench.tracks.intraday.stance import mismatched, stance
from tests.helpers import aapl_config

CASES = [  # (rationale, stance a reader gives it)
    ("Strong momentum and upbeat headlines point to further gains.", "up"),
    ("Likely to rise after the beat.", "up"),
    ("Weak demand and a downgrade; expect the shares to slide.", "down"),
    ("I am not bullish here.", "down"),
    ("No decline expected; support holds.", "up"),
    ("Selling pressure into the close.", "down"),
    ("Mixed signals, hard to say.", "neutral"),
    ("Gains early, but losses likely later.", "neutral"),
    ("", "neutral"),
    (None, "neutral"),
]


@pytest.mark.parametrize(("text", "want"), CASES)
def test_the_lexicon_gives_the_stance_a_reader_gives(text, want):
    assert stance(text) == want


def test_mismatch_needs_a_side_on_both():
    s = np.array(["up", "up", "down", "down", "neutral", "up"])
    p = np.array([0.2, 0.7, 0.8, 0.1, 0.0, 0.5])
    assert mismatched(s, p).tolist() == [True, False, True, False, False, False]


ANSWERS = [
    {"p_up": 0.8, "lower": -0.01, "upper": 0.01, "rationale": "Strong bid, likely to rise."},
    {"p_up": 0.2, "lower": -0.01, "upper": 0.01, "rationale": "Strong bid, likely to rise."},
    {"p_up": 0.3, "lower": -0.01, "upper": 0.01, "rationale": "Weak tape; expect a drop."},
    {"p_up": 0.7, "lower": -0.01, "upper": 0.01, "rationale": "Weak tape; expect a drop."},
    {"p_up": 0.6, "lower": -0.01, "upper": 0.01, "rationale": "Mixed signals."},
    {"p_up": 0.6, "lower": -0.01, "upper": 0.01, "rationale": None},
]


def test_the_report_counts_mismatches_and_scores_both_groups(tmp_path, sample_store):
    answers = ", ".join(json.dumps(json.dumps(a)) for a in ANSWERS)
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\n'
                   'tickers = ["AAPL", "MSFT", "NVDA"]\nstart = "2025-01-06"\nend = "2025-01-15"\n'
                   '[[models]]\nname = "coin"\nkind = "coin"\n'
                   f'[[models]]\nname = "talker"\nkind = "scripted"\nanswers = [{answers}]\n')
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    report(out)
    table = pd.read_csv(out / "tables" / "rationale_mismatch.csv")  # 10 digits kept
    assert table["model"].tolist() == ["talker"]  # the coin gives no rationale
    got = table.iloc[0]
    # the same, row by row from what the run stored
    f = pd.read_parquet(out / "forecasts.parquet").query("model == 'talker'")
    r = pd.read_parquet(out / "rows.parquet").query("model == 'talker'")
    rows = r.merge(f[["task_id", "rationale"]], on="task_id").query("scored")
    side = rows["rationale"].map(lambda t: stance(t) if pd.notna(t) else "none")
    stated = side.isin(["up", "down"])
    wrong = ((side == "up") & (rows["p_up"] < 0.5)) | ((side == "down") & (rows["p_up"] > 0.5))
    assert got["n"] == len(rows) and got["stated"] == stated.sum()
    assert got["with_rationale"] == rows["rationale"].notna().sum()
    assert got["mismatched"] == wrong.sum() > 0 and got["neutral"] == (side == "neutral").sum()
    assert got["mismatch_rate"] == pytest.approx(wrong.sum() / stated.sum(), rel=1e-9)
    assert got["brier_mismatched"] == pytest.approx(rows.loc[wrong, "brier"].mean(), rel=1e-9)
    assert got["brier_matched"] == pytest.approx(rows.loc[stated & ~wrong, "brier"].mean(),
                                                 rel=1e-9)
    assert got["n_mismatched"] == wrong.sum() and got["n_matched"] == (stated & ~wrong).sum()
    assert "lexicon-v1" in (out / "tables" / "rationale_mismatch.md").read_text()


def judge_config(tmp_path, sample_store, url, model="stance-judge"):
    answers = ", ".join(json.dumps(json.dumps(a)) for a in ANSWERS)
    cfg = tmp_path / "j.toml"
    cfg.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\n'
                   'tickers = ["AAPL", "MSFT"]\nstart = "2025-01-13"\nend = "2025-01-15"\n'
                   '[[models]]\nname = "coin"\nkind = "coin"\n'
                   f'[[models]]\nname = "talker"\nkind = "scripted"\nanswers = [{answers}]\n'
                   '[analysis.stance]\nmethod = "judge"\n[analysis.stance.judge]\n'
                   f'name = "judge"\nkind = "openai"\nmodel = "{model}"\nbase_url = "{url}"\n'
                   'api_key_env = "FINBENCH_TEST_KEY"\nmax_retries = 0\n')
    return cfg


def test_a_judge_model_reads_the_stances_once_journalled_and_cached(tmp_path, sample_store,
                                                                     monkeypatch):
    from finbench.audit import audit_run
    from finbench.runlog.stances import StanceLog
    from tests.llm_server import ChatServer

    monkeypatch.setenv("FINBENCH_TEST_KEY", "sk-test")
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))
    server = ChatServer()
    try:
        cfg = judge_config(tmp_path, sample_store, server.base_url, "stance-judge-flaky")
        out = run(cfg, tmp_path / "out", echo=lambda *_: None)
        f = pd.read_parquet(out / "forecasts.parquet").query("model == 'talker'")
        with_text = f[f["rationale"].notna()]
        weak = with_text["rationale"].str.contains("Weak")
        records = StanceLog(out).records()
        assert len(records) == (~weak).sum()  # the dropped calls are not journalled
        report(out)
        table = pd.read_csv(out / "tables" / "rationale_mismatch.csv").iloc[0]
        assert table["method"] == "judge:judge (stance-judge-flaky)"
        assert table["unjudged"] > 0
        asked = server.total
        server.healed = True
        run(cfg, out, echo=lambda *_: None)  # only the unjudged are asked
        assert server.total - asked == weak.sum()
        records = StanceLog(out).records()
        assert len(records) == len(with_text) and all(r["valid"] for r in records)
        want = {"Strong bid, likely to rise.": "up", "Weak tape; expect a drop.": "down",
                "Mixed signals.": "neutral"}
        by_task = with_text.set_index("task_id")["rationale"]
        assert all(r["stance"] == want[by_task[r["task_id"]]] for r in records)
        report(out)
        table = pd.read_csv(out / "tables" / "rationale_mismatch.csv").iloc[0]
        assert table["unjudged"] == 0
        rows = pd.read_parquet(out / "rows.parquet").query("model == 'talker' and scored")
        rows = rows.merge(f[["task_id", "rationale"]], on="task_id")
        side = rows["rationale"].map(lambda t: want.get(t, "none") if pd.notna(t) else "none")
        wrong = ((side == "up") & (rows["p_up"] < 0.5)) | ((side == "down") & (rows["p_up"] > 0.5))
        assert table["mismatched"] == wrong.sum() > 0
        assert "a judge model (judge:judge" in (out / "tables" / "rationale_mismatch.md").read_text()
        asked = server.total
        run(cfg, out, echo=lambda *_: None)
        assert server.total == asked  # every rationale judged: no call
        assert audit_run(out) == []
    finally:
        server.close()


def test_a_shards_judge_keeps_to_the_shards_share_of_its_rate_limit(tmp_path, sample_store,
                                                                    monkeypatch):
    """A run given a part of the rate limits (a shard among others running at once) spaces
    its judge's requests to that part too: 6,000 a minute at a quarter are 40 ms apart, not
    10 ms."""
    from tests.llm_server import ChatServer

    monkeypatch.setenv("FINBENCH_TEST_KEY", "sk-test")
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))
    server = ChatServer()
    try:
        cfg = judge_config(tmp_path, sample_store, server.base_url)
        cfg.write_text(cfg.read_text() + "requests_per_minute = 6000\n")
        run(cfg, tmp_path / "out", echo=lambda *_: None, rate_share=0.25)
        at = sorted(r["at"] for r in server.requests if r["model"] == "stance-judge")
        assert len(at) >= 6
        # 60 s / (6000 x 0.25) = 40 ms between starts (at the whole budget: 10 ms); the mean
        # gap, which a request late on its way does not shorten
        assert (at[-1] - at[0]) / (len(at) - 1) > 0.035, np.diff(at)
    finally:
        server.close()


def test_a_damaged_stance_log_is_named_and_a_torn_last_line_asked_again(tmp_path):
    from finbench.core.errors import RunError
    from finbench.runlog.stances import StanceLog

    log = StanceLog(tmp_path)
    good = json.dumps({"model": "m", "task_id": "t1", "stance": "up", "valid": True})
    log.path.write_text(good + "\n" + '{"model": "m", "task_id": "t2", "sta')
    assert [r["task_id"] for r in log.records()] == ["t1"]  # the torn line is not an answer
    log.path.write_text(good + "\nnot json\n" + good + "\n")
    with pytest.raises(RunError, match=r"stances.jsonl line 2: not a JSON record"):
        log.records()


def test_a_judge_method_without_a_judge_is_refused(tmp_path, sample_store):
    from finbench.core.errors import ConfigError
    from finbench.tracks.configs import load_config

    cfg = aapl_config(tmp_path / "c.toml", sample_store, '[analysis.stance]\nmethod = "judge"\n')
    with pytest.raises(ConfigError, match=r"analysis.stance.*method 'judge' needs"):
        load_config(cfg)
