"""Compact JSON objects built for whole columns at once (Arrow string kernels, no row loop).

Numbers are written in their shortest round-trip form (``0.1 + 0.2`` stays
``0.30000000000000004``); NaN, None and missing values become ``null``; keys are sorted.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc


class Fields(NamedTuple):
    """The JSON text of some fields of each row (``"a":1,"b":"x"``), to close objects of
    other fields with (:func:`json_array`'s ``tail``); ``keys`` in their order."""

    keys: tuple[str, ...]
    text: pa.Array | pa.Scalar


def _field_pieces(columns: dict[str, object], n: int, lead: str) -> list:
    """What joins into ``"a":1,"b":"x"`` per row, keys sorted, ``lead`` before the first."""
    pieces = []
    for i, key in enumerate(sorted(columns)):
        pieces += [pa.scalar(("," if i else lead) + json.dumps(key) + ":", pa.string()),
                   _values(columns[key], n)]
    return pieces


def json_fields(columns: dict[str, object], n: int) -> Fields:
    """:class:`Fields` of equal-length columns, keys sorted (at least one column)."""
    return Fields(tuple(sorted(columns)),
                  pc.binary_join_element_wise(*_field_pieces(columns, n, ""), ""))


def json_array(columns: dict[str, object], n: int, tail: Fields | None = None) -> pa.Array:
    """One JSON object per row (an Arrow string array) from equal-length columns, keys
    sorted; ``tail``: further fields (made once for several such arrays), whose keys all sort
    after these columns'."""
    if n == 0:
        return pa.array([], pa.string())
    if tail is not None and columns and max(columns) >= tail.keys[0]:
        raise ValueError(f"tail keys {tail.keys} do not all sort after {sorted(columns)}")
    if tail is None and len(columns) == 1:  # one number: each distinct object written once
        ((key, values),) = columns.items()
        coded = _repeated_numbers(values, n)
        if coded is not None:
            texts, codes = coded
            lead = "{" + json.dumps(key) + ":"
            objects = pc.binary_join_element_wise(lead, texts, "}", "")
            return pc.fill_null(pc.take(objects, codes), lead + "null}")
    pieces = _field_pieces(columns, n, "{")
    if tail is not None:
        pieces += [pa.scalar("," if columns else "{", pa.string()), tail.text]
    pieces.append(pa.scalar("}", pa.string()))
    text = pc.binary_join_element_wise(*pieces, "")
    if isinstance(text, pa.Scalar):  # every column held one value
        text = pa.repeat(text, n)
    return text


def _values(values, n: int) -> pa.Array | pa.Scalar:
    """JSON text of one column: numbers and booleans by Arrow's cast, text by json.dumps of
    each distinct value (of a dictionary-encoded column: of each text of its dictionary). A
    scalar, or a column holding one number throughout, is written once (a scalar the join
    repeats)."""
    if np.isscalar(values) or values is None:
        return _column_text([values], 1)[0]
    if isinstance(values, pa.DictionaryArray):  # codes and their texts: each text written once
        if len(values) != n:
            raise ValueError(f"column of {len(values)} values for {n} rows")
        words = pa.array([json.dumps(u) for u in values.dictionary.to_pylist()], pa.string())
        return pc.fill_null(pc.take(words, values.indices), "null")
    if isinstance(values, np.ndarray) and values.dtype.kind in "biuf" and len(values) == n > 0:
        if _one_value(values):
            return _column_text(values[:1], 1)[0]
    return _column_text(values, n)


def _column_text(values, n: int) -> pa.Array:
    series = pd.Series(values)
    if len(series) != n:
        raise ValueError(f"column of {len(series)} values for {n} rows")
    kind = series.dtype.kind if not isinstance(series.dtype, pd.StringDtype) else "O"
    if kind in "biuf" or isinstance(series.dtype, pd.BooleanDtype | pd.Int64Dtype
                                    | pd.Int8Dtype):
        array = pa.array(series, from_pandas=True)
        if pa.types.is_floating(array.type):
            array = pc.if_else(pc.is_finite(array), array, pa.scalar(None, array.type))
            text = _number_text(array)
        else:
            text = array.cast(pa.string())
    else:
        text = _text_json(series)
    return pc.fill_null(text, "null")


def _number_text(array: pa.Array) -> pa.Array:
    """Arrow's text of floats (the shortest that reads back the same), made once per distinct
    value when values repeat (a rate of k labels in n: a few thousand values in a year's
    tasks): the cast costs far more than finding the distinct values. Distinct means the same
    bits, so 0.0 and -0.0 keep their own texts."""
    coded = _distinct_texts(array)
    if coded is not None:
        return pc.take(*coded)
    return array.cast(pa.string())


def _distinct_texts(array: pa.Array) -> tuple[pa.Array, pa.Array] | None:
    """(text of each distinct value, each row's code: null where the row is) of floats whose
    values repeat (at most a quarter distinct), else None."""
    if len(array) >= 1024 and not _all_apart(array):
        encoded = pc.dictionary_encode(array)
        if 4 * len(encoded.dictionary) <= len(array):
            return encoded.dictionary.cast(pa.string()), encoded.indices
    return None


def _one_value(values: np.ndarray) -> bool:
    """Whether a (non-empty) numeric column holds one value throughout, as bits: 0.0 and -0.0
    differ."""
    bits = values.view(f"u{values.itemsize}")
    return bool((bits == bits[0]).all())


def _repeated_numbers(values, n: int) -> tuple[pa.Array, pa.Array] | None:
    """:func:`_distinct_texts` of a float column (numpy) given to :func:`json_array` whose
    values repeat but are not one value throughout (written once by the join); else None."""
    if not (isinstance(values, np.ndarray) and values.dtype.kind == "f" and len(values) == n
            and n >= 1024):
        return None
    if _one_value(values):
        return None
    array = pa.array(values)
    return _distinct_texts(pc.if_else(pc.is_finite(array), array, pa.scalar(None, array.type)))


def _all_apart(array: pa.Array, size: int = 1024) -> bool:
    """Whether ``size`` values spread over ``array`` are all distinct (as bits): then its
    values hardly repeat (an interval's bounds), and finding the distinct ones would cost a
    hash of every value for nothing. Only which way the same text is made depends on it."""
    at = np.arange(0, len(array), len(array) // size)[:size]
    values = array.take(pa.array(at)).to_numpy(zero_copy_only=False)  # the sample alone
    return len(np.unique(values.view(f"u{values.itemsize}"))) == len(values)


def _text_json(series: pd.Series) -> pa.Array:
    """JSON of a column of texts (or other values), written once per distinct value: by
    Arrow's dictionary when the column holds texts and missing values only."""
    try:
        array = pa.array(series, pa.string(), from_pandas=True)
    except (pa.ArrowTypeError, pa.ArrowInvalid):  # not all text: pandas finds the distinct
        codes, uniques = pd.factorize(series, use_na_sentinel=True)
        words = np.array([json.dumps(u) for u in uniques] + ["null"], dtype=object)
        return pa.array(words[codes], pa.string())
    encoded = pc.dictionary_encode(array)
    words = pa.array([json.dumps(u) for u in encoded.dictionary.to_pylist()], pa.string())
    return pc.take(words, encoded.indices)
