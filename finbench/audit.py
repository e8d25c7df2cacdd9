"""Audit a run: re-derive every receipt (context or baseline input) from the store and check
the time gate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from finbench.config import BASELINE_KINDS
from finbench.forecasters.baselines import baseline_digests, shared_history
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
    forecasts = pd.read_parquet(run_dir / "forecasts.parquet")
    baseline = forecasts["kind"].isin(BASELINE_KINDS).to_numpy()
    resolved = resolve(plan, momentum_minutes=momentum_minutes(config),
                       daily=bool((~baseline).any()))
    fresh = resolved.labels_of(plan.tasks).set_index("task_id")
    stored = labels.set_index("task_id")
    for tid in stored.index[(stored["status"] != fresh["status"]) |
                            ~np.isclose(stored["r"], fresh["r"], rtol=0, atol=0, equal_nan=True)]:
        problems.append(f"labels.parquet task {tid}: label differs from the store's")
    derived = _baseline_receipts(config, plan, resolved, forecasts[baseline])
    if (~baseline).any():
        derived = pd.concat([derived, _context_receipts(plan, resolved, forecasts[~baseline])])
    rows = forecasts.reset_index().merge(derived, on=["task_id", "model"], how="left")
    rows = rows.merge(plan.tasks[["task_id", "t_forecast"]], on="task_id", how="left")
    return problems + _check(rows)


def _baseline_receipts(config, plan, resolved, forecasts: pd.DataFrame) -> pd.DataFrame:
    """Re-derived receipts of baseline rows: the digest of their input line (labels known,
    momentum signs) and when the latest bar a momentum forecast read became available."""
    if forecasts.empty:
        return pd.DataFrame(columns=["task_id", "model", "ctx_time", "ctx_sha"])
    history = shared_history(resolved.history)
    digests = pd.Series(baseline_digests(history, plan.tasks, resolved.history).to_pylist(),
                        index=plan.tasks["task_id"])
    lookback = {m.name: m.lookback_minutes for m in config.models if m.kind == "momentum"}
    seen = resolved.history.set_index("task_id")
    out = forecasts[["task_id", "model"]].copy()
    out["ctx_sha"] = digests.reindex(out["task_id"]).to_numpy(object)
    out["ctx_time"] = pd.Series(pd.NaT, index=out.index, dtype="datetime64[ns, UTC]")
    for name, minutes in lookback.items():
        mine = (out["model"] == name).to_numpy()
        ns = seen[f"momentum_seen_ns_{minutes}"].reindex(out.loc[mine, "task_id"]).to_numpy()
        times = pd.to_datetime(np.maximum(ns, 0), utc=True).where(ns >= 0, pd.NaT)
        out.loc[mine, "ctx_time"] = times
    return out


def _context_receipts(plan, resolved, forecasts: pd.DataFrame) -> pd.DataFrame:
    """Re-derived receipts of rows with a context: its latest input time and the digest of
    the context (LLM rows: of the rendered prompt)."""
    llm = (forecasts["kind"] == "openai").any()
    parts = []
    for chunk, contexts, _ in context_chunks(plan, plan.tasks, resolved.daily):
        parts.append(pd.DataFrame({
            "task_id": chunk["task_id"], "ctx_time": contexts.max_input_time,
            "ctx_sha": contexts.digests(),
            "prompt_sha": [messages_sha256(render_messages(contexts.context(i)))
                           for i in range(len(contexts))] if llm else None,
        }))
    derived = pd.concat(parts, ignore_index=True)
    rows = forecasts[["task_id", "model", "kind"]].merge(derived, on="task_id", how="left")
    rows["ctx_sha"] = rows["ctx_sha"].where(rows["kind"] != "openai", rows["prompt_sha"])
    return rows[["task_id", "model", "ctx_time", "ctx_sha"]]


def _check(rows: pd.DataFrame) -> list[str]:
    """Each forecast row against its task's horizon and its re-derived receipts; the rules are
    checked on whole columns, the messages written for the rows that break one."""
    t_fc = rows["t_forecast"]
    foreign = t_fc.isna().to_numpy()
    late = (rows["max_input_time"] > t_fc).fillna(False).to_numpy(bool)
    stored, derived = rows["context_max_input_time"], rows["ctx_time"]
    time_differs = ~((stored.isna() & derived.isna()) | (stored == derived).fillna(False))
    history_late = (rows["history_max_input_time"] >= t_fc).fillna(False).to_numpy(bool)
    sha_differs = (rows["input_sha256"].astype(object).to_numpy()
                   != rows["ctx_sha"].astype(object).to_numpy())
    bad = foreign | late | time_differs.to_numpy(bool) | history_late | sha_differs
    problems = []
    for i in np.flatnonzero(bad):
        rec = rows.iloc[i]
        where = f"forecasts.parquet row {rec['index'] + 1} ({rec.task_id}, {rec.model})"
        if foreign[i]:
            problems.append(f"{where}: task is not part of this run")
            continue
        if late[i]:
            problems.append(f"{where}: max_input_time {rec.max_input_time.isoformat()} is after "
                            f"the horizon {rec.t_forecast.isoformat()}")
        if not _same_time(rec.context_max_input_time, rec.ctx_time):
            problems.append(f"{where}: context max_input_time {rec.context_max_input_time} does "
                            f"not match the re-derived {rec.ctx_time}")
        if history_late[i]:
            problems.append(f"{where}: uses a label known at {rec.history_max_input_time} , not "
                            f"before the horizon {rec.t_forecast}")
        if sha_differs[i]:
            problems.append(f"{where}: input_sha256 {str(rec.input_sha256)[:12]} does not match "
                            f"the re-derived {str(rec.ctx_sha)[:12]}")
    return problems


def _same_time(a, b) -> bool:
    if pd.isna(a) and pd.isna(b):
        return True
    return (not pd.isna(a)) and (not pd.isna(b)) and pd.Timestamp(a) == pd.Timestamp(b)
