"""A three-class forecast read from a model's own token probabilities (the *native* head),
by the extraction rule ``native-v1``, which never invents a probability:

1. The model is asked to answer with exactly one of three labels, each mapped to a class
   (``labels``: label text → ``down``/``flat``/``up``; the three classes each once).
2. From the first answer token's top log-probabilities, a listed token *is* a label when its
   text, stripped of surrounding white space, equals the label (case-sensitive). Each label's
   mass is the sum of ``exp(logprob)`` of the tokens that are it.
3. A label none of whose tokens is listed is *absent*: its probability is at most the smallest
   listed one, which the row keeps as a bound; it adds nothing to the candidate mass.
4. A listed token that is a proper prefix of a label (the tokenizer split the label) cannot
   say how much of its mass the label takes: the head is invalid (``label_split: <label>``),
   its values kept. Choose single-token labels.
5. Candidate mass = the labels' summed mass; excluded mass = 1 − candidate mass; the forecast
   is the labels' masses divided by the candidate mass (an absent label: 0). Below the
   declared minimum candidate mass the head is invalid (``candidate_mass_below_min``), its
   values kept but not scored.
6. A list that is no probability distribution makes the head invalid first: a listed
   log-probability that is not a number ``<= 0`` (``bad_logprob``: NaN, or a positive one,
   whose probability would exceed 1), or listed probabilities summing above 1 (by more than
   rounding, :data:`LISTED_SLACK`; ``listed_mass_above_1``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from finbench.core.errors import ConfigError
from finbench.tracks.intraday.config import CLASSES

RULE = "native-v1"
LISTED_SLACK = 1e-6  # rounding of the listed log-probabilities a sum may exceed 1 by


@dataclass
class NativeHead:
    """What the rule read from one answer: the forecast (down, flat, up), the raw label masses,
    candidate and excluded mass, bounds of absent labels, the candidate tokens seen, and
    whether the head is valid (with the reason when not)."""

    forecast: tuple[float, float, float]
    raw: tuple[float, float, float]
    candidate_mass: float
    excluded_mass: float
    valid: bool
    error: str | None = None
    absent: dict[str, float] = field(default_factory=dict)  # label -> upper bound
    tokens: list[dict] = field(default_factory=list)  # listed tokens that are labels
    rule: str = RULE


def check_labels(labels: dict[str, str]) -> dict[str, int]:
    """Label text → class number; the labels must cover the three classes once each.

    >>> check_labels({"D": "down", "F": "flat", "U": "up"})
    {'D': 0, 'F': 1, 'U': 2}
    """
    classes = sorted(labels.values())
    if classes != sorted(CLASSES) or len(set(labels)) != 3:
        raise ConfigError(f"native head labels {labels!r}: map three labels onto down, flat "
                          "and up, each class once")
    if any(not label or label != label.strip() for label in labels):
        raise ConfigError(f"native head labels {labels!r}: a label is a non-empty text without "
                          "surrounding spaces")
    return {label: CLASSES.index(cls) for label, cls in labels.items()}


def read_native(top_logprobs: list[dict], labels: dict[str, str], *,
                min_mass: float = 0.0) -> NativeHead:
    """The native head of one answer from its first token's ``top_logprobs`` (the API's
    shape: ``token``, ``logprob`` and, where given, ``bytes``)."""
    index = check_labels(labels)
    raw = [0.0, 0.0, 0.0]
    seen: set[str] = set()
    tokens, split = [], []
    wrong = [t["logprob"] for t in top_logprobs if not t["logprob"] <= 0]  # NaN too
    listed = [math.exp(t["logprob"]) if t["logprob"] <= 0 else math.nan for t in top_logprobs]
    for t, p in zip(top_logprobs, listed, strict=True):
        text = t["token"].strip()
        if text in index:
            raw[index[text]] += 0.0 if math.isnan(p) else p  # a bad one: the head is invalid
            seen.add(text)
            tokens.append({k: t[k] for k in ("token", "logprob", "bytes") if k in t})
        elif text and any(label.startswith(text) and label != text for label in index):
            split += [label for label in index if label.startswith(text) and label != text]
    known = [p for p in listed if not math.isnan(p)]
    smallest = min(known) if known else 1.0
    absent = {label: smallest for label in index if label not in seen}
    mass = sum(raw)
    forecast = tuple(m / mass for m in raw) if mass > 0 else (math.nan,) * 3
    head = NativeHead(forecast=forecast, raw=tuple(raw), candidate_mass=mass,
                      excluded_mass=1.0 - mass, valid=True, absent=absent, tokens=tokens)
    if wrong:
        head.valid, head.error = False, (f"bad_logprob: a listed log-probability is no number "
                                         f"<= 0 ({wrong[0]!r})")
    elif math.fsum(listed) > 1 + LISTED_SLACK:
        head.valid, head.error = False, (f"listed_mass_above_1: the listed probabilities sum to "
                                         f"{math.fsum(listed):.6g}")
    elif split:
        head.valid, head.error = False, f"label_split: {', '.join(sorted(set(split)))}"
    elif mass <= 0:
        head.valid, head.error = False, "no_label_listed: none of the labels is in the top list"
    elif mass < min_mass:
        head.valid, head.error = False, (f"candidate_mass_below_min: {mass:.6g} < "
                                         f"{min_mass:g}")
    return head
