"""``RUN/report.html`` of an intraday run (:mod:`finbench.reports.page`): the run's header,
the leaderboard with CIs and paired N and every table of the report with its caption, the
figures, and a per-sample browser: filter by model, ticker, horizon, outcome and answer
status; each sample shows the prompt as sent (an agent's exchange turn by turn), the answer,
the rationale, the label and the row's scores."""

from __future__ import annotations

from collections import namedtuple
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from finbench.core.config import PROMPTED_KINDS
from finbench.reports import page
from finbench.reports.writers import json_number
from finbench.tracks.intraday.report_data import RunData

MAX_SAMPLES = 20_000  # rows in the browser (the first, in the run's order); the rest counted
MAX_PROMPTS = 2_000   # of them, the language-model rows whose prompt text is embedded
ORDER = ("scores_aggregate", "scores_three_class", "scores_by_horizon", "scores_by_cutoff",
         "memorisation", "recall_probes", "min_k", "scores_by_slice",
         "paired_brier", "paired_winkler", "tools_effect", "agents", "prompt_variants",
         "calibration", "calibration_corp",
         "rationale_mismatch", "decision_kelly", "scores_by_ticker", "replay_claims")
TITLES = {"scores_aggregate": "Leaderboard", "tools_effect": "What tools add",
          "prompt_variants": "Prompt variants", "calibration_corp": "CORP reliability",
          "replay_claims": "What replay files claimed",
          "scores_by_slice": "Declared slices", "recall_probes": "Recall probes",
          "min_k": "Min-K% probability"}
FILTERS = ["model", "ticker", "horizon", "outcome", "answer"]
LIST = ["task", "model", "p_up", "interval", "outcome", "answer", "Brier"]
NUMERIC = [2, 3, 6]  # the list's columns of numbers, right-aligned


def write_html(run_dir: Path, data: RunData, shown: dict, figures: list[Path]) -> Path:
    """Write ``run_dir/report.html`` from the tables as shown (name -> (frame, caption)), the
    figures' PNG files and the run's rows; returns its path."""
    samples, left_out = _samples(run_dir, data)
    note = (f"The first {MAX_SAMPLES:,} of {MAX_SAMPLES + left_out:,} forecast rows, in the "
            "run's order (every row is in rows.parquet)." if left_out
            else f"Every forecast row of the run ({len(samples):,}), one per task and model.")
    counts = data.label_counts or {}
    sessions = data.rows["session"].astype(str)
    extra = [("sessions", f"{sessions.nunique()} ({sessions.min()} to {sessions.max()}), "
                          f"horizons {', '.join(data.config.tasks.horizons)}"
              if len(sessions) else ""),
             ("labels", f"{counts.get('ok', 0)} scorable" if counts else "")]
    tasks = len(data.task_ids) if data.task_ids is not None else 0
    return page.render(
        run_dir / "report.html", title=data.name,
        synthetic=bool(data.manifest["data"].get("synthetic")),
        facts=page.run_facts(data.manifest, tasks=tasks, extra=extra),
        models=page.model_rows(data.manifest, set(data.models) | _class_models(data)),
        tables=page.sections(shown, ORDER, TITLES), figures=figures, samples=samples,
        samples_note=note, filters=FILTERS, sample_columns=LIST, numeric=NUMERIC)


def _class_models(data: RunData) -> set[str]:
    classes = data.scores3
    return set() if classes is None or classes.empty else set(classes["model"])


def _samples(run_dir: Path, data: RunData) -> tuple[list[dict], int]:
    """The browser's rows (plain values) and how many were left out."""
    rows = data.rows
    left_out = max(0, len(rows) - MAX_SAMPLES)
    rows = rows.iloc[:MAX_SAMPLES]
    columns = ["task_id", "model", "kind", "raw", "error", "rationale", "answer_status"]
    parts, have = [], 0  # the same rows: both are the forecast table's first, in its order
    for batch in pq.ParquetFile(run_dir / "forecasts.parquet").iter_batches(
            batch_size=MAX_SAMPLES, columns=columns):
        parts.append(batch.slice(0, MAX_SAMPLES - have))
        have += parts[-1].num_rows
        if have >= MAX_SAMPLES:
            break
    extra = (pa.Table.from_batches(parts).to_pandas() if parts
             else pd.DataFrame(columns=columns))
    llm = set(extra.loc[extra["kind"].isin(PROMPTED_KINDS), "model"])
    prompts = _prompts(run_dir, llm, extra)
    out = []
    # each column as plain values once (the rows' frame has some thirty columns, several of
    # them Arrow texts, iterated a value at a time by itertuples)
    mine = _plain(rows, ("task_id", "model", "ticker", "horizon", "valid", "status", "y",
                         "p_up", "lower", "upper", "brier", "r", "log_loss", "winkler",
                         "covered"))
    theirs = _plain(extra, ("model", "task_id", "raw", "error", "rationale", "answer_status"))
    for r, e in zip(mine, theirs, strict=True):
        status = "error" if e.answer_status == "error" else "valid" if r.valid else "invalid"
        outcome = ("unscorable" if r.status != "ok" else "up" if r.y == 1 else "down")
        p, lo, hi = _num(r.p_up), _num(r.lower), _num(r.upper)
        out.append({
            "task": r.task_id, "model": r.model, "ticker": str(r.ticker),
            "horizon": str(r.horizon), "outcome": outcome, "answer": status,
            "cells": [r.task_id, r.model, _fmt(p), "n/a" if lo is None else
                      f"[{_fmt(lo)}, {_fmt(hi)}]", outcome, status, _fmt(_num(r.brier))],
            "head": [f"task {r.task_id}  model {r.model}",
                     f"label: {r.status}, r = {_said(_num(r.r))}, outcome {outcome}",
                     f"answer: {status}" + (f" ({_text(e.error)})" if _text(e.error) else "")
                     + f"; p_up {_said(p)}, interval " + (
                         "none" if lo is None else f"[{_fmt(lo)}, {_fmt(hi)}]"),
                     f"scores: Brier {_said(_num(r.brier))}, log loss "
                     f"{_said(_num(r.log_loss))}, Winkler {_said(_num(r.winkler))}, covered "
                     f"{_said(_num(r.covered))}"],
            "raw": _text(e.raw), "rationale": _text(e.rationale),
            "messages": prompts.get((e.model, e.task_id))})
    return out, left_out


def _plain(frame: pd.DataFrame, columns: tuple[str, ...]):
    """``frame``'s ``columns`` row by row as named tuples of plain values (those
    ``itertuples`` gives)."""
    row = namedtuple("row", columns)
    return map(row._make, zip(*(frame[c].tolist() for c in columns), strict=True))


def _prompts(run_dir: Path, models: set[str], extra: pd.DataFrame) -> dict:
    """The messages of up to :data:`MAX_PROMPTS` language-model rows, by (model, task)."""
    wanted = extra[extra["model"].isin(models)].head(MAX_PROMPTS)
    return page.exchanges(run_dir, wanted[["model", "task_id"]].itertuples(index=False))


def _text(value) -> str:
    return "" if value is None or pd.isna(value) else str(value)


def _num(value) -> float | str | None:
    """A cell for the page's JSON (:func:`~finbench.reports.writers.json_number`)."""
    return None if value is None or pd.isna(value) else json_number(float(value))


def _fmt(value) -> str:
    """A number of the sample list and detail, to four places (empty: none)."""
    if value is None:
        return ""
    if isinstance(value, float):  # four places; a number past a million in four digits
        return f"{value:.4f}" if abs(value) < 1e6 else f"{value:.4g}"
    return str(value)


def _said(value) -> str:
    """A number of a sample's detail (``n/a``: none)."""
    return "n/a" if value is None else _fmt(value)
