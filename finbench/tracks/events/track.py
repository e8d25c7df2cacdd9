"""The event track behind the :class:`~finbench.tracks.base.Track` seam (docs/spec.md §11):
one task per resolved market at its cutoff, labels from the market's outcome, contexts
through the gate (posts strictly before ``t0``, ranked by BM25 over those posts alone), the
event prompt."""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pandas as pd

from finbench.core.errors import RunError
from finbench.core.progress import Countdown
from finbench.tracks.base import ContextBatch, Inputs, Track
from finbench.tracks.events.config import REFERENCE_KINDS, EventRunConfig
from finbench.tracks.events.gate import EventContexts, Retrieved, retrieve
from finbench.tracks.events.plan import EXCLUSIONS, OK, label_events, plan_events
from finbench.tracks.events.post_months import PostMonths
from finbench.tracks.events.prompt import EventPrompt
from finbench.tracks.events.references import frozen_window


class EventsTrack(Track):
    """Will this market resolve YES? Asked at its cutoff ``t0``."""

    name = "events"
    baseline_kinds = REFERENCE_KINDS

    def __init__(self, config: EventRunConfig) -> None:
        self.config = config
        self.plan = plan_events(config)
        self.tasks = self.plan.tasks
        self.labels: pd.DataFrame | None = None
        self.retrieved: list[Retrieved] = []
        self._history: pd.DataFrame | None = None
        self._tools = None

    @property
    def snapshot_sha256(self) -> str:
        return self.plan.store.snapshot_sha256

    def data_facts(self) -> dict:
        store = self.plan.store
        return {"store": str(self.config.data.store), "snapshot_sha256": store.snapshot_sha256,
                "synthetic": store.synthetic,
                "description": store.manifest.get("description", ""),
                "dumps": store.manifest.get("dumps", [])}

    def tools(self):
        if self._tools is None:
            from finbench.tracks.events.tools import EventTools

            self._tools = EventTools(self.plan.store, self.config)
        return self._tools

    @property
    def prompt(self) -> EventPrompt:
        return EventPrompt(max_chars=self.config.context.max_post_chars)

    def check_unchanged(self) -> None:
        self.plan.store.check_unchanged()

    def label(self, *, contexts: bool, echo=None) -> pd.DataFrame:
        """Labels, and every task's retrieval (whatever the forecasters: reports split every
        model by whether relevant posts existed before ``t0``)."""
        labels = label_events(self.plan)
        self._check_frozen(labels)  # (a config error needs no retrieval to be found)
        self.retrieved = self._retrieve_all(echo)
        top = np.array([r.scores[0] if r.scores else 0.0 for r in self.retrieved])
        self.labels = labels.assign(
            retrieved_posts=np.array([len(r.post_ids) for r in self.retrieved], np.int64),
            retrieval_top_score=top,
            retrieval_relevant=top >= self.config.context.relevant_min_score)
        return self.labels

    def _check_frozen(self, labels: pd.DataFrame) -> None:
        """Every frozen frequency known at every cutoff it will answer (the tasks that can be
        scored: those asked), else its LookaheadError, before anything is retrieved."""
        asked = self.tasks[(labels["status"] == OK).to_numpy(bool)]
        for model in self.config.models:
            if model.kind == "frozen_frequency":
                frozen_window(model, self.history(), asked)

    def _retrieve_all(self, echo) -> list[Retrieved]:
        """Retrieval for every task, a calendar month of cutoffs at a time (each month of
        posts read and indexed once, :class:`PostMonths`)."""
        ctx, tasks = self.config.context, self._task_frame()
        lookback = pd.Timedelta(days=ctx.lookback_days)
        month = tasks["t0"].dt.strftime("%Y-%m").to_numpy()
        out: list[Retrieved | None] = [None] * len(tasks)
        progress = Countdown("retrieval", len(tasks), echo, unit="tasks")
        posts = PostMonths(self.plan.store.read_posts)
        for key in dict.fromkeys(month):
            rows = np.flatnonzero(month == key)
            part = tasks.iloc[rows]
            for row, found in zip(rows, retrieve(posts, part, lookback=lookback, k=ctx.top_k),
                                  strict=True):
                out[row] = found
            progress.add(len(rows))
        return out

    def _task_frame(self) -> pd.DataFrame:
        """The tasks with their markets' question and terms."""
        markets = self.plan.markets.set_index("market_id")
        text = markets.loc[self.tasks["market_id"], ["question", "description"]]
        return self.tasks.assign(question=text["question"].to_numpy(),
                                 description=text["description"].to_numpy())

    def outputs(self) -> dict:
        """``retrieval.parquet``: every task's retrieved posts, best first (the per-row
        receipt of which posts a retrieving model was shown); with declared slices
        ``slices.parquet``, each task's value in each."""
        rows = [(task, rank, pid, created, score)
                for task, found in zip(self.tasks["task_id"], self.retrieved, strict=True)
                for rank, (pid, created, score) in enumerate(zip(
                    found.post_ids, found.created, found.scores, strict=True), 1)]
        out = {"retrieval.parquet": pd.DataFrame(rows, columns=[
            "task_id", "rank", "post_id", "created_utc", "score"]).astype(
            {"rank": np.int64, "score": np.float64})}
        if self.config.slices:
            from finbench.core.slices import slice_table
            from finbench.tracks.events.slices import task_slices

            out["slices.parquet"] = slice_table(task_slices(self.config, self.tasks))
        return out

    def askable(self) -> np.ndarray:
        """Only a task that can be scored is asked: one excluded by its label (void, its
        market not yet open at ``t0`` so its question was not known then, resolved at or
        before ``t0``, no price at ``t0``) would be paid for and never scored."""
        return (self._labels()["status"] == OK).to_numpy(bool)

    def warnings(self, labels: pd.DataFrame) -> list[str]:
        ok = labels["status"] == OK
        if not ok.any():
            raise RunError(f"no task can be scored: {labels['status'].value_counts().to_dict()}"
                           " (void markets, cutoffs outside the market's life, or no price "
                           "at t0)")
        out = []
        excluded = labels.loc[~ok, "status"].value_counts()
        if len(excluded):
            calls = len(excluded) and int(excluded.sum()) * sum(
                1 for m in self.config.models if m.kind not in REFERENCE_KINDS)
            out.append(f"{int(excluded.sum())} task(s) are asked of no model, excluded before "
                       "forecasting (" + ", ".join(f"{r} {int(excluded.get(r, 0))}"
                                                   for r in EXCLUSIONS if r in excluded)
                       + f"): {calls} language-model call(s) saved")
        if not (labels.loc[ok, "y"] == 1).any():
            out.append(f"no positive cases: none of the {int(ok.sum())} scored markets "
                       "resolved YES (kept in, flagged in every table)")
        return out

    def summary(self, labels: pd.DataFrame) -> dict:
        ok = labels["status"] == OK
        counts = labels["status"].value_counts()
        return {"tasks": len(labels), "scored": int(ok.sum()),
                "excluded": {r: int(counts[r]) for r in EXCLUSIONS if r in counts},
                "labels": {"YES": int((labels.loc[ok, "y"] == 1).sum()),
                           "NO": int((labels.loc[ok, "y"] == 0).sum())},
                "relevant_posts_found": int(labels.loc[ok, "retrieval_relevant"].sum()),
                "event_groups": int(labels.loc[ok, "event_group"].nunique())}

    def history(self) -> pd.DataFrame:
        """Every market of the store that resolved YES or NO, as references may read it:
        its outcome is known from ``resolved_at`` on."""
        if self._history is None:
            self._history = self._known_markets()
        return self._history

    def _known_markets(self) -> pd.DataFrame:
        m = self.plan.markets
        known = m[m["outcome"] != "void"]
        return pd.DataFrame({"market_id": known["market_id"], "category": known["category"],
                             "resolved_at": known["resolved_at"],
                             "y": (known["outcome"] == "YES").astype(np.int8),
                             "question": known["question"]}
                            ).sort_values(["resolved_at", "market_id"]).reset_index(drop=True)

    def plain_inputs(self, rows: np.ndarray) -> Inputs:
        return Inputs(tasks=self.tasks.iloc[rows].reset_index(drop=True),
                      history=self.history())

    def context_batches(self, wanted: np.ndarray) -> Iterator[ContextBatch]:
        labels = self._labels()
        where = np.flatnonzero(wanted)
        frame = self._task_frame()

        def inputs(rows: np.ndarray) -> Inputs:
            at = where[rows]
            tasks = frame.iloc[at].reset_index(drop=True)
            contexts = EventContexts(tasks, labels["price"].to_numpy(float)[at],
                                     labels["price_time"].iloc[at].reset_index(drop=True),
                                     [self.retrieved[i] for i in at])
            return Inputs(tasks=tasks, contexts=contexts, history=self.history())

        yield ContextBatch(where, inputs)

    def probe_questions(self, tasks: pd.DataFrame) -> list[str]:
        """Whether the task's market resolved YES, named by its question and the day it
        resolved (UTC)."""
        question = self.plan.markets.set_index("market_id")["question"]
        return [f"A prediction market asked: {json.dumps(str(q), ensure_ascii=False)}. It "
                f"resolved on {at.tz_convert('UTC'):%Y-%m-%d} (UTC). Did it resolve YES?"
                for q, at in zip(question.loc[tasks["market_id"]].to_numpy(object),
                                 tasks["resolved_at"], strict=True)]

    def release(self) -> None:
        self.labels, self.retrieved = None, []

    def _labels(self) -> pd.DataFrame:
        if self.labels is None:
            raise RuntimeError("the event track has no labels yet: call label() first")
        return self.labels
