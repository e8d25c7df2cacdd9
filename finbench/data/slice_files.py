"""The files a declared slice reads (docs/reports.md, "Declared slices"): a calendar of
announcements (``time``, ``label`` and optionally a key column) and a grouping (``group``
and a key column), each read whole and checked, every bad row named."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from finbench.core.errors import DataError
from finbench.core.slices import UNGROUPED
from finbench.core.times import to_ns
from finbench.data.timestamps import parse_utc
from finbench.data.user_files import read_table_file


@dataclass(frozen=True)
class Calendar:
    """Announcements: each one's instant (UTC, int64 nanoseconds), label and key (``""``:
    every task's)."""

    times_ns: np.ndarray
    labels: np.ndarray
    keys: np.ndarray


def read_calendar(path: str | Path, *, key: str, timezone: str | None = None,
                  labels: list[str] | None = None) -> Calendar:
    """The announcements of a calendar file: columns ``time`` (ISO 8601 with an offset, or
    without one when ``timezone`` is given), ``label`` and optionally ``key`` (a blank cell:
    every task's); only the rows of ``labels`` when given (each of which must occur)."""
    frame = read_table_file(path, names=[key])
    missing = [c for c in ("time", "label") if c not in frame]
    if missing:
        raise DataError(f"{path}: a calendar needs columns time and label (missing: "
                        f"{', '.join(missing)}; columns: {', '.join(map(str, frame)) or 'none'})")
    if frame.empty:
        raise DataError(f"{path}: calendar has no rows")
    label = frame["label"]
    blank = label.isna() | (label.astype(str).str.strip() == "")
    if blank.any():
        raise DataError(f"{path}: row {int(np.flatnonzero(blank.to_numpy())[0]) + 1}: label "
                        "is empty (each announcement is named)")
    parsed = parse_utc(frame["time"], timezone=timezone)
    for mask, rule in ((parsed.naive, "has no UTC offset (write one, e.g. "
                        "2025-01-29T14:00:00-05:00, or set the slice's timezone)"),
                       (parsed.unparseable, "is not a time (ISO 8601, e.g. "
                        "2025-01-29T14:00:00-05:00)")):
        bad = np.flatnonzero(mask)
        if len(bad):
            raise DataError(f"{path}: row {bad[0] + 1}: time {frame['time'].iloc[bad[0]]!r} "
                            f"{rule}")
    keys = (frame[key].fillna("").astype(str).str.strip().to_numpy(object) if key in frame
            else np.full(len(frame), "", object))
    names = label.astype(str).str.strip().to_numpy(object)
    keep = np.ones(len(frame), bool)
    if labels is not None:
        absent = [x for x in labels if x not in set(names)]
        if absent:
            raise DataError(f"{path}: no announcement is labelled {absent[0]!r} (labels: "
                            f"{', '.join(sorted(set(names))[:10])})")
        keep = np.isin(names, labels)
    return Calendar(to_ns(parsed.values)[keep], names[keep], keys[keep])


def read_groups(path: str | Path, *, keys: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """(the key column the file has, of ``keys``; each unit's group) from a file of columns
    ``group`` and one key column; a unit in two groups, or without a group, is an error."""
    frame = read_table_file(path, names=list(keys))
    have = [k for k in keys if k in frame]
    if "group" not in frame or len(have) != 1:
        raise DataError(f"{path}: a grouping needs a column group and one of "
                        f"{', '.join(keys)} (columns: {', '.join(map(str, frame)) or 'none'})")
    key = have[0]
    units = frame[key].astype("string").str.strip()
    group = frame["group"].astype("string").str.strip()
    for name, column in ((key, units), ("group", group)):
        empty = column.isna() | (column == "")
        if empty.any():
            raise DataError(f"{path}: row {int(np.flatnonzero(empty.to_numpy())[0]) + 1}: "
                            f"{name} is empty")
    if (group == UNGROUPED).any():
        raise DataError(f"{path}: group {UNGROUPED!r} names the units in no group; choose "
                        "another name")
    mapping: dict[str, str] = {}
    for row, (unit, name) in enumerate(zip(units, group, strict=True), 1):
        if unit in mapping and mapping[unit] != name:
            raise DataError(f"{path}: row {row}: {key} {unit!r} is in group "
                            f"{mapping[unit]!r} and in {name!r}: a slice puts each in one group")
        mapping[unit] = name
    return key, mapping


def slice_day(times: pd.Series | np.ndarray, timezone: str) -> np.ndarray:
    """The calendar date in ``timezone`` of each UTC instant (int64 ns), as days since 1970."""
    local = pd.to_datetime(np.asarray(times, np.int64), utc=True).tz_convert(timezone)
    return (local.tz_localize(None).normalize().to_numpy("datetime64[D]").astype(np.int64))


def read_slice_files(slices: list, *, calendar_key: str, group_keys: tuple[str, ...]) -> dict:
    """Each declared slice's file read and checked (a calendar: :class:`Calendar`; a
    grouping: (its key column, each unit's group)), by the slice's name: a bad file is a
    DataError naming it before a run makes its folder."""
    found: dict = {}
    for s in slices:
        if s.kind == "calendar":
            found[s.name] = read_calendar(s.file, key=calendar_key, timezone=s.timezone,
                                          labels=s.labels)
        elif s.kind == "groups" and s.file is not None:
            found[s.name] = read_groups(s.file, keys=group_keys)
    return found
