"""Murphy diagrams (finbench/scoring/murphy.py): elementary scores by hand, their mixture is
the Brier score, and the reports' curves and figures."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.scoring.murphy import elementary_scores


def test_elementary_scores_by_hand():
    th = np.array([0.1, 0.3, 0.5])
    # a 0-outcome forecast 0.3: a false alarm (cost theta) below 0.3 only
    assert elementary_scores(np.array([0.3]), np.array([0.0]), th).tolist() == [0.1, 0.0, 0.0]
    # a 1-outcome forecast 0.3: a miss (cost 1 - theta) from 0.3 on (p <= theta)
    assert elementary_scores(np.array([0.3]), np.array([1.0]), th).tolist() == pytest.approx(
        [0.0, 0.7, 0.5], abs=1e-15)
    both = elementary_scores(np.array([0.3, 0.3]), np.array([0.0, 1.0]), th)
    assert both.tolist() == pytest.approx([0.05, 0.35, 0.25], abs=1e-15)
    assert np.isnan(elementary_scores(np.empty(0), np.empty(0), th)).all()


@settings(max_examples=300)
@given(st.lists(st.tuples(st.floats(0, 1), st.booleans()), min_size=1, max_size=40))
def test_twice_the_area_under_the_curve_is_the_brier_score(rows):
    p = np.array([r[0] for r in rows])
    y = np.array([float(r[1]) for r in rows])
    # between two forecast values the mean score is linear in theta: the trapezoid rule on
    # the breakpoints is exact, each piece from its value at its left end (the curve is
    # right-continuous, so that is the limit from the right, at 0 too) to its limit on the
    # right
    grid = np.unique(np.r_[0.0, 1.0, p])
    th = grid[(grid >= 0) & (grid <= 1)]
    area = 0.0
    for i in range(len(th) - 1):
        left = elementary_scores(p, y, np.array([th[i]]))[0]
        right_limit = (th[i + 1] * ((y == 0) & (p > th[i])).sum()
                       + (1 - th[i + 1]) * ((y == 1) & (p <= th[i])).sum()) / len(p)
        area += (left + right_limit) / 2 * (th[i + 1] - th[i])
    assert 2 * area == pytest.approx(np.mean((p - y) ** 2), abs=1e-12)


def test_a_sure_miss_at_zero_scores_one():
    # the case the property test first found: p = 0 for an outcome that happened misses at
    # every threshold, (1 - theta) each, whose doubled area is the Brier score 1
    th = np.array([0.0, 0.25, 0.5])
    assert elementary_scores(np.array([0.0]), np.array([1.0]), th).tolist() == [1.0, 0.75, 0.5]


def test_the_reports_write_murphy_curves_and_draw_them(tmp_path):
    from finbench.reports.build import report
    from finbench.runner import run
    from tests.test_golden import _copy

    out = run(_copy(tmp_path), tmp_path / "run", echo=lambda *_: None)
    report(out)
    curves = pd.read_csv(out / "tables" / "murphy_curves.csv")
    rows = pd.read_parquet(out / "rows.parquet")
    coin = rows[(rows["model"] == "coin") & rows["scored"]]
    mine = curves[curves["model"] == "coin"]
    want = elementary_scores(coin["p_up"].to_numpy(float), coin["y"].to_numpy(float),
                             mine["threshold"].to_numpy(float))
    np.testing.assert_allclose(mine["score"], want, rtol=1e-9)
    assert (out / "figures" / "murphy.png").stat().st_size > 10_000
