"""Small bar partitions are checked together (finbench.data.partition_checks): whatever the
partitions hold and however they are grouped, the problems found are those of a check one
partition at a time, in partition order, word for word."""

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.data.partition_checks import _off_date, bar_problems, chunk_problems
from finbench.data.schema import BARS_SCHEMA

ZONE = "America/New_York"
FIRST = dt.date(2025, 1, 13)
DEFECTS = ("none", "none", "swap", "off_date", "low_above_high", "repeat", "empty", "bad_ticker",
           "unreadable", "other_schema", "from_the_day_before", "unaligned", "ts_as_text",
           "ts_renamed", "nan_price", "infinite_price", "tiny_price", "open_above_high",
           "close_below_low", "negative_volume", "nan_volume", "missing_ticker", "missing_ts",
           "padded_ticker", "empty_ticker", "same_ts_twice")


def partition(day: dt.date, bars: list[tuple[str, int]]) -> pd.DataFrame:
    """Bars ``(ticker, minute after 09:30 New York)`` of ``day``, sorted and valid."""
    open_ = pd.Timestamp(f"{day} 09:30", tz=ZONE).tz_convert("UTC")
    rows = sorted(set(bars))
    return pd.DataFrame({"ticker": [t for t, _ in rows],
                         "ts": pd.Series([open_ + pd.Timedelta(minutes=m) for _, m in rows],
                                         dtype="datetime64[ns, UTC]"),
                         "open": 100.0, "high": 101.0, "low": 99.0, "close": 100.5,
                         "volume": 10.0})


PRICES = ["open", "high", "low", "close"]
VALUE_EDITS = {  # defect: (row, columns, the value written there)
    "nan_price": (-1, PRICES, np.nan), "infinite_price": (-1, PRICES, np.inf),
    "tiny_price": (-1, PRICES, 1e-13), "open_above_high": (0, ["open"], 101.5),
    "close_below_low": (-1, ["close"], 98.0), "negative_volume": (0, ["volume"], -1.0),
    "nan_volume": (0, ["volume"], np.nan), "missing_ticker": (-1, ["ticker"], None),
    "missing_ts": (-1, ["ts"], pd.NaT),
    "padded_ticker": (0, ["ticker"], " AAPL"),  # accepted by the ingest, which strips it
    "empty_ticker": (0, ["ticker"], ""),
}


def damage(frame: pd.DataFrame, defect: str, before: pd.DataFrame | None) -> pd.DataFrame:
    frame = frame.copy()
    if defect == "swap" and len(frame) > 1:
        frame = frame.iloc[[1, 0, *range(2, len(frame))]]
    elif defect == "off_date":  # 04:59 UTC: the evening before in New York
        frame.loc[frame.index[0], "ts"] = frame["ts"].iloc[0].normalize() + pd.Timedelta(
            hours=4, minutes=59)
    elif defect == "low_above_high":
        frame.loc[frame.index[-1], "low"] = 102.0
    elif defect == "repeat":
        frame = pd.concat([frame.iloc[:1], frame]).reset_index(drop=True)
    elif defect == "empty":
        frame = frame.iloc[:0]
    elif defect == "bad_ticker":
        frame["ticker"] = frame["ticker"].str.replace("A", "A ")
    elif defect == "from_the_day_before" and before is not None and len(before):
        frame = pd.concat([before.iloc[:1], frame]).reset_index(drop=True)
    elif defect == "unaligned":
        frame.loc[frame.index[0], "ts"] += pd.Timedelta(seconds=1)
    elif defect in VALUE_EDITS:
        rows, columns, value = VALUE_EDITS[defect]
        frame = frame.astype({"ticker": object}) if columns == ["ticker"] else frame
        frame.loc[frame.index[rows], columns] = value
    elif defect == "same_ts_twice" and len(frame):  # the first bar again, with other prices
        again = frame.iloc[:1].assign(close=100.25)
        frame = pd.concat([again, frame]).reset_index(drop=True)
    return frame


def table_of(frame: pd.DataFrame, defect: str) -> pa.Table:
    table = pa.Table.from_pandas(frame.reset_index(drop=True), schema=BARS_SCHEMA,
                                 preserve_index=False)
    if defect == "other_schema":  # volume stored as integers: another schema, same values
        table = table.set_column(6, "volume", table.column("volume").cast(pa.int64()))
    elif defect == "ts_as_text":  # times as ISO text with their zone: the ingest reads these
        text = pa.array([t.isoformat() for t in frame["ts"]], pa.string())
        table = table.set_column(1, "ts", text)
    elif defect == "ts_renamed":  # a name the ingest accepts, not the store's
        table = table.rename_columns(["ticker", "timestamp", *table.column_names[2:]])
    return table


def one_at_a_time(items, tables, damaged) -> list[str]:
    """The reference: every partition read and checked alone, in order."""
    problems = []
    for day, rel in items:
        if tables[rel] is None:
            if rel not in damaged:
                problems.append(f"{rel}: not a readable Parquet file (damaged)")
            continue
        problems += bar_problems(tables[rel].to_pandas(), day, rel, timezone=ZONE,
                                 bar_seconds=60)
    return problems


bars = st.lists(st.tuples(st.sampled_from(["AAPL", "MSFT", "A"]), st.integers(0, 8)),
                min_size=1, max_size=6)


def parquet_bytes(table: pa.Table, row_group_size: int | None = None) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=row_group_size)
    return sink.getvalue().to_pybytes()


@settings(max_examples=160)
@given(st.lists(st.tuples(bars, st.sampled_from(DEFECTS), st.booleans()), min_size=1,
                max_size=8),
       st.sampled_from([1, 3, 8, 10**6]), st.sampled_from([None, 1, 2]))
def test_partitions_checked_together_say_what_each_alone_says(parts, batch_rows, stored):
    """Whatever the partitions hold and however they are grouped, the problems are those of
    each checked alone; also read as the store's check reads them (``stored``: written to
    Parquet in row groups of that many rows and read back with the tickers
    dictionary-encoded, a dictionary per row group), the reference reading the same bytes
    as text."""
    from finbench.data.partition_checks import read_partition

    tables, reference, items, damaged, before = {}, {}, [], set(), None
    for k, (rows, defect, hash_differs) in enumerate(parts):
        day = FIRST + dt.timedelta(days=k)
        rel = f"bars/date={day}/part.parquet"
        frame = damage(partition(day, rows), defect, before)
        tables[rel] = reference[rel] = None if defect == "unreadable" else table_of(frame, defect)
        if stored and tables[rel] is not None:
            data = parquet_bytes(tables[rel], stored if len(frame) else None)
            tables[rel], reference[rel] = read_partition(data), pq.read_table(pa.BufferReader(
                data))
        items.append((day, rel))
        if hash_differs:
            damaged.add(rel)
        before = partition(day, rows)

    def read(rel):
        if tables[rel] is None:
            raise pa.ArrowInvalid("damaged")
        return tables[rel]

    got = chunk_problems(items, read, timezone=ZONE, bar_seconds=60,
                         damaged=damaged.__contains__, batch_rows=batch_rows)
    assert got == one_at_a_time(items, reference, damaged)


@pytest.fixture
def rule_calls(monkeypatch) -> list[tuple[str, int]]:
    """(file, rows) of every frame the ingest's rules are applied to ("batch": several
    partitions at once), and ("clean", rows) of every set of partitions checked on their
    Arrow columns first."""
    import finbench.data.partition_checks as checks

    calls = []
    real, clean = checks._rule_problems, checks._clean
    monkeypatch.setattr(checks, "_rule_problems", lambda frame, file, seconds: calls.append(
        (file, len(frame))) or real(frame, file, seconds))
    monkeypatch.setattr(checks, "_clean", lambda group, **kw: calls.append(
        ("clean", sum(t.num_rows for *_, t in group))) or clean(group, **kw))
    return calls


def test_clean_partitions_are_read_and_checked_as_one_frame(rule_calls):
    """Eight clean partitions under the row budget: one check of them all on their Arrow
    columns (the fixed cost paid once), no frame made; one broken among them: the ingest's
    rules on them together, then on each alone, the broken one named."""
    days = [FIRST + dt.timedelta(days=k) for k in range(8)]
    tables = {f"bars/date={d}/part.parquet": table_of(partition(d, [("AAPL", 0), ("MSFT", 1)]),
                                                      "none") for d in days}
    items = [(d, f"bars/date={d}/part.parquet") for d in days]
    assert chunk_problems(items, tables.__getitem__, timezone=ZONE, bar_seconds=60) == []
    assert rule_calls == [("clean", 16)]
    rule_calls.clear()
    rel = items[5][1]
    tables[rel] = table_of(damage(partition(days[5], [("AAPL", 0), ("MSFT", 1)]), "swap", None),
                           "none")
    assert chunk_problems(items, tables.__getitem__, timezone=ZONE, bar_seconds=60) == [
        f"{rel}: rows are not sorted by ticker then ts"]
    assert [c[0] for c in rule_calls] == ["clean", "batch", *(i[1] for i in items)]


@pytest.mark.parametrize("rows", [0, 1])
def test_a_partition_too_large_to_share_a_check_is_checked_alone(rows, rule_calls):
    big = table_of(partition(FIRST, [("AAPL", m) for m in range(6)]), "none")
    small = table_of(partition(FIRST + dt.timedelta(days=1), [("AAPL", 0)][:rows]), "none")
    items = [(FIRST, "big"), (FIRST + dt.timedelta(days=1), "small")]
    want = [] if rows else ["small: rule 'file has at least one row'"]
    assert chunk_problems(items, {"big": big, "small": small}.__getitem__, timezone=ZONE,
                          bar_seconds=60, batch_rows=4) == want
    # never one check of both; the empty one is sent to the ingest's rules, which name it
    assert rule_calls == [("clean", 6), ("clean", rows), *([("small", 0)] if not rows else [])]


@pytest.mark.parametrize("defect", [d for d in DEFECTS if d not in (
    "none", "unreadable", "from_the_day_before", "ts_as_text", "ts_renamed", "other_schema")])
def test_a_partition_breaking_a_rule_is_never_passed_by_the_arrow_check(defect):
    """Each defect alone, in a partition of the store's layout: the check on Arrow columns
    refuses it, and the ingest's rules name it (a padded ticker, which the ingest strips and
    accepts, is refused by the first all the same: it is stricter, never laxer)."""
    from finbench.data.partition_checks import _clean, read_partition

    rows = [("AAPL", 0), ("AAPL", 1), ("MSFT", 0), ("MSFT", 2)]
    table = table_of(damage(partition(FIRST, rows), defect, None), defect)
    assert not _clean([(FIRST, "p", table)], timezone=ZONE, bar_seconds=60)
    for groups_of in (None, 1, 3):  # as the store's check reads it: a dictionary a row group
        stored = read_partition(parquet_bytes(table, groups_of if table.num_rows else None))
        assert not _clean([(FIRST, "p", stored)], timezone=ZONE, bar_seconds=60)
    said = bar_problems(table.to_pandas(), FIRST, "p", timezone=ZONE, bar_seconds=60)
    if defect == "padded_ticker":
        assert said == []
    else:
        assert said
    assert _clean([(FIRST, "p", table_of(partition(FIRST, rows), "none"))], timezone=ZONE,
                  bar_seconds=60)
    for groups_of in (None, 1, 3):
        stored = read_partition(parquet_bytes(table_of(partition(FIRST, rows), "none"),
                                              groups_of))
        assert _clean([(FIRST, "p", stored)], timezone=ZONE, bar_seconds=60)


def test_verify_reads_each_partition_once(sample_store, monkeypatch):
    """Hash and rules from one read of each partition (on object storage: one download, where
    hashing and checking each read it before)."""
    import collections

    import finbench.data.store as store_module
    from finbench.data.store import Store

    reads = collections.Counter()
    real = store_module.read_bytes
    monkeypatch.setattr(store_module, "read_bytes",
                        lambda fs, path: reads.update([path]) or real(fs, path))
    store = Store(sample_store)
    reads.clear()  # the manifest, read when the store is opened
    assert store.verify() == []
    partitions = [store._file(rel) for rel in store.manifest["partitions"]]
    assert sorted(reads) == sorted(partitions) and set(reads.values()) == {1}


# zones with summer time, midnights that do not exist or occur twice, a skipped date
# (Pacific/Apia, 2011-12-30), a day repeated (America/Adak, 1867), half-hour offsets, and
# summer time ending at 00:01 (America/Goose_Bay until 2010: the clock goes back from 00:01
# to 23:01 the day before, so that day's last hour comes after the next date's midnight)
ZONES = ("America/New_York", "Europe/London", "Australia/Sydney", "Pacific/Apia",
         "America/Adak", "Asia/Beirut", "America/Havana", "America/Sao_Paulo", "UTC",
         "Asia/Kolkata", "Pacific/Kiritimati", "Australia/Lord_Howe", "America/Goose_Bay")
NEAR = [dt.date(2011, 12, 30), dt.date(1867, 10, 18), dt.date(2018, 11, 4),
        dt.date(2024, 3, 10), dt.date(2024, 11, 3), dt.date(2022, 3, 27), dt.date(2024, 10, 27),
        dt.date(1987, 10, 24), dt.date(1994, 10, 29)]


def off_date_reference(ts: pd.Series, days, zone: str) -> np.ndarray:
    """Each start converted to local time, its date compared."""
    local = ts.dt.tz_convert(zone).dt.tz_localize(None).to_numpy().astype("datetime64[D]")
    return np.flatnonzero(local != np.asarray(days, "datetime64[D]"))


@settings(max_examples=150)
@given(zone=st.sampled_from(ZONES),
       anchor=st.one_of(st.sampled_from(NEAR),
                        st.dates(dt.date(1900, 1, 1), dt.date(2100, 12, 31))),
       spread=st.lists(st.integers(-3, 3), min_size=1, max_size=4),
       seconds=st.lists(st.integers(-3 * 86_400, 4 * 86_400), min_size=1, max_size=60),
       per_row=st.booleans())
def test_off_date_equals_converting_each_start_to_local_time(zone, anchor, spread, seconds,
                                                             per_row):
    """The dates' bounds give the rows a conversion of every start gives, for any zone and
    date (near changes of offset or not), one date or a date per row (partitions checked
    together)."""
    days = [anchor + dt.timedelta(days=d) for d in spread]
    row_days = np.array([days[i % len(days)] for i in range(len(seconds))], "datetime64[D]")
    base = pd.Timestamp(anchor).tz_localize("UTC")
    ts = pd.Series([base + pd.Timedelta(seconds=s) for s in seconds], dtype="datetime64[ns, UTC]")
    frame = pd.DataFrame({"ts": ts})
    wanted = row_days if per_row else np.datetime64(days[0], "D")
    assert np.array_equal(_off_date(frame, wanted, zone), off_date_reference(ts, wanted, zone))


def test_off_date_on_the_day_before_summer_time_ends_at_one_minute_past_midnight():
    """America/Goose_Bay, 1987-10-25 00:01 (03:01 UTC): the clock goes back to 23:01 on the
    24th. A bar of 03:30 UTC starts at 23:30 on the 24th, after the 25th's midnight: on the
    24th, not on the 25th. Bounds alone (midnight to midnight) would say the opposite."""
    ts = pd.Series([pd.Timestamp("1987-10-25 03:30", tz="UTC")], dtype="datetime64[ns, UTC]")
    frame = pd.DataFrame({"ts": ts})
    assert _off_date(frame, np.datetime64("1987-10-24", "D"), "America/Goose_Bay").tolist() == []
    assert _off_date(frame, np.datetime64("1987-10-25", "D"), "America/Goose_Bay").tolist() == [0]


def test_off_date_bounds_on_a_steady_date_and_around_a_change_of_offset():
    """New York, 2024-06-03 (no change near): a bar at local midnight is on the date, one a
    nanosecond before is not. 2024-03-10 (summer time begins at 02:00): the same answers, by
    conversion."""
    for day in ("2024-06-03", "2024-03-10"):
        midnight = pd.Timestamp(day, tz=ZONE).tz_convert("UTC")
        ts = pd.Series([midnight - pd.Timedelta(1, "ns"), midnight,
                        midnight + pd.Timedelta(hours=23, minutes=59)],
                       dtype="datetime64[ns, UTC]")
        last_is_on = day == "2024-06-03"  # 2024-03-10 is 23 hours long: 23:59 later is the 11th
        want = [0] if last_is_on else [0, 2]
        got = _off_date(pd.DataFrame({"ts": ts}), np.datetime64(day, "D"), ZONE)
        assert got.tolist() == want


@pytest.mark.parametrize(("defect", "said"), [
    ("ts_as_text", "rule 'ts is stored as a timestamp with a zone' broken (stored as str)"),
    ("ts_renamed", "rule 'a column named ts' broken (columns: ticker, timestamp, open, high, "
                   "low, close, volume)")])
def test_a_partition_not_laid_out_as_the_store_lays_them_is_named(defect, said):
    """Times stored as text, or under another name the ingest accepts: the partition is named
    with the rule it breaks (before, the check stopped on an error); its order and date are
    not checked."""
    rel = f"bars/date={FIRST}/part.parquet"
    table = table_of(partition(FIRST, [("AAPL", 0), ("MSFT", 1)]), defect)
    assert chunk_problems([(FIRST, rel)], {rel: table}.__getitem__, timezone=ZONE,
                          bar_seconds=60) == [f"{rel}: {said}"]
