"""One task of an intraday run, in full (``finbench show RUN TASK_ID``): the task and its
label, then per model its forecast and per-row scores, and for a language model the
messages exactly as sent, the response as received, the answer and its rationale. Read from
the run directory alone (tasks, labels, rows, forecasts, transcripts)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from finbench.core.errors import RunError
from finbench.reports.show import labelled_task, message_lines, model_views, task_rows

SCORE_COLUMNS = ("scored", "brier", "log_loss", "covered", "width", "winkler", "kelly")


FORECAST_COLUMNS = ("model", "kind", "p_up", "lower", "upper", "valid", "answer_status",
                    "error", "p_fallback", "interval_note", "raw", "rationale", "input_sha256",
                    "history_count", "detail")


def task_view(run_dir: Path, task_id: str, model: str | None = None) -> dict:
    """:func:`show` of a run of the intraday track (checked as finished and recorded)."""
    task = labelled_task(run_dir, task_id)
    forecasts = task_rows(run_dir / "forecasts.parquet", task_id)
    scored = task_rows(run_dir / "rows.parquet", task_id) if (run_dir / "rows.parquet").is_file() \
        else pd.DataFrame({"model": []})
    names = forecasts["model"].tolist()
    if model is not None and model not in names:
        raise RunError(f"{run_dir}: task {task_id} has no forecast of model {model!r} "
                       f"(models: {', '.join(names)})")
    baselines = set(forecasts.loc[forecasts["kind"].isin(
        ["coin", "base_rate", "momentum", "climatology"]), "model"])
    keep = [n for n in names if model is None or n == model or n in baselines]
    return {"task": task,
            "models": model_views(run_dir, task_id, forecasts, scored, keep, FORECAST_COLUMNS,
                                  SCORE_COLUMNS)}


def render_show(found: dict) -> str:
    """:func:`show`'s answer as text a person reads top to bottom."""
    task = found["task"]
    lines = [f"task {task['task_id']}: {task.get('ticker')} {task.get('session')} "
             f"{task.get('horizon')}, forecast at {task.get('t_forecast')}, target "
             f"{task.get('t_target')}",
             f"label: status {task.get('status')}, r = {task.get('r')}, y = {task.get('y')}"]
    for m in found["models"]:
        lines += ["", f"== {m['model']} ({m['kind']}) " + "=" * 40]
        answer = "valid" if m["valid"] else (
            "ERROR (no answer)" if m.get("answer_status") == "error" else "INVALID")
        interval = ("no interval" if m["lower"] is None
                    else f"interval [{m['lower']}, {m['upper']}]")
        lines.append(f"answer: {answer}; p_up = {m['p_up']}, {interval}"
                     + (f"; {m['error']}" if m["error"] else ""))
        for key in ("p_fallback", "interval_note", "rationale"):
            if m.get(key):
                lines.append(f"{key}: {m[key]}")
        if m["scores"]:
            lines.append("scores: " + ", ".join(f"{k} {v}" for k, v in m["scores"].items()))
        for call in m["calls"]:
            lines += [f"-- call, attempt {call['attempt']} (input_sha256 "
                      f"{call['input_sha256'][:12]}) --"]
            for msg in call["messages"]:  # an agent's: turn by turn
                lines += message_lines(msg)
            lines += ["[response]", json.dumps(call["response"].get("body", call["response"]),
                                               indent=2, sort_keys=True)]
    return "\n".join(lines)
