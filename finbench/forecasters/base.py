"""The forecaster base class: ``forecast`` times, validates and stamps around ``_answer``,
and hands back forecast rows as an Arrow table (:mod:`finbench.runlog.rows`)."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import Future

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from finbench.core.jsontext import json_array
from finbench.core.lookup import arrow_text
from finbench.forecasters.answers import NOT_APPLICABLE, ParsedAnswer, parse_answer
from finbench.runlog.rows import (
    ANSWERED,
    CLASS_COLUMNS,
    forecast_rows,
    latest,
    time_array,
)
from finbench.tracks import get_track, list_tracks
from finbench.tracks.base import Inputs, Prompt


class Forecaster(ABC):
    """Answers a batch of tasks. Subclasses implement ``_answer``, returning one raw answer
    (JSON text or a mapping) per task plus optional per-task columns; ``forecast`` validates
    every answer with the strict schema and stamps receipts."""

    kind: str = ""
    streaming = False  # True: answers are journalled one by one via ``run_stream``
    needs_context = True  # False: answers from the label history alone (no contexts built)

    def __init__(self, config, prompt: Prompt | None = None) -> None:
        """``prompt``: how the run's track words a task (read by forecasters that prompt a
        language model)."""
        self.config = config
        self.name = config.name
        self.prompt = prompt

    def asked(self, tasks: pd.DataFrame) -> np.ndarray:
        """Which of ``tasks`` this forecaster is asked (by default: those of its configured
        horizons, or all). A task not asked gets no forecast row: it is neither an answer nor
        an invalid one."""
        horizons = self.config.horizons
        if horizons is None:
            return np.ones(len(tasks), dtype=bool)
        return tasks["horizon"].isin(horizons).to_numpy(bool)

    def start_receipts(self, inputs: Inputs, helper=None) -> None:
        """Begin what stamping ``inputs``' receipts takes, before :meth:`forecast` is asked
        (a baseline has the digests of its input lines made by ``helper``, a
        :class:`~finbench.core.digests.Sha256Helper`, meanwhile); nothing by default."""
        return

    def notes(self, tasks: pd.DataFrame) -> list[str]:
        """What a user should know about this forecaster in a run over ``tasks`` (printed and
        kept in the manifest); none by default."""
        return []

    def forecast(self, inputs: Inputs) -> pa.Table:
        """Forecast rows for ``inputs.tasks``, in their order: every answer validated with
        the strict schema (invalid ones kept, with the reason) and stamped with its
        receipts (latest input time, SHA-256 of the input)."""
        rows, finish = self.forecast_later(inputs)
        return rows if finish is None else finish(rows)

    def forecast_later(self, inputs: Inputs
                       ) -> tuple[pa.Table, Callable[[pa.Table], pa.Table] | None]:
        """:meth:`forecast`'s rows without waiting for their input digests while a helper
        still makes them (:meth:`start_receipts`): (the rows, ``input_sha256`` missing
        until ``finish(rows)`` puts the digests in, waiting for them; None when the rows
        are whole). A caller with a thread that writes the rows hands ``finish`` to it."""
        start = time.perf_counter()
        answers, extra = self._answer(inputs)
        elapsed = time.perf_counter() - start
        n = len(inputs.tasks)
        if len(answers) != n:
            raise RuntimeError(f"{self.name}: {len(answers)} answers for {n} tasks")
        if isinstance(answers, pd.DataFrame):
            parsed = (validate_class_arrays(answers) if "q_up" in answers
                      else validate_arrays(answers))
        else:
            parsed = _parsed_columns(answers)
        ctx_time, digests = self._receipts(inputs)
        pending = digests if isinstance(digests, Future) and not digests.done() else None
        if isinstance(digests, Future) and pending is None:
            digests = digests.result()
        ctx_time = time_array(ctx_time, n)
        hist_time = time_array(extra.pop("history_max_input_time", None), n)
        rows = forecast_rows({
            "task_id": arrow_text(inputs.tasks["task_id"]),
            "model": self.name,
            "kind": self.kind,
            **parsed,
            "max_input_time": latest(ctx_time, hist_time),
            "context_max_input_time": ctx_time,
            "history_max_input_time": hist_time,
            "input_sha256": None if pending is not None else digests,
            "answer_status": ANSWERED,
            **{c: parsed.pop(c, None) for c in CLASS_COLUMNS},
            "p_fallback": extra.pop("p_fallback", None),
            "interval_note": extra.pop("interval_note", parsed.pop("interval_note", None)),
            "history_count": extra.pop("history_count", -1),
            "detail": extra.pop("detail", None),
            "latency": elapsed / max(n, 1),
            "tokens": None,
        }, n)
        if pending is None:
            return rows, None
        at = rows.schema.get_field_index("input_sha256")
        return rows, lambda table: table.set_column(at, table.schema.field(at),
                                                    pending.result())

    def _receipts(self, inputs: Inputs) -> tuple[object, Sequence[str] | pa.Array | Future]:
        """(latest availability of what each task's input holds, as times or UTC ns with -1
        for none; SHA-256 of that input, or a Future of it)."""
        return inputs.contexts.max_input_time, inputs.contexts.digests()

    @abstractmethod
    def _answer(self, inputs: Inputs) -> tuple[list, dict]:
        """Return (raw answers, extra per-task columns)."""


def _parsed_columns(answers: list) -> dict[str, list]:
    """Each raw answer (JSON text, mapping or :class:`ParsedAnswer`) validated, as columns."""
    parsed = [a if isinstance(a, ParsedAnswer) else parse_answer(a) for a in answers]
    return {name: [getattr(p, name) for p in parsed]
            for name in ("p_up", "lower", "upper", "valid", "error", "raw", "rationale",
                         "interval_note", *CLASS_COLUMNS)}


def validate_arrays(answers: pd.DataFrame) -> dict[str, object]:
    """The schema's rules (finite numbers, 0 <= p_up <= 1, lower <= upper) applied to whole
    columns, for forecasters that answer with arrays (the baselines). A row whose
    ``interval_note`` says why it has no interval must have none (``lower`` and ``upper`` NaN)
    and is checked on its probability alone; a row whose ``refused`` holds a reason is invalid
    with that reason. Raw text is the answer's JSON (without the interval when there is
    none)."""
    n = len(answers)
    p, lo, hi = (answers[c].to_numpy(float) for c in ("p_up", "lower", "upper"))
    none = np.full(n, None, dtype=object)
    refused = answers["refused"].to_numpy(object) if "refused" in answers else none
    note = _note_text(answers, n)
    no_interval = note.is_valid().to_numpy(zero_copy_only=False)
    error = np.full(n, None, dtype=object)
    checks = (
        (no_interval & ~(np.isnan(lo) & np.isnan(hi)),
         "schema: an interval is given with interval_note set"),
        (~no_interval & ~np.isfinite(hi), "schema: upper: Input should be a finite number"),
        (~no_interval & ~np.isfinite(lo), "schema: lower: Input should be a finite number"),
        (np.isfinite(lo) & np.isfinite(hi) & (lo > hi), "schema: answer: lower is above upper"),
        (~((p >= 0) & (p <= 1)), "schema: p_up: Input should lie in [0, 1]"),
    )
    invalid = np.zeros(n, dtype=bool)
    for bad, message in checks:
        error[bad] = message
        invalid |= bad
    if "refused" in answers:
        has_reason = pd.notna(refused).astype(bool)
        error[has_reason] = refused[has_reason]
        invalid |= has_reason
    valid = ~invalid
    if not invalid.any():
        error = None  # no error in any row: the column is empty
    if no_interval.all():  # a forecaster without intervals: its answers are probabilities
        raw = json_array({"p_up": p}, n)
    else:
        raw = json_array({c: answers[c].to_numpy(float) for c in ("p_up", "lower", "upper")}, n)
        if no_interval.any():
            raw = pc.if_else(pa.array(no_interval), json_array({"p_up": p}, n), raw)
    raw = pc.if_else(pa.array(valid), raw, pa.scalar("", pa.string()))
    nan = np.full(n, np.nan)
    if not valid.all():
        note = pc.if_else(pa.array(valid), note, pa.scalar(None, pa.string()))
    return {"p_up": np.where(valid, p, nan), "lower": np.where(valid, lo, nan),
            "upper": np.where(valid, hi, nan), "valid": valid, "error": error,
            "raw": raw, "rationale": None, "interval_note": note}


def _note_text(answers: pd.DataFrame, n: int) -> pa.Array:
    """The answers' ``interval_note`` as Arrow text (missing: none given), converted once:
    a column of Arrow text (a baseline's) as it is, Python texts one by one."""
    if "interval_note" not in answers:
        return pa.nulls(n, pa.string())
    note = pa.array(answers["interval_note"], pa.string(), from_pandas=True)
    return note.combine_chunks() if isinstance(note, pa.ChunkedArray) else note


SUM_TOLERANCE = 1e-9  # how far from 1 three class probabilities computed here may sum


def validate_class_arrays(answers: pd.DataFrame) -> dict[str, object]:
    """A three-class answer per row (``q_down``, ``q_flat``, ``q_up``) checked on whole
    columns: each in [0, 1], their sum 1 within :data:`SUM_TOLERANCE`; a row whose
    ``refused`` holds a reason is invalid with it. The binary parts are absent (``p_up`` and
    the interval NaN, ``interval_note = "not_applicable"``)."""
    n = len(answers)
    q = answers[["q_down", "q_flat", "q_up"]].to_numpy(float)
    error = np.full(n, None, dtype=object)
    with np.errstate(invalid="ignore"):
        inside = ((q >= 0) & (q <= 1)).all(axis=1)
        summed = np.abs(q.sum(axis=1) - 1) <= SUM_TOLERANCE
    error[~summed] = f"schema: q_down + q_flat + q_up is not 1 (within {SUM_TOLERANCE:g})"
    error[~inside] = "schema: a class probability is not in [0, 1]"
    if "refused" in answers:
        reason = answers["refused"].to_numpy(object)
        has = pd.notna(reason).astype(bool)
        error[has] = reason[has]
    valid = ~pd.notna(error).astype(bool)
    raw = json_array({"q_down": q[:, 0], "q_flat": q[:, 1], "q_up": q[:, 2]}, n)
    nan = np.full(n, np.nan)
    return {"p_up": nan, "lower": nan, "upper": nan, "valid": valid, "error": error,
            "raw": pc.if_else(pa.array(valid), raw, pa.scalar("", pa.string())),
            "rationale": None, "interval_note": NOT_APPLICABLE,
            "q_down": q[:, 0], "q_flat": q[:, 1], "q_up": q[:, 2],
            "excluded_mass": answers["excluded_mass"].to_numpy(float)
            if "excluded_mass" in answers else nan}


def make_record(*, task_id: str, model: str, kind: str, parsed: ParsedAnswer, max_input_time,
                context_max_input_time, history_max_input_time, input_sha256: str,
                history_count: int = -1, detail: str | None = None, latency: float = 0.0,
                tokens: int | None = None, answer_status: str = ANSWERED) -> dict:
    """One forecast row as a plain dict (the journal's unit)."""
    return {
        "task_id": task_id, "model": model, "kind": kind, "p_up": parsed.p_up,
        "lower": parsed.lower, "upper": parsed.upper, "valid": parsed.valid,
        "error": parsed.error, "answer_status": answer_status, "p_fallback": None,
        **{c: getattr(parsed, c) for c in CLASS_COLUMNS},
        "interval_note": parsed.interval_note,
        "raw": parsed.raw, "rationale": parsed.rationale,
        "max_input_time": max_input_time, "context_max_input_time": context_max_input_time,
        "history_max_input_time": history_max_input_time, "input_sha256": input_sha256,
        "history_count": history_count, "detail": detail, "latency": latency, "tokens": tokens,
    }


registry: dict[str, type[Forecaster]] = {}


def register(kind: str):
    def wrap(cls: type[Forecaster]) -> type[Forecaster]:
        cls.kind = kind
        registry[kind] = cls
        return cls

    return wrap


def build_forecaster(config, prompt: Prompt | None = None) -> Forecaster:
    """The forecaster for a model config, by its ``kind``; ``prompt``: the track's
    (:attr:`finbench.tracks.base.Track.prompt`), for the forecasters prompting a model. The
    shared kinds are registered here; a track's own (its baselines, references) by its
    plugin's module, which is imported when the track is first asked for."""
    import finbench.forecasters.external  # noqa: F401 - registers kinds
    import finbench.forecasters.llm  # noqa: F401
    import finbench.forecasters.replay  # noqa: F401
    import finbench.forecasters.scripted  # noqa: F401

    if config.kind not in registry:
        for name in list_tracks():  # a model config made without its track's config
            get_track(name)
    if config.kind not in registry:
        raise KeyError(config.kind)
    return registry[config.kind](config, prompt)
