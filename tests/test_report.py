"""Reports and paper outputs: golden tables, byte-identical reruns, figures that show the data."""

import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from finbench.audit import audit_run
from finbench.core.errors import RunError
from finbench.reports import figures as F
from finbench.reports.build import paper, report
from finbench.runlog.rundir import run_labels
from finbench.runner import run
from finbench.runner.scores import score_run
from finbench.scoring.bootstrap import mean_ci, paired_difference, skill_ci
from finbench.shards import merge_shards
from finbench.tracks.intraday.report_data import RunData, decision, load_run, paired_table, score_table
from tests.golden.regenerate import GOLDEN, KEY_VARIABLES, TABLES, pilot_report
from tests.helpers import aapl_config, scripted_toml
from tests.reference import naive_paired_table, naive_score_table


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
    # the report's tables, and the paper's Tables 1-3 beside them
    papers = snapshot(tmp_path / "p1" / "tables")
    assert {k: v for k, v in papers.items() if not k.startswith("table")} == first
    assert sorted(k for k in papers if k.startswith("table")) == [
        f"table{n}_{name}.{ext}" for n, name in ((1, "first_horizon"),
                                                  (2, "pair_by_horizon"), (3, "all_horizons"))
        for ext in ("csv", "md", "tex")]
    # the paper's tables in the repository are what `make paper` writes (text tables: the
    # golden files' promise; the CSVs' ten digits may move with libm on another machine)
    committed = Path(__file__).resolve().parents[1] / "paper" / "tables"
    for name, data in snapshot(tmp_path / "p1" / "tables").items():
        if name.endswith((".md", ".tex")):
            assert (committed / name).read_bytes() == data, f"paper/tables/{name}: run make paper"


def test_every_figure_is_a_valid_png_and_pdf(pilot):
    names = ["fig1_skill_by_model", "fig2_brier_vs_coverage", "fig3_models_across_horizons",
             "reliability", "coverage_by_horizon", "width_by_horizon", "kelly_wealth",
             "skill_by_horizon", "skill_heatmap"]
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
    labels = [t.get_text() for t in ax.get_xticklabels()]  # each bar says its paired rows
    assert labels == [f"{m}\nn={n}" for m, n in zip(first["model"], first["bss_n"], strict=True)]
    ax = F.plot_brier_vs_coverage(by_h)  # a point per model and horizon with an interval
    points = np.vstack([c.get_offsets() for c in ax.collections])
    given = by_h[by_h["coverage"].notna()]
    assert 0 < len(given) < len(by_h)  # the pilot has models without an interval
    want = given[["coverage", "brier"]].to_numpy()
    np.testing.assert_allclose(points[np.lexsort(points.T)], want[np.lexsort(want.T)])
    horizons = list(dict.fromkeys(given["slice"]))
    assert len(horizons) > 1
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(
        dict.fromkeys(given["model"])) + horizons  # it names what is drawn, and only that
    # each point is marked by its horizon, the marker the legend gives that horizon
    from matplotlib.markers import MarkerStyle
    legend = dict(zip([t.get_text() for t in ax.get_legend().get_texts()],
                      ax.get_legend().legend_handles, strict=True))
    assert all(legend[m].get_marker() in ("None", "", None) for m in given["model"])
    for c in ax.collections:
        (x, y), = c.get_offsets()
        row = given[np.isclose(given["coverage"], x) & np.isclose(given["brier"], y)]
        style_ = MarkerStyle(legend[row["slice"].iloc[0]].get_marker())
        want_path = style_.get_path().transformed(style_.get_transform())
        np.testing.assert_allclose(c.get_paths()[0].vertices, want_path.vertices)
    ax = F.plot_across_horizons(by_h)
    coin = by_h[by_h["model"] == "coin"]["brier"].to_numpy()
    assert any(np.allclose(line.get_ydata(), coin) for line in ax.get_lines())
    _, paths = decision(data)
    ax = F.plot_wealth(paths)
    lines = {line.get_label(): line for line in ax.get_lines()}
    dates, wealth = paths["base_rate"]
    np.testing.assert_allclose(lines["base_rate"].get_ydata(), np.r_[0.0, wealth])
    assert len(wealth) == 1  # the pilot is one session: wealth 1 the day before, then after it
    assert [str(pd.Timestamp(x).date()) for x in lines["base_rate"].get_xdata()] == [
        "2025-01-14", "2025-01-15"]


def test_runs_sharing_a_folder_name_are_told_apart_and_one_run_twice_is_refused(pilot,
                                                                                 tmp_path):
    for side in ("a", "b"):
        shutil.copytree(pilot, tmp_path / side / "pilot")
    assert run_labels([tmp_path / "a" / "pilot", tmp_path / "b" / "pilot"]) == [
        "a/pilot", "b/pilot"]
    assert run_labels([tmp_path / "a" / "pilot", pilot]) == ["a/pilot",
                                                             f"{pilot.parent.name}/pilot"]
    assert run_labels([tmp_path / "a" / "pilot", tmp_path / "b"]) == ["pilot", "b"]
    paper([tmp_path / "a" / "pilot", tmp_path / "b" / "pilot"], tmp_path / "paper")
    text = (tmp_path / "paper" / "tables" / "scores_aggregate.md").read_text()
    assert "| a/pilot/coin | 9 |" in text and "| b/pilot/coin | 9 |" in text
    with pytest.raises(RunError, match="the same run is given twice"):
        paper([pilot, Path(f"{pilot}/")], tmp_path / "twice")
    assert not (tmp_path / "twice").exists()


@pytest.mark.parametrize("command", ["report", "paper", "score", "audit", "merge"])
def test_commands_on_a_missing_or_unfinished_run_name_it_and_what_it_lacks(pilot, tmp_path,
                                                                          command):
    call = {"report": report, "paper": lambda d: paper([d], tmp_path / "paper"),
            "score": score_run, "audit": audit_run,
            "merge": lambda d: merge_shards([d], tmp_path / "merged")}[command]
    with pytest.raises(RunError, match=re.escape(f"{tmp_path / 'nowhere'}: no such run")):
        call(tmp_path / "nowhere")
    waiting = tmp_path / "waiting"  # e.g. a batch run whose batches are not in yet
    shutil.copytree(pilot, waiting)
    (waiting / "forecasts.parquet").unlink()
    with pytest.raises(RunError, match=re.escape(f"{waiting}: not a finished run (missing "
                                                 "forecasts.parquet); a run still waiting")):
        call(waiting)


def test_paper_computes_each_skill_within_its_run_and_refuses_different_task_sets(
        pilot, tmp_path, sample_store):
    """Pooled runs once took the first run's coin as every model's reference, so a model of
    another run was paired with tasks of a run it never saw."""
    config = (Path(__file__).resolve().parents[1] / "configs" / "pilot.toml").read_text()
    config = config.replace('"../data/sample"', f'"{sample_store}"').split("# The paper")[0]
    (tmp_path / "day.toml").write_text(config.replace('start = "2025-01-15"',
                                                      'start = "2025-01-14"'))
    day = run(tmp_path / "day.toml", tmp_path / "day", echo=lambda *_: None)
    with pytest.raises(RunError, match=r"different task sets \(9 tasks common to all runs; "
                       r"pilot: 9 tasks, 0 not in every run; day: 18 tasks, 9 not in every"):
        paper([pilot, day], tmp_path / "refused")
    assert not (tmp_path / "refused").exists()
    said = []
    paper([pilot, day], tmp_path / "paper", allow_different_tasks=True, echo=said.append)
    assert said and said[0].startswith("task sets differ: 9 tasks common")
    pooled = pd.read_csv(tmp_path / "paper" / "tables" / "scores_aggregate.csv")
    for folder in (pilot, day):
        own = score_table(load_run(folder), slice_kind="overall").set_index("model")
        for model, rec in own.iterrows():
            got = pooled[pooled["model"] == f"{folder.name}/{model}"].iloc[0]
            assert got["bss_ref_model"] == f"{folder.name}/coin" and got["bss_n"] == rec["bss_n"]
            assert got["bss"] == pytest.approx(rec["bss"], abs=1e-9)


def test_paper_pools_several_runs_with_prefixed_names(pilot, tmp_path):
    other = tmp_path / "again"
    shutil.copytree(pilot, other)
    paper([pilot, other], tmp_path / "paper")
    text = (tmp_path / "paper" / "tables" / "scores_aggregate.md").read_text()
    assert "pilot/coin" in text and "again/coin" in text
    # into a run's folder, the pooled tables replaced that run's own report tables
    before = {p: p.read_bytes() for p in sorted(other.rglob("*")) if p.is_file()}
    with pytest.raises(RunError, match=f"{other}: is a run directory, whose tables/ and "
                                       "figures/ are its own report's"):
        paper([pilot, other], other)
    assert {p: p.read_bytes() for p in sorted(other.rglob("*")) if p.is_file()} == before


def _scored_rows(horizons: list[str], seed: int = 4) -> pd.DataFrame:
    """Rows as ``row_scores`` gives them, for 7 tickers x 12 sessions x the horizons and one
    horizon the config does not name: rows missing, invalid and unscorable here and there,
    shuffled so that models, tickers and sessions interleave."""
    rng = np.random.default_rng(seed)
    out = []
    for model in ("coin", "base_rate", "mine", "clim"):
        for t in range(7):
            for d in range(1, 13):
                for h in [*horizons, "EXTRA"]:
                    if rng.random() < 0.1:
                        continue  # no forecast of this model for the task
                    ok, valid = rng.random() < 0.93, rng.random() < 0.9
                    answered = valid or rng.random() < 0.7  # else a call without answer
                    y, p = float(rng.random() < 0.5), rng.random()
                    score = ok and valid
                    # the baselines give no interval; "mine" gives one or abstains
                    note = ("not_applicable" if model in ("coin", "base_rate") else
                            "insufficient_history: 3 past returns" if rng.random() < 0.1
                            else None)
                    inside = score and note is None
                    lo, hi = -rng.random() / 50, rng.random() / 50
                    r = rng.choice([0.0, rng.normal(0, 0.01)], p=[0.05, 0.95])
                    nan = np.nan
                    out.append({
                        "task_id": f"T{t}|2025-02-{d:02d}|{h}", "model": model, "p_up": p,
                        "valid": valid, "answered": answered,
                        "status": "ok" if ok else "no_target_price",
                        "interval_note": note if valid else None,
                        "ticker": f"T{t}", "session": f"2025-02-{d:02d}", "horizon": h,
                        "y": y if ok else nan, "r": r if ok else nan, "scored": score,
                        "interval_scored": inside,
                        "brier": (p - y) ** 2 if score else nan,
                        "log_loss": -np.log(p if y else 1 - p) if score else nan,
                        "winkler": (hi - lo) + 10 * max(lo - r, 0) + 10 * max(r - hi, 0)
                        if inside else nan,
                        "covered": float(lo <= r <= hi) if inside else nan,
                        "width": hi - lo if inside else nan,
                        "correct": float((p > 0.5) == bool(y)) if score else nan,
                        "tie": float(r == 0) if score else nan,
                        "t_forecast": pd.Timestamp(f"2025-02-{d:02d} 14:30", tz="UTC")})
    rows = pd.DataFrame(out)
    rows = rows.iloc[rng.permutation(len(rows))].reset_index(drop=True)
    for col in ("task_id", "model", "status", "ticker", "session", "horizon"):
        rows[col] = rows[col].astype("string[pyarrow]")  # as read back from Parquet
    rows["interval_note"] = rows["interval_note"].astype(object)
    return rows


@pytest.mark.parametrize("cluster", ["session", "session_ticker"])
def test_score_and_paired_tables_equal_a_naive_per_cell_loop(pilot, cluster):
    """Cells read by position (clusters as sorted integer codes, one join per pair of models)
    give exactly what pandas filters and merges per (slice, model) give."""
    base = load_run(pilot)
    config = base.config.model_copy(update={"report": base.config.report.model_copy(
        update={"cluster": cluster, "bootstrap_replicates": 300, "min_n": 20})})
    rows = _scored_rows(list(config.tasks.horizons))
    data = RunData("synthetic", config, base.manifest, rows,
                   ["coin", "base_rate", "mine", "clim"], ["coin", "base_rate"])
    for kind in ("overall", "horizon", "ticker"):
        got = score_table(data, slice_kind=kind)
        want = naive_score_table(data, slice_kind=kind, mean_ci=mean_ci, skill_ci=skill_ci)
        pd.testing.assert_frame_equal(got, want, check_exact=True)
        assert len(got) == 4 * {"overall": 1, "horizon": 4, "ticker": 7}[kind]
        assert got["brier_lo"].notna().all() and (got["n"] > 0).all()
    assert list(score_table(data, slice_kind="horizon")["slice"].unique()) == [
        *config.tasks.horizons, "EXTRA"]  # the config's order, unnamed ones last
    for metric in ("brier", "winkler"):
        got = paired_table(data, metric=metric)
        want = naive_paired_table(data, metric=metric, paired_difference=paired_difference)
        # the MDE and the DM test (statsmodels' HAC), Holm (statsmodels): within 1e-12; the
        # rest exactly
        inferred = ["mde", "dm_stat", "dm_p", "p_holm", "dm_p_holm"]
        pd.testing.assert_frame_equal(got.drop(columns=inferred), want.drop(columns=inferred),
                                      check_exact=True)
        pd.testing.assert_frame_equal(got[inferred], want[inferred], check_exact=False,
                                      rtol=1e-12, atol=0)
        assert got["dm_p"].notna().all() and (got["mde"] > 0).all()
        assert got["p_value"].between(0, 1).all()
        # pairs of every two models; of Winkler, only of the two that give intervals
        assert len(got) == {"brier": 6, "winkler": 1}[metric]


def test_a_long_wealth_path_is_drawn_from_each_buckets_low_and_high():
    rng = np.random.default_rng(8)
    path = np.cumsum(rng.normal(0, 0.01, 1_000_003))
    path[123_457] = path.max() + 1.0  # a one-session spike must survive thinning
    path[900_001] = path.min() - 1.0  # and a one-session trough
    x = F.wealth_points(path)
    assert len(x) <= 2 * F.WEALTH_BUCKETS + 2 and (np.diff(x) > 0).all()
    assert x[0] == 0 and x[-1] == len(path) - 1
    assert {123_457, 900_001} <= set(x.tolist())
    size = -(-len(path) // F.WEALTH_BUCKETS)
    for b in rng.integers(0, F.WEALTH_BUCKETS - 1, 20):  # every bucket's extremes are drawn
        part = path[b * size:(b + 1) * size]
        assert b * size + int(part.argmin()) in x and b * size + int(part.argmax()) in x
    np.testing.assert_array_equal(F.wealth_points(path[:3000]), np.arange(3000))


def test_a_run_of_one_model_without_baselines_and_a_vast_interval_is_reported(tmp_path,
                                                                             sample_store):
    """An interval answered as [-1e300, 1e300] is valid and scores a Winkler of 2e300: the
    tables show it as such, not as three hundred digits (fixed decimals below 1e6). With no
    baseline there is no skill figure (no reference), and a paired table with nothing to
    pair says so, in LaTeX too (an empty tabular does not compile)."""
    from finbench.reports.writers import fmt
    from finbench.tracks.intraday.tables import summary_frame

    assert [fmt(2e300, 4), fmt(-3.5e7), fmt(999_999.5, 1), fmt(0.12345, 4), fmt(7)] == [
        "2.0000e+300", "-3.500e+07", "999999.5", "0.1235", "7"]
    cfg = aapl_config(tmp_path / "cfg.toml", sample_store, scripted_toml(
        vast='{"p_up": 0.5, "lower": -1e300, "upper": 1e300}'))
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    shown = summary_frame(pd.read_parquet(out / "scores.parquet"), baselines=[])
    assert shown["Winkler@80"].tolist() == ["2.0000e+300"]
    tables, figures = report(out)
    assert "| vast | 3 | 0 | 0.00 | 0.250 | 3 | 1.00 | 2.0000e+300 |" in (
        out / "tables" / "scores_aggregate.md").read_text()
    assert (out / "tables" / "paired_winkler.md").read_text().endswith("\n\n(no rows)\n")
    assert "\\begin{tabular}{l}" in (out / "tables" / "paired_winkler.tex").read_text()
    names = {p.name for p in figures}
    assert "fig2_brier_vs_coverage.png" in names and not any("fig1" in n for n in names)


def test_a_run_whose_one_model_never_answered_validly_is_reported(tmp_path, sample_store):
    """Nothing scored: the tables say so (N 0, scores undef, calibration with no rows)
    instead of the report stopping on a missing column."""
    cfg = aapl_config(tmp_path / "cfg.toml", sample_store, scripted_toml(mute="not json"))
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    report(out)
    assert "| mute | 0 | 0 | undef | undef | 0 | undef | undef | 0.00 |" in (
        out / "tables" / "scores_aggregate.md").read_text()
    assert (out / "tables" / "calibration.md").read_text().endswith("\n\n(no rows)\n")


def test_a_winkler_score_past_the_float_range_is_reported_as_inf(tmp_path, sample_store):
    """An interval [-1.7e308, 1.7e308] is valid (finite bounds); its width overflows to inf.
    The tables say inf, and report.html's data (JSON, which has no infinity) holds "inf";
    before, writing the page stopped on "Out of range float values are not JSON compliant"."""
    import json
    import re

    cfg = aapl_config(tmp_path / "cfg.toml", sample_store, scripted_toml(
        vast='{"p_up": 0.5, "lower": -1.7e308, "upper": 1.7e308}'))
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    report(out)
    assert "| vast | 3 | 0 | 0.00 | 0.250 | 3 | 1.00 | inf |" in (
        out / "tables" / "scores_aggregate.md").read_text()
    page = (out / "report.html").read_text()
    data = re.search(r'id="sample-data">(.*?)</script>', page, re.S).group(1)

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    rows = [r for r in json.loads(data, parse_constant=refuse) if r["model"] == "vast"]
    assert len(rows) == 3 and all("Winkler inf" in r["head"][3] for r in rows)
    assert rows[0]["cells"][3] == "[-1.7e+308, 1.7e+308]"


def test_the_wealth_figure_ticks_sessions_and_breaks_across_months_without_data():
    """The Kelly figure ticked hours on a session axis (a run of a day or two) and drew a
    line across the months between two stretches of sessions."""
    import re

    days = np.array(["2025-01-02", "2025-01-03", "2025-03-03", "2025-03-04"],
                    dtype="datetime64[ns]")
    ax = F.plot_wealth({"m": (days, np.array([0.01, -0.02, 0.03, 0.01]))})
    ax.figure.canvas.draw()
    y = ax.get_lines()[0].get_ydata()
    assert np.isnan(y).sum() == 1 and list(y[~np.isnan(y)]) == [0.0, 0.01, -0.02, 0.03, 0.01]
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels and not any(":" in t for t in labels)
    ax = F.plot_wealth({"m": (days[:2], np.array([0.01, -0.02]))})
    ax.figure.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert labels and all(re.fullmatch(r"\d{4}-\d\d-\d\d", t) for t in labels), labels
    ax = F.plot_wealth({"m": (days[:0], np.array([]))})
    assert ax.get_legend() is None  # nothing drawn: no legend


def test_interval_figures_draw_and_name_only_the_models_that_give_intervals(pilot):
    """Coverage and width by horizon listed every model in their legends, those giving no
    interval with nothing drawn, and put the legend over a bar; bars were spaced for them."""
    data = load_run(pilot)
    by_h = score_table(data, slice_kind="horizon")
    assert set(by_h.loc[by_h["coverage"].notna(), "model"]) == {"climatology"}
    for plot, extra in ((F.plot_coverage_by_horizon, ["nominal 80%"]),
                        (F.plot_width_by_horizon, [])):
        ax = plot(by_h)
        legend = ax.get_legend()
        assert [t.get_text() for t in legend.get_texts()] == [*extra, "climatology"]
        ax.figure.canvas.draw()
        box = legend.get_window_extent()
        assert box.x0 >= ax.get_window_extent().x1  # beside the plot, over nothing drawn
    ax = F.plot_coverage_by_horizon(by_h)
    bars = ax.patches
    assert len(bars) == 3 and all(b.get_width() == pytest.approx(0.8) for b in bars)
    np.testing.assert_allclose([b.get_height() for b in bars], by_h.loc[
        by_h["model"] == "climatology", "coverage"].to_numpy())


def _ten_models() -> pd.DataFrame:
    """A horizon table of ten models with long names (skill, CI, paired N), two horizons."""
    names = [f"provider-{k}/model-of-a-long-name-{k}" for k in range(10)]
    rows = [{"slice": h, "model": m, "bss": 0.01 * k - 0.03, "bss_lo": 0.01 * k - 0.05,
             "bss_hi": 0.01 * k - 0.01, "bss_n": 100 + k, "bss_ref": "coin"}
            for h in ("MORNING", "CLOSE") for k, m in enumerate(names)]
    return pd.DataFrame(rows)


def _overlaps(ax, texts=None) -> int:
    """Pairs of ``texts`` (by default the axes' x tick labels) whose drawn boxes overlap,
    laid out as the figure is saved."""
    fig = ax.figure
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    texts = ax.get_xticklabels() if texts is None else texts
    boxes = [t.get_window_extent(renderer) for t in texts if t.get_text()]
    return sum(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_ten_models_names_do_not_run_into_each_other():
    """Figure 1 and skill by horizon with ten long model names: no two tick labels overlap
    (before, at a fixed width and 20 degrees, they did)."""
    import matplotlib.pyplot as plt

    from finbench.reports import style

    table = _ten_models()
    with plt.rc_context(style.RC):
        ax = F.plot_skill_by_model(table[table["slice"] == "MORNING"])
        assert len(ax.get_xticklabels()) == 10 and _overlaps(ax) == 0
        plt.close("all")
        ax = F.plot_skill_by_horizon(table)
        panels = ax.figure.axes
        assert [p.get_title() for p in panels] == ["MORNING", "CLOSE"]
        assert all(_overlaps(p) == 0 for p in panels)
        for panel, horizon in zip(panels, ["MORNING", "CLOSE"], strict=True):
            want = table.loc[table["slice"] == horizon, "bss"].to_numpy()
            np.testing.assert_allclose([b.get_height() for b in panel.patches], want)
        plt.close("all")
    # the old drawing (6 inches, labels at 20 degrees) overlapped: the check can fail
    _, ax = plt.subplots(figsize=(6.0, 3.6))
    ax.bar(range(10), table["bss"][:10])
    ax.set_xticks(range(10), table["model"][:10], rotation=20, ha="right")
    assert _overlaps(ax) > 0
    plt.close("all")


def test_reliability_shows_bins_counts_and_the_sharpness_below(pilot):
    """The reliability figure: points labelled with their counts (each label its point's,
    in its model's colour, none over another), the legend naming each model with its n, and
    below it the share of the model's forecasts per bin."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    from finbench.reports import style

    bins = pd.read_csv(pilot / "tables" / "reliability_bins.csv")
    bins = bins[bins["binning"] == "uniform"]
    top = F.plot_reliability_sharpness(bins)
    low = top.figure.axes[1]
    used = bins[bins["count"] > 0]
    models = list(dict.fromkeys(bins["model"]))
    points = {(m, round(x, 9), round(y, 9)): int(k) for m, x, y, k in zip(
        used["model"], used["mean_prob"], used["obs_freq"], used["count"], strict=True)}
    assert top.texts and _overlaps(top, top.texts) == 0
    for text in top.texts:
        model = models[[style.colour_of(m, i) for i, m in enumerate(models)].index(
            to_hex(text.get_color()).upper())]
        x, y = text.xy
        assert points[(model, round(x, 9), round(y, 9))] == int(text.get_text())
    assert min(int(t.get_text()) for t in top.texts) == used["count"].min()
    labels = [t.get_text() for t in top.get_legend().get_texts()]
    n = bins.groupby("model", sort=False)["count"].sum()
    assert labels == [f"{m} (n={int(c)})" for m, c in n.items()]
    stems = np.concatenate([c.get_segments() for c in low.collections], axis=0)
    heights = sorted(np.round(s[1][1] - s[0][1], 12) for s in stems)
    want = sorted(np.round(used["count"] / used["model"].map(n), 12))
    np.testing.assert_allclose(heights, want)
    plt.close("all")


def test_reliability_of_models_whose_bins_coincide_shows_each_and_one_count_a_point():
    """Two models with the same bins (a base rate and a climatology of the same history)
    drew the later's line over the earlier's, hiding it, and printed both counts over each
    other. Now each model's line is narrower than the one before (both show), a count is
    written only where it overlaps no other (the smallest first), and points apart keep
    their own."""
    import matplotlib.pyplot as plt

    from finbench.reports import style

    def bins(model, xs, counts):
        return pd.DataFrame({"model": model, "mean_prob": xs, "obs_freq": [0.5] * len(xs),
                             "count": counts})

    table = pd.concat([bins("base_rate", [0.1, 0.5, 0.9], [7, 1200, 30]),
                       bins("climatology", [0.1, 0.5, 0.9], [7, 1200, 30]),
                       bins("momentum", [0.3, 0.5], [5, 90000])], ignore_index=True)
    with plt.rc_context(style.RC):
        top = F.plot_reliability_sharpness(table)
        widths = [line.get_linewidth() for line in top.get_lines()[1:]]  # after the diagonal
        assert widths[0] > widths[1] > widths[2]
        written = sorted((t.xy[0], t.get_text()) for t in top.texts)
        # 0.1 and 0.9: one of the two equal counts; 0.3: momentum's; 0.5: the smallest of
        # the three there (1200), the others would lie over it
        assert written == [(0.1, "7"), (0.3, "5"), (0.5, "1200"), (0.9, "30")]
        assert _overlaps(top, top.texts) == 0
        plt.close("all")


def test_a_titled_reliability_figure_keeps_its_title_clear_of_the_counts_and_axes():
    """The event report titles its figures on synthetic data. The reliability figure lays
    out its counts when drawn (tight), so a title set after that sat over the upper panel and
    its top counts; it is now set before, and the figure as saved keeps it above both."""
    import matplotlib.pyplot as plt

    from finbench.reports import style
    from finbench.tracks.events.figures import plot_event_reliability

    bins = pd.DataFrame({"model": "market", "n": 42, "bin": [0, 1, 2],
                         "lower": [0.0, 0.4, 0.8], "upper": [0.4, 0.8, 1.0],
                         "count": [20, 17, 5], "yes": [0, 8, 5],
                         "mean_prob": [0.1, 0.6, 0.9], "obs_freq": [0.0, 8 / 17, 1.0]})
    with plt.rc_context(style.RC):
        top = plot_event_reliability(bins, title="SYNTHETIC data")
        fig = top.figure
        assert fig.get_suptitle() == "SYNTHETIC data"
        renderer = fig.canvas.get_renderer()  # the layout it is saved with (F.save keeps it)
        title = fig._suptitle.get_window_extent(renderer)
        counts = [t.get_window_extent(renderer) for t in top.texts]
        assert [t.get_text() for t in top.texts] == ["5", "17", "20"]
        for box in [top.get_window_extent(renderer), *counts]:
            assert not title.overlaps(box), (title, box)
        plt.close("all")


def test_models_answering_alike_each_show_in_every_figure_of_lines():
    """A base rate and a climatology of the same history answer alike, so their lines lie
    on each other in every figure of lines: each model's line is drawn narrower than the
    one before (the style's ``line_width``), and every model named in a legend is seen."""
    import matplotlib.pyplot as plt

    from finbench.reports import style

    models = ["coin", "base_rate", "climatology"]
    assert [style.line_width(i, 3) for i in range(3)] == pytest.approx([2.6, 2.0, 1.4])
    assert style.line_width(0, 20) == 1.4 + style.MOST_CASING  # many models: capped
    same = np.array([0.2, 0.25, 0.22])
    horizons = pd.DataFrame([{"model": m, "slice": h, "brier": b, "width": 0.01}
                             for m in models for h, b in zip(["A", "B", "C"], same,
                                                             strict=True)])
    curves = pd.DataFrame([{"model": m, "threshold": t, "score": 0.1}
                           for m in models for t in (0.1, 0.5, 0.9)])
    days = pd.to_datetime(["2025-01-13", "2025-01-14", "2025-01-15"]).to_numpy()
    wealth = {m: (days, np.array([0.01, -0.02, 0.03])) for m in models}
    with plt.rc_context(style.RC):
        for ax in (F.plot_murphy(curves), F.plot_across_horizons(horizons),
                   F.plot_width_by_horizon(horizons), F.plot_wealth(wealth)):
            handles, labels = ax.get_legend_handles_labels()  # an error bar's: its line
            lines = [getattr(h, "lines", (h,))[0] for h in handles]
            assert [label.split(" ")[0] for label in labels] == models
            widths = [line.get_linewidth() for line in lines]
            assert np.diff(widths) == pytest.approx([-style.CASING] * 2), widths
            plt.close("all")


def test_every_figure_is_drawn_in_the_one_style(pilot):
    """A figure the set draws is drawn under the style module's settings (no top or right
    spine, the palette's first colour for the first model)."""
    import matplotlib.pyplot as plt

    from finbench.reports import style

    seen = {}

    def probe(table):
        ax = F.plot_width_by_horizon(table)
        seen["spines"] = (ax.spines["top"].get_visible(), ax.spines["right"].get_visible())
        seen["colour"] = ax.get_lines()[0].get_color() if ax.get_lines() else None
        return ax

    by_h = pd.read_csv(pilot / "tables" / "scores_by_horizon.csv")
    figs = F.FigureSet(pilot / "probe")
    figs.draw("probe", probe, by_h)
    figs.check()
    assert seen["spines"] == (False, False)
    assert seen["colour"] == style.PALETTE[0]  # climatology: the figure's first model
    plt.close("all")
    # a report's models keep their colours from figure to figure
    figs = F.FigureSet(pilot / "probe", models=["coin", "base_rate", "momentum",
                                                "climatology"])
    figs.draw("probe", probe, by_h)
    assert seen["colour"] == style.PALETTE[3]
    drawn = {}

    def skill(table):
        ax = F.plot_skill_by_model(table)
        drawn.update(zip(table["model"], [b.get_facecolor() for b in ax.patches], strict=True))
        return ax

    figs.draw("skill", skill, by_h[by_h["slice"] == "MORNING"])
    from matplotlib.colors import to_rgba

    assert drawn["climatology"] == to_rgba(style.PALETTE[3])
    assert drawn["coin"] == to_rgba(style.PALETTE[0])
    shutil.rmtree(pilot / "probe")


def test_the_skill_heatmap_is_the_paired_skill_of_each_cell(pilot):
    """Each ticker x horizon cell: 1 - the model's summed Brier over the reference's, on the
    tasks both scored (a loop over the forecast rows, by hand), and the figure draws those
    values, a panel per model."""
    import matplotlib.pyplot as plt

    from finbench.tracks.intraday.report_data import skill_cells

    data = load_run(pilot)
    cells = skill_cells(data)
    rows = data.rows[data.rows["scored"]]
    coin = {r.task_id: r.brier for r in rows[rows["model"] == "coin"].itertuples()}
    want = {}
    for r in rows[rows["model"] != "coin"].itertuples():
        if r.task_id in coin:
            mine, ref, n = want.get((r.model, r.ticker, r.horizon), (0.0, 0.0, 0))
            want[(r.model, r.ticker, r.horizon)] = (mine + r.brier, ref + coin[r.task_id],
                                                    n + 1)
    assert len(cells) == len(want) == 3 * 3 * 3  # three baselines, tickers, horizons
    for c in cells.itertuples():
        mine, ref, n = want[(c.model, c.ticker, c.horizon)]
        assert c.n == n and c.reference == "coin"
        assert c.bss == pytest.approx(1 - mine / ref, rel=1e-12)
    ax = F.plot_skill_heatmap(cells, horizons=["MORNING", "MIDDAY", "CLOSE"])
    panels = [a for a in ax.figure.axes if a.get_title()]
    assert [p.get_title() for p in panels] == ["base_rate", "momentum", "climatology"]
    drawn = panels[1].images[0].get_array()
    table = cells[cells["model"] == "momentum"].pivot(index="ticker", columns="horizon",
                                                      values="bss")
    np.testing.assert_allclose(drawn, table[["MORNING", "MIDDAY", "CLOSE"]].to_numpy())
    plt.close("all")
    assert (pilot / "tables" / "skill_ticker_horizon.csv").is_file()
    assert (pilot / "figures" / "skill_heatmap.png").is_file()


def test_the_papers_pilot_design_gives_its_33_rows_and_tables_1_to_3(tmp_path, server,
                                                                      monkeypatch):
    """configs/pilot.toml as shipped, every model answered by the loopback server: the six
    language models at the paper's horizons (33 rows); `finbench paper` writes Table 1 (the
    six at MORNING), Table 2 (GPT-4o and GPT-4o Mini by horizon) and Table 3 (all horizons),
    Figure 1 of the six and Figure 3 of the pair."""
    import matplotlib.pyplot as plt

    root = Path(__file__).resolve().parents[1]
    for key in ("OPENAI_API_KEY", "FINBENCH_OPEN_API_KEY", "DEEPSEEK_API_KEY"):
        monkeypatch.setenv(key, "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)  # the openai client's own variable
    monkeypatch.setenv("FINBENCH_OPEN_BASE_URL", server.base_url)
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))
    cfg = tmp_path / "pilot.toml"
    cfg.write_text((root / "configs" / "pilot.toml").read_text().replace(
        '"../data/', f'"{root}/data/').replace('base_url = "https://api.deepseek.com"',
                                               f'base_url = "{server.base_url}"'))
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    forecasts = pd.read_parquet(out / "forecasts.parquet")
    llm = forecasts[forecasts["kind"] == "openai"]
    six = ["GPT-4o", "GPT-4o Mini", "Llama 3.3 70B Instruct", "Qwen2.5 72B", "Llama 3.1 70B",
           "DeepSeek-V3"]
    assert len(llm) == 33 and llm.groupby("model").size().to_dict() == {
        "GPT-4o": 9, "GPT-4o Mini": 9, "Llama 3.1 70B": 6, "Llama 3.3 70B Instruct": 3,
        "Qwen2.5 72B": 3, "DeepSeek-V3": 3}
    said = []
    paper([out], tmp_path / "paper", echo=said.append)
    assert not any("none of" in s for s in said)
    tables = tmp_path / "paper" / "tables"
    one = pd.read_csv(tables / "table1_first_horizon.csv")
    assert sorted(one["model"]) == sorted(six) and set(one["slice"]) == {"MORNING"}
    two = pd.read_csv(tables / "table2_pair_by_horizon.csv")
    assert two[["slice", "model"]].values.tolist() == [
        [h, m] for h in ("MORNING", "MIDDAY", "CLOSE") for m in ("GPT-4o", "GPT-4o Mini")]
    three = pd.read_csv(tables / "table3_all_horizons.csv").set_index("model")
    assert three.loc[six, "n"].sum() == 33 and three.loc["Llama 3.1 70B", "n"] == 6
    by_h = pd.read_csv(tables / "scores_by_horizon.csv")
    morning = by_h[by_h["slice"] == "MORNING"].set_index("model")
    np.testing.assert_allclose(one.set_index("model").loc[six, "brier"],
                               morning.loc[six, "brier"])
    assert (tables / "table1_first_horizon.tex").read_text().count("\\\\") >= 6
    for name in ("fig1_skill_by_model", "fig3_models_across_horizons"):
        assert (tmp_path / "paper" / "figures" / f"{name}.pdf").is_file()
    # the figures as the paper draws them: Figure 1 the six, Figure 3 the pair
    data = load_run(out)
    from finbench.tracks.intraday.report import build_figures, build_tables

    drawn = {}
    real_skill, real_across = F.plot_skill_by_model, F.plot_across_horizons

    def skill(table, **kw):
        drawn.setdefault("fig1", list(table["model"]))
        return real_skill(table, **kw)

    def across(table, **kw):
        drawn["fig3"] = sorted(set(table["model"]))
        return real_across(table, **kw)

    monkeypatch.setattr(F, "plot_skill_by_model", skill)
    monkeypatch.setattr(F, "plot_across_horizons", across)
    build_figures(data, build_tables(data, tmp_path / "t"), tmp_path / "f", paper=True).check()
    assert sorted(drawn["fig1"]) == sorted(six) and drawn["fig3"] == ["GPT-4o", "GPT-4o Mini"]
    plt.close("all")


def test_a_paper_of_runs_without_its_models_says_so_and_shows_every_model(pilot, tmp_path):
    said = []
    paper([pilot], tmp_path / "p", echo=said.append)
    assert any(s.startswith("report.paper_models: none of GPT-4o") for s in said)
    one = pd.read_csv(tmp_path / "p" / "tables" / "table1_first_horizon.csv")
    assert list(one["model"]) == ["coin", "base_rate", "momentum", "climatology"]
    two = pd.read_csv(tmp_path / "p" / "tables" / "table2_pair_by_horizon.csv")
    assert len(two) == 4 * 3  # the pair is not in the run either: every model by horizon


def test_the_papers_choices_are_checked_against_the_config():
    from finbench.tracks.intraday.config import RunConfig

    base = {"data": {"store": "x"}, "tasks": {"tickers": ["A"], "start": "2025-01-15",
                                               "end": "2025-01-15"},
            "models": [{"name": "coin", "kind": "coin"}]}
    with pytest.raises(ValueError, match="report.paper_pair: 'GPT-4o' is no model"):
        RunConfig.model_validate({**base, "report": {"paper_pair": ["coin", "GPT-4o"]}})
    with pytest.raises(ValueError, match="report.paper_composite: .* defines none"):
        RunConfig.model_validate({**base, "report": {"paper_composite": True}})


def test_the_papers_figures_show_the_composite_when_chosen(tmp_path, sample_store,
                                                           monkeypatch):
    """With ``[report] paper_composite``, Figure 1 draws each model's composite at the first
    horizon and Figure 3 the composite across horizons (the scores tables' own)."""
    from tests.helpers import baselines_toml

    cfg = aapl_config(tmp_path / "c.toml", sample_store,
                      baselines_toml("coin", "base_rate", "momentum")
                      + "[scores]\ncomposite = { brier = -1.0, accuracy = 0.5 }\n"
                        "[report]\npaper_composite = true\n")
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    drawn = {}
    real_skill, real_across = F.plot_skill_by_model, F.plot_across_horizons

    def skill(table, **kw):
        drawn.setdefault("fig1", dict(zip(table["model"], table["bss"], strict=True)))
        return real_skill(table, **kw)

    def across(table, metric="brier", **kw):
        drawn["fig3"] = metric
        return real_across(table, metric=metric, **kw)

    monkeypatch.setattr(F, "plot_skill_by_model", skill)
    monkeypatch.setattr(F, "plot_across_horizons", across)
    paper([out], tmp_path / "paper")
    by_h = pd.read_csv(tmp_path / "paper" / "tables" / "scores_by_horizon.csv")
    first = by_h[by_h["slice"] == "MORNING"].set_index("model")
    assert drawn["fig1"] == pytest.approx(first["composite_secondary"].to_dict(), rel=1e-9)
    assert drawn["fig3"] == "composite_secondary"


def test_the_papers_source_inputs_what_finbench_paper_writes_and_no_missing_glyph():
    """paper/main.tex: every table it inputs and figure it includes is a file `finbench
    paper` wrote into paper/ (Tables 1-3 among them), and no \\mathbb{1} (amssymb has no
    blackboard-bold digit: the PDF showed another glyph)."""
    root = Path(__file__).resolve().parents[1] / "paper"
    text = (root / "main.tex").read_text()
    assert "\\mathbb{1}" not in text and "\\ind[r > 0]" in text
    inputs = re.findall(r"\\input\{([^}]+)\}", text)
    figures = re.findall(r"\\includegraphics(?:\[[^]]*\])?\{([^}]+)\}", text)
    assert {"tables/table1_first_horizon.tex", "tables/table2_pair_by_horizon.tex",
            "tables/table3_all_horizons.tex"} <= set(inputs)
    for name in inputs:
        assert (root / name).is_file(), name
    for name in figures:
        assert (root / name).is_file(), name
