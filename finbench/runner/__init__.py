"""Running a config: :func:`run` (tasks -> labels -> forecasts -> journal -> scores)."""

from finbench.runner.run import run

__all__ = ["run"]
