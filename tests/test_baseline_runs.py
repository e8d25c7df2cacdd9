"""Baselines in runs: an answer is a function of its task and the store alone, whatever the
run's dates or shard, and a baseline that lacks history falls back or abstains, with the
reason, never becoming an invalid answer."""

import datetime as dt
import json

import pandas as pd
import pytest

from finbench.audit import audit_run
from finbench.data.ingest import ingest_bars
from finbench.data.store import Store
from finbench.runner import run
from finbench.shards import merge_shards
from tests.helpers import aapl_config, baselines_toml

BASELINES = baselines_toml("coin", "base_rate") + """[[models]]
name = "short_rate"
kind = "base_rate"
window = 10
min_count = 5
[[models]]
name = "momentum"
kind = "momentum"
window = 10
min_count = 5
[[models]]
name = "climatology"
kind = "climatology"
window = 10
min_count = 5
"""


def config(path, store, start, end, tickers=("AAPL", "MSFT", "NVDA")):
    path.write_text(f"""
[data]
store = "{store}"
[tasks]
tickers = {json.dumps(list(tickers))}
start = "{start}"
end = "{end}"
{BASELINES}""")
    return path


def rows(run_dir, task_ids=None) -> pd.DataFrame:
    """Forecast rows (all but the measured latency), of ``task_ids`` if given."""
    frame = pd.read_parquet(run_dir / "forecasts.parquet").drop(columns=["latency"])
    if task_ids is not None:
        frame = frame[frame["task_id"].isin(task_ids)]
    return frame.sort_values(["model", "task_id"]).reset_index(drop=True)


def quiet(*_):
    return None


def test_a_task_gets_the_same_baseline_rows_in_the_pilot_a_long_run_and_a_shard(
        tmp_path, sample_store):
    """The pilot's history once began a fixed 60 sessions back, and early closes and
    unscorable labels left base_rate's window short: AAPL|2025-01-15|MORNING got 0.2549 from
    51 labels in the pilot, 0.2667 from 60 in a run starting 2024-12-02."""
    pilot = run(config(tmp_path / "pilot.toml", sample_store, "2025-01-15", "2025-01-15"),
                tmp_path / "pilot", echo=quiet)
    long = config(tmp_path / "long.toml", sample_store, "2024-12-02", "2025-01-15")
    whole = run(long, tmp_path / "long", echo=quiet)
    shard = run(long, tmp_path / "shard", echo=quiet, shard=("2025-01-14", "2025-01-15"))
    ids = pd.read_parquet(pilot / "tasks.parquet")["task_id"]
    want = rows(pilot)
    assert len(want) == 9 * 5
    pd.testing.assert_frame_equal(rows(whole, ids), want)
    pd.testing.assert_frame_equal(rows(shard, ids), want)
    aapl = want[(want["model"] == "base_rate") & (want["task_id"] == "AAPL|2025-01-15|MORNING")]
    detail = json.loads(aapl["detail"].iloc[0])
    assert aapl["history_count"].iloc[0] == 60 and aapl["p_up"].iloc[0] == pytest.approx(16 / 60)
    # its window reaches back past two early closes and eight unscorable labels
    assert (detail["window_first"], detail["window_last"]) == ("2024-10-03", "2025-01-13")
    assert (detail["skipped_early_close"], detail["skipped_unscorable"],
            detail["skipped_not_known"]) == (2, 8, 0)


def test_the_forecast_table_joined_from_parts_is_synced_before_the_run_is_recorded(
        tmp_path, sample_store, monkeypatch):
    """A baselines-only run's forecast table is written without fsync and synced while the
    run scores: before the manifest records the run's files (its finish)."""
    import finbench.runner.steps as steps_module

    events = []
    real_sync, real_write = steps_module.sync_file, steps_module.write_json
    monkeypatch.setattr(steps_module, "sync_file",
                        lambda path: (events.append(("synced", path.name)), real_sync(path)))
    monkeypatch.setattr(steps_module, "write_json", lambda path, payload: (
        events.append(("recorded",) if "files" in payload else ("first manifest",)),
        real_write(path, payload)))
    out = run(config(tmp_path / "c.toml", sample_store, "2025-01-14", "2025-01-15"),
              tmp_path / "run", echo=quiet)
    # (manifests without the files' hashes are written before: the label pass's, the
    # forecasts'); the one recording them comes once, after the table is synced
    assert events[-2:] == [("synced", "forecasts.parquet"), ("recorded",)]
    assert events.count(("recorded",)) == 1 and events.count(("synced", "forecasts.parquet")) == 1
    assert audit_run(out) == []


def test_shards_merge_byte_for_byte_into_the_unsharded_run_after_early_closes(
        tmp_path, sample_store):
    """The second shard starts on 2024-12-26, right after the 2024-12-24 early close (skipped
    for every horizon) and after MORNING tasks without a reference price: a window of 10
    sessions back holds fewer than 10 labels, so its history must be read further back."""
    cfg = config(tmp_path / "cfg.toml", sample_store, "2024-12-02", "2025-01-10")
    whole = run(cfg, tmp_path / "whole", echo=quiet)
    a = run(cfg, tmp_path / "a", echo=quiet, shard=("2024-12-02", "2024-12-24"))
    b = run(cfg, tmp_path / "b", echo=quiet, shard=("2024-12-26", "2025-01-10"))
    merged = merge_shards([a, b], tmp_path / "merged")
    for name in ("scores.parquet", "scores.csv", "tasks.parquet", "labels.parquet"):
        assert (merged / name).read_bytes() == (whole / name).read_bytes(), name
    pd.testing.assert_frame_equal(rows(merged), rows(whole))
    first = rows(b)[lambda f: (f["model"] == "short_rate")
                    & f["task_id"].str.contains("2024-12-26")]
    assert (first["history_count"] == 10).all()  # full windows from the first session on
    spans = first["detail"].map(json.loads)
    assert spans.map(lambda d: d["skipped_early_close"]).min() >= 1  # the 24th is inside
    assert audit_run(merged) == []


def test_a_baseline_answers_alike_whatever_other_baselines_run_beside_it(tmp_path,
                                                                         sample_store):
    """Baselines given the same tasks share what they compute from them (the rolling rate,
    the window's span, receipts): a baseline's rows are the same run alone, first or last.
    The momentum baseline, run first, starts from the rolling rate climatology reads next
    (same window and min_count) and changes a copy of it."""
    window = "window = 10\nmin_count = 5\n"
    body = {kind: f'[[models]]\nname = "{kind}"\nkind = "{kind}"\n{window}'
            for kind in ("momentum", "climatology", "base_rate")}

    def rows_of(name: str, kinds: list[str]) -> pd.DataFrame:
        path = tmp_path / f"{name}.toml"
        path.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\n'
                        'tickers = ["AAPL", "MSFT"]\nstart = "2024-12-20"\n'
                        'end = "2025-01-08"\n' + "".join(body[k] for k in kinds))
        return rows(run(path, tmp_path / name, echo=quiet))

    together = rows_of("together", ["momentum", "climatology", "base_rate"])
    assert together["detail"].map(lambda d: "sign" in json.loads(d)).groupby(
        together["model"]).all().to_dict() == {"base_rate": False, "climatology": False,
                                              "momentum": True}
    for kind in ("momentum", "climatology", "base_rate"):
        alone = rows_of(kind, [kind])
        pd.testing.assert_frame_equal(
            together[together["model"] == kind].reset_index(drop=True), alone)


def test_rate_baselines_share_their_details_only_with_the_same_window(tmp_path, sample_store):
    """base_rate and climatology write the same detail text when their window and min_count
    agree (made once for both); with another window each keeps its own."""
    def rows_of(name: str, models: str) -> pd.DataFrame:
        path = aapl_config(tmp_path / f"{name}.toml", sample_store, models,
                           start="2024-12-20", end="2025-01-08")
        return rows(run(path, tmp_path / name, echo=quiet))

    def model(kind: str, window: int) -> str:
        return f'[[models]]\nname = "{kind}"\nkind = "{kind}"\nwindow = {window}\n'

    same = rows_of("same", model("base_rate", 10) + model("climatology", 10))
    by = {m: g["detail"].reset_index(drop=True) for m, g in same.groupby("model")}
    assert by["base_rate"].equals(by["climatology"])
    apart = rows_of("apart", model("base_rate", 10) + model("climatology", 12))
    alone = rows_of("alone", model("climatology", 12))
    detail = apart.loc[apart["model"] == "climatology", "detail"].reset_index(drop=True)
    assert detail.equals(alone["detail"])
    assert not detail.equals(by["base_rate"])


@pytest.fixture
def one_session_store(tmp_path, sample_store):
    """A store holding the sample's bars of 2025-01-15 alone."""
    bars = Store(sample_store).read_bars(start=dt.date(2025, 1, 15), end=dt.date(2025, 1, 15))
    bars.to_parquet(tmp_path / "day.parquet", index=False)
    ingest_bars(tmp_path / "day.parquet", tmp_path / "store")
    return tmp_path / "store"


def test_on_a_store_of_one_session_every_baseline_answers_validly(tmp_path, one_session_store):
    """No history at all: coin is 0.5 and valid; base_rate falls back to 0.5 and momentum to
    the base rate, each saying so; climatology abstains from its interval. Coin, base_rate
    and momentum give no interval at all: their interval scores are n/a, not climatology's."""
    out = run(config(tmp_path / "cfg.toml", one_session_store, "2025-01-15", "2025-01-15"),
              tmp_path / "run", echo=quiet)
    f = pd.read_parquet(out / "forecasts.parquet").set_index(["model", "task_id"])
    assert f["valid"].all() and (f["p_up"] == 0.5).all() and f["error"].isna().all()
    assert f["lower"].isna().all() and f["upper"].isna().all()
    assert (f.loc["coin", "interval_note"] == "not_applicable").all()
    assert f.loc["coin", "p_fallback"].isna().all()
    assert (f.loc["base_rate", "p_fallback"]
            == "0.5: 0 labels in the window < min_count 20").all()
    assert f.loc["momentum", "p_fallback"].str.startswith("base_rate: ").all()
    assert (f.loc["climatology", "interval_note"]
            == "insufficient_history: 0 past returns < min_count 5").all()
    scores = pd.read_parquet(out / "scores.parquet")
    overall = scores[scores["slice_kind"] == "overall"].set_index("model")
    assert (overall["n_valid"] == 9).all() and (overall["validity"] == 1.0).all()
    assert (overall["n"] == overall.loc["coin", "n"]).all()  # skill vs coin loses no row
    assert overall.loc["coin", "n_interval_not_applicable"] == 9
    assert overall.loc["climatology", "n_interval_abstained"] == 9
    assert overall.loc["base_rate", "n_p_fallback"] == 9
    assert overall[["n_interval", "coverage", "winkler"]].isna().sum().to_dict() == {
        "n_interval": 0, "coverage": 5, "winkler": 5}
