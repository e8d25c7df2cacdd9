"""The forecast pass: every forecaster answers the tasks it owes, a batch of tasks at a time,
answers journalled as they come (memory holds one batch of answers)."""

from __future__ import annotations

import time
from contextlib import nullcontext

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from finbench.core.digests import Sha256Helper
from finbench.core.errors import ModelStopped
from finbench.runlog import forecast_table
from finbench.runlog.forecast_table import Part
from finbench.runlog.journal import Journal
from finbench.tracks.base import Inputs, Track

HELPER_TASKS = 20_000  # baseline answers owed from which receipts are hashed in a helper process


def forecast_pass(track: Track, forecasters, todo: dict[str, np.ndarray], jobs: dict,
                  journal: Journal, echo, *, dry_run: bool, batch: bool,
                  stopped: dict[str, str], asked: dict[str, np.ndarray] | None = None,
                  parts: dict[str, list[Part]] | None = None) -> dict[str, dict]:
    """Forecasters that read no context (baselines) answer a row group of the forecast table
    per vectorised call (:func:`_plain_pass`; ``parts``, when given, receives each one's
    journal parts, in its task order); the others get contexts batch by batch.
    ``asked``: per forecaster, the tasks it is asked (default ``todo``: a run that resumes
    nothing). Returns dry-run estimates. A model whose calls cannot succeed
    (:class:`ModelStopped`) stops there, with the reason in ``stopped``; the others go on."""
    progress = Progress(forecasters, todo, echo)
    plain = [f for f in forecasters if not f.needs_context]
    if plain and not dry_run:
        found = _plain_pass(track, plain, todo, asked or todo, journal, progress)
        if parts is not None:
            parts.update(found)
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


def _plain_pass(track: Track, plain, todo, asked, journal: Journal, progress
                ) -> dict[str, list[Part]]:
    """Each baseline answers the tasks it is asked a row group of the forecast table
    (:data:`~finbench.runlog.forecast_table.ROW_GROUP` rows) at a time, in order (of
    those, the ones it still owes), so each journal part is one row group of the forecast
    table, copied into it as it is, and a resumed run answers the same groups. The k-th group
    of every baseline is answered before the next: baselines given the same tasks share
    their inputs (and what they compute from them once, the receipts), let go once all have
    answered. The receipts' digests of the next groups are made in a helper process
    (:class:`~finbench.core.digests.Sha256Helper`) while these are answered, from
    :data:`HELPER_TASKS` tasks on. Returns each baseline's parts, in its task order."""
    groups = {f.name: _row_groups(asked[f.name]) for f in plain}
    count = max(map(len, groups.values()), default=0)
    parts: dict[str, list[Part]] = {f.name: [] for f in plain}
    opened: dict[int, dict[bytes, Inputs]] = {}

    def jobs(k: int):
        """(baseline, rows) of the k-th row group of each baseline that owes some of it."""
        for f in plain:
            if k < len(groups[f.name]):
                group = groups[f.name][k]
                rows = group[todo[f.name][group]]
                if len(rows):
                    yield f, rows

    def open_group(k: int, helper) -> None:
        """The k-th groups' inputs, their receipts begun."""
        shared = opened[k] = {}
        for f, rows in jobs(k):
            key = rows.tobytes()
            if key not in shared:
                shared[key] = track.plain_inputs(rows)
            f.start_receipts(shared[key], helper)

    owed = sum(int(todo[f.name].sum()) for f in plain)
    with _hashing_helper(owed) as helper:
        for k in range(count):
            if k not in opened:
                open_group(k, helper)
            if k + 1 < count:
                open_group(k + 1, helper)  # its digests made while group k is answered
            shared = opened.pop(k)
            for f, rows in jobs(k):
                # the digests still being made are put in on the writer thread
                out_rows, finish = f.forecast_later(shared[rows.tobytes()])
                path = journal.append(out_rows, background=True, finish=finish)
                parts[f.name].append(Part(path, f.name, out_rows.num_rows))
                progress.add(f.name, out_rows.num_rows, _valid(out_rows))
    return parts


def _hashing_helper(owed: int):
    """A :class:`Sha256Helper` for a pass owing ``owed`` answers from :data:`HELPER_TASKS` on,
    else (or where no process can be started) nothing: receipts are then hashed here."""
    if owed < HELPER_TASKS:
        return nullcontext()
    try:
        return Sha256Helper()
    except OSError:  # no subprocess here (a sandbox, an embedded interpreter)
        return nullcontext()


def _row_groups(asked: np.ndarray) -> list[np.ndarray]:
    """The rows asked, cut into the forecast table's row groups."""
    rows, size = np.flatnonzero(asked), forecast_table.ROW_GROUP
    return [rows[i:i + size] for i in range(0, len(rows), size)]


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
