"""Parse user timestamps into UTC once, at the edge, and say which rows could not be parsed."""

from __future__ import annotations

import numpy as np
import pandas as pd

_AWARE_SUFFIX = r"(?:Z|z|UTC|[+-]\d{2}(?::?\d{2})?)$"
# Epoch numbers: the unit is read from the magnitude (1e9 s, 1e12 ms, 1e15 us, 1e18 ns: 2001-2261).
_EPOCH_UNITS = ((1e9, 1e10, "s"), (1e12, 1e13, "ms"), (1e15, 1e16, "us"), (1e18, 1e19, "ns"))
_NS_PER = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
# Instants are int64 nanoseconds (finbench.core.times): they hold 1677-09-21 to 2262-04-11;
# a timestamp is read in the whole years inside that span, so a local time localised to UTC
# never falls off either end
FIRST, END = pd.Timestamp("1678-01-01"), pd.Timestamp("2262-01-01")
YEARS = f"{FIRST.year}-{END.year - 1}"
_LAST_NS = float(END.value)  # epoch numbers are read below this


class ParsedTimes:
    """UTC timestamps plus masks of rows that broke a parsing rule. ``numbers``: the rows given
    as numbers (epoch counts); ``digits``: the unparseable rows given as a text of digits (an
    epoch count written as text, which is read as a date-time, never as a number)."""

    def __init__(self, values: pd.Series, unparseable: np.ndarray, naive: np.ndarray, *,
                 numbers: np.ndarray | None = None) -> None:
        self.values = values.astype("datetime64[ns, UTC]")
        self.unparseable = unparseable
        self.naive = naive
        self.numbers = np.zeros(len(values), bool) if numbers is None else numbers
        self.digits = np.zeros(len(values), bool)


EPOCH_RULE = ("a number is a Unix epoch count: seconds from 1e9, milliseconds from 1e12, "
              "microseconds from 1e15, nanoseconds from 1e18 (each from 2001), before 2262")
DIGITS_RULE = ("a text is a date-time (ISO 8601, e.g. 2025-01-15T14:30:00Z), and digits alone "
               "are none: an epoch count is given as a number (a JSON number, a Parquet "
               "integer)")
_DIGITS = r"^[+-]?\d+(?:\.\d*)?$"


def parse_utc(raw: pd.Series, *, timezone: str | None) -> ParsedTimes:
    """Turn a column of timestamps (text, datetime64, or epoch numbers) into UTC.

    Naive values are localised with ``timezone`` when it is given and flagged otherwise;
    aware values are converted to UTC whatever ``timezone`` says. A column of several kinds
    (JSON lines giving some times as numbers, others as text) is read row by row by kind:
    numbers as epoch counts, texts as date-times, anything else (a flag, a list) flagged.
    Nothing is guessed: a value that does not parse, or lies outside the years
    :data:`YEARS`, is flagged, never dropped.
    """
    missing = raw.isna().to_numpy()
    if isinstance(raw.dtype, pd.DatetimeTZDtype):
        far = outside_years(raw)
        return ParsedTimes(raw.where(~far).dt.tz_convert("UTC"), missing | far,
                           np.zeros(len(raw), bool))
    if pd.api.types.is_datetime64_dtype(raw.dtype):
        far = outside_years(raw)
        return _localise(raw.where(~far), missing | far, missing | far, timezone)
    if pd.api.types.is_bool_dtype(raw.dtype):  # flags are no times
        return ParsedTimes(pd.Series(pd.NaT, index=raw.index), np.ones(len(raw), bool),
                           np.zeros(len(raw), bool))
    if pd.api.types.is_integer_dtype(raw.dtype) or pd.api.types.is_float_dtype(raw.dtype):
        return _from_epoch(raw, missing)
    if raw.dtype != object or pd.api.types.infer_dtype(raw, skipna=True) in ("string",
                                                                              "empty"):
        return _from_text(raw, missing, timezone)  # texts alone (a CSV's): no number among them
    numbers = np.fromiter((isinstance(v, int | float | np.integer | np.floating)
                           and not isinstance(v, bool | np.bool_) for v in raw),
                          dtype=bool, count=len(raw)) & ~missing
    if not numbers.any():
        return _from_text(raw, missing, timezone)
    texts = _from_text(raw[~numbers], missing[~numbers], timezone)
    given = raw[numbers].tolist()
    column = (pd.Series(given, dtype="float64") if any(isinstance(v, float | np.floating)
                                                        for v in given)
              else _integers(given))
    epochs = _from_epoch(column, np.zeros(len(column), bool))
    ns = np.empty(len(raw), np.int64)  # both parts as nanoseconds (NaT: the missing value)
    ns[~numbers] = texts.values.to_numpy("datetime64[ns]").astype(np.int64)
    ns[numbers] = epochs.values.to_numpy("datetime64[ns]").astype(np.int64)
    values = pd.Series(pd.to_datetime(ns.view("datetime64[ns]")).tz_localize("UTC"),
                       index=raw.index)
    unparseable, naive = np.zeros(len(raw), bool), np.zeros(len(raw), bool)
    unparseable[~numbers], unparseable[numbers] = texts.unparseable, epochs.unparseable
    naive[~numbers] = texts.naive
    out = ParsedTimes(values, unparseable, naive, numbers=numbers)
    out.digits[~numbers] = texts.digits
    return out


def _integers(values: list) -> pd.Series:
    """Whole numbers as int64, those past its range as a float (flagged: past 2261 in any
    unit)."""
    if all(-2**63 <= v < 2**63 for v in values):
        return pd.Series(values, dtype="int64")
    return pd.Series([float(v) for v in values], dtype="float64")


def _from_text(raw: pd.Series, missing: np.ndarray, timezone: str | None) -> ParsedTimes:
    """Texts of date-times (naive ones localised with ``timezone``, flagged without one)."""
    n = len(raw)
    text = raw.astype("string").str.strip()
    aware = text.str.contains(_AWARE_SUFFIX, regex=True).fillna(False).to_numpy(bool)
    out = pd.Series(pd.NaT, index=raw.index, dtype="datetime64[ns, UTC]")
    bad = missing.copy()
    if aware.any():
        parsed = pd.to_datetime(text[aware], format="ISO8601", utc=True, errors="coerce")
        parsed = parsed.where(~outside_years(parsed))
        out[aware] = parsed
        bad[aware] |= parsed.isna().to_numpy()
    naive_rows = ~aware & ~missing
    naive_flag = np.zeros(n, bool)
    if naive_rows.any():
        parsed = pd.to_datetime(text[naive_rows], format="ISO8601", errors="coerce")
        parsed = parsed.where(~outside_years(parsed))
        bad[naive_rows] |= parsed.isna().to_numpy()
        sub = _localise(parsed, parsed.isna().to_numpy(), parsed.isna().to_numpy(), timezone)
        out[naive_rows] = sub.values
        bad[naive_rows] |= sub.unparseable
        naive_flag[naive_rows] = sub.naive
    result = ParsedTimes(out, bad, naive_flag & ~bad)
    result.digits = bad & ~missing & text.str.fullmatch(_DIGITS).fillna(False).to_numpy(bool)
    return result


def outside_years(times: pd.Series) -> np.ndarray:
    """Which of ``times`` (any unit, with a zone or without) lie outside the years
    :data:`YEARS`, where int64 nanoseconds cannot hold them (a missing time is not)."""
    first, end = (FIRST, END) if times.dt.tz is None else (FIRST.tz_localize("UTC"),
                                                           END.tz_localize("UTC"))
    return ((times < first) | (times >= end)).to_numpy(bool)


def _localise(
    values: pd.Series, missing: np.ndarray, bad: np.ndarray, timezone: str | None
) -> ParsedTimes:
    n = len(values)
    if timezone is None:
        out = pd.Series(pd.NaT, index=values.index, dtype="datetime64[ns, UTC]")
        return ParsedTimes(out, bad, ~missing)
    naive = pd.to_datetime(values)
    local = naive.dt.tz_localize(timezone, ambiguous="NaT", nonexistent="NaT")
    unresolved = local.isna().to_numpy() & ~missing
    return ParsedTimes(local.dt.tz_convert("UTC"), bad | unresolved, np.zeros(n, bool))


def _from_epoch(raw: pd.Series, missing: np.ndarray) -> ParsedTimes:
    """Epoch numbers as UTC, the unit read from the magnitude (:data:`_EPOCH_UNITS`).
    Integers are exact. A float (a JSON number with a fraction, or a column holding a gap) is
    rounded up to the next microsecond: it holds an instant of 2025 to about 0.25 us, so a
    number written to the microsecond (or coarser) is never read as an earlier instant, and
    a headline never becomes available before the instant its number gives. Numbers below
    1e9 (zero and negative among them), between the units' bands, or past 2261 are flagged."""
    values = raw.to_numpy(dtype="float64", na_value=np.nan)
    exact = pd.api.types.is_integer_dtype(raw.dtype)
    # an integer's band by integer comparison: as a float, one just below a band's end (such
    # as 999_999_999_999_999_936, between the microsecond and nanosecond bands) rounds onto it
    whole_numbers = raw.to_numpy(np.int64, na_value=0) if exact else None
    ns = np.zeros(len(raw), np.int64)
    matched = np.zeros(len(raw), bool)
    for low, high, unit in _EPOCH_UNITS:
        rows = ((whole_numbers >= int(low)) & (whole_numbers < int(high)) if exact
                else (values >= low) & (values < high))
        if not rows.any():
            continue
        scale = _NS_PER[unit]
        whole = np.floor(values[rows])
        fits = whole < _LAST_NS / scale
        count = np.where(fits, raw[rows].to_numpy(np.int64) if exact else whole, 0).astype(
            np.int64)
        if exact:
            ns[rows] = count * scale
        elif scale == 1:  # the count itself is the float's nanoseconds: up to a microsecond
            ns[rows] = -(-count // 1000) * 1000
        else:
            part = np.ceil((values[rows] - whole) * (scale / 1000)).astype(np.int64) * 1000
            ns[rows] = count * scale + part
        matched[rows] = fits
    out = pd.Series(pd.to_datetime(np.where(matched, ns, 0), unit="ns", utc=True),
                    index=raw.index).where(matched)
    return ParsedTimes(out, missing | ~matched, np.zeros(len(raw), bool), numbers=~missing)
