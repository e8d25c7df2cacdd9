"""The forecast pass: every forecaster answers the tasks it owes, a batch of tasks at a time,
answers journalled as they come (memory holds one batch of answers)."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from finbench.core.errors import ModelStopped
from finbench.runlog.forecast_table import ForecastTable
from finbench.runlog.journal import Journal
from finbench.tracks.base import Inputs, Track


def forecast_pass(track: Track, forecasters, todo: dict[str, np.ndarray], jobs: dict,
                  journal: Journal, echo, *, dry_run: bool, batch: bool,
                  stopped: dict[str, str], table: ForecastTable | None = None
                  ) -> dict[str, dict]:
    """Forecasters that read no context (baselines) answer a batch of tasks (an intraday
    month) per vectorised call, one forecaster after the other (``table``, when given, takes
    each batch's rows as they are journalled); the others get contexts batch by batch.
    Returns dry-run estimates. A model whose calls cannot succeed (:class:`ModelStopped`)
    stops there, with the reason in ``stopped``; the others go on."""
    progress = Progress(forecasters, todo, echo)
    plain = [f for f in forecasters if not f.needs_context]
    if plain and not dry_run:
        _plain_pass(track, plain, todo, journal, progress, table)
    textual = [f for f in forecasters if f.needs_context]
    if not textual:
        return {}
    wanted = np.logical_or.reduce([todo[f.name] for f in textual])
    estimates: dict[str, dict] = {}
    for chunk in track.context_batches(wanted):
        for f in textual:
            rows = np.flatnonzero(todo[f.name][chunk.where])
            if len(rows) == 0 or f.name in stopped:
                continue
            inputs = chunk.inputs(rows)
            if dry_run:
                if f.streaming:
                    _add_estimate(estimates, f.name, f.estimate(inputs))
            elif f.streaming and batch:
                jobs[f.name].add(inputs)
            elif f.streaming:
                _stream(f, inputs, journal, echo, progress, stopped)
            else:
                out_rows = f.forecast(inputs)
                journal.append(out_rows, background=True)
                progress.add(f.name, out_rows.num_rows, _valid(out_rows))
    return estimates


def _plain_pass(track: Track, plain, todo, journal: Journal, progress,
                table: ForecastTable | None) -> None:
    """Baselines given the same tasks share their inputs (and what they compute from them
    once, the receipts): kept per batch until the last baseline has answered it."""
    batches = track.batches()
    shared: list[dict[bytes, Inputs]] = [{} for _ in batches]
    for f in plain:
        for batch_rows, inputs in zip(batches, shared, strict=True):
            rows = batch_rows[todo[f.name][batch_rows]]
            if len(rows) == 0:
                continue
            key = rows.tobytes()
            if key not in inputs:
                inputs[key] = track.plain_inputs(rows)
            out_rows = f.forecast(inputs[key])
            journal.append(out_rows, background=True,
                           then=table.add if table is not None else None)
            progress.add(f.name, out_rows.num_rows, _valid(out_rows))


def _stream(f, inputs: Inputs, journal: Journal, echo, progress, stopped: dict) -> None:
    try:
        stats = f.run_stream(inputs, journal, echo)
    except ModelStopped as exc:
        stopped[f.name] = str(exc)
        echo(f"STOPPED {exc}")
        return
    progress.add(f.name, stats["done"], stats["valid"])


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
