"""One test per validation rule: the message names file, row and rule; the store is untouched."""

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.core.errors import DataError
from finbench.data.ingest import ingest_bars, ingest_headlines
from finbench.data.store import Store
from tests.helpers import HEADER, store_files, write
from tests.reference import naive_json_object

GOOD = (
    "AAPL,2025-01-15T14:29:00Z,100,101,99,100.5,10\n"
    "AAPL,2025-01-15T14:30:00Z,100.5,101,100,100.8,12\n"
)


@pytest.fixture
def store(tmp_path):
    f = write(tmp_path / "seed.csv", HEADER + GOOD)
    ingest_bars(f, tmp_path / "store")
    return tmp_path / "store"


def rejects(tmp_path, store, body, rule, row=None, header=HEADER, **kw):
    before = store_files(store)
    f = write(tmp_path / "bad.csv", header + body)
    with pytest.raises(DataError) as info:
        ingest_bars(f, store, **kw)
    message = str(info.value)
    assert "bad.csv" in message and rule in message and "nothing was written" in message
    if row is not None:
        assert f"row {row}" in message
    assert store_files(store) == before
    return message


def test_duplicate_ticker_ts(tmp_path, store):
    rejects(tmp_path, store, GOOD + "AAPL,2025-01-15T14:30:00Z,100,101,99,100,1\n",
            "one bar per (ticker, ts)", row=3)


def test_high_below_low(tmp_path, store):
    rejects(tmp_path, store, "AAPL,2025-01-15T14:31:00Z,100,99,101,100,1\n", "low <= high", row=1)


def test_close_outside_range(tmp_path, store):
    rejects(tmp_path, store, GOOD + "AAPL,2025-01-15T14:31:00Z,100,101,99,105,1\n",
            "low <= close <= high", row=3)


def test_open_outside_range(tmp_path, store):
    rejects(tmp_path, store, "AAPL,2025-01-15T14:31:00Z,98,101,99,100,1\n",
            "low <= open <= high", row=1)


def test_price_not_positive(tmp_path, store):
    rejects(tmp_path, store, "AAPL,2025-01-15T14:31:00Z,0,0,0,0,1\n", "prices are > 0", row=1)


def test_negative_volume(tmp_path, store):
    rejects(tmp_path, store, "AAPL,2025-01-15T14:31:00Z,100,101,99,100,-5\n", "volume >= 0",
            row=1)


def test_nan_price(tmp_path, store):
    rejects(tmp_path, store, "AAPL,2025-01-15T14:31:00Z,100,NaN,99,100,1\n",
            "high is a finite number", row=1)


def test_tickers_that_read_like_missing_values_are_tickers(tmp_path):
    """NA (Nano Labs) and NULL in a CSV's ticker column are tickers, not missing cells (pandas
    reads both as missing by default, and the ingest then said "ticker is not empty"); in a
    price column NA is still a missing number, and an empty ticker cell is still refused."""
    body = ("NA,2025-01-15T14:30:00Z,1.5,1.6,1.4,1.5,10\n"
            "NULL,2025-01-15T14:30:00Z,2.5,2.6,2.4,2.5,10\n")
    ingest_bars(write(tmp_path / "bars.csv", HEADER.replace("ticker", "Symbol") + body),
                tmp_path / "store")
    assert sorted(Store(tmp_path / "store").read_bars()["ticker"]) == ["NA", "NULL"]
    news = write(tmp_path / "news.csv", "id,published_at,tickers,headline,source\n"
                 "1,2025-01-15T14:00:00Z,NA,Nano Labs files,wire\n")
    ingest_headlines(news, tmp_path / "store")
    assert list(Store(tmp_path / "store").read_headlines()["tickers"].iloc[0]) == ["NA"]
    rejects(tmp_path, tmp_path / "store", "NA,2025-01-15T14:31:00Z,1.5,NA,1.4,1.5,1\n",
            "high is a finite number", row=1)
    rejects(tmp_path, tmp_path / "store", ",2025-01-15T14:31:00Z,1.5,1.6,1.4,1.5,1\n",
            "ticker is not empty", row=1)


def test_naive_timestamp_without_timezone(tmp_path, store):
    msg = rejects(tmp_path, store, "AAPL,2025-01-15 09:31:00,100,101,99,100,1\n",
                  "timestamp carries a zone", row=1)
    assert "--timezone" in msg


def test_unparseable_timestamp(tmp_path, store):
    rejects(tmp_path, store, "AAPL,yesterday,100,101,99,100,1\n", "timestamp parses", row=1)


def test_unmappable_columns(tmp_path, store):
    msg = rejects(tmp_path, store, "AAPL,1,2\n", "a column for ts is required",
                  header="ticker,when,price\n")
    assert "accepted names" in msg


def test_a_row_with_more_fields_than_the_header_is_named(tmp_path, store):
    """Every row one field longer: pandas alone would take the first column as an index and
    shift every value one column left, silently."""
    before = store_files(store)
    every = "".join(line + ",x\n" for line in GOOD.splitlines())
    for body, row in ((every, 1), (GOOD + "AAPL,2025-01-15T14:31:00Z,100,101,99,100,1,x\n", 3)):
        f = write(tmp_path / "long.csv", HEADER + body)
        with pytest.raises(DataError, match=f"long.csv: row {row} has 8 fields where the "
                                            "header names 7$"):
            ingest_bars(f, store)
        assert store_files(store) == before


def test_a_delimiter_at_the_end_of_every_line_reads_each_value_in_its_column(tmp_path):
    body = "".join(line + ",\n" for line in GOOD.splitlines())
    ingest_bars(write(tmp_path / "t.csv", HEADER + body), tmp_path / "s")
    bars = Store(tmp_path / "s").read_bars()
    assert list(bars["ticker"]) == ["AAPL", "AAPL"]
    assert list(bars["close"]) == [100.5, 100.8] and list(bars["volume"]) == [10, 12]


def test_a_folder_is_not_a_file(tmp_path, store):
    with pytest.raises(DataError, match="is a folder; give one file"):
        ingest_bars(tmp_path, store)


def test_empty_file(tmp_path, store):
    rejects(tmp_path, store, "", "file has at least one row", header="")


def test_unaligned_bar_start(tmp_path, store):
    rejects(tmp_path, store, "AAPL,2025-01-15T14:31:30Z,100,101,99,100,1\n",
            "multiple of 60 s", row=1)


def test_every_broken_rule_is_reported_at_once(tmp_path, store):
    msg = rejects(tmp_path, store,
                  "AAPL,2025-01-15T14:31:00Z,100,99,101,100,1\n"
                  "AAPL,2025-01-15T14:32:00Z,100,101,99,100,-1\n", "low <= high")
    assert "volume >= 0" in msg and "row 2" in msg


def test_unsorted_input_is_sorted_not_rejected(tmp_path):
    body = ("MSFT,2025-01-15T14:31:00Z,10,11,9,10,1\n"
            "AAPL,2025-01-15T14:31:00Z,100,101,99,100,1\n"
            "AAPL,2025-01-15T14:30:00Z,100,101,99,100,1\n")
    ingest_bars(write(tmp_path / "u.csv", HEADER + body), tmp_path / "s")
    bars = Store(tmp_path / "s").read_bars()
    assert list(bars["ticker"]) == ["AAPL", "AAPL", "MSFT"]
    assert list(bars["ts"].dt.strftime("%H:%M")) == ["14:30", "14:31", "14:31"]


def test_vendor_column_names_and_ticker_flag(tmp_path):
    body = "Datetime,Open,High,Low,Close,Volume\n2025-01-15 09:30:00-05:00,1,2,1,1.5,3\n"
    ingest_bars(write(tmp_path / "y.csv", body), tmp_path / "s", ticker="NVDA")
    bars = Store(tmp_path / "s").read_bars()
    assert bars["ts"].iloc[0] == pd.Timestamp("2025-01-15 14:30", tz="UTC")
    assert bars["ticker"].iloc[0] == "NVDA" and bars["close"].iloc[0] == 1.5


def test_reingest_replaces_the_same_ticker_days_never_duplicates(tmp_path, store):
    f = write(tmp_path / "again.csv", HEADER + "AAPL,2025-01-15T14:29:00Z,100,102,99,101,10\n")
    ingest_bars(f, store)
    ingest_bars(f, store)
    bars = Store(store).read_bars()
    assert len(bars) == 1 and bars["high"].iloc[0] == 102  # the day was replaced
    assert Store(store).verify() == []


def test_an_ingest_writes_over_a_partition_file_the_manifest_does_not_list(tmp_path):
    """A file where the manifest lists no partition (left by an ingest killed between writing
    it and saving the manifest) is no part of the store: the next ingest of that day keeps
    none of its rows and replaces nothing."""
    store = tmp_path / "store"
    ingest_bars(write(tmp_path / "a.csv", HEADER + GOOD), store)
    s = Store(store)
    rel = "bars/date=2025-01-15/part.parquet"
    del s.manifest["partitions"][rel]  # as if the ingest that wrote it was killed before this
    s.save_manifest()
    msft = "MSFT,2025-01-15T14:29:00Z,400,401,399,400.5,10\n"
    done = ingest_bars(write(tmp_path / "b.csv", HEADER + msft), store)
    assert done["replaced"] == []
    bars = Store(store).read_bars()
    assert bars["ticker"].tolist() == ["MSFT"]  # AAPL's stray rows were never stored
    assert Store(store).verify() == []


def test_parquet_bars_are_read(tmp_path):
    frame = pd.DataFrame({"symbol": ["AAPL"], "timestamp": [pd.Timestamp("2025-01-15 14:30Z")],
                          "open": [1.0], "high": [1.0], "low": [1.0], "close": [1.0],
                          "volume": [0]})
    frame.to_parquet(tmp_path / "b.parquet")
    ingest_bars(tmp_path / "b.parquet", tmp_path / "s")
    assert len(Store(tmp_path / "s").read_bars()) == 1


def test_a_headline_given_as_a_list_is_refused_not_stored_as_its_repr(tmp_path, store):
    """JSON lines can nest: a list's text ("['x']") would become the headline."""
    before = store_files(store)
    f = write(tmp_path / "news.jsonl",
              '{"id": 1, "published_at": "2025-01-15T14:00:00Z", "tickers": ["AAPL"], '
              '"headline": ["x"], "source": {"n": 1}}\n'
              '{"id": 2, "published_at": "2025-01-15T14:00:00Z", "tickers": ["AAPL"], '
              '"headline": "fine", "source": 7}\n')
    with pytest.raises(DataError) as info:
        ingest_headlines(f, store)
    text = str(info.value)
    assert ("rule 'headline is a text or a number, not a list or an object' broken in 1 "
            "row(s): row 1 (headline=['x'])") in text
    assert "rule 'source is a text or a number, not a list or an object'" in text
    assert "row 2" not in text and store_files(store) == before


def test_headline_without_timestamp(tmp_path, store):
    before = store_files(store)
    f = write(tmp_path / "news.csv", "id,published_at,tickers,headline,source\n"
              "1,2025-01-15T14:00:00Z,AAPL,ok,wire\n2,,AAPL;MSFT,no time,wire\n")
    with pytest.raises(DataError, match=r"news.csv: rule 'published_at is present' broken in "
                                        r"1 row\(s\): row 2"):
        ingest_headlines(f, store)
    assert store_files(store) == before


def test_headlines_jsonl_lists_and_availability(tmp_path, store):
    f = write(tmp_path / "news.jsonl",
              '{"id": "a", "published_at": "2025-01-15T14:00:00Z", "tickers": ["AAPL", "MSFT"],'
              ' "headline": "h", "source": "wire", "first_seen_at": "2025-01-15T15:00:00Z"}\n'
              '{"id": "b", "published_at": "2025-01-15T14:05:00Z", "tickers": "NVDA;AMD",'
              ' "headline": "g", "source": "wire"}\n')
    ingest_headlines(f, store)
    news = Store(store).read_headlines().set_index("id")
    assert list(news.loc["a", "tickers"]) == ["AAPL", "MSFT"]
    assert list(news.loc["b", "tickers"]) == ["NVDA", "AMD"]
    assert news.loc["a", "available_at"] == pd.Timestamp("2025-01-15 15:00", tz="UTC")
    assert news.loc["b", "available_at"] == pd.Timestamp("2025-01-15 14:05", tz="UTC")


def test_validate_detects_a_tampered_partition(store):
    part = next(store.glob("bars/date=*/part.parquet"))
    part.write_bytes(part.read_bytes()[:-3] + b"xyz")
    problems = Store(store).verify()
    assert any("does not match the manifest" in p for p in problems)


@pytest.mark.parametrize("change, rule", [
    ("swap", "rows are not sorted by ticker then ts"),
    ("other_ticker_first", "rows are not sorted by ticker then ts"),
    ("day_before", "rule 'bar start falls on the partition date' broken in 1 row(s), first row 1"),
])
def test_verify_names_a_partition_out_of_order_or_off_its_date(tmp_path, change, rule):
    # the partition is rewritten and re-listed, so only the broken rule can fire
    import pyarrow as pa
    import pyarrow.parquet as pq

    from finbench.data.store import sha256_file, snapshot_hash

    f = write(tmp_path / "seed.csv", HEADER + GOOD + "MSFT,2025-01-15T14:29:00Z,50,51,49,50,5\n")
    ingest_bars(f, tmp_path / "store")
    store = Store(tmp_path / "store")
    assert store.verify() == []
    rel = "bars/date=2025-01-15/part.parquet"
    table = pq.read_table(store.path / rel)
    if change == "swap":  # AAPL 14:30 before AAPL 14:29
        table = table.take([1, 0, 2])
    elif change == "other_ticker_first":  # MSFT before AAPL
        table = table.take([2, 0, 1])
    else:  # 05:00 UTC is midnight in New York: the bar starts on the 14th there
        ts = table.column("ts").to_pylist()
        ts[0] = pd.Timestamp("2025-01-15 04:59", tz="UTC")
        table = table.set_column(table.schema.get_field_index("ts"), "ts",
                                 pa.array(ts, table.schema.field("ts").type))
    pq.write_table(table, store.path / rel)
    store.manifest["partitions"][rel] = sha256_file(store.path / rel)
    store.manifest["snapshot_sha256"] = snapshot_hash(store.manifest["partitions"], store.manifest)
    store.save_manifest()
    assert Store(store.path).verify() == [f"{rel}: {rule}"]


@settings(max_examples=60)
@given(st.lists(st.tuples(st.sampled_from(["AAPL", "MSFT", "BRK.B", "A"]), st.integers(0, 5)),
                min_size=1, max_size=30), st.sampled_from(["any", "ticker", "ticker, ts"]))
def test_bars_come_out_sorted_and_repeats_are_named_as_pandas_finds_them(bars, order):
    """Rows in any order, by ticker only, or already by ticker then ts (as a stored partition
    is, which the validator finds without sorting)."""
    from finbench.data.schema import MAX_ROWS_NAMED, validate_bars

    if order != "any":
        bars = sorted(bars, key=(lambda b: b[0]) if order == "ticker" else None)
    frame = pd.DataFrame({
        "ticker": [t for t, _ in bars],
        "ts": pd.Timestamp("2025-01-15 14:30", tz="UTC") + pd.to_timedelta(
            [m for _, m in bars], unit="min"),
        "open": 100.0, "high": 101.0, "low": 99.0, "close": 100.5, "volume": 10.0})
    out, problems = validate_bars(frame, file="f.csv", ticker=None, timezone=None,
                                  bar_timestamp="start", bar_seconds=60)
    repeats = frame.duplicated(["ticker", "ts"], keep=False).to_numpy()
    if repeats.any():
        rows = np.flatnonzero(repeats)
        named = ", ".join(f"row {r + 1} ({frame['ticker'][r]} {frame['ts'][r].isoformat()})"
                          for r in rows[:MAX_ROWS_NAMED])
        more = f" and {len(rows) - MAX_ROWS_NAMED} more" if len(rows) > MAX_ROWS_NAMED else ""
        assert problems == [f"f.csv: rule 'one bar per (ticker, ts)' broken in {len(rows)} "
                            f"row(s): {named}{more}"]
    else:
        assert problems == []
        want = frame.sort_values(["ticker", "ts"], kind="stable").reset_index(drop=True)
        assert list(zip(out["ticker"], out["ts"], strict=True)) == list(
            zip(want["ticker"], want["ts"], strict=True))


def test_verify_reports_every_broken_partition_in_partition_order(tmp_path, monkeypatch):
    """Partitions are checked several at once; the problems still come out in partition
    order, the same as one at a time."""
    import pyarrow.parquet as pq

    import finbench.data.store as store_module
    from finbench.data.store import sha256_file, snapshot_hash

    days = ["2025-01-13", "2025-01-14", "2025-01-15", "2025-01-16", "2025-01-17"]
    body = "".join(f"{t},{d}T14:{m}:00Z,100,101,99,100.5,10\n"
                   for d in days for t in ("AAPL", "MSFT") for m in ("29", "30"))
    ingest_bars(write(tmp_path / "seed.csv", HEADER + body), tmp_path / "store")
    store = Store(tmp_path / "store")
    rel = {d: f"bars/date={d}/part.parquet" for d in days}
    tampered = store.path / rel["2025-01-14"]
    tampered.write_bytes(tampered.read_bytes()[:-3] + b"xyz")
    for day in ("2025-01-15", "2025-01-17"):  # rewritten out of order and re-listed
        pq.write_table(pq.read_table(store.path / rel[day]).take([1, 0, 2, 3]),
                       store.path / rel[day])
        store.manifest["partitions"][rel[day]] = sha256_file(store.path / rel[day])
    store.manifest["snapshot_sha256"] = snapshot_hash(store.manifest["partitions"], store.manifest)
    store.save_manifest()
    (store.path / rel["2025-01-16"]).unlink()
    want = [f"{rel['2025-01-16']}: listed in the manifest but missing",
            f"{rel['2025-01-14']}: content hash "
            f"{sha256_file(tampered)[:12]} does not match the manifest",
            f"{rel['2025-01-15']}: rows are not sorted by ticker then ts",
            f"{rel['2025-01-17']}: rows are not sorted by ticker then ts"]
    for checkers in (1, 4):
        monkeypatch.setattr(store_module, "CHECKERS", checkers)
        lines = []
        assert Store(store.path).verify(echo=lines.append) == want
        assert [x.split(",")[0] for x in lines] == [
            "store: 4/4 partitions hashed and checked"]


def test_verify_stops_at_an_error_and_checks_no_further_partition(tmp_path, monkeypatch):
    import time

    import finbench.data.store as store_module

    days = ["2025-01-13", "2025-01-14", "2025-01-15", "2025-01-16", "2025-01-17"]
    body = "".join(f"AAPL,{d}T14:30:00Z,100,101,99,100.5,10\n" for d in days)
    ingest_bars(write(tmp_path / "seed.csv", HEADER + body), tmp_path / "store")
    checked, check = [], store_module.Store._check_chunk

    def failing(self, rels, bars, *, hashed):
        checked.extend(str(bars[rel]) for rel in rels)
        if len(checked) == 2:
            raise MemoryError("out of memory")
        if len(checked) > 2:
            time.sleep(0.5)  # the one partition already started when the error is seen
        return check(self, rels, bars, hashed=hashed)

    monkeypatch.setattr(store_module, "CHECKERS", 1)
    monkeypatch.setattr(store_module, "CHECK_CHUNK", 1)  # a partition a chunk
    monkeypatch.setattr(store_module.Store, "_check_chunk", failing)
    with pytest.raises(MemoryError):
        Store(tmp_path / "store").verify()
    assert checked[:2] == days[:2] and len(checked) <= 3  # the last two were never started


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3), max_leaves=8)
EDGES = ["", "\n", "\r\n", " ", "\t", "\r", "\x0b", "\ufeff", "\u00a0", "x", "}", ",",
         "\n\n", " \n", "{}"]
OBJECTS = st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=5)


@settings(max_examples=500)
@given(st.one_of(OBJECTS, OBJECTS, JSON_VALUES),  # (mostly objects, mostly lines as read:
       st.sampled_from([""] * len(EDGES) + EDGES),  # nothing before, a line feed after)
       st.sampled_from(["\n"] * len(EDGES) + EDGES), st.integers(0, 40), st.booleans(),
       st.booleans())
def test_a_json_line_is_read_as_json_loads_reads_it(value, before, after, cut, truncate, dup):
    """``json_object`` (its scanner called straight for a line that is an object up to its
    line feed) gives what ``json.loads`` of the whole line gives (tests/reference.py), object
    or message: any value, objects with repeated keys, lines cut short, with white space,
    byte-order marks and other text before or after."""
    from finbench.data.user_files import json_object

    text = json.dumps(value, ensure_ascii=bool(cut % 2))
    if dup and text.startswith("{") and len(text) > 2:  # a key twice (the last one holds)
        text = '{"k": 1, ' + text[1:-1] + ', "k": [2]}'
    if truncate:
        text = text[:cut]
    line = before + text + after
    assert repr(json_object(line)) == repr(naive_json_object(line))
