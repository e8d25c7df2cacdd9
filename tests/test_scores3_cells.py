"""The three-class scores table (``scores3``) and the report's intervals of it, each cell's rows
grouped once, against the naive references that filter each cell's rows out of the whole
frame and let pandas reduce them (tests/reference.py): the same tables, bit for bit, on random
rows (missing values, rows of no task's ticker, a model's task given twice, rows in any order,
cells of more than numpy's 8,192-value blocks). What it saves: benchmarks/bench_scores3.py."""

from __future__ import annotations

import io
from types import SimpleNamespace

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.scoring.bootstrap import Draws
from finbench.tracks.intraday.report3 import with_intervals
from finbench.tracks.intraday.scores3 import BELOW_MIN, _class_table
from tests.reference import naive_class_intervals, naive_class_table

HORIZONS = {"MORNING": "09:30", "MIDDAY": "12:30", "CLOSE": "15:30"}
MODELS = ("class_uniform", "class_frequency", "llm3")


def config(models=MODELS, cluster="session"):
    return SimpleNamespace(
        models=[SimpleNamespace(name=m, kind=m if m.startswith("class_") else "openai")
                for m in models],
        tasks=SimpleNamespace(horizons=HORIZONS),
        report=SimpleNamespace(bootstrap_replicates=200, seed=7, level=0.9, min_n=10,
                               min_sessions=3, cluster=cluster))


def rows_of(seed: int, tickers: int, sessions: int, *, models=MODELS, nan_rate=0.02,
            no_ticker=0.0, twice=0, shuffled=False) -> pd.DataFrame:
    """Class rows as :func:`~finbench.tracks.intraday.scores3.class_rows` gives them: every
    model asked every task, random validity, answers, labels and scores (``nan_rate``: scores
    missing), ``no_ticker``: the share of rows of no task (ticker and horizon missing),
    ``twice``: that many of the first rows given again."""
    rng = np.random.default_rng(seed)
    tasks = pd.DataFrame([(f"T{t}|{s}|{h}", f"T{t}", s, h) for t in range(tickers)
                          for s in range(sessions) for h in HORIZONS],
                         columns=["task_id", "ticker", "session", "horizon"])
    rows = pd.concat([tasks.assign(model=m) for m in models], ignore_index=True)
    n = len(rows)
    rows["valid"] = rng.random(n) < 0.9
    rows["answered"] = rng.random(n) < 0.95
    rows["scored"] = rows["valid"] & (rng.integers(-1, 3, n) >= 0)
    for column in ("brier", "log_loss", "rps", "accuracy"):
        values = rng.random(n) * 2
        values[rng.random(n) < nan_rate] = np.nan
        rows[column] = values
    excluded = rng.random(n) * 0.3
    excluded[rng.random(n) < 0.3] = np.nan
    rows["excluded_mass"] = excluded
    rows["error"] = np.array([None, f"{BELOW_MIN}: 0.4 < 0.5", "timeout"],
                             dtype=object)[rng.integers(0, 3, n)]
    fallback = rng.random(n)
    fallback[rng.random(n) < 0.8] = np.nan
    rows["p_fallback"] = fallback
    lost = rng.random(n) < no_ticker
    rows.loc[lost, ["ticker", "horizon"]] = None
    if twice:
        rows = pd.concat([rows, rows.iloc[:twice]], ignore_index=True)
    if shuffled:
        rows = rows.sample(frac=1, random_state=seed).reset_index(drop=True)
    return rows


def parquet(frame: pd.DataFrame) -> bytes:
    out = io.BytesIO()
    frame.to_parquet(out)
    return out.getvalue()


def same(rows: pd.DataFrame, models=MODELS) -> pd.DataFrame:
    names = list(models)
    fast = _class_table(config(models), rows, names)
    naive = naive_class_table(config(models), rows, names)
    pd.testing.assert_frame_equal(fast, naive, check_exact=True)
    assert parquet(fast) == parquet(naive)
    return fast


@settings(max_examples=40)
@given(seed=st.integers(0, 2**32 - 1), tickers=st.integers(1, 6), sessions=st.integers(1, 5),
       models=st.sampled_from([MODELS, MODELS[:1], MODELS[1:], ("llm3",)]),
       nan_rate=st.sampled_from([0.0, 0.05, 1.0]), no_ticker=st.sampled_from([0.0, 0.1]),
       twice=st.integers(0, 4), shuffled=st.booleans())
def test_each_cell_is_the_naive_filters_cell_bit_for_bit(seed, tickers, sessions, models,
                                                        nan_rate, no_ticker, twice, shuffled):
    same(rows_of(seed, tickers, sessions, models=models, nan_rate=nan_rate,
                 no_ticker=no_ticker, twice=twice, shuffled=shuffled), models)


def test_a_reference_given_a_task_twice_counts_it_twice_as_the_filters_do():
    rows = rows_of(3, 2, 2, nan_rate=0.0)
    rows["valid"] = rows["scored"] = True
    first = rows.index[rows["model"] == "class_uniform"][0]
    table = same(pd.concat([rows, rows.loc[[first]]], ignore_index=True))
    overall = table[table["slice_kind"] == "overall"].set_index("model")
    # the task stands once among llm3's rows and twice among the reference's
    assert overall.loc["llm3", "bss3_class_uniform_n"] == overall.loc["llm3", "n"] == 12
    assert overall.loc["class_uniform", "n"] == 13


def test_rows_of_no_task_count_overall_and_in_no_other_slice():
    rows = rows_of(9, 2, 2, no_ticker=1.0)  # (an edited forecast table: no task matches)
    table = same(rows)
    assert set(table["slice_kind"]) == {"overall"}
    assert table.set_index("model").loc["llm3", "n_tasks"] == 12


def test_cells_larger_than_numpys_blocks_sum_as_pandas_does():
    # 9,000 rows a model overall: numpy sums in blocks of 8,192 values at most
    same(rows_of(11, 2, 1500, nan_rate=0.01, shuffled=True))


@settings(max_examples=25)
@given(seed=st.integers(0, 2**32 - 1), tickers=st.integers(1, 4), sessions=st.integers(1, 6),
       models=st.sampled_from([MODELS, MODELS[1:], ("llm3",)]),
       cluster=st.sampled_from(["session", "session_ticker"]), no_ticker=st.sampled_from(
           [0.0, 0.1]), shuffled=st.booleans())
def test_the_reports_intervals_are_the_naive_filters_bit_for_bit(seed, tickers, sessions,
                                                                models, cluster, no_ticker,
                                                                shuffled):
    # (a run's rows hold a task once a model: the report reads no other)
    rows = rows_of(seed, tickers, sessions, models=models, nan_rate=0.0, no_ticker=no_ticker,
                   shuffled=shuffled)
    table = _class_table(config(models), rows, list(models))
    scored = rows[rows["scored"]].reset_index(drop=True)  # as the report reads them
    fast = with_intervals(table, scored, SimpleNamespace(config=config(models, cluster),
                                                         draws=Draws()))
    naive = naive_class_intervals(table, scored, SimpleNamespace(config=config(models, cluster),
                                                                 draws=Draws()))
    pd.testing.assert_frame_equal(fast, naive, check_exact=True)
    assert parquet(fast) == parquet(naive)

