"""Audit a run: re-derive everything it recorded from the store and from itself, and name every
difference.

- Files: each file's content against the hash the run recorded when writing it (forecasts,
  labels, tasks, scores, rows, journal parts and lines); the config against its file's hash and
  text (:mod:`.files`).
- The store: its snapshot against the run's, every partition re-hashed and re-checked (beside
  what follows: a large store by a helper process, :mod:`finbench.data.store_check`). When the
  store's data cannot be read, its problems are named and nothing is derived again.
- Tasks: the task list the config gives, its calendar built by exchange-calendars (never read
  from the session cache, :mod:`finbench.core.session_cache`). Labels: re-derived from the
  store's prices, and each consistent on its own (``y`` from ``r``, ``r`` from the prices) (:mod:`.labels`).
- Forecast rows, model by model (:mod:`.rows`): every task asked of a model exactly once and no
  other; each row equal to its journal record; baselines, replays and scripted forecasters
  answering again from the store; LLM answers re-read from their raw text.
- Receipts and the time gate, row by row (:mod:`.receipts`): each row's latest input time at or
  before its horizon, its input digest and input times re-derived.
- Transcripts of LLM calls (:mod:`.transcripts`): each row's call kept, its messages the prompt
  re-rendered from the gated context, its response the row's raw text.
- Scores: computed again from the stored forecasts and labels, and each CSV written again
  from its Parquet file (:mod:`.scores`).
- The report, when there is one: its files against their receipt and against the report
  drawn again from the run (:mod:`.report`).

Floats that pass through libm are compared within 4 ULP (rows) or a relative 1e-9 (means of
millions of rows), so a run made on one machine audits clean on another; everything else
exactly.
"""

from __future__ import annotations

from pathlib import Path

from finbench.audit.files import config_problems, hash_problems, table_problems
from finbench.audit.report import report_problems
from finbench.core.calendar import from_library
from finbench.runlog.rundir import finished_run, load_run_config, read_manifest
from finbench.runlog.runlock import RunLock
from finbench.tracks import plugin_of

__all__ = ["audit_run"]


def audit_run(run_dir: str | Path, *, echo=None) -> list[str]:
    """Violations found (empty list: the run passes). Each names the file, row or key and the
    rule. ``echo``: where progress goes (store checks, labels, forecast rows)."""
    run_dir = finished_run(run_dir)
    with RunLock(run_dir, command=f"finbench audit {run_dir}", shared=True), from_library():
        return _audit(run_dir, echo)  # calendars built by exchange-calendars, not read kept


def _audit(run_dir: Path, echo) -> list[str]:
    """:func:`audit_run` of a run directory read-locked by the caller: the run, then its
    report when it has one."""
    return _audit_run(run_dir, echo) + report_problems(run_dir)


def _audit_run(run_dir: Path, echo) -> list[str]:
    """Everything of the run but its report: the files and config here, the rest by its
    track (:meth:`~finbench.tracks.base.TrackPlugin.audit`)."""
    manifest = read_manifest(run_dir)
    problems = hash_problems(run_dir, manifest) + config_problems(manifest)
    try:
        config = load_run_config(run_dir)
    except ValueError:  # named by config_problems: nothing else can be re-derived without it
        return problems
    track = plugin_of(config)
    tables = table_problems(run_dir, track.read_columns)
    if tables:  # the re-derivations read those columns
        return problems + [f"{p} (the audit reads it: nothing more was derived again)"
                           for p in tables]
    return problems + track.audit(run_dir, manifest, config, echo)
