"""The synthetic sample: reproducible bit for bit, labelled synthetic, with its planted features."""

import numpy as np

from finbench.data.store import Store
from finbench.data.synth import write_sample


def test_synth_is_bit_for_bit_reproducible_and_equals_the_committed_sample(tmp_path, sample_store):
    a = write_sample(tmp_path / "a")
    assert a.snapshot_sha256 == Store(sample_store).snapshot_sha256
    assert a.manifest["partitions"] == Store(sample_store).manifest["partitions"]


def test_sample_says_synthetic_and_validates(sample_store):
    store = Store(sample_store)
    assert store.synthetic and "SYNTHETIC" in store.manifest["description"]
    assert len(store.dates("bars")) == 80 and store.dates("bars")[-1].isoformat() == "2025-01-15"


def test_sample_has_sparse_extended_hours_gaps_and_a_halt(sample_store):
    bars = Store(sample_store).read_bars()
    local = bars["ts"].dt.tz_convert("America/New_York")
    hhmm = local.dt.strftime("%H:%M")
    days = local.dt.date.nunique() * 3
    share_0929 = (hhmm == "09:29").sum() / days
    assert 0.75 < share_0929 < 1.0  # usually, not always
    assert hhmm.min() >= "04:00" and hhmm.max() < "20:00"
    regular = (hhmm >= "09:30") & (hhmm < "16:00")
    assert regular.mean() > 0.6
    nvda_halt = bars[(bars["ticker"] == "NVDA") & (local.dt.strftime("%Y-%m-%d") == "2024-12-10")]
    halted = nvda_halt["ts"].dt.tz_convert("America/New_York").dt.strftime("%H:%M")
    assert not ((halted >= "13:05") & (halted < "13:35")).any()
    # U-shaped volatility: absolute 1-min returns larger near open/close than at midday
    aapl = bars[(bars["ticker"] == "AAPL") & regular].copy()
    aapl["ret"] = np.log(aapl["close"] / aapl["open"]).abs()
    minute = hhmm[aapl.index]
    assert aapl["ret"][minute < "10:00"].mean() > 1.5 * aapl["ret"][
        (minute >= "12:00") & (minute < "13:00")].mean()


def test_sample_store_verifies_clean(sample_store):
    assert Store(sample_store).verify() == []
