"""Ingest user files (CSV, Parquet, JSONL) of bars or headlines into a store, all or nothing."""

from __future__ import annotations

import csv
import gzip
import json
import warnings
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from finbench.core.errors import DataError
from finbench.core.names import bar_length_problem, is_timezone
from finbench.data.schema import (
    BAR_ALIASES,
    HEADLINE_ALIASES,
    validate_bars,
    validate_headlines,
)
from finbench.data.store import DEFAULT_ZONE, Store, sha256_file

BAR_TIMESTAMPS = ("start", "end")


# the texts pandas reads as a missing cell by default (``read_csv``'s ``na_values``)
MISSING_TEXTS = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
                 "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")


def read_table_file(path: str | Path, *, names: Iterable[str] = ()) -> pd.DataFrame:
    """Read a CSV, Parquet or JSON-lines file into a frame; the suffix decides the reader.

    A CSV cell is missing when it is empty or holds one of :data:`MISSING_TEXTS` (``NA``,
    ``null``, ``nan``, ...), as pandas reads it, except in the columns ``names`` (matched
    as the ingest matches column names, whatever their case), where only an empty cell is:
    ticker columns, where ``NA`` (Nano Labs) and ``NULL`` name what they say."""
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
            return _read_csv(path, names)
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


def _read_csv(path: Path, names: Iterable[str] = ()) -> pd.DataFrame:
    """A CSV file's rows as text (:func:`read_table_file`: which cells are missing). A row
    with more fields than the header names is an error naming it: when every row has one
    more, pandas alone would take the first column as the index and shift every value one
    column to the left, silently. (An empty last field on every row, a delimiter ending each
    line, is read as no field.)"""
    kept = {str(n).strip().lower() for n in names}
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.ParserWarning)
        try:  # (missing texts per column given to pandas would make it warn of a delimiter
            # ending each line, which it reads as no field otherwise: they are masked after)
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""],
                                index_col=False)
        except (pd.errors.ParserWarning, pd.errors.ParserError) as exc:
            problem = exc
        else:
            for column in frame.columns:
                if str(column).strip().lower() not in kept:
                    cells = frame[column]
                    frame[column] = cells.mask(cells.isin(MISSING_TEXTS))
            return frame
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
    return ingest_files(store, bars=file, ticker=ticker, timezone=timezone,
                        bar_timestamp=bar_timestamp, bar_seconds=bar_seconds,
                        dry_run=dry_run)["bars"]


def ingest_headlines(
    file: str | Path, store: str | Path, *, timezone: str | None = None, dry_run: bool = False
) -> dict:
    """Validate a headlines file and add it to ``store``; on any broken rule nothing is written.
    Returns rows, partitions written and how many stored headlines (same ids) were replaced;
    ``dry_run``: write nothing."""
    return ingest_files(store, headlines=file, timezone=timezone, dry_run=dry_run)["headlines"]


def ingest_files(
    store: str | Path,
    *,
    bars: str | Path | None = None,
    headlines: str | Path | None = None,
    ticker: str | None = None,
    timezone: str | None = None,
    bar_timestamp: str = "start",
    bar_seconds: int = 60,
    dry_run: bool = False,
) -> dict:
    """A bars file and/or a headlines file into ``store``, all or nothing across both: each
    is read and checked before either is written (headlines first, as they are checked), and
    a new store is made with the bars' length. Returns ``{"bars": summary or None,
    "headlines": summary or None}`` (see :func:`ingest_bars`, :func:`ingest_headlines`)."""
    if bar_timestamp not in BAR_TIMESTAMPS:
        raise DataError(f"--bar-timestamp: {bar_timestamp!r} is not one of start, end")
    problem = bar_length_problem(bar_seconds)
    if problem:
        raise DataError(f"--bar-seconds: {problem}")
    check_timezone(timezone)
    checked = {}
    if headlines is not None:
        checked["headlines"] = _checked(headlines, validate_headlines(
            read_table_file(headlines, names=HEADLINE_ALIASES["tickers"]), file=str(headlines),
            timezone=timezone), {})
    if bars is not None:
        checked["bars"] = _checked(bars, validate_bars(
            read_table_file(bars, names=BAR_ALIASES["ticker"]), file=str(bars), ticker=ticker,
            timezone=timezone,
            bar_timestamp=bar_timestamp, bar_seconds=bar_seconds),
            {"bar_timestamp": bar_timestamp, "timezone": timezone})
    exists = (Path(store) / "manifest.json").is_file()
    if dry_run and not exists:
        return {"bars": _new_store_bars(checked["bars"][0]) if "bars" in checked else None,
                "headlines": _new_store_headlines(checked["headlines"][0])
                if "headlines" in checked else None}
    target = (Store(store) if dry_run or (exists and "bars" not in checked)
              else Store.open_or_create(store, bar_seconds=bar_seconds))
    out: dict = {"bars": None, "headlines": None}
    if "headlines" in checked:
        frame, source = checked["headlines"]
        written, replaced = target.add_headlines(frame, source=source, dry_run=dry_run)
        out["headlines"] = {"rows": len(frame), "partitions": written, "replaced": replaced}
    if "bars" in checked:
        frame, source = checked["bars"]
        written, replaced = target.add_bars(frame, source=source, dry_run=dry_run)
        out["bars"] = {"rows": len(frame), "tickers": sorted(frame["ticker"].unique()),
                       "partitions": written, "replaced": replaced}
    return {kind: None if summary is None
            else {**summary, "snapshot_sha256": target.snapshot_sha256}
            for kind, summary in out.items()}


def _checked(file: str | Path, validated: tuple[pd.DataFrame, list], source: dict):
    """A validated file's rows and the store's record of where they came from; a DataError
    listing its broken rules, if any."""
    frame, problems = validated
    if problems:
        raise DataError(
            f"{file}: {len(problems)} validation rule(s) broken; nothing was written", problems
        )
    return frame, {"file": Path(file).name, "sha256": sha256_file(Path(file)),
                   "rows": len(frame), **source}


def _new_store_bars(bars: pd.DataFrame) -> dict:
    """A dry run's bars summary for a store not yet made: every date partition is new."""
    dates = bars["ts"].dt.tz_convert(DEFAULT_ZONE).dt.date.unique()
    return {"rows": len(bars), "tickers": sorted(bars["ticker"].unique()),
            "partitions": [f"bars/date={d}/part.parquet" for d in sorted(dates)],
            "replaced": [], "snapshot_sha256": None}


def _new_store_headlines(headlines: pd.DataFrame) -> dict:
    """A dry run's headlines summary for a store not yet made."""
    return {"rows": len(headlines), "partitions": [], "replaced": 0, "snapshot_sha256": None}
