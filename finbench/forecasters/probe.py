"""Recall probes (docs/spec.md §15): a language model asked, with no context, what it
remembers of a task's outcome. Its accuracy on tasks before its knowledge cutoff against
those after is a per-model memorisation index beside its skill split (a model that
"remembers" outcomes it cannot have seen is guessing; one that remembers those before its
cutoff only has them in its weights).

The question is the track's (:meth:`~finbench.tracks.base.Track.probe_questions`: the
task's subject, day and what happened, in the past tense); the answer is the probability
that it did (``p_yes``), read as an event answer. A probe is asked as its model is (provider,
model, decoding settings) but once, without tools, variants or anonymity: a probe names what
it asks about."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from finbench.forecasters.answers import parse_event_answer
from finbench.tracks.base import Rendered, messages_sha256

TEMPLATE = "finbench-recall-v1"
SYSTEM = (
    "You are asked what you remember about the past, not to forecast. No data is given and "
    "none can be looked up: answer from memory alone. Reply with one JSON object: "
    '{"p_yes": the probability, from 0 to 1, that the answer to the question is yes, '
    '"rationale": what you remember, in one sentence, or null}. If you do not remember, '
    "answer 0.5.")


@dataclass(frozen=True)
class RecallPrompt:
    """The probe's prompt: the system message above and the track's question of each task."""

    questions: Callable[[pd.DataFrame], list[str]]
    template: str = TEMPLATE

    def messages_of(self, tasks: pd.DataFrame) -> list[list[dict[str, str]]]:
        return [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}]
                for q in self.questions(tasks)]

    def messages(self, contexts) -> list[list[dict[str, str]]]:
        raise NotImplementedError("a recall probe is rendered from its tasks (render)")

    def render(self, inputs) -> Rendered:
        return Rendered(self.messages_of(inputs.tasks))

    def sha256(self, messages: list[dict[str, str]]) -> str:
        return messages_sha256(messages, self.template)

    def for_model(self, model) -> RecallPrompt:
        return self

    def response_schema(self) -> dict:
        schema = {"type": "object",
                  "properties": {"p_yes": {"type": "number", "minimum": 0, "maximum": 1},
                                 "rationale": {"type": ["string", "null"]}},
                  "required": ["p_yes", "rationale"], "additionalProperties": False}
        return {"type": "json_schema",
                "json_schema": {"name": "recall_probe", "strict": True, "schema": schema}}

    def request_options(self, model) -> dict:
        return {}

    def parse(self, response: dict, model):
        from finbench.forecasters.llm import interpret

        return interpret(response, model.structured, parse=parse_event_answer)

    def answer_detail(self, response: dict, model) -> dict:
        return {}


def probe_config(model):
    """The model's config as its probe is asked: the same provider, model and decoding, once,
    without tools, a prompt variant or anonymity."""
    plain = {"tools": [], "prompt": {}, "anonymize": False, "head": "verbal"}
    if model.format == "multiclass":
        plain["format"] = "binary"
    return type(model).model_validate({**model.model_dump(), **plain})


def recall_forecaster(model, questions: Callable[[pd.DataFrame], list[str]]):
    """The forecaster that asks ``model``'s probes (its rows are journalled apart)."""
    from finbench.forecasters.llm import OpenAIForecaster

    return OpenAIForecaster(probe_config(model), RecallPrompt(questions))


@dataclass
class NoContext:
    """A probe's inputs' contexts: nothing shown, so nothing was available."""

    tasks: pd.DataFrame

    @property
    def max_input_time(self) -> pd.Series:
        return pd.Series(pd.NaT, index=range(len(self.tasks)), dtype="datetime64[ns, UTC]")
