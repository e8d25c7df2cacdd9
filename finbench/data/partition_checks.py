"""The rules a stored bar partition keeps (``finbench data validate``, the audit): the ingest
rules, its rows in (ticker, ts) order, every bar on the partition's date.

The rules are the ingest's own (:func:`~finbench.data.schema.validate_bars`), applied to a
whole frame at a time, whose fixed cost is many times that of a small partition's rows (a
partition of 1,500 bars: about 4 ms of the 6 it takes). So small partitions next to each
other are checked together, as one frame of up to :data:`BATCH_ROWS` rows: when that frame
keeps every rule, so does each partition in it (each rule holds row by row, or for a subset of
rows: a repeated bar in one partition is repeated in the frame). When the frame breaks any,
each of its partitions is checked alone, so the problems found and their wording are those of
a check one partition at a time, always.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

SMALL_PIECE = 1 << 14  # rows: pieces smaller on average are joined before their prices' check
BATCH_ROWS = 1 << 16  # partitions with fewer rows are checked together, this many rows at once


def chunk_problems(items: Iterable[tuple[dt.date, str]], read: Callable[[str], pa.Table], *,
                   timezone: str, bar_seconds: int, damaged: Callable[[str], bool] = lambda rel: False,
                   batch_rows: int = BATCH_ROWS) -> list[str]:
    """The problems of consecutive bar partitions ``(day, rel)``, in their order. ``read(rel)``
    reads one (raising ArrowInvalid or OSError when it cannot); ``damaged(rel)``, asked when
    that read failed: its hash is reported already, so a file that cannot be read is not
    named again. Partitions are checked together while they hold at most ``batch_rows``
    rows."""
    problems: list[str] = []
    group: list[tuple[dt.date, str, pa.Table]] = []

    def check_group() -> None:
        problems.extend(group_problems(group, timezone=timezone, bar_seconds=bar_seconds))
        group.clear()

    for day, rel in items:
        try:
            table = read(rel)
        except (pa.ArrowInvalid, OSError) as exc:
            check_group()
            if not damaged(rel):
                problems.append(f"{rel}: not a readable Parquet file ({exc})")
            continue
        if group and sum(t.num_rows for *_, t in group) + table.num_rows > batch_rows:
            check_group()
        group.append((day, rel, table))
    check_group()
    return problems


def group_problems(group: list[tuple[dt.date, str, pa.Table]], *, timezone: str,
                   bar_seconds: int) -> list[str]:
    """The problems of partitions ``(day, rel, table)``: checked as one frame when they can
    be (more than one, every one holding rows, all of one schema) and that frame keeps
    every rule; else each alone (:func:`bar_problems`)."""
    if _clean(group, timezone=timezone, bar_seconds=bar_seconds):
        return []
    group = [(day, rel, plain_tickers(table)) for day, rel, table in group]
    if len(group) > 1 and all(t.num_rows for *_, t in group) and all(
            t.schema.equals(group[0][2].schema) for *_, t in group):
        tables = [t for *_, t in group]
        frame = pa.concat_tables(tables).to_pandas()
        lengths = np.array([t.num_rows for t in tables], np.int64)
        days = np.repeat(np.array([day for day, *_ in group], "datetime64[D]"), lengths)
        starts = np.cumsum(lengths)[:-1]  # the first row of every partition but the first
        if (not _layout_problems(frame, "batch")
                and not _rule_problems(frame, "batch", bar_seconds)
                and _sorted_by_ticker_ts(frame, starts)
                and not len(_off_date(frame, days, timezone))):
            return []
    return [p for day, rel, table in group
            for p in bar_problems(table.to_pandas(), day, rel, timezone=timezone,
                                  bar_seconds=bar_seconds)]


def _clean(group: list[tuple[dt.date, str, pa.Table]], *, timezone: str,
           bar_seconds: int) -> bool:
    """Whether partitions laid out as the store writes them (:data:`BARS_SCHEMA`) keep every
    rule, decided on their Arrow columns with no frame made: True only when each rule the
    ingest's check (:func:`bar_problems`) applies holds, and stricter where that is cheaper
    (no text is stripped: a ticker with a space around it is sent to the full check, which
    names it). False sends the partitions to the full check, which finds and words what
    they break; so the problems found are the full check's, always."""
    from finbench.core.names import ticker_problem
    from finbench.data.schema import BARS_SCHEMA
    from finbench.data.timestamps import END, FIRST

    tables = [t for *_, t in group]
    if not tables or not all(t.num_rows and _plain_schema(t.schema).equals(BARS_SCHEMA)
                             for t in tables):
        return False
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    if any(table.column(name).null_count for name in table.column_names):
        return False
    ticker = table.column("ticker")
    names = (_dictionary_values(ticker) if pa.types.is_dictionary(ticker.type)
             else pc.unique(ticker))
    if any(ticker_problem(name) is not None for name in names.to_pylist()):
        return False  # (a dictionary's every text: none unused in a file the store wrote)
    if not _prices_keep_rules(table, len(tables)):
        return False
    ts = table.column("ts").to_numpy().view(np.int64)
    first, end = FIRST.tz_localize("UTC").value, END.tz_localize("UTC").value
    if not (ts.min() >= first and ts.max() < end) or (ts % (bar_seconds * 1_000_000_000)).any():
        return False
    lengths = np.array([t.num_rows for t in tables], np.int64)
    # (ticker, ts) strictly increasing inside each partition: sorted, and no bar repeated
    if not _sorted_by_ticker_ts(table, np.cumsum(lengths)[:-1], strict=True, ts=ts):
        return False
    days = np.array([day for day, *_ in group], "datetime64[D]")  # distinct: one a partition
    lo, hi, steady = _date_bounds(days, timezone)
    if not steady.all():  # near a change of offset: each start converted (:func:`_off_date`)
        frame = pd.DataFrame({"ts": pd.DatetimeIndex(ts, tz="UTC")})
        return not len(_off_date(frame, np.repeat(days, lengths), timezone))
    if len(tables) == 1:  # one partition: its bounds
        return bool(ts.min() >= lo[0] and ts.max() < hi[0])
    return bool(((ts >= np.repeat(lo, lengths)) & (ts < np.repeat(hi, lengths))).all())


def _prices_keep_rules(table: pa.Table, pieces: int) -> bool:
    """Whether the bars of ``table`` (no null among them; ``pieces`` partitions or days
    joined) keep the price and volume rules."""
    from finbench.data.schema import PRICE_COLUMNS, PRICE_RANGE

    low, high = PRICE_RANGE
    # a record batch at a time: each column's numbers as they lie in Arrow's buffers (no null
    # among them), where the whole column would be copied into one array first; pieces of
    # fewer than SMALL_PIECE rows on average (a ticker file's days) are joined first, as
    # each batch's checks cost more than its copy
    prices = table.select([*PRICE_COLUMNS, "volume"])
    if prices.num_rows < SMALL_PIECE * pieces:
        prices = prices.combine_chunks()
    for batch in prices.to_batches():
        v = {name: batch.column(name).to_numpy() for name in batch.schema.names}
        with np.errstate(invalid="ignore"):
            # (a NaN is the least and the greatest of its column here, and fails every
            # comparison; an infinite price lies outside the range, an infinite volume is not
            # finite)
            if not all(low <= v[c].min() and v[c].max() <= high for c in PRICE_COLUMNS):
                return False
            prices_ok = v["low"] <= v["high"]
            for col in ("open", "close"):
                prices_ok &= (v["low"] <= v[col]) & (v[col] <= v["high"])
            if not (prices_ok.all() and v["volume"].min() >= 0
                    and np.isfinite(v["volume"].max())):
                return False
    return True


def bar_problems(frame: pd.DataFrame, day: dt.date, rel: str, *, timezone: str,
                 bar_seconds: int) -> list[str]:
    """The problems of one bars partition (``rel``, holding the bars of ``day``, read as
    ``frame``): the ingest rules, its columns as the store names and types them, its order,
    its date (the last two only when the columns are the store's)."""
    problems = _rule_problems(frame, rel, bar_seconds)
    layout = _layout_problems(frame, rel)
    if layout:
        return problems + layout
    if not _sorted_by_ticker_ts(frame):
        problems.append(f"{rel}: rows are not sorted by ticker then ts")
    wrong = _off_date(frame, np.datetime64(day, "D"), timezone)
    if len(wrong):
        problems.append(
            f"{rel}: rule 'bar start falls on the partition date' broken in "
            f"{len(wrong)} row(s), first row {wrong[0] + 1}"
        )
    return problems


def _layout_problems(frame: pd.DataFrame, rel: str) -> list[str]:
    """A stored partition's ``ticker`` and ``ts`` columns under those names, and ``ts`` a
    timestamp with a zone: how the ingest writes them and a run reads them (the ingest's
    rules accept other names and text times in the files it reads)."""
    problems = [f"{rel}: rule 'a column named {name}' broken (columns: "
                f"{', '.join(map(str, frame.columns))})"
                for name in ("ticker", "ts") if name not in frame.columns]
    if "ts" in frame.columns and not isinstance(frame["ts"].dtype, pd.DatetimeTZDtype):
        problems.append(f"{rel}: rule 'ts is stored as a timestamp with a zone' broken (stored "
                        f"as {frame['ts'].dtype})")
    return problems


def _rule_problems(frame: pd.DataFrame, file: str, bar_seconds: int) -> list[str]:
    from finbench.data.schema import validate_bars

    return validate_bars(frame, file=file, ticker=None, timezone=None, bar_timestamp="start",
                         bar_seconds=bar_seconds)[1]


def _off_date(frame: pd.DataFrame, days, timezone: str) -> np.ndarray:
    """Rows whose bar starts on another local date than ``days`` (one, or one per row).

    Where the zone keeps one offset from two days before a date to two days after it, the
    date is the interval of UTC instants from its local midnight to the next: no zone's
    offsets lie two days apart (they lie within -12 and +16 hours), so no instant further
    away has that local date. The starts are then compared with those two bounds. Near a
    change of offset (summer time), each start is converted to local time."""
    days = np.asarray(days, "datetime64[D]")
    distinct, which = np.unique(days, return_inverse=True)
    lo, hi, steady = _date_bounds(distinct, timezone)
    if not steady.all():
        local = (frame["ts"].dt.tz_convert(timezone).dt.tz_localize(None)
                 .to_numpy().astype("datetime64[D]"))
        return np.flatnonzero(local != days)
    ts = frame["ts"].to_numpy(dtype="datetime64[ns]").astype(np.int64)  # NaT: off any date
    return np.flatnonzero((ts < lo[which]) | (ts >= hi[which]))


_HOUR = 3_600_000_000_000  # ns
_PROBES = _HOUR * np.arange(-48, 73)  # from two days before a date to two days after it


def _date_bounds(days: np.ndarray, timezone: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per local date: its local midnight and the next one as UTC instants (ns), and whether
    the date is steady: 24 hours long, with the zone's offset the same at every hour from two
    days before the first instant to two days after the last. On a steady date an instant's
    local date is that date exactly when it lies between the two."""
    midnights = pd.DatetimeIndex(np.r_[days, days + 1].astype("datetime64[ns]"))
    starts = midnights.tz_localize(timezone, ambiguous=np.ones(len(midnights), bool),
                                   nonexistent="shift_forward").asi8
    lo, hi = starts[:len(days)], starts[len(days):]
    probes = pd.DatetimeIndex((lo[:, None] + _PROBES).ravel(), tz="UTC")
    offsets = (probes.tz_convert(timezone).tz_localize(None).asi8
               - probes.asi8).reshape(len(days), len(_PROBES))
    steady = (hi - lo == 24 * _HOUR) & (offsets == offsets[:, :1]).all(axis=1)
    return lo, hi, steady


def _sorted_by_ticker_ts(frame: pd.DataFrame | pa.Table, starts: np.ndarray | None = None,
                         *, strict: bool = False, ts: np.ndarray | None = None) -> bool:
    """Whether rows are in (ticker, ts) order, ties allowed unless ``strict`` (compared as
    whole columns); ``starts``: rows that begin a partition of their own, compared with no
    row before them; ``ts``: the ``ts`` column as int64 nanoseconds, when the caller has
    it already."""
    if len(frame) < 2:
        return True
    if isinstance(frame, pa.Table) and pa.types.is_dictionary(frame.column("ticker").type):
        rank = _ticker_ranks(frame.column("ticker"))  # (compared as numbers, as texts would)
        after, same = rank[1:] > rank[:-1], rank[1:] == rank[:-1]
    else:
        if isinstance(frame, pa.Table):
            ticker = frame.column("ticker").combine_chunks()
        else:
            ticker = pa.array(frame["ticker"], pa.string(), from_pandas=True)
        later, earlier = ticker.slice(1), ticker.slice(0, len(ticker) - 1)
        after = pc.fill_null(pc.greater(later, earlier), False).to_numpy(zero_copy_only=False)
        same = pc.fill_null(pc.equal(later, earlier), False).to_numpy(zero_copy_only=False)
    if ts is None:
        ts = (frame.column("ts").to_numpy().astype(np.int64) if isinstance(frame, pa.Table)
              else frame["ts"].to_numpy(dtype="datetime64[ns]").astype(np.int64))
    ordered = after | (same & ((ts[1:] > ts[:-1]) if strict else (ts[1:] >= ts[:-1])))
    if starts is not None and len(starts):
        ordered[np.asarray(starts) - 1] = True  # the pair across a partition's start
    return bool(ordered.all())


def read_partition(data) -> pa.Table:
    """A bar partition's bytes as a table, its tickers dictionary-encoded as Parquet stores
    them (half the decoding of making a text per row: a year's partition of 500 tickers,
    10 -> 5 ms); :func:`plain_tickers` gives them as text."""
    import pyarrow.parquet as pq

    return pq.read_table(pa.BufferReader(data), read_dictionary=["ticker"])


def plain_tickers(table: pa.Table) -> pa.Table:
    """``table`` with a dictionary-encoded ``ticker`` column as text (else as it is)."""
    current = table.schema
    schema = _plain_schema(current)
    return table if schema is current else table.cast(schema)


def _plain_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with a dictionary-encoded ``ticker`` field as its values' type."""
    if "ticker" not in schema.names:
        return schema
    at = schema.get_field_index("ticker")
    field = schema.field(at)
    if not pa.types.is_dictionary(field.type):
        return schema
    return schema.set(at, field.with_type(field.type.value_type))


def _ticker_ranks(column: pa.ChunkedArray) -> np.ndarray:
    """Each row's ticker as its rank among the column's distinct tickers in text order
    (bytewise, as Arrow compares text), from each chunk's dictionary: no text per row. Two
    rows' ranks compare as their tickers do."""
    values = _dictionary_values(column)
    ordered = values.take(pc.sort_indices(values))
    parts = []
    for chunk in column.chunks:
        rank = pc.index_in(chunk.dictionary, value_set=ordered).to_numpy(zero_copy_only=False)
        parts.append(rank[chunk.indices.to_numpy(zero_copy_only=False)])
    return np.concatenate(parts).astype(np.int64) if parts else np.empty(0, np.int64)


def _dictionary_values(column: pa.ChunkedArray) -> pa.Array:
    """The distinct texts of a dictionary-encoded column's chunks' dictionaries."""
    if not column.num_chunks:
        return pa.array([], column.type.value_type)
    return pc.unique(pa.concat_arrays([c.dictionary for c in column.chunks]))
