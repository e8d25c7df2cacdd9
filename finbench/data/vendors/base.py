"""The vendor adapter interface and registry."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from abc import ABC, abstractmethod

import pandas as pd

from finbench.core.errors import DataError

CANONICAL = ["ticker", "ts", "open", "high", "low", "close", "volume"]


class Vendor(ABC):
    """One data source. ``bar_timestamp`` and ``zone`` say how the source stamps bars."""

    name: str = ""
    package: str = ""  # the PyPI distribution of its SDK
    bar_timestamp: str = "start"
    zone: str = "UTC"
    key_env: tuple[str, ...] = ()
    notes: str = ""

    def __init__(self, *, feed: str | None = None) -> None:
        self.feed = feed

    def keys(self) -> list[str]:
        """API keys from the environment (never from files or flags)."""
        missing = [k for k in self.key_env if not os.environ.get(k)]
        if missing:
            raise DataError(f"{self.name}: set the environment variable(s) {', '.join(missing)}")
        return [os.environ[k] for k in self.key_env]

    def sdk_version(self) -> str | None:
        try:
            return importlib.metadata.version(self.package)
        except importlib.metadata.PackageNotFoundError:
            return None

    def require_sdk(self, module: str):
        try:
            return importlib.import_module(module)
        except ImportError as exc:
            raise DataError(f"{self.name}: its SDK is not installed; pip install "
                            f"'finbench[{self.name}]' (package {self.package})") from exc

    @abstractmethod
    def fetch_day(self, ticker: str, day: pd.Timestamp, start_utc: pd.Timestamp,
                  end_utc: pd.Timestamp) -> pd.DataFrame:
        """Bars of one ticker between two UTC instants, in the store's columns."""

    def request(self, ticker: str, day: pd.Timestamp) -> dict:
        """What was asked, for provenance."""
        return {"ticker": ticker, "day": str(day.date()), "feed": self.feed}


VENDORS: dict[str, type[Vendor]] = {}


def register(cls: type[Vendor]) -> type[Vendor]:
    VENDORS[cls.name] = cls
    return cls


def get_vendor(name: str, **kwargs) -> Vendor:
    importlib.import_module("finbench.data.vendors.sources")
    if name not in VENDORS:
        raise DataError(f"--source: {name!r} is not one of {', '.join(sorted(VENDORS))}")
    return VENDORS[name](**kwargs)


def frame(ticker: str, ts, o, h, lo, c, v) -> pd.DataFrame:
    """Bars in the store's columns (ts as given: already the bar start in UTC)."""
    out = pd.DataFrame({"ticker": ticker, "ts": pd.to_datetime(ts, utc=True), "open": o,
                        "high": h, "low": lo, "close": c, "volume": v})
    out["ts"] = out["ts"].astype("datetime64[ns, UTC]")
    for col in ("open", "high", "low", "close", "volume"):
        out[col] = out[col].astype("float64")
    return out[CANONICAL]
