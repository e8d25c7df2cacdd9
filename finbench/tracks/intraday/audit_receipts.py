"""Receipts re-derived from the store: each forecast row's latest input time and input digest
(a baseline's input line, a context, an LLM prompt), and the time gate on every row."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from finbench.core.config import PROMPTED_KINDS
from finbench.core.lookup import same_values
from finbench.core.times import NO_TIME, from_ns
from finbench.tracks.intraday.config import BASELINE_KINDS, CLASS_BASELINE_KINDS
from finbench.tracks.intraday.contexts import context_chunks
from finbench.tracks.intraday.history import baseline_digests
from finbench.tracks.intraday.prompt import PromptSettings


class Receipts:
    """What each task's receipts should be, re-derived from the store: the digest of a
    baseline's input line (labels known, momentum signs) and when the latest bar a momentum
    forecast read became available; with ``contexts``, each task's context (its latest input
    time and digest; with ``prompts``, the digest of the rendered LLM prompt)."""

    def __init__(self, config, plan, resolved, *, contexts: bool, prompts: bool,
                 each_chunk=None) -> None:
        """``each_chunk(chunk, contexts, bars)``: called with each month's contexts as they are
        built (for what else needs them)."""
        rows = resolved.history_rows(np.arange(len(plan.tasks)))
        # a baseline's input line names the momentum sign it reads (momentum) or none
        self.signs = {m.name: (f"momentum_sign_{m.lookback_minutes}",) for m in config.models
                      if m.kind == "momentum"}
        self.baseline_sha = {signs: baseline_digests(resolved.known, plan.tasks,
                                                     resolved.history, rows, signs)
                             for signs in {(), *self.signs.values()}}
        self.seen = {m.name: resolved.history[f"momentum_seen_ns_{m.lookback_minutes}"]
                     .to_numpy(np.int64)[rows] for m in config.models if m.kind == "momentum"}
        self.context_ns = self.context_sha = None
        self.prompt_shas: dict[PromptSettings, pa.Array] = {}
        # per prompt shown earlier resolved tasks: when the latest it shows became known
        self.examples_ns: dict[PromptSettings, np.ndarray] = {}
        self.known = resolved.known
        base = PromptSettings.of(config)
        # the prompt each language model is asked (models asked the same share its digests)
        self.prompt_of = {m.name: base.for_model(m) for m in config.models
                          if m.kind in PROMPTED_KINDS} if prompts else {}
        prompts = set(self.prompt_of.values())
        if contexts:
            self._contexts(plan, resolved, prompts, each_chunk)

    def _contexts(self, plan, resolved, prompts: bool, each_chunk) -> None:
        n = len(plan.tasks)
        self.context_ns = np.full(n, NO_TIME, np.int64)
        sha = np.full(n, None, object)
        prompt = {variant: np.full(n, None, object) for variant in prompts}
        self.examples_ns = {v: np.full(n, NO_TIME, np.int64) for v in prompts if v.examples}
        at = pd.Series(np.arange(n), index=plan.tasks["task_id"])
        for chunk, contexts, bars in context_chunks(plan, plan.tasks, resolved.daily):
            if each_chunk is not None:
                each_chunk(chunk, contexts, bars)
            where = at.loc[chunk["task_id"]].to_numpy()
            self.context_ns[where] = contexts.max_input_ns
            sha[where] = contexts.digests()
            for settings in prompts:  # each prompt the run's models are asked
                renderer = settings.renderer(contexts, self.known)
                prompt[settings][where] = [settings.sha256(m) for m in renderer.messages()]
                if settings.examples:  # its examples drawn again from the labels re-derived
                    self.examples_ns[settings][where] = renderer.example_receipts()[1]
        self.context_sha = pa.array(sha, pa.string())
        self.prompt_shas = {settings: pa.array(prompt[settings], pa.string())
                            for settings in prompts}

    def examples_time(self, rows: pd.DataFrame, task: np.ndarray) -> tuple[np.ndarray,
                                                                           pd.Series]:
        """(which of ``rows`` are of a model shown examples, the time its row's
        ``history_max_input_time`` should be: when the latest example became known)."""
        ns = np.full(len(rows), NO_TIME, np.int64)
        shown = np.zeros(len(rows), bool)
        for name, settings in self.prompt_of.items():
            if settings in self.examples_ns:
                mine = (task >= 0) & (rows["model"] == name).to_numpy(bool)
                ns[mine] = self.examples_ns[settings][task[mine]]
                shown |= mine
        return shown, from_ns(ns)

    def of(self, rows: pd.DataFrame, task: np.ndarray) -> tuple[pd.Series, pa.Array]:
        """(input time, digest) each of ``rows`` should carry; ``task``: its task's number
        (-1 for a row of no task of the run, whose receipts are missing). The digests stay
        Arrow text: no text object is made per row."""
        known = task >= 0
        at = pa.array(task, mask=~known)
        kind, model = rows["kind"], rows["model"]
        baseline = kind.isin([*BASELINE_KINDS, *CLASS_BASELINE_KINDS]).to_numpy(bool)
        ns = np.full(len(rows), NO_TIME, np.int64)
        sha = self.baseline_sha[()].take(at)
        for name, signs in self.signs.items():
            mine = (model == name).to_numpy(bool)
            if mine.any():
                sha = pc.if_else(pa.array(mine), self.baseline_sha[signs].take(at), sha)
        for name, seen in self.seen.items():
            mine = known & (model == name).to_numpy(bool) & baseline
            ns[mine] = seen[task[mine]]
        if self.context_ns is not None and not baseline.all():
            other = known & ~baseline
            ns[other] = self.context_ns[task[other]]
            text = self.context_sha.take(at)
            for name, settings in self.prompt_of.items():
                asked = (kind.isin(PROMPTED_KINDS) & (model == name)).to_numpy(bool)
                if asked.any():
                    text = pc.if_else(pa.array(asked), self.prompt_shas[settings].take(at), text)
            sha = pc.if_else(pa.array(baseline), sha, text)
        return from_ns(ns), sha


def receipt_problems(rows: pd.DataFrame, stored_sha: pa.Array, derived_sha: pa.Array,
                     examples: tuple[np.ndarray, pd.Series] | None = None) -> list[str]:
    """Each forecast row against its task's horizon and its re-derived receipts
    (``derived_sha``, beside the rows' ``input_sha256`` as ``stored_sha``: Arrow text, a
    missing digest equal only to a missing one; ``examples``:
    :meth:`Receipts.examples_time`); the rules are checked on whole columns, the messages
    written for the rows that break one."""
    t_fc = rows["t_forecast"]
    foreign = t_fc.isna().to_numpy()
    late = (rows["max_input_time"] > t_fc).fillna(False).to_numpy(bool)
    stored, derived = rows["context_max_input_time"], rows["ctx_time"]
    time_differs = ~((stored.isna() & derived.isna()) | (stored == derived).fillna(False))
    history_late = (rows["history_max_input_time"] >= t_fc).fillna(False).to_numpy(bool)
    sha_differs = ~same_values(stored_sha, derived_sha)
    shown_differs = np.zeros(len(rows), bool)
    if examples is not None:
        shown, when = examples
        stored_h = rows["history_max_input_time"].reset_index(drop=True)
        same = (stored_h.isna() & when.isna()) | (stored_h == when).fillna(False)
        shown_differs = shown & ~same.to_numpy(bool)
    bad = (foreign | late | time_differs.to_numpy(bool) | history_late | sha_differs
           | shown_differs)
    problems = []
    for i in np.flatnonzero(bad):
        rec = rows.iloc[i]
        where = f"forecasts.parquet row {rec['index'] + 1} ({rec.task_id}, {rec.model})"
        if foreign[i]:
            problems.append(f"{where}: task is not part of this run")
            continue
        if late[i]:
            problems.append(f"{where}: max_input_time {rec.max_input_time.isoformat()} is after "
                            f"the horizon {rec.t_forecast.isoformat()}")
        if not _same_time(rec.context_max_input_time, rec.ctx_time):
            problems.append(f"{where}: context max_input_time {rec.context_max_input_time} does "
                            f"not match the re-derived {rec.ctx_time}")
        if history_late[i]:
            problems.append(f"{where}: uses a label known at {rec.history_max_input_time} , not "
                            f"before the horizon {rec.t_forecast}")
        if shown_differs[i]:
            problems.append(f"{where}: history_max_input_time {rec.history_max_input_time} "
                            "is not when the latest example its prompt shows became known "
                            f"({examples[1].iat[int(i)]}, derived again)")
        if sha_differs[i]:
            problems.append(f"{where}: input_sha256 {str(stored_sha[int(i)].as_py())[:12]} "
                            "does not match the re-derived "
                            f"{str(derived_sha[int(i)].as_py())[:12]}")
    return problems


def _same_time(a, b) -> bool:
    if pd.isna(a) and pd.isna(b):
        return True
    return (not pd.isna(a)) and (not pd.isna(b)) and pd.Timestamp(a) == pd.Timestamp(b)
