"""The seam between a track and everything shared: :class:`TrackPlugin`, what the shared
commands (run, score, audit, report, show, tasks) ask of a track; :class:`Track`, what
:func:`finbench.run` drives; and :class:`Inputs`, what a batch of tasks gives a forecaster.

A track owns what is specific to one kind of question (for the intraday track: tasks at
horizons, bar-store reads, the label pass, momentum features, the time gate and contexts,
the prompt). The forecasters, the journal, scoring and reports are shared: they see tasks
(one row each, keyed by ``task_id``), labels and :class:`Inputs` only.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np
import pandas as pd


def messages_sha256(messages: list[dict[str, str]], template: str) -> str:
    """SHA-256 of the canonical JSON of the messages and the template version: a prompt's
    receipt, the same in every track."""
    payload = json.dumps({"template": template, "messages": messages}, sort_keys=True,
                         ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class Rendered:
    """A batch's prompts (:meth:`Prompt.render`): every task's messages and, for a variant
    shown earlier resolved tasks, each task's examples (their task ids) and when the latest
    of them became known (ns; ``NO_TIME`` where it shows none)."""

    messages: list[list[dict[str, str]]]
    examples: list[list[str]] | None = None
    examples_known: np.ndarray | None = None


class Prompt(Protocol):
    """How a track words a task for a language model (from its gated context only)."""

    template: str  # the template's version: part of every prompt hash and cache key

    def messages(self, contexts) -> list[list[dict[str, str]]]:
        """The chat messages of every task of a batch's contexts, in their order."""

    def render(self, inputs: Inputs) -> Rendered:
        """The messages of every task of a batch (its :class:`Inputs`: the contexts and, for
        a variant shown examples, the label history they are drawn from)."""

    def sha256(self, messages: list[dict[str, str]]) -> str:
        """The digest of the messages with the template version (the prompt's receipt)."""

    def for_model(self, model) -> Prompt:
        """The prompt a language model (its config) is asked: with what identifies the task's
        subject and date replaced by aliases (``anonymize``), and the question its ``format``
        and ``head`` name."""

    def response_schema(self) -> dict:
        """The ``response_format`` of the answer this prompt asks for (a strict JSON schema),
        sent with ``structured = "json_schema"``."""

    def request_options(self, model) -> dict:
        """Request keys the question needs beyond the messages (e.g. log-probabilities for
        an answer read from its first token); sent instead of a ``response_format``."""

    def parse(self, response: dict, model):
        """A stored response (content, refusal, finish reason; the model's config ``model``)
        read as this prompt's answer: a
        :class:`~finbench.forecasters.answers.ParsedAnswer`, valid or with its problem."""

    def answer_detail(self, response: dict, model) -> dict:
        """What a forecast row keeps of the response beside its answer (its ``detail``)."""


@dataclass
class Inputs:
    """What a batch of tasks gives a forecaster: the tasks, their gated contexts (the track's
    own type; None for forecasters that need none) and the label history known to its
    references (rows carrying ``label_known_at``). ``shared`` holds what forecasters given the
    same inputs compute once (the references' receipts). A track that gives more (the
    intraday track's indexed history) gives a subclass of its own."""

    tasks: pd.DataFrame
    contexts: object = None  # the track's gated contexts (intraday: gate.ContextIndex)
    history: pd.DataFrame | None = None
    shared: dict = field(default_factory=dict)


@dataclass
class ContextBatch:
    """Tasks whose contexts are built together (a month of the intraday track): ``where``,
    their rows in :attr:`Track.tasks`; ``inputs(rows)``, the :class:`Inputs` of those of
    them at ``rows`` (positions in ``where``)."""

    where: np.ndarray
    inputs: Callable[[np.ndarray], Inputs]


class Track(ABC):
    """One kind of forecasting question, driven by :func:`finbench.run` in this order:
    open it on a config (tasks planned, no market data read), :meth:`label` (the label pass),
    then forecasters take :meth:`plain_inputs` (those answering from the label history
    alone, for the tasks the run hands them together) or :meth:`context_batches` (those
    reading gated contexts), and
    :meth:`release` once every forecast is made."""

    name: ClassVar[str]
    baseline_kinds: ClassVar[tuple[str, ...]]  # forecaster kinds of the track's baselines
    tasks: pd.DataFrame  # the evaluated tasks, in the run's order (``task_id`` first)

    @property
    @abstractmethod
    def snapshot_sha256(self) -> str:
        """The digest of the data the run reads (one run never mixes two)."""

    @abstractmethod
    def data_facts(self) -> dict:
        """What the manifest records about the data (``snapshot_sha256`` among them)."""

    @property
    @abstractmethod
    def prompt(self) -> Prompt:
        """How this track words a task for a language model."""

    @abstractmethod
    def label(self, *, contexts: bool, echo=None) -> pd.DataFrame:
        """The label pass: every task's label (a frame in task order, ``task_id`` first);
        ``contexts``: some forecaster will read contexts (build what they need)."""

    def outputs(self) -> dict:
        """Files the run directory gets from the label pass beyond tasks and labels (name:
        a frame, or an Arrow table written as it is, as Parquet); none by default."""
        return {}

    def askable(self) -> np.ndarray:
        """Which of :attr:`tasks` can be asked at all (by default every one). A task that
        cannot (its question did not exist yet at its cutoff) is asked of no forecaster and
        has no forecast row; its label says why it is not scored."""
        return np.ones(len(self.tasks), dtype=bool)

    @abstractmethod
    def warnings(self, labels: pd.DataFrame) -> list[str]:
        """What a user should know before anything is paid for; a RunError when nothing can
        be scored."""

    def unscorable_notes(self, labels: pd.DataFrame) -> list[str]:
        """Lines a finished run prints beside its summary: why its unscorable tasks are so,
        by reason with counts, and what would score them; none by default."""
        return []

    @abstractmethod
    def summary(self, labels: pd.DataFrame) -> dict:
        """The manifest's facts about the tasks (counts, exclusions, label statuses)."""

    @abstractmethod
    def plain_inputs(self, rows: np.ndarray) -> Inputs:
        """What forecasters reading no context get for the tasks at ``rows``."""

    @abstractmethod
    def context_batches(self, wanted: np.ndarray) -> Iterator[ContextBatch]:
        """The tasks where ``wanted`` is set, with their gated contexts, a batch at a time."""

    @abstractmethod
    def release(self) -> None:
        """Let go of what the label pass holds (forecasts are made), and of any reading
        begun for it (also called when the run ends, however it ends)."""

    def check_unchanged(self) -> None:
        """A StoreError when the data the run read changed under it (another process changed
        its store while the run read it); nothing to check by default."""
        return

    def probe_questions(self, tasks: pd.DataFrame) -> list[str]:
        """The recall probe of each of ``tasks`` (rows of :attr:`tasks`): a yes-or-no
        question, in the past tense, about its outcome, naming its subject and day, asked
        with no context (:mod:`finbench.forecasters.probe`). A track without probes refuses
        a model that asks for them."""
        from finbench.core.errors import ConfigError

        raise ConfigError(f"recall_probe: the {self.name} track has no recall probe")

    def tools(self):
        """The :class:`~finbench.tracks.tools.ToolBox` an agent of this track calls, over
        the run's snapshot; None (the default): the track offers none."""
        return None


class TrackPlugin(ABC):
    """What the shared commands need of a track: one instance, ``PLUGIN``, in the module the
    registry (:mod:`finbench.tracks`) names for it. The runner, scoring, the audit, reports
    and the CLI reach a track through this alone; none of them names one.

    Required: :attr:`name`, :attr:`description`, :attr:`config_class`, :attr:`read_columns`,
    :attr:`score_files`, :meth:`open`, :meth:`score`, :meth:`summary`, :meth:`audit`,
    :meth:`report` and :meth:`show`. Optional (with defaults): :attr:`shardable`,
    :attr:`outcomes`, :attr:`cluster_column`, :meth:`score_inputs`, :meth:`score_notes`,
    :meth:`stance_judge`, :meth:`check_inputs`, :meth:`live_settings`,
    :meth:`setting_warnings`, :meth:`paper`
    (with :attr:`in_paper`) and :meth:`show_text`.
    The module holding ``PLUGIN`` imports what a method needs inside that method, so looking
    a track up costs its config class alone (and the forecaster kinds it registers).
    """

    name: ClassVar[str]  # what a config's ``track`` gives
    description: ClassVar[str]  # one line: the question it asks
    config_class: ClassVar[type]  # the pydantic model of its configs (``track`` fixed to name)
    # the columns the audit reads of its run's tables beside the forecasts, by file, each with
    # its kind ("text", "number", "time", "true or false"): checked before anything is derived
    read_columns: ClassVar[dict[str, dict[str, str]]]
    score_files: ClassVar[tuple[str, ...]]  # every file :meth:`score` may write
    # its runs split into date shards (--shard, the Dask executor): its config's ``tasks`` then
    # has ``start`` and ``end`` dates, and its tasks a ``session`` each
    shardable: ClassVar[bool] = False
    in_paper: ClassVar[bool] = False  # ``finbench paper`` pools its runs
    # the names of a label's two outcomes, y = 0 and y = 1 (an Inspect sample's target)
    outcomes: ClassVar[tuple[str, str]] = ("0", "1")
    # the column of its rows.* whose values move together, the clusters a cross-run
    # comparison resamples (by default each task on its own)
    cluster_column: ClassVar[str] = "task_id"

    @abstractmethod
    def open(self, config) -> Track:
        """The track of a config: its tasks planned, no market data read yet."""

    def score_inputs(self, run_dir: Path) -> Any:
        """What scoring reads of a run's tasks and labels, read while the forecasts' last
        parts are written (handed to :meth:`score`); None by default."""
        return None

    @abstractmethod
    def score(self, run_dir: Path, config, *, skipped: dict, inputs: Any = None):
        """Every score file of a finished run computed from its stored files alone, written
        (each atomically) and their hashes recorded in the manifest; the main scores table
        returned (what :meth:`summary` prints)."""

    def score_notes(self, config, tasks: int) -> list[str]:
        """Lines the run prints after scoring (e.g. a file left out); none by default."""
        return []

    def stance_judge(self, config):
        """The stance judge's settings when the config asks rationales to be judged
        (``[analysis.stance]``, a :class:`~finbench.core.config.StanceConfig`); None by
        default."""
        return None

    def check_inputs(self, config) -> None:
        """Read the files a config names beside its store (a declared slice's calendar or
        grouping) and raise a DataError on a bad one, before a run makes its folder; nothing
        by default."""
        return None

    def live_settings(self, config):
        """The config's live settings (a :class:`~finbench.core.config.LiveConfig`), None when
        it has none or the track has no live mode (the default)."""
        return None

    def setting_warnings(self, config) -> list[str]:
        """What the config's settings warrant saying before a run or report; none by
        default."""
        return []

    @abstractmethod
    def summary(self, run_dir: Path) -> list[str]:
        """The blocks of text a finished run prints (its scores, said plainly), read from its
        folder (local, or on object storage: a merge prints what the run printed)."""

    @abstractmethod
    def audit(self, run_dir: Path, manifest: dict, config, echo) -> list[str]:
        """Everything of a run that is the track's own, derived again from its data and the
        run's files: every difference named (the files' hashes and the config are checked
        by the shared audit before)."""

    @abstractmethod
    def report(self, run_dir: Path):
        """Tables into ``run_dir/tables`` and figures into ``run_dir/figures`` (and a page),
        from the run's stored files alone: ``(tables written, FigureSet)``."""

    def board_reference(self, config) -> str | None:
        """The model a leaderboard's skill is against on this track's board when the command
        names none (the board's first run's config): None by default, the board then giving
        no skill."""
        return None

    @abstractmethod
    def show(self, run_dir: Path, task_id: str, model: str | None) -> dict:
        """Everything the run holds about one task, from its files alone (with ``model``:
        that model and the track's references); a RunError naming an unknown task."""

    def paper(self, run_dirs: list, labels: list[str], out: Path, *,
              allow_different_tasks: bool, echo) -> list[Path]:
        """``finbench paper``: tables and figures of several runs of this track pooled into
        ``out`` (``labels``: each run's distinct name); only where :attr:`in_paper`."""
        raise NotImplementedError(f"track {self.name!r} pools no runs in a paper")

    def show_text(self, found: dict) -> str:
        """:meth:`show`'s answer as text a person reads (by default its JSON, indented)."""
        import json

        return json.dumps(found, indent=2, default=str)
