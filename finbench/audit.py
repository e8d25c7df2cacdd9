"""Audit a run: re-derive every receipt (context or baseline input) from the store and check
the time gate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from finbench.bars import to_ns
from finbench.config import BASELINE_KINDS
from finbench.floats import within_ulps
from finbench.forecasters.baselines import baseline_digests, shared_history
from finbench.forecasters.prompt import PromptSettings, messages_sha256, render_messages
from finbench.lookup import arrow_text, positions
from finbench.pipeline import context_chunks, plan_run, resolve
from finbench.progress import Countdown
from finbench.run import momentum_minutes
from finbench.rundir import MANIFEST, finished_run, load_run_config
from finbench.runlock import RunLock

AUDITED_COLUMNS = ["task_id", "model", "kind", "max_input_time", "context_max_input_time",
                   "history_max_input_time", "input_sha256"]
BATCH_ROWS = 1 << 19  # forecast rows checked at a time: memory holds receipts per task only
_NAT = np.iinfo(np.int64).min  # a missing time, as int64 nanoseconds


def audit_run(run_dir: str | Path, *, echo=None) -> list[str]:
    """Violations found (empty list: the run passes). Each names the row and the rule.

    Receipts are re-derived per task (one digest and input time per task and receipt kind),
    then the forecast table is read in batches of :data:`BATCH_ROWS` rows, its columns of
    answers and provenance text left unread, so memory grows with tasks, not forecast rows.
    ``echo``: where progress goes (store checks, labels, forecast rows)."""
    run_dir = finished_run(run_dir)
    with RunLock(run_dir, command=f"finbench audit {run_dir}", shared=True):
        return _audit(run_dir, echo)


def _audit(run_dir: Path, echo) -> list[str]:
    """:func:`audit_run` of a run directory read-locked by the caller."""
    config = load_run_config(run_dir)
    manifest = json.loads((run_dir / MANIFEST).read_text())
    problems: list[str] = []
    plan = plan_run(config)
    want = manifest["data"]["snapshot_sha256"]
    if plan.store.snapshot_sha256 != want:
        problems.append(f"store {config.data.store}: snapshot {plan.store.snapshot_sha256[:12]}"
                        f" is not the run's {want[:12]}")
    problems += [f"store: {p}" for p in plan.store.verify(echo=echo)]
    tasks = pd.read_parquet(run_dir / "tasks.parquet")
    labels = pd.read_parquet(run_dir / "labels.parquet")
    ids = arrow_text(plan.tasks["task_id"])
    if not arrow_text(tasks["task_id"]).equals(ids):  # same ids in the same order
        problems.append("tasks.parquet: task list differs from the one the config gives")
        return problems
    path = run_dir / "forecasts.parquet"
    kinds = {k for chunk in pq.read_table(path, columns=["kind"], read_dictionary=["kind"])
             .column("kind").chunks for k in chunk.dictionary.to_pylist()}
    contexts = bool(kinds - set(BASELINE_KINDS))
    resolved = resolve(plan, momentum_minutes=momentum_minutes(config), daily=contexts,
                       echo=echo)
    problems += label_problems(labels, resolved.labels_of(plan.tasks))
    receipts = _Receipts(config, plan, resolved, contexts=contexts, prompts="openai" in kinds)
    del resolved
    t_forecast = to_ns(plan.tasks["t_forecast"])
    first = 0
    parquet = pq.ParquetFile(path)
    progress = Countdown("audit", parquet.metadata.num_rows, echo,
                         unit="forecast rows checked")
    for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=AUDITED_COLUMNS):
        rows = batch.to_pandas()
        task = positions(batch.column("task_id"), ids)
        rows["index"] = first + np.arange(len(rows))
        rows["t_forecast"] = _times(np.where(task >= 0, t_forecast[np.maximum(task, 0)], _NAT))
        rows["ctx_time"], rows["ctx_sha"] = receipts.of(rows, task)
        problems += _check(rows)
        first += len(rows)
        progress.add(len(rows))
    return problems


def label_problems(stored: pd.DataFrame, fresh: pd.DataFrame) -> list[str]:
    """Each stored label against the one re-derived from the store, field by field: status,
    prices (read from the store, so exact) and ``y`` must be equal; ``r`` passes through libm,
    so it must agree within :data:`~finbench.floats.LIBM_ULPS` ULP (a run made on one CPU
    audits clean on another)."""
    stored = stored.set_index("task_id")
    fresh = fresh.set_index("task_id").reindex(stored.index)
    differs = {
        "status": (stored["status"].astype(object) != fresh["status"].astype(object)).to_numpy(),
        "p_ref": ~_same(stored["p_ref"], fresh["p_ref"]),
        "p_target": ~_same(stored["p_target"], fresh["p_target"]),
        "y": ~_same(stored["y"].astype("float64"), fresh["y"].astype("float64")),
        "r": ~within_ulps(stored["r"].to_numpy(float), fresh["r"].to_numpy(float)),
    }
    bad = np.logical_or.reduce(list(differs.values()))
    problems = []
    for i in np.flatnonzero(bad):
        fields = ", ".join(f"{name} {stored[name].iloc[i]!r} (store gives {fresh[name].iloc[i]!r})"
                           for name, d in differs.items() if d[i])
        problems.append(f"labels.parquet task {stored.index[i]}: {fields}")
    return problems


def _same(a: pd.Series, b: pd.Series) -> np.ndarray:
    """Exactly equal, NaN matching NaN."""
    a, b = a.to_numpy(float), b.to_numpy(float)
    return (a == b) | (np.isnan(a) & np.isnan(b))


class _Receipts:
    """What each task's receipts should be, re-derived from the store: the digest of a
    baseline's input line (labels known, momentum signs) and when the latest bar a momentum
    forecast read became available; with ``contexts``, each task's context (its latest input
    time and digest; with ``prompts``, the digest of the rendered LLM prompt)."""

    def __init__(self, config, plan, resolved, *, contexts: bool, prompts: bool) -> None:
        history = shared_history(resolved.history)
        self.baseline_sha = baseline_digests(history, plan.tasks, resolved.history)
        rows = resolved.history_rows(np.arange(len(plan.tasks)))
        self.seen = {m.name: resolved.history[f"momentum_seen_ns_{m.lookback_minutes}"]
                     .to_numpy(np.int64)[rows] for m in config.models if m.kind == "momentum"}
        self.context_ns = self.context_sha = self.prompt_sha = None
        if contexts:
            self._contexts(plan, resolved, prompts)

    def _contexts(self, plan, resolved, prompts: bool) -> None:
        n = len(plan.tasks)
        self.context_ns = np.full(n, _NAT, np.int64)
        sha, prompt = np.full(n, None, object), np.full(n, None, object)
        at = pd.Series(np.arange(n), index=plan.tasks["task_id"])
        for chunk, contexts, _ in context_chunks(plan, plan.tasks, resolved.daily):
            where = at.loc[chunk["task_id"]].to_numpy()
            self.context_ns[where] = contexts.max_input_ns
            sha[where] = contexts.digests()
            if prompts:
                settings = PromptSettings.of(plan.config)
                prompt[where] = [messages_sha256(render_messages(contexts.context(i), settings))
                                 for i in range(len(contexts))]
        self.context_sha = pa.array(sha, pa.string())
        self.prompt_sha = pa.array(prompt, pa.string()) if prompts else None

    def of(self, rows: pd.DataFrame, task: np.ndarray) -> tuple[pd.Series, np.ndarray]:
        """(input time, digest) each of ``rows`` should carry; ``task``: its task's number
        (-1 for a row of no task of the run, whose receipts are missing)."""
        known = task >= 0
        at = pa.array(task, mask=~known)
        kind, model = rows["kind"].to_numpy(object), rows["model"].to_numpy(object)
        baseline = np.isin(kind, list(BASELINE_KINDS))
        ns = np.full(len(rows), _NAT, np.int64)
        sha = self.baseline_sha.take(at).to_numpy(zero_copy_only=False)
        for name, seen in self.seen.items():
            mine = known & (model == name) & baseline
            ns[mine] = np.where(seen[task[mine]] >= 0, seen[task[mine]], _NAT)
        if self.context_ns is not None and not baseline.all():
            other = known & ~baseline
            ns[other] = self.context_ns[task[other]]
            text = self.context_sha.take(at).to_numpy(zero_copy_only=False)
            if self.prompt_sha is not None:
                text = np.where(kind == "openai",
                                self.prompt_sha.take(at).to_numpy(zero_copy_only=False), text)
            sha = np.where(baseline, sha, text)
        return _times(ns), sha


def _times(ns: np.ndarray) -> pd.Series:
    """UTC times from int64 nanoseconds (the smallest int64 is a missing time)."""
    return pd.Series(ns.astype(np.int64).view("datetime64[ns]")).dt.tz_localize("UTC")


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
