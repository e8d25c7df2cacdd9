"""A change to a store is whole or not made, and one process changes a store at a time
(finbench.data.commit): a process killed while moving new partitions into place left files
the manifest did not describe, and two ingests through stale views lost each other's
partitions from the manifest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from finbench.core.errors import StoreError
from finbench.data.commit import COMMIT, store_lock
from finbench.data.ingest import ingest_bars
from finbench.data.store import Store
from finbench.tracks.events.store import EventStore
from tests.event_helpers import make_store, market
from tests.helpers import HEADER, cli, write

ROOT = Path(__file__).resolve().parents[1]
DAY1 = "AAPL,2025-01-15T14:30:00Z,100,101,99,100.5,10\n"
DAY2 = "AAPL,2025-01-16T14:30:00Z,100,101,99,100.5,10\n"


def _store(tmp_path: Path) -> Path:
    ingest_bars(write(tmp_path / "seed.csv", HEADER + DAY1 + DAY2), tmp_path / "store")
    return tmp_path / "store"


def _killed_while_moving(code: str, after: int = 1) -> None:
    """Run ``code`` in a new process that is killed (SIGKILL: no clean-up runs) right after
    its ``after``-th move of a partition file into place (a ``part.parquet`` or event-store
    file replaced by ``os.replace``)."""
    hook = textwrap.dedent(f"""
        import os, signal
        _replace, _moved = os.replace, [0]
        def replace(src, dst, *a, **k):
            _replace(src, dst, *a, **k)
            if str(dst).endswith(".parquet"):
                _moved[0] += 1
                if _moved[0] == {after}:
                    os.kill(os.getpid(), signal.SIGKILL)
        os.replace = replace
    """)
    done = subprocess.run([sys.executable, "-c", hook + textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == -9, done.stderr  # killed where it was meant to be


def test_an_ingest_killed_between_partitions_is_finished_by_the_next_opening(tmp_path):
    """Two partitions changed at once, the process killed after moving the first: the store
    then held the new bars of one day under the old manifest (hash and snapshot stale: a run
    read them as the old snapshot). Now the next opening finishes the change."""
    store = _store(tmp_path)
    before = Store(store).snapshot_sha256
    new = write(tmp_path / "new.csv", HEADER + DAY1.replace(",10\n", ",77\n")
                + DAY2.replace(",10\n", ",88\n"))
    _killed_while_moving(f"""
        from finbench.data.ingest import ingest_bars
        ingest_bars({str(new)!r}, {str(store)!r})
    """)
    assert (store / COMMIT).is_file()
    reopened = Store(store)  # finishes the change
    assert not (store / COMMIT).exists()
    assert reopened.verify() == []
    assert reopened.snapshot_sha256 != before
    bars = reopened.read_bars()
    assert sorted(bars["volume"].tolist()) == [77, 88]  # both days new: the change is whole
    assert Store(store).manifest == reopened.manifest  # nothing left to do


def test_an_ingest_killed_before_its_decision_leaves_the_store_as_it_was(tmp_path):
    store = _store(tmp_path)
    manifest = (store / "manifest.json").read_bytes()
    new = write(tmp_path / "new.csv", HEADER + DAY1.replace(",10\n", ",77\n"))
    hook = f"""
        import os, signal
        import finbench.data.store as s
        def killed(*a, **k):
            os.kill(os.getpid(), signal.SIGKILL)
        s.commit = killed  # every partition written and hashed, nothing decided
        from finbench.data.ingest import ingest_bars
        ingest_bars({str(new)!r}, {str(store)!r})
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(hook)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == -9, done.stderr
    reopened = Store(store)
    assert (store / "manifest.json").read_bytes() == manifest
    assert reopened.verify() == []
    assert reopened.read_bars()["volume"].tolist() == [10, 10]
    ingest_bars(new, store)  # the next change writes over what was left
    assert Store(store).read_bars()["volume"].tolist() == [77, 10]
    assert not list(store.rglob("*.tmp"))


def test_two_views_of_a_store_lose_nothing(tmp_path):
    """Two processes opened a store, each ingested a day: the second wrote its manifest from
    its own view, and the first's partition was no longer listed (its bars gone from every
    run). Each change now merges into the manifest read again under the store's lock."""
    ingest_bars(write(tmp_path / "seed.csv", HEADER + DAY1), tmp_path / "store")
    store = tmp_path / "store"
    early, late = Store(store), Store(store)
    day2 = pd.DataFrame({"ticker": ["MSFT"], "ts": [pd.Timestamp("2025-01-16T14:30Z")],
                         "open": [1.0], "high": [1.0], "low": [1.0], "close": [1.0],
                         "volume": [1.0]})
    day3 = day2.assign(ts=[pd.Timestamp("2025-01-17T14:30Z")])
    late.add_bars(day2, sources=[])
    early.add_bars(day3, sources=[])  # its view predates day 2
    final = Store(store)
    assert [d.isoformat() for d in final.dates("bars")] == [
        "2025-01-15", "2025-01-16", "2025-01-17"]
    assert final.verify() == []


def test_a_store_being_changed_refuses_a_second_change_naming_the_holder(tmp_path):
    store = _store(tmp_path)
    new = write(tmp_path / "new.csv", HEADER + DAY1.replace(",10\n", ",77\n"))
    with store_lock(store, "finbench data ingest (another)"):
        with pytest.raises(StoreError, match=rf"{store}: in use by process {os.getpid()} "
                                             r"\(finbench data ingest \(another\)"):
            ingest_bars(new, store)
        said = cli("data", "ingest", new, "--out", store)
        assert said.returncode == 2 and "StoreError: " in said.stderr and "in use by process" in said.stderr
        assert cli("data", "ingest", new, "--out", store, "--dry-run").returncode == 0
    assert Store(store).read_bars()["volume"].tolist() == [10, 10]


def test_new_partitions_are_synced_before_the_change_is_recorded(tmp_path, monkeypatch):
    """The new partitions were not fsynced before commit.json: a machine losing power after
    the record could find a listed partition empty. Now each is synced first."""
    import finbench.data.commit as commit_module

    store = _store(tmp_path)
    events = []
    sync, record = commit_module.sync_file, commit_module.write_json
    monkeypatch.setattr(commit_module, "sync_file",
                        lambda path: (events.append(Path(path).name), sync(path)))
    monkeypatch.setattr(commit_module, "write_json",
                        lambda path, plan: (events.append(Path(path).name), record(path, plan)))
    ingest_bars(write(tmp_path / "two.csv", HEADER + DAY1.replace(",10\n", ",77\n") + DAY2),
                store)
    assert sorted(events[:2]) == ["part.parquet.tmp", "part.parquet.tmp"]
    assert events[2:4] == [COMMIT, COMMIT]  # the record written, then synced
    assert sorted(Store(store).read_bars()["volume"]) == [10, 77]


def test_a_fetch_log_is_appended_holding_the_stores_lock(tmp_path):
    """fetch's provenance lines were appended outside the store's lock: two fetches could
    interleave their lines. Now they are appended holding it, whole."""
    store = _store(tmp_path)
    Store(store).append_log("fetched.jsonl", ['{"key": "a"}', '{"key": "b"}'])
    with store_lock(store, "finbench data fetch (another)"):
        with pytest.raises(StoreError, match=r"in use by process .*data fetch \(another\)"):
            Store(store).append_log("fetched.jsonl", ['{"key": "c"}'])
    assert (store / "fetched.jsonl").read_text() == '{"key": "a"}\n{"key": "b"}\n'


def test_a_change_being_made_is_named_by_validate_and_refused_by_copy(tmp_path):
    """A reader meeting a change that a live process is making leaves it to that process;
    validate names it and a copy waits for it."""
    store = _store(tmp_path)
    with store_lock(store, "finbench data ingest (live)"):
        (store / COMMIT).write_text("{}")
        problems = Store(store).verify()
        assert problems[0].startswith(f"{COMMIT}: a change to the store is not finished")
        said = cli("data", "copy", store, tmp_path / "copy")
        assert said.returncode == 2 and "a change to the store is being made" in said.stderr
        assert not (tmp_path / "copy").exists()
    (store / COMMIT).unlink()


def test_a_damaged_commit_record_is_named_not_guessed_at(tmp_path):
    store = _store(tmp_path)
    (store / COMMIT).write_text(json.dumps({"format": "finbench-store-commit",
                                            "manifest_name": "manifest.json", "manifest": {},
                                            "moves": [["../x.tmp", "bars/x"]],
                                            "removals": []}))
    with pytest.raises(StoreError, match=rf"{store / COMMIT}: cannot be read \('../x.tmp' is "
                                         r"not a path inside the store\).*restore the store"):
        Store(store)


def test_a_copy_finishes_a_change_a_killed_process_left(tmp_path):
    store = _store(tmp_path)
    new = write(tmp_path / "new.csv", HEADER + DAY1.replace(",10\n", ",77\n")
                + DAY2.replace(",10\n", ",88\n"))
    _killed_while_moving(f"""
        from finbench.data.ingest import ingest_bars
        ingest_bars({str(new)!r}, {str(store)!r})
    """)
    said = cli("data", "copy", store, tmp_path / "copy")
    assert said.returncode == 0, said.stderr
    assert not (tmp_path / "copy" / COMMIT).exists()
    copy = Store(tmp_path / "copy")
    assert copy.verify() == [] and sorted(copy.read_bars()["volume"]) == [77, 88]


def test_an_event_ingest_killed_between_files_is_finished_by_the_next_opening(tmp_path):
    folder = tmp_path / "events"
    store = make_store(folder, [market(1, "YES", resolved="2024-05-01T12:00:00Z")])
    more = [market(1, "NO", resolved="2024-05-01T12:00:00Z"),
            market(2, "YES", resolved="2024-06-01T12:00:00Z")]
    pd.DataFrame(more).to_csv(folder / "more.csv", index=False)
    prices = pd.DataFrame({"market_id": ["q0001", "q0002"],
                           "time": ["2024-04-20T00:00:00Z", "2024-05-20T00:00:00Z"],
                           "price": [0.3, 0.6]})
    prices.to_csv(folder / "more_prices.csv", index=False)
    _killed_while_moving(f"""
        from finbench.tracks.events.store import EventStore
        EventStore({str(store)!r}).add_markets({str(folder / "more.csv")!r},
                                               {str(folder / "more_prices.csv")!r})
    """)
    assert (store / COMMIT).is_file()
    reopened = EventStore(store)
    assert not (store / COMMIT).exists() and reopened.verify() == []
    assert reopened.markets()["outcome"].tolist() == ["NO", "YES"]
    assert sorted(reopened.prices()["price"].tolist()) == [0.3, 0.6]


def test_a_change_left_on_a_store_that_cannot_be_written_here_is_named(tmp_path, monkeypatch):
    """A store whose change a killed process left, opened where it cannot be written (a
    read-only disk): its files are half changed, so it is refused, saying how to finish it."""
    import errno

    import finbench.core.folder_lock as folder_lock

    store = _store(tmp_path)
    new = write(tmp_path / "new.csv", HEADER + DAY1.replace(",10\n", ",77\n")
                + DAY2.replace(",10\n", ",88\n"))
    _killed_while_moving(f"""
        from finbench.data.ingest import ingest_bars
        ingest_bars({str(new)!r}, {str(store)!r})
    """)

    def read_only(self):  # the lock file cannot be opened for writing
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(folder_lock.FolderLock, "__enter__", read_only)
    with pytest.raises(StoreError, match=rf"{store}: a change to the store was left unfinished "
                                         r"\(commit.json\) and cannot be finished here "
                                         r"\(\[Errno 30\] Read-only file system\); open the "
                                         "store once where it can be written"):
        Store(store)
    monkeypatch.undo()
    assert sorted(Store(store).read_bars()["volume"]) == [77, 88]


def test_a_store_changed_while_a_run_reads_it_stops_the_run(tmp_path, sample_copy,
                                                            monkeypatch):
    """A run read its store's partitions over its label pass while another process could
    replace them: the run recorded the snapshot it opened and could have read a day's new
    bars under it. Now a run whose partitions read were replaced meanwhile stops, naming
    them; one whose store gained partitions it did not read goes on."""
    import finbench.tracks.intraday.track as track_module
    from finbench.runner import run
    from tests.helpers import aapl_config, baselines_toml

    config = aapl_config(tmp_path / "c.toml", sample_copy, baselines_toml("coin", "base_rate"),
                         start="2025-01-13", end="2025-01-14")
    label = track_module.IntradayTrack.label
    change = {}

    def label_then_changed(self, **kwargs):
        labels = label(self, **kwargs)
        ingest_bars(write(tmp_path / f"{len(change)}.csv", change["bars"]), sample_copy)
        return labels

    monkeypatch.setattr(track_module.IntradayTrack, "label", label_then_changed)
    change["bars"] = HEADER + "AAPL,2025-01-22T14:30:00Z,100,101,99,100.5,10\n"  # a new day
    run(config, tmp_path / "a", echo=lambda *a: None)
    assert (tmp_path / "a" / "scores.csv").is_file()
    change["bars"] = HEADER + "AAPL,2025-01-14T15:00:00Z,100,101,99,100.5,10\n"  # one it read
    with pytest.raises(StoreError, match=rf"{sample_copy}: changed while it was read \(1 "
                                         r"partition\(s\) read were replaced or removed "
                                         r"\(bars/date=2025-01-14/part.parquet\)\)"):
        run(config, tmp_path / "b", echo=lambda *a: None)
    assert not (tmp_path / "b" / "scores.csv").exists()
