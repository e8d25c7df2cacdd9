"""Forecasters: time-valid baselines, replayed forecasts, scripted answers; registry by kind."""

from finbench.forecasters.base import FORECAST_COLUMNS, Forecaster, build_forecaster, registry

__all__ = ["FORECAST_COLUMNS", "Forecaster", "build_forecaster", "registry"]
