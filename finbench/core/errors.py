"""Exception classes: every error says which thing, which value and which rule."""

from __future__ import annotations


class FinbenchError(ValueError):
    """Base class of FinBench's own errors (a ValueError: they are about bad values)."""


class ConfigError(FinbenchError):
    """A configuration key is unknown or holds a bad value."""


class DataError(FinbenchError):
    """Input data breaks a validation rule; ``problems`` lists one line per broken rule."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems = list(problems or [])
        full = message if not self.problems else message + "\n" + "\n".join(
            f"  - {p}" for p in self.problems
        )
        super().__init__(full)


class StoreError(FinbenchError):
    """A store is missing, malformed, or its content does not match its manifest."""


class LookaheadError(FinbenchError):
    """An input available after the forecast instant reached a context."""


class CalendarError(FinbenchError):
    """A date, time or calendar setting cannot be turned into session instants."""


class RunError(FinbenchError):
    """A run directory is inconsistent with the command asked of it."""


class ModelStopped(FinbenchError):
    """A model's calls cannot succeed (a rejected key, an unknown model or path, an endpoint
    that cannot be reached): its run stops at the first such answer, the other models go on."""
