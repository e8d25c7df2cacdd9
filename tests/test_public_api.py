"""The public API: what ``finbench.__all__`` lists is importable from ``finbench``, costs
nothing until used, and carries a user from a config to an audited report."""

import subprocess
import sys
from pathlib import Path

import pytest

import finbench

ROOT = Path(__file__).resolve().parents[1]


def test_every_public_name_resolves_and_nothing_else_is_offered():
    for name in finbench.__all__:
        assert getattr(finbench, name) is not None, name
    assert callable(finbench.run) and callable(finbench.report)  # functions, not modules
    with pytest.raises(AttributeError, match="no attribute 'plan_run'"):
        finbench.plan_run  # noqa: B018 - internal names are not offered


def test_importing_finbench_loads_no_heavy_library():
    code = ("import sys, finbench; "
            "print(sorted(m for m in ('pandas', 'numpy', 'pyarrow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.strip()
    assert out == "[]"


def test_a_session_through_the_public_api_alone(tmp_path, sample_store):
    cfg = tmp_path / "mine.toml"
    cfg.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL", "MSFT"]\n'
                   'start = "2025-01-14"\nend = "2025-01-15"\n'
                   '[[models]]\nname = "coin"\nkind = "coin"\n'
                   '[[models]]\nname = "momentum"\nkind = "momentum"\n')
    config = finbench.load_config(cfg)
    assert [m.name for m in config.models] == ["coin", "momentum"]
    run_dir = finbench.run(cfg, tmp_path / "out", echo=lambda *_: None)
    scores = finbench.score_run(run_dir)
    overall = scores[(scores["slice_kind"] == "overall") & (scores["model"] == "coin")]
    assert overall["brier"].iloc[0] == 0.25  # the coin's Brier score on any labelled row
    assert finbench.audit_run(run_dir) == []
    tables, figures = finbench.report(run_dir)
    assert tables and figures and all(Path(p).is_file() for p in [*tables, *figures])
    with pytest.raises(finbench.ConfigError, match="models"):
        bad = tmp_path / "bad.toml"
        bad.write_text(cfg.read_text().replace('kind = "coin"', 'kind = "oracle"'))
        finbench.load_config(bad)
