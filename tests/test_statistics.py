"""Bootstrap, calibration and decision-layer statistics."""

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.scoring.bootstrap import Draws, cluster_weights, mean_ci, paired_difference, skill_ci
from finbench.scoring.calibration import ece, murphy, reliability_table
from finbench.scoring.rules import kelly_growth_score
from finbench.tracks.intraday.decision import decision_table, max_drawdown, wealth_path


def test_bootstrap_is_reproducible_by_seed():
    rng = np.random.default_rng(0)
    values, clusters = rng.normal(size=200), np.repeat(np.arange(20), 10)
    a = mean_ci(values, clusters, seed=5)
    assert a == mean_ci(values, clusters, seed=5)
    assert a != mean_ci(values, clusters, seed=6)


def test_cluster_draws_are_the_seeded_multinomial_kept_read_only():
    draws = Draws(keep=8)
    first = draws.weights(7, replicates=5, seed=11)
    np.testing.assert_array_equal(
        first, np.random.default_rng(11).multinomial(7, np.full(7, 1 / 7), size=5))
    np.testing.assert_array_equal(first, cluster_weights(7, replicates=5, seed=11))
    assert (first.sum(axis=1) == 7).all()
    assert draws.weights(7, replicates=5, seed=11) is first  # kept, not drawn again
    assert cluster_weights(7, replicates=5, seed=11) is not first  # no draws owned: afresh
    with pytest.raises(ValueError):
        first[0, 0] = 99  # a kept draw cannot be changed by a caller
    assert not np.array_equal(draws.weights(7, replicates=5, seed=12), first)
    for n in range(draws.keep + 1):  # the oldest are let go
        draws.weights(100 + n, replicates=5, seed=11)
    assert (7, 5, 11) not in draws.kept and len(draws.kept) == draws.keep
    small = Draws(keep_bytes=1000)
    big = small.weights(50, replicates=5, seed=1)  # 2,000 bytes: drawn, not kept
    assert small.kept == {} and big.shape == (5, 50)


def test_products_of_a_kept_draw_are_kept_and_change_no_bit():
    rng = np.random.default_rng(4)
    values, other = rng.normal(size=120), rng.normal(size=120)
    clusters = np.repeat(np.arange(30), 4)
    draws = Draws()
    first = mean_ci(values, clusters, replicates=200, seed=3, draws=draws)
    held = dict(draws.products)
    assert len(held) == 1  # the sums' product (a mean of equal clusters needs no other)
    assert mean_ci(values, clusters, replicates=200, seed=3, draws=draws) == first
    assert all(draws.products[k] is v for k, v in held.items())  # asked again, not made again
    # another seed, other sums, another replicate count: each its own product, as made afresh
    for seed, v, b in ((4, values, 200), (3, other, 200), (3, values, 100)):
        assert mean_ci(v, clusters, replicates=b, seed=seed, draws=draws) == mean_ci(
            v, clusters, replicates=b, seed=seed)
    assert len(draws.products) == 4
    assert skill_ci(values ** 2, other ** 2, clusters, replicates=200, seed=3, draws=draws) \
        == skill_ci(values ** 2, other ** 2, clusters, replicates=200, seed=3)
    with pytest.raises(ValueError):
        next(iter(draws.products.values()))[0] = 1.0  # a kept product cannot be changed
    small = Draws(product_bytes=2 * (200 * 8 + 30 * 8))  # room for two products
    for seed in range(5):
        mean_ci(values, clusters, replicates=200, seed=seed, draws=small)
    assert [k[2] for k in small.products] == [3, 4]  # the newest kept, the oldest let go
    assert small._product_held <= small.product_bytes


def test_many_clusters_are_drawn_in_blocks_with_the_same_replicates():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=600), rng.normal(size=600)
    clusters = rng.permutation(np.repeat(np.arange(150), 4))

    def intervals(draws):
        return (mean_ci(a, clusters, replicates=50, seed=9, draws=draws),
                skill_ci(a ** 2, b ** 2, clusters, replicates=50, seed=9, draws=draws),
                paired_difference(a, b, clusters, replicates=50, seed=9, draws=draws))

    draws = Draws()
    whole = intervals(draws)
    assert list(draws.kept) == [(150, 50, 9)]  # drawn whole, once, and kept
    small = Draws(keep_bytes=8 * 150 * 7)  # blocks of 7 replicates
    blocked = intervals(small)
    assert small.kept == {}  # too large to keep: drawn block by block
    for got, want in zip((blocked[0], blocked[1], blocked[2][0]),
                         (whole[0], whole[1], whole[2][0]), strict=True):
        assert got.estimate == want.estimate and got.n == want.n and got.clusters == 150
        np.testing.assert_allclose([got.lower, got.upper], [want.lower, want.upper], rtol=1e-12)
        assert got.lower < got.estimate < got.upper
    assert blocked[2][1] == whole[2][1]  # the p-value
    assert intervals(None) == whole  # owning no draws changes no number


@settings(max_examples=60)
@given(clusters=st.integers(2, 400), size=st.integers(1, 5000), replicates=st.integers(1, 60),
       seed=st.integers(0, 2**16), block=st.booleans())
def test_equal_clusters_divide_by_their_count_exactly_as_the_product_does(
        clusters, size, replicates, seed, block):
    """Clusters of one size (a mean's counts, mostly): every replicate's denominator is
    that size times the clusters, which the product ``w @ counts`` gives too, bit for bit
    (whole numbers sum exactly in any order); whole draws or drawn in blocks."""
    from finbench.scoring import bootstrap

    rng = np.random.default_rng(seed)
    top = rng.normal(size=clusters) * size
    bottom = np.full(clusters, float(size))
    draws = Draws(keep_bytes=8 * clusters * 7) if block else Draws()
    got = bootstrap._ratios(top, bottom, replicates=replicates, seed=seed, draws=draws)
    w = np.random.default_rng(seed).multinomial(
        clusters, np.full(clusters, 1.0 / clusters), size=replicates).astype(float)
    assert np.array_equal(w @ bottom, np.full(replicates, float(size) * clusters))
    if not block:  # the same draws: the quotient of the products themselves
        assert np.array_equal(got, (w @ top) / (w @ bottom))
    assert bootstrap._constant_count(bottom) == float(size) * clusters
    assert bootstrap._constant_count(np.r_[bottom, size + 1.0]) is None
    assert bootstrap._constant_count(np.r_[size, size + 1.0, size]) is None
    assert bootstrap._constant_count(np.full(clusters, 0.5)) is None


def test_one_row_per_session_equals_the_row_bootstrap():
    rng = np.random.default_rng(1)
    values = rng.normal(size=50)
    sessions = np.array([f"2025-01-{d:02d}" for d in range(1, 51)])
    assert mean_ci(values, sessions, seed=3) == mean_ci(values, np.arange(50), seed=3)


def test_identical_copies_widen_nothing_for_sessions_but_fool_the_row_bootstrap():
    rng = np.random.default_rng(2)
    per_session = rng.normal(size=30)
    copies = np.repeat(per_session, 9)  # nine identical rows per session
    sessions = np.repeat(np.arange(30), 9)
    one_row = mean_ci(per_session, np.arange(30), seed=4)
    session = mean_ci(copies, sessions, seed=4)
    row = mean_ci(copies, np.arange(len(copies)), seed=4)
    assert session.upper - session.lower == pytest.approx(one_row.upper - one_row.lower)
    assert row.upper - row.lower < 0.5 * (session.upper - session.lower)


def test_one_cluster_gives_no_interval():
    ci = mean_ci([0.1, 0.2, 0.3], ["d", "d", "d"])
    assert ci.estimate == pytest.approx(0.2) and math.isnan(ci.lower) and math.isnan(ci.upper)
    diff, p = paired_difference([0.1, 0.2], [0.2, 0.2], ["d", "d"])
    assert diff.estimate == pytest.approx(-0.05) and math.isnan(p)


def test_paired_difference_detects_a_clear_gap_and_not_a_null_one():
    rng = np.random.default_rng(3)
    sessions = np.repeat(np.arange(40), 5)
    base = rng.uniform(0.2, 0.3, 200)
    better = base - 0.05 + rng.normal(0, 0.01, 200)
    same = base + rng.normal(0, 0.01, 200)
    gap, p_gap = paired_difference(better, base, sessions, seed=1)
    _, p_null = paired_difference(same, base, sessions, seed=1)
    assert gap.upper < 0 and p_gap < 0.01 and p_null > 0.05


def test_skill_ci_contains_its_estimate():
    rng = np.random.default_rng(4)
    s = skill_ci(rng.uniform(0.1, 0.3, 100), rng.uniform(0.2, 0.3, 100),
                 np.repeat(np.arange(20), 5), seed=2)
    assert s.lower <= s.estimate <= s.upper


@pytest.mark.slow
def test_session_bootstrap_covers_the_true_skill():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_bootstrap_coverage import coverage

    session, row, _ = coverage(row_sims=100)
    assert 0.92 <= session <= 0.98
    assert row < 0.8  # the row bootstrap ignores within-session correlation (about half)


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_murphy_terms_add_up_to_the_binned_brier_score(strategy):
    rng = np.random.default_rng(5)
    for _ in range(20):
        p = rng.uniform(0, 1, 500)
        y = (rng.uniform(0, 1, 500) < rng.uniform(0, 1, 500)).astype(float)
        m = murphy(y, p, bins=10, strategy=strategy)
        assert m["reliability"] - m["resolution"] + m["uncertainty"] == pytest.approx(
            m["brier_binned"], abs=1e-12)


def test_a_calibrated_forecaster_has_near_zero_reliability():
    rng = np.random.default_rng(6)
    p = rng.uniform(0, 1, 200_000)
    y = (rng.uniform(0, 1, p.size) < p).astype(float)
    m = murphy(y, p, bins=10)
    assert m["reliability"] < 1e-3 and ece(y, p) < 0.01
    over = np.clip(0.5 + 1.8 * (p - 0.5), 0, 1)  # overconfident: same ranking, pushed out
    assert murphy(y, over, bins=10)["reliability"] > 20 * m["reliability"]


def test_reliability_table_counts_every_forecast_once():
    table = reliability_table([1, 0, 1, 1], [0.05, 0.15, 0.95, 1.0], bins=10)
    assert table["count"].sum() == 4 and table.loc[9, "count"] == 2
    assert table.loc[9, "obs_freq"] == 1.0 and table.loc[0, "mean_prob"] == pytest.approx(0.05)


def test_kelly_growth_hand_computed():
    # p = 0.6 right: ln(1 + 0.2) ; p = 0.6 wrong: ln(0.8) ; p = 0.5: ln 1 = 0 ;
    # p = 0.99 on a wrong call: ln(1 - 0.98) = ln 0.02
    got = kelly_growth_score([1, 0, 1, 0], [0.6, 0.6, 0.5, 0.99])
    assert got == pytest.approx([math.log(1.2), math.log(0.8), 0.0, math.log(0.02)])
    assert got.mean() == pytest.approx((math.log(1.2) + math.log(0.8) + math.log(0.02)) / 4)
    assert kelly_growth_score([0], [1.0])[0] == -math.inf  # certain and wrong: ruin


def test_wealth_path_and_drawdown():
    path = wealth_path([1, 0, 0, 1], [0.6, 0.6, 0.6, 0.6])
    assert path == pytest.approx(np.cumsum(np.log([1.2, 0.8, 0.8, 1.2])))
    # peak 1.2, trough 1.2 * 0.8 * 0.8 = 0.768: drawdown 1 - 0.768 / 1.2 = 0.36
    assert max_drawdown(path) == pytest.approx(0.36)


def _bets(rows):
    """Decision-layer rows from (session, ticker, p, y, scored) tuples."""
    return pd.DataFrame([{"model": "m", "session": d, "task_id": f"{t}|{d}|H", "p_up": p,
                          "y": y, "scored": ok} for d, t, p, y, ok in rows])


def test_bets_of_one_session_share_the_wealth_before_it():
    """Session 1: three tasks, stakes (2p - 1)/3: +0.2/3 won, +0.4/3 lost, -0.2/3 (down)
    won; session 2: two tasks, one unscored (its stake returned), +0.6/2 won."""
    rows = _bets([("2025-01-02", "A", 0.6, 1, True), ("2025-01-02", "B", 0.7, 0, True),
                  ("2025-01-02", "C", 0.4, 0, True), ("2025-01-03", "A", 0.8, 1, True),
                  ("2025-01-03", "B", 0.9, 0, False)])
    table, paths = decision_table(rows, ["m"])
    first = math.log(1 + (0.2 - 0.4 + 0.2) / 3)
    second = math.log(1 + 0.6 / 2)
    dates, wealth = paths["m"]
    assert [str(d)[:10] for d in dates] == ["2025-01-02", "2025-01-03"]
    assert wealth == pytest.approx([first, first + second])
    rec = table.iloc[0]
    assert (rec["bets"], rec["sessions"], rec["ruin"]) == (4, 2, "")
    assert rec["growth_rate"] == pytest.approx((first + second) / 2)


def test_decision_layer_does_not_depend_on_row_order():
    rng = np.random.default_rng(3)
    rows = _bets([(f"2025-01-{d:02d}", f"T{t}", rng.random(), int(rng.integers(0, 2)),
                   rng.random() < 0.9) for d in range(2, 30) for t in range(40)])
    table, paths = decision_table(rows, ["m"])
    for seed in range(3):
        shuffled = rows.sample(frac=1, random_state=seed).reset_index(drop=True)
        again, other = decision_table(shuffled, ["m"])
        pd.testing.assert_frame_equal(again, table, check_exact=True)
        np.testing.assert_array_equal(other["m"][1], paths["m"][1])


def test_a_session_of_certain_wrong_answers_is_ruin_reported_not_averaged():
    one_wrong = _bets([("2025-01-02", "A", 1.0, 0, True), ("2025-01-02", "B", 0.6, 1, True)])
    table, _ = decision_table(one_wrong, ["m"])
    assert table.iloc[0]["ruin"] == "" and table.iloc[0]["final_log_wealth"] == pytest.approx(
        math.log(1 + (-1 + 0.2) / 2))  # one certain miss of two stakes half the wealth
    ruined = _bets([("2025-01-02", "A", 0.6, 1, True), ("2025-01-03", "A", 1.0, 0, True),
                    ("2025-01-03", "B", 0.0, 1, True), ("2025-01-06", "A", 0.6, 1, True)])
    table, paths = decision_table(ruined, ["m"])
    rec = table.iloc[0]
    assert rec["ruin"] == "2025-01-03" and rec["max_drawdown"] == 1.0
    assert math.isnan(rec["growth_rate"]) and math.isnan(rec["final_log_wealth"])
    assert np.isneginf(paths["m"][1][1:]).all()


def test_cluster_codes_number_clusters_in_the_order_of_their_texts():
    """Bootstrap clusters from the columns' codes equal those numbered from the joined texts
    (``session`` and ``session|ticker`` sorted), with text and object columns alike."""
    from finbench.tracks.intraday.report_data import cluster_codes_of

    rng = np.random.default_rng(0)
    sessions = pd.date_range("2020-01-01", periods=40).strftime("%Y-%m-%d").to_numpy()
    tickers = np.array(["A", "AA", "AAPL", "B", "BRK.B", "Z", "MSFT"])
    rows = pd.DataFrame({"session": pd.array(rng.choice(sessions, 5000), dtype="str"),
                         "ticker": pd.array(rng.choice(tickers, 5000), dtype="str")})
    for kind, text in (("session", rows["session"]),
                       ("session_ticker", rows["session"] + "|" + rows["ticker"])):
        by_text = pd.factorize(text.to_numpy(object), sort=True)[0]
        assert (cluster_codes_of(rows, kind) == by_text).all(), kind
        assert (cluster_codes_of(rows.astype(object), kind) == by_text).all(), kind


@settings(max_examples=300)
@given(st.lists(st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.sampled_from(
    [0.0, 1.0, -1.0, 0.1, np.nan, np.inf, -np.inf])), min_size=0, max_size=400),
       st.one_of(st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.99, 1.0, 0.0]),
                 st.floats(0, 1, allow_nan=False)))
def test_percentile_interval_is_numpys_linear_rule_bit_for_bit(values, level):
    """The bootstrap's interval of replicates (finite ones only) is what ``np.percentile``
    gives, to the last bit, for any replicates (ties, one, none, infinities left out) and any
    level."""
    from finbench.scoring.bootstrap import _percentile

    reps = np.array(values, float)
    finite = reps[np.isfinite(reps)]
    got = _percentile(reps, level)
    if not len(finite):
        assert all(math.isnan(v) for v in got)
        return
    tail = (1 - level) / 2 * 100
    want = np.percentile(finite, [tail, 100 - tail])
    assert np.array_equal(np.array(got), want), (got, want)


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 30), st.floats(-100, 100, allow_nan=False)),
                min_size=0, max_size=60),
       st.sampled_from(["int64", "int32", "uint8", "float64", "str"]))
def test_cluster_sums_by_code_are_those_through_sorted_values(rows, kind):
    """Each cluster's sum and count, clusters given as small codes (summed by code) or as
    other values (found through their sorted distinct values): the same arrays, bit for bit,
    the same clusters in the same order."""
    from finbench.scoring.bootstrap import _sums

    codes = np.array([c for c, _ in rows], np.int64)
    values = np.array([v for _, v in rows], float)
    clusters = codes.astype("U3") if kind == "str" else codes.astype(kind)
    _, inverse = np.unique(clusters, return_inverse=True)
    k = inverse.max() + 1 if len(inverse) else 0
    want = (np.bincount(inverse, weights=values, minlength=k), np.bincount(inverse, minlength=k))
    got = _sums(values, clusters)  # (texts sort as texts: "10" before "2")
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert got[1].dtype.kind in "iu" and len(got[1]) == len(np.unique(codes))


def _same_interval(got, want) -> bool:
    """Two intervals equal to the last bit (NaN where the other has NaN)."""
    a = np.array([got.estimate, got.lower, got.upper])
    b = np.array([want.estimate, want.lower, want.upper])
    return (np.array_equal(a, b, equal_nan=True) and got.n == want.n
            and got.clusters == want.clusters)


@settings(max_examples=150)
@given(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 5),
                          st.one_of(st.floats(-10, 10, allow_nan=False),
                                    st.sampled_from([0.0, 1.0, np.nan, np.inf]))),
                min_size=0, max_size=80),
       st.sampled_from(["int64", "str"]), st.integers(0, 3), st.sampled_from([0.9, 0.95]),
       st.booleans())
def test_cells_intervals_at_once_are_each_cells_own_bit_for_bit(rows, kind, seed, level,
                                                                  many_bins):
    """A table's cells' intervals found together (:func:`cell_mean_cis`,
    :func:`cell_skill_cis`: one pass of sums, order statistics together) are those of
    :func:`mean_ci` and :func:`skill_ci` on each cell's rows, to the last bit: empty cells,
    one cluster, infinite and missing losses, clusters as codes or as texts, and sums made
    cell by cell where cells x clusters would be too many."""
    from finbench.scoring import bootstrap as B

    clusters = np.array([c for c, _, _ in rows], np.int64)
    cell = np.array([k for _, k, _ in rows], np.int64)
    values = np.array([v for _, _, v in rows], float)
    reference = np.abs(values[::-1]).copy()
    clusters = clusters.astype("U3") if kind == "str" else clusters
    cells = [np.flatnonzero(cell == k) for k in range(6)]
    boot = {"replicates": 60, "seed": seed, "level": level, "draws": B.Draws()}
    limit = B.CELL_SUM_BINS
    B.CELL_SUM_BINS = 1 if many_bins else limit
    pairs = [(rows_, rows_[::-1]) for rows_ in cells]
    with np.errstate(all="ignore"):  # (infinite losses: both ways divide inf by inf)
        try:
            got = B.cell_mean_cis(values, cells, clusters, **boot)
            skill = B.cell_skill_cis(values, reference, pairs, clusters, **boot)
        finally:
            B.CELL_SUM_BINS = limit
        for rows_, interval in zip(cells, got, strict=True):
            assert _same_interval(interval, B.mean_ci(values[rows_], clusters[rows_], **boot))
        for (a, b), interval in zip(pairs, skill, strict=True):
            assert _same_interval(interval, B.skill_ci(values[a], reference[b], clusters[a],
                                                       **boot))
