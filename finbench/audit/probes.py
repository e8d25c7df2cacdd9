"""The recall probes of a run against what they must be (docs/spec.md §15): every task each
probing model was asked has one probe row and no other task has one; each row's prompt digest
is the probe re-rendered from its task, nothing was shown (no input time), and each answered
row's probability and validity are its raw answer read again (as its model's answers are
read)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from finbench.forecasters.answers import parse_event_answer
from finbench.forecasters.llm import interpret
from finbench.forecasters.probe import RecallPrompt
from finbench.runlog.rundir import PROBES

SHOWN = 10


def probe_problems(run_dir: Path, config, manifest: dict, open_track) -> list[str]:
    """Problems of ``probes.parquet``; ``open_track()``: the run's track, opened from its
    config (its tasks and their probe questions), called only when there are probes."""
    path = run_dir / PROBES
    skipped = {*manifest.get("skipped_models", {}), *manifest.get("stopped_models", {})}
    probed = [m.name for m in config.models if getattr(m, "recall_probe", False)
              and m.name not in skipped]
    if not probed:
        return [f"{PROBES}: no model of the config asks recall probes"] if path.is_file() else []
    if not path.is_file():
        return [f"{PROBES}: missing ({', '.join(probed)} ask recall probes)"]
    table = pd.read_parquet(path)
    problems = [f"{PROBES}: rows of {m}, which asks no recall probes"
                for m in sorted(set(table["model"]) - set(probed))]
    forecasts = pd.read_parquet(run_dir / "forecasts.parquet", columns=["task_id", "model"])
    track = open_track()
    tasks = track.tasks.set_index("task_id", drop=False)
    prompt = RecallPrompt(track.probe_questions)
    structured = {m.name: getattr(m, "structured", "json_schema") for m in config.models}
    for name in probed:
        mine = table[table["model"] == name]
        asked = set(forecasts.loc[forecasts["model"] == name, "task_id"])
        have = list(mine["task_id"])
        if len(set(have)) < len(have):
            problems.append(f"{PROBES}: {name} has a task twice")
        problems += [f"{PROBES}: {name} was not probed on task {t}, which it was asked"
                     for t in sorted(asked - set(have))[:SHOWN]]
        problems += [f"{PROBES}: {name} has a probe of task {t}, which it was not asked"
                     for t in sorted(set(have) - asked)[:SHOWN]]
        known = mine[mine["task_id"].isin(tasks.index)]
        if known.empty:
            continue
        messages = prompt.messages_of(tasks.loc[known["task_id"]].reset_index(drop=True))
        want = np.array([prompt.sha256(m) for m in messages], dtype=object)
        bad = np.flatnonzero(known["input_sha256"].to_numpy(object) != want)
        problems += [f"{PROBES}: {name}, task {known['task_id'].iat[i]}: input_sha256 is not "
                     "the digest of its probe rendered again" for i in bad[:SHOWN]]
        shown = known["max_input_time"].notna().to_numpy()
        problems += [f"{PROBES}: {name}, task {t}: a probe is shown nothing, but the row "
                     "gives an input time" for t in known["task_id"][shown][:SHOWN]]
        answered = known[known["answer_status"] == "answered"]
        for row in answered.itertuples():
            again = interpret({"content": row.raw or ""}, structured[name],
                              parse=parse_event_answer)
            same_p = (np.isnan(again.p_up) and pd.isna(row.p_up)) or again.p_up == row.p_up
            if again.valid != row.valid or not same_p:
                problems.append(f"{PROBES}: {name}, task {row.task_id}: p_up {row.p_up} "
                                f"valid {row.valid}, but its raw answer reads p_yes "
                                f"{again.p_up} valid {again.valid}")
    return problems
