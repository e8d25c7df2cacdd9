"""Markets and their price histories read from Polymarket's public JSON shapes or a plain
table (CSV, Parquet, JSON lines), checked against the rules of docs/spec.md §11.1. Every
broken rule is named with its file, row (or market) and field; nothing is dropped or filled
silently.

Polymarket shapes: the Gamma API's market objects (a JSON array, as ``/markets`` returns, or
one object a line) and its event objects (``/events``: each holding its ``markets``, the event
being their group), whose ``outcomes``, ``outcomePrices``, ``clobTokenIds`` are JSON text. A
market resolves YES when its final ``outcomePrices`` are 1/0 (each within
:data:`RESOLVED_TOLERANCE`: a dump holds 0.9999996/0.0000004), NO at 0/1, and *void*
(cancelled, annulled) at 0.5/0.5. A dump also holds markets no binary question can be asked
of (still open, Over/Under or team names as outcomes, closed at prices that are no
resolution): they are skipped and counted by reason, or refused with
``unusable="refuse"``. Price histories in the CLOB's ``/prices-history`` shape
(``{"history": [{"t": epoch, "p": price}]}``, ``t`` in seconds or milliseconds, read from its
magnitude), one file per market named ``<market id>.json`` or ``<YES token id>.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from finbench.core.errors import DataError
from finbench.data.schema import cell, shown
from finbench.data.timestamps import END, EPOCH_RULE, FIRST, YEARS, parse_utc
from finbench.data.user_files import TEXT_ENCODING, read_table_file

MARKET_COLUMNS = ("market_id", "question", "description", "category", "event_group",
                  "opened_at", "closes_at", "resolved_at", "outcome")
TIME_FIELDS = ("opened_at", "closes_at", "resolved_at")
OUTCOMES = ("YES", "NO", "void")
PRICE_COLUMNS = ("market_id", "time", "price")
MAX_PROBLEMS = 50


RESOLVED_TOLERANCE = 1e-6  # a final price this close to 0, 1 or 0.5 is that price
UNUSABLE = ("skip", "refuse")
SKIP_REASONS = ("open", "not_binary", "unresolved")  # why a dump's market is no task


@dataclass
class Markets:
    """Markets read from a file: the valid ones, what was skipped by reason, and the CLOB
    token ids of each market's two outcomes (``token -> (market id, outcome)``)."""

    frame: pd.DataFrame
    skipped: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, tuple[str, str]] = field(default_factory=dict)


def read_markets(path: str | Path, *, default_category: str | None = None,
                 unusable: str = "skip") -> Markets:
    """Markets from ``path`` (Polymarket Gamma JSON, markets or events, or a plain table),
    validated. ``unusable``: what becomes of a Gamma market no binary question can be asked
    of (:data:`SKIP_REASONS`): ``"skip"`` (counted by reason) or ``"refuse"`` (a broken
    rule)."""
    if unusable not in UNUSABLE:
        raise DataError(f"unusable markets: {unusable!r} is not one of {', '.join(UNUSABLE)}")
    path = Path(path)
    read = Markets(pd.DataFrame())
    if path.suffix.lower() == ".json":
        frame, problems = _gamma_markets(path, default_category, unusable, read)
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
    for name in TIME_FIELDS:  # (stored to the microsecond, as pandas reads such text)
        out[name] = parse_instants(out[name])[0].astype("datetime64[us, UTC]")
    read.frame = out.sort_values("market_id", kind="stable").reset_index(drop=True)
    return read


def _gamma_objects(path: Path) -> list:
    """The objects of a Gamma JSON file: markets, or the markets of events (an event's
    markets carry it as their only event, so it is their group)."""
    try:
        text = path.read_text(encoding=TEXT_ENCODING)
        objects = json.loads(text) if text.lstrip().startswith("[") else [
            json.loads(line) for line in text.splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: cannot be read as Polymarket market JSON ({exc})") from exc
    if not isinstance(objects, list):
        raise DataError(f"{path}: a Gamma file is an array of markets or events")
    out = []
    for obj in objects:
        if isinstance(obj, dict) and isinstance(obj.get("markets"), list) and (
                "outcomes" not in obj):
            event = {k: v for k, v in obj.items() if k != "markets"}
            out += [{**m, "events": [event]} if isinstance(m, dict) else m
                    for m in obj["markets"]]
        else:
            out.append(obj)
    return out


def _gamma_markets(path: Path, default_category: str | None, unusable: str, read: Markets
                   ) -> tuple[pd.DataFrame, list[str]]:
    """Gamma market objects turned into market rows, with the problems of each; markets no
    binary question can be asked of skipped into ``read.skipped`` (or, refused, problems)."""
    rows, problems = [], []
    for number, obj in enumerate(_gamma_objects(path), 1):
        where = f"market {number} (id {obj.get('id', '?')})" if isinstance(obj, dict) else (
            f"market {number}")
        if not isinstance(obj, dict):
            problems.append(f"{path}: {where}: not a JSON object")
            continue
        reason, why = _unusable(obj)
        if reason and unusable == "skip":
            read.skipped[reason] = read.skipped.get(reason, 0) + 1
            continue
        row, more = _gamma_row(obj, default_category)
        problems += [f"{path}: {where}: {w}" for w in ([why] if reason else []) + more]
        read.tokens.update(_tokens(obj))
        # fields whose problem is named above: check_markets does not name them again
        named = {f for f, gone in (("outcome", row["outcome"] is None),
                                   ("category", not row["category"])) if gone}
        rows.append({**row, "_where": where, "_named": named})
    return pd.DataFrame(rows, columns=[*MARKET_COLUMNS, "_where", "_named"]), problems


def _outcomes(obj: dict) -> tuple[list[str], list[float]]:
    try:
        outcomes = [str(o).lower() for o in json.loads(obj.get("outcomes") or "null")]
        prices = [float(p) for p in json.loads(obj.get("outcomePrices") or "null")]
    except (TypeError, ValueError):
        return [], []
    return outcomes, prices


def _unusable(obj: dict) -> tuple[str | None, str]:
    """Why no binary question can be asked of a Gamma market (a :data:`SKIP_REASONS` entry
    and the rule in words), or (None, "")."""
    outcomes, prices = _outcomes(obj)
    if outcomes != ["yes", "no"] or len(prices) != 2:
        return "not_binary", (f"outcomes {obj.get('outcomes')!r} / outcomePrices "
                              f"{obj.get('outcomePrices')!r}: not a binary Yes/No market")
    if obj.get("closed") is not True:
        return "open", "closed is not true: the market is not resolved"
    if _resolution(prices) is None:
        return "unresolved", (f"outcomePrices {prices}: not a resolution (1/0 YES, 0/1 NO, "
                              f"0.5/0.5 void, each within {RESOLVED_TOLERANCE:g})")
    return None, ""


def _resolution(prices: list[float]) -> str | None:
    for outcome, (yes, no) in (("YES", (1.0, 0.0)), ("NO", (0.0, 1.0)), ("void", (0.5, 0.5))):
        if abs(prices[0] - yes) <= RESOLVED_TOLERANCE and abs(prices[1] - no) <= (
                RESOLVED_TOLERANCE):
            return outcome
    return None


def _tokens(obj: dict) -> dict[str, tuple[str, str]]:
    """The market's CLOB token ids (``clobTokenIds``, in the order of its outcomes)."""
    try:
        tokens = json.loads(obj.get("clobTokenIds") or "null")
    except (TypeError, ValueError):
        return {}
    outcomes, _ = _outcomes(obj)
    if not isinstance(tokens, list) or len(tokens) != len(outcomes):
        return {}
    return {str(t): (str(obj.get("id", "")), o.upper()) for t, o in zip(tokens, outcomes,
                                                                        strict=True)}


def _gamma_row(obj: dict, default_category: str | None) -> tuple[dict, list[str]]:
    """One Gamma market as a market row; the outcome read from its final prices."""
    why = []
    outcomes, prices = _outcomes(obj)
    usable = outcomes == ["yes", "no"] and len(prices) == 2 and obj.get("closed") is True
    outcome = _resolution(prices) if usable else None
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


# a text that is plainly an ISO 8601 date-time with a zone (Z or an offset): read a column at a
# time; any other value is read on its own (pd.Timestamp), as every value once was
_ISO_WITH_ZONE = (r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?"
                  r"(?:Z|[+-]\d{2}:?\d{2})$")


def parse_instants(values: pd.Series) -> tuple[pd.Series, np.ndarray]:
    """Times with a zone as UTC; (times, which could not be read, had no zone or lie outside
    the years :data:`~finbench.data.timestamps.YEARS`). Texts in ISO 8601 with a zone are
    read together; anything else one by one (:func:`parse_instant`)."""
    out = pd.Series(pd.NaT, index=values.index, dtype="datetime64[ns, UTC]")
    bad = np.zeros(len(values), dtype=bool)
    text = values.astype(object).where(values.map(type).eq(str).to_numpy(bool), None)
    iso = np.array(text.str.fullmatch(_ISO_WITH_ZONE).fillna(False), dtype=bool)
    if iso.any():
        read = pd.to_datetime(text[iso], format="ISO8601", utc=True, errors="coerce")
        ok = (read.notna() & (read >= _FIRST) & (read < _END)).to_numpy(bool)
        at = np.flatnonzero(iso)
        out.iloc[at[ok]] = read[ok].to_numpy()
        iso[at[~ok]] = False  # read one by one below: the same rule names them
    for i in np.flatnonzero(~iso):
        out.iat[i], bad[i] = parse_instant(values.iat[i])
    return out, bad


def parse_instant(value) -> tuple[pd.Timestamp, bool]:
    """One time with a zone as UTC, and whether it could not be read (no zone, or outside
    the years :data:`~finbench.data.timestamps.YEARS`)."""
    try:
        stamp = pd.Timestamp(value)
    except (TypeError, ValueError):
        return pd.NaT, True
    if pd.isna(stamp) or stamp.tzinfo is None or not _FIRST <= stamp < _END:
        return pd.NaT, True
    return stamp.tz_convert("UTC"), False


def read_prices(path: str | Path, market_ids, *, tokens: dict[str, tuple[str, str]] | None = None
                ) -> tuple[pd.DataFrame, list[str]]:
    """Price histories of YES: a folder of ``<market id>.json`` (or ``<YES token id>.json``,
    mapped through ``tokens``, a :class:`Markets`' token ids) files in the CLOB's
    ``/prices-history`` shape, or a table with ``market_id``, ``time``, ``price``. Each price
    lies in [0, 1]; each market is known; a (market, time) appears once. Returns the prices
    and the files holding an empty history (the CLOB's answer for a market without trades)."""
    path = Path(path)
    problems: list[str] = []
    empty: list[str] = []
    if path.is_dir():
        frame = _clob_histories(path, problems, set(map(str, market_ids)), tokens or {},
                                empty)
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
    known = set(map(str, market_ids))
    for i in np.flatnonzero(~frame["market_id"].isin(known).to_numpy(bool)):
        problems.append(f"{path}: {where[i]}: market_id {frame['market_id'].iat[i]!r}: no "
                        "such market")
    dup = frame.duplicated(["market_id", "time"], keep=False).to_numpy(bool) & (
        frame["time"].notna().to_numpy(bool))
    for i in np.flatnonzero(dup):
        problems.append(f"{path}: {where[i]}: ({frame['market_id'].iat[i]}, "
                        f"{frame['time'].iat[i]}) appears twice")
    if problems:
        raise DataError(f"{path}: {len(problems)} problem(s); nothing was written",
                        problems[:MAX_PROBLEMS])
    out = frame.drop(columns="_where").assign(price=price)
    return out.sort_values(["market_id", "time"], kind="stable").reset_index(drop=True), empty


CLOB_SHAPE = '{"history": [{"t": epoch seconds or milliseconds, "p": price}]}'


def _clob_histories(folder: Path, problems: list[str], markets: set[str],
                    tokens: dict[str, tuple[str, str]], empty: list[str]) -> pd.DataFrame:
    """Every ``<market id or YES token id>.json`` of ``folder`` as price rows; the files
    holding an empty history give none and are listed in ``empty``."""
    parts = []
    for file in sorted(folder.glob("*.json")):
        market = _market_of(file, markets, tokens, problems)
        points = _history(file, problems)
        if points is not None and not len(points):
            empty.append(file.name)
        if market is None or points is None or not len(points):
            continue
        times = parse_utc(pd.Series([p["t"] for p in points]), timezone=None)
        for i in np.flatnonzero(times.unparseable | ~times.numbers):
            problems.append(f"{file.name} point {i + 1}: t {points[i]['t']!r}: {EPOCH_RULE}")
        parts.append(pd.DataFrame({
            "market_id": market, "time": times.values.astype("datetime64[us, UTC]"),
            "price": [p["p"] for p in points],
            "_where": [f"{file.name} point {i + 1}" for i in range(len(points))]}))
    if not parts and not problems:
        problems.append(f"{folder}: no price history with a point in it (files "
                        f"<market id>.json or <YES token id>.json, each {CLOB_SHAPE})")
    return (pd.concat(parts, ignore_index=True) if parts
            else pd.DataFrame(columns=[*PRICE_COLUMNS, "_where"]))


def _market_of(file: Path, markets: set[str], tokens: dict[str, tuple[str, str]],
               problems: list[str]) -> str | None:
    """The market a history file prices: its name is a market id or the market's YES token
    id; a NO token's history (the complement) is refused, naming its market."""
    name = file.stem
    if name in markets or name not in tokens:
        return name  # an unknown one is named by the rules that follow
    market, outcome = tokens[name]
    if outcome != "YES":
        problems.append(f"{file.name}: the CLOB token of market {market}'s {outcome} outcome; "
                        f"FinBench reads the YES token's prices (the other token of the market)")
        return None
    return market


def _history(file: Path, problems: list[str]) -> list[dict] | None:
    """The points of a ``/prices-history`` answer (each an object with ``t`` and ``p``), or
    None with what is wrong in ``problems``."""
    try:
        answer = json.loads(file.read_text(encoding=TEXT_ENCODING))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        problems.append(f"{file.name}: not JSON ({exc}); a /prices-history answer is "
                        f"{CLOB_SHAPE}")
        return None
    points = answer.get("history") if isinstance(answer, dict) else None
    if not isinstance(points, list):
        problems.append(f"{file.name}: no history list; a /prices-history answer is "
                        f"{CLOB_SHAPE}")
        return None
    bad = [i for i, p in enumerate(points, 1)
           if not (isinstance(p, dict) and "t" in p and "p" in p)]
    if bad:
        problems.append(f"{file.name} point {bad[0]}: not an object with t and p "
                        f"({len(bad)} point(s)); a /prices-history answer is {CLOB_SHAPE}")
        return None
    return points
