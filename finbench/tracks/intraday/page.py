"""``RUN/report.html`` of an intraday run (:mod:`finbench.reports.page`): the run's header,
the leaderboard with CIs and paired N and every table of the report with its caption, the
figures, and a per-sample browser: filter by model, ticker, horizon, outcome and answer
status; each sample shows the prompt as sent (an agent's exchange turn by turn), the answer,
the rationale, the label and the row's scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from finbench.core.config import PROMPTED_KINDS
from finbench.reports import page
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
    # each column as plain values once, numbers as the page's JSON holds them and as they
    # are printed (a value at a time these were most of the page's cost: 20,000 rows)
    num = {c: _numbers(rows[c]) for c in ("p_up", "lower", "upper", "brier", "r",
                                          "log_loss", "winkler", "covered")}
    shown = {c: [_fmt(v) for v in values] for c, values in num.items()}
    said = {c: ["n/a" if v is None else f for v, f in zip(num[c], shown[c], strict=True)]
            for c in ("brier", "r", "log_loss", "winkler", "covered")}
    valid, status, y = (rows[c].tolist() for c in ("valid", "status", "y"))
    answer_status, raw, error, rationale = (
        _texts(extra[c]) for c in ("answer_status", "raw", "error", "rationale"))
    keys = zip(extra["model"].tolist(), extra["task_id"].tolist(), strict=True)
    out = []
    for i, (task, model, ticker, horizon, key) in enumerate(zip(
            rows["task_id"].tolist(), rows["model"].tolist(), rows["ticker"].tolist(),
            rows["horizon"].tolist(), keys, strict=True)):
        answer = ("error" if answer_status[i] == "error" else "valid" if valid[i]
                  else "invalid")
        outcome = ("unscorable" if status[i] != "ok" else "up" if y[i] == 1 else "down")
        p, lo = shown["p_up"][i], num["lower"][i]
        interval = "n/a" if lo is None else f"[{shown['lower'][i]}, {shown['upper'][i]}]"
        out.append({
            "task": task, "model": model, "ticker": str(ticker), "horizon": str(horizon),
            "outcome": outcome, "answer": answer,
            "cells": [task, model, p, interval, outcome, answer, shown["brier"][i]],
            "head": [f"task {task}  model {model}",
                     f"label: {status[i]}, r = {said['r'][i]}, outcome {outcome}",
                     f"answer: {answer}" + (f" ({error[i]})" if error[i] else "")
                     + f"; p_up {'n/a' if num['p_up'][i] is None else p}, interval "
                     + ("none" if lo is None else interval),
                     f"scores: Brier {said['brier'][i]}, log loss {said['log_loss'][i]}, "
                     f"Winkler {said['winkler'][i]}, covered {said['covered'][i]}"],
            "raw": raw[i], "rationale": rationale[i], "messages": prompts.get(key)})
    return out, left_out


def _numbers(column: pd.Series) -> list:
    """``column``'s values as cells of the page's JSON, the column at once: a Python float,
    None for a missing value or NaN, an infinity as the text ``"inf"`` or ``"-inf"`` (as
    :func:`~finbench.reports.writers.json_number` gives them)."""
    values = column.to_numpy(dtype=float, na_value=np.nan)
    out = values.astype(object)
    out[np.isnan(values)] = None
    out[np.isposinf(values)] = "inf"
    out[np.isneginf(values)] = "-inf"
    return out.tolist()


def _texts(column: pd.Series) -> list[str]:
    """``column``'s values as text, a missing one as the empty text, the column at once."""
    missing = column.isna().to_numpy()
    return ["" if gone else str(value)
            for value, gone in zip(column.tolist(), missing.tolist(), strict=True)]


def _prompts(run_dir: Path, models: set[str], extra: pd.DataFrame) -> dict:
    """The messages of up to :data:`MAX_PROMPTS` language-model rows, by (model, task)."""
    wanted = extra[extra["model"].isin(models)].head(MAX_PROMPTS)
    return page.exchanges(run_dir, wanted[["model", "task_id"]].itertuples(index=False))


def _fmt(value) -> str:
    """A number of the sample list and detail, to four places (empty: none)."""
    if value is None:
        return ""
    if isinstance(value, float):  # four places; a number past a million in four digits
        return f"{value:.4f}" if abs(value) < 1e6 else f"{value:.4g}"
    return str(value)

