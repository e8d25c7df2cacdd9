"""Partitions read ahead (finbench.data.read_ahead): each date handed over once, read here or
by the caller, never twice; the budget holds; a failed read is raised to whoever takes its
date; and the label pass gives the same labels with the store's dates read ahead or not."""

import datetime as dt
import threading
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from finbench.core.errors import StoreError
from finbench.data.read_ahead import ReadAhead
from finbench.data.store import Store
from finbench.tracks.configs import load_config_file
from finbench.tracks.intraday.label_pass import resolve
from finbench.tracks.intraday.plan import plan_run
from tests.helpers import aapl_config, baselines_toml, scripted_toml, write

DAYS = [dt.date(2025, 1, d) for d in range(1, 11)]


class Reads:
    """A reader of made-up tables (``rows`` rows of three int64 columns: 24 bytes a row),
    counting its reads, that can be held at a date until let go."""

    def __init__(self, rows=1000, fail=None, hold=None):
        self.rows, self.fail, self.hold = rows, fail, hold
        self.calls: list[dt.date] = []
        self.go = threading.Event()

    def __call__(self, day):
        self.calls.append(day)
        if day == self.hold:
            self.go.wait(10)
        if day == self.fail:
            raise StoreError(f"{day}: cannot be read")
        n = np.full(self.rows, day.day, np.int64)
        return pa.table({"ticker": n, "ts": n, "high": n})


def settle(ahead: ReadAhead, reads: Reads, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(reads.calls) < count and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.05)  # and no further read comes


def test_every_date_is_handed_over_once_in_order_of_reading():
    reads = Reads()
    ahead = ReadAhead(reads, DAYS, ("high",))
    settle(ahead, reads, len(DAYS))  # all read (a date not begun would be the caller's)
    got = [ahead.take(day) for day in DAYS]
    assert [t.column("ts")[0].as_py() for t in got] == [d.day for d in DAYS]
    assert reads.calls == DAYS
    assert ahead.take(DAYS[0]) is False  # handed over once: then the caller reads it
    ahead.close()


def test_a_date_not_begun_is_the_caller_s_and_never_read_here():
    reads = Reads(hold=DAYS[0])
    ahead = ReadAhead(reads, DAYS, ("high",))
    settle(ahead, reads, 1)  # the thread is held in the first read
    assert ahead.take(DAYS[5]) is False  # not begun: the caller reads it
    assert ahead.take(dt.date(2024, 12, 31)) is False  # never to be read here
    reads.go.set()
    settle(ahead, reads, 9)
    assert [ahead.take(d).column("ts")[0].as_py() for d in DAYS if d != DAYS[5]] == [
        d.day for d in DAYS if d != DAYS[5]]
    assert DAYS[5] not in reads.calls and len(reads.calls) == 9
    ahead.close()


def test_the_thread_stops_at_the_budget_until_a_table_is_taken():
    reads = Reads(rows=1000)  # 24,000 bytes a table
    ahead = ReadAhead(reads, DAYS, ("high",), budget=3 * 24_000)
    settle(ahead, reads, 3)
    assert reads.calls == DAYS[:3]
    ahead.take(DAYS[0])
    settle(ahead, reads, 4)
    assert reads.calls == DAYS[:4]
    ahead.close()
    assert not any(t.is_alive() for t in ahead._threads)


def test_a_failed_read_is_raised_to_whoever_takes_its_date():
    reads = Reads(fail=DAYS[2])
    ahead = ReadAhead(reads, DAYS, ("high",))
    settle(ahead, reads, 3)  # the read of the third date has been made (and failed)
    assert ahead.take(DAYS[0]).num_rows == 1000
    with pytest.raises(StoreError, match="2025-01-03: cannot be read"):
        ahead.take(DAYS[2])
    assert ahead.take(DAYS[3]).num_rows == 1000  # the others are read on
    ahead.close()


def test_close_lets_go_of_what_was_not_taken_and_reads_no_more():
    reads = Reads(hold=DAYS[1])
    ahead = ReadAhead(reads, DAYS, ("high",))
    settle(ahead, reads, 2)
    closing = threading.Thread(target=ahead.close)
    closing.start()
    reads.go.set()
    closing.join(10)
    assert not any(t.is_alive() for t in ahead._threads) and reads.calls == DAYS[:2]
    assert ahead.take(DAYS[0]) is False


def test_several_readers_read_each_date_once_at_the_same_time_and_hand_over_in_order():
    """From object storage a read is mostly a round trip's wait: several threads read at
    once, each date once, and the dates are handed over as the caller asks for them; a
    failed read is raised to whoever takes its date, as with one reader."""
    lock, now, most, calls = threading.Lock(), [0], [0], []
    together = threading.Barrier(4, timeout=10)  # the first four reads are made at once

    def read(day):
        with lock:
            calls.append(day)
            now[0] += 1
            most[0] = max(most[0], now[0])
        if day in DAYS[:4]:
            together.wait()  # broken (an error for those dates) unless four are in at once
        time.sleep(0.01)  # the wait for an answer
        with lock:
            now[0] -= 1
        if day == DAYS[6]:
            raise StoreError(f"{day}: cannot be read")
        return pa.table({"ts": np.full(10, day.day, np.int64)})

    ahead = ReadAhead(read, DAYS, ("high",), readers=4)
    deadline = time.monotonic() + 10
    while len(calls) < 4 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert most[0] == 4  # the first four at once, and no fifth meanwhile
    got = []
    for day in DAYS:  # as the store takes them: a date not begun is the caller's to read
        try:
            table = ahead.take(day)
            got.append(read(day) if table is False else table)
        except StoreError as exc:
            got.append(str(exc))
    assert [g if isinstance(g, str) else g.column("ts")[0].as_py() for g in got] == [
        "2025-01-07: cannot be read" if d == DAYS[6] else d.day for d in DAYS]
    assert sorted(calls) == DAYS  # each date read once
    ahead.close()
    assert not any(t.is_alive() for t in ahead._threads)


def test_the_store_hands_over_the_columns_asked_and_reads_the_others_itself(sample_store):
    store = Store(sample_store)
    days = store.dates("bars")[-5:]
    plain = {d: store.read_day_table(d, columns=("high", "low")) for d in days}
    full = {d: store.read_day_table(d, columns=("open", "high", "low", "close", "volume"))
            for d in days}
    read, by = store._read_day, {}

    def counted(day, columns):
        by.setdefault(day, []).append(threading.current_thread().name)
        return read(day, columns)

    store._read_day = counted
    store.read_ahead(days, ("open", "high", "low", "close", "volume"))
    deadline = time.monotonic() + 10
    while days[0] not in by and time.monotonic() < deadline:  # begun by the read-ahead
        time.sleep(0.005)
    assert store.read_day_table(days[0], columns=("high", "low")).equals(plain[days[0]])
    assert by[days[0]] == ["read-ahead"]  # read once, by the read-ahead's thread
    assert store.read_day_table(days[1], columns=("open", "high", "low", "close",
                                                  "volume")).equals(full[days[1]])
    assert store.read_day_table(dt.date(2020, 1, 2)) is None  # no partition: none
    store.stop_reading_ahead()
    assert store.read_day_table(days[2], columns=("high", "low")).equals(plain[days[2]])
    store.read_ahead(days, ("high", "low"))  # columns it does not read: read by the caller
    assert store.read_day_table(days[3], columns=("open", "high", "low", "close",
                                                  "volume")).equals(full[days[3]])
    store.stop_reading_ahead()


@pytest.mark.parametrize("models", [("coin", "momentum", "climatology"), ("coin", "scripted")])
def test_the_labels_are_the_same_read_ahead_or_not(tmp_path, sample_store, models):
    body = (baselines_toml(*[m for m in models if m != "scripted"])
            + (scripted_toml(scripted="{}") if "scripted" in models else ""))
    cfg = write(tmp_path / "cfg.toml", f'[data]\nstore = "{sample_store}"\n[tasks]\n'
                'tickers = ["AAPL", "MSFT", "NVDA"]\nstart = "2024-12-02"\n'
                f'end = "2025-01-15"\n{body}')
    config = load_config_file(cfg)[0]
    got = []
    for ahead in (False, True):
        plan = plan_run(config, read_ahead=ahead)
        assert (plan.store._ahead is not None) == ahead
        resolved = resolve(plan, momentum_minutes=(30,), daily="scripted" in models)
        assert plan.store._ahead is None  # stopped by the label pass
        got.append(resolved)
    pd.testing.assert_frame_equal(got[0].history, got[1].history)
    pd.testing.assert_frame_equal(got[0].daily, got[1].daily)


def test_a_run_failing_before_its_label_pass_stops_reading_ahead(tmp_path, sample_store,
                                                                  monkeypatch):
    """The track's reads begin when it is opened; a run that fails before it reads them (here
    a replay file that is not there, found when its forecasters are built) stops them."""
    from finbench.core.errors import DataError
    from finbench.data import read_ahead
    from finbench.runner import run

    monkeypatch.setattr(read_ahead, "BUDGET", 1)  # one date read, then it waits
    cfg = aapl_config(tmp_path / "cfg.toml", sample_store, baselines_toml("coin")
                      + '[[models]]\nname = "replayed"\nkind = "replay"\npath = "not-there.csv"\n',
                      start="2024-12-02")
    with pytest.raises(DataError, match="not-there.csv: no such file"):
        run(cfg, tmp_path / "out", echo=lambda *_: None)
    assert not [t for t in threading.enumerate() if t.name == "read-ahead"]


def test_a_plan_that_fails_stops_the_reads_it_began(tmp_path, sample_store, monkeypatch):
    from finbench.data import read_ahead
    from finbench.tracks.intraday import plan

    def failing(*args, **kwargs):
        raise RuntimeError("no tasks")

    monkeypatch.setattr(read_ahead, "BUDGET", 1)
    monkeypatch.setattr(plan, "build_tasks", failing)
    cfg = aapl_config(tmp_path / "cfg.toml", sample_store, baselines_toml("coin"),
                      start="2024-12-02")
    with pytest.raises(RuntimeError, match="no tasks"):
        plan.plan_run(load_config_file(cfg)[0], read_ahead=True)
    assert not [t for t in threading.enumerate() if t.name == "read-ahead"]
