"""Forecasters shared by every track: the base class (validate, time and stamp answers),
the forecast row's schema, replayed forecasts, scripted answers, language models through the
official ``openai`` client (cache, Batch API, stance judge, native head); a registry by kind
that tracks add their own baselines and references to."""

from finbench.forecasters.base import Forecaster, build_forecaster, registry
from finbench.runlog.rows import FORECAST_COLUMNS

__all__ = ["FORECAST_COLUMNS", "Forecaster", "build_forecaster", "registry"]
