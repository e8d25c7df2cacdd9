"""Reports and paper outputs: golden tables, byte-identical reruns, figures that show the data."""

import shutil
from pathlib import Path

import numpy as np
import pytest

from finbench.report import figures as F
from finbench.report.build import paper, report
from finbench.report.stats import decision, load_run, score_table
from tests.golden.regenerate import GOLDEN, KEY_VARIABLES, TABLES, pilot_report


@pytest.fixture(scope="module")
def pilot(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    for name in KEY_VARIABLES:
        mp.delenv(name, raising=False)
    out = tmp_path_factory.mktemp("pilot") / "pilot"
    pilot_report(out)
    yield out
    mp.undo()


@pytest.mark.parametrize("name", TABLES)
@pytest.mark.parametrize("ext", ["md", "tex"])
def test_pilot_tables_match_the_golden_files(pilot, name, ext):
    got = (pilot / "tables" / f"{name}.{ext}").read_text()
    assert got == (GOLDEN / f"{name}.{ext}").read_text(), (
        f"{name}.{ext} changed: if intended, run tests/golden/regenerate.py")


def test_tables_say_synthetic_and_name_counts(pilot):
    text = (pilot / "tables" / "scores_aggregate.md").read_text()
    assert "SYNTHETIC" in text and "9 tasks, 9 with labels" in text
    assert "descriptive only" in text and "BSS_coin [95% CI]" in text
    tex = (pilot / "tables" / "scores_aggregate.tex").read_text()
    assert r"\toprule" in tex and r"\bottomrule" in tex and "SYNTHETIC" in tex


def test_report_and_paper_twice_give_byte_identical_tables(pilot, tmp_path):
    def snapshot(folder):
        return {p.name: p.read_bytes() for p in sorted(Path(folder).glob("*")) if p.is_file()}

    first = snapshot(pilot / "tables")
    report(pilot)
    assert snapshot(pilot / "tables") == first
    paper([pilot], tmp_path / "p1")
    paper([pilot], tmp_path / "p2")
    assert snapshot(tmp_path / "p1" / "tables") == snapshot(tmp_path / "p2" / "tables")
    assert snapshot(tmp_path / "p1" / "tables") == first


def test_every_figure_is_a_valid_png_and_pdf(pilot):
    names = ["fig1_skill_by_model", "fig2_brier_vs_coverage", "fig3_models_across_horizons",
             "reliability", "coverage_by_horizon", "width_by_horizon", "kelly_wealth"]
    for name in names:
        assert (pilot / "figures" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (pilot / "figures" / f"{name}.pdf").read_bytes()[:5] == b"%PDF-"


def test_figures_plot_the_table_values(pilot):
    data = load_run(pilot)
    by_h = score_table(data, slice_kind="horizon")
    first = by_h[by_h["slice"] == "MORNING"]
    ax = F.plot_skill_by_model(first)
    heights = [p.get_height() for p in ax.patches]
    np.testing.assert_allclose(heights, first["bss"].to_numpy())
    ax = F.plot_brier_vs_coverage(by_h)
    points = np.vstack([c.get_offsets() for c in ax.collections])
    np.testing.assert_allclose(np.sort(points[:, 1]), np.sort(by_h["brier"].to_numpy()))
    ax = F.plot_across_horizons(by_h)
    coin = by_h[by_h["model"] == "coin"]["brier"].to_numpy()
    assert any(np.allclose(line.get_ydata(), coin) for line in ax.get_lines())
    _, paths = decision(data)
    ax = F.plot_wealth(paths)
    ys = [line.get_ydata() for line in ax.get_lines() if len(line.get_ydata()) > 2]
    np.testing.assert_allclose(ys[1], np.r_[0.0, paths["base_rate"]])


def test_paper_pools_several_runs_with_prefixed_names(pilot, tmp_path):
    other = tmp_path / "again"
    shutil.copytree(pilot, other)
    paper([pilot, other], tmp_path / "paper")
    text = (tmp_path / "paper" / "tables" / "scores_aggregate.md").read_text()
    assert "pilot/coin" in text and "again/coin" in text
