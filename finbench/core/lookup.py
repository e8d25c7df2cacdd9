"""Row look-ups by text key through Arrow's hash kernels (pandas would re-infer string
indexes and copy), for joining forecast rows to tasks, labels and history."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc


def arrow_text(column) -> pa.Array:
    """A text column (Series, list or array) as one contiguous Arrow string array."""
    if isinstance(column, pa.ChunkedArray | pa.Array):
        array = column.cast(pa.string())
    else:
        array = pa.array(column, pa.string())
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def encoded(column) -> tuple[np.ndarray, np.ndarray]:
    """(distinct texts, code of each row) of a text column, by Arrow's hash kernel."""
    encoded = arrow_text(column).dictionary_encode()
    return (np.asarray(encoded.dictionary.to_pylist(), dtype=str),
            encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64))


def same_values(a: pa.Array, b: pa.Array) -> np.ndarray:
    """Per element: equal Arrow values (``b`` read as ``a``'s type), a missing value matching
    only a missing one."""
    if a.type != b.type:
        b = b.cast(a.type)
    equal = pc.fill_null(pc.equal(a, b), False)
    return pc.or_(equal, pc.and_(pc.is_null(a), pc.is_null(b))).to_numpy(zero_copy_only=False)


def repeated(value, n: int) -> np.ndarray:
    """An object array of ``n`` references to ``value`` (``np.full`` makes a new text object
    per element from a text: 124,500 of them for a row group of baselines' notes)."""
    out = np.empty(n, dtype=object)
    out[:] = value
    return out


def positions(keys, index) -> np.ndarray:
    """Row of ``index`` holding each key (the first if it repeats), -1 when absent."""
    at = pc.index_in(arrow_text(keys), value_set=arrow_text(index))
    return pc.fill_null(at, -1).to_numpy(zero_copy_only=False).astype(np.int64)


def copies_of(keys: pa.Array, index: pa.Array) -> int:
    """How many times ``keys`` is ``index`` laid end to end (0: it is not, or ``index`` is
    empty): rows of several models each in the tasks' order."""
    n = len(index)
    if not n or len(keys) % n:
        return 0
    copies = len(keys) // n
    return copies if all(keys.slice(i * n, n).equals(index) for i in range(copies)) else 0


def laid_positions(keys, index, copies: int | None = None) -> np.ndarray:
    """:func:`positions` of ``keys`` in ``index`` (its keys unique), found by comparison where
    ``keys`` is ``index`` laid end to end (each model's rows in the tasks' order, as a run
    writes them: no look-up), else looked up; ``copies``: :func:`copies_of` them, when the
    caller has it."""
    keys, index = arrow_text(keys), arrow_text(index)
    copies = copies_of(keys, index) if copies is None else copies
    return np.tile(np.arange(len(index), dtype=np.int64), copies) if copies \
        else positions(keys, index)


def repeated_column(column: pd.Series, copies: int) -> pd.Series:
    """``column`` laid end to end ``copies`` times, as :func:`take` at those rows gives it
    (its dtype, a new index)."""
    if column.dtype.kind == "f":
        return pd.Series(np.tile(column.to_numpy(), copies), dtype=column.dtype)
    return pd.concat([column.reset_index(drop=True)] * copies, ignore_index=True)


def take(column: pd.Series, at: np.ndarray) -> pd.Series:
    """``column`` at rows ``at`` (missing where ``at`` is -1), keeping its dtype."""
    if len(at) == len(column) and np.array_equal(at, np.arange(len(at))):
        return column.reset_index(drop=True)  # rows already in place (one comparison)
    taken = pa.array(column, from_pandas=True).take(pa.array(at, mask=at < 0))
    if column.dtype.kind == "f":
        return pd.Series(taken.to_numpy(zero_copy_only=False), dtype=column.dtype)
    out = taken.to_pandas()
    return out if isinstance(column.dtype, pd.StringDtype) else out.astype(column.dtype)


def groups(code: np.ndarray, n: int) -> list[np.ndarray]:
    """Row numbers holding each code ``0 .. n-1``, each group in row order (other codes,
    e.g. -1, belong to no group)."""
    code = np.asarray(code)
    if n < 2**15 and code.dtype.itemsize > 2:  # (a stable sort of 16-bit codes is a radix
        # sort, 6x faster; codes of no group become -1 first, so none wraps into a group)
        code = np.where((code >= 0) & (code < n), code, -1).astype(np.int16)
    order = np.argsort(code, kind="stable")
    cuts = np.searchsorted(code[order], np.arange(n + 1))
    return [order[cuts[i]:cuts[i + 1]] for i in range(n)]


def spans(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The positions ``left[i] .. right[i] - 1`` of every span, one span after another: the
    rows each of several keys finds in a sorted array (``searchsorted`` left and right)."""
    counts = right - left
    return np.repeat(left - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
