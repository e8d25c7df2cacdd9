"""Comparing score tables computed again with the stored ones, for every track's audit:
frames by key (:func:`frame_problems`), a file's bytes against its text written again
(:func:`first_difference`).

Numbers are compared within a relative 1e-9 (and 1e-12 absolute): log loss and Kelly growth
pass through libm, whose last bits differ between machines, and a mean over millions of rows
carries that; any edit of a stored score changes it by far more. Counts, names and flags are
compared exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

RTOL, ATOL = 1e-9, 1e-12
SHOWN = 20


NEWLINE = b"\n"


def first_difference(path: Path, chunks, what: str) -> list[str]:
    """Where the file ``path`` first differs from the bytes ``chunks`` give (a line number
    from 1, the header's included), or nothing."""
    line = 1
    with open(path, "rb") as fh:
        for chunk in chunks:
            have = fh.read(len(chunk))
            if have != chunk:
                at = next((i for i, (x, y) in enumerate(zip(have, chunk, strict=False))
                           if x != y),
                          min(len(have), len(chunk)))
                return [f"{what}: line {line + chunk[:at].count(NEWLINE)} differs"]
            line += chunk.count(NEWLINE)
        if fh.read(1):
            return [f"{what}: it holds more lines than that, from line {line}"]
    return []


def frame_problems(have: pd.DataFrame, want: pd.DataFrame, what: str, *, key: list[str]
                    ) -> list[str]:
    """Cells of ``have`` that differ from ``want``, matched on ``key``; rows one has and the
    other lacks; columns missing."""
    problems = [f"{what}: column {c} is missing" for c in want.columns if c not in have]
    if any(c not in have for c in key):  # rows cannot be matched: the columns say it all
        return problems
    have_keys = pd.MultiIndex.from_frame(have[key].astype(str))
    want_keys = pd.MultiIndex.from_frame(want[key].astype(str))
    problems += [f"{what}: row {'/'.join(k)} should not be there" for k in
                 have_keys.difference(want_keys)]
    problems += [f"{what}: row {'/'.join(k)} is missing" for k in want_keys.difference(have_keys)]
    have = have.set_axis(have_keys).loc[~have_keys.duplicated()]
    want = want.set_axis(want_keys).loc[~want_keys.duplicated()]
    common = want.index.intersection(have.index)
    a, b = have.loc[common], want.loc[common]
    for col in [c for c in want.columns if c in have.columns]:
        x, y = a[col], b[col]
        if x.dtype.kind in "fiu" and y.dtype.kind in "fiu":
            u, v = x.to_numpy(float), y.to_numpy(float)
            same = np.isclose(u, v, rtol=RTOL, atol=ATOL) | (np.isnan(u) & np.isnan(v))
        else:
            u, v = x.astype(object).to_numpy(), y.astype(object).to_numpy()
            same = (u == v) | (pd.isna(u) & pd.isna(v))
        for i in np.flatnonzero(~np.asarray(same, bool))[:SHOWN]:
            problems.append(f"{what}: row {'/'.join(common[i])}, {col} is {_plain(x.iat[i])}; "
                            f"the stored forecasts and labels give {_plain(y.iat[i])}")
        extra = int((~np.asarray(same, bool)).sum()) - SHOWN
        if extra > 0:
            problems.append(f"... and {extra} more rows of {what} differ in {col}")
    return problems


def _plain(value) -> str:
    """A cell as a reader writes it (numpy scalars as plain numbers)."""
    return repr(value.item() if hasattr(value, "item") else value)
