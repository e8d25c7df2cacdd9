"""Labels in a run against the store and against themselves: re-derived from the store's
prices, and each stored label consistent on its own (``y`` from ``r``, ``r`` from the prices,
the status from which price is missing)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from finbench.core.floats import within_ulps
from finbench.core.times import to_ns
from finbench.tracks.intraday.classes import class_columns


def label_problems(stored: pd.DataFrame, fresh: pd.DataFrame) -> list[str]:
    """Each stored label against the one re-derived from the store, field by field: status,
    prices (read from the store, so exact) and ``y`` must be equal; ``r`` passes through libm,
    so it must agree within :data:`~finbench.core.floats.LIBM_ULPS` ULP (a run made on one CPU
    audits clean on another)."""
    stored = stored.set_index("task_id")
    fresh = fresh.set_index("task_id").reindex(stored.index)
    differs = {
        "status": (stored["status"].astype(object) != fresh["status"].astype(object)).to_numpy(),
        "p_ref": ~_same(stored["p_ref"], fresh["p_ref"]),
        "p_target": ~_same(stored["p_target"], fresh["p_target"]),
        "y": ~_same(stored["y"].astype("float64"), fresh["y"].astype("float64")),
        "r": ~within_ulps(stored["r"].to_numpy(float), fresh["r"].to_numpy(float)),
        # the bars read and when the label became known: instants, compared exactly
        **{col: ~_same_times(stored[col], fresh[col]) for col in TIME_COLUMNS
           if col in stored and col in fresh},
    }
    bad = np.logical_or.reduce(list(differs.values()))
    problems = []
    for i in np.flatnonzero(bad):
        fields = ", ".join(f"{name} {stored[name].iloc[i]!r} (store gives {fresh[name].iloc[i]!r})"
                           for name, d in differs.items() if d[i])
        problems.append(f"labels.parquet task {stored.index[i]}: {fields}")
    return problems


TIME_COLUMNS = ("ref_bar_ts", "target_bar_ts", "label_known_at")


def _same_times(a: pd.Series, b: pd.Series) -> np.ndarray:
    """Equal instants (NaT matching NaT), whatever the unit each is stored in."""
    u, v = (to_ns(x) for x in (a, b))
    return u == v


def _same(a: pd.Series, b: pd.Series) -> np.ndarray:
    """Exactly equal, NaN matching NaN."""
    a, b = a.to_numpy(float), b.to_numpy(float)
    return (a == b) | (np.isnan(a) & np.isnan(b))


def class_problems(labels: pd.DataFrame, spec) -> list[str]:
    """Each stored label's class against its own prices and ``r`` (``spec``: the config's
    partition, None when it declares none): the class columns are there exactly when the
    partition is declared, and each class is what the partition gives."""
    has = "cls" in labels
    if spec is None:
        return (["labels.parquet: has classes (cls) the run's config does not declare"]
                if has else [])
    if not has:
        return ["labels.parquet: the config declares classes ([tasks.classes]) and the labels "
                "have none"]
    want = class_columns(labels, spec)
    cls = labels["cls"].to_numpy()
    band = labels["class_band"].to_numpy(float)
    bad = (cls != want["cls"]) | ~((band == want["class_band"]) | (
        np.isnan(band) & np.isnan(want["class_band"])))
    return [f"labels.parquet task {labels['task_id'].iloc[i]}: cls {cls[i]} and class_band "
            f"{band[i]!r} are not what the partition gives (cls {want['cls'][i]}, band "
            f"{want['class_band'][i]!r}) for r {labels['r'].iloc[i]!r}"
            for i in np.flatnonzero(bad)]


def consistency_problems(labels: pd.DataFrame) -> list[str]:
    """Each stored label against itself: an ``ok`` label has finite positive prices, ``r``
    within :data:`~finbench.core.floats.LIBM_ULPS` ULP of ``ln(p_target / p_ref)`` and
    ``y = 1 if r > 0 else 0``; an unscorable one has the price its status says is missing
    missing, and no ``r`` or ``y``."""
    status = labels["status"].astype(object).to_numpy()
    p_ref, p_tgt = labels["p_ref"].to_numpy(float), labels["p_target"].to_numpy(float)
    r = labels["r"].to_numpy(float)
    y = labels["y"].astype("float64").to_numpy()
    ok = status == "ok"
    with np.errstate(invalid="ignore", divide="ignore"):
        derived = np.log(p_tgt / p_ref)
    rules = (
        (~np.isin(status, ["ok", "no_reference_price", "no_target_price", "no_bars"]),
         "status is not ok, no_reference_price, no_target_price or no_bars"),
        (ok & ~((p_ref > 0) & (p_tgt > 0) & np.isfinite(p_ref) & np.isfinite(p_tgt)),
         "an ok label needs two finite, positive prices"),
        (ok & ~(np.isfinite(r) & within_ulps(r, derived)), "r is not ln(p_target / p_ref)"),
        (ok & (y != (r > 0)), "y is not 1 if r > 0 else 0"),
        ((status == "no_reference_price") & ~np.isnan(p_ref),
         "no_reference_price with a reference price"),
        ((status == "no_target_price") & ~(np.isnan(p_tgt) & ~np.isnan(p_ref)),
         "no_target_price with a target price, or without a reference price"),
        ((status == "no_bars") & ~np.isnan(p_tgt), "no_bars with a target price"),
        (~ok & ~(np.isnan(r) & np.isnan(y)), "an unscorable label with r or y"),
    )
    problems = []
    for bad, rule in rules:
        for i in np.flatnonzero(bad):
            problems.append(f"labels.parquet task {labels['task_id'].iloc[i]}: {rule} "
                            f"(p_ref {p_ref[i]!r}, p_target {p_tgt[i]!r}, r {r[i]!r}, "
                            f"y {y[i]!r}, status {status[i]})")
    return problems
