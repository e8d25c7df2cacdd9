"""Session calendar: horizons and target as UTC instants per exchange session (docs/spec.md §1)."""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import functools
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from finbench.core import session_cache
from finbench.core.errors import CalendarError
from finbench.core.names import clock_time
from finbench.core.times import to_ns

EARLY_CLOSE_RULES = ("skip", "shift")
SHIFT_GAP = pd.Timedelta(minutes=5)


def parse_clock(text: str, *, what: str) -> dt.time:
    """Parse ``HH:MM`` (or ``HH:MM:SS``) local clock text; ``what`` names the setting in errors."""
    clock = clock_time(text)
    if clock is not None:
        return clock
    raise CalendarError(f"{what}: {text!r} is not a clock time HH:MM or HH:MM:SS")


def parse_session_date(value: str | dt.date, *, what: str) -> pd.Timestamp:
    """Return a tz-naive midnight Timestamp for a session date (the form exchange-calendars wants)."""
    try:
        ts = pd.Timestamp(value)
    except (TypeError, ValueError) as exc:
        raise CalendarError(f"{what}: {value!r} is not a date YYYY-MM-DD") from exc
    if ts.tzinfo is not None or ts != ts.normalize():
        raise CalendarError(f"{what}: {value!r} must be a plain date YYYY-MM-DD")
    return ts


@dataclass(frozen=True)
class ExchangeSessions:
    """An exchange's sessions over a fixed range, as exchange-calendars gives them: the
    session dates (naive midnights) and each one's open and close (UTC, indexed by session).
    This is all FinBench reads of a calendar, so it is kept between commands
    (:mod:`finbench.core.session_cache`)."""

    name: str
    sessions: pd.DatetimeIndex
    opens: pd.Series
    closes: pd.Series

    @classmethod
    def of_arrays(cls, name: str, sessions: np.ndarray, opens: np.ndarray,
                  closes: np.ndarray) -> ExchangeSessions:
        """From int64 ns: naive session dates, UTC opens and closes."""
        index = pd.DatetimeIndex(sessions.astype("datetime64[ns]"))

        def instants(ns: np.ndarray, label: str) -> pd.Series:
            return pd.Series(pd.DatetimeIndex(ns.astype("datetime64[ns]")).tz_localize("UTC"),
                             index=index, name=label)

        return cls(name, index, instants(opens, "open"), instants(closes, "close"))

    def sessions_in_range(self, start, end) -> pd.DatetimeIndex:
        """The sessions from ``start`` to ``end`` (dates, both included)."""
        lo, hi = self._positions(start, end)
        return self.sessions[lo:hi]

    def _positions(self, start, end) -> tuple[int, int]:
        first, last = pd.Timestamp(start), pd.Timestamp(end)
        return (int(self.sessions.searchsorted(first, side="left")),
                int(self.sessions.searchsorted(last, side="right")))

    def session_bounds_ns(self, start, end) -> tuple[pd.DatetimeIndex, np.ndarray, np.ndarray]:
        """:meth:`sessions_in_range` with each session's open and close as UTC int64
        nanoseconds (for callers asking once per day of a long run)."""
        lo, hi = self._positions(start, end)
        opens, closes = self._bounds_ns
        return self.sessions[lo:hi], opens[lo:hi], closes[lo:hi]

    @functools.cached_property
    def _bounds_ns(self) -> tuple[np.ndarray, np.ndarray]:
        return to_ns(self.opens), to_ns(self.closes)

    def session_open(self, day) -> pd.Timestamp:
        return self.opens.loc[pd.Timestamp(day)]

    def session_close(self, day) -> pd.Timestamp:
        return self.closes.loc[pd.Timestamp(day)]


def get_calendar(name: str, start: pd.Timestamp, end: pd.Timestamp) -> ExchangeSessions:
    """The sessions of calendar ``name`` over whole decades around ``[start, end]``, the one
    before included, padded a week each side: the evaluated range, the history before it
    and every month chunk of a run share one. Read from the session cache, or built by
    exchange-calendars (and kept there); in :func:`from_library` blocks, always built."""
    first = pd.Timestamp(year=pd.Timestamp(start).year // 10 * 10 - 10, month=1, day=1)
    last = pd.Timestamp(year=pd.Timestamp(end).year // 10 * 10 + 9, month=12, day=31)
    return _calendar(name, first, last, _FROM_LIBRARY.get())


_FROM_LIBRARY = contextvars.ContextVar("from_library", default=False)  # see from_library()


@contextlib.contextmanager
def from_library():
    """Calendars built by exchange-calendars inside the block, never read from the session
    cache (the audit derives a run again from the store and the libraries alone); what is
    built is kept, over what the cache held."""
    token = _FROM_LIBRARY.set(True)
    try:
        yield
    finally:
        _FROM_LIBRARY.reset(token)


@functools.lru_cache(maxsize=32)
def _calendar(name: str, start: pd.Timestamp, end: pd.Timestamp,
              from_library: bool) -> ExchangeSessions:
    """Calendar ``name`` pinned to ``[start, end]`` (padded a week each side) so its bounds
    never move with the wall clock."""
    pad = pd.Timedelta(days=7)
    first, last = ((start - pad).date().isoformat(), (end + pad).date().isoformat())
    if not from_library:
        kept = session_cache.load_sessions(name, first, last)
        if kept is not None:
            return ExchangeSessions.of_arrays(name, **kept)
    cal = _library_calendar(name, first, last)
    arrays = {"sessions": cal.sessions.asi8, "opens": pd.DatetimeIndex(cal.opens).asi8,
              "closes": pd.DatetimeIndex(cal.closes).asi8}  # UTC ns
    session_cache.save_sessions(name, first, last, arrays)
    return ExchangeSessions.of_arrays(name, **arrays)  # the same object either way


def _library_calendar(name: str, first: str, last: str):
    import exchange_calendars as xcals  # 0.06-0.1 s, paid only when the cache has no answer

    try:
        with warnings.catch_warnings():
            # exchange-calendars 4.13 reads Series.values internally, which pandas 3 flags;
            # the values it reads are UTC either way.
            warnings.filterwarnings("ignore", message="Series.values returning an ndarray")
            return xcals.get_calendar(name, start=first, end=last)
    except xcals.errors.InvalidCalendarName as exc:
        raise CalendarError(f"calendar {name!r} is unknown to exchange-calendars") from exc


def is_calendar(name: str) -> bool:
    """Whether exchange-calendars knows calendar ``name`` (aliases included). The kept list
    may say yes; no is always the library's answer (and the list is kept again)."""
    kept = session_cache.load_names()
    if kept is not None and name in kept:
        return True
    import exchange_calendars as xcals

    names = xcals.get_calendar_names(include_aliases=True)
    session_cache.save_names(names)
    return name in names


@dataclass(frozen=True)
class SessionGrid:
    """UTC instants for every (session, horizon) of a date range, with exclusions by reason.

    ``table`` has one row per session × horizon: ``session`` (naive date), ``horizon``,
    ``t_forecast``, ``t_target``, ``open``, ``close`` (UTC) and ``excluded`` (``""`` when the
    task is asked, else the reason, e.g. ``early_close``).
    """

    table: pd.DataFrame
    calendar_name: str
    timezone: str


def session_grid(
    start: str | dt.date,
    end: str | dt.date,
    *,
    horizons: dict[str, str],
    target: str = "15:55",
    timezone: str = "America/New_York",
    calendar: str = "XNYS",
    early_close: str = "skip",
) -> SessionGrid:
    """Expand sessions between ``start`` and ``end`` (inclusive) into horizon and target instants.

    A horizon or target at or after the session close is never asked. ``early_close="skip"``
    leaves such a session out for every horizon (reason ``early_close``); ``"shift"`` moves the
    target to close − 5 min and drops horizons at or after the new target.

    >>> g = session_grid("2025-01-15", "2025-01-15", horizons={"MORNING": "09:30"})
    >>> str(g.table.loc[0, "t_forecast"])
    '2025-01-15 14:30:00+00:00'
    """
    if early_close not in EARLY_CLOSE_RULES:
        raise CalendarError(
            f"early_close: {early_close!r} is not one of {', '.join(EARLY_CLOSE_RULES)}"
        )
    if not horizons:
        raise CalendarError("horizons: at least one horizon is needed")
    first = parse_session_date(start, what="start")
    last = parse_session_date(end, what="end")
    if last < first:
        raise CalendarError(f"end {last.date()} is before start {first.date()}")
    t_target_clock = parse_clock(target, what="target")
    clocks = {name: parse_clock(text, what=f"horizons.{name}") for name, text in horizons.items()}
    for name, clock in clocks.items():
        if clock >= t_target_clock:
            raise CalendarError(
                f"horizons.{name}: {clock:%H:%M} is not before the target {t_target_clock:%H:%M}"
            )
    cal = get_calendar(calendar, first, last)
    sessions = cal.sessions_in_range(first, last)
    if len(sessions) == 0:
        empty = pd.DataFrame(
            columns=["session", "horizon", "t_forecast", "t_target", "open", "close", "excluded"]
        )
        return SessionGrid(empty, calendar, timezone)
    opens = cal.opens.loc[sessions].dt.tz_convert("UTC")
    closes = cal.closes.loc[sessions].dt.tz_convert("UTC")
    days = pd.DatetimeIndex(sessions)
    target_utc = local_instants(days, t_target_clock, timezone)
    frames = []
    for name, clock in clocks.items():
        t_fc = local_instants(days, clock, timezone)
        frames.append(
            pd.DataFrame(
                {
                    "session": days,
                    "horizon": name,
                    "t_forecast": t_fc,
                    "t_target": target_utc,
                    "open": opens.to_numpy(),
                    "close": closes.to_numpy(),
                }
            )
        )
    table = pd.concat(frames, ignore_index=True)
    table["excluded"] = ""
    late_target = table["t_target"] >= table["close"]
    if early_close == "skip":
        table.loc[late_target, "excluded"] = "early_close"
    else:
        shifted = table["close"] - SHIFT_GAP
        table.loc[late_target, "t_target"] = shifted[late_target]
        table.loc[late_target & (table["t_forecast"] >= table["t_target"]), "excluded"] = (
            "early_close"
        )
    order = {name: i for i, name in enumerate(clocks)}
    table["_h"] = table["horizon"].map(order)
    table = table.sort_values(["session", "_h"], kind="stable").drop(columns="_h")
    return SessionGrid(table.reset_index(drop=True), calendar, timezone)


def local_instants(days: pd.DatetimeIndex, clock: dt.time, timezone: str) -> np.ndarray:
    """UTC instants of local clock time ``clock`` on each naive date in ``days``."""
    offset = pd.Timedelta(hours=clock.hour, minutes=clock.minute, seconds=clock.second)
    local = (days + offset).tz_localize(timezone, nonexistent="raise", ambiguous="raise")
    return local.tz_convert("UTC").to_numpy()


def previous_sessions(calendar: str, end: str | dt.date, count: int) -> pd.DatetimeIndex:
    """The ``count`` sessions strictly before ``end`` (naive dates), oldest first."""
    last = parse_session_date(end, what="end")
    # 1.6 calendar days per session is generous for any exchange; pin the calendar to it.
    first = last - pd.Timedelta(days=int(count * 1.6) + 10)
    cal = get_calendar(calendar, first, last)
    sessions = cal.sessions_in_range(first, last)
    sessions = sessions[sessions < last]
    return pd.DatetimeIndex(sessions[-count:]) if count > 0 else pd.DatetimeIndex([])
