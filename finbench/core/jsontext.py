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
    other fields with (:func:`json_array`'s ``tail``); ``keys`` in their order. ``text``: per
    row, or a dictionary array (each distinct text once, and each row's)."""

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
    """:class:`Fields` of equal-length columns, keys sorted (at least one column); when rows
    repeat (:func:`_distinct_rows`), each distinct row's text once, as a dictionary array."""
    keys = tuple(sorted(columns))
    distinct = _distinct_rows(columns, n)
    if distinct is None:
        return Fields(keys, pc.binary_join_element_wise(*_field_pieces(columns, n, ""), ""))
    first, which = distinct
    texts = pc.binary_join_element_wise(*_field_pieces(_rows_at(columns, first), len(first),
                                                       ""), "")
    return Fields(keys, pa.DictionaryArray.from_arrays(pa.array(which, pa.int32()),
                                                       _as_array(texts, len(first))))


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
    tail_text = None if tail is None else tail.text
    distinct = _distinct_rows(columns, n) if columns else None
    if distinct is not None:  # each distinct row of the columns written once, then picked
        first, which = distinct
        opened = _as_array(pc.binary_join_element_wise(
            *_field_pieces(_rows_at(columns, first), len(first), "{"), ""), len(first))
        if tail_text is None:
            return pc.take(pc.binary_join_element_wise(opened, "}", ""), which)
        if isinstance(tail_text, pa.DictionaryArray):  # the tail's distinct texts closed once
            closed = pc.binary_join_element_wise(tail_text.dictionary, "}", "")
            return pc.binary_join_element_wise(pc.take(opened, which),
                                               pc.take(closed, tail_text.indices), ",")
        return pc.binary_join_element_wise(pc.take(opened, which), ",", tail_text, "}", "")
    pieces = _field_pieces(columns, n, "{")
    if tail_text is not None:
        if isinstance(tail_text, pa.DictionaryArray):
            tail_text = pc.take(tail_text.dictionary, tail_text.indices)
        pieces += [pa.scalar("," if columns else "{", pa.string()), tail_text]
    pieces.append(pa.scalar("}", pa.string()))
    return _as_array(pc.binary_join_element_wise(*pieces, ""), n)


def _as_array(text: pa.Array | pa.Scalar, n: int) -> pa.Array:
    """``n`` rows of text: a scalar (every column held one value) repeated."""
    return pa.repeat(text, n) if isinstance(text, pa.Scalar) else text


DISTINCT_FROM = 1024  # rows from which :func:`_distinct_rows` looks for repeated rows


def _distinct_rows(columns: dict[str, object], n: int
                   ) -> tuple[np.ndarray, np.ndarray] | None:
    """(first row of each distinct combination of the columns' values, each row's combination
    number) when at most a quarter of ``n`` rows are distinct; None otherwise, when every
    column holds one value (the join writes it once), or when a column's values cannot be
    told apart cheaply (:func:`_value_codes`). Rows with the same numbers (as bits), texts or
    missing values in every column have the same JSON, so each distinct row's text is
    written once; a row group of a baseline's details: 131,072 rows, 88 distinct windows or
    853 distinct rates."""
    if n < DISTINCT_FROM:
        return None
    varying = [v for v in columns.values() if not _one_throughout(v, n)]
    if not varying or any(_unsuited(v, n) for v in varying):  # before any value is coded
        return None
    key, size = np.zeros(n, np.int64), 1
    for values in varying:
        coded = _value_codes(values, n)
        if coded is None:
            return None
        codes, count = coded
        if size * count >= 1 << 62:  # renumber the combinations so far: they fit in n
            key, uniques = pd.factorize(key)
            size = len(uniques)
        key = key * count + codes
        size *= count
    which, uniques = pd.factorize(key)  # numbered in order of first appearance
    if 4 * len(uniques) > n:
        return None
    return _first_rows(which), which


def _first_rows(which: np.ndarray) -> np.ndarray:
    """The first row of each number of ``which`` (numbered in order of first appearance, as
    ``pd.factorize`` numbers): the rows where a new highest number appears."""
    if not len(which):
        return np.empty(0, np.int64)
    return np.flatnonzero(np.r_[True, which[1:] > np.maximum.accumulate(which)[:-1]])


def _one_throughout(values, n: int) -> bool:
    """Whether a column is a scalar or a numeric array of one value (as :func:`_values`
    writes once)."""
    return (np.isscalar(values) or values is None
            or (isinstance(values, np.ndarray) and values.dtype.kind in "biuf"
                and len(values) == n > 0 and _one_value(values)))


def _unsuited(values, n: int) -> bool:
    """Whether a column rules out finding distinct rows at a glance: of ``len != n`` (its
    error is :func:`_values`'), or floats that hardly repeat (:func:`_hardly_repeat`)."""
    if len(values) != n:
        return True
    return (isinstance(values, np.ndarray) and values.dtype.kind == "f"
            and _hardly_repeat(values[_spread(n)]))


SAMPLE = 4096  # values looked at to tell whether a column's values hardly repeat


def _spread(n: int) -> np.ndarray:
    """:data:`SAMPLE` rows spread over ``n`` (all of them, when fewer)."""
    return np.arange(0, n, max(1, n // SAMPLE))[:SAMPLE]


def _hardly_repeat(sample: np.ndarray) -> bool:
    """Whether floats sampled over a column hardly repeat: its values other than NaN (missing)
    fill over a quarter of the sample and nine in ten of them differ, as bits (an interval's
    bounds, missing where it abstains): over a quarter of the rows would be distinct, and
    finding the distinct ones would cost a hash of every value for nothing. Only which way
    the same text is made depends on it."""
    present = sample[~np.isnan(sample)]
    return (4 * len(present) > len(sample)
            and 10 * len(np.unique(present.view(f"u{present.itemsize}"))) >= 9 * len(present))


_CODED_KINDS = ("string", "integer", "empty")  # objects whose equal values have equal JSON


def _value_codes(values, n: int) -> tuple[np.ndarray, int] | None:
    """(a code per row, how many codes there are) of one column of ``n`` values such that
    rows of equal code have equal JSON text: bits for floats (0.0 and -0.0 apart), values for
    integers and booleans, codes for a dictionary array's texts, and texts or integers alone
    (with missing values) for other columns; None for any other column."""
    if isinstance(values, pa.DictionaryArray):
        missing = len(values.dictionary)
        return (values.indices.fill_null(missing).to_numpy().astype(np.int64, copy=False),
                missing + 1)
    if isinstance(values, pd.Series):  # objects as numpy's, others as pandas' own array
        values = values.to_numpy() if values.dtype == object else values.array
    dtype = getattr(values, "dtype", None)
    if isinstance(values, pa.Array | pa.ChunkedArray) or dtype is None:
        return None
    if isinstance(values, np.ndarray) and dtype.kind in "bi":
        low, high = (int(v) for v in (values.min(), values.max()))
        if high - low < n:  # the values themselves, less the least
            return values.astype(np.int64) - low, high - low + 1
    elif isinstance(values, np.ndarray) and dtype.kind == "f":
        values = values.view(f"u{values.itemsize}")
    elif not ((isinstance(values, np.ndarray) and dtype.kind == "u")
              or isinstance(dtype, pd.Int64Dtype | pd.Int8Dtype | pd.BooleanDtype
                            | pd.StringDtype)
              or pd.api.types.infer_dtype(values, skipna=True) in _CODED_KINDS):
        return None  # e.g. Python objects of several kinds: True and 1 would be one code
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    return codes.astype(np.int64) + 1, len(uniques) + 1  # 0: missing


def _rows_at(columns: dict[str, object], rows: np.ndarray) -> dict[str, object]:
    """The columns' values at ``rows`` (scalars as they are)."""
    out = {}
    for key, values in columns.items():
        if np.isscalar(values) or values is None:
            out[key] = values
        elif isinstance(values, pa.Array):
            out[key] = values.take(pa.array(rows))
        elif isinstance(values, pd.Series):
            out[key] = values.iloc[rows].reset_index(drop=True)
        else:
            out[key] = values[rows]
    return out


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
    if len(array) < DISTINCT_FROM or _hardly_repeat(  # the sample alone converted
            array.take(pa.array(_spread(len(array)))).to_numpy(zero_copy_only=False)):
        return None
    encoded = pc.dictionary_encode(array)
    if 4 * len(encoded.dictionary) > len(array):
        return None
    return encoded.dictionary.cast(pa.string()), encoded.indices


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


def _text_json(series: pd.Series) -> pa.Array:
    """JSON of a column of texts (or other values), written once per distinct value: by
    Arrow's dictionary when the column holds texts and missing values only."""
    try:
        array = pa.array(series, pa.string(), from_pandas=True)
    except (pa.ArrowTypeError, pa.ArrowInvalid):  # not all text: pandas finds the distinct
        values = series.to_numpy(object)
        codes, _ = pd.factorize(values, use_na_sentinel=True)
        # of each kind apart: True, 1 and 1.0 are equal values, with texts of their own
        kinds, _ = pd.factorize(np.fromiter(map(type, values), object, len(values)))
        which, _ = pd.factorize(np.where(codes < 0, -1, codes * (kinds.max(initial=0) + 1)
                                         + kinds))
        first = _first_rows(which)
        words = np.array([json.dumps(values[i]) if codes[i] >= 0 else "null" for i in first],
                         dtype=object)
        return pa.array(words[which], pa.string())
    encoded = pc.dictionary_encode(array)
    words = pa.array([json.dumps(u) for u in encoded.dictionary.to_pylist()], pa.string())
    return pc.take(words, encoded.indices)
