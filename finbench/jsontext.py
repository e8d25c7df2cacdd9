"""Compact JSON objects built for whole columns at once (Arrow string kernels, no row loop).

Numbers are written in their shortest round-trip form (``0.1 + 0.2`` stays
``0.30000000000000004``); NaN, None and missing values become ``null``; keys are sorted.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc


def json_lines(columns: dict[str, object], n: int) -> pd.Series:
    """One JSON object per row (a text Series) from equal-length columns."""
    if n == 0:
        return pd.Series([], dtype="str")
    pieces = []
    for i, key in enumerate(sorted(columns)):
        lead = ("{" if i == 0 else ",") + json.dumps(key) + ":"
        pieces += [pa.scalar(lead, pa.string()), _values(columns[key], n)]
    pieces.append(pa.scalar("}", pa.string()))
    return pc.binary_join_element_wise(*pieces, "").to_pandas()


def _values(values, n: int) -> pa.Array:
    """JSON text of one column: numbers and booleans by Arrow's cast, text by json.dumps of
    each distinct value."""
    if np.isscalar(values) or values is None:
        values = [values] * n
    series = pd.Series(values)
    if len(series) != n:
        raise ValueError(f"column of {len(series)} values for {n} rows")
    kind = series.dtype.kind if not isinstance(series.dtype, pd.StringDtype) else "O"
    if kind in "biuf" or isinstance(series.dtype, pd.BooleanDtype | pd.Int64Dtype
                                    | pd.Int8Dtype):
        array = pa.array(series, from_pandas=True)
        if pa.types.is_floating(array.type):
            array = pc.if_else(pc.is_finite(array), array, pa.scalar(None, array.type))
        text = array.cast(pa.string())
    else:
        codes, uniques = pd.factorize(series, use_na_sentinel=True)
        words = np.array([json.dumps(u) for u in uniques] + ["null"], dtype=object)
        text = pa.array(words[codes], pa.string())
    return pc.fill_null(text, "null")
