"""Time zone names, clock times and bar lengths that FinBench accepts, checked where users
give them."""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo

DAY_SECONDS = 86_400


def is_timezone(name: object) -> bool:
    """Whether ``name`` is an IANA time zone this machine knows (``America/New_York``)."""
    if not isinstance(name, str) or not name or name.startswith("/") or ".." in name:
        return False
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return False
    return True


def clock_time(text: object) -> dt.time | None:
    """A local clock time ``HH:MM`` or ``HH:MM:SS`` (None when ``text`` is none: ``25:00``,
    ``9:30``, ``09:30:00.5``).

    >>> clock_time("09:30"), clock_time("24:00"), clock_time("9:30")
    (datetime.time(9, 30), None, None)
    """
    if isinstance(text, str) and len(text) in (5, 8) and text[2] == ":" and text.isascii():
        try:
            return dt.time.fromisoformat(text)
        except ValueError:
            return None
    return None


def bar_length_problem(seconds: object) -> str | None:
    """Why ``seconds`` cannot be a bar length (None when it can): a whole number of seconds,
    positive, that tiles a day, so bars lie on one grid and a bar is available after it
    starts."""
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        return f"{seconds!r} is not a whole number of seconds"
    if seconds <= 0:
        return f"{seconds} is not positive (a bar is available at its start + its length)"
    if DAY_SECONDS % seconds:
        return f"{seconds} s does not divide a day ({DAY_SECONDS} s) into whole bars"
    return None


_TICKER = re.compile(r"^[^\s|\x00-\x1f\x7f]+$")


def ticker_problem(text: object) -> str | None:
    """Why ``text`` cannot be a ticker (None when it can): a non-empty text with no
    whitespace, no control character and no ``|`` (the separator of task ids). Vendor forms
    such as ``BRK.B``, ``BRK/B``, ``^GSPC``, ``ES=F`` and ``BTC-USD`` are tickers."""
    if not isinstance(text, str) or not text:
        return f"{text!r} is not a non-empty text"
    if not _TICKER.match(text):
        return (f"{text!r} holds whitespace, a control character or '|' (the separator of "
                "task ids)")
    return None
