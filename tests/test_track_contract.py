"""Every registered track passes the same contract, as scikit-learn's common tests do for
estimators: a run, scored again to the same bytes, audited clean, reported, one task shown;
and a new track, the toy of ``tests/toy_track`` (one folder and one registry line), goes
through the same commands with nothing edited outside its folder."""

import json
import shutil
import typing
from pathlib import Path

import pandas as pd
import pytest

from finbench.cli import main
from finbench.core.errors import ConfigError
from finbench.runlog.rundir import read_manifest
from finbench.tracks import get_track, list_tracks, register, unregister
from finbench.tracks.base import TrackPlugin
from finbench.tracks.configs import load_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def toy():
    register("toy", "tests.toy_track.plugin")  # the one registry line a new track needs
    yield
    unregister("toy")


def _toy_config(tmp_path: Path) -> Path:
    store = tmp_path / "coins"
    store.mkdir()
    (store / "coins.json").write_text(json.dumps(
        [{"id": f"c{k}", "heads": int(k % 3 == 0)} for k in range(12)]))
    cfg = tmp_path / "toy.toml"
    cfg.write_text('track = "toy"\n[data]\nstore = "coins"\n'
                   '[[models]]\nname = "half"\nkind = "toy_constant"\np = 0.5\n'
                   '[[models]]\nname = "third"\nkind = "toy_constant"\np = 0.3333\n')
    return cfg


def _pilot_config(tmp_path: Path, name: str) -> Path:
    """A copy of the bundled pilot of each shipped track, its store paths made absolute."""
    text = (ROOT / "configs" / name).read_text()
    text = text.replace('"../data/', f'"{ROOT}/data/')
    cfg = tmp_path / name
    cfg.write_text(text)
    return cfg


CONFIGS = {"intraday": lambda p: _pilot_config(p, "pilot.toml"),
           "events": lambda p: _pilot_config(p, "pilot_events.toml"),
           "toy": _toy_config}


def test_every_shipped_track_has_a_contract_config():
    assert set(list_tracks()) <= set(CONFIGS)
    for name in list_tracks():
        plugin = get_track(name)
        assert isinstance(plugin, TrackPlugin) and plugin.name == name
        assert typing.get_args(plugin.config_class.model_fields["track"].annotation) == (name,)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["intraday", "events", "toy"])
def test_a_track_runs_scores_audits_reports_and_shows(name, tmp_path, toy, capsys):
    cfg = CONFIGS[name](tmp_path)
    config = load_config(cfg)
    assert config.track == name and type(config) is get_track(name).config_class
    out = tmp_path / "run"
    assert main(["run", str(cfg), "--out", str(out)]) == 0
    files = get_track(name).score_files
    written = {f: (out / f).read_bytes() for f in files if (out / f).is_file()}
    assert "scores.parquet" in written
    assert main(["score", str(out)]) == 0  # scored again: the same bytes
    assert {f: (out / f).read_bytes() for f in written} == written
    assert main(["report", str(out)]) == 0
    assert list((out / "tables").iterdir())
    assert main(["audit", str(out)]) == 0
    task = pd.read_parquet(out / "tasks.parquet")["task_id"].iat[0]
    capsys.readouterr()
    assert main(["show", str(out), task, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["task"]["task_id"] == task


def test_the_toy_tracks_audit_names_a_forged_score(tmp_path, toy, capsys):
    cfg = _toy_config(tmp_path)
    out = tmp_path / "run"
    assert main(["run", str(cfg), "--out", str(out)]) == 0
    scores = pd.read_parquet(out / "scores.parquet")
    assert scores["brier"].round(6).tolist() == [0.25, round((8 * 0.3333**2 + 4 * 0.6667**2)
                                                            / 12, 6)]
    forged = tmp_path / "forged"
    shutil.copytree(out, forged)
    scores.assign(brier=scores["brier"] + 0.01).to_parquet(forged / "scores.parquet")
    manifest = read_manifest(forged)
    assert manifest["config"]["track"] == "toy"
    assert main(["audit", str(forged)]) == 1
    assert "scores.parquet" in capsys.readouterr().err


def test_an_unknown_track_lists_the_registered_ones(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('track = "crypto"\n[data]\nstore = "x"\n')
    with pytest.raises(ConfigError, match=r"c\.toml: key 'track': track 'crypto' is not a "
                       r"registered track \(registered: events, intraday\)"):
        load_config(cfg)


def test_a_registered_name_is_not_taken_twice(toy):
    with pytest.raises(ConfigError, match="registered already"):
        register("toy", "somewhere.else")
    with pytest.raises(ConfigError, match="registered already"):
        register("intraday", "tests.toy_track.plugin")
