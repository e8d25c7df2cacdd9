"""The config parts every track shares (docs/spec.md §9): strict pydantic models (unknown
keys rejected), the data section, model bases, replays, scripted answers, language models,
the stance judge's settings, the executor, trials, and config files' text and paths. Each
track's config class is its own (``finbench/tracks/<name>/config.py``); a file is read as
the config of the track it names by :mod:`finbench.tracks.configs`."""

from __future__ import annotations

import codecs
import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from finbench.core.errors import ConfigError
from finbench.core.location import is_uri

CONFIG_VERSION = 1


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class DataConfig(StrictModel):
    """``store``: a local folder (relative to the config's folder) or a folder on object
    storage (``s3://bucket/store``, :mod:`finbench.core.location`)."""

    store: Path | str

    @field_validator("store", mode="before")
    @classmethod
    def _path_or_uri(cls, value):
        if isinstance(value, str | Path):
            return str(value).rstrip("/") if is_uri(value) else Path(value)
        return value


class LiveConfig(StrictModel):
    """The live mode's seals (``finbench live``, docs/live.md): the RFC 3161 time-stamping
    authority that stamps the ledger's head after each horizon, the root certificate its
    tokens chain to (PEM, relative to the config's folder), and how long after a horizon a
    seal may come and still be on time."""

    tsa_url: Annotated[str, Field(min_length=1)]
    tsa_root: Path
    seal_within_seconds: Annotated[float, Field(gt=0, le=3600)] = 60.0
    # after a session's target, how long before its nonces are revealed
    reveal_after_seconds: Annotated[float, Field(ge=0, le=86_400)] = 60.0
    tsa_timeout_seconds: Annotated[float, Field(gt=0, le=600)] = 10.0
    # where a horizon's bars come from: the store as a feed of the user's fills it, or a
    # vendor asked at each horizon for the day's bars that ended by then (docs/data.md)
    source: Literal["store", "alpaca", "databento", "massive", "yfinance"] = "store"
    feed: Annotated[str, Field(min_length=1)] | None = None  # the vendor's feed (alpaca: iex)


class ModelBase(StrictModel):
    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:\- ]*$")]
    # the horizons this model is asked (None: all of the run's); other tasks are not asked:
    # no forecast row, never an invalid answer
    horizons: list[Annotated[str, Field(min_length=1)]] | None = Field(default=None,
                                                                        min_length=1)


class ReplayModel(ModelBase):
    kind: Literal["replay"]
    path: Path
    model: Annotated[str, Field(min_length=1)] | None = None  # the file's ``model`` column value
    # a task without a row in the file: an invalid answer ("invalid"), or not asked
    missing: Literal["invalid", "not_asked"] = "invalid"
    knowledge_cutoff: dt.date | None = None  # of the model that made the file (see OpenAIModel)


class ScriptedModel(ModelBase):
    kind: Literal["scripted"]
    answers: list[str] = Field(min_length=1)
    format: Literal["binary", "multiclass"] = "binary"  # multiclass: verbal three-class answers
    sum_tolerance: Annotated[float, Field(ge=0, le=0.1)] = 1e-3


class PromptVariant(StrictModel):
    """How a language model is asked beyond its track's own prompt (the ``prompt`` table of
    a model, :mod:`finbench.core.prompting`): a user template, reasoning before the answer,
    earlier resolved examples, repeated samples. The defaults ask the track's prompt."""

    user: Annotated[str, Field(min_length=1)] | None = None  # Jinja2, of the gate's fields
    reasoning: Literal["direct", "think"] = "direct"
    examples: Annotated[int, Field(ge=0, le=20)] = 0
    samples: Annotated[int, Field(ge=1, le=32)] = 1
    aggregate: Literal["mean", "median"] = "mean"  # of the samples' probabilities
    min_valid: Annotated[int, Field(ge=1)] | None = None  # valid samples needed (default all)

    @model_validator(mode="after")
    def _variant(self) -> PromptVariant:
        from finbench.core.prompting import template_names

        if self.user is not None:
            template_names(self.user)  # a template that does not parse, with its line
        if self.min_valid is not None and self.min_valid > self.samples:
            raise ValueError(f"min_valid {self.min_valid} is more than the {self.samples} "
                             "samples asked")
        if self.samples == 1 and (self.min_valid is not None or self.aggregate != "mean"):
            raise ValueError("aggregate and min_valid are read with samples > 1")
        return self

    @property
    def is_default(self) -> bool:
        return self == PromptVariant()

    @property
    def needed(self) -> int:
        """Valid samples an answer needs."""
        return self.samples if self.min_valid is None else self.min_valid


class OpenAIModel(ModelBase):
    kind: Literal["openai"]
    model: Annotated[str, Field(min_length=1)]
    base_url: str | None = None
    base_url_env: Annotated[str, Field(min_length=1)] | None = None
    api_key_env: Annotated[str, Field(min_length=1)] = "OPENAI_API_KEY"
    structured: Literal["json_schema", "json_object", "text"] = "json_schema"
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    seed: int | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    # reasoning models (OpenAI's o-series, gpt-5.x) refuse max_tokens and any temperature but
    # the default: give max_completion_tokens (it covers the hidden reasoning tokens too)
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    # keys sent as they are beside FinBench's own (vLLM ``guided_json``, Ollama ``options``...)
    extra_body: dict[str, Any] | None = None
    concurrency: Annotated[int, Field(ge=1, le=1024)] = 8
    requests_per_minute: Annotated[float, Field(gt=0)] | None = None
    tokens_per_minute: Annotated[float, Field(gt=0)] | None = None
    price_input_per_1m: Annotated[float, Field(ge=0)] | None = None
    price_output_per_1m: Annotated[float, Field(ge=0)] | None = None
    timeout: Annotated[float, Field(gt=0, le=3600)] = 60.0
    max_retries: Annotated[int, Field(ge=0, le=10)] = 3
    # runs that may request a task whose call failed in transport (timeout, dropped
    # connection, HTTP 408/409/429/5xx after the client's retries); then the failure is final
    max_attempts: Annotated[int, Field(ge=1, le=100)] = 3
    # a base_url_env URL may carry user:password@ (sent as Basic auth) only when allowed
    allow_url_credentials: bool = False
    # the last date the model's training data may reach: tasks of sessions up to it are
    # "possibly memorised" (the outcome may be in its weights), split apart in reports
    knowledge_cutoff: dt.date | None = None
    # ask, besides each forecast, a recall probe: the task's outcome from memory, no context
    # (docs/spec.md §15): its accuracy before and after the cutoff indexes memorisation
    recall_probe: bool = False
    # score each task's text (the user message sent) by the model's own token
    # log-probabilities, Min-K% (docs/spec.md §15): a provider without them is skipped
    min_k_percent: Annotated[int, Field(ge=1, le=100)] | None = None
    # prompts without the ticker, company names (context.company_names) or calendar dates
    anonymize: bool = False
    # what the model forecasts: binary (p_up and an interval) or multiclass (down, flat, up)
    format: Literal["binary", "multiclass"] = "binary"
    # multiclass: the probabilities it states (verbal), or read from its token probabilities
    # (native: one label answered, its first token's top log-probabilities)
    head: Literal["verbal", "native"] = "verbal"
    labels: dict[str, Literal["down", "flat", "up"]] = Field(
        default_factory=lambda: {"D": "down", "F": "flat", "U": "up"})
    top_logprobs: Annotated[int, Field(ge=1, le=20)] = 20
    min_mass: Annotated[float, Field(ge=0, le=1)] = 0.5  # native: below it, invalid
    sum_tolerance: Annotated[float, Field(ge=0, le=0.1)] = 1e-3  # verbal: |sum - 1| allowed
    # an agent: the track's tools it may call before it answers (docs/spec.md §12), and its
    # budget per task: tool calls, model turns, tokens (prompt and completion, every turn)
    tools: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    max_tool_calls: Annotated[int, Field(ge=1, le=200)] = 8
    max_turns: Annotated[int, Field(ge=2, le=50)] = 6
    max_task_tokens: Annotated[int, Field(ge=1)] | None = None
    # how it is asked beyond the track's prompt: a user template, reasoning first, examples,
    # repeated samples (docs/spec.md, "Prompt variants")
    prompt: PromptVariant = Field(default_factory=PromptVariant)

    @model_validator(mode="after")
    def _one_url(self) -> OpenAIModel:
        if self.base_url and self.base_url_env:
            raise ValueError("give base_url or base_url_env, not both")
        if self.base_url and url_credentials(self.base_url):
            raise ValueError("base_url holds credentials (user:password@): the config's text is "
                             "kept in every run's manifest; give the URL in an environment "
                             "variable named by base_url_env, with allow_url_credentials = true")
        if self.base_url and (problem := url_problem(self.base_url)):
            raise ValueError(f"base_url {self.base_url!r} {problem}")
        if self.max_tokens is not None and self.max_completion_tokens is not None:
            raise ValueError("give max_tokens or max_completion_tokens, not both (reasoning "
                             "models take max_completion_tokens only)")
        if self.extra_body:
            _check_extra_body(self.extra_body)
        if sorted(self.labels.values()) != ["down", "flat", "up"]:
            raise ValueError(f"labels {self.labels!r}: map three labels onto down, flat and up, "
                             "each class once")
        if self.format == "binary" and self.head == "native":
            raise ValueError("head 'native' reads three classes: give format = 'multiclass'")
        if self.tools and self.head == "native":
            raise ValueError("tools: an agent answers in text at its last turn; head 'native' "
                             "reads the first token of a single answer")
        if len(set(self.tools)) < len(self.tools):
            raise ValueError(f"tools {self.tools!r}: a tool named twice")
        _check_variant(self)
        if self.recall_probe and self.knowledge_cutoff is None:
            raise ValueError("recall_probe: the probe's accuracy is split at the model's "
                             "knowledge_cutoff, and it declares none")
        return self


def _check_variant(model: OpenAIModel) -> None:
    """What a model's prompt variant cannot be asked with."""
    v = model.prompt
    if v.reasoning == "think" and model.structured != "text":
        raise ValueError("prompt.reasoning 'think': the reasoning is text before the JSON "
                         f"object, which structured = {model.structured!r} does not allow "
                         "(give structured = 'text')")
    if model.head == "native" and (v.reasoning == "think" or v.samples > 1):
        raise ValueError("head 'native' reads the first token of one answer: no reasoning "
                         "before it, no samples")
    if model.tools and (v.samples > 1 or v.examples):
        raise ValueError("an agent (tools) is asked once, from its prompt and its tools: "
                         "prompt.samples and prompt.examples are for models without tools")
    if v.samples > 1 and model.temperature == 0:
        raise ValueError(f"prompt.samples {v.samples} at temperature 0: the samples would be "
                         "one answer repeated (leave temperature unset or above 0)")
    if v.samples > 1 and v.aggregate == "median" and model.format == "multiclass":
        raise ValueError("aggregate 'median': the medians of three probabilities need not sum "
                         "to 1; a three-class model's samples aggregate by their mean")


class McpAgentModel(ModelBase):
    """An agent FinBench does not call (a coding agent, a scaffold of its own): the run
    writes each task's prompt into the run directory and waits for its answer as for a
    batch; ``finbench tools serve RUN_DIR --model NAME --task ID`` offers the task's prompt,
    the track's ``tools`` at the task's ``now`` and a ``submit_forecast`` tool over the Model
    Context Protocol (docs/spec.md §12.5). Every call is receipted like a chat agent's;
    ``max_tool_calls`` bounds them (a call past it ends the task, invalid)."""

    kind: Literal["mcp"]
    tools: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    max_tool_calls: Annotated[int, Field(ge=1, le=200)] = 8
    format: Literal["binary", "multiclass"] = "binary"
    anonymize: bool = False
    labels: dict[str, Literal["down", "flat", "up"]] = Field(
        default_factory=lambda: {"D": "down", "F": "flat", "U": "up"})
    sum_tolerance: Annotated[float, Field(ge=0, le=0.1)] = 1e-3
    knowledge_cutoff: dt.date | None = None  # of the model behind the agent, if known

    @property
    def head(self) -> str:
        return "verbal"  # the answer is the probabilities the agent submits

    @property
    def structured(self) -> str:
        return "json_schema"  # submit_forecast's arguments: the answer's JSON object

    @model_validator(mode="after")
    def _agent(self) -> McpAgentModel:
        if len(set(self.tools)) < len(self.tools):
            raise ValueError(f"tools {self.tools!r}: a tool named twice")
        if sorted(self.labels.values()) != ["down", "flat", "up"]:
            raise ValueError(f"labels {self.labels!r}: map three labels onto down, flat and up, "
                             "each class once")
        return self


# the kinds of model asked the track's prompt (their receipts are the prompt's digest, their
# exchanges kept in the transcripts): language models FinBench calls, and agents over MCP
PROMPTED_KINDS = ("openai", "mcp")


# what FinBench sets in a request itself, and where its value comes from: extra_body may not
# set it (the request would then differ from what the config records)
OWN_KEYS = {
    **{key: f"give it as the model's own key {key!r}" for key in (
        "model", "temperature", "seed", "max_tokens", "max_completion_tokens",
        "reasoning_effort", "top_logprobs")},
    "messages": "the track's prompt",
    "response_format": "from structured and format",
    "logprobs": "with head = 'native', the one head that reads them",
    "stream": "one answer per request, not streamed",
    "tools": "from the model's tools",
    "tool_choice": "from the model's tools",
    "parallel_tool_calls": "from the model's tools",
    "n": "one answer per request, not streamed",
}


def _check_extra_body(extra: dict[str, Any]) -> None:
    """``extra_body`` must be JSON and must not set what FinBench sets from its own keys."""
    for key in extra:
        if key in OWN_KEYS:
            why = OWN_KEYS[key]
            raise ValueError(f"extra_body.{key}: FinBench sets {key!r} itself"
                             + (f"; {why}" if why.startswith("give") else f" ({why})"))
    try:
        json.dumps(extra, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"extra_body is not JSON ({exc}); TOML dates and times are not "
                         "JSON: give them as strings") from None


def url_problem(url: str) -> str | None:
    """What keeps ``url`` from being an endpoint's address (an http or https URL with a
    host), or None. It does not repeat the URL, which may hold credentials."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "is not an http(s) URL with a host (e.g. https://api.openai.com/v1)"
    return None


def url_credentials(url: str) -> list[str]:
    """The user, password and ``user:password`` a URL carries (none: an empty list)."""
    parts = urlsplit(url)
    found = [parts.username or "", parts.password or "",
             parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""]
    return [unquote(x) for x in found if x] + [x for x in found if x and unquote(x) != x]


class StanceConfig(StrictModel):
    """How a rationale's stance (up, down, neutral) is read for the mismatch analysis: the
    documented lexicon, or a judge model through the same adapter as forecasters (its calls
    cached, journalled in ``stances.jsonl`` and kept in the transcripts)."""

    method: Literal["lexicon", "judge"] = "lexicon"
    judge: OpenAIModel | None = None

    @model_validator(mode="after")
    def _judge(self) -> StanceConfig:
        if self.method == "judge" and self.judge is None:
            raise ValueError("method 'judge' needs [analysis.stance.judge] (a model of kind "
                             "'openai')")
        if self.method == "lexicon" and self.judge is not None:
            raise ValueError("[analysis.stance.judge] is read with method = 'judge' only")
        return self


def executor_problem(kind: str, scheduler: str | None, workers: int | None,
                     months: int = 1) -> str | None:
    """What is wrong with these executor settings (None: nothing)."""
    if workers is not None and workers < 1:
        return f"workers is {workers}: a cluster has at least one worker"
    if months < 1:
        return f"months is {months}: a shard holds at least one month"
    if kind != "dask" and months != 1:
        return "months (a shard's calendar months) is a setting of kind = \"dask\""
    if scheduler is not None and not scheduler.strip():
        return "scheduler is empty: give the scheduler's address (tcp://host:8786)"
    if kind != "dask" and (scheduler is not None or workers is not None):
        return "a scheduler or workers are settings of kind = \"dask\""
    if scheduler is not None and workers is not None:
        return ("workers sizes the LocalCluster started when no scheduler is given; a "
                "scheduler's cluster has workers of its own")
    return None


class ExecutorConfig(StrictModel):
    """Where ``finbench run`` runs the config: in its own process ("local"), or as shards of
    ``months`` calendar months each (default one) on a Dask cluster ("dask"): the running
    cluster at ``scheduler``, or without one a LocalCluster of ``workers`` processes
    (default: one per core). Each shard also reads and labels the sessions its baselines
    look back on, so fewer, larger shards cost less CPU; more, smaller ones spread over more
    workers and lose less to a worker that dies. The results are the
    same either way, so a run may be resumed under another executor (the section is left out
    of what a resumed run compares); the command line's ``--executor``, ``--scheduler`` and
    ``--workers`` override it."""

    kind: Literal["local", "dask"] = "local"
    scheduler: str | None = None
    workers: int | None = None
    months: int = 1

    @model_validator(mode="after")
    def _settings(self) -> ExecutorConfig:
        problem = executor_problem(self.kind, self.scheduler, self.workers, self.months)
        if problem:
            raise ValueError(problem)
        return self


# sections of a config that say where or how a run runs, never what it computes: a run may
# be resumed with them changed (finbench.runner.revision leaves them out)
HOW_IT_RUNS = ("executor",)


def unique_names(models) -> None:
    """A ValueError naming the model names a config repeats."""
    names = [m.name for m in models]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"model names must be unique; repeated: {', '.join(dupes)}")


def trial_config(config, models: list[str] | None):
    """The config with only the models named in ``models`` (in the config's order; all of
    them when None), checked again as a config (a fallback or reference it drops is named)."""
    if not models:
        return config
    names = [m.name for m in config.models]
    unknown = [m for m in models if m not in names]
    if unknown:
        raise ConfigError(f"--models: {', '.join(unknown)}: no model of the config by that name "
                          f"(its models: {', '.join(names)})")
    data = json.loads(config.model_dump_json())
    data["models"] = [m for m in data["models"] if m["name"] in models]
    try:
        return type(config).model_validate(data)
    except ValueError as exc:
        raise ConfigError(f"--models {','.join(models)}: the config with these models alone is "
                          f"no valid config ({exc})") from None


def describe_trial(trial: dict | None) -> str:
    """``a trial of models a, b, the first 10 tasks`` (``a full run`` for None)."""
    if trial is None:
        return "a full run"
    parts = [f"models {', '.join(trial['models'])}" if trial.get("models") else "every model"]
    if trial.get("limit") is not None:
        parts.append(f"the first {trial['limit']} tasks")
    return "a trial of " + ", ".join(parts)


def trial_mask(n_tasks: int, limit: int | None):
    """Which of a run's ``n_tasks`` tasks (in its order) a trial with ``limit`` asks: the
    first ``limit`` (every one without a limit)."""
    import numpy as np

    asked = np.ones(n_tasks, dtype=bool)
    if limit is not None:
        asked[limit:] = False
    return asked


@dataclass(frozen=True)
class ConfigText:
    """A config file's text, read where the file lies, to be run where it does not (a worker
    with no shared disk): it stands for the file (``os.fspath`` gives its path), so its hash,
    its recorded folder and its relative paths are the file's."""

    path: str
    text: str

    @classmethod
    def read(cls, path: str | Path) -> ConfigText:
        path = Path(path).resolve()
        return cls(str(path), read_config_file(path)[1])

    def __fspath__(self) -> str:
        return self.path

    def __str__(self) -> str:
        return self.path


def read_config_file(path: Path) -> tuple[bytes, str]:
    """A config file's bytes and text, or a ConfigError naming the file."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config ({exc.strerror})") from exc
    if raw.startswith(codecs.BOM_UTF8):  # TOML has none; tomllib says "Invalid statement"
        raise ConfigError(f"{path}: starts with a byte-order mark (BOM), which TOML does not "
                          "allow: save it as UTF-8 without one")
    try:
        return raw, raw.decode()
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc


def resolve_paths(config, base: Path, **update):
    """``config`` with the store and replay paths made absolute against ``base`` (and
    ``update``'s other fields: a track's own paths, made absolute by its config's
    ``resolved``)."""
    models = [
        m.model_copy(update={"path": absolute_path(m.path, base)})
        if isinstance(m, ReplayModel) else m
        for m in config.models
    ]
    data = config.data.model_copy(update={"store": absolute_path(config.data.store, base)})
    return config.model_copy(update={"data": data, "models": models, **update})


def absolute_path(p: Path | str, base: Path) -> Path | str:
    """``p`` against ``base`` (a URI given as text is left as it is)."""
    return p if isinstance(p, str) or p.is_absolute() else (base / p).resolve()


def format_validation_error(exc: ValidationError) -> str:
    """One line per problem: the dotted key, the rule, and the value given."""
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            lines.append(f"unknown key {key!r}")
        else:
            given = err.get("input")
            shown = "" if isinstance(given, dict | list) else f" (given {given!r})"
            lines.append(f"key {key!r}: {err['msg']}{shown}")
    return "; ".join(lines)
