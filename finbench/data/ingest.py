"""Ingest user files (CSV, Parquet, JSONL) of bars or headlines into a store, all or nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from finbench.data.schema import validate_bars, validate_headlines
from finbench.data.store import Store, sha256_file
from finbench.errors import DataError
from finbench.zones import bar_length_problem, is_timezone

BAR_TIMESTAMPS = ("start", "end")


def read_table_file(path: str | Path) -> pd.DataFrame:
    """Read a CSV, Parquet or JSON-lines file into a frame; the suffix decides the reader."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    suffix = "".join(path.suffixes[-2:]).lower() if path.suffix == ".gz" else path.suffix.lower()
    try:
        if suffix in (".csv", ".csv.gz", ".txt"):
            if path.stat().st_size == 0:
                return pd.DataFrame()
            return pd.read_csv(path, dtype=str, keep_default_na=True)
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        if suffix in (".jsonl", ".ndjson", ".jsonl.gz"):
            if path.stat().st_size == 0:
                return pd.DataFrame()
            return pd.read_json(path, lines=True, dtype=False)
    except (ValueError, json.JSONDecodeError, OSError) as exc:
        raise DataError(f"{path}: cannot be read as {suffix} ({exc})") from exc
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    raise DataError(f"{path}: unknown file type {suffix!r} (use .csv, .parquet or .jsonl)")


def check_timezone(timezone: str | None) -> None:
    """A DataError unless ``timezone`` (``--timezone``) is None or a time zone name."""
    if timezone is not None and not is_timezone(timezone):
        raise DataError(f"--timezone: {timezone!r} is not a time zone name (e.g. "
                        "America/New_York, Europe/London, UTC)")


def ingest_bars(
    file: str | Path,
    store: str | Path,
    *,
    ticker: str | None = None,
    timezone: str | None = None,
    bar_timestamp: str = "start",
    bar_seconds: int = 60,
) -> dict:
    """Validate a bars file and add it to ``store``; on any broken rule nothing is written.

    Returns a summary: rows, tickers, local dates and partitions written.
    """
    if bar_timestamp not in BAR_TIMESTAMPS:
        raise DataError(f"--bar-timestamp: {bar_timestamp!r} is not one of start, end")
    problem = bar_length_problem(bar_seconds)
    if problem:
        raise DataError(f"--bar-seconds: {problem}")
    check_timezone(timezone)
    raw = read_table_file(file)
    bars, problems = validate_bars(
        raw, file=str(file), ticker=ticker, timezone=timezone,
        bar_timestamp=bar_timestamp, bar_seconds=bar_seconds,
    )
    if problems:
        raise DataError(
            f"{file}: {len(problems)} validation rule(s) broken; nothing was written", problems
        )
    target = Store.open_or_create(store, bar_seconds=bar_seconds)
    source = {
        "file": Path(file).name,
        "sha256": sha256_file(Path(file)),
        "rows": len(bars),
        "bar_timestamp": bar_timestamp,
        "timezone": timezone,
    }
    written = target.add_bars(bars, source=source)
    return {
        "rows": len(bars),
        "tickers": sorted(bars["ticker"].unique()),
        "partitions": written,
        "snapshot_sha256": target.snapshot_sha256,
    }


def ingest_headlines(
    file: str | Path, store: str | Path, *, timezone: str | None = None
) -> dict:
    """Validate a headlines file and add it to ``store``; on any broken rule nothing is written."""
    check_timezone(timezone)
    raw = read_table_file(file)
    headlines, problems = validate_headlines(raw, file=str(file), timezone=timezone)
    if problems:
        raise DataError(
            f"{file}: {len(problems)} validation rule(s) broken; nothing was written", problems
        )
    target = Store(store) if (Path(store) / "manifest.json").is_file() else Store.open_or_create(
        store
    )
    source = {"file": Path(file).name, "sha256": sha256_file(Path(file)), "rows": len(headlines)}
    written = target.add_headlines(headlines, source=source)
    return {"rows": len(headlines), "partitions": written,
            "snapshot_sha256": target.snapshot_sha256}
