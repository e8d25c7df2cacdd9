"""The event track's scores on hand-computed fixtures (exact figures from docs/spec.md §11.6),
through real runs of real stores."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.audit import audit_run
from finbench.core.errors import LookaheadError
from finbench.runner import run
from finbench.scoring.bootstrap import cluster_weights
from finbench.tracks.events.config import EventScoresConfig
from finbench.tracks.events.score_rows import (
    IN_SAMPLE,
    brier_interval,
    brier_parts,
    effective_events,
    within,
)
from tests.event_helpers import constants, event_config, make_store, market


def _run(tmp_path, markets, models, **kw):
    store = make_store(tmp_path / "data", markets)
    out = run(event_config(tmp_path, store, models, **kw), tmp_path / "run", echo=lambda *_: None)
    scores = pd.read_parquet(out / "scores.parquet")
    skill = pd.read_parquet(out / "skill.parquet")
    return out, scores[scores["slice_kind"] == "overall"].set_index("model"), skill[
        skill["slice_kind"] == "overall"]


def test_one_yes_in_a_hundred_constants_and_skill_against_one_percent(tmp_path):
    markets = [market(i, "YES" if i == 7 else "NO", resolved=f"2024-03-{1 + i % 28:02d}T12:00Z")
               for i in range(100)]
    out, scores, skill = _run(tmp_path, markets, constants(0.0, 0.01, 0.1, 0.5))
    assert scores.loc[["c0", "c0.01", "c0.1", "c0.5"], "brier"].round(4).tolist() == [
        0.0100, 0.0099, 0.0180, 0.2500]
    vs = skill[skill["reference"] == "c0.01"].set_index("model")
    assert vs.loc[["c0", "c0.1", "c0.5"], "bss"].round(4).tolist() == [-0.0101, -0.8182, -24.2525]
    assert (vs["n"] == 100).all() and (vs["positives"] == 1).all()
    assert vs.loc["c0.1", "brier_model"] == pytest.approx(0.018)
    assert vs.loc["c0.1", "brier_reference"] == pytest.approx(0.0099)
    row = scores.loc["c0.1"]  # the YES and NO penalties, each summed on its own
    assert row["yes_penalty"] == pytest.approx(0.81) and row["no_penalty"] == pytest.approx(0.99)
    assert row["yes_penalty"] + row["no_penalty"] == pytest.approx(row["brier"] * 100)
    assert audit_run(out) == []


def test_frozen_reference_beside_the_in_sample_frequency(tmp_path):
    train = [market(i, "YES" if i < 40 else "NO", resolved="2024-01-15T12:00Z")
             for i in range(200)]
    later = [market(200 + i, "YES" if i < 30 else "NO", resolved="2024-04-10T12:00Z")
             for i in range(100)]
    models = ('[[models]]\nname = "frozen"\nkind = "frozen_frequency"\n'
              'train_from = 2024-01-01\ntrain_to = 2024-01-31\n')
    out, scores, skill = _run(tmp_path, train + later, models)
    assert scores.loc["frozen", "brier"] == pytest.approx(0.22)
    assert scores.loc["frozen", "n"] == 100 and scores.loc["frozen", "positives"] == 30
    assert scores.loc[IN_SAMPLE, "brier"] == pytest.approx(0.21)
    assert "in_sample" in scores.loc[IN_SAMPLE, "kind"] and "not a forecast" in scores.loc[
        IN_SAMPLE, "kind"]
    assert IN_SAMPLE not in set(skill["reference"]) | set(skill["model"])
    rows = pd.read_parquet(out / "forecasts.parquet")
    assert (rows["history_count"] == 200).all()  # what it was fitted on, recorded per row


def test_a_window_without_yes_stays_in_and_skill_against_zero_is_undefined(tmp_path):
    markets = [market(i, "NO", resolved=f"2024-05-{1 + i:02d}T12:00Z") for i in range(20)]
    out, scores, skill = _run(tmp_path, markets, constants(0.0, 0.01))
    assert scores.loc["c0", "brier"] == 0.0
    assert scores.loc["c0.01", "brier"] == pytest.approx(0.0001)
    assert scores.loc[["c0", "c0.01"], "no_positive_cases"].all()
    vs = skill[skill["reference"] == "c0"].set_index("model").loc["c0.01"]
    assert np.isnan(vs["bss"]) and vs["bss_undefined"] == "reference scores 0"
    assert vs["brier_model"] == pytest.approx(0.0001) and vs["brier_reference"] == 0.0
    assert vs["n"] == 20


def test_a_void_market_is_excluded_by_reason_never_scored_as_no(tmp_path):
    markets = [market(0, "void", resolved="2024-03-05T12:00Z"),
               market(1, "NO", resolved="2024-03-06T12:00Z"),
               market(2, "YES", resolved="2024-03-07T12:00Z")]
    out, scores, _ = _run(tmp_path, markets, constants(0.3))
    assert scores.loc["c0.3", "n"] == 2
    exclusions = pd.read_csv(out / "exclusions.csv").set_index("reason")["tasks"]
    assert exclusions.to_dict() == {"ok": 2, "void": 1}
    rows = pd.read_parquet(out / "rows.parquet")
    assert "q0000" not in set(rows["task_id"].str.split("|").str[0])
    labels = pd.read_parquet(out / "labels.parquet").set_index("market_id")
    assert labels.loc["q0000", "status"] == "void" and labels.loc["q0000", "y"] == -1


def test_a_frozen_frequency_asked_before_its_window_resolved_is_refused(tmp_path):
    markets = [market(i, "NO", resolved="2024-03-20T12:00Z") for i in range(5)]
    models = ('[[models]]\nname = "frozen"\nkind = "frozen_frequency"\n'
              'train_from = 2024-03-01\ntrain_to = 2024-03-31\n')
    with pytest.raises(LookaheadError, match="before the training window's last resolution") \
            as refused:
        _run(tmp_path, markets, models)
    # found from the config and the cutoffs, in the label pass, before any post is retrieved
    frames = [entry.name for entry in refused.traceback]
    assert "_check_frozen" in frames and "_retrieve_all" not in frames
    assert "5 task(s) are" in str(refused.value)


def test_brier_parts_and_effective_events_by_hand():
    parts = brier_parts(np.array([0.1, 0.1, 0.1]), np.array([1.0, 0.0, 0.0]))
    assert parts["yes_penalty"] == pytest.approx(0.81)
    assert parts["no_penalty"] == pytest.approx(0.02)
    assert parts["brier"] == pytest.approx(0.83 / 3)
    assert effective_events(np.array(["a", "a", "b", "b"])) == 2.0
    assert effective_events(np.array(["a", "a", "a", "b"])) == pytest.approx(16 / 10)
    one_group = brier_interval(np.ones(4), np.array(["a"] * 4), EventScoresConfig(
        bootstrap_replicates=100, seed=1))
    assert np.isnan(one_group).all()  # one group: no interval


def test_the_bootstrap_draws_whole_groups(tmp_path):
    """Two groups, one all errors 1 and one all 0: a replicate holds whole groups, so every
    replicate mean is 0, 1 or a mix weighted by whole group sizes (never a row-level mix)."""
    errors = np.array([1.0, 1.0, 1.0, 0.0])
    groups = np.array(["a", "a", "a", "b"])
    lo, hi = brier_interval(errors, groups, EventScoresConfig(seed=3, level=0.999))
    assert lo == 0.0 and hi == 1.0  # all-b and all-a replicates occur
    weights = cluster_weights(2, replicates=2000, seed=3)  # the draws behind that interval
    means = (weights @ np.array([3.0, 0.0])) / (weights @ np.array([3.0, 1.0]))
    assert set(np.round(means, 12)) == {0.0, 0.75, 1.0}  # a mix by whole groups only


@settings(max_examples=6)
@given(seed=st.integers(0, 2**31 - 1))
def test_slices_of_paired_rows_equal_the_naive_filter_and_merge(seed):
    """Random score rows (models that skip markets, errors, invalid answers, markets of one
    group or many, a slice with no rows): each model's scores and each pair's skill per slice,
    picked from rows paired once, equal the rows of the slice filtered and merged anew; with
    the bootstrap's draws kept across every call (as a run's tables keep them), bit for bit
    what each call drawing afresh gives."""
    from finbench.scoring.bootstrap import Draws
    from finbench.tracks.events.score_rows import slices
    from finbench.tracks.events.scores import slice_score_rows, slice_skill_rows
    from tests.reference import naive_event_score_row, naive_event_skill_row

    rng = np.random.default_rng(seed)
    n_markets = int(rng.integers(1, 40))
    market = pd.DataFrame({
        "task_id": [f"q{i:03d}" for i in range(n_markets)],
        "y": rng.integers(0, 2, n_markets).astype(float),
        "category": rng.choice(["crypto", "sports", "politics"], n_markets),
        "event_group": rng.choice([f"g{k}" for k in range(int(rng.integers(1, 6)))], n_markets),
        "retrieval_relevant": rng.random(n_markets) < 0.3})
    parts = []
    for model in ("a", "b", "c"):
        asked = market[rng.random(n_markets) < 0.85]  # a model may skip a market
        status = rng.choice(["answered", "answered", "answered", "error"], len(asked))
        valid = (status == "answered") & (rng.random(len(asked)) < 0.9)
        p = np.where(valid, rng.random(len(asked)), np.nan)
        parts.append(asked.assign(model=model, p_up=p, valid=valid, answer_status=status))
    rows = pd.concat(parts, ignore_index=True).sample(frac=1.0, random_state=seed % 1000)
    rows = rows.reset_index(drop=True)
    ok = rows["valid"].to_numpy(bool)
    p, y = rows["p_up"].to_numpy(float), rows["y"].to_numpy(float)
    q = np.clip(p, 1e-6, 1 - 1e-6)
    rows = rows.assign(scored=ok, brier=np.where(ok, (p - y) ** 2, np.nan),
                       log_loss=np.where(ok, -(y * np.log(q) + (1 - y) * np.log1p(-q)), np.nan))
    for column in ("task_id", "model", "category", "event_group", "answer_status"):
        rows[column] = rows[column].astype("string[pyarrow]")  # as read from Parquet
    s = EventScoresConfig(bootstrap_replicates=200, min_group_cases=2)
    cuts = slices(rows, s.min_group_cases) + [("category", "none", np.zeros(0, np.int64))]

    def same(got: dict, want: dict) -> None:
        # bootstrap endpoints: a product over the draws against sums written out, within
        # a few ULP; everything else exactly
        for key, value in want.items():
            close = key.endswith(("_lo", "_hi")) and value == pytest.approx(got[key], rel=1e-12)
            assert (got[key] == value) or close or (np.isnan(got[key]) and np.isnan(value)), (
                key, got, want)

    def identical(kept: list[dict], afresh: list[dict]) -> None:  # bit for bit, NaN too
        assert [{k: (v if v == v else "nan") for k, v in r.items()} for r in kept] == [
            {k: (v if v == v else "nan") for k, v in r.items()} for r in afresh]

    draws = Draws()  # kept across every model, pair and slice, as a run's tables keep them
    for name in ("a", "b", "c"):
        got_rows = slice_score_rows(rows, name, "k", cuts, s, draws)
        identical(got_rows, slice_score_rows(rows, name, "k", cuts, s))
        for got, cut in zip(got_rows, cuts, strict=True):
            same(got, naive_event_score_row(rows, name, cut, s))
        for ref in ("a", "b", "c"):
            if ref != name:
                got_rows = slice_skill_rows(rows, name, ref, cuts, s, draws)
                identical(got_rows, slice_skill_rows(rows, name, ref, cuts, s))
                for got, cut in zip(got_rows, cuts, strict=True):
                    same(got, naive_event_skill_row(rows, name, ref, cut, s))


@settings(max_examples=200)
@given(st.lists(st.integers(0, 40), max_size=60), st.sets(st.integers(0, 45), max_size=30))
def test_a_slices_positions_pick_the_rows_its_mask_picks(at, rows):
    """A slice's rows as positions (ascending) pick, among a model's rows or pairs ``at``
    (non-decreasing, a row twice where its market was paired twice), what a mask of the
    slice's rows picks."""
    at, rows = np.sort(np.array(at, np.int64)), np.array(sorted(rows), np.int64)
    mask = np.zeros(64, bool)
    mask[rows] = True
    assert within(at, rows).tolist() == np.flatnonzero(mask[at]).tolist()
