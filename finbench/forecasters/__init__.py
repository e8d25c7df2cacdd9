"""Forecasters: time-valid baselines, replayed forecasts, scripted answers; registry by kind."""

from finbench.forecasters.base import Forecaster, build_forecaster, registry
from finbench.forecasters.rows import FORECAST_COLUMNS

__all__ = ["FORECAST_COLUMNS", "Forecaster", "build_forecaster", "registry"]
