"""Hand-computed labels on a tiny bars file (2025-01-15: 09:30 ET = 14:30 UTC)."""

import math

import pandas as pd
import pytest

from finbench.data.bars import BarArrays
from finbench.data.ingest import ingest_bars
from finbench.data.store import Store
from finbench.tracks.intraday.config import TasksConfig
from finbench.tracks.intraday.labels import compute_labels
from finbench.tracks.intraday.tasks import build_tasks
from tests.helpers import HEADER, bar_rows, write

DAY = "2025-01-15"
AAPL = [  # (bar start UTC, high, low)
    ("2025-01-15T14:28:00Z", 90.2, 89.8),   # ends 14:29: outside the 30 s window of 14:30
    ("2025-01-15T14:29:00Z", 100.2, 99.8),  # ends 14:30: MORNING reference, mid 100.0
    ("2025-01-15T14:30:00Z", 150.0, 150.0),  # ends 14:31: the trap, not known at 14:30
    ("2025-01-15T17:29:00Z", 101.0, 100.0),  # ends 17:30: MIDDAY reference, mid 100.5
    ("2025-01-15T17:30:00Z", 200.0, 200.0),  # trap
    ("2025-01-15T20:29:00Z", 102.5, 101.5),  # ends 20:30: CLOSE reference, mid 102.0
    ("2025-01-15T20:54:00Z", 102.1, 101.9),  # ends 20:55: target, mid 102.0
    ("2025-01-15T20:55:00Z", 300.0, 300.0),  # trap
]
MSFT = [  # no bar ending at 14:30, nor at 20:55
    ("2025-01-15T14:28:00Z", 50.0, 50.0),
    ("2025-01-15T17:29:00Z", 51.0, 51.0),
    ("2025-01-15T20:53:00Z", 52.0, 52.0),
]


def labels_for(store, tickers=("AAPL", "MSFT")):
    spec = TasksConfig(tickers=list(tickers), start=DAY, end=DAY)
    tasks = build_tasks(spec).tasks
    s = Store(store)
    bars = BarArrays.from_frame(s.read_bars(), bar_seconds=s.bar_seconds)
    return compute_labels(tasks, bars).set_index("task_id")


@pytest.fixture
def labels(tmp_path):
    f = write(tmp_path / "bars.csv", HEADER + bar_rows("AAPL", AAPL) + bar_rows("MSFT", MSFT))
    ingest_bars(f, tmp_path / "store")
    return labels_for(tmp_path / "store")


def test_reference_is_the_bar_ending_exactly_at_the_horizon(labels):
    row = labels.loc["AAPL|2025-01-15|MORNING"]
    assert row["p_ref"] == pytest.approx(100.0)
    assert row["p_target"] == pytest.approx(102.0)
    assert row["r"] == pytest.approx(math.log(102.0 / 100.0))
    assert row["y"] == 1
    assert row["ref_bar_ts"] == pd.Timestamp("2025-01-15 14:29", tz="UTC")
    assert row["target_bar_ts"] == pd.Timestamp("2025-01-15 20:54", tz="UTC")


def test_midday_reference_is_the_bar_that_started_1229(labels):
    row = labels.loc["AAPL|2025-01-15|MIDDAY"]
    assert row["p_ref"] == pytest.approx(100.5)  # not 200 from the bar starting 12:30
    assert row["r"] == pytest.approx(math.log(102.0 / 100.5))


def test_tie_counts_as_down(labels):
    row = labels.loc["AAPL|2025-01-15|CLOSE"]
    assert row["r"] == 0.0 and row["y"] == 0 and row["status"] == "ok"


def test_when_reference_bar_missing_then_no_reference_price(labels):
    row = labels.loc["MSFT|2025-01-15|MORNING"]
    assert row["status"] == "no_reference_price" and pd.isna(row["y"]) and pd.isna(row["r"])


def test_when_target_bar_missing_then_no_target_price(labels):
    row = labels.loc["MSFT|2025-01-15|MIDDAY"]
    assert row["status"] == "no_target_price" and row["p_ref"] == pytest.approx(51.0)


def test_regular_hours_only_data_has_no_0930_reference(tmp_path):
    regular = [b for b in AAPL if b[0] >= "2025-01-15T14:30"]
    f = write(tmp_path / "bars.csv", HEADER + bar_rows("AAPL", regular))
    ingest_bars(f, tmp_path / "store")
    labels = labels_for(tmp_path / "store", ("AAPL",))
    assert labels.loc["AAPL|2025-01-15|MORNING", "status"] == "no_reference_price"
    assert labels.loc["AAPL|2025-01-15|MIDDAY", "status"] == "ok"


def test_end_stamped_source_gives_the_same_labels(tmp_path, labels):
    shifted = [((pd.Timestamp(ts) + pd.Timedelta(minutes=1)).isoformat(), h, lo)
               for ts, h, lo in AAPL + []]
    shifted_msft = [((pd.Timestamp(ts) + pd.Timedelta(minutes=1)).isoformat(), h, lo)
                    for ts, h, lo in MSFT]
    f = write(tmp_path / "end.csv", HEADER + bar_rows("AAPL", shifted)
              + bar_rows("MSFT", shifted_msft))
    ingest_bars(f, tmp_path / "end_store", bar_timestamp="end")
    pd.testing.assert_frame_equal(labels_for(tmp_path / "end_store"), labels)


def test_naive_eastern_source_with_timezone_gives_the_same_labels(tmp_path, labels):
    def naive_et(rows):
        return [(pd.Timestamp(ts).tz_convert("America/New_York").strftime("%Y-%m-%d %H:%M:%S"),
                 h, lo) for ts, h, lo in rows]

    f = write(tmp_path / "et.csv", HEADER + bar_rows("AAPL", naive_et(AAPL))
              + bar_rows("MSFT", naive_et(MSFT)))
    ingest_bars(f, tmp_path / "et_store", timezone="America/New_York")
    pd.testing.assert_frame_equal(labels_for(tmp_path / "et_store"), labels)
