"""Time zone names and bar lengths that FinBench accepts, checked where users give them."""

from __future__ import annotations

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
