"""Prompts of a whole batch of tasks, rendered from the arrays the gate already holds
(:class:`~finbench.tracks.intraday.gate.ContextIndex`): no per-task frames, no resampling.

What every task of a batch shares is formatted once (the previous sessions' lines, each
headline's JSON line, local clock times); a task's text is then its slices joined. The result
is the same text, character for character, as rendering each task's context on its own
(``tests/reference.py::naive_messages``, checked on every sample task).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from finbench.core.lookup import repeated
from finbench.core.times import NO_TIME, NS, to_ns
from finbench.tracks.intraday.anonymize import Redactor, alias, redact_dates
from finbench.tracks.intraday.gate import ContextIndex
from finbench.tracks.intraday.history import History, window_rows
from finbench.tracks.intraday.prompt import (
    BUCKET_MINUTES,
    RECENT_MINUTES,
    PromptSettings,
    system_message,
    user_message,
)

MINUTE = 60 * NS
DAY_MINUTES = 24 * 60


def _local_ns(ns: np.ndarray, timezone: str) -> np.ndarray:
    """UTC nanoseconds as local wall-clock nanoseconds (since the local epoch)."""
    if len(ns) == 0:
        return np.empty(0, np.int64)
    local = pd.DatetimeIndex(pd.to_datetime(ns, utc=True)).tz_convert(timezone)
    return local.tz_localize(None).asi8


def _clock(local_ns: np.ndarray) -> list[str]:
    """``HH:MM`` of local wall-clock nanoseconds."""
    minutes = (local_ns // MINUTE) % DAY_MINUTES
    return [f"{m // 60:02d}:{m % 60:02d}" for m in minutes.tolist()]


def _days(local_ns: np.ndarray) -> np.ndarray:
    """The local date of each instant as days since 1970-01-01."""
    return local_ns // (DAY_MINUTES * MINUTE)


def _ohlcv(o, h, lo, c, v) -> list[str]:
    """``open  high  low  close  volume`` of each row, as a prompt shows a bar."""
    return [f"  {a:.2f}  {b:.2f}  {x:.2f}  {d:.2f}  {int(e)}"
            for a, b, x, d, e in zip(o.tolist(), h.tolist(), lo.tolist(), c.tolist(), v.tolist(),
                                     strict=True)]


CLASS_NAMES = ("down", "flat", "up")


class PromptRenderer:
    """The chat messages of every task of a :class:`ContextIndex` (:meth:`messages`). Rows of
    the store's daily summaries and headlines are formatted when a task first shows them.
    ``history``: the run's indexed label history, for a variant shown ``settings.examples``
    earlier resolved tasks (the last that many labels of the task's ticker and horizon known
    before its forecast time: the same window a rolling baseline takes)."""

    def __init__(self, index: ContextIndex, settings: PromptSettings,
                 history: History | None = None) -> None:
        self.index, self.settings, self.history = index, settings, history
        tz = settings.timezone
        tasks = index.tasks
        self.system = system_message(settings)
        self.tickers, self.horizons = tasks["ticker"].tolist(), tasks["horizon"].tolist()
        self.sessions = tasks["session"].astype(str).tolist()
        t_local = _local_ns(index.t_fc, tz)
        self.t_clock = _clock(t_local)
        self.target_clock = _clock(_local_ns(to_ns(tasks["t_target"]), tz))
        self.session_day = (pd.to_datetime(tasks["session"]).to_numpy("datetime64[D]")
                            .view(np.int64))
        # a session's bars share one UTC offset (clocks change on a Sunday, at 2 am): the
        # offset at the horizon, checked against the first bar's (else converted bar by bar)
        self.offset = t_local - index.t_fc
        has = index.bar_hi > index.bar_lo
        first = np.where(has, index.bars.ts[np.minimum(index.bar_lo, len(index.bars.ts) - 1)]
                         if len(index.bars.ts) else 0, index.t_fc)
        self.one_offset = (_local_ns(first, tz) - first) == self.offset
        self.news_day, self.news_clock, self.news_when = self._news_times(tz)
        d = index.daily
        self._daily_cols = [d[c].to_numpy(float) for c in ("open", "high", "low", "close",
                                                            "volume")]
        self._daily_sessions = d["session"]
        self._source, self._headline = index.news["source"], index.news["headline"]
        self._daily: dict[int, tuple[str, int, str]] = {}
        self._lines: dict[int, str] = {}
        self._redacted: dict[int, str] = {}
        self.redact = Redactor(settings.names) if settings.anonymize else None
        self._example_lines: dict[int, str] = {}
        if settings.examples:
            lo, end = window_rows(history, tasks, settings.examples)
            self.example_lo, self.example_end = lo, end
            counts = np.maximum(end - lo, 0)
            rows = np.unique(np.repeat(lo - np.r_[0, np.cumsum(counts)[:-1]], counts)
                             + np.arange(counts.sum()))
            clocks = [_clock(_local_ns(to_ns(pd.Series(history.column(c)[rows])), tz))
                      for c in ("t_forecast", "t_target")]
            self._example_clock = dict(zip(rows.tolist(), zip(*clocks, strict=True),
                                           strict=True))

    def _news_times(self, tz: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Local day, ``HH:MM`` and ``YYYY-MM-DD HH:MM`` of the headlines these tasks show
        (other rows: left empty)."""
        index = self.index
        n = len(index.news)
        day, clock, when = (np.zeros(n, np.int64), repeated("", n),
                            repeated("", n))
        counts = np.maximum(index.hl_hi - index.hl_lo, 0)
        if counts.sum() == 0:
            return day, clock, when
        starts = np.repeat(index.hl_lo - np.r_[0, np.cumsum(counts)[:-1]], counts)
        rows = np.unique(starts + np.arange(counts.sum()))
        local = _local_ns(np.asarray(index._h_avail, np.int64)[rows], tz)
        day[rows] = _days(local)
        text = np.datetime_as_string(local.view("datetime64[ns]").astype("datetime64[m]"))
        clock[rows] = [t[11:16] for t in text.tolist()]
        when[rows] = [t.replace("T", " ") for t in text.tolist()]
        return day, clock, when

    def messages(self) -> list[list[dict[str, str]]]:
        """Every task's messages, in the index's task order."""
        return [self.task_messages(i) for i in range(len(self.index))]

    def task_messages(self, i: int) -> list[dict[str, str]]:
        s = self.settings
        ticker, session = self.tickers[i], self.sessions[i]
        user = user_message(
            settings=s, ticker=alias(ticker) if s.anonymize else ticker,
            session=session, horizon=self.horizons[i], t_clock=self.t_clock[i],
            target_clock=self.target_clock[i], bars=self._bars(i),
            sessions=self._sessions(i), headlines=self._headlines(i, session),
            examples=self._examples(i) if s.examples else "")
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]

    def example_receipts(self) -> tuple[list[list[str]], np.ndarray]:
        """Per task: the task ids of the examples it shows (newest first) and when the
        latest of them became known (ns; NO_TIME when it shows none)."""
        ids = self.history.column("task_id")
        known = self.history.known
        lo, end = self.example_lo, self.example_end
        shown = [ids[a:b][::-1].tolist() for a, b in zip(lo.tolist(), end.tolist(), strict=True)]
        latest = np.where(end > lo, known[np.maximum(end - 1, 0)] if len(known) else NO_TIME,
                          NO_TIME)
        return shown, latest.astype(np.int64)

    def _examples(self, i: int) -> str:
        lo, end = int(self.example_lo[i]), int(self.example_end[i])
        if end <= lo:
            return "(none resolved yet)"
        return "\n".join(self._example_line(j, i) for j in range(end - 1, lo - 1, -1))

    def _example_line(self, j: int, i: int) -> str:
        """Row ``j`` of the history as an example: its session (a day number relative to
        task ``i``'s when anonymized), its forecast and target clock times, the log return
        and the outcome."""
        s, h = self.settings, self.history
        if not s.anonymize and j in self._example_lines:
            return self._example_lines[j]
        session = str(h.column("session")[j])
        shown = (f"day {int(np.datetime64(session, 'D').view(np.int64)) - self.session_day[i]}"
                 if s.anonymize else session)
        t_clock, target_clock = self._example_clock[j]
        r = float(h.r[j])
        if s.question == "binary":
            outcome = "up" if h.y[j] == 1 else "not up"
        else:
            outcome = CLASS_NAMES[int(h.column("cls")[j])]
        line = (f"{shown}  {t_clock} -> {target_clock} {s.zone}  log return {r:+.6f}  "
                f"outcome: {outcome}")
        if not s.anonymize:
            self._example_lines[j] = line
        return line

    def _bars(self, i: int) -> str:
        bars, lo, hi = self.index.bars, self.index.bar_lo[i], self.index.bar_hi[i]
        if hi <= lo:
            return "(no trades yet today)"
        ts, avail = bars.ts[lo:hi], bars.avail[lo:hi]
        local = (ts + self.offset[i] if self.one_offset[i]
                 else _local_ns(ts, self.settings.timezone))
        recent = avail > self.index.t_fc[i] - RECENT_MINUTES * MINUTE
        lines = ["start_ET  open  high  low  close  volume"]
        old = np.flatnonzero(~recent)
        if len(old):
            key = local[old] // (BUCKET_MINUTES * MINUTE)
            starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
            ends = np.r_[starts[1:], len(key)]
            at = old[starts]
            rest = _ohlcv(bars.open[lo:hi][at],
                          np.maximum.reduceat(bars.high[lo:hi][old], starts),
                          np.minimum.reduceat(bars.low[lo:hi][old], starts),
                          bars.close[lo:hi][old[ends - 1]],
                          np.add.reduceat(bars.volume[lo:hi][old], starts))
            labels = _clock(key[starts] * BUCKET_MINUTES * MINUTE)
            lines.append(f"-- earlier today, {BUCKET_MINUTES}min aggregates --")
            lines += [label + text for label, text in zip(labels, rest, strict=True)]
        lines.append(f"-- last {RECENT_MINUTES} minutes, 1-minute bars --")
        new = np.flatnonzero(recent)
        if len(new):
            rest = _ohlcv(*(getattr(bars, c)[lo:hi][new] for c in
                            ("open", "high", "low", "close", "volume")))
            lines += [label + text for label, text in zip(_clock(local[new]), rest, strict=True)]
        return "\n".join(lines)

    def _sessions(self, i: int) -> str:
        lo, hi = self.index.sum_lo[i], self.index.sum_hi[i]
        if hi <= lo:
            return "(none)"
        lines = ["session  open  high  low  close  volume"]
        for j in range(lo, hi):
            session, day, rest = self._daily_row(j)
            label = f"day {day - self.session_day[i]}" if self.settings.anonymize else session
            lines.append(label + rest)
        return "\n".join(lines)

    def _daily_row(self, j: int) -> tuple[str, int, str]:
        """A daily summary's session, its day number and its numbers as a line's rest."""
        row = self._daily.get(j)
        if row is None:
            session = str(self._daily_sessions.iat[j])
            rest = _ohlcv(*(col[j:j + 1] for col in self._daily_cols))[0]
            day = int(np.datetime64(session, "D").view(np.int64))
            row = self._daily[j] = (session, day, rest)
        return row

    def _headlines(self, i: int, session: str) -> str:
        lo, hi = self.index.hl_lo[i], self.index.hl_hi[i]
        if hi <= lo:
            return "(none)"
        rows = range(hi - 1, lo - 1, -1)  # newest first
        if not self.settings.anonymize:
            return "\n".join(self._line(j) for j in rows)
        key = f"available_{self.settings.zone}"
        return "\n".join(json.dumps({
            key: f"day {int(self.news_day[j] - self.session_day[i])} {self.news_clock[j]}",
            "source": self._source.iat[j],
            "headline": redact_dates(self._redacted_text(j), session)}, ensure_ascii=False)
            for j in rows)

    def _line(self, j: int) -> str:
        line = self._lines.get(j)
        if line is None:
            line = self._lines[j] = json.dumps({
                f"available_{self.settings.zone}": self.news_when[j],
                "source": self._source.iat[j],
                "headline": self._headline.iat[j]},
                ensure_ascii=False)
        return line

    def _redacted_text(self, j: int) -> str:
        text = self._redacted.get(j)
        if text is None:
            text = self._redacted[j] = self.redact(self._headline.iat[j])
        return text
