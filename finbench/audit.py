"""Audit a run: re-derive every context receipt from the store and check the time gate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from finbench.forecasters.prompt import messages_sha256, render_messages
from finbench.pipeline import context_chunks, plan_run, resolve
from finbench.run import MANIFEST, load_run_config, momentum_minutes


def audit_run(run_dir: str | Path) -> list[str]:
    """Violations found (empty list: the run passes). Each names the row and the rule."""
    run_dir = Path(run_dir)
    config = load_run_config(run_dir)
    manifest = json.loads((run_dir / MANIFEST).read_text())
    problems: list[str] = []
    plan = plan_run(config)
    want = manifest["data"]["snapshot_sha256"]
    if plan.store.snapshot_sha256 != want:
        problems.append(f"store {config.data.store}: snapshot {plan.store.snapshot_sha256[:12]}"
                        f" is not the run's {want[:12]}")
    problems += [f"store: {p}" for p in plan.store.verify()]
    tasks = pd.read_parquet(run_dir / "tasks.parquet")
    labels = pd.read_parquet(run_dir / "labels.parquet")
    if list(tasks["task_id"]) != list(plan.tasks["task_id"]):
        problems.append("tasks.parquet: task list differs from the one the config gives")
        return problems
    resolved = resolve(plan, momentum_minutes=momentum_minutes(config))
    fresh = resolved.labels_of(plan.tasks).set_index("task_id")
    stored = labels.set_index("task_id")
    for tid in stored.index[(stored["status"] != fresh["status"]) |
                            ~np.isclose(stored["r"], fresh["r"], rtol=0, atol=0, equal_nan=True)]:
        problems.append(f"labels.parquet task {tid}: label differs from the store's")
    forecasts = pd.read_parquet(run_dir / "forecasts.parquet")
    llm = (forecasts["kind"] == "openai").any()
    parts = []
    for chunk, contexts, _ in context_chunks(plan, plan.tasks, resolved.daily):
        parts.append(pd.DataFrame({
            "task_id": chunk["task_id"], "t_forecast": chunk["t_forecast"],
            "ctx_time": contexts.max_input_time, "ctx_sha": contexts.digests(),
            # LLM rows hash their rendered prompt, not the context
            "prompt_sha": [messages_sha256(render_messages(contexts.context(i)))
                           for i in range(len(contexts))] if llm else None,
        }))
    derived = pd.concat(parts, ignore_index=True)
    rows = forecasts.reset_index().merge(derived, on="task_id", how="left")
    rows["ctx_sha"] = rows["ctx_sha"].where(rows["kind"] != "openai", rows["prompt_sha"])
    for rec in rows.itertuples():
        where = f"forecasts.parquet row {rec.index + 1} ({rec.task_id}, {rec.model})"
        if pd.isna(rec.t_forecast):
            problems.append(f"{where}: task is not part of this run")
            continue
        if not pd.isna(rec.max_input_time) and rec.max_input_time > rec.t_forecast:
            problems.append(f"{where}: max_input_time {rec.max_input_time.isoformat()} is after "
                            f"the horizon {rec.t_forecast.isoformat()}")
        if not _same_time(rec.context_max_input_time, rec.ctx_time):
            problems.append(f"{where}: context max_input_time {rec.context_max_input_time} does "
                            f"not match the re-derived {rec.ctx_time}")
        if not pd.isna(rec.history_max_input_time) and rec.history_max_input_time >= rec.t_forecast:
            problems.append(f"{where}: uses a label known at {rec.history_max_input_time} , not "
                            f"before the horizon {rec.t_forecast}")
        if rec.input_sha256 != rec.ctx_sha:
            problems.append(f"{where}: input_sha256 {str(rec.input_sha256)[:12]} does not match "
                            f"the re-derived {rec.ctx_sha[:12]}")
    return problems


def _same_time(a, b) -> bool:
    if pd.isna(a) and pd.isna(b):
        return True
    return (not pd.isna(a)) and (not pd.isna(b)) and pd.Timestamp(a) == pd.Timestamp(b)
