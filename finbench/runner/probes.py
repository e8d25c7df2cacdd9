"""The run's recall probes (docs/spec.md §15): each model with ``recall_probe`` asked, for
every task it was asked, what it remembers of the task's outcome, with no context. Answers are
journalled apart (``RUN/probes/``: their journal and transcripts, a resumed run asking only
what is owed) and gathered into ``probes.parquet`` (the forecast table's columns, ``p_up``
the probability it says yes), which the manifest records and the report and audit read."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from finbench.core.errors import ModelStopped
from finbench.core.lookup import positions
from finbench.forecasters.probe import NoContext, recall_forecaster
from finbench.runlog.journal import Journal
from finbench.runlog.rundir import PROBE_FOLDER as FOLDER
from finbench.runlog.rundir import PROBES as TABLE
from finbench.tracks.base import Inputs


def probed_models(config, skip=()) -> list:
    """The models of ``config`` asking recall probes, in its order (those in ``skip`` not)."""
    return [m for m in config.models if getattr(m, "recall_probe", False) and m.name not in skip]


def ask_probes(track, config, out: Path, asked: dict[str, np.ndarray], skip, echo) -> list[str]:
    """Ask every probe owed (a model's tasks ``asked``, less those journalled) and write
    ``probes.parquet``; returns the models whose probes could not all be asked (their model
    could not be called), each said with why."""
    models = [m for m in probed_models(config, skip) if m.name in asked]
    if not models:
        return []
    ids = track.tasks["task_id"]
    (out / FOLDER).mkdir(exist_ok=True)
    journal = Journal(out / FOLDER)
    stopped = []
    try:
        done, errors = journal.done_by_model(), journal.open_errors()
        for m in models:
            forecaster = recall_forecaster(m, track.probe_questions)
            failed = errors.get(m.name, {})
            forecaster.attempts_before = failed
            retry = {t for t, n in failed.items() if n < m.max_attempts}
            finished = [t for t in done.get(m.name, []) if t not in retry]
            todo = asked[m.name] & (positions(ids, finished) < 0) if finished else asked[m.name]
            rows = np.flatnonzero(todo)
            if not len(rows):
                continue
            echo(f"{m.name}: asking {len(rows)} recall probes (the outcome from memory, no "
                 "context)")
            tasks = track.tasks.iloc[rows].reset_index(drop=True)
            try:
                forecaster.run_stream(Inputs(tasks=tasks, contexts=NoContext(tasks)), journal,
                                      echo)
            except ModelStopped as exc:
                echo(f"recall probes of {exc}")
                stopped.append(m.name)
        journal.flush()
        journal.write_ordered(out / TABLE, ids.to_numpy(object), [m.name for m in models])
    finally:
        journal.close()
    return stopped
