"""Ingest user files of bars or headlines (:mod:`finbench.data.user_files` reads them) into a
store, all or nothing."""

from __future__ import annotations

from pathlib import Path

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
from finbench.data.user_files import read_table_file

BAR_TIMESTAMPS = ("start", "end")
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
