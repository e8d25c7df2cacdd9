"""The audit of an intraday run (docs/spec.md §9): everything the run recorded derived again
from the store and from the run itself, every difference named.

- The store: its snapshot against the run's, every partition re-hashed and re-checked (beside
  what follows: a large store by a helper process, :mod:`finbench.data.store_check`). When the
  store's data cannot be read, its problems are named and nothing is derived again.
- Tasks: the task list the config gives, its calendar built by exchange-calendars (never read
  from the session cache, :mod:`finbench.core.session_cache`). Labels: re-derived from the
  store's prices, and each consistent on its own (``y`` from ``r``, ``r`` from the prices)
  (:mod:`.audit_labels`).
- Forecast rows, model by model (:mod:`finbench.audit.rows`): every task asked of a model
  exactly once and no other; each row equal to its journal record; baselines, replays and
  scripted forecasters answering again from the store; LLM answers re-read from their raw
  text.
- Receipts and the time gate, row by row (:mod:`.audit_receipts`): each row's latest input
  time at or before its horizon, its input digest and input times re-derived.
- Transcripts of LLM calls (:mod:`finbench.audit.transcripts`): each row's call kept, its
  messages the prompt re-rendered from the gated context, its response the row's raw text.
- Scores: computed again from the stored forecasts and labels, and each CSV written again
  from its Parquet file (:mod:`.audit_scores`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from finbench.audit.agents import agent_problems
from finbench.audit.files import task_problems
from finbench.audit.rows import (
    FROM_RAW,
    RECOMPUTED,
    Files,
    JournalRows,
    StoredRows,
    capped,
    compare,
    coverage,
    foreign_models,
    picked,
    raw_answers,
    where,
)
from finbench.audit.transcripts import transcript_problems
from finbench.core.config import PROMPTED_KINDS, trial_mask
from finbench.core.errors import FinbenchError, RunError, StoreError
from finbench.core.lookup import arrow_text, positions
from finbench.core.progress import Countdown
from finbench.core.times import NO_TIME, from_ns, to_ns
from finbench.data.store import Store
from finbench.data.store_check import StoreCheck
from finbench.forecasters.base import build_forecaster
from finbench.runlog.journal import Journal
from finbench.runlog.parquet_join import row_groups_are_files
from finbench.runlog.rows import FORECAST_COLUMNS, FORECAST_SCHEMA
from finbench.tracks.intraday.audit_labels import class_problems, consistency_problems, label_problems
from finbench.tracks.intraday.audit_receipts import Receipts, receipt_problems
from finbench.tracks.intraday.audit_scores import csv_problems, score_problems
from finbench.tracks.intraday.baselines import given_digests
from finbench.tracks.intraday.config import BASELINE_KINDS, CLASS_BASELINE_KINDS, momentum_minutes
from finbench.tracks.intraday.inputs import context_inputs, plain_inputs
from finbench.tracks.intraday.label_pass import resolve
from finbench.tracks.intraday.plan import month_rows, plan_run
from finbench.tracks.intraday.prompt import PromptSettings

AUDITED_COLUMNS = ["task_id", "model", "kind", "max_input_time", "context_max_input_time",
                   "history_max_input_time", "input_sha256"]
BATCH_ROWS = 1 << 19  # forecast rows checked at a time: memory holds receipts per task only


def audit_intraday(run_dir: Path, manifest: dict, config, echo) -> list[str]:
    """The track's part of :func:`finbench.audit.audit_run`: the store checked beside the
    re-derivations, the scores computed again."""
    problems = []
    # the store's partitions re-hashed and re-checked beside what follows (a large store by a
    # helper process, on another core); its problems come first, as the run's data
    try:
        opened = Store(config.data.store)
    except StoreError as exc:  # its manifest cannot be read or breaks a rule: nothing to derive
        return problems + [f"store: {exc} (nothing was derived again from it)"]
    with StoreCheck(opened, echo) as store_check:
        # first: it holds a model's rows, nothing else is loaded
        scores = score_problems(run_dir) + csv_problems(run_dir)
        plan = plan_run(config)
        want = manifest["data"]["snapshot_sha256"]
        if plan.store.snapshot_sha256 != want:
            problems.append(f"store {config.data.store}: snapshot "
                            f"{plan.store.snapshot_sha256[:12]} is not the run's {want[:12]}")
        try:
            rest = _against_the_plan(run_dir, manifest, config, plan, echo)
        except ValueError as exc:  # data that cannot be read as bars: named by the store check
            store = store_check.problems()
            if not store:
                raise
            rest = [f"labels, answers and receipts not derived again: the store's data could "
                    f"not be read ({type(exc).__name__}: {exc})"]
        else:
            store = store_check.problems()
    return problems + [f"store: {p}" for p in store] + rest + scores


def _against_the_plan(run_dir: Path, manifest: dict, config, plan, echo) -> list[str]:
    """The task list, the labels' consistency and everything derived again from the store
    (:func:`_derived_again`), against the plan of the run's config."""
    tasks = pd.read_parquet(run_dir / "tasks.parquet")
    labels = pd.read_parquet(run_dir / "labels.parquet")
    ids = arrow_text(plan.tasks["task_id"])
    if not arrow_text(tasks["task_id"]).equals(ids):  # same ids in the same order
        return ["tasks.parquet: task list differs from the one the config gives"]
    problems = task_problems(tasks, plan.tasks)
    problems += consistency_problems(labels) + class_problems(labels, config.tasks.classes)
    skipped = manifest.get("skipped_models", {})
    models = [m for m in config.models if m.name not in skipped]
    limit = (manifest.get("trial") or {}).get("limit")  # a trial asked the first tasks only
    return problems + _derived_again(run_dir, plan, models, labels, ids, echo, limit)


def _derived_again(run_dir: Path, plan, models, labels: pd.DataFrame, ids, echo,
                   limit: int | None = None) -> list[str]:
    """Labels, answers, receipts and the time gate derived again from the store and compared
    with the run's (see the module docstring); ``limit``: a trial's (its models were asked
    the run's first tasks alone)."""
    kinds = {m.kind for m in models}
    contexts = bool(kinds - set(BASELINE_KINDS) - set(CLASS_BASELINE_KINDS))
    resolved = resolve(plan, momentum_minutes=momentum_minutes(plan.config), daily=contexts,
                       echo=echo)
    problems = label_problems(labels, resolved.labels_of(plan.tasks))
    problems += slice_problems(run_dir, plan, resolved)
    again = Again(plan, resolved, models, limit)
    problems += again.problems
    receipts = Receipts(plan.config, plan, resolved, contexts=contexts,
                        prompts=bool(kinds & set(PROMPTED_KINDS)), each_chunk=again.contexts)
    again.digests = receipts.baseline_sha  # hashed once: baselines answering again reuse them
    try:
        problems += _row_problems(run_dir, plan, models, again)
    except RunError as exc:  # a journal file that cannot be read: the rest is still checked
        problems.append(f"{exc} (the rows were not compared with the journal)")
    agents = {}  # per agent, the input digest each of its rows must have
    for m in models:
        if m.kind in PROMPTED_KINDS and m.tools:
            found, agents[m.name] = agent_problems(
                run_dir, m, _tools(plan), plan.tasks, dict(zip(
                    plan.tasks["task_id"],
                    receipts.prompt_shas[receipts.prompt_of[m.name]].to_pylist(), strict=True)))
            problems += found
    problems += _receipt_problems(run_dir / "forecasts.parquet", plan, ids, receipts, echo,
                                  agents)
    for m in models:
        if m.kind in PROMPTED_KINDS:
            settings = receipts.prompt_of[m.name]
            problems += transcript_problems(run_dir, m.name, ids,
                                            receipts.prompt_shas[settings], settings.template,
                                            native=settings.question == "native",
                                            agent=bool(m.tools))
    return problems


def slice_problems(run_dir: Path, plan, resolved) -> list[str]:
    """``slices.parquet`` against each declared slice's values found again (the calendars and
    groupings read again, each volatility regime from the label history), and every regime
    read from returns known before its task's forecast time."""
    from finbench.audit.scores import frame_problems
    from finbench.core.errors import DataError
    from finbench.core.slices import slice_table
    from finbench.runlog.rundir import SLICES
    from finbench.tracks.intraday.slices import task_slices

    path = run_dir / SLICES
    if not plan.config.slices:
        return [f"{SLICES}: the config declares no slices"] if path.is_file() else []
    if not path.is_file():
        return [f"{SLICES}: missing (the config declares slices)"]
    try:
        want = slice_table(task_slices(plan.config, plan.tasks, resolved.known)).to_pandas()
    except DataError as exc:
        return [f"{SLICES}: not derived again ({exc})"]
    have = pd.read_parquet(path)
    problems = frame_problems(have, want, SLICES, key=["task_id", "slice"])
    if "rv_known_at" in have:
        when = have[["task_id", "rv_known_at"]].merge(
            plan.tasks[["task_id", "t_forecast"]], on="task_id")
        late = when[when["rv_known_at"].notna() & (when["rv_known_at"] >= when["t_forecast"])]
        problems += [f"{SLICES}: task {r.task_id}: a regime read a return known at "
                     f"{r.rv_known_at}, not before its forecast time {r.t_forecast}"
                     for r in late.head(5).itertuples()]
    return problems


def _tools(plan):
    """The agents' tools over the run's snapshot, as the run built them."""
    from finbench.tracks.intraday.tools import IntradayTools

    return IntradayTools(plan.store, plan.config.tasks)


class Again:
    """The answers of the run's forecasters that compute (every one but LLMs), computed again
    from the store: baselines a month of tasks at a time (:meth:`month`), the others from the
    month contexts the receipts are built from (:meth:`contexts`)."""

    def __init__(self, plan, resolved, models, limit: int | None = None) -> None:
        self.plan, self.resolved = plan, resolved
        self.forecasters, self.problems = {}, []
        for m in models:
            try:
                self.forecasters[m.name] = build_forecaster(m, PromptSettings.of(plan.config))
            except FinbenchError as exc:
                self.problems.append(f"model {m.name}: cannot be rebuilt to re-derive its "
                                     f"answers ({exc})")
        trial = trial_mask(len(plan.tasks), limit)
        self.asked = {name: f.asked(plan.tasks) & trial for name, f in self.forecasters.items()}
        self.tables: dict[str, list] = {name: [] for name, f in self.forecasters.items()
                                        if f.needs_context and not f.streaming}
        self.digests: dict[tuple[str, ...], pa.Array] = {}  # per plan task (:class:`Receipts`)

    def contexts(self, chunk, contexts, bars) -> None:
        """Answer again the month ``chunk`` with every forecaster that reads contexts."""
        where = positions(chunk["task_id"], self.plan.tasks["task_id"])
        for name, f in self.forecasters.items():
            if f.needs_context and not f.streaming:
                rows = np.flatnonzero(self.asked[name][where])
                if len(rows):  # answers in the order of their tasks (plan positions kept)
                    self.tables[name].append((where[rows], f.forecast(context_inputs(
                        self.plan, self.resolved, chunk, contexts, rows))))

    def month(self, name: str, month: np.ndarray) -> tuple[pa.Table, np.ndarray]:
        """``name``'s answers again for the tasks (positions in the plan) of one month that
        it was asked, and those positions (a forecaster answers in the order of its tasks)."""
        f = self.forecasters[name]
        rows = month[self.asked[name][month]]
        if not f.needs_context:
            if not len(rows):
                return FORECAST_SCHEMA.empty_table(), rows
            at = pa.array(rows)
            inputs = given_digests(plain_inputs(self.plan, self.resolved, rows),
                                   {signs: d.take(at) for signs, d in self.digests.items()})
            return f.forecast(inputs), rows
        if isinstance(self.tables[name], list):  # the receipts' pass made them, by chunk
            parts = self.tables[name]
            self.tables[name] = (
                pa.concat_tables([t for _, t in parts]) if parts
                else FORECAST_SCHEMA.empty_table(),
                np.concatenate([at for at, _ in parts]) if parts else np.empty(0, np.int64))
        table, at = self.tables[name]
        keep = np.flatnonzero(np.isin(at, rows))
        return picked(table, keep), at[keep]


def _row_problems(run_dir: Path, plan, models, again: Again) -> list[str]:
    """Every model's rows, a month of tasks at a time: exactly once per task asked, equal to
    the journal, equal to its answers computed again (or, for an LLM, to its raw text read
    again)."""
    ids = plan.tasks["task_id"]
    files = Files(keep=4)
    stored = StoredRows(run_dir / "forecasts.parquet", ids, files)
    problems = foreign_models(stored, [m.name for m in models])
    journal = Journal(run_dir)
    lines = journal.lines()
    months = month_rows(plan.tasks)
    # a forecast table that is its journal's parts joined byte for byte (as a run writes its
    # baselines' answers) holds each part's rows as the part holds them: where each task has
    # one record, every stored row is its record, with nothing to decode and compare
    as_parts = not lines.num_rows and row_groups_are_files(run_dir / "forecasts.parquet",
                                                           journal.part_files())
    for m in models:
        f = again.forecasters.get(m.name)
        if f is None:
            continue
        row_of, found = coverage(stored, m.name, ids, again.asked[m.name])
        problems += found
        records = JournalRows(*journal.model_sources(m.name, lines), ids, files)
        lost, differ, wrong = [], [], []
        for month in months:
            tasks = month[row_of[month] >= 0]  # the month's tasks with a row of the model
            if not len(tasks):
                continue
            rows, numbers = stored.take(row_of[tasks]), row_of[tasks]
            has = records.has(tasks)
            lost += [f"{where(n, ids.iat[t], m.name)}: has no journal record"
                     for t, n in zip(tasks[~has], numbers[~has], strict=True)]
            if not (as_parts and records.once):
                differ += compare(picked(rows, np.flatnonzero(has)), numbers[has],
                                  records.take(tasks[has]), m.name, "its journal record",
                                  FORECAST_COLUMNS)
            if f.streaming:
                wrong += compare(rows, numbers, raw_answers(rows, m, f.prompt), m.name,
                                 "its raw answer read again", FROM_RAW)
                continue
            again_rows, at = again.month(m.name, month)
            both = np.isin(tasks, at)  # a stored row of a task not asked: see coverage
            order = np.argsort(at, kind="stable")
            take = order[np.searchsorted(at[order], tasks[both])]
            wrong += compare(picked(rows, np.flatnonzero(both)), numbers[both],
                             picked(again_rows, take), m.name,
                             "its answer computed again from the store", RECOMPUTED)
        problems += capped(lost, f"rows of model {m.name} without a journal record")
        problems += capped(differ, f"rows of model {m.name} differ from their journal records")
        problems += capped(wrong, f"rows of model {m.name} differ from their answers derived "
                           "again")
    return problems


def _receipt_problems(path: Path, plan, ids, receipts: Receipts, echo,
                      agents: dict[str, dict[str, str]] | None = None) -> list[str]:
    """The time gate and receipts of every row, read :data:`BATCH_ROWS` rows at a time (the
    columns of answers and provenance text left unread); ``agents``: per agent, per task id,
    the input digest its row must have (its prompt's and its tools' answers')."""
    problems = []
    t_forecast = to_ns(plan.tasks["t_forecast"])
    first = 0
    parquet = pq.ParquetFile(path)
    progress = Countdown("audit", parquet.metadata.num_rows, echo,
                         unit="forecast rows checked")
    for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=AUDITED_COLUMNS):
        rows = batch.to_pandas()
        task = positions(batch.column("task_id"), ids)
        rows["index"] = first + np.arange(len(rows))
        rows["t_forecast"] = from_ns(np.where(task >= 0, t_forecast[np.maximum(task, 0)], NO_TIME))
        rows["ctx_time"], derived = receipts.of(rows, task)
        if agents:
            derived = pa.array([agents[m].get(t, d) if m in agents else d for m, t, d in zip(
                rows["model"], rows["task_id"], derived.to_pylist(), strict=True)], pa.string())
        problems += receipt_problems(rows, batch.column("input_sha256"), derived,
                                     receipts.examples_time(rows, task))
        first += len(rows)
        progress.add(len(rows))
    return problems
