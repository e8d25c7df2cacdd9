"""Repeated sampling (a prompt variant's ``samples``, :mod:`finbench.core.prompting`): the
same prompt asked ``n`` times, the answers read one by one and aggregated by the declared
rule into the row's answer, the spread kept in its detail.

The rule: the probability (``p_up``, or each of the three classes) is the mean, or the
median, of the valid samples'; an interval's ends are the medians of the valid samples' ends
(a median of lower ends never exceeds the median of upper ends, each sample's lower being at
most its upper). An answer needs ``min_valid`` valid samples (default: every one); with
fewer it is invalid, naming how many were valid and the first sample's problem. The
rationale kept is the first valid sample's.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from statistics import median, pstdev

from finbench.forecasters.answers import NOT_APPLICABLE, ParsedAnswer

SPREAD_FIELDS = ("p_up", "lower", "upper", "q_down", "q_flat", "q_up")


def combine(responses: list[dict]) -> dict:
    """The stored response of a sampled task: each sample's response (``samples``) and
    their usage summed (what the task cost), the served model and fingerprint of the
    first; a sample that got no answer in transport makes the whole a transport error (the
    next run asks again, the answered samples come from the cache)."""
    for s, r in enumerate(responses):
        if "transport_error" in r:
            return {"transport_error": f"sample {s + 1} of {len(responses)}: "
                                       f"{r['transport_error']}"}
    usage: dict = {}
    for key in ("prompt_tokens", "completion_tokens"):
        values = [(r.get("usage") or {}).get(key) for r in responses]
        usage[key] = None if any(v is None for v in values) else sum(values)
    reasoning = [((r.get("usage") or {}).get("completion_tokens_details") or {})
                 .get("reasoning_tokens") for r in responses]
    if all(v is not None for v in reasoning):
        usage["completion_tokens_details"] = {"reasoning_tokens": sum(reasoning)}
    first = responses[0]
    return {"samples": responses, "usage": usage, "model": first.get("model"),
            "system_fingerprint": first.get("system_fingerprint")}


def read_sample(response: dict, parse) -> ParsedAnswer:
    """One sample read as an answer (``parse``: the prompt's, for a response answered; a
    request refused as sent is an invalid sample with the API's reason)."""
    if "request_refused" in response:
        return ParsedAnswer(False, response["request_refused"], "")
    return parse(response)


def aggregate(answers: list[ParsedAnswer], rule: str, needed: int
              ) -> tuple[ParsedAnswer, dict]:
    """The row's answer from its samples' answers (in the order asked) by ``rule`` (mean or
    median probability) and the spread kept: each sample's validity, problem and numbers,
    and over the valid ones each field's min, max and population standard deviation."""
    valid = [a for a in answers if a.valid]
    shown = [{"valid": a.valid, "error": a.error,
              **{f: a_value(a, f) for f in SPREAD_FIELDS if a_value(a, f) is not None}}
             for a in answers]
    spread = {"rule": rule, "n": len(answers), "valid": len(valid), "needed": needed}
    for f in SPREAD_FIELDS:
        values = [a_value(a, f) for a in valid]
        if values and all(v is not None for v in values):
            spread[f] = {"min": min(values), "max": max(values), "sd": pstdev(values)}
    raw = json.dumps([a.raw for a in answers], ensure_ascii=False)
    if len(valid) < needed:
        first = next((f"sample {i + 1}: {a.error}" for i, a in enumerate(answers)
                      if not a.valid), "")
        return ParsedAnswer(False, f"samples: {len(valid)} of {len(answers)} valid, "
                                   f"{needed} needed; {first}", raw), \
            {"samples": shown, "spread": spread}
    centre = _mean if rule == "mean" else median
    one = valid[0]
    out = replace(one, raw=raw)
    if not math.isnan(one.p_up):
        out = replace(out, p_up=centre([a.p_up for a in valid]))
    if all(not math.isnan(a.q_up) for a in valid) and not math.isnan(one.q_up):
        out = replace(out, q_down=centre([a.q_down for a in valid]),
                      q_flat=centre([a.q_flat for a in valid]),
                      q_up=centre([a.q_up for a in valid]))
    if one.interval_note != NOT_APPLICABLE and not math.isnan(one.lower):
        out = replace(out, lower=median([a.lower for a in valid]),
                      upper=median([a.upper for a in valid]))
    return out, {"samples": shown, "spread": spread}


def a_value(answer: ParsedAnswer, name: str) -> float | None:
    value = getattr(answer, name)
    return None if value is None or math.isnan(value) else float(value)


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def responses_again(raw: str, kept: list[dict]) -> list[dict]:
    """A sampled row's responses as far as reading them again needs (the audit): each
    sample's raw text (the row's ``raw``, a JSON list) with what its detail says it was (a
    refusal, a truncated answer, a request refused as sent)."""
    texts = json.loads(raw)
    if not isinstance(texts, list) or len(texts) != len(kept):
        raise ValueError(f"raw holds {len(texts) if isinstance(texts, list) else 'no'} "
                         f"samples' texts, its detail {len(kept)}")
    out = []
    for text, sample in zip(texts, kept, strict=True):
        error = sample.get("error") or ""
        if error.startswith("refusal: "):
            out.append({"refusal": text})
        elif not text and error and not error.startswith("empty: "):
            out.append({"request_refused": error})
        else:
            out.append({"content": text,
                        "finish_reason": "length" if error.startswith("truncated: ") else None})
    return out
