"""The canonical JSON text of a run's score tables, whose SHA-256 is its score digest
(docs/spec.md, "Versions and digests"): ``{"NAME":{"columns":[...],"rows":[[...],...]},...}``
with the tables sorted by name, each table's columns and rows in file order, floats rounded
to :data:`DIGITS` decimal places as Python's ``round`` gives them (then written by ``repr``),
NaN and missing as null, an infinity as the text ``"inf"`` or ``"-inf"``, texts as ``json``
escapes them (ASCII), any other value as the text ``str`` makes of it: the text
``json.dumps`` makes of those values, byte for byte.

Written a column at a time, in pieces (:func:`canonical_pieces`), so that a digest never
holds the whole text: a year's per-row scores (1.49M rows of 35 columns) as Python values,
one at a time, took 76 s of CPU and 5.3 GB. Each distinct value of a column is written once;
a float is rounded by numpy where that is provably Python's rounding, else by Python.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from json.encoder import encode_basestring_ascii
from pathlib import Path

import numpy as np
import pyarrow as pa

DIGITS = 12  # decimal places a float keeps in the digest (a few ULP apart: the same digest)
BATCH_ROWS = 1 << 18  # rows written at once
_SCALE = 10.0 ** DIGITS
_EXACT = 2.0 ** 50  # |value * 10**DIGITS| below this: numpy's rounding is checked exact


def canonical_pieces(paths: dict[str, Path]) -> Iterator[str]:
    """The canonical text of the Parquet tables ``paths`` (name: file), in pieces whose join
    is the text."""
    import pyarrow.parquet as pq

    yield "{"
    for number, name in enumerate(sorted(paths)):
        with pq.ParquetFile(paths[name]) as file:
            names = file.schema_arrow.names
            yield (f"{',' if number else ''}{encode_basestring_ascii(name)}:"
                   f"{{\"columns\":{json.dumps(names, separators=(',', ':'))},\"rows\":[")
            first = True
            for batch in file.iter_batches(batch_size=BATCH_ROWS, use_threads=False):
                if batch.num_rows:
                    if not first:
                        yield ","
                    yield rows_text([column_texts(batch.column(i)) for i in range(len(names))],
                                    batch.num_rows)
                    first = False
            yield "]}"
    yield "}"


def rows_text(columns: list[list[str]], count: int) -> str:
    """``count`` rows, each a JSON list of the columns' texts at its row, comma-separated."""
    if not columns:
        return ",".join(["[]"] * count)
    return "[" + "],[".join(map(",".join, zip(*columns, strict=True))) + "]"


def column_texts(column: pa.Array) -> list[str]:
    """Each value of ``column`` as the canonical text writes it."""
    kind = column.type
    if pa.types.is_floating(kind):
        return _float_texts(column.to_numpy(zero_copy_only=False).astype(np.float64))
    if pa.types.is_boolean(kind):
        values = np.asarray(column.fill_null(False).to_numpy(zero_copy_only=False), bool)
        texts = np.where(values, "true", "false").astype(object)
    elif pa.types.is_integer(kind):
        texts = _each_distinct(column.fill_null(0).to_numpy(zero_copy_only=False),
                               int.__repr__)  # (in its own type: a uint64 kept whole)
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        encoded = column.dictionary_encode()
        words = np.array(list(map(encode_basestring_ascii, encoded.dictionary.to_pylist())),
                         object)
        texts = (words[encoded.indices.fill_null(0).to_numpy(zero_copy_only=False)]
                 if len(words) else np.full(len(column), "null", object))
    else:  # any other type: its values one at a time, as the plain form gives them
        return [_json(_plain(value)) for value in column.to_pylist()]
    if column.null_count:
        texts[np.asarray(column.is_null().to_numpy(zero_copy_only=False), bool)] = "null"
    return texts.tolist()


def _float_texts(values: np.ndarray) -> list[str]:
    """``repr(round(v, DIGITS) + 0.0)`` of each value, null for a NaN, the text ``"inf"``
    or ``"-inf"`` for an infinity (JSON has no such numbers: a Kelly growth of a probability
    of 0 on the side that came is -inf)."""
    finite = np.isfinite(values)
    rounded = np.where(finite, rounded_like_python(np.where(finite, values, 0.0)), 0.0)
    distinct, at = np.unique(rounded.view(np.int64), return_inverse=True)  # bit for bit
    texts = np.array(list(map(float.__repr__, distinct.view(np.float64).tolist())), object)
    texts = texts[at.ravel()]
    if not finite.all():
        texts[np.isnan(values)] = "null"
        texts[values == np.inf] = '"inf"'
        texts[values == -np.inf] = '"-inf"'
    return texts.tolist()


def rounded_like_python(values: np.ndarray) -> np.ndarray:
    """``round(v, DIGITS) + 0.0`` of each finite value, as Python computes it: the double
    nearest the value's decimal expansion rounded to DIGITS places (half to even).

    numpy gives it where that is provable: ``p = v * 10**DIGITS`` is the double nearest the
    exact product, and below ``2**50`` every half-integer is a double, which that rounding
    cannot cross; so when ``p`` lies more than an ulp from any half-integer, the exact
    product and ``p`` round to the same integer ``k``, and ``k / 10**DIGITS``, correctly
    rounded, is the double nearest that decimal. Every other value (at or next to a tie, or
    large) is rounded by Python."""
    with np.errstate(over="ignore", invalid="ignore"):  # (a large value: Python's)
        scaled = values * _SCALE
        safe = (np.abs(scaled) < _EXACT) & (
            np.abs(scaled - np.floor(scaled) - 0.5) > np.spacing(np.abs(scaled)))
        out = np.rint(scaled) / _SCALE + 0.0
    if not safe.all():
        rest = np.flatnonzero(~safe)
        out[rest] = [round(v, DIGITS) + 0.0 for v in values[rest].tolist()]
    return out


def _each_distinct(values: np.ndarray, write) -> np.ndarray:
    """``write(v)`` of each of ``values`` as an object array, each distinct value written
    once."""
    distinct, at = np.unique(values, return_inverse=True)
    texts = np.array([write(v) for v in distinct.tolist()], object)
    return texts[at.ravel()] if len(values) else np.empty(0, object)


def _plain(value):
    """A value of another type as the canonical text holds it (float as
    :func:`_float_texts` writes it; None, bool, int and text as they are; anything else as
    ``str`` of it)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return round(value, DIGITS) + 0.0
    if value is None or isinstance(value, bool | int | str):
        return value
    return str(value)


def _json(value) -> str:
    return json.dumps(value, allow_nan=False)
