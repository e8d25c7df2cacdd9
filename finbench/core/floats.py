"""How closely two floats must agree: exactly, or within a few units in the last place (ULP).

Values that pass through libm (``log``, ``exp``, ``log1p``) may differ by an ULP between
numpy's vectorised kernels and ``math``, between CPUs (AVX-512 or not) and between numpy
builds. FinBench promises byte-identical results on the same machine and library versions;
across machines it promises that such values agree within :data:`LIBM_ULPS` ULP, and checks
them so (tests, ``finbench audit``). What is exact stays exact: counts, statuses, prices read
from the store, their mids, ``y``.

>>> import math, numpy as np
>>> bool(within_ulps(np.log(1.02), math.log(1.02)))
True
>>> bool(within_ulps(1.0, 1.0 + 1e-9))
False
"""

from __future__ import annotations

import numpy as np

LIBM_ULPS = 4  # a correctly rounded log is within 0.5 ULP; common libms within 1-2


def within_ulps(a, b, ulps: int = LIBM_ULPS) -> np.ndarray:
    """Per element: ``a`` and ``b`` differ by at most ``ulps`` spacings of the larger in
    magnitude. NaN matches NaN, an infinity only the same infinity."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(invalid="ignore"):
        spacing = np.spacing(np.maximum(np.abs(a), np.abs(b)))
        close = np.abs(a - b) <= ulps * spacing
    return close | (a == b) | (np.isnan(a) & np.isnan(b))
