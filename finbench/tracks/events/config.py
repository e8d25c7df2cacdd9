"""The event track's run configuration (``track = "events"``, docs/spec.md §11): which
resolved markets are asked, each market's cutoff ``t0``, what the gate lets through, the
forecasters and references, and how scores are summarised."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from finbench.core.config import (
    DataConfig,
    McpAgentModel,
    ModelBase,
    OpenAIModel,
    ReplayModel,
    StrictModel,
    absolute_path,
    resolve_paths,
    unique_names,
)
from finbench.core.slices import SliceConfig, check_slices, resolve_slice_paths

TEN_YEARS_HOURS = 24 * 3653


class EventTasksConfig(StrictModel):
    """Markets resolved in ``[resolved_from, resolved_to]`` (UTC dates), optionally of some
    categories; one task per market at its cutoff ``t0``:

    - ``cutoff = "open"``: ``t0 = opened_at + open_delay_hours``;
    - ``cutoff = "lead"``: ``t0 = closes_at - lead_hours``;
    - ``cutoff = "given"``: ``t0`` from ``cutoffs_file`` (``market_id``, ``t0`` columns).
    """

    resolved_from: dt.date
    resolved_to: dt.date
    categories: list[Annotated[str, Field(min_length=1)]] | None = None
    cutoff: Literal["open", "lead", "given"] = "lead"
    # spans in hours, at most ten years (a larger one is no market's, and past what an
    # instant can be moved by)
    open_delay_hours: Annotated[float, Field(ge=0, le=TEN_YEARS_HOURS)] = 0.0
    lead_hours: Annotated[float, Field(gt=0, le=TEN_YEARS_HOURS)] | None = None
    cutoffs_file: Path | None = None
    # the market's price at t0 is its last price at or before t0, no older than this
    price_max_age_hours: Annotated[float, Field(gt=0, le=TEN_YEARS_HOURS)] = 24.0

    @model_validator(mode="after")
    def _rule(self) -> EventTasksConfig:
        if self.resolved_to < self.resolved_from:
            raise ValueError(f"resolved_to {self.resolved_to} is before resolved_from "
                             f"{self.resolved_from}")
        if (self.cutoff == "lead") != (self.lead_hours is not None):
            raise ValueError("lead_hours goes with cutoff = 'lead' (and it needs it)")
        if (self.cutoff == "given") != (self.cutoffs_file is not None):
            raise ValueError("cutoffs_file goes with cutoff = 'given' (and it needs it)")
        return self


class EventContextConfig(StrictModel):
    """What the gate offers a forecaster of a market at ``t0``: posts made in
    ``[t0 - lookback_days, t0)``, the ``top_k`` best by BM25 against the question; a task
    found *relevant* discussion when a retrieved post scores at least ``relevant_min_score``."""

    lookback_days: Annotated[float, Field(gt=0, le=3650)] = 30.0
    top_k: Annotated[int, Field(ge=1, le=50)] = 5
    relevant_min_score: Annotated[float, Field(gt=0)] = 3.0
    max_post_chars: Annotated[int, Field(ge=50, le=20_000)] = 600


class ConstantModel(ModelBase):
    kind: Literal["constant"]
    p: Annotated[float, Field(ge=0, le=1)]  # declared before any label is read


class FrozenFrequencyModel(ModelBase):
    """The YES frequency of the markets resolved in a training window (void ones left
    out), frozen: every task it answers must come after the window's last resolution."""

    kind: Literal["frozen_frequency"]
    train_from: dt.date
    train_to: dt.date
    categories: list[str] | None = None

    @model_validator(mode="after")
    def _window(self) -> FrozenFrequencyModel:
        if self.train_to < self.train_from:
            raise ValueError("train_to is before train_from")
        return self


class CategoryRateModel(ModelBase):
    """The time-valid YES rate of the task's category: markets resolved before ``t0`` (the
    last ``window`` of them, or all); below ``min_count`` the rate of all categories, and
    below that again ``prior`` (each fallback recorded on its row)."""

    kind: Literal["category_rate"]
    window: Annotated[int, Field(ge=1)] | None = None
    min_count: Annotated[int, Field(ge=1)] = 5
    prior: Annotated[float, Field(ge=0, le=1)] = 0.5


class MarketPriceModel(ModelBase):
    kind: Literal["market_price"]  # the crowd: the market's YES price at t0


class EventLLMModel(OpenAIModel):
    """A language model asked for the probability of YES (``p_yes``) with a rationale;
    ``retrieval``: whether the retrieved posts are in its prompt."""

    format: Literal["event"] = "event"
    retrieval: Literal["none", "bm25"] = "bm25"
    show_market_price: bool = False  # the market's price at t0 in the prompt

    @model_validator(mode="after")
    def _event(self) -> EventLLMModel:
        if self.anonymize:
            raise ValueError("anonymize belongs to the intraday track")
        if self.head != "verbal":
            raise ValueError("the event track asks for a stated probability (head 'verbal')")
        from finbench.core.prompting import check_variant_fields
        from finbench.tracks.events.prompt import USER_FIELDS

        absent = {}
        if not self.show_market_price:
            absent["price"] = "the market's price is not shown (show_market_price = false)"
        if self.retrieval != "bm25":
            absent["posts"] = "no posts are retrieved (retrieval = 'none')"
        check_variant_fields(self.name, self.prompt, USER_FIELDS, absent)
        return self


class EventMcpModel(McpAgentModel):
    """An external agent answering the event question over MCP (docs/spec.md §12.5): the
    probability of YES; ``retrieval`` and ``show_market_price`` as for a language model."""

    format: Literal["event"] = "event"
    retrieval: Literal["none", "bm25"] = "bm25"
    show_market_price: bool = False

    @model_validator(mode="after")
    def _event(self) -> EventMcpModel:
        if self.anonymize:
            raise ValueError("anonymize belongs to the intraday track")
        return self


EventModelConfig = Annotated[
    ConstantModel | FrozenFrequencyModel | CategoryRateModel | MarketPriceModel | EventLLMModel
    | EventMcpModel | ReplayModel,
    Field(discriminator="kind")]
REFERENCE_KINDS = ("constant", "frozen_frequency", "category_rate", "market_price")


class EventScoresConfig(StrictModel):
    log_loss_clip: Annotated[float, Field(gt=0, lt=0.5)] = 1e-6
    bootstrap_replicates: Annotated[int, Field(ge=100, le=100_000)] = 2000
    seed: Annotated[int, Field(ge=0)] = 20240301  # numpy's generators take no negative seed
    level: Annotated[float, Field(gt=0.5, lt=1)] = 0.95
    min_group_cases: Annotated[int, Field(ge=1)] = 5  # per-group rows from this many cases
    # a table's row with fewer scored markets, or fewer event groups (its intervals' clusters),
    # is marked "descriptive only" (the rule of every table: reports.stats.descriptive)
    min_n: Annotated[int, Field(ge=1)] = 30
    min_groups: Annotated[int, Field(ge=1)] = 20


class EventRunConfig(StrictModel):
    version: Literal[1] = 1
    track: Literal["events"]
    data: DataConfig
    tasks: EventTasksConfig
    context: EventContextConfig = Field(default_factory=EventContextConfig)
    models: list[EventModelConfig] = Field(default_factory=list)
    scores: EventScoresConfig = Field(default_factory=EventScoresConfig)
    # the parts of the markets the report scores apart, declared before any label is read
    slices: list[SliceConfig] = Field(default_factory=list)
    executor: None = Field(None, exclude=True)  # only to refuse [executor], with the reason

    @field_validator("executor", mode="before")
    @classmethod
    def _runs_whole(cls, value: object) -> None:
        raise ValueError("shards split an intraday run's sessions; a run of track 'events' "
                         "runs whole, in one process (remove [executor])")

    @model_validator(mode="after")
    def _names(self) -> EventRunConfig:
        unique_names(self.models)
        timed = [m.name for m in self.models if m.horizons is not None]
        if timed:
            raise ValueError(f"models.{timed[0]}.horizons: the event track has no horizons")
        check_slices(self.slices)
        regimes = [s.name for s in self.slices if s.kind == "volatility"]
        if regimes:
            raise ValueError(f"slices.{regimes[0]}: a volatility regime is the intraday "
                             "track's (its label history); an event run slices by calendar "
                             "or groups")
        return self

    def resolved(self, base: Path) -> EventRunConfig:
        """The config with its relative paths (store, replays, cutoffs file) made absolute
        against ``base``."""
        given = self.tasks.cutoffs_file
        slices = resolve_slice_paths(self.slices, base)
        if given is None:
            return resolve_paths(self, base, slices=slices)
        return resolve_paths(self, base, slices=slices, tasks=self.tasks.model_copy(
            update={"cutoffs_file": absolute_path(given, base)}))


def reference_names(config: EventRunConfig) -> list[str]:
    """The references of a config (skill is computed against each), in its order."""
    return [m.name for m in config.models if m.kind in REFERENCE_KINDS]
