"""FinBench: time-gated calibration and uncertainty benchmark for intraday stock forecasts."""

__version__ = "0.1.0"

from finbench.core.errors import (  # noqa: E402
    ConfigError,
    DataError,
    FinbenchError,
    LookaheadError,
    RunError,
    StoreError,
)

__all__ = ["ConfigError", "DataError", "FinbenchError", "LookaheadError", "RunError",
           "StoreError", "__version__"]
