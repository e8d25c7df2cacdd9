"""Look-ahead through training data: a knowledge cutoff splits every model's rows into
possibly memorised and not; an anonymized prompt holds no ticker, company name or date, and is
the same for the same task in any run."""

import json
import re

import pandas as pd
import pytest

from finbench.audit import audit_run
from finbench.core.errors import ConfigError
from finbench.runlog.transcripts import Transcripts
from finbench.runner import run
from finbench.tracks.configs import load_config

NAMES = {"AAPL": ["Apple", "Apple Inc."], "MSFT": ["Microsoft"], "NVDA": ["Nvidia"]}


pytestmark = pytest.mark.usefixtures("llm_env")


def write(path, sample_store, url, *, start="2025-01-13", end="2025-01-15",
          tickers=("AAPL", "MSFT", "NVDA"), names=NAMES, model_extra=""):
    names_toml = "".join(f'{t} = {json.dumps(n)}\n' for t, n in names.items())
    path.write_text(
        f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = {json.dumps(list(tickers))}\n'
        f'start = "{start}"\nend = "{end}"\n[context.company_names]\n{names_toml}'
        '[[models]]\nname = "coin"\nkind = "coin"\n'
        f'[[models]]\nname = "m"\nkind = "openai"\nmodel = "valid"\nbase_url = "{url}"\n'
        f'api_key_env = "FINBENCH_TEST_KEY"\n{model_extra}')
    return path


def test_a_knowledge_cutoff_splits_rows_and_the_report_shows_it(tmp_path, sample_store, server):
    from finbench.reports.build import report

    cfg = write(tmp_path / "c.toml", sample_store, server.base_url,
                model_extra='knowledge_cutoff = "2025-01-14"\n')
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    rows = pd.read_parquet(out / "rows.parquet")
    mine = rows[rows["model"] == "m"]
    assert (mine["possibly_memorised"] == (mine["session"] <= "2025-01-14")).all()
    assert mine["possibly_memorised"].tolist().count(True) == 18
    assert mine["possibly_memorised"].tolist().count(False) == 9
    assert rows.loc[rows["model"] == "coin", "possibly_memorised"].isna().all()
    report(out)
    table = pd.read_csv(out / "tables" / "scores_by_cutoff.csv")
    got = {(r["slice"], r["model"]): r["n"] for r in table.to_dict("records")}
    assert got == {("before cutoff (possibly memorised)", "m"): 17, ("after cutoff", "m"): 9,
                   ("no cutoff declared", "coin"): 26}  # one task has no reference price
    assert table.set_index("model").loc["m", "bss_n"].tolist() == [17, 9]  # paired with coin
    caption = (out / "tables" / "scores_by_cutoff.md").read_text()
    assert "possibly memorised" in caption and "m 2025-01-14" in caption
    assert audit_run(out) == []


def test_without_a_cutoff_there_is_no_cutoff_table(tmp_path, sample_store, server):
    from finbench.reports.build import report

    out = run(write(tmp_path / "c.toml", sample_store, server.base_url), tmp_path / "out",
              echo=lambda *_: None)
    report(out)
    assert not (out / "tables" / "scores_by_cutoff.csv").exists()


def anonymized_messages(tmp_path, sample_store, server, name, **kw) -> dict:
    cfg = write(tmp_path / f"{name}.toml", sample_store, server.base_url,
                model_extra="anonymize = true\n", **kw)
    out = run(cfg, tmp_path / name, echo=lambda *_: None)
    assert audit_run(out) == []
    return {t: c["messages"] for t, c in Transcripts(out).last_of_each("m").items()}


def test_an_anonymized_prompt_holds_no_ticker_name_or_date(tmp_path, sample_store, server):
    found = anonymized_messages(tmp_path, sample_store, server, "a")
    assert len(found) == 27
    date = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4}|January|Jan\b|Monday|Tuesday|Wednesday")
    words = ["AAPL", "MSFT", "NVDA", "Apple", "Microsoft", "Nvidia"]
    for messages in found.values():
        text = json.dumps(messages)
        assert not date.search(text), date.search(text)
        assert not any(w.lower() in text.lower() for w in words), text
        assert "ASSET-" in messages[1]["content"] and "day 0" in messages[1]["content"]
    headlines = [m[1]["content"].split("<<<DATA", 1)[1] for m in found.values()]
    assert sum("ASSET-" in h for h in headlines) > 10  # names in headlines were replaced


def test_the_same_task_gets_the_same_anonymized_prompt_in_any_run(tmp_path, sample_store,
                                                                  server):
    whole = anonymized_messages(tmp_path, sample_store, server, "whole")
    alone = anonymized_messages(tmp_path, sample_store, server, "alone", start="2025-01-15",
                                tickers=("AAPL",))
    assert alone and all(whole[t] == messages for t, messages in alone.items())
    plain = write(tmp_path / "p.toml", sample_store, server.base_url)
    out = run(plain, tmp_path / "plain", echo=lambda *_: None)
    shown = Transcripts(out).last_of_each("m")
    assert "AAPL" in shown["AAPL|2025-01-15|MIDDAY"]["messages"][1]["content"]
    rows = pd.read_parquet(out / "forecasts.parquet").set_index(["model", "task_id"])
    assert json.loads(rows.loc[("m", "AAPL|2025-01-15|MIDDAY"), "detail"])["template"] == \
        "finbench-prompt-v2"


def test_anonymize_needs_every_tickers_names(tmp_path, sample_store):
    cfg = write(tmp_path / "c.toml", sample_store, "http://127.0.0.1:9/v1",
                names={"AAPL": ["Apple"]}, model_extra="anonymize = true\n")
    with pytest.raises(ConfigError, match=r"models.m.anonymize: context.company_names has no "
                                          r"entry for MSFT, NVDA"):
        load_config(cfg)
