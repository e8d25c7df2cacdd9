"""Ingest user files (CSV, Parquet, JSONL) of bars or headlines into a store, all or nothing."""

from __future__ import annotations

import csv
import gzip
import json
import warnings
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from finbench.core.errors import DataError
from finbench.core.names import bar_length_problem, is_timezone, ticker_problem
from finbench.data.schema import (
    BAR_ALIASES,
    HEADLINE_ALIASES,
    validate_bars,
    validate_headlines,
)
from finbench.data.store import DEFAULT_ZONE, Store, sha256_file

BAR_TIMESTAMPS = ("start", "end")
# every text file a user gives (CSV, JSON, JSON lines, a dump) is UTF-8; a byte-order mark at
# its start (as spreadsheet programs write one) is skipped, in every format alike
TEXT_ENCODING = "utf-8-sig"


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
        if suffix == ".json":
            return _read_json(path)
    except DataError:
        raise
    except (ValueError, json.JSONDecodeError, OSError) as exc:
        raise DataError(f"{path}: cannot be read as {suffix} ({exc})") from exc
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    raise DataError(f"{path}: unknown file type {suffix!r} (use .csv, .parquet, .json or "
                    ".jsonl)")


def _read_csv(path: Path, names: Iterable[str] = ()) -> pd.DataFrame:
    """A CSV file's rows as text (:func:`read_table_file`: which cells are missing). A row
    with more fields than the header names is an error naming it: when every row has one
    more, pandas alone would take the first column as the index and shift every value one
    column to the left, silently. (An empty last field on every row, a delimiter ending each
    line, is read as no field.)"""
    kept = {str(n).strip().lower() for n in names}
    wide = _wide_header(path)
    if wide is not None:
        return _read_wide(path, *wide)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.ParserWarning)
        try:  # (missing texts per column given to pandas would make it warn of a delimiter
            # ending each line, which it reads as no field otherwise: they are masked after)
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""],
                                encoding=TEXT_ENCODING,
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
    with opener(path, "rt", newline="", encoding=TEXT_ENCODING, errors="replace") as fh:
        rows = csv.reader(fh)
        width = len(next(rows))
        longer = next(((i, len(r)) for i, r in enumerate(rows, 1) if len(r) > width), None)
    if longer is None:  # a problem of another kind (an unclosed quote, ...)
        raise DataError(f"{path}: cannot be read as CSV ({str(problem).strip()})")
    raise DataError(f"{path}: row {longer[0]} has {longer[1]} fields where the header names "
                    f"{width}")


def _wide_header(path: Path) -> tuple[list[str], list[str], str] | None:
    """The three header rows of a CSV written from a frame with two column levels, as
    yfinance's ``download(...).to_csv()`` writes it (``Price,Close,High,...``, then
    ``Ticker,AAPL,AAPL,...``, in either order, then the index's name alone, e.g.
    ``Datetime,,,``): (each column's field, each column's ticker, the index's name); None
    for any other CSV."""
    opener = gzip.open if path.suffix.lower() == ".gz" else open
    with opener(path, "rt", newline="", encoding=TEXT_ENCODING, errors="replace") as fh:
        head = [row for _, row in zip(range(3), csv.reader(fh), strict=False)]
    if len(head) < 3 or not all(len(row) == len(head[0]) > 1 for row in head):
        return None
    levels = {head[0][0].strip().lower(): head[0][1:], head[1][0].strip().lower(): head[1][1:]}
    if set(levels) != {"price", "ticker"} or any(c.strip() for c in head[2][1:]):
        return None
    return levels["price"], levels["ticker"], head[2][0]


def _read_wide(path: Path, fields: list[str], tickers: list[str], index: str) -> pd.DataFrame:
    """A CSV of :func:`_wide_header`'s layout as one row per (ticker, time): the index's
    column, ``ticker`` and each field. A ticker's row whose fields are all empty is no bar
    (the wide layout pads a time when another ticker has a bar and this one none) and is
    left out; every other row is kept, named ``data row N, TICKER`` in messages."""
    data = pd.read_csv(path, header=None, skiprows=3, dtype=str, keep_default_na=False,
                       na_values=[""], encoding=TEXT_ENCODING, index_col=False)
    if data.shape[1] != len(fields) + 1:
        raise DataError(f"{path}: its rows have {data.shape[1]} fields where the three header "
                        f"rows (Price, Ticker, {index}) name {len(fields) + 1}")
    parts = []
    for ticker in dict.fromkeys(t.strip() for t in tickers):
        columns = [j + 1 for j, t in enumerate(tickers) if t.strip() == ticker]
        part = data[[0, *columns]].set_axis([index, *(fields[j - 1] for j in columns)], axis=1)
        part = part.mask(part.isin(MISSING_TEXTS))
        bar = part.iloc[:, 1:].notna().any(axis=1).to_numpy(bool)
        parts.append(part[bar].assign(ticker=ticker).assign(
            _row=[f"data row {i + 1}, {ticker}" for i in np.flatnonzero(bar)]))
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if frame.empty:
        return pd.DataFrame()
    rows = frame.pop("_row").to_numpy(object)
    frame.attrs["row_names"] = rows
    return frame


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
    with opener(path, "rt", encoding=TEXT_ENCODING) as fh:
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


JSON_ENVELOPES = ("results", "news", "data")  # Massive/Polygon, Alpaca, others


def _read_json(path: Path) -> pd.DataFrame:
    """A JSON file of rows: an array of objects, or an API answer holding them in one of
    :data:`JSON_ENVELOPES` (``{"results": [...]}`` as Massive/Polygon returns news,
    ``{"news": [...]}`` as Alpaca does); an element that is not an object is an error naming
    it."""
    with open(path, encoding=TEXT_ENCODING) as fh:
        value = json.load(fh)
    if isinstance(value, dict):
        found = [k for k in JSON_ENVELOPES if isinstance(value.get(k), list)]
        if len(found) != 1:
            raise DataError(f"{path}: a JSON file of rows is an array of objects, or an object "
                            f"holding them under one of {', '.join(JSON_ENVELOPES)} (found "
                            f"keys: {', '.join(map(str, list(value)[:10]))})")
        value = value[found[0]]
    if not isinstance(value, list):
        raise DataError(f"{path}: a JSON file of rows is an array of objects (got "
                        f"{type(value).__name__})")
    bad = [f"element {i}: a JSON object (got {type(v).__name__})"
           for i, v in enumerate(value, 1) if not isinstance(v, dict)]
    if bad:
        raise DataError(f"{path}: {len(bad)} element(s) break the rule 'an array of JSON "
                        "objects'; nothing was written", bad[:20])
    return pd.DataFrame.from_records(value)


def check_timezone(timezone: str | None) -> None:
    """A DataError unless ``timezone`` (``--timezone``) is None or a time zone name."""
    if timezone is not None and not is_timezone(timezone):
        raise DataError(f"--timezone: {timezone!r} is not a time zone name (e.g. "
                        "America/New_York, Europe/London, UTC)")


def ingest_bars(
    file: str | Path | list,
    store: str | Path,
    *,
    ticker: str | None = None,
    timezone: str | None = None,
    bar_timestamp: str = "start",
    bar_seconds: int = 60,
    dry_run: bool = False,
) -> dict:
    """Validate a bars file (or a list of them) and add it to ``store``; on any broken rule
    nothing is written.

    Returns a summary: rows, tickers, partitions written, what was replaced (per ticker-day:
    bars stored before, bars now) and warnings (days whose tasks at 09:30 cannot be scored).
    ``dry_run``: validate and work out the summary, write nothing (not even a new store).
    """
    return ingest_files(store, bars=file, ticker=ticker, timezone=timezone,
                        bar_timestamp=bar_timestamp, bar_seconds=bar_seconds,
                        dry_run=dry_run)["bars"]


def ingest_headlines(
    file: str | Path | list, store: str | Path, *, timezone: str | None = None,
    dry_run: bool = False
) -> dict:
    """Validate a headlines file (or a list of them) and add it to ``store``; on any broken
    rule nothing is written. Returns rows, partitions written and how many stored headlines
    (same ids) were replaced; ``dry_run``: write nothing."""
    return ingest_files(store, headlines=file, timezone=timezone, dry_run=dry_run)["headlines"]


def ingest_files(
    store: str | Path,
    *,
    bars: str | Path | list | None = None,
    headlines: str | Path | list | None = None,
    ticker: str | None = None,
    timezone: str | None = None,
    bar_timestamp: str = "start",
    bar_seconds: int = 60,
    dry_run: bool = False,
) -> dict:
    """Bars files and/or headlines files (each a path or a list of paths) into ``store``, all
    or nothing across them all: each file is read and checked before any is written, rows
    given in two files (the same ticker and bar, the same headline id) are an error naming
    both, and a new store is made with the bars' length. Returns ``{"bars": summary or None,
    "headlines": summary or None}`` (see :func:`ingest_bars`, :func:`ingest_headlines`)."""
    if bar_timestamp not in BAR_TIMESTAMPS:
        raise DataError(f"--bar-timestamp: {bar_timestamp!r} is not one of start, end")
    problem = bar_length_problem(bar_seconds)
    if problem:
        raise DataError(f"--bar-seconds: {problem}")
    if ticker is not None and ticker_problem(ticker):
        raise DataError(f"--ticker: {ticker_problem(ticker)}")
    check_timezone(timezone)
    checked = {}
    if _paths(headlines):
        checked["headlines"] = _joined("headlines", [_checked(f, validate_headlines(
            read_table_file(f, names=HEADLINE_ALIASES["tickers"]), file=str(f),
            timezone=timezone), {}) for f in _paths(headlines)])
    if _paths(bars):
        checked["bars"] = _joined("bars", [_checked(f, validate_bars(
            read_table_file(f, names=BAR_ALIASES["ticker"]), file=str(f), ticker=ticker,
            timezone=timezone, bar_timestamp=bar_timestamp, bar_seconds=bar_seconds),
            {"bar_timestamp": bar_timestamp, "timezone": timezone}) for f in _paths(bars)])
    exists = (Path(store) / "manifest.json").is_file()
    if dry_run and not exists:
        return {"bars": _new_store_bars(checked["bars"][0], bar_seconds)
                if "bars" in checked else None,
                "headlines": _new_store_headlines(checked["headlines"][0])
                if "headlines" in checked else None}
    target = (Store(store) if dry_run or (exists and "bars" not in checked)
              else Store.open_or_create(store, bar_seconds=bar_seconds))
    out: dict = {"bars": None, "headlines": None}
    if "headlines" in checked:
        frame, sources = checked["headlines"]
        written, replaced = target.add_headlines(frame, sources=sources, dry_run=dry_run)
        out["headlines"] = {"rows": len(frame), "partitions": written, "replaced": replaced,
                            "ids_made": any(s.get("ids_made") for s in sources)}
    if "bars" in checked:
        frame, sources = checked["bars"]
        written, replaced = target.add_bars(frame, sources=sources, dry_run=dry_run)
        out["bars"] = {"rows": len(frame), "tickers": sorted(frame["ticker"].unique()),
                       "partitions": written, "replaced": replaced,
                       "warnings": open_reference_gaps(frame, zone=target.timezone,
                                                       bar_seconds=target.bar_seconds)}
    return {kind: None if summary is None
            else {**summary, "snapshot_sha256": target.snapshot_sha256}
            for kind, summary in out.items()}


def _paths(given) -> list:
    """``given`` (None, a path, or a list of paths) as a list of paths."""
    if given is None:
        return []
    return list(given) if isinstance(given, list | tuple) else [given]


def _checked(file: str | Path, validated: tuple[pd.DataFrame, list], source: dict):
    """A validated file's rows and the store's record of where they came from; a DataError
    listing its broken rules, if any."""
    frame, problems = validated
    if problems:
        raise DataError(
            f"{file}: {len(problems)} validation rule(s) broken; nothing was written", problems
        )
    made = {"ids_made": True} if frame.attrs.get("ids_made") else {}
    return frame, {"file": Path(file).name, "sha256": sha256_file(Path(file)),
                   "rows": len(frame), **source, **made}


def _joined(kind: str, parts: list[tuple[pd.DataFrame, dict]]) -> tuple[pd.DataFrame, list]:
    """The checked files of one kind as one frame (bars sorted by ticker then ts, headlines
    by availability then id) and their sources; a row given in two files (a bar of the same
    ticker and start, a headline of the same id) is a DataError naming it and both files."""
    sources = [source for _, source in parts]
    if len(parts) == 1:
        return parts[0][0], sources
    key = ["ticker", "ts"] if kind == "bars" else ["id"]
    frame = pd.concat([f.assign(_file=s["file"]) for f, s in parts], ignore_index=True)
    twice = frame[frame.duplicated(key, keep=False)]
    if len(twice):
        groups = list(twice.groupby(key, sort=True))
        problems = [f"{' '.join(map(str, values))}: in {', '.join(dict.fromkeys(part['_file']))}"
                    for values, part in groups[:20]]
        what = "bar (ticker, ts)" if kind == "bars" else "headline id"
        raise DataError(f"{len(groups)} {what}(s) given in two files (rule: each in one file "
                        "only); nothing was written", problems)
    order = key if kind == "bars" else ["available_at", "id"]
    frame = frame.drop(columns="_file").sort_values(order, kind="stable")
    return frame.reset_index(drop=True), sources


OPEN_CLOCK = 9 * 3600 + 30 * 60  # 09:30, the default MORNING horizon (docs/spec.md §1)
REF_WINDOW_SECONDS = 30  # the reference bar's window (docs/spec.md §5)


def open_reference_gaps(bars: pd.DataFrame, *, zone: str, bar_seconds: int) -> list[str]:
    """Warnings for the ticker-days of ``bars`` that have bars after 09:30 (in the store's
    zone) but none ending in ``[09:29:30, 09:30]``: a task at 09:30 (the default MORNING
    horizon) on such a day has no reference price (docs/spec.md §5), as with bars that start
    at the open (no pre-market bar)."""
    if bars.empty:
        return []
    local = bars["ts"].dt.tz_convert(zone)
    day = local.dt.normalize()
    clock = ((local - day) / pd.Timedelta(seconds=1)).to_numpy() + bar_seconds  # bar ends
    frame = pd.DataFrame({"ticker": bars["ticker"].to_numpy(), "day": day.dt.date.to_numpy(),
                          "ref": (clock >= OPEN_CLOCK - REF_WINDOW_SECONDS)
                          & (clock <= OPEN_CLOCK),
                          "after": clock > OPEN_CLOCK})
    days = frame.groupby(["ticker", "day"], sort=True)[["ref", "after"]].any()
    gaps = days[days["after"] & ~days["ref"]]
    out = []
    for ticker, part in gaps.groupby(level="ticker", sort=True):
        total = int(days.loc[ticker]["after"].sum())
        first = part.index.get_level_values("day")[0]
        start = pd.Timedelta(seconds=OPEN_CLOCK - bar_seconds)
        out.append(
            f"{ticker}: on {len(part)} of {total} days no bar ends at 09:30 {zone} (the "
            f"bar that starts at {_clock(start)}, before the open; e.g. {first}): a task at "
            "09:30 (the default MORNING horizon) on those days has no reference price and is "
            "unscorable (no_reference_price; docs/spec.md §5: the reference price is the mid "
            "of the bar that ends at the forecast time). To score them, ingest the bars "
            "with extended hours (the pre-market minute), or ask horizons after 09:30 "
            "([tasks] horizons)")
    return out


def _clock(offset: pd.Timedelta) -> str:
    seconds = int(offset.total_seconds())
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}"


def _new_store_bars(bars: pd.DataFrame, bar_seconds: int) -> dict:
    """A dry run's bars summary for a store not yet made: every date partition is new."""
    dates = bars["ts"].dt.tz_convert(DEFAULT_ZONE).dt.date.unique()
    return {"rows": len(bars), "tickers": sorted(bars["ticker"].unique()),
            "partitions": [f"bars/date={d}/part.parquet" for d in sorted(dates)],
            "replaced": [], "snapshot_sha256": None,
            "warnings": open_reference_gaps(bars, zone=DEFAULT_ZONE, bar_seconds=bar_seconds)}


def _new_store_headlines(headlines: pd.DataFrame) -> dict:
    """A dry run's headlines summary for a store not yet made."""
    return {"rows": len(headlines), "partitions": [], "replaced": 0, "snapshot_sha256": None,
            "ids_made": bool(headlines.attrs.get("ids_made"))}
