"""Audit a run: re-derive everything it recorded from its data and from itself, and name
every difference. What every run gets here: each file's content against the hash the run
recorded when writing it (forecasts, labels, tasks, scores, rows, journal parts and lines),
the config against its file's hash and text, and the tables' columns the re-derivations read
(:mod:`.files`); then its track's own audit (:meth:`~finbench.tracks.base.TrackPlugin.audit`:
the intraday track's in :mod:`finbench.tracks.intraday.audit`, the event track's in
:mod:`finbench.tracks.events.audit`: the store, tasks, labels, every forecast row, receipts
and the time gate, transcripts, scores); and the report, when there is one, against its
receipt and against the report drawn again from the run (:mod:`.report`); the recall
probes and Min-K% scores, when a model asks for them (:mod:`.probes`, :mod:`.min_k`). The checks the
tracks share: forecast rows against their journal and their answers (:mod:`.rows`), LLM
transcripts (:mod:`.transcripts`), score tables against their recomputation (:mod:`.scores`).

Floats that pass through libm are compared within 4 ULP (rows) or a relative 1e-9 (means of
millions of rows), so a run made on one machine audits clean on another; everything else
exactly.
"""

from __future__ import annotations

from pathlib import Path

from finbench.audit.files import config_problems, hash_problems, table_problems
from finbench.audit.min_k import min_k_problems
from finbench.audit.probes import probe_problems
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
    return (problems + track.audit(run_dir, manifest, config, echo)
            + probe_problems(run_dir, config, manifest, lambda: track.open(config))
            + min_k_problems(run_dir, config, manifest))
