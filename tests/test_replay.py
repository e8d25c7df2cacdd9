"""Replays and rows as the paper has them: several models in one file, models asked some
horizons only, probability-only forecasters, and the per-row score export."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from finbench.core.errors import ConfigError, DataError
from finbench.runner import run
from finbench.tracks.configs import load_config
from tests.helpers import baselines_toml

# the paper's pilot CSV shape: several models, each at the horizons it was asked
PILOT_CSV = """model,ticker,session,horizon,p_up,lower,upper
GPT-4o,AAPL,2025-01-15,MORNING,0.62,-0.004,0.009
GPT-4o,MSFT,2025-01-15,MORNING,0.58,-0.006,0.007
GPT-4o,NVDA,2025-01-15,MORNING,0.7,-0.01,0.02
GPT-4o,AAPL,2025-01-15,MIDDAY,0.55,-0.003,0.004
GPT-4o,MSFT,2025-01-15,MIDDAY,0.45,-0.004,0.003
GPT-4o,NVDA,2025-01-15,MIDDAY,0.6,-0.008,0.01
DeepSeek-V3,AAPL,2025-01-15,MORNING,0.6,-0.005,0.01
DeepSeek-V3,MSFT,2025-01-15,MORNING,0.56,-0.01,0.01
DeepSeek-V3,NVDA,2025-01-15,MORNING,0.65,-0.012,0.02
"""


def config(tmp_path, store, models: str, *, end="2025-01-15") -> object:
    path = tmp_path / "cfg.toml"
    path.write_text(f"""
[data]
store = "{store}"
[tasks]
tickers = ["AAPL", "MSFT", "NVDA"]
start = "2025-01-15"
end = "{end}"
{baselines_toml("coin")}{models}""")
    return path


def quiet(*_):
    return None


def replay_toml(name: str, path: str, extra: str = "") -> str:
    """A ``[[models]]`` block of a replay model reading ``path`` (``extra``: more keys)."""
    return f'\n[[models]]\nname = "{name}"\nkind = "replay"\npath = "{path}"\n{extra}'


def test_a_pilot_csv_of_several_models_asked_some_horizons_is_scored_on_what_was_asked(
        tmp_path, sample_store):
    """Such a file was refused ("one forecast per task"); a MORNING-only model showed Valid
    3/9."""
    (tmp_path / "pilot.csv").write_text(PILOT_CSV)
    cfg = config(tmp_path, sample_store, """
[[models]]
name = "GPT-4o"
kind = "replay"
path = "pilot.csv"
model = "GPT-4o"
missing = "not_asked"
[[models]]
name = "DeepSeek-V3"
kind = "replay"
path = "pilot.csv"
model = "DeepSeek-V3"
horizons = ["MORNING"]
""")
    said = []
    out = run(cfg, tmp_path / "run", echo=said.append)
    f = pd.read_parquet(out / "forecasts.parquet")
    assert f.groupby("model").size().to_dict() == {"coin": 9, "GPT-4o": 6, "DeepSeek-V3": 3}
    assert f["valid"].all()
    overall = pd.read_parquet(out / "scores.parquet").query("slice_kind == 'overall'")
    counts = overall.set_index("model")[["n_tasks", "n_valid", "n"]].to_dict("index")
    assert counts["GPT-4o"] == {"n_tasks": 6, "n_valid": 6, "n": 6}
    assert counts["DeepSeek-V3"] == {"n_tasks": 3, "n_valid": 3, "n": 3}
    assert "DeepSeek-V3: asked 3 of the run's 9 tasks; the others are not asked" in "\n".join(said)
    notes = json.loads((out / "manifest.json").read_text())["model_notes"]
    assert notes["GPT-4o"] == ["asked 6 of the run's 9 tasks; the others are not asked "
                               "(no forecast row)"]
    # skill on the paired rows: the coin's rows of the tasks each model was asked
    row = overall.set_index("model").loc["DeepSeek-V3"]
    mine = f[f["model"] == "DeepSeek-V3"]
    assert row["bss_coin_n"] == 3 and set(mine["task_id"].str.split("|").str[2]) == {"MORNING"}


def test_a_file_of_several_models_needs_one_picked(tmp_path, sample_store):
    (tmp_path / "pilot.csv").write_text(PILOT_CSV)
    cfg = config(tmp_path, sample_store, replay_toml("r", "pilot.csv"))
    with pytest.raises(DataError, match=r"pilot.csv: holds rows of several models "
                       r"\(DeepSeek-V3, GPT-4o\); pick one with model = "):
        run(cfg, tmp_path / "run", echo=quiet)
    cfg.write_text(cfg.read_text() + 'model = "GPT-5"\n')
    with pytest.raises(DataError, match=r"no rows of model 'GPT-5' \(the file holds "
                       r"DeepSeek-V3, GPT-4o\)"):
        run(cfg, tmp_path / "run2", echo=quiet)


def test_a_probability_only_replay_is_scored_on_its_probability(tmp_path, sample_store):
    """A replayed market price has no interval: every row was invalid for lack of one."""
    (tmp_path / "market.csv").write_text(
        "ticker,session,horizon,p_up\n" + "".join(
            f"{t},2025-01-15,{h},0.5{i}\n" for i, (t, h) in enumerate(
                (t, h) for t in ("AAPL", "MSFT", "NVDA") for h in ("MORNING", "MIDDAY", "CLOSE"))))
    cfg = config(tmp_path, sample_store, replay_toml("market", "market.csv"))
    out = run(cfg, tmp_path / "run", echo=quiet)
    f = pd.read_parquet(out / "forecasts.parquet").query("model == 'market'")
    assert f["valid"].all() and (f["interval_note"] == "not_applicable").all()
    assert f["lower"].isna().all()
    overall = pd.read_parquet(out / "scores.parquet").query("slice_kind == 'overall'")
    market = overall.set_index("model").loc["market"]
    assert (market["n"], market["n_interval"], market["n_interval_not_applicable"]) == (9, 0, 9)
    assert np.isnan(market["coverage"]) and market["bss_coin_n"] == 9


def test_rows_export_gives_each_forecast_its_scores_and_each_baselines_answer(tmp_path,
                                                                             sample_store):
    (tmp_path / "pilot.csv").write_text(PILOT_CSV)
    cfg = config(tmp_path, sample_store, """
[[models]]
name = "base_rate"
kind = "base_rate"
[[models]]
name = "climatology"
kind = "climatology"
[[models]]
name = "GPT-4o"
kind = "replay"
path = "pilot.csv"
model = "GPT-4o"
missing = "not_asked"
""")
    out = run(cfg, tmp_path / "run", echo=quiet)
    rows = pd.read_parquet(out / "rows.parquet")
    csv = pd.read_csv(out / "rows.csv")  # the same rows, floats in round-trip form
    pd.testing.assert_frame_equal(csv, rows, check_dtype=False, check_exact=True)
    f = pd.read_parquet(out / "forecasts.parquet")
    assert len(rows) == len(f) == 9 * 3 + 6
    labels = pd.read_parquet(out / "labels.parquet").set_index("task_id")
    base = f[f["model"] == "base_rate"].set_index("task_id")["p_up"]
    gpt = rows[rows["model"] == "GPT-4o"].set_index("task_id")
    for tid, rec in gpt.iterrows():
        y = float(labels.loc[tid, "y"])
        assert rec["brier"] == pytest.approx((rec["p_up"] - y) ** 2)
        assert rec["p_up_coin"] == 0.5 and rec["bss_coin"] == pytest.approx(
            1 - (rec["p_up"] - y) ** 2 / 0.25)
        assert rec["p_up_base_rate"] == base[tid]
        assert rec["bss_base_rate"] == pytest.approx(1 - (rec["p_up"] - y) ** 2
                                                     / (base[tid] - y) ** 2)
        assert np.isfinite(rec["wss_climatology"]) and rec["interval_scored"]
    coin = rows[rows["model"] == "coin"]
    assert coin["winkler"].isna().all() and coin["wss_climatology"].isna().all()
    assert not list(out.glob("*.tmp"))


def test_bad_replay_rows_and_horizons_are_named(tmp_path, sample_store):
    (tmp_path / "bad.csv").write_text("ticker,session,horizon,p_up,lower,upper\n"
                                      "AAPL,2025-01-15,MORNING,0.5,-0.01,0.01\n"
                                      "AAPL,2025-13-45,MIDDAY,0.5,-0.01,0.01\n")
    cfg = config(tmp_path, sample_store, replay_toml("r", "bad.csv"))
    with pytest.raises(DataError, match=r"bad.csv: row 2: session '2025-13-45' is not a date"):
        run(cfg, tmp_path / "run", echo=quiet)
    (tmp_path / "half.csv").write_text("ticker,session,horizon,p_up,lower\n"
                                       "AAPL,2025-01-15,MORNING,0.5,-0.01\n")
    cfg = config(tmp_path, sample_store, replay_toml("r", "half.csv"))
    with pytest.raises(DataError, match="half.csv: has lower but not upper"):
        run(cfg, tmp_path / "run2", echo=quiet)
    cfg = config(tmp_path, sample_store, """
[[models]]
name = "m"
kind = "coin"
horizons = ["NOON"]
""")
    with pytest.raises(ConfigError, match=r"models.m.horizons: 'NOON' is not a horizon of the "
                       r"run \(MORNING, MIDDAY, CLOSE\)"):
        load_config(cfg)


def test_replay_rows_for_tasks_outside_the_run_are_counted_and_named(tmp_path, sample_store):
    (tmp_path / "r.csv").write_text("ticker,session,horizon,p_up,lower,upper\n"
                                    "AAPL,2025-01-15,MORNING,0.5,-0.01,0.01\n"
                                    "ZZZZ,2025-01-15,MIDDAY,0.4,-0.02,0.02\n"
                                    "AAPL,2025-01-14,MIDDAY,0.4,-0.02,0.02\n")
    cfg = config(tmp_path, sample_store, replay_toml("r", "r.csv"))
    said = []
    out = run(cfg, tmp_path / "run", echo=said.append)
    note = ("2 row(s) of r.csv are for no task of this run and are not scored "
            "(ZZZZ|2025-01-15|MIDDAY, AAPL|2025-01-14|MIDDAY)")
    assert f"r: {note}" in said
    assert json.loads((out / "manifest.json").read_text())["model_notes"]["r"] == [note]


def test_rows_csv_can_be_left_out_at_scale(tmp_path, sample_store):
    cfg = config(tmp_path, sample_store, "[scores]\nrows_csv = false\n")
    text = cfg.read_text().replace("[scores]\nrows_csv = false\n", "")
    cfg.write_text(text.replace("[tasks]", "[scores]\nrows_csv = false\n[tasks]"))
    out = run(cfg, tmp_path / "run", echo=quiet)
    assert (out / "rows.parquet").is_file() and not (out / "rows.csv").exists()
    assert len(pd.read_parquet(out / "rows.parquet")) == 9


def test_rows_csv_by_default_only_when_the_rows_fit_a_spreadsheet(tmp_path, sample_store,
                                                                  monkeypatch):
    import finbench.tracks.intraday.scores as scoring_run

    cfg = config(tmp_path, sample_store, "")
    out = run(cfg, tmp_path / "fits", echo=quiet)  # 9 rows: the CSV is written
    assert len(pd.read_csv(out / "rows.csv")) == 9
    monkeypatch.setattr(scoring_run, "SPREADSHEET_ROWS", 9)  # as if a sheet held 9 rows
    said = []
    out = run(cfg, tmp_path / "too_many", echo=said.append)
    assert (out / "rows.parquet").is_file() and not (out / "rows.csv").exists()
    assert any(line.startswith("rows.csv left out: the run's rows would not fit a "
                               "spreadsheet (9 rows)") for line in said)
    assert "rows.csv" not in json.loads((out / "manifest.json").read_text())["files"]


def test_replay_cells_that_are_no_number_are_invalid_answers_not_numbers(tmp_path,
                                                                          sample_store):
    """A cell ``true`` was read as the probability 1.0 (``float(True)``); an integer of 400
    digits ended the run in OverflowError. Each is now its row's invalid answer."""
    huge = "1" + "0" * 400
    (tmp_path / "r.csv").write_text("ticker,session,horizon,p_up,lower,upper\n"
                                    "AAPL,2025-01-15,MORNING,true,-0.01,0.01\n"
                                    f"AAPL,2025-01-15,MIDDAY,0.5,-{huge},0.01\n"
                                    "AAPL,2025-01-15,CLOSE,0.5,-0.01,1e-2\n")
    cfg = config(tmp_path, sample_store, replay_toml("r", "r.csv"))
    out = run(cfg, tmp_path / "run", echo=quiet)
    f = pd.read_parquet(out / "forecasts.parquet").query("model == 'r'").set_index("task_id")
    morning, midday, close = (f.loc[f"AAPL|2025-01-15|{h}"] for h in ("MORNING", "MIDDAY",
                                                                          "CLOSE"))
    assert not morning["valid"] and "(given 'true')" in morning["error"]
    assert not midday["valid"] and midday["error"].startswith("schema: lower: beyond the float")
    assert close["valid"] and (close["p_up"], close["upper"]) == (0.5, 0.01)


@pytest.mark.parametrize(("text", "said"), [
    ("ticker,session,horizon,p_up\nAAPL,2025-01-15,MORNING,0.5\n,2025-01-15,MIDDAY,0.5\n",
     "rule 'ticker is not empty' broken in rows 2"),
    ("task_id,p_up\nAAPL|2025-01-15|MORNING,0.5\nnull,0.5\n",
     "rule 'task_id is not empty' broken in rows 2"),
    ("model,task_id,p_up\nm,AAPL|2025-01-15|MORNING,0.5\n,AAPL|2025-01-15|MIDDAY,0.5\n",
     "rule 'model is not empty' broken in rows 2"),
    ("task_id,lower,upper\nAAPL|2025-01-15|MORNING,-0.01,0.01\n",
     "has no p_up (or an event forecaster's p_yes) column (columns: task_id, lower, upper)"),
])
def test_a_replay_row_that_names_no_task_or_model_is_named(tmp_path, sample_store, text, said):
    """An empty key cell ended the run in a TypeError (joining the names of rows outside the
    run) or sorting model names; a file without p_up made every row invalid without a word
    about the file."""
    (tmp_path / "r.csv").write_text(text)
    cfg = config(tmp_path, sample_store, replay_toml(
        "r", "r.csv", 'model = "m"\n' if "model," in text else ""))
    with pytest.raises(DataError, match=re.escape(f"r.csv: {said}")):
        run(cfg, tmp_path / "run", echo=quiet)


def test_a_files_own_labels_and_scores_are_compared_and_the_rows_that_disagree_named(
        tmp_path, sample_store):
    """The paper's pilot CSV carries its own y, r, brier and composite_score: they were
    silently ignored. They are kept as claims, never scored with, and the report names each
    row whose claim is not FinBench's value (by hand: one y flipped, two Brier scores off,
    one r within the tolerance, one Brier claimed of an answer FinBench cannot score)."""
    from finbench.reports.build import report

    plain = PILOT_CSV.splitlines()
    (tmp_path / "plain.csv").write_text(PILOT_CSV)
    cfg = config(tmp_path, sample_store, replay_toml("GPT-4o", "plain.csv",
                                                     'model = "GPT-4o"\nmissing = "not_asked"\n'))
    truth = pd.read_parquet(run(cfg, tmp_path / "truth", echo=quiet) / "rows.parquet")
    truth = truth[truth["model"] == "GPT-4o"].set_index("task_id")
    lines = [plain[0] + ",y,r,brier,composite_score"]
    for k, line in enumerate(plain[1:7]):
        _, ticker, session, horizon, *_ = line.split(",")
        t = truth.loc[f"{ticker}|{session}|{horizon}"]
        y, r, brier = int(t["y"]), float(t["r"]), float(t["brier"])
        if k == 0:
            y = 1 - y  # flipped
        if k in (1, 2):
            brier += 0.01  # off
        if k == 3:
            r += 1e-12  # within the tolerance
        if k == 4:
            line = line.replace(",0.45,", ",1.5,")  # an invalid answer, its Brier claimed
        lines.append(f"{line},{y},{float(r)!r},{float(brier)!r},0.5")
    (tmp_path / "claims.csv").write_text("\n".join(lines) + "\n")
    cfg = config(tmp_path, sample_store, replay_toml("GPT-4o", "claims.csv",
                                                     'model = "GPT-4o"\nmissing = "not_asked"\n'))
    out = run(cfg, tmp_path / "run", echo=quiet)
    report(out)
    claims = pd.read_csv(out / "tables" / "replay_claims.csv").set_index("claim")
    assert claims.loc["y", ["rows", "disagree"]].tolist() == [6, 1]
    assert claims.loc["r", ["rows", "disagree"]].tolist() == [6, 0]
    assert claims.loc["brier", ["rows", "disagree"]].tolist() == [6, 3]
    assert claims.loc["brier", "max_abs_diff"] == pytest.approx(0.01, rel=1e-3)
    assert claims.loc["composite_score", "rows"] == 6
    assert "not compared" in claims.loc["composite_score", "note"]
    rows = pd.read_csv(out / "tables" / "replay_disagreements.csv", keep_default_na=False)
    ids = [f"{p.split(',')[1]}|{p.split(',')[2]}|{p.split(',')[3]}" for p in plain[1:7]]
    assert rows[["task_id", "claim"]].values.tolist() == [
        [ids[0], "y"], [ids[1], "brier"], [ids[2], "brier"], [ids[4], "brier"]]
    assert rows.loc[3, "finbench"] == ""  # FinBench does not score the invalid answer
    # the claims change no score: the scores of the run whose file holds none, but the
    # answer made invalid
    scores = pd.read_parquet(out / "scores.parquet").set_index(["model", "slice_kind",
                                                                 "slice"])
    row = scores.loc[("GPT-4o", "overall", "all")]
    mine = truth.drop(index=ids[4])
    assert row["n"] == 5 and row["brier"] == pytest.approx(mine["brier"].mean(), rel=1e-12)
    page = (out / "report.html").read_text()
    assert 'id="table-replay_claims"' in page
