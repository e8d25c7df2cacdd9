"""The time gate cannot be opened from the data side: a bar length that would make a bar
available before it starts is refused, every store setting that changes what the data mean is
inside the snapshot hash, and a run never resumes on a changed store."""

import json

import pytest

from finbench.audit import audit_run
from finbench.core.errors import ConfigError, DataError, RunError, StoreError
from finbench.data.ingest import ingest_bars
from finbench.data.store import Store
from finbench.runner import run
from finbench.tracks.configs import load_config
from tests.helpers import HEADER, aapl_config, bar_rows, cli, store_files, write


@pytest.mark.parametrize("seconds, why", [(-60, "-60 is not positive"), (0, "0 is not positive"),
                                          (7, "7 s does not divide a day")])
def test_a_bar_length_that_is_not_a_positive_divisor_of_a_day_is_refused(tmp_path, seconds,
                                                                         why):
    """With -60 a bar was "available" a minute before it started: the 14:30 context showed
    the bar of 14:31, and validate, run and audit all passed."""
    f = write(tmp_path / "bars.csv", HEADER + bar_rows("AAPL", [
        ("2025-01-15T14:30:00Z", 101.0, 100.0), ("2025-01-15T14:31:00Z", 102.0, 101.0)]))
    with pytest.raises(DataError, match=f"--bar-seconds: {why}"):
        ingest_bars(f, tmp_path / "store", bar_seconds=seconds)
    assert store_files(tmp_path / "store") == {}
    done = cli("data", "ingest", f, "--out", tmp_path / "store", "--bar-seconds", seconds)
    assert done.returncode == 2 and f"--bar-seconds: {why}" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_time_zone_is_a_message_naming_it(tmp_path, sample_store):
    f = write(tmp_path / "bars.csv", HEADER + bar_rows("AAPL", [("2025-01-15 09:30", 101, 100)]))
    done = cli("data", "ingest", f, "--out", tmp_path / "store", "--timezone", "Mars/Olympus")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--timezone: 'Mars/Olympus' is not a time zone name" in done.stderr
    cfg = aapl_config(tmp_path / "cfg.toml", sample_store, 'timezone = "Mars/Olympus"\n')
    with pytest.raises(ConfigError, match=r"key 'tasks.timezone': Value error, 'Mars/Olympus' "
                       r"is not a time zone name"):
        load_config(cfg)


@pytest.fixture
def pilot_run(tmp_path, sample_copy):
    cfg = aapl_config(tmp_path / "cfg.toml", sample_copy,
                      '[[models]]\nname = "momentum"\nkind = "momentum"\n')
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    return cfg, out, sample_copy


def test_editing_a_store_setting_changes_its_snapshot_and_stops_resume_and_audit(pilot_run):
    """bar_seconds was outside the snapshot hash: editing it in the manifest changed what
    every bar's availability means while the snapshot stayed the same."""
    cfg, out, store = pilot_run
    before = Store(store).snapshot_sha256
    manifest = json.loads((store / "manifest.json").read_text())
    manifest["bar_seconds"] = 120
    (store / "manifest.json").write_text(json.dumps(manifest))
    after = Store(store)
    assert after.snapshot_sha256 != before
    assert "manifest.json: snapshot_sha256 does not match its settings and partitions" in (
        after.verify())
    with pytest.raises(RunError, match=rf"its run saw data snapshot {before[:12]}, but .* is now "
                       rf"{after.snapshot_sha256[:12]} \(its data or settings changed\)"):
        run(cfg, out, echo=lambda *_: None)
    assert any(p.startswith(f"store {store}: snapshot {after.snapshot_sha256[:12]} is not the "
                            f"run's {before[:12]}") for p in audit_run(out))


@pytest.mark.parametrize("field, value, message", [
    ("bar_seconds", -60, "bar_seconds -60 is not positive"),
    ("bar_seconds", "60", "bar_seconds '60' is not a whole number of seconds"),
    ("bar_timestamp", "end", "bar_timestamp must be 'start'"),
    ("timezone", "Mars/Olympus", "timezone 'Mars/Olympus' is not a time zone name"),
])
def test_a_store_manifest_with_a_setting_out_of_bounds_is_refused(sample_copy, field, value,
                                                                  message):
    manifest = json.loads((sample_copy / "manifest.json").read_text())
    manifest[field] = value
    (sample_copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(StoreError, match=message):
        Store(sample_copy)
