"""What report rows say about themselves: N, sessions and the descriptive flag, exclusions
counted in sessions, p-values, and composites computed once from the scores table."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.core.errors import ConfigError
from finbench.reports.build import report
from finbench.reports.writers import fmt_p
from finbench.runner import run
from finbench.tracks.configs import load_config
from tests.helpers import baselines_toml

CONFIG = """
[data]
store = "{store}"
[tasks]
tickers = ["AAPL", "MSFT", "NVDA"]
start = "{start}"
end = "{end}"
""" + baselines_toml("coin", "base_rate", "climatology") + "{extra}\n"


def write(tmp_path, store, *, start="2024-11-25", end="2024-12-27", extra=""):
    path = tmp_path / "cfg.toml"
    path.write_text(CONFIG.format(store=store, start=start, end=end, extra=extra))
    return path


def test_a_composite_of_an_unknown_column_fails_when_the_config_loads(tmp_path, sample_store):
    cfg = write(tmp_path, sample_store, extra="[scores]\ncomposite = {brier = 0.5, bss_nope = 0.5}")
    with pytest.raises(ConfigError, match=r"scores\.composite\.bss_nope: not a score of this run; "
                       r"a composite weighs these: accuracy, brier, .*, bss_coin, bss_base_rate, "
                       r"bss_climatology, wss_climatology"):
        load_config(cfg)


def test_a_composite_is_the_same_number_in_scores_csv_and_in_every_table(tmp_path,
                                                                        sample_store):
    """Composites from columns the tables do not print (bss_base_rate, log_loss) were undef
    in the tables and set in scores.csv."""
    cfg = write(tmp_path, sample_store, start="2025-01-13", end="2025-01-15",
                extra="[scores]\ncomposite = {bss_base_rate = 0.5, log_loss = -0.5}")
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    report(out)
    scores = pd.read_csv(out / "scores.csv").set_index(["slice_kind", "slice", "model"])
    for name, kind in (("scores_aggregate", "overall"), ("scores_by_horizon", "horizon")):
        table = pd.read_csv(out / "tables" / f"{name}.csv")
        assert table["composite_secondary"].notna().all()
        for rec in table.to_dict("records"):
            want = scores.loc[(kind, str(rec["slice"]), rec["model"]), "composite_secondary"]
            assert rec["composite_secondary"] == pytest.approx(want, rel=1e-9)


def test_captions_count_excluded_sessions_and_rows_of_few_sessions_are_flagged(tmp_path,
                                                                            sample_store):
    """Two early closes (2024-11-29, 2024-12-24) leave out 18 tasks of 2 sessions; with 21
    sessions left, the run's rows pass 20 sessions, a horizon's too, and a table of one
    session's rows does not."""
    out = run(write(tmp_path, sample_store), tmp_path / "run", echo=lambda *_: None)
    report(out)
    caption = (out / "tables" / "scores_aggregate.md").read_text().splitlines()[0]
    assert "excluded: early_close 18 tasks of 2 sessions;" in caption
    overall = pd.read_csv(out / "tables" / "scores_aggregate.csv")
    assert (overall["sessions"] == 21).all() and overall["flag"].isna().all()
    kelly = pd.read_csv(out / "tables" / "decision_kelly.csv")
    assert (kelly["sessions"] == 21).all() and (kelly["bets"] > 0).all()
    assert kelly["flag"].isna().all()
    calibration = pd.read_csv(out / "tables" / "calibration.csv")
    assert {"n", "sessions", "flag"} <= set(calibration.columns)
    one = run(write(tmp_path, sample_store, start="2025-01-15", end="2025-01-15"),
              tmp_path / "one", echo=lambda *_: None)
    report(one)
    for name in ("decision_kelly", "calibration", "scores_aggregate"):
        table = pd.read_csv(one / "tables" / f"{name}.csv")
        assert (table["flag"] == "descriptive only").all(), name


def test_p_values_below_a_thousandth_are_not_printed_as_zero():
    assert [fmt_p(p) for p in (0.0, 0.0004, 0.001, 0.0126, float("nan"))] == [
        "< 0.001", "< 0.001", "0.001", "0.013", "undef"]


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 9), st.booleans()), max_size=40), st.booleans())
def test_rows_of_the_same_task_join_as_pandas_merge_does(rows, twice):
    """The report's pairing of two models' rows (each task once a model, or not: pooled runs
    may hold a task twice) is pandas' inner merge on the task, in the first model's row
    order."""
    from finbench.tracks.intraday.report_data import _joined

    task = np.array([t for t, _ in rows], np.int64)
    side = np.array([s for _, s in rows], bool)
    ra, rb = np.flatnonzero(side), np.flatnonzero(~side)
    if not twice:  # each side holds a task once
        ra = ra[np.unique(task[ra], return_index=True)[1]] if len(ra) else ra
        rb = rb[np.unique(task[rb], return_index=True)[1]] if len(rb) else rb
        ra = np.sort(ra)
        rb = np.sort(rb)
    want = pd.DataFrame({"task": task[ra], "_a": ra}).merge(
        pd.DataFrame({"task": task[rb], "_b": rb}), on="task")
    got = _joined(task, ra, rb)
    assert np.array_equal(got[0], want["_a"].to_numpy(np.int64))
    assert np.array_equal(got[1], want["_b"].to_numpy(np.int64))
