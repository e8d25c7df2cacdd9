"""Time-valid baselines, vectorised over all tasks (docs/spec.md §7).

A label becomes known at its ``t_target``; a baseline forecasting at ``t_forecast`` uses only
labels of the same ticker and horizon with ``label_known_at < t_forecast`` (so a 15:55 label
of day d is used from day d+1 on). Its window is the last ``window`` resolved (scorable)
labels of that series, however far back they lie: the run reads history back until every
window is full or the store begins
(:func:`finbench.tracks.intraday.label_pass.fill_windows`), so an answer is a function of
the task, the store and the baseline's parameters, never of the run's dates.

A forecast has two parts. Every baseline gives a probability; only ``climatology`` gives an
interval (the others' ``interval_note`` is ``not_applicable``: they are scored on their
probability alone). Where a rule lacks the history it needs, the declared fallback gives the
probability and ``p_fallback`` says which and why; an interval that cannot be formed is left
out with ``interval_note = "insufficient_history: ..."``. Neither makes the answer invalid.

- ``coin``: ``p_up = 0.5``.
- ``base_rate`` (rolling): mean of ``y`` over the window; fewer than ``min_count`` labels → 0.5.
  ``frozen``: the rate over the declared training sessions (which must end before the
  evaluation starts), never updated; fewer than ``min_count`` training labels → 0.5.
- ``momentum``: ``s`` = sign of the log mid return over the last ``lookback_minutes`` of the
  session's gated bars (computed in the label pass, :func:`finbench.tracks.intraday.momentum.momentum_sign`);
  ``p_up = (ups with s + 1) / (n with s + 2)`` over the window; with
  ``n < min_count`` (or no sign, when a bar is missing) it falls back to the rolling base rate.
- ``climatology``: ``p_up`` = rolling base rate; interval = empirical 10% / 90% quantiles of
  the window's returns (linear interpolation), given from ``min_count`` returns on.

Each row records the labels used (``history_count``), the latest label time used, and in
``detail`` the probability's provenance and the window's span: its first and last session
and, from its first session to the task's, the labels of the series skipped (unscorable,
early close, not yet known).

Receipts. A baseline reads no context, so none is built for it: its input is the label
history known at ``t_forecast`` and, for ``momentum``, two bars of the session so far.
Each row's ``input_sha256`` hashes :func:`baseline_input_text`, one line per task naming
that input (the time through which its series' labels are known, and for momentum the
sign it reads), so ``finbench audit`` re-derives it from the store. Its
``context_max_input_time`` is when the latest bar it read became available (momentum
only).
"""

from __future__ import annotations

from concurrent.futures import Future

import numpy as np
import pandas as pd
import pyarrow as pa

from finbench.core.digests import Sha256Helper, digests
from finbench.core.errors import ConfigError
from finbench.core.jsontext import Fields, json_array, json_fields
from finbench.core.times import NO_TIME
from finbench.forecasters.answers import NOT_APPLICABLE
from finbench.forecasters.base import Forecaster, register
from finbench.tracks.intraday.history import (
    DEFAULT_MIN_COUNT,
    DEFAULT_WINDOW,
    History,
    baseline_input_text,
    history_rows,
    latest_label_known,
    pick,
    rolling_class_frequencies,
    rolling_quantiles,
    rolling_rate,
    window_details,
    window_rows,
)
from finbench.tracks.intraday.inputs import IntradayInputs


def _rows(inputs: IntradayInputs) -> np.ndarray:
    """:func:`history_rows` of the inputs, computed once for every baseline given them."""
    if "history_rows" not in inputs.shared:
        inputs.shared["history_rows"] = (
            history_rows(inputs.tasks, inputs.history) if inputs.history_rows is None
            else inputs.history_rows)
    return inputs.shared["history_rows"]


_DIGESTS = "baseline_digests"  # inputs.shared[(_DIGESTS, input_signs)]: the digests


def given_digests(inputs: IntradayInputs, digests: dict[tuple[str, ...], pa.Array]) -> IntradayInputs:
    """``inputs`` with the digests of its tasks' baseline input lines already known (per
    tuple of sign columns read, as :attr:`_Baseline.input_signs`; e.g. the audit's receipts,
    derived for every task): baselines answering them then hash nothing again."""
    inputs.shared.update({(_DIGESTS, signs): d for signs, d in digests.items()})
    return inputs


class _Baseline(Forecaster):
    needs_context = False

    def start_receipts(self, inputs: IntradayInputs, helper: Sha256Helper | None = None) -> None:
        """Have the digests of this baseline's input lines made (by ``helper``, while the
        caller goes on; else here, now), once for every baseline reading the same input."""
        key = (_DIGESTS, self.input_signs)
        if key not in inputs.shared:
            history = self._shared(inputs)
            if "input_line" not in inputs.shared:  # the line without signs, which others extend
                inputs.shared["input_line"] = baseline_input_text(
                    history, inputs.tasks, inputs.history, _rows(inputs))
            lines = baseline_input_text(history, inputs.tasks, inputs.history, _rows(inputs),
                                        self.input_signs, line=inputs.shared["input_line"])
            inputs.shared[key] = digests(lines, helper)

    def _receipts(self, inputs: IntradayInputs) -> tuple[np.ndarray, pa.Array | Future]:
        """(when the latest bar read became available, the input lines' digests: those
        made, or their Future while the helper makes them, shared by the baselines reading
        the same input)."""
        self.start_receipts(inputs)
        return self._bars_read(inputs), inputs.shared[(_DIGESTS, self.input_signs)]

    @property
    def input_signs(self) -> tuple[str, ...]:
        """The momentum sign columns this baseline reads (its receipt names them)."""
        return ()

    def _bars_read(self, inputs: IntradayInputs) -> np.ndarray:
        """When the latest bar this baseline read became available (UTC ns; NO_TIME for
        none): it reads none."""
        return np.full(len(inputs.tasks), NO_TIME, np.int64)

    def _window(self) -> tuple[int, int]:
        return (getattr(self.config, "window", DEFAULT_WINDOW),
                getattr(self.config, "min_count", DEFAULT_MIN_COUNT))

    def _shared(self, inputs: IntradayInputs) -> History:
        if inputs.known is not None:
            return inputs.known
        return History(inputs.history, inputs.sessions)

    def _answer(self, inputs: IntradayInputs) -> tuple[pd.DataFrame, dict]:
        history = self._shared(inputs)
        p, details, fallback, last = self._probability(history, inputs)
        lower, upper, note, interval_last = self._interval(history, inputs)
        answers = _frame({"p_up": p, "lower": lower, "upper": upper, "interval_note": note})
        count = details["rate_count"].to_numpy(np.int64) if "rate_count" in details else (
            np.zeros(len(p), np.int64))
        extra = {
            "history_count": count,
            "p_fallback": fallback,
            "detail": self._detail(history, inputs, details),
            "history_max_input_time": np.maximum(last, interval_last),  # UTC ns, NO_TIME: none
        }
        return answers, extra

    def _detail(self, history: History, inputs: IntradayInputs, details: pd.DataFrame) -> pa.Array:
        """The detail column: ``details`` as JSON, then :meth:`_detail_tail`'s fields. When
        they are the rolling rate's alone (:attr:`_rate_details`), the text is written once
        for every baseline with that window and min_count given the same inputs."""
        if not self._rate_details:
            return _detail_json(details, self._detail_tail(history, inputs))
        key = ("rate_detail", *self._window())
        if key not in inputs.shared:
            inputs.shared[key] = _detail_json(details, self._detail_tail(history, inputs))
        return inputs.shared[key]

    @property
    def _rate_details(self) -> bool:
        """Whether this baseline's details are :meth:`_rolling_rate`'s and the window's span,
        nothing else."""
        return False

    def _detail_tail(self, history: History, inputs: IntradayInputs) -> Fields | None:
        """Detail fields this baseline shares with others given the same inputs, made once
        for them all (:func:`_window_fields`), or None."""
        return None

    def _probability(self, history: History, inputs: IntradayInputs):
        """(p, details frame, fallback reason or None, latest label time used or NO_TIME) per
        task."""
        raise NotImplementedError

    def _interval(self, history: History, inputs: IntradayInputs):
        """(lower, upper, interval_note, latest label time used or NO_TIME) per task: by default
        a baseline gives no interval (``not_applicable``)."""
        n = len(inputs.tasks)
        return (np.full(n, np.nan), np.full(n, np.nan),
                pa.repeat(pa.scalar(NOT_APPLICABLE, pa.string()), n),
                np.full(n, NO_TIME, np.int64))

    def _rolling_rate(self, history: History, inputs: IntradayInputs):
        """The rolling base rate with its details and fallback (to 0.5 below ``min_count``).
        The rate and the window's span are shared by the baselines given the same inputs
        (24 and 40 bytes a task, kept until the last baseline has answered); the details and
        texts made from them are each baseline's own."""
        window, min_count = self._window()
        p, count, last = _shared_rate(history, inputs, window, min_count)
        details = _frame({"p": p, "rate_count": count})  # the window's span: _detail_tail
        fallback = _text_array(count < min_count, lambda c: _rate_fallback(c, min_count),
                               count)
        return p, details, fallback, last


@register("coin")
class Coin(_Baseline):
    def _probability(self, history, inputs):
        n = len(inputs.tasks)
        return (np.full(n, 0.5), pd.DataFrame({"p": np.full(n, 0.5)}), None,
                np.full(n, NO_TIME, np.int64))


@register("base_rate")
class BaseRate(_Baseline):
    def _probability(self, history, inputs):
        if self.config.variant == "frozen":
            return self._frozen(history, inputs)
        return self._rolling_rate(history, inputs)

    def _detail_tail(self, history, inputs):
        if self.config.variant == "frozen":
            return None
        return _window_fields(history, inputs, self._window()[0])

    @property
    def _rate_details(self) -> bool:
        return self.config.variant != "frozen"

    def _training(self, history: History) -> pd.DataFrame:
        start, end = str(self.config.train_start), str(self.config.train_end)
        rows = history.frame()
        return rows[((rows["session"] >= start) & (rows["session"] <= end)).to_numpy(bool)]

    def _frozen(self, history: History, inputs: IntradayInputs):
        first_eval = inputs.tasks["session"].min()
        if str(self.config.train_end) >= first_eval:
            raise ConfigError(
                f"models.{self.name}: train_end {self.config.train_end} is not before the first "
                f"evaluated session {first_eval}; a frozen rate must exist before evaluation")
        train = self._training(history)
        stats = train.groupby(["ticker", "horizon"])["y"].agg(["sum", "count"])
        _, min_count = self._window()
        keys = pd.MultiIndex.from_arrays([inputs.tasks["ticker"], inputs.tasks["horizon"]])
        found = stats.reindex(keys)
        c = found["count"].fillna(0).to_numpy(np.int64)
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.where(c >= min_count, found["sum"].to_numpy(float) / c, 0.5)
        details = pd.DataFrame({"p": p, "rate_count": c}).assign(
            train=f"{self.config.train_start}..{self.config.train_end}")
        fallback = _text_array(c < min_count, "0.5: {} training labels < min_count "
                               f"{min_count}", c)
        last = train["known_ns"].max() if len(train) else NO_TIME
        return p, details, fallback, np.full(len(keys), last, np.int64)


@register("momentum")
class Momentum(_Baseline):
    @property
    def _sign_column(self) -> str:
        return f"momentum_sign_{self.config.lookback_minutes}"

    @property
    def input_signs(self) -> tuple[str, ...]:
        return (self._sign_column,)

    def _shared(self, inputs: IntradayInputs) -> History:
        if self._sign_column not in inputs.history:
            raise KeyError(f"history lacks {self._sign_column}: compute it in the label pass")
        return super()._shared(inputs)

    def _detail_tail(self, history, inputs):
        return _window_fields(history, inputs, self._window()[0])

    def _bars_read(self, inputs: IntradayInputs) -> np.ndarray:
        column = f"momentum_seen_ns_{self.config.lookback_minutes}"
        return pick(inputs.history[column].to_numpy(np.int64), _rows(inputs), fill=NO_TIME)

    def _probability(self, history, inputs):
        tasks = inputs.tasks
        window, min_count = self._window()
        base_p, details, _, last = self._rolling_rate(history, inputs)
        sign = pick(inputs.history[self._sign_column].to_numpy(float), _rows(inputs))
        lo, end = window_rows(history, tasks, window)
        column = self._sign_column
        n_s, up_s = np.zeros(len(tasks), np.int64), np.zeros(len(tasks), np.int64)
        for v in (-1.0, 0.0, 1.0):  # counts over the whole history, made once per run
            def match(v=v):
                return history.column(column).astype(float) == v

            cn = history.cumulative(f"{column}={v}", match)
            cu = history.cumulative(f"{column}={v},up", lambda m=match: m() & (history.y == 1))
            sel = sign == v
            n_s[sel] = (cn[end] - cn[lo])[sel]
            up_s[sel] = (cu[end] - cu[lo])[sel]
        p = base_p.copy()
        no_sign = np.isnan(sign)
        use = ~no_sign & (n_s >= min_count)
        p[use] = (up_s[use] + 1.0) / (n_s[use] + 2.0)
        details["p"] = p
        details["sign"] = pd.array(np.where(no_sign, 0, sign).astype(int), dtype="Int64")
        details.loc[no_sign, "sign"] = pd.NA
        details["sign_count"], details["sign_up"] = n_s, up_s
        count = details["rate_count"].to_numpy(np.int64)

        def reason(missing: int, n: int, s: int, short: int) -> str:
            why = ("no momentum sign (a bar of its lookback is missing)" if missing
                   else f"{n} labels with sign {s:+d} < min_count {min_count}")
            then = "" if short < 0 else "; its " + _rate_fallback(short, min_count)
            return "base_rate: " + why + then

        # the base rate's own fallback, quoted when its window holds too few labels
        fallback = _text_array(~use, reason, no_sign, n_s, np.nan_to_num(sign),
                               np.where(count < min_count, count, -1))
        return p, details, fallback, last


@register("climatology")
class Climatology(_Baseline):
    """The rolling base rate as its probability, and the empirical 10% / 90% quantiles of the
    past returns of its window as its interval (abstaining below ``min_count`` returns)."""

    def _probability(self, history, inputs):
        return self._rolling_rate(history, inputs)

    def _detail_tail(self, history, inputs):
        return _window_fields(history, inputs, self._window()[0])

    _rate_details = True

    def _interval(self, history, inputs):
        window, min_count = self._window()
        lower, upper = rolling_quantiles(history, inputs.tasks, window)
        _, count, last = _shared_rate(history, inputs, window, min_count)
        short = count < min_count
        note = _text_array(short, "insufficient_history: {} past returns < min_count "
                           f"{min_count}", count)
        return (np.where(short, np.nan, lower), np.where(short, np.nan, upper),
                pa.nulls(len(short), pa.string()) if note is None else note, last)


def _window_details(history: History, inputs: IntradayInputs, window: int) -> dict[str, object]:
    """:func:`window_details` of the inputs' tasks, computed once for every baseline with
    that window given them."""
    key = ("window_details", window)
    if key not in inputs.shared:
        inputs.shared[key] = window_details(history, inputs.tasks, window)
    return inputs.shared[key]


def _window_fields(history: History, inputs: IntradayInputs, window: int) -> Fields:
    """The detail fields of :func:`_window_details` (the window's span; their keys sort after
    the baselines' own), written once for every baseline with that window given them."""
    key = ("window_fields", window)
    if key not in inputs.shared:
        inputs.shared[key] = json_fields(_window_details(history, inputs, window),
                                         len(inputs.tasks))
    return inputs.shared[key]


def _shared_rate(history: History, inputs: IntradayInputs, window: int, min_count: int):
    """:func:`rolling_rate` of the inputs' tasks, computed once for every baseline given them
    (callers copy before changing it)."""
    key = ("rolling_rate", window, min_count)
    if key not in inputs.shared:
        inputs.shared[key] = rolling_rate(history, inputs.tasks, window, min_count)
    return inputs.shared[key]


def _rate_fallback(count: int, min_count: int) -> str:
    """Why the rolling base rate is 0.5 (its window holds too few labels)."""
    return f"0.5: {count} labels in the window < min_count {min_count}"


def _text_array(mask: np.ndarray, template, *columns: np.ndarray) -> pa.Array | None:
    """``template.format(*values)`` (or ``template(*values)``, a function) where ``mask``
    holds (missing elsewhere), written once per distinct combination of the integer
    ``columns``, as Arrow text (each row picks its text from the distinct ones: no text
    object per row); None where ``mask`` holds nowhere (a column without a value)."""
    if not mask.any():
        return None
    texts, which = _distinct_texts(mask, template, *columns)
    codes = np.full(len(mask), -1, np.int64)
    codes[mask] = which
    return pa.array(texts, pa.string()).take(pa.array(codes, mask=codes < 0))


def _distinct_texts(mask: np.ndarray, template, *columns: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(the text of each distinct combination of ``columns`` where ``mask`` holds, which of
    them each such row has)."""
    values = [np.asarray(c, np.int64)[mask] for c in columns]
    combination = np.zeros(len(values[0]), np.int64)  # one number per combination
    for v in values:
        distinct, code = np.unique(v, return_inverse=True)
        combination = combination * len(distinct) + code.ravel()
    _, first, which = np.unique(combination, return_index=True, return_inverse=True)
    make = template if callable(template) else template.format
    texts = np.array([make(*(int(v[i]) for v in values)) for i in first], dtype=object)
    return texts, which.ravel()


def _frame(columns: dict[str, object]) -> pd.DataFrame:
    """A frame of the columns as given: object arrays (texts and None) stay objects, not
    converted to pandas' string type, which the answer's checks and JSON would convert back."""
    return pd.DataFrame({k: pd.Series(v, dtype=object)
                         if isinstance(v, np.ndarray) and v.dtype.kind == "O" else v
                         for k, v in columns.items()})


def _detail_json(frame: pd.DataFrame, tail: Fields | None = None) -> pa.Array:
    """One compact JSON object per row, keys sorted: the frame's columns, then ``tail``."""
    return json_array({c: frame[c].to_numpy() if frame[c].dtype.kind != "O" else frame[c]
                       for c in frame.columns}, len(frame), tail)


class _ClassBaseline(_Baseline):
    """A three-class reference: ``q_down``, ``q_flat``, ``q_up`` per task (no ``p_up``, no
    interval), read from the label history like the binary baselines."""

    def _answer(self, inputs: IntradayInputs) -> tuple[pd.DataFrame, dict]:
        history = self._shared(inputs)
        q, count, fallback, last, details = self._classes(history, inputs)
        answers = pd.DataFrame({"q_down": q[:, 0], "q_flat": q[:, 1], "q_up": q[:, 2]})
        return answers, {"history_count": count, "p_fallback": fallback,
                         "detail": _detail_json(details, self._detail_tail(history, inputs)),
                         "history_max_input_time": last}

    def _classes(self, history: History, inputs: IntradayInputs):
        """(n x 3 probabilities, labels used, fallback reason or None, latest label time used
        or NO_TIME, details frame) per task."""
        raise NotImplementedError


@register("class_uniform")
class ClassUniform(_ClassBaseline):
    def _classes(self, history, inputs):
        n = len(inputs.tasks)
        return (np.full((n, 3), 1 / 3), np.zeros(n, np.int64), np.full(n, None, object),
                np.full(n, NO_TIME, np.int64), pd.DataFrame({"q": np.full(n, "1/3")}))


@register("class_frequency")
class ClassFrequency(_ClassBaseline):
    """The frequencies of down, flat and up among the last ``window`` resolved labels of the
    task's ticker and horizon known before its ``t_forecast`` (the base rate's window);
    below ``min_count`` labels, 1/3 each (a declared fallback, counted)."""

    def _classes(self, history, inputs):
        window, min_count = self._window()
        q, count = rolling_class_frequencies(history, inputs.tasks, window, min_count)
        details = _frame({"q_down": q[:, 0], "q_flat": q[:, 1], "q_up": q[:, 2],
                          "rate_count": count})  # the window's span: _detail_tail
        fallback = _text_array(count < min_count, "1/3 each: {} labels in the window < "
                               f"min_count {min_count}", count)
        return q, count, fallback, latest_label_known(history, inputs.tasks), details

    def _detail_tail(self, history, inputs):
        return _window_fields(history, inputs, self._window()[0])
