"""The stance of a rationale (``up``, ``down`` or ``neutral``) by a documented lexicon, and
whether it contradicts the side of ``p_up`` (the paper's rationale–probability mismatch).

Method ``lexicon-v1``: the rationale is lower-cased, cut into clauses at punctuation, and
split into words (letters, digits, ``'`` and ``-``). Each word of :data:`UP_WORDS` counts +1,
of :data:`DOWN_WORDS` −1; a word preceded within :data:`NEGATION_SPAN` words of its clause by
one of :data:`NEGATORS` counts the other way ("not bullish" is −1). The stance is ``up`` for a
positive total, ``down`` for a negative one, ``neutral`` for zero (and for an empty or missing
rationale). A row *mismatches* when its stance is ``up`` and ``p_up < 0.5``, or ``down`` and
``p_up > 0.5``; a neutral stance, or ``p_up = 0.5``, never does.
"""

from __future__ import annotations

import re

import numpy as np

METHOD = "lexicon-v1"
UP_WORDS = frozenset("""
up upside upward upwards higher high rise rises rising rose gain gains gaining gained rally
rallies rallying rebound rebounds bullish bull positive strength strong stronger
strengthening increase increases increasing climb climbs climbing advance advances
advancing outperform outperforms beat beats surge surges surging uptrend recover recovery
recovering buy buying support supportive optimistic optimism momentum-up
""".split())
DOWN_WORDS = frozenset("""
down downside downward downwards lower low fall falls falling fell drop drops dropping
dropped decline declines declining declined slide slides sliding slip slips slipping
bearish bear negative weak weaker weakness weakening decrease decreases decreasing sell
selling selloff sell-off loss losses losing underperform underperforms miss misses plunge
plunges plunging downtrend pressure headwind headwinds pessimistic pessimism momentum-down
""".split())
NEGATORS = frozenset("not no never without unlikely hardly isn't aren't won't doesn't "
                     "don't didn't".split())
NEGATION_SPAN = 3
_WORD = re.compile(r"[a-z0-9][a-z0-9'\-]*")
_CLAUSE = re.compile(r"[.;:,!?()]")  # a negation reaches no further than its clause


def stance(rationale: str | None) -> str:
    """The stance of one rationale (see the module docstring).

    >>> stance("Strong momentum and positive headlines suggest a rise.")
    'up'
    >>> stance("Not bullish: the stock is likely to fall.")
    'down'
    >>> stance("Mixed signals.")
    'neutral'
    """
    if not rationale:
        return "neutral"
    total = 0
    for clause in _CLAUSE.split(rationale.lower()):
        words = _WORD.findall(clause)
        for i, word in enumerate(words):
            sign = 1 if word in UP_WORDS else -1 if word in DOWN_WORDS else 0
            if sign and any(w in NEGATORS for w in words[max(0, i - NEGATION_SPAN):i]):
                sign = -sign
            total += sign
    return "up" if total > 0 else "down" if total < 0 else "neutral"


def mismatched(stances: np.ndarray, p_up: np.ndarray) -> np.ndarray:
    """Per row: the stance contradicts the side of ``p_up``.

    >>> mismatched(np.array(["up", "down", "up", "neutral"]), np.array([0.3, 0.4, 0.5, 0.9]))
    array([ True, False, False, False])
    """
    p = np.asarray(p_up, float)
    return ((stances == "up") & (p < 0.5)) | ((stances == "down") & (p > 0.5))
