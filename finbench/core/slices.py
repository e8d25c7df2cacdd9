"""Slices a config declares before any label is read (``[[slices]]``, docs/reports.md
"Declared slices"): the parts of a run's tasks where regimes may differ, each task in exactly
one value of each slice, and the pure matching behind them.

- ``calendar``: announcements from a file of times and labels (FOMC, CPI, earnings per
  ticker): a task is ``event`` when one falls on its day, inside its forecast window or within
  some minutes of its forecast time, else ``no event``.
- ``groups``: a user's grouping of the track's units (sectors of tickers; categories or
  markets of the event track); a unit in no group is ``(ungrouped)``, counted like any value.
- ``volatility``: the intraday track's regime of realised volatility known before each task,
  ``low``, ``mid`` or ``high`` against terciles of its own trailing values (the track
  computes it from its label history), ``too little history`` where it cannot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import pyarrow as pa
from pydantic import Field, model_validator

from finbench.core.config import StrictModel, absolute_path

NAME = r"^[A-Za-z0-9][A-Za-z0-9_.\- ]*$"
EVENT, NO_EVENT = "event", "no event"
UNGROUPED = "(ungrouped)"
REGIMES = ("low", "mid", "high")
TOO_LITTLE = "too little history"
# ``slices.parquet`` of a run: one row per declared slice and task, the slices in the config's
# order and each slice's tasks in the run's; ``announcements`` for a calendar, the ``rv_*``
# columns for a volatility regime (null elsewhere)
SLICE_SCHEMA = pa.schema([
    ("task_id", pa.string()), ("slice", pa.string()), ("value", pa.string()),
    ("announcements", pa.int64()), ("rv", pa.float64()), ("rv_low", pa.float64()),
    ("rv_high", pa.float64()), ("rv_count", pa.int64()),
    ("rv_known_at", pa.timestamp("ns", tz="UTC"))])
NS_PER_MINUTE = 60 * 10**9


class CalendarSlice(StrictModel):
    """Announcements read from ``file`` (columns ``time`` and ``label``, and optionally the
    track's key: ``ticker``, or ``category`` for the event track; a blank key is every
    task's). ``match``: ``day``, one on the task's day (its session's date; the event track:
    the UTC date of ``t0``); ``window``, one after the forecast time and at or before the
    target (the event track: after ``t0``, at or before the market's close); ``minutes``,
    one within ``minutes`` of the forecast time, before or after it."""

    kind: Literal["calendar"]
    name: Annotated[str, Field(min_length=1, pattern=NAME)]
    file: Path
    labels: list[Annotated[str, Field(min_length=1)]] | None = Field(default=None,
                                                                      min_length=1)
    timezone: str | None = None  # of the file's times that carry no offset (none: an error)
    match: Literal["day", "window", "minutes"] = "day"
    minutes: Annotated[float, Field(gt=0, le=7 * 24 * 60)] | None = None

    @model_validator(mode="after")
    def _rule(self) -> CalendarSlice:
        if (self.match == "minutes") != (self.minutes is not None):
            raise ValueError("minutes goes with match = 'minutes' (and it needs it)")
        if self.timezone is not None:
            from finbench.core.names import is_timezone

            if not is_timezone(self.timezone):
                raise ValueError(f"{self.timezone!r} is not a time zone name "
                                 "(e.g. America/New_York)")
        return self


class GroupsSlice(StrictModel):
    """A grouping of the track's units: ``groups`` (a group's name: the tickers in it; the
    event track: categories), or ``file`` (columns ``group`` and the track's key: ``ticker``;
    the event track ``market_id`` or ``category``). A unit in two groups is an error."""

    kind: Literal["groups"]
    name: Annotated[str, Field(min_length=1, pattern=NAME)]
    groups: dict[Annotated[str, Field(min_length=1)],
                 list[Annotated[str, Field(min_length=1)]]] | None = None
    file: Path | None = None

    @model_validator(mode="after")
    def _rule(self) -> GroupsSlice:
        if (self.groups is None) == (self.file is None):
            raise ValueError("give groups or file, one of them")
        if self.groups is not None:
            if UNGROUPED in self.groups:
                raise ValueError(f"{UNGROUPED!r} names the units in no group; choose another "
                                 "group name")
            seen: dict[str, str] = {}
            for group, units in self.groups.items():
                for unit in units:
                    if unit in seen:
                        raise ValueError(f"{unit!r} is in group {seen[unit]!r} and in "
                                         f"{group!r}: a slice puts each unit in one group")
                    seen[unit] = group
        return self

    def groups_by_unit(self) -> dict[str, str]:
        """Each unit named in ``groups`` with its group."""
        return {unit: group for group, units in (self.groups or {}).items() for unit in units}


class VolatilitySlice(StrictModel):
    """The intraday track's regime of realised volatility known before each task: ``rv``,
    the root mean square of the last ``lookback`` returns ``r`` of its series (ticker,
    horizon) known before its forecast time, placed against the terciles of the ``rv`` its
    series had at each of the ``window`` labels before (each from the ``lookback`` returns
    before it); ``too little history`` with fewer than ``min_count`` of those."""

    kind: Literal["volatility"]
    name: Annotated[str, Field(min_length=1, pattern=NAME)]
    lookback: Annotated[int, Field(ge=2, le=1000)] = 20
    window: Annotated[int, Field(ge=3, le=2000)] = 60
    min_count: Annotated[int, Field(ge=3)] = 20

    @model_validator(mode="after")
    def _rule(self) -> VolatilitySlice:
        if self.min_count > self.window:
            raise ValueError(f"min_count {self.min_count} is more than the window "
                             f"{self.window} holds")
        return self

    @property
    def history(self) -> int:
        """The labels of a series a task's regime reads at most."""
        return self.lookback + self.window


SliceConfig = Annotated[CalendarSlice | GroupsSlice | VolatilitySlice,
                        Field(discriminator="kind")]


def check_slices(slices: list) -> None:
    """A ValueError when two slices share a name."""
    names = [s.name for s in slices]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"slices.{twice[0]}: two slices have this name")


def resolve_slice_paths(slices: list, base: Path) -> list:
    """The slices with their files made absolute against ``base``."""
    return [s.model_copy(update={"file": absolute_path(s.file, base)})
            if getattr(s, "file", None) is not None else s for s in slices]


def calendar_hits(at: np.ndarray, end: np.ndarray | None, task_key: np.ndarray,
                  events: np.ndarray, event_key: np.ndarray, *, match: str,
                  minutes: float | None = None) -> np.ndarray:
    """How many announcements each task matches (see :class:`CalendarSlice`). For ``day``:
    ``at`` each task's day and ``events`` each announcement's, as days since 1970 in the
    task's own reckoning; otherwise int64 nanoseconds, ``at`` the forecast instants, ``end``
    the targets (``window``). ``task_key``: each task's key (ticker or category);
    ``event_key``: each announcement's, ``""`` for every task's."""
    at, events = np.asarray(at, np.int64), np.asarray(events, np.int64)
    task_key, event_key = np.asarray(task_key, object), np.asarray(event_key, object)
    hits = np.zeros(len(at), np.int64)
    for key in dict.fromkeys(event_key.tolist()):
        rows = np.arange(len(at)) if key == "" else np.flatnonzero(task_key == key)
        if not len(rows):
            continue
        when = np.sort(events[event_key == key])
        if match == "day":
            hits[rows] += (np.searchsorted(when, at[rows], side="right")
                           - np.searchsorted(when, at[rows], side="left"))
        elif match == "window":  # after the forecast, at or before the target
            hits[rows] += (np.searchsorted(when, np.asarray(end, np.int64)[rows], side="right")
                           - np.searchsorted(when, at[rows], side="right"))
        else:
            span = round(minutes * NS_PER_MINUTE)
            hits[rows] += (np.searchsorted(when, at[rows] + span, side="right")
                           - np.searchsorted(when, at[rows] - span, side="left"))
    return hits


def group_values(units: np.ndarray, mapping: dict[str, str]) -> np.ndarray:
    """Each unit's group (:data:`UNGROUPED` for one in none)."""
    return np.array([mapping.get(u, UNGROUPED) for u in np.asarray(units, object)],
                    dtype=object)


def slice_table(frame) -> pa.Table:
    """``slices.parquet``'s table of a frame of its columns (:data:`SLICE_SCHEMA`, nothing
    of pandas kept): its bytes are its values' alone, however the frame was made."""
    return pa.Table.from_pandas(frame[SLICE_SCHEMA.names], schema=SLICE_SCHEMA,
                                preserve_index=False).replace_schema_metadata(None)
