"""Reading the files users give (CSV, Parquet, JSON, JSON lines) into frames: the suffix picks
the reader; a CSV as yfinance writes it (three header rows) is read as one row per ticker and
bar; text files are UTF-8, a byte-order mark at the start skipped in every format."""

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


# ``json.loads``' own scanner (the same settings: strict, float, int), called without its
# wrapping: a line of a dump is read 1.4x as fast (5.7 against 4.0 us a line of 500 bytes)
_SCAN = json.JSONDecoder().scan_once


def json_object(line: str) -> dict | str:
    """One line of a JSON-lines file as its object, or what is wrong with it: what
    ``json.loads`` gives (its message when it raises). A line that is an object from its first
    character to its end or a line feed (nearly every line of a dump) is read by the scanner
    ``json.loads`` calls, which gives the same object; any other goes through ``json.loads``.

    >>> json_object('{"a": 1}'), json_object("[1]"), json_object("{x")[:8]
    ({'a': 1}, 'a JSON object per line (got list)', 'not JSON')
    """
    if line[:1] == "{":  # (no byte-order mark, no white space before it)
        try:
            value, end = _SCAN(line, 0)
        except (StopIteration, ValueError):  # json.loads below names what is wrong
            pass
        else:
            if end == len(line) or line[end:] == "\n":  # (nothing after it but its end)
                return value
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
