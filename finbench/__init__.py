"""FinBench: time-gated calibration and uncertainty benchmark for intraday stock forecasts."""

from finbench.core.errors import (  # noqa: E402
    ConfigError,
    DataError,
    FinbenchError,
    LookaheadError,
    RunError,
    StoreError,
)
from finbench.core.version import __version__  # noqa: E402

__all__ = ["ConfigError", "DataError", "FinbenchError", "LookaheadError", "RunError",
           "StoreError", "__version__"]
