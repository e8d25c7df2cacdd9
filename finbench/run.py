"""One run: tasks -> labels -> forecasters -> journal -> forecasts -> scores (SPEC §9)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from finbench.core.config import (
    RunConfig,
    baseline_names,
    interval_reference,
    load_config_file,
    momentum_minutes,
    shard_config,
)
from finbench.core.errors import ModelStopped, RunError
from finbench.core.lookup import positions
from finbench.core.outputs import write_atomic, write_json
from finbench.core.version import __version__
from finbench.data.store import sha256_file
from finbench.forecasters.base import build_forecaster
from finbench.forecasters.batch import BatchJob
from finbench.report.tables import render_text, summary_frame
from finbench.runlog.journal import ForecastTable, Journal
from finbench.runlog.rundir import MANIFEST, now, record_files
from finbench.runlog.runlock import RunLock, describe
from finbench.scoring.run import rescore
from finbench.tracks.base import Inputs
from finbench.tracks.intraday.inputs import context_inputs, plain_inputs
from finbench.tracks.intraday.pipeline import (
    Plan,
    context_chunks,
    month_rows,
    plan_run,
    resolve,
    scorability,
    summary,
)


def skip_reason(model) -> str | None:
    """Why a configured model cannot run here (None when it can)."""
    if model.kind == "openai":
        if not os.environ.get(model.api_key_env):
            return f"API key variable {model.api_key_env} is not set"
        if model.base_url_env and not os.environ.get(model.base_url_env):
            return f"endpoint variable {model.base_url_env} is not set"
    return None


def run(config_path: str | Path, out: str | Path | None = None, *, echo=print,
        dry_run: bool = False, shard: tuple | None = None, batch: bool = False,
        timings: dict[str, float] | None = None) -> Path:
    """Run (or resume) the config into ``out``; returns the run directory.

    ``dry_run`` prints, per LLM model, the calls still to make with estimated tokens and cost,
    and stops before any request. ``shard = (start, end)`` runs only the sessions of that
    sub-range of the config's dates (see :mod:`finbench.shards`). Market data are read one
    date partition at a time (:mod:`finbench.tracks.intraday.pipeline`), baselines answer a month of tasks at
    a time, the forecast table is written part by part and scored one model at a time, so
    what memory holds grows with the number of tasks, not of forecast rows. ``batch``
    sends LLM calls through the Batch API (:mod:`finbench.forecasters.batch`); any later run
    of the same directory polls and collects them, and scores once every batch is in.
    ``timings``, when given, receives the seconds each step took (plan, label pass,
    forecasts, forecast table, scores).
    """
    lap = _Laps(timings)
    config, config_sha, config_text = load_config_file(config_path)
    if shard is not None:
        config = shard_config(config, *shard)
    if not config.models:
        raise RunError(f"{config_path}: no [[models]] configured")
    out = Path(out) if out else Path("results") / Path(config_path).stem
    with RunLock(out, command=f"finbench run {config_path}") as lock:
        if lock.took_over:
            echo(f"{out}: taking over from {describe(lock.took_over)}, which ended without "
                 "releasing the folder (killed?); resuming its run")
        source = {"config_sha256": config_sha, "config_toml": config_text,
                  "config_dir": str(Path(config_path).resolve().parent)}
        return _run_locked(config, source, out, lap, echo=echo, dry_run=dry_run,
                           shard=shard, batch=batch)


def _run_locked(config: RunConfig, source: dict, out: Path, lap, *, echo, dry_run: bool,
                shard, batch: bool) -> Path:
    """:func:`run` once the run directory is locked; ``source``: the config file's hash,
    text and folder."""
    config_sha = source["config_sha256"]
    manifest_path = out / MANIFEST
    started, old = now(), None
    if manifest_path.is_file():
        old = json.loads(manifest_path.read_text())
        if old.get("config_sha256") != config_sha:
            raise RunError(f"{out}: holds a run of a different config "
                           f"({old.get('config_sha256', '?')[:12]}); use another --out")
        if old.get("shard") != _shard_field(shard):
            raise RunError(f"{out}: holds shard {old.get('shard')}, not {_shard_field(shard)}")
        started = old.get("started_at", started)
    plan = plan_run(config)
    seen = (old or {}).get("data", {}).get("snapshot_sha256")
    if seen is not None and seen != plan.store.snapshot_sha256:
        raise RunError(f"{out}: its run saw data snapshot {seen[:12]}, but {config.data.store} "
                       f"is now {plan.store.snapshot_sha256[:12]} (its data or settings changed);"
                       " one run never mixes two snapshots: use another --out, or restore the "
                       "store")
    skipped, forecasters = {}, []
    for model in config.models:
        reason = skip_reason(model)
        if reason:
            skipped[model.name] = reason
        else:
            forecasters.append(build_forecaster(model))
    lap("plan")
    resolved = resolve(plan, momentum_minutes=momentum_minutes(config),
                       daily=any(f.needs_context for f in forecasters), echo=echo)
    labels = resolved.labels_of(plan.tasks)
    for warning in scorability(plan, labels):
        echo(f"warning: {warning}")
    facts = summary(plan, labels)
    label = "SYNTHETIC " if plan.store.synthetic else ""
    echo(f"{label}data {config.data.store} (snapshot {plan.store.snapshot_sha256[:12]}): "
         f"{len(plan.tasks)} tasks, excluded {facts['excluded'] or 'none'}, "
         f"labels {facts['labels']}")
    write_atomic(out / "tasks.parquet", partial(plan.tasks.to_parquet, index=False))
    write_atomic(out / "labels.parquet", partial(labels.to_parquet, index=False))
    manifest = _manifest(config, source, plan, facts, started)
    manifest["shard"] = _shard_field(shard)
    write_json(manifest_path, manifest)

    lap("label pass")
    journal = Journal(out)
    for name, reason in skipped.items():
        echo(f"skip {name}: {reason}")
    jobs = {f.name: BatchJob(out, f) for f in forecasters if f.streaming}
    jobs = {name: job for name, job in jobs.items() if batch or job.state["files"]}
    stopped: dict[str, str] = {}
    pending = 0
    for name, job in jobs.items() if not dry_run else ():
        try:
            pending += job.collect(journal, echo)
        except ModelStopped as exc:
            stopped[name] = str(exc)
            echo(f"STOPPED {exc}")
    done = journal.done_by_model()
    ids = plan.tasks["task_id"]
    todo, notes = {}, {}
    for f in forecasters:
        sent = sorted(jobs[f.name].submitted_task_ids()) if f.name in jobs else []
        finished = [*done.get(f.name, []), *sent]
        asked = f.asked(plan.tasks)
        todo[f.name] = asked & (positions(ids, finished) < 0) if finished else asked
        notes[f.name] = [*f.notes(plan.tasks), *([] if asked.all() else [
            f"asked {int(asked.sum())} of the run's {len(ids)} tasks; the others are not asked "
            "(no forecast row)"])]
        for note in notes[f.name]:
            echo(f"{f.name}: {note}")
        if not todo[f.name].any() and not dry_run:
            echo(f"{f.name}: all {int(asked.sum())} forecasts already in the journal")
    names = [m.name for m in config.models if m.name not in skipped]
    table = None  # baselines answering every task write the forecast table as they go
    if (not dry_run and forecasters and not any(f.needs_context for f in forecasters)
            and [f.name for f in forecasters] == names and all(t.all() for t in todo.values())):
        table = ForecastTable(out / "forecasts.parquet", ids.to_numpy(object), names)
    try:
        estimates = _forecast_pass(plan, resolved, forecasters, todo, jobs, journal, echo,
                                   dry_run=dry_run, batch=batch, stopped=stopped, table=table)
        journal.flush()
    except BaseException as error:
        if table is not None:
            table.stop()  # parts still being written leave it alone
        for late in journal.settle():  # answers made before the error land on disk first
            error.add_note(f"also failed while stopping: writing a journal part: {late!r}")
        if table is not None:
            try:
                table.close()  # leaves no partial file
            except Exception as late:
                error.add_note(f"also failed while stopping: closing {table.tmp}: {late!r}")
        raise
    del resolved, labels  # what follows reads the run directory
    lap("forecasts")
    if batch and not dry_run:
        for name, job in jobs.items():
            if job.new and name not in stopped:
                pending += len(job.write_files())
                try:
                    job.submit(echo)
                except ModelStopped as exc:
                    stopped[name] = str(exc)
                    echo(f"STOPPED {exc}")
    if pending and not dry_run:
        echo(f"{pending} batch(es) not finished yet: run the same command again to collect "
             "them; forecasts and scores are written once every batch is in")
        return out
    if dry_run:
        for name, est in estimates.items():
            cost = "unknown (no prices configured)" if est["cost"] is None else (
                f"${est['cost']:.4f}")
            echo(f"dry run {name}: {est['calls']} calls, ~{est['tokens_in']} input "
                 f"+ ~{est['tokens_out']} output tokens, estimated cost {cost}")
        return out
    if stopped:  # scored as if skipped; the answers they gave stay in the journal
        skipped.update({name: f"stopped: {why}" for name, why in stopped.items()})
        names = [n for n in names if n not in stopped]
    if table is None or not table.close():
        journal.write_ordered(out / "forecasts.parquet", ids.to_numpy(object), names)
    manifest.update(skipped_models=skipped, stopped_models=stopped,
                    model_notes={k: v for k, v in notes.items() if v})
    write_json(manifest_path, manifest)
    lap("forecast table")
    scores = rescore(out)
    lap("scores")
    manifest.update(finished_at=now())
    record_files(out, manifest)  # every file's content hash, for the audit
    echo(render_summary(scores, config, names))
    echo(f"receipt: {MANIFEST} sha256 {sha256_file(manifest_path)} (keep it: `finbench audit` "
         "checks every file against the hashes this manifest records)")
    for why in stopped.values():
        echo(f"STOPPED {why}")
    return out


class _Laps:
    """Adds the seconds since the last call to ``out[name]`` (nothing when ``out`` is None)."""

    def __init__(self, out: dict[str, float] | None) -> None:
        self.out, self.t = out, time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        if self.out is not None:
            self.out[name] = self.out.get(name, 0.0) + now - self.t
        self.t = now


def _forecast_pass(plan, resolved, forecasters, todo, jobs, journal, echo, *, dry_run: bool,
                   batch: bool, stopped: dict[str, str],
                   table: ForecastTable | None = None) -> dict[str, dict]:
    """Pass 2: forecasters that read no context (baselines) answer a calendar month of tasks
    per vectorised call, one forecaster after the other (``table``, when given, takes each
    month's rows as they are journalled); the others get contexts month by month. Answers go
    to the journal as they come, so memory holds one month of answers. Returns dry-run
    estimates. A model whose calls cannot succeed (:class:`ModelStopped`) stops
    there, with the reason in ``stopped``; the others go on."""
    ids = plan.tasks["task_id"].to_numpy()
    progress = Progress(forecasters, todo, echo)
    estimates: dict[str, dict] = {}
    plain = [f for f in forecasters if not f.needs_context]
    months = month_rows(plan.tasks) if plain and not dry_run else []
    shared: list[dict[bytes, Inputs]] = [{} for _ in months]  # baselines given the same
    for f in plain:                                            # tasks share their receipts
        for month, inputs in zip(months, shared, strict=True):
            rows = month[todo[f.name][month]]
            if len(rows) == 0:
                continue
            key = rows.tobytes()
            if key not in inputs:
                inputs[key] = plain_inputs(plan, resolved, rows)
            out_rows = f.forecast(inputs[key])
            journal.append(out_rows, background=True,
                           then=table.add if table is not None else None)
            progress.add(f.name, out_rows.num_rows, _valid(out_rows))
    textual = [f for f in forecasters if f.needs_context]
    if not textual:
        return estimates
    any_todo = np.logical_or.reduce([todo[f.name] for f in textual])
    position = pd.Series(np.arange(len(ids)), index=ids)
    for chunk, contexts, bars in context_chunks(plan, plan.tasks[any_todo], resolved.daily):
        where = position.loc[chunk["task_id"]].to_numpy()
        for f in textual:
            rows = np.flatnonzero(todo[f.name][where])
            if len(rows) == 0:
                continue
            if f.name in stopped:
                continue
            inputs = context_inputs(plan, resolved, chunk, contexts, bars, rows)
            if dry_run:
                if f.streaming:
                    _add_estimate(estimates, f.name, f.estimate(inputs))
                continue
            if f.streaming and batch:
                jobs[f.name].add(inputs)
                continue
            if f.streaming:
                try:
                    stats = f.run_stream(inputs, journal, echo)
                except ModelStopped as exc:
                    stopped[f.name] = str(exc)
                    echo(f"STOPPED {exc}")
                    continue
                progress.add(f.name, stats["done"], stats["valid"])
            else:
                out_rows = f.forecast(inputs)
                journal.append(out_rows, background=True)
                progress.add(f.name, out_rows.num_rows, _valid(out_rows))
    return estimates


def _valid(rows: pa.Table) -> int:
    return int(pc.sum(rows.column("valid")).as_py() or 0)


def _add_estimate(estimates: dict, name: str, est: dict) -> None:
    acc = estimates.setdefault(name, {"calls": 0, "tokens_in": 0, "tokens_out": 0, "cost": 0.0})
    for k in ("calls", "tokens_in", "tokens_out"):
        acc[k] += est[k]
    acc["cost"] = None if est["cost"] is None or acc["cost"] is None else (
        acc["cost"] + est["cost"])


class Progress:
    """Counts per forecaster, printed with elapsed time and an ETA after every batch."""

    def __init__(self, forecasters, todo, echo) -> None:
        self.counts = {f.name: [0, 0, int(todo[f.name].sum())] for f in forecasters}
        self.echo, self.t0 = echo, time.perf_counter()

    def add(self, name: str, done: int, valid: int) -> None:
        p = self.counts[name]
        p[0] += done
        p[1] += valid
        elapsed = time.perf_counter() - self.t0
        finished = sum(q[0] for q in self.counts.values())
        left = sum(q[2] - q[0] for q in self.counts.values())
        self.echo(f"{name}: {p[0]}/{p[2]} forecasts, valid {p[1]}/{p[0]}, {elapsed:.1f}s "
                  f"elapsed, ETA {elapsed / max(finished, 1) * left:.1f}s")


def _shard_field(shard) -> list[str] | None:
    return None if shard is None else [str(shard[0]), str(shard[1])]


def render_summary(scores: pd.DataFrame, config: RunConfig, names: list[str]) -> str:
    baselines = [b for b in baseline_names(config) if b in names]
    ref = interval_reference(config)
    parts = []
    for kind, title in (("horizon", "By horizon"), ("overall", "All horizons")):
        frame = summary_frame(scores, baselines=baselines, slice_kind=kind,
                              interval_reference=ref)
        parts.append(f"{title}:\n{render_text(frame)}")
    note = ("BS and Winkler: lower is better; BSS/WSS = 1 - S_model/S_baseline on the (n) paired "
            "rows both scored; 'undef' = zero reference score or no paired rows; n/a = the "
            "forecaster gives no interval (scored on its probability alone). p fallback: "
            "probabilities from a declared fallback rule; Int. abstained: intervals left out "
            "for lack of history.")
    return "\n\n".join(parts) + "\n" + note


def _manifest(config: RunConfig, source: dict, plan: Plan, facts: dict, started: str) -> dict:
    return {
        "format": "finbench-run",
        "version": 1,
        "package_version": __version__,
        "git_revision": _git_revision(),
        "python": sys.version.split()[0],
        **source,
        "config": json.loads(config.model_dump_json()),
        "data": {
            "store": str(config.data.store),
            "snapshot_sha256": plan.store.snapshot_sha256,
            "partitions_sha256": hashlib.sha256(
                json.dumps(plan.store.manifest["partitions"], sort_keys=True).encode()
            ).hexdigest(),
            "synthetic": plan.store.synthetic,
            "description": plan.store.manifest.get("description", ""),
        },
        "models": [json.loads(m.model_dump_json()) for m in config.models],
        "tasks": facts,
        "started_at": started,
    }


def _git_revision() -> str | None:
    try:
        result = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).resolve().parent, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() or None
