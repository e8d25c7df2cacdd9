"""Forecast rows as Arrow tables: the one schema of journal parts and ``forecasts.parquet``.

A forecast has two parts, scored apart: the probability ``p_up`` and the interval
``[lower, upper]``. ``p_fallback`` says (with the reason) when the probability came from a
declared fallback rule instead of the forecaster's own (a base rate below ``min_count``
gives 0.5); ``interval_note`` says why a valid row has no interval: ``not_applicable`` (the
forecaster gives none) or ``insufficient_history: ...`` (it abstained). Both are empty
otherwise. A three-class forecast (:data:`CLASS_COLUMNS`) gives ``q_down``, ``q_flat`` and
``q_up`` instead of ``p_up`` and an interval. ``answer_status`` is ``answered`` when the
forecaster answered (validly or not) and ``error`` when a call got no answer at all (a
timeout, a dropped connection, HTTP 408/409/429/5xx after the client's retries): not the
model's answer, so not counted in validity, and asked again by the next run of the directory
until its attempts run out.

Forecasters hand the run their answers as a table of this schema (:func:`forecast_rows`),
built from columns, so a batch of a million rows never passes through per-row Python
objects; rows from elsewhere (a pandas frame, JSON lines) are brought to it by
:func:`to_table`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from finbench.core.times import NO_TIME

ANSWERED, ERROR = "answered", "error"  # answer_status values
# a three-class forecast: probabilities of down, flat, up, and (native heads) the probability
# mass of answers that were none of the labels
CLASS_COLUMNS = ("q_down", "q_flat", "q_up", "excluded_mass")
TIME_COLUMNS = ("max_input_time", "context_max_input_time", "history_max_input_time")
_TEXT = pa.string()
_TIME = pa.timestamp("ns", tz="UTC")
_ARROW_SCHEMA = pa.schema([
    ("task_id", _TEXT), ("model", _TEXT), ("kind", _TEXT), ("p_up", pa.float64()),
    ("lower", pa.float64()), ("upper", pa.float64()),
    ("q_down", pa.float64()), ("q_flat", pa.float64()), ("q_up", pa.float64()),
    ("excluded_mass", pa.float64()), ("valid", pa.bool_()), ("error", _TEXT),
    ("answer_status", _TEXT), ("p_fallback", _TEXT), ("interval_note", _TEXT), ("raw", _TEXT),
    ("rationale", _TEXT),
    ("max_input_time", _TIME),
    ("context_max_input_time", _TIME), ("history_max_input_time", _TIME),
    ("input_sha256", _TEXT), ("history_count", pa.int64()), ("detail", _TEXT),
    ("latency", pa.float64()), ("tokens", pa.int64()),
])
FORECAST_COLUMNS = _ARROW_SCHEMA.names


def forecast_rows(columns: dict[str, object], n: int) -> pa.Table:
    """A table of :data:`FORECAST_SCHEMA` from ``n`` rows given column by column.

    A column is an Arrow array, a numpy array, a list, or one value for every row (text,
    number or None). Time columns are UTC nanoseconds (int64, ``NO_TIME`` for none) or
    anything pandas reads as times. Every column must be given."""
    missing = [c for c in FORECAST_COLUMNS if c not in columns]
    if missing:
        raise KeyError(f"forecast rows lack {', '.join(missing)}")
    arrays = []
    for field in _ARROW_SCHEMA:
        value = columns[field.name]
        if field.name in TIME_COLUMNS:
            arrays.append(time_array(value, n))
            continue
        if value is None or np.isscalar(value):
            array = pa.repeat(pa.scalar(value, field.type), n)
        elif isinstance(value, pa.ChunkedArray):
            array = value.combine_chunks().cast(field.type)
        elif isinstance(value, pa.Array):
            array = value.cast(field.type)
        else:
            array = pa.array(value, field.type, from_pandas=True)
        if len(array) != n:
            raise ValueError(f"forecast column {field.name}: {len(array)} values for {n} rows")
        arrays.append(array)
    return pa.Table.from_arrays(arrays, schema=FORECAST_SCHEMA)


def time_array(value, n: int) -> pa.Array:
    """UTC times as Arrow: int64 nanoseconds (:data:`~finbench.core.times.NO_TIME` for
    none), or anything pandas reads (NaT for none)."""
    if value is None:
        return pa.nulls(n, _TIME)
    if isinstance(value, np.ndarray) and value.dtype.kind == "i":
        ns = value.astype(np.int64, copy=False)
        missing = ns == NO_TIME
        if missing.all():  # e.g. a baseline that reads no bars
            return pa.nulls(len(ns), _TIME)
        array = pa.array(ns, pa.int64(), mask=missing if missing.any() else None).cast(_TIME)
    else:
        times = pd.to_datetime(pd.Series(value), utc=True).astype("datetime64[ns, UTC]")
        array = pa.array(times.reset_index(drop=True), _TIME, from_pandas=True)
    if len(array) != n:
        raise ValueError(f"time column of {len(array)} values for {n} rows")
    return array


def latest(*times: pa.Array) -> pa.Array:
    """Row-wise latest of UTC time arrays, ignoring missing times (missing when all are)."""
    ns = pc.max_element_wise(*(t.cast(pa.int64()) for t in times), skip_nulls=True)
    return ns.cast(times[0].type)


def to_table(rows: pd.DataFrame) -> pa.Table:
    """Forecast rows as an Arrow table of the journal's schema (whatever pandas dtypes the
    rows had, the same schema and pandas metadata: ``tokens`` reads back as Int64)."""
    table = pa.Table.from_pandas(rows[FORECAST_COLUMNS].reset_index(drop=True),
                                 schema=_ARROW_SCHEMA, preserve_index=False)
    return table.replace_schema_metadata(FORECAST_SCHEMA.metadata)


def typed(frame: pd.DataFrame) -> pd.DataFrame:
    """The journal's column types, whatever the source (JSON lines or Parquet)."""
    frame = frame.copy()
    for col in TIME_COLUMNS:
        if not isinstance(frame[col].dtype, pd.DatetimeTZDtype):
            frame[col] = pd.to_datetime(frame[col], utc=True, format="ISO8601")
        frame[col] = frame[col].astype("datetime64[ns, UTC]")
    for col in ("p_up", "lower", "upper", *CLASS_COLUMNS, "latency"):
        frame[col] = pd.to_numeric(frame[col]).astype(float)
    frame["valid"] = frame["valid"].astype(bool)
    frame["history_count"] = frame["history_count"].astype("int64")
    frame["tokens"] = pd.array(frame["tokens"], dtype="Int64")
    for col in ("task_id", "model", "kind", "error", "answer_status", "p_fallback", "interval_note", "raw",
                "rationale", "input_sha256", "detail"):
        frame[col] = frame[col].astype(object).where(frame[col].notna(), None)
    return frame


def _forecast_schema() -> pa.Schema:
    empty = pd.DataFrame({c: pd.Series([], dtype=object) for c in FORECAST_COLUMNS})
    return pa.Table.from_pandas(typed(empty), schema=_ARROW_SCHEMA, preserve_index=False).schema


FORECAST_SCHEMA = _forecast_schema()  # Arrow types plus the pandas metadata of typed rows
