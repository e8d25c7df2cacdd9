"""The intraday track's config (docs/spec.md §9): the tasks (sessions, tickers, horizons, the
three-class partition), the context, its baselines' model configs, scores, report and
analysis settings, and ``RunConfig``, the whole; the parts every track shares are in
:mod:`finbench.core.config`."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from finbench.core.config import (
    CONFIG_VERSION,
    DataConfig,
    ExecutorConfig,
    LiveConfig,
    McpAgentModel,
    ModelBase,
    OpenAIModel,
    ReplayModel,
    ScriptedModel,
    StanceConfig,
    StrictModel,
    absolute_path,
    resolve_paths,
    unique_names,
)
from finbench.core.names import clock_time, is_timezone, ticker_problem
from finbench.core.slices import SliceConfig, check_slices, resolve_slice_paths

CLASSES = ("down", "flat", "up")  # the three-class partition of r, in its fixed order


DEFAULT_HORIZONS = {"MORNING": "09:30", "MIDDAY": "12:30", "CLOSE": "15:30"}


class ClassesConfig(StrictModel):
    """The three-class partition of ``r`` (down, flat, up), declared before any label is
    read: flat is ``|r| <= band`` (log-return units), or with ``band_ticks`` a move of the mid
    of at most that many price increments (``tick``) from ``P_ref``."""

    band: Annotated[float, Field(gt=0, lt=1)] | None = None
    band_ticks: Annotated[int, Field(ge=0, le=10_000)] | None = None
    # the venue's price increment at P_ref: ``tick`` from 1 up, ``tick_under_1`` below (US
    # equities: one cent, and 0.0001 under a dollar)
    tick: Annotated[float, Field(gt=0)] = 0.01
    tick_under_1: Annotated[float, Field(gt=0)] = 0.0001

    @model_validator(mode="after")
    def _one_band(self) -> ClassesConfig:
        if (self.band is None) == (self.band_ticks is None):
            raise ValueError("give band (log-return units) or band_ticks (price increments), "
                             "one of them")
        return self


class TasksConfig(StrictModel):
    tickers: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)
    start: dt.date
    end: dt.date
    horizons: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_HORIZONS))
    target: str = "15:55"
    timezone: str = "America/New_York"
    calendar: str = "XNYS"
    early_close: Literal["skip", "shift"] = "skip"
    ref_window_seconds: Annotated[int, Field(ge=0, le=3600)] = 30
    classes: ClassesConfig | None = None  # labels also get the three-class partition

    @field_validator("tickers")
    @classmethod
    def _tickers(cls, value: list[str]) -> list[str]:
        for ticker in value:
            problem = ticker_problem(ticker)
            if problem:
                raise ValueError(f"ticker {problem}")
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        if not is_timezone(value):
            raise ValueError(f"{value!r} is not a time zone name (e.g. America/New_York)")
        return value

    @field_validator("calendar")
    @classmethod
    def _calendar(cls, value: str) -> str:
        from finbench.core.calendar import is_calendar

        if not is_calendar(value):
            raise ValueError(f"{value!r} is not an exchange-calendars calendar (e.g. XNYS, "
                             "XLON, XTKS)")
        return value

    @field_validator("horizons")
    @classmethod
    def _clocks(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("at least one horizon is needed")
        for name, text in value.items():
            if clock_time(text) is None:
                raise ValueError(f"horizon {name}: {text!r} is not a clock time HH:MM or "
                                 "HH:MM:SS")
        return value

    @field_validator("target")
    @classmethod
    def _target_clock(cls, value: str) -> str:
        if clock_time(value) is None:
            raise ValueError(f"{value!r} is not a clock time HH:MM or HH:MM:SS")
        return value

    @model_validator(mode="after")
    def _order(self) -> TasksConfig:
        if self.end < self.start:
            raise ValueError(f"end {self.end} is before start {self.start}")
        late = [name for name, text in self.horizons.items()
                if clock_time(text) >= clock_time(self.target)]
        if late:
            raise ValueError(f"horizons.{late[0]}: {self.horizons[late[0]]} is not before the "
                             f"target {self.target}: a forecast is made before its target")
        if len(set(self.tickers)) != len(self.tickers):
            raise ValueError("tickers are listed more than once")
        return self


class ContextConfig(StrictModel):
    previous_sessions: Annotated[int, Field(ge=0, le=250)] = 5
    headline_hours: Annotated[float, Field(gt=0, le=24 * 30)] = 24.0
    max_headlines: Annotated[int, Field(ge=0, le=500)] = 20
    # per ticker, the names an anonymized prompt replaces by the ticker's alias (all of them,
    # whatever the run's tickers: a prompt must not depend on which other tickers a run has)
    company_names: dict[str, list[Annotated[str, Field(min_length=2)]]] = Field(
        default_factory=dict)


class CoinModel(ModelBase):
    kind: Literal["coin"]


class BaseRateModel(ModelBase):
    kind: Literal["base_rate"]
    variant: Literal["rolling", "frozen"] = "rolling"
    window: Annotated[int, Field(ge=1)] = 60
    min_count: Annotated[int, Field(ge=1)] = 20
    train_start: dt.date | None = None
    train_end: dt.date | None = None

    @model_validator(mode="after")
    def _frozen_window(self) -> BaseRateModel:
        if self.variant == "frozen" and (self.train_start is None or self.train_end is None):
            raise ValueError("variant 'frozen' needs train_start and train_end")
        if self.variant == "rolling" and (self.train_start or self.train_end):
            raise ValueError("train_start/train_end belong to variant 'frozen' only")
        if self.train_start and self.train_end and self.train_end < self.train_start:
            raise ValueError("train_end is before train_start")
        return self


class MomentumModel(ModelBase):
    kind: Literal["momentum"]
    window: Annotated[int, Field(ge=1)] = 60
    min_count: Annotated[int, Field(ge=1)] = 20
    lookback_minutes: Annotated[int, Field(ge=1, le=390)] = 30


class ClimatologyModel(ModelBase):
    kind: Literal["climatology"]
    window: Annotated[int, Field(ge=1)] = 60
    min_count: Annotated[int, Field(ge=1)] = 20


class ClassUniformModel(ModelBase):
    kind: Literal["class_uniform"]  # 1/3 for each of down, flat, up


class ClassFrequencyModel(ModelBase):
    kind: Literal["class_frequency"]  # the rolling class frequencies of the series
    window: Annotated[int, Field(ge=1)] = 60
    min_count: Annotated[int, Field(ge=1)] = 20


ModelConfig = Annotated[
    CoinModel | BaseRateModel | MomentumModel | ClimatologyModel | ClassUniformModel
    | ClassFrequencyModel | ReplayModel | ScriptedModel | OpenAIModel | McpAgentModel,
    Field(discriminator="kind"),
]


BASELINE_KINDS = ("coin", "base_rate", "momentum", "climatology")  # binary references


CLASS_BASELINE_KINDS = ("class_uniform", "class_frequency")  # three-class references


def model_format(model) -> str:
    """What a model forecasts: ``binary`` (p_up and an interval) or ``multiclass`` (down,
    flat, up)."""
    if model.kind in CLASS_BASELINE_KINDS:
        return "multiclass"
    return getattr(model, "format", "binary")


def binary_names(config) -> list[str]:
    """The models of a config scored on the binary question, in its order."""
    return [m.name for m in config.models if model_format(m) == "binary"]


def class_names(config) -> list[str]:
    """The models of a config scored on the three classes, in its order."""
    return [m.name for m in config.models if model_format(m) == "multiclass"]


class ScoresConfig(StrictModel):
    log_loss_clip: Annotated[float, Field(gt=0, lt=0.5)] = 1e-6
    alpha: Annotated[float, Field(gt=0, lt=1)] = 0.2
    composite: dict[str, float] | None = None
    # rows.csv beside rows.parquet (the same rows): always, never, or ("auto") when its rows fit
    # a spreadsheet (finbench.tracks.intraday.scores.SPREADSHEET_ROWS); a year of 500 tickers would be
    # 424 MB of CSV, about 2 s of the run's time, and open in no spreadsheet
    rows_csv: bool | Literal["auto"] = "auto"


class AnalysisConfig(StrictModel):
    stance: StanceConfig = Field(default_factory=StanceConfig)


class ReportConfig(StrictModel):
    """Statistics of reports: bootstrap by whole clusters, and when rows are too few."""

    bootstrap_replicates: Annotated[int, Field(ge=100, le=100_000)] = 2000
    seed: Annotated[int, Field(ge=0)] = 20250115  # numpy's generators take no negative seed
    cluster: Literal["session", "session_ticker"] = "session"
    level: Annotated[float, Field(gt=0.5, lt=1)] = 0.95
    min_n: Annotated[int, Field(ge=1)] = 30
    min_sessions: Annotated[int, Field(ge=1)] = 20  # below it a session bootstrap's 95%
    # interval covers 88-91% (at 10 sessions): rows are "descriptive only"
    bins: Annotated[int, Field(ge=2, le=50)] = 10
    # the paper's tables (`finbench paper`): Table 1 and Figure 1 show these models at the
    # first horizon (None: every model); Table 2 and Figure 3 compare this pair by horizon
    # (None: no Table 2); Figures 1 and 3 show the composite (needs [scores] composite)
    paper_models: list[Annotated[str, Field(min_length=1)]] | None = Field(default=None,
                                                                            min_length=1)
    paper_pair: tuple[Annotated[str, Field(min_length=1)],
                      Annotated[str, Field(min_length=1)]] | None = None
    paper_composite: bool = False

    def warnings(self) -> list[str]:
        """What a user choosing these settings should know."""
        if self.cluster != "session_ticker":
            return []
        return ['[report] cluster = "session_ticker" resamples each ticker\'s session on its '
                "own, as if a day that moves the whole market moved one ticker: in simulation "
                "(benchmarks/bench_bootstrap_coverage.py) its 95% intervals cover 47% where "
                'sessions as clusters cover 93%; cluster = "session" (the default) does not '
                "understate them"]


class RunConfig(StrictModel):
    """The intraday track's config (docs/spec.md §9); other tracks' configs are their own
    (each registered track's ``config_class``)."""

    version: Literal[1] = CONFIG_VERSION
    track: Literal["intraday"] = "intraday"  # the kind of question (finbench.tracks)
    data: DataConfig
    tasks: TasksConfig
    context: ContextConfig = Field(default_factory=ContextConfig)
    models: list[ModelConfig] = Field(default_factory=list)
    invalid_policy: str = "exclude"
    scores: ScoresConfig = Field(default_factory=ScoresConfig)
    report: ReportConfig = Field(default_factory=ReportConfig)
    analysis: AnalysisConfig = Field(default_factory=AnalysisConfig)
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    # the parts of the tasks the report scores apart, declared before any label is read
    slices: list[SliceConfig] = Field(default_factory=list)
    live: LiveConfig | None = None  # `finbench live`: how its answers are sealed

    @model_validator(mode="after")
    def _models(self) -> RunConfig:
        unique_names(self.models)
        policy = self.invalid_policy
        if policy != "exclude":
            if not policy.startswith("fallback:"):
                raise ValueError(
                    f"invalid_policy {policy!r} is not 'exclude' or 'fallback:<baseline name>'"
                )
            target = policy.split(":", 1)[1]
            baselines = [m.name for m in self.models if m.kind in BASELINE_KINDS]
            if target not in baselines:
                raise ValueError(
                    f"invalid_policy names {target!r}, which is not a baseline model of this "
                    f"config (baselines: {', '.join(baselines) or 'none'})"
                )
        unnamed = [t for t in self.tasks.tickers if t not in self.context.company_names]
        anonymous = [m.name for m in self.models if getattr(m, "anonymize", False)]
        if anonymous and unnamed:
            raise ValueError(f"models.{anonymous[0]}.anonymize: context.company_names has no "
                             f"entry for {', '.join(unnamed[:5])} (give each ticker its names, "
                             "[] if none, so no prompt shows them)")
        multiclass = [m.name for m in self.models if model_format(m) == "multiclass"]
        if multiclass and self.tasks.classes is None:
            raise ValueError(f"models.{multiclass[0]}: a three-class model needs the partition "
                             "declared in [tasks.classes] (band or band_ticks)")
        for m in self.models:
            unknown = [h for h in m.horizons or [] if h not in self.tasks.horizons]
            if unknown:
                raise ValueError(f"models.{m.name}.horizons: {unknown[0]!r} is not a horizon of "
                                 f"the run ({', '.join(self.tasks.horizons)})")
        check_variants(self.models)
        check_slices(self.slices)
        composite = self.scores.composite or {}
        columns = composite_columns(self)
        unknown = [key for key in composite if key not in columns]
        if unknown:
            raise ValueError(f"scores.composite.{unknown[0]}: not a score of this run; a "
                             f"composite weighs these: {', '.join(columns)}")
        names = [m.name for m in self.models]
        for key, given in (("paper_models", self.report.paper_models or []),
                           ("paper_pair", self.report.paper_pair or [])):
            stray = [n for n in given if n not in names]
            if stray:
                raise ValueError(f"report.{key}: {stray[0]!r} is no model of the config "
                                 f"({', '.join(names)})")
        if self.report.paper_composite and not composite:
            raise ValueError("report.paper_composite: the paper's figures show the composite "
                             "[scores] composite defines, and it defines none")
        return self

    def resolved(self, base: Path) -> RunConfig:
        """The config with its relative paths made absolute against ``base``."""
        live = self.live if self.live is None else self.live.model_copy(
            update={"tsa_root": absolute_path(self.live.tsa_root, base)})
        return resolve_paths(self, base, slices=resolve_slice_paths(self.slices, base),
                             live=live)


def check_variants(models) -> None:
    """A ValueError when a model's user template names a field its tasks' gate does not
    hold, or leaves out the examples it is to be shown."""
    for m in models:
        if getattr(m, "prompt", None) is not None:
            _check_variant(m.name, m.prompt)


def _check_variant(name: str, variant) -> None:
    from finbench.core.prompting import check_variant_fields
    from finbench.tracks.intraday.prompt import USER_FIELDS

    check_variant_fields(name, variant, USER_FIELDS)


SCORE_COLUMNS = ("accuracy", "brier", "log_loss", "kelly", "coverage", "width", "winkler")


def composite_columns(config: RunConfig) -> list[str]:
    """The score columns a composite may weigh: the mean scores, the Brier skill against
    each baseline (``bss_<name>``) and the Winkler skill against the first climatology
    (``wss_<name>``)."""
    baselines = [m.name for m in config.models if m.kind in BASELINE_KINDS]
    climatology = [m.name for m in config.models if m.kind == "climatology"][:1]
    return [*SCORE_COLUMNS, *(f"bss_{b}" for b in baselines),
            *(f"wss_{c}" for c in climatology)]


def baseline_names(config: RunConfig) -> list[str]:
    """The baselines of a config, in its order."""
    return [m.name for m in config.models if m.kind in BASELINE_KINDS]


def interval_reference(config: RunConfig) -> str | None:
    """The model interval skill (``wss_*``) is relative to: the first climatology."""
    names = [m.name for m in config.models if m.kind == "climatology"]
    return names[0] if names else None


def knowledge_cutoffs(config: RunConfig) -> dict[str, dt.date]:
    """The models that declare a training-data cutoff, with it."""
    return {m.name: m.knowledge_cutoff for m in config.models
            if getattr(m, "knowledge_cutoff", None) is not None}


CUTOFF_SLICES = ("before cutoff (possibly memorised)", "after cutoff", "no cutoff declared")


def cutoff_slice(sessions, cutoff: dt.date | None) -> list[str]:
    """Per session (``YYYY-MM-DD`` text), which side of a model's cutoff it lies on: on or
    before it the outcome may be in the training data.

    >>> cutoff_slice(["2024-06-28", "2024-07-01"], dt.date(2024, 6, 30))
    ['before cutoff (possibly memorised)', 'after cutoff']
    """
    if cutoff is None:
        return [CUTOFF_SLICES[2]] * len(sessions)
    last = cutoff.isoformat()
    return [CUTOFF_SLICES[0] if s <= last else CUTOFF_SLICES[1] for s in sessions]


def momentum_minutes(config: RunConfig) -> set[int]:
    """The lookbacks of the config's momentum baselines (their signs come from the label
    pass)."""
    return {m.lookback_minutes for m in config.models if m.kind == "momentum"}
