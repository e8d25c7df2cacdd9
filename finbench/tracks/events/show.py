"""One task of an event run, in full (``finbench show RUN TASK_ID``): the market's task and
label, the posts retrieval found before ``t0`` (ids, times, scores: the receipt of what a
retrieving model was shown), then per model its forecast, its per-row scores and, for a
language model, its calls as sent and received. Read from the run directory alone."""

from __future__ import annotations

from pathlib import Path

from finbench.core.errors import RunError
from finbench.reports.show import labelled_task, message_lines, model_views, plain, task_rows
from finbench.tracks.events.config import REFERENCE_KINDS

FORECAST_COLUMNS = ("model", "kind", "p_up", "valid", "answer_status", "error", "raw",
                    "rationale", "input_sha256", "max_input_time", "detail")
SCORE_COLUMNS = ("scored", "brier", "log_loss")


def task_view(run_dir: Path, task_id: str, model: str | None = None) -> dict:
    """``task`` (with its label), ``retrieved`` (best first) and ``models`` (per model: its
    forecast, ``p_yes`` named as asked, ``scores`` and ``calls``). With ``model``, that
    model and the references."""
    task = labelled_task(run_dir, task_id)
    forecasts = task_rows(run_dir / "forecasts.parquet", task_id)
    scored = task_rows(run_dir / "rows.parquet", task_id)
    names = forecasts["model"].tolist()
    if model is not None and model not in names:
        raise RunError(f"{run_dir}: task {task_id} has no forecast of model {model!r} "
                       f"(models: {', '.join(names) or 'none: it was asked of no model'})")
    references = set(forecasts.loc[forecasts["kind"].isin(REFERENCE_KINDS), "model"])
    keep = [n for n in names if model is None or n == model or n in references]
    retrieved = task_rows(run_dir / "retrieval.parquet", task_id).sort_values("rank")
    out = {"task": task,
           "retrieved": [{c: plain(r[c]) for c in ("rank", "post_id", "created_utc", "score")}
                         for _, r in retrieved.iterrows()],
           "models": model_views(run_dir, task_id, forecasts, scored, keep, FORECAST_COLUMNS,
                                 SCORE_COLUMNS)}
    for entry in out["models"]:
        entry["p_yes"] = entry.pop("p_up")  # the event question's name of the probability
    out["task"] = {k: plain(v) for k, v in out["task"].items()}
    return out


def render_task(found: dict) -> str:
    """:func:`task_view` as text a person reads top to bottom."""
    task = found["task"]
    lines = [f"task {task['task_id']}: market {task.get('market_id')}, asked at t0 "
             f"{task.get('t0')}",
             f"label: status {task.get('status')}, y = {task.get('y')} (1 YES, 0 NO)",
             f"retrieved before t0: {len(found['retrieved'])} post(s)"]
    lines += [f"  {p['rank']}. {p['post_id']} at {p['created_utc']} (score {p['score']:.3f})"
              for p in found["retrieved"]]
    for m in found["models"]:
        lines += ["", f"== {m['model']} ({m['kind']}) " + "=" * 40]
        answer = "valid" if m["valid"] else (
            "ERROR (no answer)" if m.get("answer_status") == "error" else "INVALID")
        lines.append(f"answer: {answer}; p_yes = {m['p_yes']}"
                     + (f"; {m['error']}" if m.get("error") else ""))
        if m.get("rationale"):
            lines.append(f"rationale: {m['rationale']}")
        if m["scores"] is not None:
            lines.append("scores: " + ", ".join(f"{k} {v}" for k, v in m["scores"].items()))
        for call in m["calls"]:
            messages = call.get("messages") or []
            lines.append(f"call (attempt {call.get('attempt')}): {len(messages)} message(s) sent")
            turns = [msg for msg in messages if msg.get("role") in ("assistant", "tool")]
            for msg in turns:  # an agent's exchange after its prompt, turn by turn
                lines += message_lines(msg)
    return "\n".join(lines)


