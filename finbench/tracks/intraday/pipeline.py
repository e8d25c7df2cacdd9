"""From a config to tasks, labels and gated contexts, one chunk of dates at a time.

Two passes keep memory bounded whatever the date range:

1. ``resolve``: over every calendar month from the first session any baseline window or
   context lookback needs to the last evaluated session, read that month's bars, compute the
   labels of its tasks, their momentum signs and the daily summaries. What is kept is small:
   one row per task and per (ticker, session).
2. ``context_chunks``: for the tasks still to forecast, month by month, read the month's bars
   and headlines and build the gated contexts (daily summaries come from pass 1).
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property, partial

import numpy as np
import pandas as pd

from finbench.core.calendar import get_calendar, previous_sessions
from finbench.core.config import RunConfig
from finbench.core.errors import RunError
from finbench.core.lookup import arrow_text, groups, positions
from finbench.core.progress import Countdown
from finbench.core.times import NO_TIME, NS, local_midnights_ns, to_ns
from finbench.data.bars import BarArrays
from finbench.data.store import Store
from finbench.tracks.intraday.gate import ContextIndex, daily_summaries, empty_daily
from finbench.tracks.intraday.history import History
from finbench.tracks.intraday.labels import LABEL_COLUMNS, label_bars, label_frame, status_counts
from finbench.tracks.intraday.tasks import build_tasks

LOCAL_TZ_DEFAULT = "America/New_York"


READERS = 2  # partitions read ahead at once, each in its own thread


@dataclass
class Plan:
    """The tasks of a run, the earlier tasks baselines learn from, and the store."""

    config: RunConfig
    store: Store
    tasks: pd.DataFrame
    excluded: pd.DataFrame
    history_tasks: pd.DataFrame
    first_date: dt.date

    @property
    def all_tasks(self) -> pd.DataFrame:
        return pd.concat([self.history_tasks, self.tasks], ignore_index=True)


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
        at = positions(tasks["task_id"], self.labels.index)
        if (at < 0).any():
            raise KeyError(f"no label for task {tasks['task_id'].iloc[int(np.argmin(at))]}")
        return self.labels.iloc[at].reset_index()


def history_start(config: RunConfig) -> dt.date:
    """First session a baseline window or the context lookback may need."""
    need = max(
        [getattr(m, "window", 0) for m in config.models] + [config.context.previous_sessions, 1]
    )
    first = config.tasks.start
    for m in config.models:
        if getattr(m, "train_start", None):
            first = min(first, m.train_start)
    earlier = previous_sessions(config.tasks.calendar, config.tasks.start, need)
    if len(earlier):
        first = min(first, earlier[0].date())
    return first


def plan_run(config: RunConfig) -> Plan:
    """Tasks of the evaluation range and of the history before it (no market data read)."""
    spec = config.tasks
    taskset = build_tasks(spec)
    first = history_start(config)
    # the history is every task of the sessions before the evaluated ones
    before = spec.start - dt.timedelta(days=1)
    history = (build_tasks(spec, start=first, end=before).tasks if first <= before
               else taskset.tasks.iloc[:0])
    return Plan(config, Store(config.data.store), taskset.tasks, taskset.excluded, history, first)


def month_rows(tasks: pd.DataFrame) -> list[np.ndarray]:
    """Row numbers of the tasks of each calendar month (by session), months in order."""
    if tasks.empty:
        return []
    months, code = np.unique(tasks["session"].to_numpy(dtype=object).astype("U7"),
                             return_inverse=True)
    return groups(code, len(months))


def month_ranges(first: dt.date, last: dt.date, months: int = 1) -> list[tuple[dt.date, dt.date]]:
    """Consecutive calendar-month ranges covering ``[first, last]``."""
    out, start = [], first
    while start <= last:
        y, m = start.year, start.month + months
        y, m = y + (m - 1) // 12, (m - 1) % 12 + 1
        stop = min(dt.date(y, m, 1) - dt.timedelta(days=1), last)
        out.append((start, stop))
        start = stop + dt.timedelta(days=1)
    return out


def momentum_sign(bars: BarArrays, tasks: pd.DataFrame, minutes: int, *,
                  timezone: str = LOCAL_TZ_DEFAULT, with_time: bool = False):
    """Sign (−1, 0, +1) of the log mid return over the last ``minutes`` of the session's gated
    bars; NaN when either end has no bar of the session's local day available by then.
    ``with_time`` also returns when the later bar became available (ns; NO_TIME without a sign):
    the latest input a momentum forecast reads."""
    sign, seen = momentum_arrays(bars, tasks["ticker"].to_numpy(dtype=object),
                                 to_ns(tasks["t_forecast"]), day_starts(tasks, timezone),
                                 minutes)
    return (sign, seen) if with_time else sign


def day_starts(tasks: pd.DataFrame, timezone: str) -> np.ndarray:
    """Local midnight (UTC ns) of each task's session."""
    return local_midnights_ns(tasks["session"], timezone)


def momentum_arrays(bars: BarArrays, tickers: np.ndarray, t: np.ndarray, day_start: np.ndarray,
                    minutes: int, *, slices: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`momentum_sign` on arrays: (sign, availability of the later bar or NO_TIME).
    ``slices``: ``bars.slices_of(tickers)``, when known."""
    first = day_start + bars.bar_ns
    now = bars.last_available(tickers, t, not_before=first, slices=slices)
    then = bars.last_available(tickers, t - minutes * 60 * NS, not_before=first, slices=slices)
    ok = (now >= 0) & (then >= 0)
    if not len(bars.avail):
        return np.full(len(t), np.nan), np.full(len(t), NO_TIME, np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        ret = np.log(bars.mid_at(now) / bars.mid_at(then))
    return np.where(ok, np.sign(ret), np.nan), np.where(ok, bars.avail[np.maximum(now, 0)], NO_TIME)


def _in_range(tasks: pd.DataFrame, start: dt.date, stop: dt.date) -> pd.DataFrame:
    s = tasks["session"]
    return tasks[(s >= start.isoformat()) & (s <= stop.isoformat())]


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
    history, days_frame = _label_pass(plan, plan.all_tasks, plan.first_date, spec.end,
                                      momentum_minutes=momentum_minutes, daily=daily, echo=echo)
    days_frame = days_frame.sort_values(["ticker", "session_open_ns"],
                                        kind="stable").reset_index(drop=True)
    resolved = Resolved(history.set_index("task_id")[LABEL_COLUMNS[1:]], history, days_frame,
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
    """The most resolved labels any rolling baseline's window holds (0 without one)."""
    return max([m.window for m in config.models if m.kind in ("momentum", "climatology")
                or (m.kind == "base_rate" and m.variant == "rolling")], default=0)


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
            labels = pd.concat([part.set_index("task_id")[LABEL_COLUMNS[1:]], resolved.labels])
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
    columns = ("open", "high", "low", "close", "volume") if daily else ("high", "low")
    day_names, day_code = _encoded(everything["session"])
    by_day = dict(zip(day_names, groups(day_code, len(day_names)), strict=True))
    days = sorted({d.isoformat() for d in plan.store.dates("bars")
                   if first <= d <= last} | set(by_day))
    ticker_names, code = _encoded(everything["ticker"])
    t_fc, t_tg = to_ns(everything["t_forecast"]), to_ns(everything["t_target"])
    start = day_starts(everything, spec.timezone)
    n = len(everything)
    found = [np.full(n, np.nan), np.full(n, np.nan), np.full(n, NO_TIME, np.int64),
             np.full(n, NO_TIME, np.int64)]
    minutes_list = sorted(set(momentum_minutes))
    signs = {m: (np.full(n, np.nan), np.full(n, NO_TIME, np.int64)) for m in minutes_list}
    summaries = []
    units = _read_units(plan, days, by_day, columns, tickers or spec.tickers)
    progress = Countdown("labels", len(units), echo, unit="reads")
    with ThreadPoolExecutor(max_workers=READERS) as pool:  # the next units are read while
        ahead = deque(pool.submit(u[0]) for u in units[:READERS])  # one is computed
        for i, (_, rows, span) in enumerate(units):
            bars = ahead.popleft().result() or empty_bars(plan.store.bar_seconds)
            progress.add()
            if i + READERS < len(units):
                ahead.append(pool.submit(units[i + READERS][0]))
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
                    tick, t_fc[rows], t_tg[rows], bars,
                    window_seconds=spec.ref_window_seconds, slices=slices), strict=True):
                target[rows] = value
            for m in minutes_list:
                sign, seen = momentum_arrays(bars, tick, t_fc[rows], start[rows], m,
                                             slices=slices)
                signs[m][0][rows], signs[m][1][rows] = sign, seen
    labels = label_frame(everything["task_id"].to_numpy(),
                         everything["t_target"].reset_index(drop=True), *found)
    history = pd.concat([everything.reset_index(drop=True),
                         labels.drop(columns="task_id")], axis=1)
    for m in minutes_list:
        history[f"momentum_sign_{m}"], history[f"momentum_seen_ns_{m}"] = signs[m]
    days_frame = pd.concat(summaries, ignore_index=True) if summaries else empty_daily()
    return history, days_frame


def _encoded(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(distinct texts, code of each row) of a text column, by Arrow's hash kernel."""
    encoded = arrow_text(column).dictionary_encode()
    return (np.asarray(encoded.dictionary.to_pylist(), dtype=str),
            encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64))


def _read_units(plan: Plan, days: list[str], by_day: dict, columns, tickers) -> list[tuple]:
    """(reader of bars, rows of the tasks they serve, sessions it summarises or None for
    all) in date order.

    When the store's dates are the tasks' local dates, a unit is one date partition, read as
    it lies. Otherwise (a store kept in another zone) a session's bars may sit in two
    partitions, so a unit is a calendar month, read and laid out per ticker."""
    spec = plan.config.tasks
    none = np.empty(0, np.int64)
    if plan.store.timezone == spec.timezone:
        return [(partial(plan.store.read_day_arrays, dt.date.fromisoformat(day),
                         tickers=tickers, columns=columns), by_day.get(day, none), None)
                for day in days]
    if not days:
        return []
    units = []
    for first, last in month_ranges(dt.date.fromisoformat(days[0]),
                                    dt.date.fromisoformat(days[-1])):
        rows = [by_day[d] for d in days if first.isoformat() <= d <= last.isoformat()
                and d in by_day]
        units.append((partial(plan.store.read_bar_arrays, tickers=tickers,
                              start=first - dt.timedelta(days=1),
                              end=last + dt.timedelta(days=1)),
                      np.concatenate(rows) if rows else none,
                      (first.isoformat(), last.isoformat())))
    return units


def empty_bars(bar_seconds: int) -> BarArrays:
    return BarArrays.from_columns(codes=np.empty(0, np.int64), names=np.empty(0, object),
                                  ts=np.empty(0, np.int64), bar_seconds=bar_seconds,
                                  **{c: np.empty(0) for c in ("open", "high", "low", "close",
                                                              "volume")})


def context_chunks(plan: Plan, tasks: pd.DataFrame, daily: pd.DataFrame
                   ) -> Iterator[tuple[pd.DataFrame, ContextIndex, BarArrays]]:
    """Pass 2: (tasks of a month, their gated contexts, the month's bars), in task order."""
    if tasks.empty:
        return
    ctx, spec = plan.config.context, plan.config.tasks
    first = dt.date.fromisoformat(tasks["session"].min())
    last = dt.date.fromisoformat(tasks["session"].max())
    lookback = dt.timedelta(hours=ctx.headline_hours + 24)
    for start, stop in month_ranges(first, last):
        chunk = _in_range(tasks, start, stop).reset_index(drop=True)
        if chunk.empty:
            continue
        bars = read_bars(plan, start, stop)
        news = plan.store.read_headlines(start=start - lookback, end=stop)
        news = news[news["tickers"].map(lambda ts: any(t in spec.tickers for t in ts))]
        index = ContextIndex(chunk, bars, news.reset_index(drop=True),
                             previous_sessions=ctx.previous_sessions,
                             headline_hours=ctx.headline_hours, max_headlines=ctx.max_headlines,
                             calendar=spec.calendar, timezone=spec.timezone, daily=daily)
        yield chunk, index, bars


def tasks_at(frame: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """``frame``'s rows at ``rows`` (renumbered from 0): a slice, not a copy, when they are
    consecutive (a month of tasks, all still to answer), since every month's inputs are kept
    until the last forecaster has answered it."""
    if len(rows) and rows[-1] - rows[0] + 1 == len(rows) and (np.diff(rows) == 1).all():
        return frame.iloc[rows[0]:rows[-1] + 1].reset_index(drop=True)
    return frame.iloc[rows].reset_index(drop=True)


def scorability(plan: Plan, labels: pd.DataFrame) -> list[str]:
    """Warnings about tasks that cannot be scored for a reason the user may not expect (a
    ticker without bars, sessions outside the store's dates), with counts; a RunError when
    the run has no task at all, or none can be scored (before anything is paid for)."""
    spec = plan.config.tasks
    excluded = plan.excluded["reason"].value_counts().to_dict()
    if plan.tasks.empty:
        why = (f"every session is left out ({', '.join(f'{k}: {v} tasks' for k, v in excluded.items())}"
               f"; the target {spec.target} is at or after the close)" if excluded
               else f"the exchange {spec.calendar} holds no session in it")
        raise RunError(f"no tasks: {spec.start}..{spec.end} gives none: {why}")
    warnings = []
    ok = (labels["status"] == "ok").to_numpy(bool)
    names, code = _encoded(plan.tasks["ticker"])
    scorable = np.bincount(code, weights=ok, minlength=len(names))
    dead = [t for t, n in zip(names, scorable, strict=True) if n == 0]
    if dead:
        count = int(np.bincount(code, minlength=len(names))[scorable == 0].sum())
        warnings.append(f"{', '.join(dead)}: no scorable task on these dates (no bars in the "
                        f"store at the horizons and target?): {count} tasks unscorable")
    dates = plan.store.dates("bars")
    sessions = plan.tasks["session"]
    if dates:
        first, last = dates[0].isoformat(), dates[-1].isoformat()
        out = ((sessions < first) | (sessions > last)).to_numpy(bool)
        outside = sessions[out].unique()
        if len(outside):
            warnings.append(f"{len(outside)} session(s) lie outside the store's dates "
                            f"{first}..{last} ({outside[0]}..{outside[-1]}): {int(out.sum())} "
                            "tasks unscorable")
    if not ok.any():
        counts = labels["status"].value_counts().to_dict()
        raise RunError(f"nothing can be scored: all {len(labels)} tasks are unscorable "
                       f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))})"
                       + (f"; {'; '.join(warnings)}" if warnings else ""))
    return warnings


def summary(plan: Plan, labels: pd.DataFrame) -> dict:
    """The manifest's facts about the tasks: counts, exclusions (tasks and sessions, by
    reason), label statuses, the data snapshot."""
    excluded = plan.excluded.assign(session=plan.excluded["task_id"].str.split("|").str[1])
    return {
        "tasks": len(plan.tasks),
        "excluded": excluded["reason"].value_counts().sort_index().to_dict(),
        "excluded_sessions": excluded.groupby("reason")["session"].nunique().sort_index()
        .to_dict(),
        "labels": status_counts(labels),
        "history_tasks": len(plan.history_tasks),
        "store_snapshot_sha256": plan.store.snapshot_sha256,
        "synthetic": plan.store.synthetic,
    }
