"""What identifies a task's asset and date, replaced for models that might remember outcomes
(``anonymize = true``): ticker symbols and company names become stable aliases, calendar dates
become days relative to the session (``day 0``, ``day -1``). The same task always gives the
same text; nothing depends on the run.

Prices, volumes and an early close are left as they are: they can still hint at the asset or
the day, which the docs say.
"""

from __future__ import annotations

import hashlib
import re
from functools import cached_property

import pandas as pd

ALIAS_SALT = "finbench-alias-v1"


def alias(ticker: str) -> str:
    """A stable alias of a ticker: ``ASSET-`` and 8 hex digits of a salted hash.

    >>> alias("AAPL") == alias("AAPL") != alias("MSFT")
    True
    """
    return "ASSET-" + hashlib.sha256(f"{ALIAS_SALT}|{ticker}".encode()).hexdigest()[:8].upper()


def relative_day(day: str | pd.Timestamp, session: str) -> str:
    """``day`` as calendar days from ``session``: ``day 0``, ``day -3``.

    >>> relative_day("2025-01-13", "2025-01-15")
    'day -2'
    """
    delta = (pd.Timestamp(str(day)[:10]) - pd.Timestamp(session)).days
    return f"day {delta}"


MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
_MONTH = r"(?:" + "|".join(f"{m[:3]}(?:{m[3:]})?\\.?" for m in MONTHS) + r")"
_DATES = [  # (pattern, how its match becomes a date), most specific first
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"), lambda m: f"{m[1]}-{m[2]}-{m[3]}"),
    (re.compile(r"\b(\d{1,2})/(\d{1,2})/(\d{4})\b"), lambda m: f"{m[3]}-{m[1]}-{m[2]}"),
    (re.compile(rf"\b({_MONTH})\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b"),
     lambda m: f"{m[1][:3]} {m[2]} {m[3]}"),
]
_LEFT = [(re.compile(rf"\b{_MONTH}(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?\b"), "[date]"),
         (re.compile(r"\b(?:19|20)\d{2}\b"), "[year]"),
         (re.compile(r"\b(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day\b"), "[weekday]")]


def redact_dates(text: str, session: str) -> str:
    """Calendar dates in ``text`` as days relative to ``session``; month names (capitalised:
    "may" stays), years and weekdays left over as ``[date]``, ``[year]``, ``[weekday]``.

    >>> redact_dates("Q4 call on 2025-01-13; Jan 16, 2025 vote; since 2019", "2025-01-15")
    'Q4 call on day -2; day 1 vote; since [year]'
    >>> redact_dates("Shares may rise in May, said Friday", "2025-01-15")
    'Shares may rise in [date], said [weekday]'
    """
    for pattern, as_date in _DATES:
        def swap(m, as_date=as_date):
            try:
                return relative_day(pd.Timestamp(as_date(m)), session)
            except ValueError:
                return "[date]"
        text = pattern.sub(swap, text)
    for pattern, mark in _LEFT:
        text = pattern.sub(mark, text)
    return text


class Redactor:
    """Replaces every ticker of ``names`` (exact case, ``$`` prefix or not) and each of its
    company names (any case), as whole words, by the ticker's alias.

    >>> r = Redactor((("AAPL", ("Apple", "Apple Inc.")),))
    >>> r("Apple Inc. and $AAPL: apple pie, AAPLX, it") == (
    ...     f"{alias('AAPL')} and {alias('AAPL')}: {alias('AAPL')} pie, AAPLX, it")
    True
    """

    def __init__(self, names: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
        self.names = names

    @cached_property
    def _patterns(self) -> list[tuple[re.Pattern, dict[str, str]]]:
        tickers = {t: t for t, _ in self.names}
        companies = {name.lower(): t for t, company in self.names for name in company}
        out = []
        for owner, flags in ((companies, re.IGNORECASE), (tickers, 0)):
            if owner:
                words = sorted(owner, key=len, reverse=True)  # "Apple Inc." before "Apple"
                out.append((re.compile(r"(?<![\w$])\$?(" + "|".join(map(re.escape, words))
                                       + r")(?!\w)", flags), owner))
        return out

    def __call__(self, text: str) -> str:
        for pattern, owner in self._patterns:
            text = pattern.sub(lambda m, owner=owner: alias(
                owner.get(m.group(1)) or owner[m.group(1).lower()]), text)
        return text
