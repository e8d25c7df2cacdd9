"""Labels: reference and target mids, log return and direction, vectorised (docs/spec.md §5).

``P_ref`` is the mid ``(high + low) / 2`` of the last bar whose availability time (bar start +
bar length) lies in ``[t_forecast - w, t_forecast]``; ``P_target`` likewise at ``t_target``.
With 1-minute bars and ``w = 30 s`` the reference at 12:30 is the bar that *started* 12:29.
``r = ln(P_target / P_ref)`` and ``y = 1 if r > 0 else 0``: a tie (r = 0) counts as y = 0.
A task without either price is unscorable, with the reason in ``status``: ``no_bars`` when the
store holds no bar of its ticker in the session's regular hours (a day the data lacks), else
``no_reference_price`` or ``no_target_price``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from finbench.core.errors import DataError
from finbench.core.times import NO_TIME, NS, from_ns, to_ns
from finbench.data.bars import BarArrays

OK = "ok"
NO_REFERENCE = "no_reference_price"
NO_TARGET = "no_target_price"
NO_BARS = "no_bars"
STATUSES = (OK, NO_REFERENCE, NO_TARGET, NO_BARS)
LABEL_COLUMNS = ["task_id", "p_ref", "p_target", "r", "y", "status", "ref_bar_ts",
                 "target_bar_ts", "label_known_at"]


def compute_labels(tasks: pd.DataFrame, bars: BarArrays, *, window_seconds: int = 30) -> pd.DataFrame:
    """One label row per task, in task order (see module docstring for the rules)."""
    found = label_bars(tasks["ticker"].to_numpy(dtype=object), to_ns(tasks["t_forecast"]),
                       to_ns(tasks["t_target"]), bars, window_seconds=window_seconds,
                       opens=to_ns(tasks["session_open"]), closes=to_ns(tasks["session_close"]))
    return label_frame(tasks["task_id"].to_numpy(), tasks["t_target"].reset_index(drop=True),
                       *found)


def label_bars(tickers: np.ndarray, t_fc: np.ndarray, t_tg: np.ndarray, bars: BarArrays, *,
               opens: np.ndarray, closes: np.ndarray, window_seconds: int = 30,
               slices: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """(P_ref, P_target, reference bar start, target bar start, whether any bar of the ticker
    starts in the session's regular hours ``[opens, closes)``) per query; NaN and NO_TIME
    where no bar qualifies. ``slices``: ``bars.slices_of(tickers)``, when known."""
    w = int(window_seconds) * NS
    ref = bars.last_available(tickers, t_fc, not_before=t_fc - w, slices=slices)
    tgt = bars.last_available(tickers, t_tg, not_before=t_tg - w, slices=slices)
    ts = bars.ts if len(bars.ts) else np.zeros(1, np.int64)
    out = [bars.mid_at(ref), bars.mid_at(tgt)]
    for idx in (ref, tgt):
        out.append(np.where(idx >= 0, ts[np.clip(idx, 0, None)], NO_TIME))
    out.append(bars.count_between(tickers, opens, closes, slices=slices) > 0)
    return tuple(out)


def label_frame(task_id, t_target: pd.Series, p_ref: np.ndarray,
                p_tgt: np.ndarray, ref_ts: np.ndarray, tgt_ts: np.ndarray,
                day_bars: np.ndarray) -> pd.DataFrame:
    """Label rows from the prices found (:func:`label_bars`); ``task_id``: an array or a
    series (with a range index) of the tasks' ids; ``day_bars``: whether the ticker has a bar
    in the session's regular hours."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        r = np.log(p_tgt / p_ref)
    has_ref, has_tgt = ~np.isnan(p_ref), ~np.isnan(p_tgt)
    broken = np.flatnonzero(has_ref & has_tgt & ~np.isfinite(r))
    if len(broken):  # prices the ingest rules keep out; a label is never ok without an r
        i = broken[0]
        raise DataError(f"task {np.asarray(task_id)[i]}: reference price {float(p_ref[i])!r} and target "
                        f"price {float(p_tgt[i])!r} give no finite log return ({len(broken)} "
                        "task(s)); the store breaks the ingest rules: run `finbench data "
                        "validate` on it")
    code = np.where(~has_ref, 1, np.where(~has_tgt, 2, 0)).astype(np.int8)  # STATUSES
    # no bar all day: its own reason (the target, within regular hours, then has no bar)
    code[~np.asarray(day_bars, bool)] = 3
    status = pa.DictionaryArray.from_arrays(code, pa.array(STATUSES)).cast(pa.string())
    scorable = code == 0
    y = pd.array(np.where(scorable, (r > 0).astype("int8"), 0), dtype="Int8")
    y[~scorable] = pd.NA
    return pd.DataFrame(
        {
            "task_id": task_id,
            "p_ref": p_ref,
            "p_target": p_tgt,
            "r": np.where(scorable, r, np.nan),
            "y": y,
            "status": status.to_pandas(),
            "ref_bar_ts": from_ns(np.where(has_ref, ref_ts, NO_TIME)),
            "target_bar_ts": from_ns(np.where(has_tgt, tgt_ts, NO_TIME)),
            "label_known_at": t_target,
        }
    )


def status_counts(labels: pd.DataFrame) -> dict[str, int]:
    """Tasks per label status, every status listed (zero included)."""
    counts = labels["status"].value_counts()
    return {s: int(counts.get(s, 0)) for s in STATUSES}
