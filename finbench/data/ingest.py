"""Ingest user files (CSV, Parquet, JSONL) of bars or headlines into a store, all or nothing."""

from __future__ import annotations

import csv
import gzip
import json
import warnings
from pathlib import Path

import pandas as pd

from finbench.core.errors import DataError
from finbench.core.names import bar_length_problem, is_timezone
from finbench.data.schema import validate_bars, validate_headlines
from finbench.data.store import DEFAULT_ZONE, Store, sha256_file

BAR_TIMESTAMPS = ("start", "end")


def read_table_file(path: str | Path) -> pd.DataFrame:
    """Read a CSV, Parquet or JSON-lines file into a frame; the suffix decides the reader."""
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path}: is a folder; give one file")
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    suffix = "".join(path.suffixes[-2:]).lower() if path.suffix == ".gz" else path.suffix.lower()
    try:
        if suffix in (".csv", ".csv.gz", ".txt"):
            if path.stat().st_size == 0:
                return pd.DataFrame()
            return _read_csv(path)
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        if suffix in (".jsonl", ".ndjson", ".jsonl.gz"):
            return _read_json_lines(path)
    except DataError:
        raise
    except (ValueError, json.JSONDecodeError, OSError) as exc:
        raise DataError(f"{path}: cannot be read as {suffix} ({exc})") from exc
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    raise DataError(f"{path}: unknown file type {suffix!r} (use .csv, .parquet or .jsonl)")


def _read_csv(path: Path) -> pd.DataFrame:
    """A CSV file's rows as text. A row with more fields than the header names is an error
    naming it: when every row has one more, pandas alone would take the first column as the
    index and shift every value one column to the left, silently. (An empty last field on
    every row, a delimiter ending each line, is read as no field.)"""
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.ParserWarning)
        try:
            return pd.read_csv(path, dtype=str, keep_default_na=True, index_col=False)
        except (pd.errors.ParserWarning, pd.errors.ParserError) as exc:
            problem = exc
    opener = gzip.open if path.suffix.lower() == ".gz" else open
    with opener(path, "rt", newline="", encoding="utf-8", errors="replace") as fh:
        rows = csv.reader(fh)
        width = len(next(rows))
        longer = next(((i, len(r)) for i, r in enumerate(rows, 1) if len(r) > width), None)
    if longer is None:  # a problem of another kind (an unclosed quote, ...)
        raise DataError(f"{path}: cannot be read as CSV ({str(problem).strip()})")
    raise DataError(f"{path}: row {longer[0]} has {longer[1]} fields where the header names "
                    f"{width}")


def json_object(line: str) -> dict | str:
    """One line of a JSON-lines file as its object, or what is wrong with it.

    >>> json_object('{"a": 1}'), json_object("[1]"), json_object("{x")[:8]
    ({'a': 1}, 'a JSON object per line (got list)', 'not JSON')
    """
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg})"
    if not isinstance(value, dict):
        return f"a JSON object per line (got {type(value).__name__})"
    return value


def _read_json_lines(path: Path) -> pd.DataFrame:
    """One JSON object per line (blank lines skipped); a line that is not an object is an
    error naming the line."""
    opener = gzip.open if path.suffix.lower() == ".gz" else open
    records, bad = [], []
    with opener(path, "rt", encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            value = json_object(line)
            if isinstance(value, str):
                bad.append(f"line {number}: {value}")
                continue
            records.append(value)
    if bad:
        raise DataError(f"{path}: {len(bad)} line(s) break the rule 'one JSON object per "
                        "line'; nothing was written", bad[:20])
    return pd.DataFrame.from_records(records)


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
    dry_run: bool = False,
) -> dict:
    """Validate a bars file and add it to ``store``; on any broken rule nothing is written.

    Returns a summary: rows, tickers, partitions written and what was replaced (per
    ticker-day: bars stored before, bars now). ``dry_run``: validate and work out the
    summary, write nothing (not even a new store).
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
    summary = {"rows": len(bars), "tickers": sorted(bars["ticker"].unique())}
    if dry_run and not (Path(store) / "manifest.json").is_file():
        dates = bars["ts"].dt.tz_convert(DEFAULT_ZONE).dt.date.unique()
        return {**summary, "partitions": [f"bars/date={d}/part.parquet" for d in sorted(dates)],
                "replaced": [], "snapshot_sha256": None}
    target = (Store(store) if dry_run else Store.open_or_create(store, bar_seconds=bar_seconds))
    source = {
        "file": Path(file).name,
        "sha256": sha256_file(Path(file)),
        "rows": len(bars),
        "bar_timestamp": bar_timestamp,
        "timezone": timezone,
    }
    written, replaced = target.add_bars(bars, source=source, dry_run=dry_run)
    return {**summary, "partitions": written, "replaced": replaced,
            "snapshot_sha256": target.snapshot_sha256}


def ingest_headlines(
    file: str | Path, store: str | Path, *, timezone: str | None = None, dry_run: bool = False
) -> dict:
    """Validate a headlines file and add it to ``store``; on any broken rule nothing is written.
    Returns rows, partitions written and how many stored headlines (same ids) were replaced;
    ``dry_run``: write nothing."""
    check_timezone(timezone)
    raw = read_table_file(file)
    headlines, problems = validate_headlines(raw, file=str(file), timezone=timezone)
    if problems:
        raise DataError(
            f"{file}: {len(problems)} validation rule(s) broken; nothing was written", problems
        )
    if (Path(store) / "manifest.json").is_file():
        target = Store(store)
    elif dry_run:
        return {"rows": len(headlines), "partitions": [], "replaced": 0,
                "snapshot_sha256": None}
    else:
        target = Store.open_or_create(store)
    source = {"file": Path(file).name, "sha256": sha256_file(Path(file)), "rows": len(headlines)}
    written, replaced = target.add_headlines(headlines, source=source, dry_run=dry_run)
    return {"rows": len(headlines), "partitions": written, "replaced": replaced,
            "snapshot_sha256": target.snapshot_sha256}
