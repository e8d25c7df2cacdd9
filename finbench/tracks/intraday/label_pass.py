"""The label pass (pass 1 of a run): over every date from the first session any baseline
window or context lookback needs to the last evaluated session, read each day's bars once,
and compute the labels of its tasks, their momentum signs and (when contexts are needed) the
daily summaries. What is kept is small: one row per task and per (ticker, session).
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property, partial

import numpy as np
import pandas as pd

from finbench.core.calendar import get_calendar, previous_sessions
from finbench.core.lookup import arrow_text, encoded, groups, positions
from finbench.core.progress import Countdown
from finbench.core.times import NO_TIME, local_midnights_ns, to_ns
from finbench.data.bars import BarArrays
from finbench.tracks.intraday.classes import CLASS_COLUMNS, class_columns
from finbench.tracks.intraday.config import RunConfig
from finbench.tracks.intraday.gate import daily_summaries, empty_daily
from finbench.tracks.intraday.history import History
from finbench.tracks.intraday.labels import LABEL_COLUMNS, label_bars, label_frame
from finbench.tracks.intraday.momentum import momentum_arrays
from finbench.tracks.intraday.plan import DAILY_COLUMNS, MID_COLUMNS, Plan, month_ranges, quarter_ranges
from finbench.tracks.intraday.tasks import build_tasks

READERS = 2  # partitions read ahead at once, each in its own thread


@dataclass
class Resolved:
    """Labels of every task (history and evaluation), the baselines' history, daily summaries."""

    labels: pd.DataFrame   # task_id-indexed rows for all tasks
    history: pd.DataFrame  # all tasks + labels + momentum_sign_<minutes> columns
    daily: pd.DataFrame    # regular-session OHLCV per (ticker, session), sorted by ticker, session
    n_tasks: int           # evaluated tasks: the last rows of ``history``
    sessions: np.ndarray | None = None  # the exchange's sessions over ``history`` (days since
    # 1970, sorted)

    @cached_property
    def known(self) -> History:
        """The label history indexed for the baselines' lookups: built once, shared by every
        baseline and every month of the run (it goes with this object)."""
        return History(self.history, self.sessions)

    def history_rows(self, rows: np.ndarray) -> np.ndarray:
        """Rows of ``history`` holding the evaluated tasks at ``rows`` (the history is the
        tasks before the evaluated ones, then the evaluated ones, in plan order)."""
        return len(self.history) - self.n_tasks + np.asarray(rows, dtype=np.int64)

    def labels_of(self, tasks: pd.DataFrame) -> pd.DataFrame:
        evaluated = len(self.labels) - self.n_tasks  # the evaluated tasks' rows, in plan order
        ids = arrow_text(tasks["task_id"])
        if evaluated >= 0 and len(ids) == self.n_tasks and arrow_text(
                self.labels.index[evaluated:]).equals(ids):
            return self.labels.iloc[evaluated:].reset_index()  # no look-up: one comparison
        at = positions(tasks["task_id"], self.labels.index)
        if (at < 0).any():
            raise KeyError(f"no label for task {tasks['task_id'].iloc[int(np.argmin(at))]}")
        return self.labels.iloc[at].reset_index()


def read_bars(plan: Plan, start: dt.date, stop: dt.date) -> BarArrays:
    return plan.store.read_bar_arrays(tickers=plan.config.tasks.tickers, start=start, end=stop)


def resolve(plan: Plan, *, momentum_minutes=(), daily: bool = True, echo=None) -> Resolved:
    """Pass 1: labels, momentum signs and (with ``daily``) daily summaries, one date partition
    at a time; then the history is read further back until every rolling baseline's window
    can be filled (:func:`fill_windows`).

    Every look-up of a task (reference and target bars, the momentum window) lies on its
    session's local date, so each day's partition is read once, as it lies on disk, with only
    the columns needed (high and low for mids; open, close and volume too for summaries).
    Results land in arrays aligned with the tasks; frames are built once at the end.
    """
    spec = plan.config.tasks
    try:
        history, days_frame = _label_pass(plan, plan.all_tasks, plan.first_date, spec.end,
                                          momentum_minutes=momentum_minutes, daily=daily,
                                          echo=echo)
    finally:  # every date it read ahead has been asked for
        plan.store.stop_reading_ahead()
    days_frame = days_frame.sort_values(["ticker", "session_open_ns"],
                                        kind="stable").reset_index(drop=True)
    resolved = Resolved(history.set_index("task_id")[kept(history)], history, days_frame,
                        len(plan.tasks))
    resolved = fill_windows(plan, resolved, momentum_minutes=momentum_minutes, echo=echo)
    resolved.sessions = session_days_between(spec.calendar, plan.first_date, spec.end)
    return resolved


def session_days_between(calendar: str, first: dt.date, last: dt.date) -> np.ndarray:
    """The exchange's sessions in ``[first, last]`` as days since 1970 (sorted)."""
    cal = get_calendar(calendar, pd.Timestamp(first), pd.Timestamp(last))
    sessions = cal.sessions_in_range(pd.Timestamp(first), pd.Timestamp(last))
    return sessions.to_numpy("datetime64[D]").astype(np.int64)


def rolling_window(config: RunConfig) -> int:
    """The most resolved labels any rolling window holds (0 without one): every baseline
    with a ``window`` but a frozen base rate, the examples a prompt variant shows, and the
    labels a declared volatility regime reads."""
    from finbench.tracks.intraday.slices import volatility_history

    return max([m.window for m in config.models if hasattr(m, "window")
                and getattr(m, "variant", "rolling") == "rolling"]
               + [m.prompt.examples for m in config.models if hasattr(m, "prompt")]
               + [volatility_history(config)], default=0)


def fill_windows(plan: Plan, resolved: Resolved, *, momentum_minutes=(), echo=None) -> Resolved:
    """Read the history further back, for the tickers whose series (ticker, horizon) have
    fewer than :func:`rolling_window` resolved labels before the first evaluated session,
    until they have that many or the history reaches the store's first date. Every window a
    baseline of the run takes then lies in the history read, so its answer is what it would
    be with the whole store behind it: a function of the task and the store, never of the
    run's date range. ``plan`` is updated (``history_tasks``, ``first_date``)."""
    spec = plan.config.tasks
    need = rolling_window(plan.config)
    dates = plan.store.dates("bars")
    if not need or not dates:
        return resolved
    store_first = dates[0]
    while plan.first_date > store_first:
        short = short_tickers(resolved.history, plan, need)
        if not short:
            break
        loaded = len(plan.history_tasks["session"].unique()) if len(plan.history_tasks) else 0
        earlier = previous_sessions(spec.calendar, plan.first_date, max(need, loaded))
        if not len(earlier):
            break
        first = max(earlier[0].date(), store_first)
        extra = build_tasks(spec.model_copy(update={"tickers": short}), start=first,
                            end=plan.first_date - dt.timedelta(days=1))
        if len(extra.tasks):
            part, _ = _label_pass(plan, extra.tasks, first,
                                  plan.first_date - dt.timedelta(days=1),
                                  momentum_minutes=momentum_minutes, daily=False, echo=echo,
                                  tickers=short)
            history = pd.concat([part, resolved.history], ignore_index=True)
            labels = pd.concat([part.set_index("task_id")[kept(part)], resolved.labels])
            resolved = Resolved(labels, history, resolved.daily, resolved.n_tasks)
            plan.history_tasks = pd.concat([extra.tasks, plan.history_tasks], ignore_index=True)
        plan.first_date = first
    return resolved


def short_tickers(history: pd.DataFrame, plan: Plan, need: int) -> list[str]:
    """Tickers of the run with a series (ticker, horizon) holding fewer than ``need`` resolved
    labels in the sessions before the first evaluated one, in the config's order."""
    spec = plan.config.tasks
    before = (history["session"] < spec.start.isoformat()).to_numpy(bool)
    ok = before & (history["status"] == "ok").to_numpy(bool)
    counts = history.loc[ok].groupby(["ticker", "horizon"]).size()
    return [t for t in spec.tickers
            if any(counts.get((t, h), 0) < need for h in spec.horizons)]


def _label_pass(plan: Plan, everything: pd.DataFrame, first: dt.date, last: dt.date, *,
                momentum_minutes=(), daily: bool, echo=None, tickers=None
                ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Labels and momentum signs of ``everything`` (tasks of sessions in ``[first, last]``),
    and with ``daily`` the daily summaries of those dates: (tasks with their label columns
    and ``momentum_sign_<minutes>``/``momentum_seen_ns_<minutes>``, summaries)."""
    spec = plan.config.tasks
    columns = DAILY_COLUMNS if daily else MID_COLUMNS
    day_names, day_code = encoded(everything["session"])
    by_day = dict(zip(day_names, groups(day_code, len(day_names)), strict=True))
    days = sorted({d.isoformat() for d in plan.store.dates("bars")
                   if first <= d <= last} | set(by_day))
    ticker_names, code = encoded(everything["ticker"])
    t_fc, t_tg = to_ns(everything["t_forecast"]), to_ns(everything["t_target"])
    opens, closes = to_ns(everything["session_open"]), to_ns(everything["session_close"])
    # each session's local midnight, made once per distinct session
    start = local_midnights_ns(pd.Series(day_names), spec.timezone)[day_code]
    n = len(everything)
    found = [np.full(n, np.nan), np.full(n, np.nan), np.full(n, NO_TIME, np.int64),
             np.full(n, NO_TIME, np.int64), np.zeros(n, bool)]
    minutes_list = sorted(set(momentum_minutes))
    signs = {m: (np.full(n, np.nan), np.full(n, NO_TIME, np.int64)) for m in minutes_list}
    summaries = []
    units = _read_units(plan, days, by_day, columns, tickers or spec.tickers)
    progress = Countdown("labels", len(units), echo, unit="reads")
    with ThreadPoolExecutor(max_workers=READERS) as pool:  # the next units are read while
        ahead = deque(pool.submit(u[0]) for u in units[:READERS])  # one is computed
        for i, (_, arrays, rows, span) in enumerate(units):
            read = ahead.popleft().result()
            if i + READERS < len(units):
                ahead.append(pool.submit(units[i + READERS][0]))
            bars = arrays(read) if read is not None else empty_bars(plan.store.bar_seconds)
            progress.add()
            if daily:
                summary = daily_summaries(bars, calendar=spec.calendar, timezone=spec.timezone)[0]
                if span is not None:  # a month read with a day either side: its sessions only
                    inside = summary["session"].between(*span)
                    summary = summary[inside.to_numpy(bool)]
                summaries.append(summary)
            if len(rows) == 0:
                continue
            slices = bars.slices_of(ticker_names)[code[rows]]  # text look-up: names only
            tick = ticker_names[code[rows]]
            for target, value in zip(found, label_bars(
                    tick, t_fc[rows], t_tg[rows], bars, opens=opens[rows],
                    closes=closes[rows], window_seconds=spec.ref_window_seconds,
                    slices=slices), strict=True):
                target[rows] = value
            for m in minutes_list:
                sign, seen = momentum_arrays(bars, tick, t_fc[rows], start[rows], m,
                                             slices=slices)
                signs[m][0][rows], signs[m][1][rows] = sign, seen
    labels = label_frame(everything["task_id"].reset_index(drop=True),
                         everything["t_target"].reset_index(drop=True), *found)
    if spec.classes is not None:  # declared in the config, before any label was read
        labels = labels.assign(**class_columns(labels, spec.classes))
    history = pd.concat([everything.reset_index(drop=True),
                         labels.drop(columns="task_id")], axis=1)
    for m in minutes_list:
        history[f"momentum_sign_{m}"], history[f"momentum_seen_ns_{m}"] = signs[m]
    days_frame = pd.concat(summaries, ignore_index=True) if summaries else empty_daily()
    return history, days_frame


def kept(history: pd.DataFrame) -> list[str]:
    """The label columns of a history frame: those of every label, and the class columns when
    the config declares the partition."""
    return LABEL_COLUMNS[1:] + [c for c in CLASS_COLUMNS if c in history]


def _read_units(plan: Plan, days: list[str], by_day: dict, columns, tickers) -> list[tuple]:
    """(reader, what makes bar arrays of what it read, rows of the tasks they serve,
    sessions it summarises or None for all) in date order. Readers run on threads ahead of
    the caller; the arrays are made on the caller's thread.

    When the store's dates are the tasks' local dates, a unit is one date partition, read as
    it lies (a reader that holds no Python lock). Otherwise (a store kept in another zone) a
    session's bars may sit in two partitions, so a unit is a calendar month and a day either
    side, read and laid out per ticker. A store laid out by ticker is read a calendar quarter
    at a time (each ticker's file of it, whole: fewer, larger reads), with no day either side
    when its zone is the tasks'."""
    spec = plan.config.tasks
    none = np.empty(0, np.int64)
    store = plan.store
    if store.partitioned_by_date_in(spec.timezone):
        arrays = partial(store.day_arrays, tickers=tickers)
        return [(partial(store.read_day_table, dt.date.fromisoformat(day), columns=columns),
                 arrays, by_day.get(day, none), None) for day in days]
    if not days:
        return []
    units = []
    pad = dt.timedelta(days=0 if store.timezone == spec.timezone else 1)
    # by ticker, a unit per quarter: each ticker's file of it read whole
    ranges = quarter_ranges if store.layout == "ticker" else month_ranges
    for first, last in ranges(dt.date.fromisoformat(days[0]), dt.date.fromisoformat(days[-1])):
        rows = [by_day[d] for d in days if first.isoformat() <= d <= last.isoformat()
                and d in by_day]
        units.append((partial(plan.store.read_bar_arrays, tickers=tickers, start=first - pad,
                              end=last + pad, columns=columns), _as_read,
                      np.concatenate(rows) if rows else none,
                      (first.isoformat(), last.isoformat())))
    return units


def _as_read(bars: BarArrays) -> BarArrays:
    return bars


def empty_bars(bar_seconds: int) -> BarArrays:
    return BarArrays.from_columns(codes=np.empty(0, np.int64), names=np.empty(0, object),
                                  ts=np.empty(0, np.int64), bar_seconds=bar_seconds,
                                  **{c: np.empty(0) for c in ("open", "high", "low", "close",
                                                              "volume")})
