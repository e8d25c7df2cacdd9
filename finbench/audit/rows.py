"""Forecast rows against everything they can be re-derived from, one model and one month of
tasks at a time (so memory holds a month of rows, whatever the run's length): every task asked
of the model exactly once and no other; each row equal to its journal record; the answers of
forecasters that compute (baselines, replays, scripted) computed again from the store; an
LLM's answer re-read from the raw text it sent."""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from finbench.core.floats import within_ulps
from finbench.core.lookup import laid_positions, same_values
from finbench.runlog.forecast_table import read_part
from finbench.runlog.rows import ANSWERED, ERROR, FORECAST_COLUMNS, FORECAST_SCHEMA

SHOWN = 20  # violations named per model and check; the rest are counted
# answer columns a recomputation must give again (latency is a measurement, not an answer)
RECOMPUTED = [c for c in FORECAST_COLUMNS if c != "latency"]
# what an LLM row's raw text determines
FROM_RAW = ["valid", "error", "p_up", "lower", "upper", "rationale", "interval_note",
            "q_down", "q_flat", "q_up", "excluded_mass"]
# invalid answers without text: Batch API lines that failed, requests refused as sent (HTTP
# 4xx but 408/409/429); an online call that got no answer is a row of answer_status "error"
NO_TEXT = ("batch_", "http_4")


class Files:
    """Rows of Parquet files by (file, row), each file's row groups decoded once while used
    (the last few kept)."""

    def __init__(self, keep: int = 3) -> None:
        self.cache: OrderedDict = OrderedDict()
        self.keep = keep
        self.layout: dict[Path, np.ndarray] = {}

    def take(self, path: Path, rows: np.ndarray) -> pa.Table:
        """The rows ``rows`` of ``path``, in that order."""
        if path not in self.layout:
            meta = pq.ParquetFile(path).metadata
            self.layout[path] = np.cumsum([0] + [meta.row_group(i).num_rows
                                                 for i in range(meta.num_row_groups)])
        starts = self.layout[path]
        group = np.searchsorted(starts, rows, side="right") - 1
        parts, order = [], []
        for g in np.unique(group):
            mine = np.flatnonzero(group == g)
            parts.append(picked(self._group(path, int(g)), rows[mine] - starts[g]))
            order.append(mine)
        if not parts:
            return FORECAST_SCHEMA.empty_table()
        return in_order(pa.concat_tables(parts), np.concatenate(order))

    def _group(self, path: Path, g: int) -> pa.Table:
        key = (path, g)
        if key not in self.cache:
            table = pq.ParquetFile(path).read_row_group(g)
            self.cache[key] = table if table.schema.equals(FORECAST_SCHEMA) else table.cast(
                FORECAST_SCHEMA)
            while len(self.cache) > self.keep:
                self.cache.popitem(last=False)
        self.cache.move_to_end(key)
        return self.cache[key]


class StoredRows:
    """``forecasts.parquet``: each row's model and task, and its rows read by number."""

    def __init__(self, path: Path, task_ids: pd.Series, files: Files) -> None:
        self.path, self.files = path, files
        table = pq.read_table(path, columns=["task_id", "model"])
        encoded = pc.dictionary_encode(table.column("model").combine_chunks())
        self.names = encoded.dictionary.to_pylist()
        self.codes = encoded.indices.to_numpy(zero_copy_only=False)
        self.task = laid_positions(table.column("task_id"), task_ids)  # -1: no task of the run
        self.ids = table.column("task_id")

    def rows_of(self, model: str) -> np.ndarray:
        """The file's row numbers (from 0) of ``model``'s rows."""
        if model not in self.names:
            return np.empty(0, np.int64)
        return np.flatnonzero(self.codes == self.names.index(model))

    def take(self, rows: np.ndarray) -> pa.Table:
        return self.files.take(self.path, rows)


class JournalRows:
    """One model's journal records by task: the last written of each (parts in the order
    written, then streamed lines), read a few parts at a time."""

    def __init__(self, parts: list[Path], lines: pa.Table, task_ids: pd.Series,
                 files: Files) -> None:
        self.parts, self.lines, self.files = parts, lines, files
        n = len(task_ids)
        self.source = np.full(n, -2, np.int64)  # part number, -1: a line, -2: none
        self.row = np.full(n, -1, np.int64)
        ids = [read_part(part, columns=["task_id"]).column("task_id").combine_chunks()
               for part in parts] + [lines.column("task_id").combine_chunks()]
        at = laid_positions(pa.concat_arrays([a.cast(pa.string()) for a in ids]), task_ids)
        source = np.repeat(np.r_[np.arange(len(parts)), -1], [len(a) for a in ids])
        row = np.concatenate([np.arange(len(a)) for a in ids])
        inside = at >= 0  # written in this order: of rows of one task, the last counts
        self.source[at[inside]], self.row[at[inside]] = source[inside], row[inside]
        # every record of a task of the run, and one a task: each task's record is its only
        self.once = bool(inside.all() and np.bincount(at, minlength=n).max(initial=0) <= 1)

    def has(self, tasks: np.ndarray) -> np.ndarray:
        return self.source[tasks] > -2

    def take(self, tasks: np.ndarray) -> pa.Table:
        """The records of ``tasks`` (each of which :meth:`has`), in that order."""
        source, row = self.source[tasks], self.row[tasks]
        parts, order = [], []
        for k in np.unique(source):
            mine = np.flatnonzero(source == k)
            table = self.lines if k == -1 else self.files.take(self.parts[k], row[mine])
            parts.append(picked(table, row[mine]) if k == -1 else table)
            order.append(mine)
        if not parts:
            return FORECAST_SCHEMA.empty_table()
        table = pa.concat_tables([p if p.schema.equals(FORECAST_SCHEMA) else
                                  p.cast(FORECAST_SCHEMA) for p in parts])
        return in_order(table, np.concatenate(order))


def picked(table: pa.Table, rows: np.ndarray) -> pa.Table:
    """``table``'s rows at ``rows``, in that order: a slice (no copy) when they are one
    ascending run, as a month of one model's rows is."""
    if len(rows) and rows[-1] - rows[0] == len(rows) - 1 and (np.diff(rows) == 1).all():
        return table.slice(int(rows[0]), len(rows))
    return table.take(pa.array(rows))


def in_order(table: pa.Table, order: np.ndarray) -> pa.Table:
    """The rows of ``table``, which are the wanted rows at positions ``order``, put in the
    wanted order (untouched when they are in it)."""
    if len(order) < 2 or (np.diff(order) > 0).all():
        return table
    return table.take(pa.array(np.argsort(order, kind="stable")))


def where(row: int, task: str, model: str) -> str:
    return f"forecasts.parquet row {row + 1} ({task}, {model})"


def capped(problems: list[str], what: str) -> list[str]:
    """The first :data:`SHOWN` problems and a count of the rest."""
    if len(problems) <= SHOWN:
        return problems
    return [*problems[:SHOWN], f"... and {len(problems) - SHOWN} more: {what}"]


def foreign_models(stored: StoredRows, names: list[str]) -> list[str]:
    """Rows of models that are not models of the run."""
    problems = []
    for name in stored.names:
        if name not in names:
            rows = stored.rows_of(name)
            problems.append(f"forecasts.parquet rows {', '.join(str(r + 1) for r in rows[:5])}"
                            f"{' ...' if len(rows) > 5 else ''}: model {name!r} is not a model "
                            f"of this run ({len(rows)} rows)")
    return problems


def coverage(stored: StoredRows, model: str, task_ids: pd.Series, asked: np.ndarray
             ) -> tuple[np.ndarray, list[str]]:
    """(file row of each task of ``model``, -1 for none; the violations of "every task asked
    of the model exactly once, and no other")."""
    numbers = stored.rows_of(model)
    at = stored.task[numbers]
    known = at >= 0
    counts = np.bincount(at[known], minlength=len(task_ids))
    row_of = np.full(len(task_ids), -1, np.int64)
    row_of[at[known]] = numbers[known]
    problems = []
    for t in np.flatnonzero(counts > 1):
        lines = numbers[at == t] + 1
        problems.append(f"task {task_ids.iat[t]}: model {model} has {counts[t]} rows (forecasts"
                        f".parquet rows {', '.join(map(str, lines))}); a task is forecast once")
    for t in np.flatnonzero(asked & (counts == 0)):
        problems.append(f"task {task_ids.iat[t]}: model {model} was asked it and has no row in "
                        "forecasts.parquet")
    for i in np.flatnonzero(known & ~asked[np.maximum(at, 0)]):
        problems.append(f"{where(numbers[i], task_ids.iat[at[i]], model)}: the task was not "
                        "asked of this model")
    return row_of, capped(problems, f"rows of model {model} not once per task asked")


def compare(rows: pa.Table, numbers: np.ndarray, want: pa.Table, model: str, what: str,
            columns: list[str]) -> list[str]:
    """Stored rows against the rows ``want`` says they should be, row for row (the same
    tasks in the same order): floats within 4 ULP, the rest exactly (Arrow kernels, column
    by column); the values shown only for the rows that differ."""
    columns = [c for c in columns if c != "task_id"]
    diffs = {col: ~_same(rows.column(col).combine_chunks(), want.column(col).combine_chunks())
             for col in columns}
    bad = np.logical_or.reduce(list(diffs.values())) if diffs else np.zeros(rows.num_rows, bool)
    problems = []
    for i in np.flatnonzero(bad):
        shown = ", ".join(f"{c} {_cell(rows, c, i)} (should be {_cell(want, c, i)})"
                          for c in columns if diffs[c][i])
        problems.append(f"{where(numbers[i], rows.column('task_id')[int(i)].as_py(), model)}: "
                        f"differs from {what}: {shown}")
    return problems


AGENT_ENDING = "agent: "  # the reason of an agent's task ended without an answer


def raw_answers(rows: pa.Table, config, prompt) -> pa.Table:
    """What an LLM's rows should hold, from their raw text read again by the prompt it was
    asked (``config``: its model config): the answer it gives (validity, reason, numbers); a call
    that got no answer (or a failed Batch API line) has no text and is invalid."""
    want = []
    for rec in rows.select(["raw", "error", "detail", "answer_status"]).to_pylist():
        error = rec["error"] or ""
        no_answer = rec["answer_status"] == ERROR or (rec["answer_status"] == ANSWERED
                                                      and error.startswith(NO_TEXT))
        if no_answer and not rec["raw"]:  # a call that got no answer: no text, no numbers
            want.append({**dict.fromkeys(FROM_RAW, np.nan), "valid": False,
                         "error": rec["error"], "rationale": None, "interval_note": None})
            continue
        if rec["answer_status"] == ANSWERED and error.startswith(AGENT_ENDING):
            # an agent that ended without an answer: its last turn gives the ending again
            # (finbench.audit.agents), there is no answer to read
            want.append({**dict.fromkeys(FROM_RAW, np.nan), "valid": False, "error": error,
                         "rationale": None, "interval_note": None})
            continue
        detail = json.loads(rec["detail"]) if rec["detail"] else {}
        finish = detail.get("finish_reason")
        if "samples" in detail:  # a sampled variant: each sample read again, aggregated
            want.append(_sampled_again(rec["raw"], detail, config, prompt))
            continue
        if error.startswith("refusal: "):
            response = {"refusal": rec["raw"]}
        elif prompt.request_options(config):  # its raw text: the first token's top
            # log-probabilities (the answer read from them)
            response = {"top_logprobs": _json_or_none(rec["raw"]), "content": rec["raw"]}
        else:
            response = {"content": rec["raw"], "finish_reason": finish}
        parsed = prompt.parse(response, config)
        want.append({c: getattr(parsed, c) for c in FROM_RAW})
    schema = pa.schema([FORECAST_SCHEMA.field(c) for c in FROM_RAW])
    return pa.Table.from_pylist(want, schema=schema)


def _sampled_again(raw: str, detail: dict, config, prompt) -> dict:
    """A sampled row's answer from its samples' raw texts, read and aggregated again."""
    return {c: getattr(parsed, c) for c in FROM_RAW} if (
        parsed := sampled_answer(raw, detail, config, prompt)) is not None else {
        **dict.fromkeys(FROM_RAW, np.nan), "valid": False,
        "error": "(its samples cannot be read again)", "rationale": None,
        "interval_note": None}


def sampled_answer(raw: str, detail: dict, config, prompt):
    """A sampled row's answer (a :class:`ParsedAnswer`) from its samples' raw texts and
    what its detail says of each, read by ``prompt`` and aggregated by the model's rule
    again; None when its raw text does not hold its samples."""
    from finbench.forecasters.sampling import aggregate, read_sample, responses_again

    try:
        responses = responses_again(raw, detail["samples"])
    except (ValueError, TypeError):
        return None
    parsed, _ = aggregate([read_sample(r, lambda r: prompt.parse(r, config))
                           for r in responses], config.prompt.aggregate, config.prompt.needed)
    return parsed


def _same(a: pa.Array, b: pa.Array) -> np.ndarray:
    """Per element: equal (floats within 4 ULP, NaN and missing matching themselves)."""
    if pa.types.is_floating(a.type) or pa.types.is_floating(b.type):
        return within_ulps(a.to_numpy(zero_copy_only=False), b.to_numpy(zero_copy_only=False))
    return same_values(a, b)


def _cell(table: pa.Table, column: str, row: int) -> str:
    """One cell as a reader writes it: ``0.99``, ``'text'``, ``None``; long ones cut."""
    value = table.column(column)[int(row)].as_py()
    text = repr(value.isoformat() if hasattr(value, "isoformat") else value)
    return text if len(text) <= 60 else text[:57] + "..."


def _json_or_none(text: str | None):
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None
