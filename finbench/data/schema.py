"""Column names, vendor aliases and the validation rules of bars and headlines (docs/spec.md §2)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

import numpy as np
import pandas as pd
import pyarrow as pa

from finbench.core.names import ticker_problem
from finbench.core.times import to_ns
from finbench.data.timestamps import DIGITS_RULE, EPOCH_RULE, YEARS, ParsedTimes, parse_utc

PRICE_COLUMNS = ("open", "high", "low", "close")
BAR_ALIASES: dict[str, tuple[str, ...]] = {
    "ticker": ("ticker", "symbol", "sym"),
    "ts": ("ts", "timestamp", "time", "datetime", "date", "ts_event", "t", "window_start"),
    "open": ("open", "o"),
    "high": ("high", "h"),
    "low": ("low", "l"),
    "close": ("close", "c"),
    "volume": ("volume", "v", "vol"),
}
HEADLINE_ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id", "headline_id", "news_id"),
    "published_at": ("published_at", "published_utc", "created_at", "published", "datetime",
                     "timestamp", "time"),
    "first_seen_at": ("first_seen_at", "first_seen", "seen_at"),
    "tickers": ("tickers", "symbols", "ticker", "symbol"),
    "headline": ("headline", "title"),
    "source": ("source", "publisher", "author"),
    "body": ("body", "summary", "content", "description"),
}
HEADLINE_OPTIONAL = ("id", "first_seen_at", "body")
# descriptive fields that vendors give under several names at once (Alpaca news: source and
# author, summary and content; Massive/Polygon: publisher and author): the first of the
# accepted names that the file has is taken, in the order listed
HEADLINE_RANKED = ("source", "body")
HEADLINE_ID = "finbench-headline-id-v1"  # what a made id hashes first (docs/spec.md §2)
MAX_ROWS_NAMED = 5

BARS_SCHEMA = pa.schema(
    [
        ("ticker", pa.string()),
        ("ts", pa.timestamp("ns", tz="UTC")),
        ("open", pa.float64()),
        ("high", pa.float64()),
        ("low", pa.float64()),
        ("close", pa.float64()),
        ("volume", pa.float64()),
    ]
)
HEADLINES_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("published_at", pa.timestamp("ns", tz="UTC")),
        ("first_seen_at", pa.timestamp("ns", tz="UTC")),
        ("available_at", pa.timestamp("ns", tz="UTC")),
        ("tickers", pa.list_(pa.string())),
        ("headline", pa.string()),
        ("source", pa.string()),
        ("body", pa.string()),
    ]
)


class Problems:
    """Collects one message per broken rule, each naming the file, the rows and the rule."""

    def __init__(self, file: str, row_names=None) -> None:
        self.file = file
        self.items: list[str] = []
        # how each row is named (``row N`` by default: N from 1, the first after the header)
        self.row_names = row_names

    def add(self, rule: str, mask: np.ndarray | None = None, detail=None) -> None:
        """Record ``rule`` broken by the rows in ``mask`` (None: the file as a whole)."""
        if mask is None:
            self.items.append(f"{self.file}: rule '{rule}'")
            return
        if not np.any(mask):
            return
        rows = np.flatnonzero(mask)
        named = ", ".join(
            (f"row {r + 1}" if self.row_names is None else str(self.row_names[r]))
            + (f" ({detail(r)})" if detail else "") for r in rows[:MAX_ROWS_NAMED]
        )
        more = f" and {len(rows) - MAX_ROWS_NAMED} more" if len(rows) > MAX_ROWS_NAMED else ""
        self.items.append(
            f"{self.file}: rule '{rule}' broken in {len(rows)} row(s): {named}{more}"
        )

    def __bool__(self) -> bool:
        return bool(self.items)


def map_columns(
    columns: Sequence[str],
    aliases: dict[str, tuple[str, ...]],
    *,
    optional: Sequence[str],
    problems: Problems,
    ranked: Sequence[str] = (),
) -> dict[str, str]:
    """Map canonical names to the file's columns (case-insensitive); report missing/ambiguous.
    For the names in ``ranked``, the first accepted name the file has is taken (two columns
    of that one name are still ambiguous)."""
    lower: dict[str, list[str]] = {}
    for col in columns:
        lower.setdefault(str(col).strip().lower(), []).append(col)
    mapping: dict[str, str] = {}
    for name, names in aliases.items():
        found = [c for alias in names for c in lower.get(alias, [])]
        if name in ranked:
            found = next((lower[alias] for alias in names if alias in lower), [])
        if len(found) == 1:
            mapping[name] = found[0]
        elif len(found) > 1:
            problems.add(f"one column for {name}: several match ({', '.join(map(str, found))})")
        elif name not in optional:
            problems.add(
                f"a column for {name} is required (accepted names: {', '.join(names)}; "
                f"columns found: {', '.join(map(str, columns))})"
            )
    return mapping


def validate_bars(
    raw: pd.DataFrame,
    *,
    file: str,
    ticker: str | None,
    timezone: str | None,
    bar_timestamp: str,
    bar_seconds: int,
) -> tuple[pd.DataFrame, list[str]]:
    """Check every bar rule and return the canonical frame (sorted by ticker, ts) and problems.

    The canonical frame is only meaningful when the problem list is empty. A reader that
    reshaped its file names each row in ``raw.attrs["row_names"]``.
    """
    problems = Problems(file, raw.attrs.get("row_names"))
    if len(raw) == 0:
        problems.add("file has at least one row")
        return pd.DataFrame(), problems.items
    optional = ("ticker",) if ticker else ()
    mapping = map_columns(raw.columns, BAR_ALIASES, optional=optional, problems=problems)
    if problems:
        return pd.DataFrame(), problems.items
    out = pd.DataFrame(index=raw.index)
    if "ticker" in mapping:
        tick = raw[mapping["ticker"]].astype("string").str.strip()
        if ticker:
            problems.add(
                f"--ticker {ticker} matches the ticker column",
                (tick != ticker).fillna(True).to_numpy(bool),
                lambda r: f"ticker={shown(tick.iloc[r])}",
            )
        problems.add("ticker is not empty", (tick.isna() | (tick == "")).to_numpy(bool))
        # each distinct ticker checked once; the sorted codes also find repeated bars below
        code, names = pd.factorize(tick, sort=True)
        wrong = np.array([name != "" and ticker_problem(name) is not None for name in names],
                         dtype=bool)
        bad = (code >= 0) & wrong[np.maximum(code, 0)] if len(names) else np.zeros(len(tick), bool)
        problems.add("ticker has no whitespace, control character or '|'", bad,
                     lambda r: f"ticker={shown(tick.iloc[r])}")
        out["ticker"] = tick
    else:
        out["ticker"] = ticker
        code = np.zeros(len(raw), np.int64)
    parsed = parse_utc(raw[mapping["ts"]], timezone=timezone)
    ts_raw = raw[mapping["ts"]]  # quoted as text only in messages about bad rows

    def ts_text(r: int) -> str:
        return f"ts={str(ts_raw.iloc[r])!r}"

    time_problems(problems, "timestamp", parsed, ts_text)
    problems.add(
        "timestamp carries a zone (or pass --timezone TZ for naive timestamps)",
        parsed.naive,
        ts_text,
    )
    ts = parsed.values
    if bar_timestamp == "end":
        ts = ts - pd.Timedelta(seconds=bar_seconds)
    out["ts"] = ts
    for col in (*PRICE_COLUMNS, "volume"):
        values = _as_float(raw[mapping[col]])
        bad = ~np.isfinite(values.to_numpy())
        original = raw[mapping[col]]
        problems.add(f"{col} is a finite number", bad, lambda r, o=original: shown(o.iloc[r]))
        out[col] = values
    v = {c: out[c].to_numpy() for c in (*PRICE_COLUMNS, "volume")}
    with np.errstate(invalid="ignore"):
        # row-wise all/any as element-wise chains over the four columns (a reduction along
        # the short axis of a stacked array is several times slower)
        positive = reduce(np.logical_and, [v[c] > 0 for c in PRICE_COLUMNS])
        finite = reduce(np.logical_and, [np.isfinite(v[c]) for c in PRICE_COLUMNS])
        problems.add("prices are > 0", finite & ~positive, lambda r: _prices(v, r))
        low, high = PRICE_RANGE
        outside = finite & positive & reduce(np.logical_or, [(v[c] < low) | (v[c] > high)
                                                             for c in PRICE_COLUMNS])
        problems.add(f"prices lie in [{low:g}, {high:g}] (so that every mid and log return "
                     "is a finite number)", outside, lambda r: _prices(v, r))
        problems.add("low <= high", finite & (v["low"] > v["high"]), lambda r: _prices(v, r))
        for col in ("open", "close"):
            outside = finite & (v["low"] <= v["high"]) & ((v[col] < v["low"]) | (v[col] > v["high"]))
            problems.add(f"low <= {col} <= high", outside, lambda r: _prices(v, r))
        problems.add(
            "volume >= 0",
            np.isfinite(v["volume"]) & (v["volume"] < 0),
            lambda r: f"volume={v['volume'][r]}",
        )
    ok_ts = ~(parsed.unparseable | parsed.naive)
    if ok_ts.any():
        every = bool(ok_ts.all())
        ns = to_ns(ts if every else ts[ok_ts])
        step = bar_seconds * 1_000_000_000
        unaligned = np.zeros(len(out), bool)
        unaligned[ok_ts] = ns % step != 0
        problems.add(
            f"bar start lies on a multiple of {bar_seconds} s",
            unaligned,
            lambda r: f"start={ts.iloc[r].isoformat()}",
        )
        # in (ticker, ts) order, a repeated bar equals a neighbour
        codes = code[ok_ts]
        order = _ticker_time_order(codes, ns)
        codes, ns_sorted = (codes, ns) if order is None else (codes[order], ns[order])
        repeat = (codes[1:] == codes[:-1]) & (ns_sorted[1:] == ns_sorted[:-1])
        repeat = np.r_[False, repeat] | np.r_[repeat, False]
        dup_mask = np.zeros(len(out), bool)
        rows = np.flatnonzero(ok_ts)
        dup_mask[rows if order is None else rows[order]] = repeat
        problems.add(
            "one bar per (ticker, ts)",
            dup_mask,
            lambda r: f"{out['ticker'].iloc[r]} {ts.iloc[r].isoformat()}",
        )
    if problems:
        return pd.DataFrame(), problems.items
    # no problem means every timestamp parsed, so ``order`` (the repeat check's sort by
    # ticker then ts, stable; None: the rows were in that order) covers every row
    if order is not None:
        out = out.iloc[order]
    out = out.reset_index(drop=True)
    out["ticker"] = out["ticker"].astype(str)
    return out, []


def time_problems(problems: Problems, name: str, parsed: ParsedTimes, detail, *,
                  missing: np.ndarray | None = None) -> None:
    """The rows of ``parsed`` that could not be read, each under the rule it broke: a number
    that is no epoch count, a text of digits, any other value. ``missing``: rows named under
    a rule of their own, left out here."""
    bad = parsed.unparseable if missing is None else parsed.unparseable & ~missing
    problems.add(f"{name} given as a number: {EPOCH_RULE}", bad & parsed.numbers, detail)
    problems.add(f"{name} given as a text of digits: {DIGITS_RULE}", bad & parsed.digits,
                 detail)
    problems.add(f"{name} parses as a date-time of the years {YEARS}",
                 bad & ~parsed.numbers & ~parsed.digits, detail)


def _as_float(column: pd.Series) -> pd.Series:
    """A price or volume column as float64; what is not a number becomes NaN (reported as
    not finite by the caller). A float64 column is taken as it is."""
    if column.dtype == np.float64:
        return column
    return pd.to_numeric(column, errors="coerce").astype("float64")


def _ticker_time_order(codes: np.ndarray, ns: np.ndarray) -> np.ndarray | None:
    """The stable order of rows by (ticker code, time); None when they are in it already
    (a stored partition is): one pass over the rows instead of a sort."""
    if len(codes) < 2:
        return None
    step = np.diff(codes)
    if (step >= 0).all() and ((step > 0) | (ns[1:] >= ns[:-1])).all():
        return None
    return np.lexsort((ns, codes))


PRICE_RANGE = (1e-12, 1e12)  # any mid and any ratio of two prices is then finite


def _prices(v: dict[str, np.ndarray], r: int) -> str:
    return ", ".join(f"{c}={v[c][r]}" for c in PRICE_COLUMNS)


# what pandas infers for a column of texts or numbers alone (found in one pass, in C)
_FLAT = {"string", "integer", "floating", "mixed-integer-float", "decimal", "empty"}


def validate_headlines(
    raw: pd.DataFrame, *, file: str, timezone: str | None
) -> tuple[pd.DataFrame, list[str]]:
    """Check every headline rule and return the canonical frame and the problems."""
    problems = Problems(file)
    if len(raw) == 0:
        problems.add("file has at least one row")
        return pd.DataFrame(), problems.items
    mapping = map_columns(raw.columns, HEADLINE_ALIASES, optional=HEADLINE_OPTIONAL,
                          problems=problems, ranked=HEADLINE_RANKED)
    if problems:
        return pd.DataFrame(), problems.items
    if "source" in mapping:  # Massive/Polygon: {"name": "Benzinga", "homepage_url": ...}
        raw = raw.assign(**{mapping["source"]: raw[mapping["source"]].map(_publisher_name)})
    out = pd.DataFrame(index=raw.index)
    for col in ("id", "headline", "source", "body"):  # a list's text is not the text
        given = raw[mapping[col]] if col in mapping else None
        if given is not None and pd.api.types.infer_dtype(given, skipna=True) not in _FLAT:
            nested = given.map(lambda v: isinstance(v, list | tuple | dict | np.ndarray))
            problems.add(f"{col} is a text or a number, not a list or an object",
                         nested.to_numpy(bool),
                         lambda r, g=given, c=col: f"{c}={shown(g.iloc[r])}")
    if "id" in mapping:
        out["id"] = _headline_ids(raw[mapping["id"]], problems)
    for col, required in (("published_at", True), ("first_seen_at", False)):
        out[col] = (_headline_times(raw[mapping[col]], col, problems, timezone=timezone,
                                    required=required) if col in mapping
                    else pd.Series(pd.NaT, index=raw.index, dtype="datetime64[ns, UTC]"))
    tickers = _headline_tickers(raw[mapping["tickers"]], problems)
    out["tickers"] = tickers
    for col in ("headline", "source"):
        text = raw[mapping[col]].astype("string").str.strip()
        problems.add(f"{col} is not empty", (text.isna() | (text == "")).to_numpy(bool))
        out[col] = text
    out["body"] = raw[mapping["body"]].astype("string") if "body" in mapping else pd.NA
    if "id" not in mapping:
        out["id"] = made_ids(out)
        problems.add("one headline per id (the file has no id column: each id is made from "
                     "the headline's published_at, tickers, headline and source, so a "
                     "repeated id is the same story given twice)",
                     out["id"].duplicated(keep=False).to_numpy(bool),
                     lambda r: f"id={out['id'].iloc[r]}")
    if problems:
        return pd.DataFrame(), problems.items
    seen = out["first_seen_at"].fillna(out["published_at"])
    out["available_at"] = np.maximum(out["published_at"], seen)
    out = out.sort_values(["available_at", "id"], kind="stable").reset_index(drop=True)
    out = out[list(HEADLINES_SCHEMA.names)]
    out.attrs["ids_made"] = "id" not in mapping
    return out, []


def _headline_times(column: pd.Series, col: str, problems: Problems, *, timezone: str | None,
                    required: bool) -> pd.Series:
    """A file's times of one kind (``col``) in UTC, broken rules to ``problems``."""
    parsed = parse_utc(column, timezone=timezone)
    missing = column.isna().to_numpy()
    if required:
        problems.add(f"{col} is present", missing)
    time_problems(problems, col, parsed, lambda r: shown(column.iloc[r]), missing=missing)
    problems.add(f"{col} carries a zone (or pass --timezone TZ for naive timestamps)",
                 parsed.naive, lambda r: shown(column.iloc[r]))
    return parsed.values


def _headline_ids(given: pd.Series, problems: Problems) -> pd.Series:
    """A file's ids as text, each present and given once (broken rules to ``problems``)."""
    ids = given.astype("string").str.strip()
    problems.add("id is not empty", (ids.isna() | (ids == "")).to_numpy(bool))
    problems.add(
        "one headline per id",
        ids.duplicated(keep=False).fillna(False).to_numpy(bool) & ids.notna().to_numpy(bool),
        lambda r: f"id={ids.iloc[r]}",
    )
    return ids


def _headline_tickers(given: pd.Series, problems: Problems) -> pd.Series:
    """Each headline's tickers as a list of symbols (from a list of texts, or a ``;``- or
    ``,``-joined text), every broken rule added to ``problems``."""
    shape = given.map(lambda v: isinstance(v, str | list | tuple | np.ndarray)
                      or v is None or (isinstance(v, float) and np.isnan(v)))
    problems.add("tickers is a list of symbols or a ';'-joined text", ~shape.to_numpy(bool),
                 lambda r: f"tickers={shown(given.iloc[r])}")
    # a list's entries are texts: a null in it (``[null]``) is no symbol, nor is a number
    untexted = shape.to_numpy(bool) & given.map(
        lambda v: isinstance(v, list | tuple | np.ndarray)
        and not all(isinstance(t, str) for t in v)).to_numpy(bool)
    problems.add("tickers lists texts (a null or a number in the list is no symbol)", untexted,
                 lambda r: f"tickers={shown(given.iloc[r])}")
    tickers = given.where(shape & ~untexted, None).map(_ticker_list)
    problems.add("tickers lists at least one symbol",
                 shape.to_numpy(bool) & ~untexted & (tickers.map(len) == 0).to_numpy(bool))
    problems.add("every ticker has no whitespace, control character or '|'",
                 tickers.map(lambda ts: any(ticker_problem(t) for t in ts)).to_numpy(bool),
                 lambda r: f"tickers={shown(tickers.iloc[r])}")
    # listed twice, the headline would stand twice in that ticker's context
    problems.add("tickers lists each symbol once",
                 tickers.map(lambda ts: len(set(ts)) < len(ts)).to_numpy(bool),
                 lambda r: f"tickers={shown(tickers.iloc[r])}")
    return tickers


def _publisher_name(value):
    """A publisher object's ``name`` (Massive/Polygon news); any other value as it is."""
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        return value["name"]
    return value


def made_ids(headlines: pd.DataFrame) -> pd.Series:
    """Ids for headlines whose file gives none: the SHA-256 (first 20 hex digits) of
    ``finbench-headline-id-v1``, the UTC ``published_at`` in nanoseconds, the tickers joined by
    ``,``, the headline and the source, joined by the unit separator (0x1f). The same row
    in any file, order or run gets the same id.

    >>> frame = pd.DataFrame({"published_at": [pd.Timestamp("2025-01-15 14:00", tz="UTC")],
    ...                       "tickers": [["AAPL"]], "headline": ["Up"], "source": ["s"]})
    >>> made_ids(frame).tolist()
    ['h-09597a0363bc78a78a00']
    """
    import hashlib

    stamps = to_ns(headlines["published_at"])
    return pd.Series([
        "h-" + hashlib.sha256("\x1f".join(
            (HEADLINE_ID, str(int(t)), ",".join(tickers), str(headline), str(source))
        ).encode()).hexdigest()[:20]
        for t, tickers, headline, source in zip(
            stamps, headlines["tickers"], headlines["headline"], headlines["source"],
            strict=True)], index=headlines.index, dtype="string")


def shown(value) -> str:
    """A value as the file gave it: a numpy scalar as the plain number or flag it holds
    (``1.5``, not ``np.float64(1.5)``)."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def cell(value) -> str:
    """A cell as a message shows it: :func:`shown`, or ``(empty)`` for a missing one (not
    ``nan``, which the file did not hold)."""
    if value is None or value is pd.NA or value is pd.NaT or (
            isinstance(value, float | np.floating) and np.isnan(value)) or value == "":
        return "(empty)"
    return shown(value)


def _ticker_list(value) -> list[str]:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            text = text.strip("[]").replace("'", "").replace('"', "")
            parts = text.split(",")
        else:
            parts = text.replace(",", ";").split(";")
    else:
        parts = list(value)
    return [str(p).strip() for p in parts if str(p).strip()]
