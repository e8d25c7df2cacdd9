"""The golden digests: both pilots' score tables, as canonical JSON (floats to 12 places),
hash to the published digests of this engine version. A change that alters any number of
them fails here: bump ``ENGINE_VERSION`` (and ``SCORING_RULES_VERSION`` for a rule's
definition), say in the CHANGELOG which numbers change and by how much, and publish the new
digests below."""

import json
from pathlib import Path

import pytest

from finbench.core.version import ENGINE_VERSION, SCORING_RULES_VERSION
from finbench.runlog.costs import COST_COLUMNS
from finbench.runlog.rundir import read_manifest
from finbench.runner import run
from finbench.runner.scores import canonical_tables, score_digest

ROOT = Path(__file__).resolve().parents[1]
# engine version -> the pilots' digests (`finbench score RUN` prints a run's)
GOLDEN = {2: {"pilot.toml": "18fc8f4bb207633859f93a6c023c95e00fa0a7cad5d256c591aa35358b6f26a1",
              "pilot_events.toml":
                  "33fb61b4b30592d2e037a299b37ca6af94092065d620cb1faea1a827534ac007"},
          # 3: the cost columns added to rows.parquet; the digest of the other columns is
          # engine 2's (test_engine_3_adds_columns_and_changes_no_number); the event pilot
          # has since gained a replayed model, whose rows alone the digest adds (the same test
          # drops them: the other rows hash as before)
          3: {"pilot.toml": "f16d6df2d79af80321772eefc35c01c48760e8b2c357e4bb92b2df216368ceca",
              "pilot_events.toml":
                  "78be13b1888ebaa6e5397dd5e50479f774df9af2c511e1cf0cd1a8534223f661"}}
# models the pilots gained after engine 2, left out when comparing with its digests
ADDED_SINCE_2 = {"pilot_events.toml": {"memoriser-replay"}}


@pytest.mark.parametrize("name", ["pilot.toml", "pilot_events.toml"])
def test_the_pilots_score_tables_have_the_published_digest(name, tmp_path):
    cfg = tmp_path / name
    cfg.write_text((ROOT / "configs" / name).read_text().replace('"../data/',
                                                                   f'"{ROOT}/data/'))
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    manifest = read_manifest(out)
    assert (manifest["engine_version"], manifest["scoring_rules_version"]) == (
        ENGINE_VERSION, SCORING_RULES_VERSION)
    assert score_digest(out) == GOLDEN[ENGINE_VERSION][name]


def test_the_canonical_form_rounds_floats_and_writes_nan_as_null(tmp_path):
    out = run(_copy(tmp_path), tmp_path / "run", echo=lambda *_: None)
    tables = json.loads(canonical_tables(out))
    assert sorted(tables) == ["rows.parquet", "scores.parquet"]
    scores = tables["scores.parquet"]
    brier = scores["columns"].index("brier")
    values = [row[brier] for row in scores["rows"]]
    assert all(v is None or v == round(v, 12) for v in values)
    assert None in [v for row in scores["rows"] for v in row]  # (NaN: undefined, as null)


def _copy(tmp_path: Path) -> Path:
    cfg = tmp_path / "pilot.toml"
    cfg.write_text((ROOT / "configs" / "pilot.toml").read_text().replace(
        '"../data/', f'"{ROOT}/data/'))
    return cfg


@pytest.mark.parametrize("name", ["pilot.toml", "pilot_events.toml"])
def test_engine_3_adds_columns_and_changes_no_number(name, tmp_path):
    """Engine 3 added what each forecast cost to ``rows.*``: without those columns, the
    tables hash to engine 2's digests."""
    import hashlib

    cfg = tmp_path / name
    cfg.write_text((ROOT / "configs" / name).read_text().replace('"../data/',
                                                                   f'"{ROOT}/data/'))
    tables = json.loads(canonical_tables(run(cfg, tmp_path / "run", echo=lambda *_: None)))
    rows = tables["rows.parquet"]
    keep = [i for i, c in enumerate(rows["columns"]) if c not in COST_COLUMNS]
    assert len(keep) == len(rows["columns"]) - 4
    rows["columns"] = [rows["columns"][i] for i in keep]
    rows["rows"] = [[row[i] for i in keep] for row in rows["rows"]]
    added = ADDED_SINCE_2.get(name, set())
    for table in tables.values():
        model = table["columns"].index("model")
        table["rows"] = [row for row in table["rows"] if row[model] not in added]
    text = json.dumps(tables, sort_keys=True, separators=(",", ":"), allow_nan=False)
    assert hashlib.sha256(text.encode()).hexdigest() == GOLDEN[2][name]
