"""One number, one meaning: captions count the run's tasks, one "descriptive only" rule in
every table (from simulated coverage), a warned-of clustering, and event tables that say
SYNTHETIC and keep their notes apart."""

from pathlib import Path

import pandas as pd

from finbench.reports.build import report
from finbench.reports.stats import DESCRIPTIVE, descriptive
from finbench.runner import run
from tests.helpers import cli, write

ROOT = Path(__file__).resolve().parents[1]
EVENTS = ROOT / "data" / "events_sample" / "store"


def test_the_descriptive_rule_is_one_rule_of_forecasts_and_clusters():
    assert descriptive(30, 20, min_n=30, min_clusters=20) == ""
    assert descriptive(29, 20, min_n=30, min_clusters=20) == DESCRIPTIVE
    assert descriptive(300, 19, min_n=30, min_clusters=20) == DESCRIPTIVE
    assert descriptive([30, 29, 300], [20, 40, 5], min_n=30, min_clusters=20).tolist() == [
        "", DESCRIPTIVE, DESCRIPTIVE]


def test_captions_count_tasks_not_the_first_models_rows(tmp_path, sample_store):
    """The first model asked only the MORNING tasks made every caption count its rows: "with
    labels" from the tasks, but its positives from its own few rows."""
    cfg = write(tmp_path / "c.toml", f'[data]\nstore = "{sample_store}"\n[tasks]\n'
                'tickers = ["AAPL", "MSFT"]\nstart = "2025-01-06"\nend = "2025-01-15"\n'
                '[[models]]\nname = "early"\nkind = "coin"\nhorizons = ["MORNING"]\n'
                '[[models]]\nname = "coin"\nkind = "coin"\n')
    out = run(cfg, tmp_path / "r", echo=lambda *_: None)
    report(out)
    labels = pd.read_parquet(out / "labels.parquet")
    ok = labels[labels["status"] == "ok"]
    want = (f"{len(labels)} tasks, {len(ok)} with labels ({int(ok['y'].sum())} positive, "
            f"{int((ok['r'] == 0).sum())} ties)")
    caption = (out / "tables" / "scores_aggregate.md").read_text().splitlines()[0]
    assert want in caption, caption
    early = pd.read_parquet(out / "forecasts.parquet").query("model == 'early'")
    assert len(early) < len(labels)  # the first model was asked a part of the tasks


def test_the_three_class_table_is_flagged_by_the_rule_of_the_binary_ones(tmp_path,
                                                                          sample_store):
    cfg = write(tmp_path / "c.toml", f'[data]\nstore = "{sample_store}"\n[tasks]\n'
                'tickers = ["AAPL"]\nstart = "2025-01-02"\nend = "2025-01-15"\n'
                '[tasks.classes]\nband = 0.004\n[[models]]\nname = "coin"\nkind = "coin"\n'
                '[[models]]\nname = "u"\nkind = "class_uniform"\n')
    out = run(cfg, tmp_path / "r", echo=lambda *_: None)
    report(out)
    three = pd.read_csv(out / "tables" / "scores_three_class.csv")
    binary = pd.read_csv(out / "tables" / "scores_aggregate.csv")
    assert (three["sessions"] < 20).all() and (three["flag"] == DESCRIPTIVE).all()
    assert (binary["flag"] == DESCRIPTIVE).all()  # the same rule beside it
    assert "descriptive only" in (out / "tables" / "scores_three_class.md").read_text()


def test_session_ticker_clusters_are_warned_of_where_they_are_chosen(tmp_path, sample_store):
    cfg = write(tmp_path / "c.toml", f'[data]\nstore = "{sample_store}"\n[tasks]\n'
                'tickers = ["AAPL"]\nstart = "2025-01-15"\nend = "2025-01-15"\n'
                '[report]\ncluster = "session_ticker"\n[[models]]\nname = "coin"\n'
                'kind = "coin"\n')
    done = cli("run", cfg, "--out", tmp_path / "r")
    said = done.stdout + done.stderr
    assert 'warning: [report] cluster = "session_ticker" resamples each ticker\'s session' in said
    assert "cover 47% where sessions as clusters cover 93%" in said
    done = cli("report", tmp_path / "r")
    assert done.returncode == 0 and 'cluster = "session_ticker"' in done.stderr
    plain = write(tmp_path / "p.toml", cfg.read_text().replace(
        '[report]\ncluster = "session_ticker"\n', ""))
    done = cli("run", plain, "--out", tmp_path / "q")
    assert done.returncode == 0 and "warning: [report]" not in done.stdout + done.stderr


def test_event_tables_say_synthetic_flag_few_groups_and_keep_notes_apart(tmp_path):
    out = run(ROOT / "configs" / "pilot_events.toml", tmp_path / "e", echo=lambda *_: None)
    report(out)
    tables = out / "tables"
    for name in ("event_scores", "event_skill", "event_exclusions", "event_reliability"):
        assert "Source: SYNTHETIC data" in (tables / f"{name}.md").read_text(), name
    by_category = pd.read_csv(tables / "event_scores_by_category.csv")
    shown = (tables / "event_scores_by_category.md").read_text()
    assert (by_category["groups"] < 20).any() and "descriptive only" in shown
    skill = pd.read_csv(tables / "event_skill.csv")
    assert "groups" in skill.columns and (skill["groups"] >= 20).all()



def test_an_event_rows_notes_stand_apart():
    """"no positive casesin-sample" ran two notes together; the in-sample row says what it
    is, and a slice without YES and with few groups says both, apart."""
    from finbench.tracks.events.config import EventScoresConfig
    from finbench.tracks.events.report import _scores

    frame = pd.DataFrame({
        "model": ["m", "in-sample frequency", "m"], "kind": ["constant", "in_sample (x)", "c"],
        "slice": "all", "n": [40, 40, 5], "positives": [0, 0, 1], "brier": 0.1,
        "brier_lo": 0.0, "brier_hi": 0.2, "yes_penalty": 0.0, "no_penalty": 0.1,
        "log_loss": 0.3, "validity": 1.0, "n_invalid": 0, "n_error": 0, "groups": [25, 25, 3],
        "effective_events": 20.0, "no_positive_cases": [True, True, False]})
    notes = _scores(frame, EventScoresConfig())["note"].tolist()
    assert notes == ["no positive cases", "in-sample (descriptive, not a forecast)",
                     "descriptive only"]
    frame.loc[0, "groups"] = 4
    assert _scores(frame, EventScoresConfig())["note"][0] == "no positive cases; descriptive only"
