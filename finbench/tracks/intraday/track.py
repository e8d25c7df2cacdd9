"""The intraday-return track behind the :class:`~finbench.tracks.base.Track` seam: tasks at
the configured horizons of each session, labels from the bar store (docs/spec.md §3–5),
contexts through the time gate, the v2 prompt."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import numpy as np
import pandas as pd

from finbench.tracks.base import ContextBatch, Inputs, Track
from finbench.tracks.intraday.config import BASELINE_KINDS, CLASS_BASELINE_KINDS, RunConfig, momentum_minutes
from finbench.tracks.intraday.contexts import context_chunks
from finbench.tracks.intraday.facts import scorability, summary, unscorable_notes
from finbench.tracks.intraday.inputs import context_inputs, plain_inputs
from finbench.tracks.intraday.label_pass import Resolved, resolve
from finbench.tracks.intraday.plan import plan_run
from finbench.tracks.intraday.prompt import PromptSettings


class IntradayTrack(Track):
    """Will a stock's mid price be higher at the target time than at the forecast time?"""

    name = "intraday"
    baseline_kinds = (*BASELINE_KINDS, *CLASS_BASELINE_KINDS)

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        # the store's manifest read; its bars begin to be read ahead for the label pass
        self.plan = plan_run(config, read_ahead=True)
        self.tasks = self.plan.tasks
        self.resolved: Resolved | None = None
        self._tools = None

    @property
    def snapshot_sha256(self) -> str:
        return self.plan.store.snapshot_sha256

    def data_facts(self) -> dict:
        store = self.plan.store
        return {
            "store": str(self.config.data.store),
            "snapshot_sha256": store.snapshot_sha256,
            "partitions_sha256": hashlib.sha256(
                json.dumps(store.manifest["partitions"], sort_keys=True).encode()).hexdigest(),
            "synthetic": store.synthetic,
            "description": store.manifest.get("description", ""),
        }

    def tools(self):
        if self._tools is None:
            from finbench.tracks.intraday.tools import IntradayTools

            self._tools = IntradayTools(self.plan.store, self.config.tasks)
        return self._tools

    @property
    def prompt(self) -> PromptSettings:
        return PromptSettings.of(self.config)

    def label(self, *, contexts: bool, echo=None) -> pd.DataFrame:
        self.resolved = resolve(self.plan, momentum_minutes=momentum_minutes(self.config),
                                daily=contexts, echo=echo)
        return self.resolved.labels_of(self.tasks)

    def outputs(self) -> dict:
        """``slices.parquet`` with declared slices: each task's value in each
        (:mod:`finbench.tracks.intraday.slices`)."""
        if not self.config.slices:
            return {}
        from finbench.core.slices import slice_table
        from finbench.tracks.intraday.slices import task_slices

        return {"slices.parquet": slice_table(task_slices(self.config, self.tasks,
                                                          self._resolved().known))}

    def probe_questions(self, tasks: pd.DataFrame) -> list[str]:
        from finbench.tracks.intraday.probe import probe_questions

        return probe_questions(self.config, tasks)

    def warnings(self, labels: pd.DataFrame) -> list[str]:
        return scorability(self.plan, labels)

    def summary(self, labels: pd.DataFrame) -> dict:
        return summary(self.plan, labels)

    def unscorable_notes(self, labels: pd.DataFrame) -> list[str]:
        return unscorable_notes(self.tasks, labels)

    def plain_inputs(self, rows: np.ndarray) -> Inputs:
        return plain_inputs(self.plan, self._resolved(), rows)

    def context_batches(self, wanted: np.ndarray) -> Iterator[ContextBatch]:
        resolved = self._resolved()
        position = pd.Series(np.arange(len(self.tasks)), index=self.tasks["task_id"])
        for chunk, contexts, _ in context_chunks(self.plan, self.tasks[wanted], resolved.daily):
            def inputs(rows, chunk=chunk, contexts=contexts) -> Inputs:
                return context_inputs(self.plan, resolved, chunk, contexts, rows)

            yield ContextBatch(position.loc[chunk["task_id"]].to_numpy(), inputs)

    def release(self) -> None:
        self.resolved = None
        self.plan.store.stop_reading_ahead()

    def check_unchanged(self) -> None:
        self.plan.store.check_unchanged()

    def _resolved(self) -> Resolved:
        if self.resolved is None:
            raise RuntimeError("the intraday track has no labels yet: call label() first")
        return self.resolved
