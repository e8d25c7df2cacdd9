"""Markets and their price histories read from Polymarket's public JSON shapes or a plain
table (CSV, Parquet, JSON lines), checked against the rules of docs/spec.md §11.1. Every
broken rule is named with its file, row (or market) and field; nothing is dropped or filled.

Polymarket shapes: the Gamma API's market objects (a JSON array, as ``/markets`` returns, or
one object a line), whose ``outcomes``, ``outcomePrices`` are JSON text; a market resolves YES
when its final ``outcomePrices`` are 1/0, NO at 0/1, and *void* (cancelled, annulled) at
0.5/0.5. Price histories in the CLOB's ``/prices-history`` shape (``{"history": [{"t": unix
seconds, "p": price}]}``, the YES token), one file per market named ``<market id>.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from finbench.core.errors import DataError
from finbench.data.ingest import TEXT_ENCODING, read_table_file
from finbench.data.schema import cell, shown
from finbench.data.timestamps import END, FIRST, YEARS

MARKET_COLUMNS = ("market_id", "question", "description", "category", "event_group",
                  "opened_at", "closes_at", "resolved_at", "outcome")
TIME_FIELDS = ("opened_at", "closes_at", "resolved_at")
OUTCOMES = ("YES", "NO", "void")
PRICE_COLUMNS = ("market_id", "time", "price")
MAX_PROBLEMS = 50


def read_markets(path: str | Path, *, default_category: str | None = None) -> pd.DataFrame:
    """Markets from ``path`` (Polymarket Gamma JSON or a plain table), validated."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        frame, problems = _gamma_markets(path, default_category)
    else:
        frame, problems = read_table_file(path), []
        missing = [c for c in MARKET_COLUMNS if c not in frame.columns]
        if missing:
            raise DataError(f"{path}: missing column(s) {', '.join(missing)} (a market table "
                            f"has {', '.join(MARKET_COLUMNS)})")
        frame = frame[list(MARKET_COLUMNS)].copy()
        frame["description"] = frame["description"].fillna("")
        frame["_where"] = [f"row {i + 2}" for i in range(len(frame))]  # header is line 1
    problems += check_markets(frame, str(path))
    if problems:
        raise DataError(f"{path}: {len(problems)} problem(s); nothing was written",
                        problems[:MAX_PROBLEMS])
    out = frame.drop(columns=["_where", "_named"], errors="ignore")
    for name in TIME_FIELDS:
        out[name] = pd.to_datetime(out[name], utc=True)
    return out.sort_values("market_id", kind="stable").reset_index(drop=True)


def _gamma_markets(path: Path, default_category: str | None) -> tuple[pd.DataFrame, list[str]]:
    """Gamma market objects turned into market rows, with the problems of each."""
    try:
        text = path.read_text(encoding=TEXT_ENCODING)
        objects = json.loads(text) if text.lstrip().startswith("[") else [
            json.loads(line) for line in text.splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: cannot be read as Polymarket market JSON ({exc})") from exc
    rows, problems = [], []
    for number, obj in enumerate(objects, 1):
        where = f"market {number} (id {obj.get('id', '?')})" if isinstance(obj, dict) else (
            f"market {number}")
        if not isinstance(obj, dict):
            problems.append(f"{path}: {where}: not a JSON object")
            continue
        row, why = _gamma_row(obj, default_category)
        problems += [f"{path}: {where}: {w}" for w in why]
        # fields whose problem is named above: check_markets does not name them again
        named = {f for f, gone in (("outcome", row["outcome"] is None),
                                   ("category", not row["category"])) if gone}
        rows.append({**row, "_where": where, "_named": named})
    return pd.DataFrame(rows, columns=[*MARKET_COLUMNS, "_where", "_named"]), problems


def _gamma_row(obj: dict, default_category: str | None) -> tuple[dict, list[str]]:
    """One Gamma market as a market row; the outcome read from its final prices."""
    why = []
    try:
        outcomes = [str(o).lower() for o in json.loads(obj.get("outcomes") or "null")]
        prices = [float(p) for p in json.loads(obj.get("outcomePrices") or "null")]
    except (TypeError, ValueError):
        outcomes, prices = [], []
    outcome = None
    if outcomes != ["yes", "no"] or len(prices) != 2:
        why.append(f"outcomes {obj.get('outcomes')!r} / outcomePrices "
                   f"{obj.get('outcomePrices')!r}: not a binary Yes/No market")
    elif not obj.get("closed"):
        why.append("closed is not true: the market is not resolved")
    else:
        outcome = {(1.0, 0.0): "YES", (0.0, 1.0): "NO", (0.5, 0.5): "void"}.get(tuple(prices))
        if outcome is None:
            why.append(f"outcomePrices {prices}: not a resolution (1/0 YES, 0/1 NO, 0.5/0.5 "
                       "void)")
    events = obj.get("events") or []
    first = events[0] if events and isinstance(events[0], dict) else {}
    category = obj.get("category") or first.get("category") or default_category
    if not category:
        why.append("category: missing (give --default-category to name one for such markets)")
    return {"market_id": str(obj.get("id", "")), "question": obj.get("question") or "",
            "description": obj.get("description") or "", "category": category or "",
            # markets of one Polymarket event share an outcome driver; a market without an
            # event is its own group
            "event_group": str(first.get("id") or f"market:{obj.get('id', '')}"),
            "opened_at": obj.get("startDate"), "closes_at": obj.get("endDate"),
            "resolved_at": obj.get("closedTime"), "outcome": outcome}, why


def check_markets(frame: pd.DataFrame, source: str) -> list[str]:
    """The rules of a market row; one line per broken rule, naming the row and field."""
    problems = []
    where = frame["_where"].to_numpy(object)
    named = frame["_named"].to_numpy(object) if "_named" in frame else [()] * len(frame)

    def unnamed(bad: pd.Series, field: str) -> np.ndarray:  # not named by the reader already
        return bad.to_numpy(bool) & np.array([field not in n for n in named], bool)

    ids = frame["market_id"].astype("string")
    bad_id = ids.isna() | (ids.str.len() == 0) | ids.str.contains(r"[\s|]", regex=True).fillna(
        True)
    for i in np.flatnonzero(bad_id.to_numpy(bool)):
        problems.append(f"{source}: {where[i]}: market_id {frame['market_id'].iat[i]!r}: "
                        "non-empty, without whitespace or '|'")
    dup = ids.duplicated(keep=False) & ~bad_id
    for i in np.flatnonzero(dup.to_numpy(bool)):
        problems.append(f"{source}: {where[i]}: market_id {ids.iat[i]!r} appears twice")
    for name in ("question", "category", "event_group"):
        empty = frame[name].isna() | (frame[name].astype("string").str.strip() == "")
        for i in np.flatnonzero(unnamed(empty, name)):
            problems.append(f"{source}: {where[i]}: {name} is empty")
    bad_outcome = ~frame["outcome"].isin(OUTCOMES)
    for i in np.flatnonzero(unnamed(bad_outcome, "outcome")):
        problems.append(f"{source}: {where[i]}: outcome {frame['outcome'].iat[i]!r}: one of "
                        f"{', '.join(OUTCOMES)}")
    times = {}
    for name in TIME_FIELDS:
        times[name], bad = parse_instants(frame[name])
        for i in np.flatnonzero(bad):
            problems.append(f"{source}: {where[i]}: {name} {cell(frame[name].iat[i])}: "
                            f"{INSTANT_RULE}")
    opened, resolved = times["opened_at"], times["resolved_at"]
    for i in np.flatnonzero((resolved < opened).to_numpy(bool)):
        problems.append(f"{source}: {where[i]}: resolved_at is before opened_at")
    for i in np.flatnonzero((times["closes_at"] < opened).to_numpy(bool)):
        problems.append(f"{source}: {where[i]}: closes_at is before opened_at")
    return problems


INSTANT_RULE = f"an instant with its zone, of the years {YEARS} (e.g. 2024-03-01T12:00:00Z)"
_FIRST, _END = FIRST.tz_localize("UTC"), END.tz_localize("UTC")


def parse_instants(values: pd.Series) -> tuple[pd.Series, np.ndarray]:
    """Times with a zone as UTC; (times, which could not be read, had no zone or lie outside
    the years :data:`~finbench.data.timestamps.YEARS`)."""
    out = pd.Series(pd.NaT, index=values.index, dtype="datetime64[ns, UTC]")
    bad = np.zeros(len(values), dtype=bool)
    for i, value in enumerate(values):
        try:
            stamp = pd.Timestamp(value)
        except (TypeError, ValueError):
            bad[i] = True
            continue
        if pd.isna(stamp) or stamp.tzinfo is None or not _FIRST <= stamp < _END:
            bad[i] = True
        else:
            out.iat[i] = stamp.tz_convert("UTC")
    return out, bad


def read_prices(path: str | Path, market_ids) -> pd.DataFrame:
    """Price histories of YES: a folder of ``<market id>.json`` files in the CLOB's
    ``/prices-history`` shape, or a table with ``market_id``, ``time``, ``price``. Each price
    lies in [0, 1]; each market is known; a (market, time) appears once."""
    path = Path(path)
    problems: list[str] = []
    if path.is_dir():
        frame = _clob_histories(path, problems)
    else:
        frame = read_table_file(path)
        missing = [c for c in PRICE_COLUMNS if c not in frame.columns]
        if missing:
            raise DataError(f"{path}: missing column(s) {', '.join(missing)} (a price table "
                            f"has {', '.join(PRICE_COLUMNS)})")
        frame = frame[list(PRICE_COLUMNS)].copy()
        frame["_where"] = [f"row {i + 2}" for i in range(len(frame))]
        frame["market_id"] = frame["market_id"].astype(str)
        given = frame["time"]
        frame["time"], bad = parse_instants(given)
        problems += [f"{path}: {frame['_where'].iat[i]}: time {cell(given.iat[i])}: "
                     f"{INSTANT_RULE}" for i in np.flatnonzero(bad)]
    price = pd.to_numeric(frame["price"], errors="coerce").to_numpy(float)
    where = frame["_where"].to_numpy(object)
    for i in np.flatnonzero(~((price >= 0) & (price <= 1))):
        problems.append(f"{path}: {where[i]}: price {shown(frame['price'].iat[i])}: a number "
                        "in [0, 1]")
    known = set(market_ids)
    for i in np.flatnonzero(~frame["market_id"].isin(known).to_numpy(bool)):
        problems.append(f"{path}: {where[i]}: market_id {frame['market_id'].iat[i]!r}: no "
                        "such market")
    dup = frame.duplicated(["market_id", "time"], keep=False).to_numpy(bool)
    for i in np.flatnonzero(dup):
        problems.append(f"{path}: {where[i]}: ({frame['market_id'].iat[i]}, "
                        f"{frame['time'].iat[i]}) appears twice")
    if problems:
        raise DataError(f"{path}: {len(problems)} problem(s); nothing was written",
                        problems[:MAX_PROBLEMS])
    out = frame.drop(columns="_where").assign(price=price)
    return out.sort_values(["market_id", "time"], kind="stable").reset_index(drop=True)


def _clob_histories(folder: Path, problems: list[str]) -> pd.DataFrame:
    """Every ``<market id>.json`` of ``folder`` as price rows."""
    parts = []
    for file in sorted(folder.glob("*.json")):
        try:
            points = json.loads(file.read_text(encoding=TEXT_ENCODING))["history"]
            t = np.array([p["t"] for p in points], dtype=np.int64)
            p = [p["p"] for p in points]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problems.append(f"{file}: not a /prices-history answer ({{\"history\": [{{\"t\": "
                            f"unix seconds, \"p\": price}}]}}): {exc!r}")
            continue
        parts.append(pd.DataFrame({
            "market_id": file.stem, "time": pd.to_datetime(t, unit="s", utc=True), "price": p,
            "_where": [f"point {i + 1}" for i in range(len(t))]}))
        parts[-1]["_where"] = file.name + " " + parts[-1]["_where"]
    if not parts:
        problems.append(f"{folder}: no <market id>.json price histories")
        return pd.DataFrame(columns=[*PRICE_COLUMNS, "_where"])
    return pd.concat(parts, ignore_index=True)
