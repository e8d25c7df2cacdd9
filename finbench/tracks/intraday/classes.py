"""The three-class partition of a label (docs/spec.md §5): class 0 ``down``, 1 ``flat``, 2
``up``, ``-1`` for an unscorable label; and the band, in log-return units, that made it.

- ``band``: flat is ``|r| <= band``; the class is a function of ``r``.
- ``band_ticks = k``: flat is a move of the mid of at most ``k`` price increments (the venue's
  increment at ``P_ref``: ``tick`` from 1 up, ``tick_under_1`` below);
  the class is a function of the two prices (``P_target - P_ref`` in increments, rounded to
  1e-6 of one, since mids sit on half increments and decimal prices are not exact in binary),
  and the band reported is ``ln((P_ref + k * tick) / P_ref)``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

CLASS_COLUMNS = ("cls", "class_band")


def classes_of(r, band) -> np.ndarray:
    """The class of each log return for a band (one, or one per row); ``-1`` for NaN.

    >>> classes_of([-0.02, -0.001, 0.0, 0.001, 0.02, float("nan")], 0.001).tolist()
    [0, 1, 1, 1, 2, -1]
    """
    r = np.asarray(r, float)
    with np.errstate(invalid="ignore"):
        out = np.where(r < -np.asarray(band), 0, np.where(r > np.asarray(band), 2, 1))
    return np.where(np.isnan(r), -1, out).astype(np.int8)


def class_columns(labels: pd.DataFrame, spec) -> dict[str, np.ndarray]:
    """``cls`` and ``class_band`` of each label row (``spec``: the config's
    :class:`~finbench.tracks.intraday.config.ClassesConfig`).

    >>> from finbench.tracks.intraday.config import ClassesConfig
    >>> rows = pd.DataFrame({"p_ref": [100.0, 100.0, 100.0], "p_target": [100.005, 99.98, 100.02],
    ...                      "r": np.log([1.00005, 0.9998, 1.0002])})
    >>> class_columns(rows, ClassesConfig(band_ticks=1))["cls"].tolist()
    [1, 0, 2]
    >>> cheap = pd.DataFrame({"p_ref": [0.5, 0.5], "p_target": [0.50005, 0.5002],
    ...                       "r": np.log([1.0001, 1.0004])})
    >>> class_columns(cheap, ClassesConfig(band_ticks=1))["cls"].tolist()  # 0.0001 under $1
    [1, 2]
    """
    r = labels["r"].to_numpy(float)
    if spec.band is not None:
        band = np.where(np.isnan(r), np.nan, spec.band)
        return {"cls": classes_of(r, spec.band), "class_band": band}
    p_ref, p_tgt = labels["p_ref"].to_numpy(float), labels["p_target"].to_numpy(float)
    k = spec.band_ticks
    with np.errstate(invalid="ignore", divide="ignore"):
        tick = np.where(p_ref < 1, spec.tick_under_1, spec.tick)  # the increment at P_ref
        moves = np.round((p_tgt - p_ref) / tick, 6)
        band = np.log((p_ref + k * tick) / p_ref)
    cls = np.where(moves < -k, 0, np.where(moves > k, 2, 1)).astype(np.int8)
    unscorable = np.isnan(r)
    return {"cls": np.where(unscorable, -1, cls).astype(np.int8),
            "class_band": np.where(unscorable, np.nan, band)}
