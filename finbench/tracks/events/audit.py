"""The audit of an event run (docs/spec.md §11.7): everything re-derived from the event store
and the run itself, every difference named.

- The store's snapshot against the run's, every file re-hashed.
- Tasks (ids and order) from the config; labels again from the markets and prices.
- Retrieval again from the posts: the same posts, ranks and scores, every one made strictly
  before its task's ``t0``.
- Forecast rows: every task asked of each model exactly once; references answering again
  from the store (probability, validity, input digest, input times); language-model answers
  re-read from their raw text, their prompts re-rendered from the gated context (input
  digest) and their transcripts checked against both; every row's latest input at or before
  its ``t0``.
- Scores, skill, rows, exclusions and the market gap computed again.

Floats that pass through libm or BM25's float32 sums are compared within a relative 1e-9;
on the machine and versions that made the run they are equal.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from finbench.audit.agents import agent_problems
from finbench.audit.files import task_problems
from finbench.audit.rows import capped, sampled_answer
from finbench.audit.scores import first_difference, frame_problems
from finbench.audit.transcripts import transcript_problems
from finbench.core.config import trial_mask
from finbench.core.errors import RunError, StoreError
from finbench.core.times import from_ns
from finbench.forecasters.answers import parse_event_answer
from finbench.forecasters.base import build_forecaster
from finbench.forecasters.llm import answer_mode
from finbench.runlog.rundir import SLICES
from finbench.tracks.events.config import REFERENCE_KINDS, EventRunConfig
from finbench.tracks.events.scores import event_csv, event_tables
from finbench.tracks.events.track import EventsTrack

SHOWN = 10


def audit_events(run_dir: Path, manifest: dict, config: EventRunConfig, echo) -> list[str]:
    try:
        track = EventsTrack(config)
    except StoreError as exc:  # its manifest cannot be read or breaks a rule
        return [f"store: {exc} (nothing was derived again from it)"]
    problems = []
    want = manifest["data"]["snapshot_sha256"]
    if track.snapshot_sha256 != want:
        problems.append(f"store {config.data.store}: snapshot {track.snapshot_sha256[:12]} is "
                        f"not the run's {want[:12]}")
    problems += [f"store: {p}" for p in track.plan.store.verify()]
    tasks = pd.read_parquet(run_dir / "tasks.parquet")
    if tasks["task_id"].tolist() != track.tasks["task_id"].tolist():
        return problems + ["tasks.parquet: task list differs from the one the config gives"]
    problems += task_problems(tasks, track.tasks)
    fresh = track.label(contexts=True, echo=echo)
    stored = pd.read_parquet(run_dir / "labels.parquet")
    problems += frame_problems(stored, fresh, "labels.parquet", key=["task_id"])
    problems += _retrieval_problems(run_dir, track, tasks)
    forecasts = pd.read_parquet(run_dir / "forecasts.parquet")
    skipped = manifest.get("skipped_models", {})
    models = [m for m in config.models if m.name not in skipped]
    # a task excluded before forecasting is asked of no model; a trial's, past its limit
    askable = track.askable() & trial_mask(len(tasks), (manifest.get("trial") or {}).get(
        "limit"))
    problems += _coverage(forecasts, tasks["task_id"], [m.name for m in models], askable,
                          fresh["status"])
    problems += _time_problems(forecasts, tasks)
    rows = np.flatnonzero(askable)
    gated = next(track.context_batches(askable)).inputs(np.arange(len(rows)))
    for model in models:
        mine = forecasts[forecasts["model"] == model.name].set_index("task_id")
        if model.kind in REFERENCE_KINDS or model.kind == "replay":  # answered again
            problems += _reference_problems(track, model, mine, gated, rows)
        else:
            problems += _llm_problems(run_dir, track, model, mine, gated)
    try:
        again = event_tables(run_dir, config, skipped)
    except RunError as exc:  # a label no label pass gives (named above too)
        return problems + [f"scores cannot be computed again: {exc}"]
    for name, key in (("scores", ["model", "slice_kind", "slice"]),
                      ("skill", ["model", "reference", "slice_kind", "slice"]),
                      ("rows", ["task_id", "model"]), ("exclusions", ["reason"]),
                      ("market_gap", ["model", "market"])):
        have = (pd.read_parquet(run_dir / f"{name}.parquet")
                if (run_dir / f"{name}.parquet").is_file()
                else pd.read_csv(run_dir / f"{name}.csv", keep_default_na=False,
                                 na_values=[""]))
        problems += frame_problems(have, again[name], name, key=key)
        if name in PARQUET_AND_CSV and (run_dir / f"{name}.csv").is_file() and (
                run_dir / f"{name}.parquet").is_file():  # the CSV: its Parquet file's text
            problems += first_difference(
                run_dir / f"{name}.csv",
                [event_csv(pd.read_parquet(run_dir / f"{name}.parquet")).encode()],
                f"{name}.csv: not the CSV of {name}.parquet")
    return problems


PARQUET_AND_CSV = ("scores", "skill", "rows")


def _retrieval_problems(run_dir: Path, track: EventsTrack, tasks: pd.DataFrame) -> list[str]:
    stored = pd.read_parquet(run_dir / "retrieval.parquet")
    outputs = track.outputs()
    problems = frame_problems(stored, outputs["retrieval.parquet"],
                               "retrieval.parquet", key=["task_id", "rank"])
    path = run_dir / SLICES
    if "slices.parquet" in outputs:
        problems += (frame_problems(pd.read_parquet(path), outputs[SLICES].to_pandas(), SLICES,
                                    key=["task_id", "slice"]) if path.is_file()
                     else [f"{SLICES}: missing (the config declares slices)"])
    elif path.is_file():
        problems.append(f"{SLICES}: the config declares no slices")
    t0 = stored["task_id"].map(tasks.set_index("task_id")["t0"])
    late = stored[(stored["created_utc"] >= t0).to_numpy(bool)]
    problems += [f"retrieval.parquet: task {r.task_id} was shown post {r.post_id}, made at "
                 f"{r.created_utc}, not before its t0" for r in late.head(SHOWN).itertuples()]
    return problems


def _coverage(forecasts: pd.DataFrame, task_ids: pd.Series, names: list[str],
              askable: np.ndarray, status: pd.Series) -> list[str]:
    """Every task that can be asked (``askable``) of every model once, and no other row (a
    task excluded before forecasting, by its label's ``status``, has none)."""
    problems = []
    counts = forecasts.groupby(["model", "task_id"]).size()
    never = dict(zip(task_ids[~askable], np.asarray(status)[~askable], strict=True))
    for name in names:
        have = counts.loc[name] if name in counts.index.get_level_values(0) else pd.Series(
            dtype=int)
        missing = task_ids[askable & ~task_ids.isin(have.index).to_numpy(bool)]
        twice = have[have > 1]
        problems += [f"forecasts.parquet: model {name} has no row of task {t}"
                     for t in missing.head(SHOWN)]
        problems += [f"forecasts.parquet: model {name} has a row of task {t}, excluded "
                     f"before forecasting ({never[t]}: no model is asked it)"
                     for t in [t for t in have.index if t in never][:SHOWN]]
        problems += [f"forecasts.parquet: model {name} answers task {t} {n} times"
                     for t, n in twice.head(SHOWN).items()]
    foreign = sorted(set(forecasts["model"]) - set(names))
    problems += [f"forecasts.parquet: rows of model {m}, which the run does not score"
                 for m in foreign]
    return problems


def _time_problems(forecasts: pd.DataFrame, tasks: pd.DataFrame) -> list[str]:
    """Every row's latest input at or before its task's t0."""
    t0 = forecasts["task_id"].map(tasks.set_index("task_id")["t0"])
    late = forecasts[(forecasts["max_input_time"] > t0).to_numpy(bool)]
    return [f"forecasts.parquet ({r.task_id}, {r.model}): latest input {r.max_input_time} is "
            "after t0" for r in late.head(SHOWN).itertuples()]


def _reference_problems(track: EventsTrack, model, mine: pd.DataFrame, gated,
                        rows: np.ndarray) -> list[str]:
    """The reference (or replayed file) answers again from the store (``gated``: the gated
    inputs of the tasks at ``rows``, those that can be asked); its rows must match."""
    forecaster = build_forecaster(model, track.prompt)
    inputs = gated if forecaster.needs_context else track.plain_inputs(rows)
    again = forecaster.forecast(inputs).to_pandas().set_index("task_id")
    have = mine.reindex(again.index)
    problems = []
    for column in ("p_up", "valid", "input_sha256", "max_input_time", "history_count",
                   "p_fallback"):
        a, b = have[column], again[column]
        if column == "p_up":
            same = np.isclose(a.to_numpy(float), b.to_numpy(float), rtol=1e-9, atol=0) | (
                a.isna() & b.isna()).to_numpy(bool)
        else:
            same = ((a == b) | (a.isna() & b.isna())).to_numpy(bool)
        for task in again.index[~same][:SHOWN]:
            problems.append(f"forecasts.parquet ({task}, {model.name}): {column} is "
                            f"{have.at[task, column]!r}; answering again from the store gives "
                            f"{again.at[task, column]!r}")
    return problems


def _example_problems(name: str, mine: pd.DataFrame, ids: pd.Series, rendered) -> list[str]:
    """Each row of a model shown earlier resolved markets against them drawn again: the
    markets its detail names and when the latest resolved (``history_max_input_time``)."""
    problems = []
    known = from_ns(rendered.examples_known)
    for i, task in enumerate(ids.tolist()):
        if task not in mine.index:
            continue
        row = mine.loc[task]
        detail = json.loads(row["detail"]) if row["detail"] else {}
        if detail.get("examples") != rendered.examples[i]:
            problems.append(f"forecasts.parquet ({task}, {name}): its examples "
                            f"{detail.get('examples')} are not the markets resolved before t0 "
                            f"drawn again ({rendered.examples[i]})")
        have, want = row["history_max_input_time"], known.iat[i]
        if not ((pd.isna(have) and pd.isna(want)) or have == want):
            problems.append(f"forecasts.parquet ({task}, {name}): history_max_input_time "
                            f"{have} is not when its latest example resolved ({want})")
    return problems


def _llm_problems(run_dir: Path, track: EventsTrack, model, mine: pd.DataFrame, gated
                  ) -> list[str]:
    """Answers re-read from their raw text; prompts re-rendered from the gated context."""
    problems = []
    prompt = track.prompt.for_model(model)
    rendered = prompt.render(gated)  # (its examples drawn again from the snapshot's markets)
    sha = [prompt.sha256(m) for m in rendered.messages]
    ids = gated.tasks["task_id"]  # the tasks that can be asked
    inputs = dict(zip(ids, sha, strict=True))
    if rendered.examples is not None:
        problems += _example_problems(model.name, mine, ids, rendered)
    if model.tools:  # an agent: its calls executed again; its input digest covers them
        found, inputs = agent_problems(run_dir, model, track.tools(), track.tasks, inputs)
        problems += found
    for task, want in inputs.items():
        if task in mine.index and mine.at[task, "input_sha256"] != want:
            problems.append(f"forecasts.parquet ({task}, {model.name}): input_sha256 is not the "
                            "prompt re-rendered from the gated context"
                            + (" with its tools' answers" if model.tools else ""))
    for task, row in mine[mine["answer_status"] == "answered"].iterrows():
        if not row["raw"]:
            continue  # a request refused: its reason is the answer, as an agent's ending
        detail = json.loads(row["detail"]) if row["detail"] else {}
        if "samples" in detail:  # a sampled variant: its samples read and aggregated again
            parsed = sampled_answer(row["raw"], detail, model, prompt)
            if parsed is None:
                problems.append(f"forecasts.parquet ({task}, {model.name}): its raw text does "
                                "not hold the samples its detail names")
                continue
        elif answer_mode(model) == "think":  # reasoning first: the JSON object ending it
            parsed = prompt.parse({"content": row["raw"],
                                   "finish_reason": detail.get("finish_reason")}, model)
        else:
            parsed = parse_event_answer(row["raw"])
        if parsed.valid != row["valid"] or (parsed.valid and parsed.p_up != row["p_up"]):
            problems.append(f"forecasts.parquet ({task}, {model.name}): the raw answer reads "
                            f"as p_yes {parsed.p_up} (valid {parsed.valid}), not the row's")
    problems += transcript_problems(run_dir, model.name, pa.array(ids.tolist()),
                                    pa.array(sha), prompt.template, agent=bool(model.tools))
    return capped(problems, f"rows of model {model.name}")
