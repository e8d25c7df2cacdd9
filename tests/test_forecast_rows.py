"""Forecast rows built column by column equal the same rows built through pandas."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from finbench.core.times import NO_TIME
from finbench.runlog.rows import FORECAST_SCHEMA, forecast_rows, latest, time_array, to_table

T0 = pd.Timestamp("2025-01-06 14:30", tz="UTC").value


def columns():
    return {
        "task_id": pa.array(["a", "b", "c"]), "model": "m", "kind": "coin",
        "p_up": np.array([0.5, np.nan, 0.25]), "lower": [-0.01, None, -0.02],
        "upper": np.array([0.01, np.nan, 0.03]), "valid": np.array([True, False, True]),
        "error": np.array([None, "schema: p_up: missing", None], object),
        "answer_status": "answered", "q_down": None, "q_flat": None, "q_up": None,
        "excluded_mass": None,
        "p_fallback": np.array(["0.5: 3 labels < min_count 20", None, None], object),
        "interval_note": pa.array([None, None, "insufficient_history: 3 past returns"]),
        "raw": pa.array(['{"p_up":0.5}', "", '{"p_up":0.25}']), "rationale": None,
        "max_input_time": np.array([T0, NO_TIME, T0 + 5]),
        "context_max_input_time": pd.Series([pd.Timestamp(T0, tz="UTC"), pd.NaT, pd.NaT]),
        "history_max_input_time": None,
        "input_sha256": ["x" * 64, "y" * 64, "z" * 64], "history_count": -1,
        "detail": pa.array(['{"p":0.5}', None, "{}"]), "latency": 0.125, "tokens": None,
    }


def test_rows_from_columns_equal_the_rows_built_through_pandas():
    got = forecast_rows(columns(), 3)
    nat = pd.NaT
    frame = pd.DataFrame({
        "task_id": ["a", "b", "c"], "model": "m", "kind": "coin",
        "p_up": [0.5, np.nan, 0.25], "lower": [-0.01, np.nan, -0.02],
        "upper": [0.01, np.nan, 0.03], "valid": [True, False, True],
        "error": [None, "schema: p_up: missing", None], "answer_status": "answered",
        "q_down": np.nan, "q_flat": np.nan, "q_up": np.nan, "excluded_mass": np.nan,
        "p_fallback": ["0.5: 3 labels < min_count 20", None, None],
        "interval_note": [None, None, "insufficient_history: 3 past returns"],
        "raw": ['{"p_up":0.5}', "", '{"p_up":0.25}'], "rationale": [None] * 3,
        "max_input_time": pd.to_datetime([T0, nat, T0 + 5], utc=True),
        "context_max_input_time": pd.to_datetime([T0, nat, nat], utc=True),
        "history_max_input_time": pd.to_datetime([nat] * 3, utc=True),
        "input_sha256": ["x" * 64, "y" * 64, "z" * 64], "history_count": [-1] * 3,
        "detail": ['{"p":0.5}', None, "{}"], "latency": 0.125,
        "tokens": pd.array([None] * 3, dtype="Int64"),
    })
    assert got.equals(to_table(frame), check_metadata=True)
    assert got.schema.equals(FORECAST_SCHEMA, check_metadata=True)
    back = got.to_pandas()
    assert str(back["tokens"].dtype) == "Int64" and back["p_up"].isna().tolist() == [
        False, True, False]


def test_latest_time_ignores_missing_times_and_is_missing_when_all_are():
    a = time_array(np.array([T0, NO_TIME, NO_TIME, T0 + 9]), 4)
    b = time_array(pd.Series(pd.to_datetime([T0 + 1, T0 + 2, None, T0], utc=True)), 4)
    assert latest(a, b).cast(pa.int64()).to_pylist() == [T0 + 1, T0 + 2, None, T0 + 9]


def test_a_missing_or_misshapen_column_is_an_error_naming_it():
    short = columns()
    del short["detail"]
    with pytest.raises(KeyError, match="lack detail"):
        forecast_rows(short, 3)
    with pytest.raises(ValueError, match="input_sha256: 2 values for 3 rows"):
        forecast_rows({**columns(), "input_sha256": ["x", "y"]}, 3)
    with pytest.raises(ValueError, match="time column of 2 values for 3 rows"):
        forecast_rows({**columns(), "max_input_time": np.array([T0, T0])}, 3)
