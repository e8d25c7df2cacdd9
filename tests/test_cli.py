"""Command-line conventions: help for every argument, progress and messages on stderr and
results on stdout in every verb, and a quick trial run (--models, --limit) in a folder of its
own."""

import argparse
import json
import os

import pandas as pd

from finbench.cli import build_parser
from tests.helpers import cli, write


def _actions(parser, path=("finbench",)):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, (*path, name))
        elif not isinstance(action, argparse._HelpAction):
            yield " ".join(path), action


def test_every_argument_of_every_command_has_help_and_the_top_has_no_markup():
    actions = list(_actions(build_parser()))
    assert len(actions) > 40
    assert [f"{where} {a.dest}" for where, a in actions if not a.help] == []
    top = " ".join(build_parser().format_help().split())
    assert "``" not in top and ":mod:" not in top
    assert "Progress and messages go to stderr, results to stdout" in top


def config(tmp_path, store, extra=""):
    return write(tmp_path / "pilot.toml", f'[data]\nstore = "{store}"\n[tasks]\n'
                 'tickers = ["AAPL", "MSFT"]\nstart = "2025-01-14"\nend = "2025-01-15"\n'
                 '[[models]]\nname = "coin"\nkind = "coin"\n[[models]]\nname = "base_rate"\n'
                 'kind = "base_rate"\n[[models]]\nname = "momentum"\nkind = "momentum"\n'
                 + extra)


def test_a_run_says_its_progress_on_stderr_and_its_results_on_stdout(tmp_path, sample_store):
    done = cli("run", config(tmp_path, sample_store), "--out", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    for said in ("labels: ", "coin: 12/12 forecasts", "SYNTHETIC data "):
        assert said in done.stderr and said not in done.stdout, said
    for said in ("By horizon:", "All horizons:", "receipt: manifest.json sha256", "run directory"):
        assert said in done.stdout and said not in done.stderr, said
    audit = cli("audit", tmp_path / "r")
    assert "forecast rows checked" in audit.stderr and "audit passed" in audit.stdout
    score = cli("score", tmp_path / "r")
    assert "score rows written" in score.stdout and score.stderr == ""
    tasks = cli("tasks", config(tmp_path, sample_store))
    assert "labels: " in tasks.stderr and json.loads(tasks.stdout)["tasks"] == 12


def test_a_trial_runs_some_models_on_the_first_tasks_in_a_folder_of_its_own(
        tmp_path, sample_store, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = config(tmp_path, sample_store)
    done = cli("run", cfg, "--models", "momentum,coin", "--limit", "5")
    assert done.returncode == 0, done.stderr
    trial = tmp_path / "results" / "pilot-trial"  # the default folder of a trial
    assert "results/pilot-trial: a trial of models coin, momentum, the first 5 tasks" in done.stderr
    rows = pd.read_parquet(trial / "forecasts.parquet")
    tasks = pd.read_parquet(trial / "tasks.parquet")
    assert rows.groupby("model", sort=False).size().to_dict() == {"coin": 5, "momentum": 5}
    assert set(rows["task_id"]) == set(tasks["task_id"].iloc[:5])
    manifest = json.loads((trial / "manifest.json").read_text())
    assert manifest["trial"] == {"models": ["coin", "momentum"], "limit": 5}
    assert [m["name"] for m in manifest["config"]["models"]] == ["coin", "momentum"]
    assert cli("audit", trial).returncode == 0
    again = cli("run", cfg, "--models", "coin,momentum", "--limit", "5")  # resumes: same trial
    assert again.returncode == 0 and "all 5 forecasts already in the journal" in again.stderr
    # never mixed: a full run into the trial's folder, a trial into a full run's, two trials
    full = cli("run", cfg, "--out", trial)
    assert full.returncode == 2 and "holds a trial of models coin, momentum, the first 5 " \
        "tasks, not a full run" in full.stderr
    assert cli("run", cfg, "--out", tmp_path / "full").returncode == 0
    into_full = cli("run", cfg, "--limit", "3", "--out", tmp_path / "full")
    assert into_full.returncode == 2 and "holds a full run, not a trial of every model, the " \
        "first 3 tasks" in into_full.stderr
    other = cli("run", cfg, "--limit", "6", "--out", trial)
    assert other.returncode == 2 and "not a trial of every model, the first 6 tasks" in \
        other.stderr
    before = {p.name for p in tmp_path.iterdir()}
    unknown = cli("run", cfg, "--models", "coin,oracle")
    assert unknown.returncode == 2
    assert ("--models: oracle: no model of the config by that name (its models: coin, "
            "base_rate, momentum)") in unknown.stderr
    assert cli("run", cfg, "--limit", "0").returncode == 2
    assert {p.name for p in tmp_path.iterdir()} == before
    assert not os.path.exists(tmp_path / "results" / "pilot")


def test_a_folder_that_is_no_run_is_one_line_for_report(tmp_path):
    """Reading the run's report settings first gave a FileNotFoundError traceback."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "manifest.json").write_text("{not json")
    for folder, said in (("none", "no such run directory"), ("empty", "not a finished run"),
                         ("broken", "")):
        done = cli("report", tmp_path / folder)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert said in done.stderr and done.stderr.count("\n") == 1
