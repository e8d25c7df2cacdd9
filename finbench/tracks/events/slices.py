"""The slices an event config declares (``[[slices]]``, :mod:`finbench.core.slices`), each
task's value in each: ``slices.parquet`` of the run, written with the labels and derived
again by the audit. A calendar matches a market's cutoff ``t0`` (its UTC date, the minutes
around it, or the window from it to the market's close); a grouping names categories (in the
config) or markets or categories (in a file)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from finbench.core.slices import EVENT, NO_EVENT, calendar_hits, group_values
from finbench.core.times import NO_TIME, from_ns, to_ns
from finbench.data.slice_files import read_slice_files, slice_day


def slice_files(config) -> dict:
    """The declared slices' files read and checked (a calendar's key column ``category``, a
    grouping's ``market_id`` or ``category``)."""
    return read_slice_files(config.slices, calendar_key="category",
                            group_keys=("market_id", "category"))


def task_slices(config, tasks: pd.DataFrame) -> pd.DataFrame:
    """Every declared slice's value for every task, long: the slices in the config's order,
    the tasks in theirs (the columns of :data:`~finbench.core.slices.SLICE_SCHEMA`)."""
    files = slice_files(config)
    n = len(tasks)
    parts = []
    for s in config.slices:
        announcements = pd.array([None] * n, "Int64")
        if s.kind == "calendar":
            cal = files[s.name]
            category = tasks["category"].astype(str).to_numpy(object)
            t0 = to_ns(tasks["t0"])
            if s.match == "day":
                hits = calendar_hits(slice_day(t0, "UTC"), None, category,
                                     slice_day(cal.times_ns, "UTC"), cal.keys, match="day")
            else:
                hits = calendar_hits(t0, to_ns(tasks["closes_at"]), category, cal.times_ns,
                                     cal.keys, match=s.match, minutes=s.minutes)
            value = np.where(hits > 0, EVENT, NO_EVENT).astype(object)
            announcements = pd.array(hits, "Int64")
        elif s.groups is not None:
            value = group_values(tasks["category"].astype(str).to_numpy(object),
                                 s.groups_by_unit())
        else:
            key, mapping = files[s.name]
            value = group_values(tasks[key].astype(str).to_numpy(object), mapping)
        parts.append(pd.DataFrame({
            "task_id": tasks["task_id"].to_numpy(object), "slice": s.name, "value": value,
            "announcements": announcements, "rv": np.full(n, np.nan),
            "rv_low": np.full(n, np.nan), "rv_high": np.full(n, np.nan),
            "rv_count": pd.array([None] * n, "Int64"),
            "rv_known_at": from_ns(np.full(n, NO_TIME, np.int64))}))
    return pd.concat(parts, ignore_index=True)
