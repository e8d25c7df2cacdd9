"""A store laid out by ticker (finbench.data.by_ticker): a read-only copy whose every read
gives what the same read of its store gives, in any zone; a run on it gives the same
forecasts and scores; its check names what was changed; what would change it is refused."""

import datetime as dt
import json
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from finbench.audit import audit_run
from finbench.core.errors import StoreError
from finbench.data.by_ticker import copy_by_ticker, file_of, parse_file
from finbench.data.store import Store, sha256_file, snapshot_hash
from finbench.runner import run
from finbench.tracks.intraday.plan import plan_run
from tests.helpers import month_shards_config
from tests.test_tools import calls


@pytest.fixture(scope="module")
def copied(sample_store, tmp_path_factory):
    out = tmp_path_factory.mktemp("by_ticker") / "copy"
    copy_by_ticker(sample_store, out)
    return Store(sample_store), Store(out)


def assert_same_arrays(a, b):
    assert list(a.bounds) == list(b.bounds) and a.bounds == b.bounds
    for name in ("ts", "avail", "open", "high", "low", "close", "volume"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def arrays_or_error(store, **read):
    try:
        return store.read_bar_arrays(**read)
    except ValueError as exc:  # (bars whose local date goes back are out of ts order)
        return str(exc)


def assert_same_reads(store, copy, tickers, start, end):
    a, b = (arrays_or_error(s, tickers=tickers, start=start, end=end) for s in (store, copy))
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
    else:
        assert_same_arrays(a, b)
    # the same rows; a frame's ticker categories are in the order the files name them
    a, b = (s.read_bars(tickers=tickers, start=start, end=end) for s in (store, copy))
    pd.testing.assert_frame_equal(a.assign(ticker=a["ticker"].astype(str)),
                                  b.assign(ticker=b["ticker"].astype(str)))


def test_a_copy_lists_the_stores_dates_and_files_by_ticker_and_quarter(copied):
    store, copy = copied
    assert copy.layout == "ticker" and store.layout == "date"
    assert copy.dates("bars") == store.dates("bars")
    assert copy.dates("headlines") == store.dates("headlines")
    assert list(copy.ticker_files) == ["AAPL", "MSFT", "NVDA"]
    quarters = {rel.split("/")[2] for rel in copy.manifest["partitions"] if rel.startswith("bars/")}
    assert quarters == {"quarter=2024Q3", "quarter=2024Q4", "quarter=2025Q1"}
    assert copy.manifest["copy_of"] == store.snapshot_sha256
    assert copy.verify() == []
    rel = file_of("AAPL", dt.date(2024, 12, 2))
    meta = pq.ParquetFile(copy.path / rel).metadata
    assert meta.num_row_groups == 1  # the quarter, read whole by the label pass
    assert meta.schema.names == ["ticker", "ts", "open", "high", "low", "close", "volume",
                                 "date"]


@settings(max_examples=40)
@given(data=st.data())
def test_every_read_of_a_copy_is_the_same_read_of_its_store(copied, data):
    store, copy = copied
    dates = store.dates("bars")
    tickers = None if data is None else data.draw(st.one_of(st.none(), st.lists(
        st.sampled_from(["AAPL", "MSFT", "NVDA", "ZZZ"]), min_size=1, max_size=4)))
    first = data.draw(st.integers(-3, len(dates) + 2))
    last = data.draw(st.integers(first, len(dates) + 3))

    def day(i):
        return dates[0] + dt.timedelta(days=i * 3) if i < 0 or i >= len(dates) else dates[i]

    start = data.draw(st.sampled_from([None, day(first)]))
    end = data.draw(st.sampled_from([None, day(last)]))
    assert_same_reads(store, copy, tickers, start, end)
    one = dates[data.draw(st.integers(0, len(dates) - 1))]
    for columns in (("high", "low"), ("open", "high", "low", "close", "volume")):
        a, b = store.read_day_now(one, columns), copy.read_day_now(one, columns)
        assert b.column_names == a.column_names
        assert_same_arrays(store.day_arrays(a), copy.day_arrays(b))
        assert_same_arrays(store.day_arrays(a, tickers=["MSFT"]),
                           copy.day_arrays(b, tickers=["MSFT"]))
        for name in ("MSFT", "ZZZ"):  # one ticker's bars: from its own file in the copy
            a, b = (s.read_day_now(one, columns, ticker=name) for s in (store, copy))
            if name == "ZZZ":
                assert a is None and b is None
                continue
            assert b.column_names == a.column_names
            assert_same_arrays(store.day_arrays(a), copy.day_arrays(b))
            assert list(store.day_arrays(a).bounds) == ["MSFT"]
    assert copy.read_day_now(dt.date(2024, 12, 25), ("high",)) is None  # no session


# America/St_Johns fell back at 00:01 on 2000-10-29 to 23:01 on the 28th: a bar's local date
# goes back, so a ticker's bars in (date, ts) order are not in ts order
ZONES = ["America/St_Johns", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"]
MOMENTS = [pd.Timestamp("2000-10-29 02:00", tz="UTC"), pd.Timestamp("2000-10-01 00:00", tz="UTC"),
           pd.Timestamp("2024-04-06 14:00", tz="UTC"), pd.Timestamp("2024-12-31 20:00", tz="UTC")]


@settings(max_examples=25)
@example(zone="America/St_Johns", moment=MOMENTS[0],  # 00:00 on the 29th, then 23:01 on the 28th
         minutes=[("A", 30), ("A", 31), ("A", 90), ("B", 31)], window=(0, 1), data=None)
@given(zone=st.sampled_from(ZONES), moment=st.sampled_from(MOMENTS),
       minutes=st.lists(st.tuples(st.sampled_from(["A", "B", "b2", "C/D"]),
                                  st.integers(-3000, 3000)), min_size=1, max_size=60),
       window=st.tuples(st.integers(-3, 3), st.integers(0, 4)), data=st.data())
def test_a_copy_in_any_zone_reads_as_its_store(tmp_path_factory, zone, moment, minutes, window,
                                               data):
    root = tmp_path_factory.mktemp("zone")
    keys = sorted(set(minutes))
    ts = pd.DatetimeIndex([moment + pd.Timedelta(minutes=m) for _, m in keys])
    price = np.arange(len(keys), dtype=float) + 10
    bars = pd.DataFrame({"ticker": [t for t, _ in keys], "ts": ts, "open": price,
                         "high": price + 1, "low": price - 1, "close": price,
                         "volume": np.arange(len(keys), dtype=float)})
    store = Store.open_or_create(root / "s", timezone=zone)
    store.add_bars(bars, sources=[{"test": "zones"}])
    if data is None:  # the example: A's bars, read date by date, are out of ts order
        ts = store.read_bars(tickers=["A"])["ts"]
        assert not ts.is_monotonic_increasing
    copy = copy_by_ticker(root / "s", root / "t")
    assert copy.verify() == []
    assert copy.dates("bars") == store.dates("bars")
    dates = store.dates("bars")
    start = dates[0] + dt.timedelta(days=window[0])
    end = start + dt.timedelta(days=window[1])
    tickers = None if data is None else data.draw(st.one_of(st.none(), st.lists(
        st.sampled_from(["A", "b2", "C/D"]), min_size=1)))
    assert_same_reads(store, copy, tickers, start, end)
    assert_same_reads(store, copy, tickers, None, None)
    for day in dates:
        a, b = (s.read_day_now(day, ("high", "low")) for s in (store, copy))
        assert b.column_names == a.column_names
        assert_same_arrays(store.day_arrays(a), copy.day_arrays(b))


def test_a_run_on_a_copy_gives_the_runs_forecasts_and_scores(copied, tmp_path):
    store, copy = copied
    runs = []
    for name, where in (("date", store.path), ("ticker", copy.path)):
        runs.append(run(month_shards_config(tmp_path / f"{name}.toml", where),
                        tmp_path / name, echo=lambda *a: None))
    for file in ("rows.parquet", "scores.parquet", "labels.parquet", "tasks.parquet"):
        assert (runs[0] / file).read_bytes() == (runs[1] / file).read_bytes(), file
    a, b = pq.read_table(runs[0] / "forecasts.parquet"), pq.read_table(
        runs[1] / "forecasts.parquet")
    assert a.drop_columns(["latency"]).equals(b.drop_columns(["latency"]))
    manifest = json.loads((runs[1] / "manifest.json").read_text())
    assert manifest["data"]["snapshot_sha256"] == copy.snapshot_sha256
    assert audit_run(runs[1]) == []  # labels derived again from the copy, its files checked


def test_the_label_pass_reads_a_copy_by_quarter_and_finds_the_same(copied):
    # labels, momentum signs and the daily summaries contexts are made of, from quarter units
    from finbench.tracks.intraday.label_pass import _read_units, resolve
    from tests.test_pipeline import config

    store, copy = copied
    on_store, on_copy = plan_run(config(store.path)), plan_run(config(copy.path))
    a = resolve(on_store, momentum_minutes={30})
    b = resolve(on_copy, momentum_minutes={30})
    pd.testing.assert_frame_equal(b.labels, a.labels)
    pd.testing.assert_frame_equal(b.history, a.history)
    pd.testing.assert_frame_equal(b.daily, a.daily)
    days = ["2024-10-01", "2024-11-15", "2024-12-31", "2025-01-02"]
    spans = [u[3] for u in _read_units(on_copy, days, {}, ("high", "low"), ["AAPL"])]
    assert spans == [("2024-10-01", "2024-12-31"), ("2025-01-01", "2025-01-02")]


@pytest.fixture(scope="module")
def tool_pair(copied):
    """An agent's tools over the store and over its copy."""
    from finbench.tracks.intraday.config import TasksConfig
    from finbench.tracks.intraday.tools import IntradayTools

    spec = TasksConfig(tickers=["AAPL"], start="2025-01-15", end="2025-01-15")
    return [IntradayTools(store, spec) for store in copied]


def same_answer(tool_pair, now, name, args):
    a, b = (tools.call(name, json.dumps(args), now) for tools in tool_pair)
    assert (b.content, b.items, b.max_available, b.refusal) == (
        a.content, a.items, a.max_available, a.refusal)
    return a


@settings(max_examples=60)
@given(call=calls())
def test_an_agents_tools_answer_from_a_copy_what_they_answer_from_its_store(tool_pair, call):
    # any tool, arguments and now (the gate's property test's calls): the same answer
    same_answer(tool_pair, *call)


def test_the_tools_answer_bars_and_sessions_from_a_copy(tool_pair):
    now = pd.Timestamp("2025-01-14 20:00", tz="UTC")
    bars = same_answer(tool_pair, now, "bars", {"ticker": "MSFT", "start": "2025-01-13T09:00",
                                                "end": None, "resolution": "5min"})
    daily = same_answer(tool_pair, now, "daily", {"ticker": "NVDA", "sessions": 10})
    assert bars.items > 100 and daily.items == 10


def test_the_tools_read_a_tickers_own_files_from_a_copy(copied, monkeypatch):
    """On a copy laid out by ticker, a tool asking one ticker's bars or sessions reads that
    ticker's files alone (not every ticker's of the date), and holds them: asked again, it
    reads nothing."""
    import finbench.data.by_ticker as by_ticker
    from finbench.tracks.intraday.config import TasksConfig
    from finbench.tracks.intraday.tools import IntradayTools

    read = []
    whole = by_ticker.read_tickers
    monkeypatch.setattr(by_ticker, "read_tickers", lambda store, tickers, *a: (
        read.append(tickers), whole(store, tickers, *a))[1])
    tools = IntradayTools(copied[1], TasksConfig(tickers=["AAPL"], start="2025-01-15",
                                                 end="2025-01-15"))
    now = pd.Timestamp("2025-01-14 20:00", tz="UTC")
    reads = []
    for _ in range(2):
        assert tools.call("bars", json.dumps({"ticker": "MSFT", "start": "2025-01-13T09:00",
                                              "end": None, "resolution": "5min"}), now).items
        assert tools.call("daily", json.dumps({"ticker": "NVDA", "sessions": 3}), now).items
        reads.append(len(read))
    assert read.count(["MSFT"]) == 2 and read.count(["NVDA"]) == 4  # its dates, once each
    assert reads[1] == reads[0] == len(read)  # asked again: held


def test_the_command_copies_and_the_copy_is_valid(sample_store, tmp_path):
    done = subprocess.run([sys.executable, "-m", "finbench", "data", "copy", str(sample_store),
                           str(tmp_path / "t"), "--layout", "ticker"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    copy = Store(tmp_path / "t")
    assert done.stdout.strip() == (
        f"copied {sample_store} to {tmp_path / 't'}, laid out by ticker: 3 tickers, "
        f"{len(copy.manifest['partitions'])} files; store snapshot {copy.snapshot_sha256}")
    assert "copy: 3/3 quarters" in done.stderr
    checked = subprocess.run([sys.executable, "-m", "finbench", "data", "validate",
                              str(tmp_path / "t")], capture_output=True, text=True)
    assert checked.returncode == 0 and ": valid (SYNTHETIC data); 80 bar dates" in checked.stdout


def test_a_copy_is_never_changed(copied, tmp_path):
    _, copy = copied
    bars = copy.read_bars(start=copy.dates("bars")[0], end=copy.dates("bars")[0])
    for dry_run in (False, True):
        with pytest.raises(StoreError, match="read-only copy .* change the store it was cop"):
            Store(copy.path).add_bars(bars, sources=[], dry_run=dry_run)
    headlines = Store(copy.path).read_headlines()
    with pytest.raises(StoreError, match="read-only copy"):
        Store(copy.path).add_headlines(headlines.head(1), sources=[], dry_run=True)
    with pytest.raises(StoreError, match="laid out by ticker already"):
        copy_by_ticker(copy.path, tmp_path / "again")
    assert not (tmp_path / "again").exists()


def test_a_copy_goes_into_a_new_folder_and_leaves_nothing_on_an_error(sample_store, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(StoreError, match="exists and is not an empty folder"):
        copy_by_ticker(sample_store, tmp_path / "full")
    bars = Store(sample_store).read_bars(tickers=["AAPL"], end=dt.date(2024, 11, 30))
    twins = Store.open_or_create(tmp_path / "twins", synthetic=True)
    twins.add_bars(pd.concat([bars, bars.assign(ticker="aapl")]), sources=[])
    with pytest.raises(StoreError, match="'AAPL' and 'aapl' differ only in case"):
        copy_by_ticker(tmp_path / "twins", tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "twins"]


def test_a_killed_copys_folder_is_removed_by_the_next_copy_and_a_running_ones_kept(
        sample_store, tmp_path):
    """A copy killed with SIGKILL leaves its temporary folder beside the copy's place; the
    next copy to that place removes it (its lock is free) and says so. A folder whose lock
    a process holds (a copy still writing) is left as it is, and so is another place's."""
    from finbench.core.folder_lock import FolderLock

    killed = subprocess.run([sys.executable, "-c", (
        "import os, signal, sys\n"
        "import finbench.data.by_ticker as b\n"
        "write = b._write_file\n"
        "def once(path, table):\n"
        "    write(path, table)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "b._write_file = once\n"
        "b.copy_by_ticker(sys.argv[1], sys.argv[2])\n"), str(sample_store),
        str(tmp_path / "t")], capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".t.copying-"), left
    assert any((tmp_path / left[0]).rglob("part.parquet"))  # what it wrote before the kill
    (tmp_path / ".t.copying-1").mkdir()  # a copy still writing: its lock held
    (tmp_path / ".tt.copying-2").mkdir()  # a copy to another place
    said = []
    with FolderLock(tmp_path / ".t.copying-1", command="a copy"):
        copy = copy_by_ticker(sample_store, tmp_path / "t", echo=said.append)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".t.copying-1", ".tt.copying-2", "t"]
    assert f"copy: removed {tmp_path / left[0]}, left by a copy that was stopped" in said
    assert copy.verify() == [] and not (tmp_path / "t" / ".finbench.lock").exists()
    assert copy.snapshot_sha256 == copy_by_ticker(sample_store, tmp_path / "u").snapshot_sha256
    assert (tmp_path / ".t.copying-1").is_dir()  # a copy to another place leaves it


def test_paths_are_one_spelling_per_ticker():
    assert file_of("BRK/B", dt.date(2025, 5, 1)) == "bars/ticker=BRK%2FB/quarter=2025Q2/part.parquet"
    assert parse_file("bars/ticker=BRK%2FB/quarter=2025Q2/part.parquet") == (
        "BRK/B", dt.date(2025, 4, 1), dt.date(2025, 6, 30))
    assert parse_file("bars/ticker=BRK%2fB/quarter=2025Q2/part.parquet") is None
    assert parse_file("bars/ticker=A/quarter=2025Q5/part.parquet") is None
    assert parse_file("bars/ticker=%5EGSPC/quarter=2024Q4/part.parquet")[0] == "^GSPC"


def relist(copy_path, rel):
    store = Store(copy_path)
    store.manifest["partitions"][rel] = sha256_file(store.path / rel)
    store.manifest["snapshot_sha256"] = snapshot_hash(store.manifest["partitions"],
                                                      store.manifest)
    (store.path / "manifest.json").write_text(json.dumps(store.manifest))


@pytest.mark.parametrize("change, problem", [
    ("ticker", "row 1: ticker 'MSFT' is not the file's ('AAPL')"),
    ("date", "row 21186: the bar at 2024-12-02 09:12:00+00:00 does not start on its date "
             "2024-12-03 in America/New_York"),
    ("order", "row 2: not after the row before in (date, ts) order"),
    ("days", "not after the row before in (date, ts) order"),
    ("quarter", "row 1: date 2025-01-02 is not in the file's quarter"),
    ("statistics", "row group 0: its date statistics are not its dates' least and greatest"),
    ("bar_dates", "manifest.json: bar_dates differs from the dates the files hold (listed, "
                  "no bars: 2024-12-25)"),
    ("bytes", "content hash does not match the manifest"),
])
def test_the_check_names_what_was_changed_in_a_copy(copied, tmp_path, change, problem):
    _, original = copied
    path = tmp_path / "copy"
    shutil.copytree(original.path, path)
    rel = file_of("AAPL", dt.date(2024, 12, 2))
    table = pq.read_table(path / rel)
    at = table.schema.get_field_index
    if change == "ticker":
        table = table.set_column(at("ticker"), "ticker", pa.array(["MSFT"] * table.num_rows))
    elif change == "date":
        dates = table.column("date").to_pylist()
        table = table.set_column(at("date"), "date", pa.array(
            [dt.date(2024, 12, 3) if d == dt.date(2024, 12, 2) else d for d in dates],
            pa.date32()))
    elif change == "order":
        table = table.take([1, 0, *range(2, table.num_rows)])
    elif change == "days":  # the first two dates' bars swapped, each date's in order
        days = np.array(table.column("date").to_pylist())
        one, two = (np.flatnonzero(days == d) for d in sorted(set(days))[:2])
        table = table.take(np.r_[two, one, np.arange(len(one) + len(two), len(days))])
    elif change == "quarter":
        table = table.set_column(at("date"), "date", pa.array(
            [dt.date(2025, 1, 2)] + table.column("date").to_pylist()[1:], pa.date32()))
    if change == "statistics":  # written without: a read of a range takes every group
        pq.write_table(table, path / rel, write_statistics=False)
    elif change == "bar_dates":
        manifest = json.loads((path / "manifest.json").read_text())
        manifest["bar_dates"] = sorted([*manifest["bar_dates"], "2024-12-25"])
        manifest["snapshot_sha256"] = snapshot_hash(manifest["partitions"], manifest)
        (path / "manifest.json").write_text(json.dumps(manifest))
    elif change == "bytes":
        (path / rel).write_bytes((path / rel).read_bytes()[:-3] + b"xyz")
    else:
        pq.write_table(table, path / rel)
    if change not in ("bar_dates", "bytes"):
        relist(path, rel)
    problems = Store(path).verify()
    assert any(problem in p for p in problems), problems
    if change != "bar_dates":
        assert all(p.startswith(rel) for p in problems if "bar_dates" not in p), problems
