"""Min-K% probability (Shi et al. 2024, "Detecting Pretraining Data from Large Language
Models", ICLR): the mean log-probability of the k% least likely tokens of a text under a
model. A text the model was trained on has fewer surprising tokens, so a higher score; per
task it is a measure, from the model itself, of how familiar the task's own text is (the
context it was shown), whose interaction with its skill the report gives.

The token log-probabilities of a prompt come from a server that returns them: the completions
endpoint with ``echo`` and ``logprobs`` (vLLM, llama.cpp's server, text-generation-inference's
OpenAI route, and OpenAI's older completion models). A provider that does not return them is
said so and skipped (:class:`Unsupported`)."""

from __future__ import annotations

import hashlib
import math

TEMPLATE = "finbench-min-k-v1"  # part of the cache key: what is asked of the server
# the statuses with which a provider refuses the request itself (no such endpoint, no echo
# with log-probabilities): asking again would get the same
REFUSED = (400, 404, 405, 422, 501)


class Unsupported(Exception):
    """The provider returns no prompt log-probabilities; the reason is the message."""


def min_k(logprobs, k: int) -> tuple[float, int, list[float]]:
    """(Min-K% of the token log-probabilities ``logprobs`` (``None`` entries, such as the
    first token's, left out), the tokens scored, the ``ceil(k% of them)`` lowest used, in
    ascending order).

    >>> min_k([None, -0.1, -2.0, -0.5, -4.0], 50)
    (-3.0, 4, [-4.0, -2.0])
    """
    values = sorted(float(x) for x in logprobs if x is not None)
    if not values:
        return math.nan, 0, []
    lowest = values[:max(1, math.ceil(len(values) * k / 100))]
    return math.fsum(lowest) / len(lowest), len(values), lowest


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def prompt_logprobs(body: dict) -> list:
    """The prompt's token log-probabilities from a completions response (``echo`` on): the
    first ``usage.prompt_tokens`` of ``choices[0].logprobs.token_logprobs`` (the rest are the
    one token generated); :class:`Unsupported` when the response has none."""
    choices = body.get("choices") or []
    logprobs = (choices[0].get("logprobs") or {}) if choices else {}
    tokens = logprobs.get("token_logprobs")
    if not tokens:
        raise Unsupported("its completions answer holds no token log-probabilities (echo "
                          "with logprobs is not supported)")
    prompt = (body.get("usage") or {}).get("prompt_tokens")
    return list(tokens[:prompt] if isinstance(prompt, int) and prompt > 0 else tokens[:-1])


def user_text(messages: list[dict]) -> str | None:
    """The first user message of a call as sent (its text parts joined): the task's own
    text, what the model was shown."""
    for message in messages:
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content
    return None
