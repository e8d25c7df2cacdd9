"""How a language model's answer to the intraday question is asked for and read: the strict
JSON schemas (a binary forecast with its interval, or three class probabilities), the
request options of a native head (one label, its first token's log-probabilities read), and
the reading of a stored response by the question the model was asked."""

from __future__ import annotations

import json

from finbench.forecasters.answers import (
    NOT_APPLICABLE,
    ForecastAnswer,
    ParsedAnswer,
    parse_class_answer,
)
from finbench.forecasters.llm import answer_mode, interpret
from finbench.tracks.intraday.logprobs import RULE, read_native


def response_schema() -> dict:
    """The strict JSON schema sent with ``structured = "json_schema"``."""
    schema = {
        "type": "object",
        "properties": {
            "p_up": {"type": "number", "minimum": 0, "maximum": 1},
            "lower": {"type": "number"},
            "upper": {"type": "number"},
            "rationale": {"type": ["string", "null"]},
        },
        "required": ["p_up", "lower", "upper", "rationale"],
        "additionalProperties": False,
    }
    assert set(schema["properties"]) == set(ForecastAnswer.model_fields)
    return {"type": "json_schema",
            "json_schema": {"name": "forecast", "strict": True, "schema": schema}}


def class_response_schema() -> dict:
    """The strict JSON schema of a three-class answer (``format = "multiclass"``)."""
    number = {"type": "number", "minimum": 0, "maximum": 1}
    schema = {"type": "object",
              "properties": {"p_down": number, "p_flat": number, "p_up": number,
                             "rationale": {"type": ["string", "null"]}},
              "required": ["p_down", "p_flat", "p_up", "rationale"],
              "additionalProperties": False}
    return {"type": "json_schema",
            "json_schema": {"name": "classes", "strict": True, "schema": schema}}


def read_answer(question: str, config, response: dict) -> ParsedAnswer:
    """A stored response read as the model was asked (``question``: binary, classes or
    native, :attr:`~finbench.tracks.intraday.prompt.PromptSettings.question`; ``config``: its
    model config): a binary forecast, three stated probabilities, or a native head from the
    first token's top log-probabilities (:mod:`finbench.tracks.intraday.logprobs`)."""
    if question == "binary":
        return interpret(response, answer_mode(config))
    if question == "classes":
        return interpret(response, answer_mode(config), parse=lambda payload: parse_class_answer(
            payload, tolerance=config.sum_tolerance))
    if response.get("refusal"):
        return ParsedAnswer(False, f"refusal: {response['refusal']}", response["refusal"])
    top = response.get("top_logprobs")
    if not top:
        return ParsedAnswer(False, "no_logprobs: the answer carries no top log-probabilities "
                                   "(does the endpoint return logprobs?)",
                            response.get("content") or "")
    head = read_native(top, config.labels, min_mass=config.min_mass)
    return ParsedAnswer(head.valid, head.error, json.dumps(top, sort_keys=True),
                        interval_note=NOT_APPLICABLE, q_down=head.forecast[0],
                        q_flat=head.forecast[1], q_up=head.forecast[2],
                        excluded_mass=head.excluded_mass)


def native_detail(config, top: list[dict]) -> dict:
    """What a native head's row keeps beside its forecast: the rule's version, the candidate
    tokens (text, log-probability, bytes), the absent labels' bounds, the candidate mass."""
    head = read_native(top, config.labels, min_mass=config.min_mass)
    return {"rule": RULE, "candidates": head.tokens, "absent_bounds": head.absent,
            "candidate_mass": head.candidate_mass, "raw_label_mass": list(head.raw)}


def native_options(config) -> dict:
    """The request options of a native head: the first token's top log-probabilities, and a
    single token when the config sets no limit (the label is what is read)."""
    options = {"logprobs": True, "top_logprobs": config.top_logprobs}
    if config.max_tokens is None and config.max_completion_tokens is None:
        options["max_tokens"] = 1
    return options
