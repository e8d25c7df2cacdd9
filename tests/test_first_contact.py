"""What a new user meets in the first hour: the quickstart's store (bars, no headlines) with a
replay and a language model, and a report whose interval collapsed onto its estimate."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from finbench.reports import figures as F
from finbench.reports.build import report
from finbench.tracks.intraday.report_data import load_run, score_table
from tests.helpers import cli, llm_toml, write

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "data" / "example" / "synthetic_bars.csv"
SESSIONS = ["2025-01-06", "2025-01-07", "2025-01-08", "2025-01-10", "2025-01-13",
            "2025-01-14", "2025-01-15"]  # 2025-01-09 is closed


def quickstart_store(tmp_path: Path) -> Path:
    """The README quickstart's store: the example CSV of one ticker, and no headlines."""
    store = tmp_path / "mystore"
    done = cli("data", "ingest", EXAMPLE, "--ticker", "ACME", "--timezone",
               "America/New_York", "--out", store)
    assert done.returncode == 0, done.stderr
    assert not (store / "headlines").exists()
    return store


def test_an_agents_headline_search_of_a_store_without_headlines_answers_none(tmp_path):
    """The agents' ``headlines`` tool over the quickstart's store: no item, with a ticker or
    without one, and the other tools unaffected."""
    import json

    from finbench.data.store import Store
    from finbench.tracks.intraday.config import TasksConfig
    from finbench.tracks.intraday.tools import IntradayTools

    tools = IntradayTools(Store(quickstart_store(tmp_path)),
                          TasksConfig(tickers=["ACME"], start=SESSIONS[0], end=SESSIONS[-1]))
    now = pd.Timestamp("2025-01-15 17:30", tz="UTC")
    for ticker in (None, "ACME", "ACME"):
        result = tools.call("headlines", json.dumps({"query": "ACME shares", "ticker": ticker,
                                                     "limit": 5}), now)
        assert (result.refusal, result.items, json.loads(result.content)["items"]) == (
            None, 0, [])
    bars = tools.call("bars", json.dumps({"ticker": "ACME", "start": "2025-01-15T09:30",
                                          "end": None, "resolution": "1h"}), now)
    # hours of the local clock by 12:30: from 09:30, 10:00, 11:00 and 12:00 (to 12:30)
    assert bars.refusal is None and bars.items == 4


def test_a_store_without_headlines_runs_a_replay_and_a_language_model(tmp_path, server,
                                                                       llm_env):
    store = quickstart_store(tmp_path)
    replay = ["task_id,p_up,lower,upper"] + [f"ACME|{d}|{h},0.55,-0.01,0.01" for d in SESSIONS
                                             for h in ("MORNING", "MIDDAY", "CLOSE")]
    write(tmp_path / "mine.csv", "\n".join(replay) + "\n")
    cfg = write(tmp_path / "my.toml", f'[data]\nstore = "{store}"\n[tasks]\n'
                'tickers = ["ACME"]\nstart = "2025-01-06"\nend = "2025-01-15"\n'
                '[[models]]\nname = "coin"\nkind = "coin"\n'
                '[[models]]\nname = "mine"\nkind = "replay"\npath = "mine.csv"\n'
                + llm_toml(server.base_url, name="llm"))
    done = cli("run", cfg, "--out", tmp_path / "my")
    assert done.returncode == 0, done.stderr
    rows = pd.read_parquet(tmp_path / "my" / "forecasts.parquet")
    assert rows.groupby("model").size().to_dict() == {"coin": 21, "mine": 21, "llm": 21}
    assert rows["valid"].all()
    assert (rows.loc[rows["model"] == "mine", "p_up"] == 0.55).all()
    assert (rows.loc[rows["model"] == "llm", "p_up"] == 0.6).all()
    # every prompt was sent, saying there is no headline
    sent = [r["body"]["messages"][-1]["content"] for r in server.requests]
    assert len(sent) == 21
    assert all("JSON lines):\n<<<DATA\n(none)\nDATA>>>" in text for text in sent)
    assert cli("audit", tmp_path / "my").returncode == 0


def sure_run(tmp_path: Path, sample_store: Path) -> Path:
    """A replay that puts 0.9 on what happened (0.1 on the other side): the same Brier score,
    0.01 but for rounding, on every row, so every bootstrap replicate is the same mean and
    the interval collapses onto a value an ULP beside the estimate."""
    base = (f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL", "MSFT"]\n'
            'start = "2024-12-27"\nend = "2025-01-15"\n[[models]]\nname = "coin"\nkind = "coin"\n')
    assert cli("tasks", write(tmp_path / "t.toml", base), "--out", tmp_path / "tk").returncode == 0
    labels = pd.read_parquet(tmp_path / "tk" / "labels.parquet")
    labels["p_up"] = np.where(labels["y"].fillna(0) == 1, 0.9, 0.1)
    labels[["task_id", "p_up"]].to_csv(tmp_path / "sure.csv", index=False)
    cfg = write(tmp_path / "run.toml", base + '[[models]]\nname = "sure"\nkind = "replay"\n'
                'path = "sure.csv"\n')
    assert cli("run", cfg, "--out", tmp_path / "r").returncode == 0
    return tmp_path / "r"


def test_an_interval_collapsed_beside_its_estimate_is_drawn(tmp_path, sample_store):
    run_dir = sure_run(tmp_path, sample_store)
    by_h = score_table(load_run(run_dir), slice_kind="horizon")
    sure = by_h[by_h["model"] == "sure"]
    # what made the figure fail: an estimate outside its own (collapsed) interval
    assert ((sure["brier"] > sure["brier_hi"]) | (sure["brier"] < sure["brier_lo"])).any()
    done = cli("report", run_dir)
    assert done.returncode == 0, done.stderr
    assert (run_dir / "figures" / "fig3_models_across_horizons.png").is_file()
    assert len(list((run_dir / "figures").glob("*.png"))) == 11
    assert (run_dir / "report.html").is_file()


def test_error_bars_are_never_negative_and_stop_at_the_estimate():
    est = [0.010000000000000002, 0.5, 0.3, np.nan]
    low, high = F._err(est, [0.009999999999999997, 0.4, 0.35, 0.1],
                       [0.009999999999999998, 0.7, 0.5, 0.2])
    # below: 0.010000000000000002 - 0.009999999999999997 (5 ULP); 0.1; the interval starts
    # above the estimate: no bar; no estimate: no bar
    assert low.tolist() == [0.010000000000000002 - 0.009999999999999997, 0.5 - 0.4, 0.0, 0.0]
    # above: the interval ends below the estimate: no bar; 0.2; 0.2; no bar
    assert high.tolist() == [0.0, 0.7 - 0.5, 0.5 - 0.3, 0.0]


def test_a_figure_that_fails_never_stops_the_others_nor_the_page(tmp_path, sample_store,
                                                                  monkeypatch):
    run_dir = sure_run(tmp_path, sample_store)

    def broken(*args, **kwargs):
        raise ValueError("drawn wrong")

    monkeypatch.setattr(F, "plot_skill_by_model", broken)  # the first binary figure drawn
    with pytest.raises(F.FiguresFailed, match="figure fig1_skill_by_model was not drawn: "
                                              "ValueError: drawn wrong"):
        report(run_dir)
    pngs = sorted(p.stem for p in (run_dir / "figures").glob("*.png"))
    # skill by horizon draws its panels with the same function: it fails too
    assert "fig1_skill_by_model" not in pngs and "skill_by_horizon" not in pngs
    assert len(pngs) == 9 and {"reliability_corp", "murphy"} <= set(pngs)
    page = (run_dir / "report.html").read_text()
    assert 'alt="kelly_wealth"' in page and 'alt="fig1_skill_by_model"' not in page
    assert len(list((run_dir / "tables").glob("*.csv"))) > 5
    done = cli("report", run_dir)  # the command: the rest written, each failure named, exit 1
    assert done.returncode == 1
    assert "FigureFailed: fig1_skill_by_model: ValueError: drawn wrong" in done.stderr


def regular_hours_store(tmp_path: Path, *, drop: str) -> Path:
    """The example's bars of the regular session only (no 09:29 pre-market bar), and none at
    all on the session ``drop``."""
    frame = pd.read_csv(EXAMPLE)
    stamp = pd.to_datetime(frame["Datetime"])
    clock = stamp.dt.strftime("%H:%M")
    keep = (clock >= "09:30") & (clock < "16:00") & (stamp.dt.strftime("%Y-%m-%d") != drop)
    frame[keep.to_numpy()].to_csv(tmp_path / "regular.csv", index=False)
    store = tmp_path / "rs"
    done = cli("data", "ingest", tmp_path / "regular.csv", "--ticker", "ACME", "--timezone",
               "America/New_York", "--out", store)
    assert done.returncode == 0, done.stderr
    assert "no bar ends at 09:30" in done.stderr
    return store


def test_unscorable_tasks_and_invalid_answers_are_counted_by_reason_where_the_user_looks(
        tmp_path):
    store = regular_hours_store(tmp_path, drop="2025-01-10")
    replay = ["task_id,p_up"] + [f"ACME|{d}|{h},{55 if h == 'CLOSE' else 0.5}" for d in SESSIONS
                                 for h in ("MORNING", "MIDDAY", "CLOSE")]
    write(tmp_path / "mine.csv", "\n".join(replay) + "\n")
    cfg = write(tmp_path / "rs.toml", f'[data]\nstore = "{store}"\n[tasks]\n'
                'tickers = ["ACME"]\nstart = "2025-01-06"\nend = "2025-01-15"\n'
                '[[models]]\nname = "coin"\nkind = "coin"\n'
                '[[models]]\nname = "mine"\nkind = "replay"\npath = "mine.csv"\n')
    done = cli("run", cfg, "--out", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    labels = pd.read_parquet(tmp_path / "r" / "labels.parquet").set_index("task_id")["status"]
    # a day without bars is its own reason; MORNING (09:30, the open) has no bar ending then
    assert (labels[labels.index.str.contains("2025-01-10")] == "no_bars").all()
    others = labels[~labels.index.str.contains("2025-01-10")]
    assert (others[others.index.str.endswith("MORNING")] == "no_reference_price").all()
    assert (others[~others.index.str.endswith("MORNING")] == "ok").all()
    said = done.stdout + done.stderr
    assert ("labels {'ok': 12, 'no_reference_price': 6, 'no_target_price': 0, 'no_bars': 3}"
            in said)
    assert ("warning: MORNING at the session's open: 6 of 6 such tasks on days with bars have "
            "no reference price, because no bar ends at the open") in said
    assert "Unscorable tasks (left out of every score): 9 of 21" in said
    assert ("  no_bars: 3 (MORNING 1 of 7, MIDDAY 1 of 7, CLOSE 1 of 7): the store holds no bar "
            "of the ticker in the session's regular hours (a day the data lacks); 1 "
            "ticker-session(s), e.g. ACME 2025-01-10") in said
    assert "  no_reference_price: 6 (MORNING 6 of 7, MIDDAY 0 of 7, CLOSE 0 of 7)" in said
    assert ("  mine: 7 of 21 answers invalid: 7 schema: p_up: Input should be less than or equal "
            "to 1 (given 55)") in said
    scores = pd.read_parquet(tmp_path / "r" / "scores.parquet")
    overall = scores[(scores["slice_kind"] == "overall") & (scores["model"] == "coin")].iloc[0]
    assert (overall["n_no_bars"], overall["n_no_reference_price"], overall["n_unscorable"]) == (
        3, 6, 9)
    assert cli("audit", tmp_path / "r").returncode == 0


def test_a_resume_that_changes_nothing_leaves_the_manifest_and_its_receipt(tmp_path):
    """Its finished_at changed, and with it the receipt a user keeps, and the report's
    receipt then named the run as changed since it was drawn."""
    store = quickstart_store(tmp_path)
    cfg = write(tmp_path / "my.toml", f'[data]\nstore = "{store}"\n[tasks]\n'
                'tickers = ["ACME"]\nstart = "2025-01-06"\nend = "2025-01-15"\n'
                '[[models]]\nname = "coin"\nkind = "coin"\n')
    first = cli("run", cfg, "--out", tmp_path / "my")
    assert first.returncode == 0 and cli("report", tmp_path / "my").returncode == 0
    before = (tmp_path / "my" / "manifest.json").read_bytes()
    import time

    time.sleep(1.1)  # finished_at is to the second
    again = cli("run", cfg, "--out", tmp_path / "my")
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "my" / "manifest.json").read_bytes() == before
    receipt = [line for line in first.stdout.splitlines() if line.startswith("receipt:")]
    assert receipt and receipt[0] in again.stdout
    assert cli("audit", tmp_path / "my").returncode == 0
