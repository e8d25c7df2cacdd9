"""The forecast answer schema (docs/spec.md §6) and parsing of raw answers into validated records."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

FORECAST_VERSION = 1


def _as_float(value: float | int) -> float:
    """A JSON number as the float it is stored as; an integer too large for one (JSON allows
    ``1`` followed by 400 zeros) is refused, not raised."""
    try:
        return float(value)
    except OverflowError:
        raise PydanticCustomError("float_range", "beyond the float range") from None


Number = Annotated[StrictFloat | StrictInt, AfterValidator(_as_float)]


class ForecastAnswer(BaseModel):
    """What a forecaster must answer: ``p_up`` in [0, 1] and an 80% interval ``[lower, upper]``
    of the log return, in log-return units; ``rationale`` is kept and never scored."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    p_up: Annotated[Number, Field(ge=0.0, le=1.0)]
    lower: Number
    upper: Number
    rationale: str | None = None

    @model_validator(mode="after")
    def _ordered(self) -> ForecastAnswer:
        if not self.lower <= self.upper:
            raise ValueError(f"lower {self.lower} is above upper {self.upper}")
        return self


class ProbabilityAnswer(BaseModel):
    """What a probability-only forecaster answers (a replayed market price, say): ``p_up`` in
    [0, 1]; an interval is not part of its answer (and not allowed in it)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    p_up: Annotated[Number, Field(ge=0.0, le=1.0)]
    rationale: str | None = None


class ClassAnswer(BaseModel):
    """A three-class answer: the probabilities of down, flat and up, each in [0, 1]; they must
    sum to 1 within the declared tolerance (checked apart: never rescaled)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    p_down: Annotated[Number, Field(ge=0.0, le=1.0)]
    p_flat: Annotated[Number, Field(ge=0.0, le=1.0)]
    p_up: Annotated[Number, Field(ge=0.0, le=1.0)]
    rationale: str | None = None


class EventAnswer(BaseModel):
    """An event forecast: the probability that the market resolves YES."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    p_yes: Annotated[Number, Field(ge=0.0, le=1.0)]
    rationale: str | None = None


NOT_APPLICABLE = "not_applicable"  # interval_note of a forecaster that gives no interval


@dataclass(frozen=True)
class ParsedAnswer:
    """A raw answer after validation; the raw text is always kept."""

    valid: bool
    error: str | None
    raw: str
    p_up: float = math.nan
    lower: float = math.nan
    upper: float = math.nan
    rationale: str | None = None
    interval_note: str | None = None  # why a valid answer has no interval
    q_down: float = math.nan  # a three-class answer's probabilities
    q_flat: float = math.nan
    q_up: float = math.nan
    excluded_mass: float = math.nan  # a native head's mass outside its labels


def parse_answer(raw: str | dict[str, Any], *, interval: bool = True) -> ParsedAnswer:
    """Validate a raw answer (JSON text or a mapping); never raises for a bad answer.
    ``interval=False``: the forecaster gives a probability only (:class:`ProbabilityAnswer`);
    a valid answer then has interval note ``not_applicable``."""
    text, answer = _validated(raw, ForecastAnswer if interval else ProbabilityAnswer)
    if isinstance(answer, ParsedAnswer):
        return answer
    if not interval:
        return ParsedAnswer(True, None, text, answer.p_up, rationale=answer.rationale,
                            interval_note=NOT_APPLICABLE)
    return ParsedAnswer(True, None, text, answer.p_up, answer.lower, answer.upper,
                        answer.rationale)


def parse_event_answer(raw: str | dict[str, Any]) -> ParsedAnswer:
    """Validate an event answer (:class:`EventAnswer`); its ``p_yes`` is the row's
    probability (``p_up``: the probability of the positive outcome, docs/spec.md §11.5).

    >>> parse_event_answer('{"p_yes": 0.25, "rationale": "few signs"}').p_up
    0.25
    >>> parse_event_answer('{"p_up": 0.25}').error
    'schema: p_yes: missing; p_up: extra field not allowed'
    """
    text, answer = _validated(raw, EventAnswer)
    if isinstance(answer, ParsedAnswer):
        return answer
    return ParsedAnswer(True, None, text, answer.p_yes, rationale=answer.rationale,
                        interval_note=NOT_APPLICABLE)


def parse_class_answer(raw: str | dict[str, Any], *, tolerance: float) -> ParsedAnswer:
    """Validate a three-class answer (:class:`ClassAnswer`); the three must sum to 1 within
    ``tolerance``, else the answer is invalid with the sum (kept, never rescaled).

    >>> parse_class_answer('{"p_down": 0.2, "p_flat": 0.3, "p_up": 0.5}', tolerance=1e-3).valid
    True
    >>> parse_class_answer('{"p_down": 0.2, "p_flat": 0.3, "p_up": 0.4}', tolerance=1e-3).error
    'schema: p_down + p_flat + p_up = 0.9, not 1 within 0.001'
    """
    text, answer = _validated(raw, ClassAnswer)
    if isinstance(answer, ParsedAnswer):
        return answer
    q = (answer.p_down, answer.p_flat, answer.p_up)
    total = math.fsum(q)
    if abs(total - 1) > tolerance:
        return ParsedAnswer(False, f"schema: p_down + p_flat + p_up = {total:.6g}, not 1 within "
                                   f"{tolerance:g}", text, rationale=answer.rationale,
                            q_down=q[0], q_flat=q[1], q_up=q[2])
    return ParsedAnswer(True, None, text, rationale=answer.rationale,
                        interval_note=NOT_APPLICABLE, q_down=q[0], q_flat=q[1], q_up=q[2])


def _validated(raw: str | dict[str, Any], schema: type[BaseModel]
               ) -> tuple[str, BaseModel | ParsedAnswer]:
    """(the answer's text, the answer validated by ``schema``, or the invalid answer that
    says why not: not JSON, not an object, or the schema's reasons)."""
    text = raw if isinstance(raw, str) else json.dumps(raw, allow_nan=True, sort_keys=True)
    try:
        payload = loads(raw) if isinstance(raw, str) else raw
    except NameTwice as exc:
        return text, ParsedAnswer(False, f"schema: {exc}", text)
    except ValueError as exc:
        return text, ParsedAnswer(False, f"not_json: {exc}", text)
    if not isinstance(payload, dict):
        return text, ParsedAnswer(False, "schema: expected a JSON object, got "
                                         f"{type(payload).__name__}", text)
    try:
        return text, schema.model_validate(payload)
    except ValidationError as exc:
        return text, ParsedAnswer(False, "schema: " + _reasons(exc), text)


class NameTwice(ValueError):
    """A JSON object naming one field twice: which value was meant is not known (JSON
    parsers differ: Python's keeps the last), so the answer is invalid, not read one way."""


def loads(text: str) -> Any:
    """Parse an answer's JSON text: ``NaN`` and ``Infinity`` read as floats (for the schema to
    refuse by name); a field named twice in one object raises :class:`NameTwice`."""
    return json.loads(text, parse_constant=_constant, object_pairs_hook=_once)


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for name, value in pairs:
        if name in obj:
            raise NameTwice(f"{name}: given twice")
        obj[name] = value
    return obj


def _constant(name: str) -> float:
    return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[name]


def _reasons(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "answer"
        if err["type"] == "extra_forbidden":
            parts.append(f"{field}: extra field not allowed")
        elif err["type"] == "missing":
            parts.append(f"{field}: missing")
        else:
            parts.append(f"{field}: {err['msg']} (given {_shown(err.get('input'))})")
    return "; ".join(parts)


def _shown(value: Any, limit: int = 60) -> str:
    """A given value as the reason shows it: its repr, cut to ``limit`` characters with the
    length said (the raw answer is kept whole beside the reason)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 20]}... ({len(text)} characters)"
