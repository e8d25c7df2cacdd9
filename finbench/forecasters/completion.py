"""What FinBench keeps of a chat completion, online or from a Batch API file: its content,
refusal, finish reason, usage, the model served and, for a native head, the first answer
token's top log-probabilities.

An endpoint's 200 answer that is no chat completion (a proxy's HTML page, a list, a choice
or message that is no object, content that is a number) is not the model's answer: it is a
call that got none (``transport_error``), asked again by the next run like a timeout, and
never cached. Content given as a list of parts (some providers answer so, a reasoning part
beside the text) is the text of its ``text`` parts, joined; the whole body stays in the
transcript.
"""

from __future__ import annotations

from typing import Any


def completion_dict(data: Any) -> dict:
    """The kept fields of a chat completion given as parsed JSON, or its
    ``transport_error`` when it is none."""
    problem = completion_problem(data)
    if problem:
        return {"transport_error": f"api_error: {problem}"}
    choice = data["choices"][0]
    message = choice.get("message") or {}
    out = {"content": _text(message.get("content")), "refusal": message.get("refusal"),
           "finish_reason": choice.get("finish_reason"), "usage": _usage(data.get("usage")),
           "model": data.get("model"), "system_fingerprint": data.get("system_fingerprint")}
    if message.get("tool_calls"):  # an agent's turn: read by forecasters/agent.py
        out["tool_calls"] = message["tool_calls"]
    tokens = (choice.get("logprobs") or {}).get("content") or []
    if tokens:  # the first answer token's top log-probabilities (a native head reads them)
        out["top_logprobs"] = tokens[0].get("top_logprobs") or []
    return out


def completion_problem(data: Any) -> str | None:
    """Why ``data`` is no chat completion FinBench can read (None: it is one)."""
    if not isinstance(data, dict):
        return f"the answer is no JSON object (a {_kind(data)})"
    choices = data.get("choices")
    if not choices:
        return "response without choices"
    if not isinstance(choices, list) or not isinstance(choices[0], dict):
        return "choices[0] is no object"
    choice = choices[0]
    message = choice.get("message")
    if message is not None and not isinstance(message, dict):
        return f"choices[0].message is a {_kind(message)}, not an object"
    message = message or {}
    content = message.get("content")
    if not (content is None or isinstance(content, str) or (
            isinstance(content, list) and all(isinstance(p, dict) for p in content))):
        return f"choices[0].message.content is a {_kind(content)}, not text"
    for key, value in (("message.refusal", message.get("refusal")),
                       ("finish_reason", choice.get("finish_reason"))):
        if value is not None and not isinstance(value, str):
            return f"choices[0].{key} is a {_kind(value)}, not text"
    return _logprobs_problem(choice.get("logprobs"))


def _logprobs_problem(logprobs: Any) -> str | None:
    if logprobs is None:
        return None
    if not isinstance(logprobs, dict):
        return f"choices[0].logprobs is a {_kind(logprobs)}, not an object"
    tokens = logprobs.get("content")
    if tokens is None:
        return None
    if not isinstance(tokens, list) or not all(isinstance(t, dict) for t in tokens):
        return "choices[0].logprobs.content is no list of objects"
    top = (tokens[0].get("top_logprobs") if tokens else None) or []
    if not isinstance(top, list) or not all(
            isinstance(t, dict) and isinstance(t.get("token"), str)
            and _number(t.get("logprob")) for t in top):
        return "the first token's top_logprobs are not objects with a token and a logprob"
    return None


def _text(content: str | list | None) -> str | None:
    if not isinstance(content, list):
        return content
    return "".join(p["text"] for p in content
                   if p.get("type") == "text" and isinstance(p.get("text"), str))


def _usage(usage: Any) -> dict:
    """The billed tokens as given; a count that is no whole number is left out (None), and a
    usage that is no object is none."""
    if not isinstance(usage, dict):
        return {}
    out = dict(usage)
    for key in ("prompt_tokens", "completion_tokens"):
        if key in out and not _count(out[key]):
            out[key] = None
    details = out.get("completion_tokens_details")
    if details is not None and not (isinstance(details, dict)
                                    and _count(details.get("reasoning_tokens", 0))):
        out["completion_tokens_details"] = None
    return out


def _count(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool)
                             and value >= 0)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    return {str: "text", list: "list", dict: "object", bool: "true/false", int: "number",
            float: "number"}.get(type(value), type(value).__name__)
