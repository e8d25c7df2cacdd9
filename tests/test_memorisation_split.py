"""The memorisation table: a model that declares a knowledge cutoff against its reference and
its anonymized twin, on the sessions up to the cutoff and after it, and the gap; each number
against a computation from rows.parquet, the gap's interval resampling each side's sessions
within it."""

import numpy as np
import pandas as pd
import pytest

from finbench.runner import run
from finbench.scoring.bootstrap import gap_ci

QUIET = {"echo": lambda *_: None}


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("FINBENCH_TEST_KEY", "sk-memory-test")
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))


def model(name, base_url, extra=""):
    return (f'[[models]]\nname = "{name}"\nkind = "openai"\nmodel = "variants"\n'
            f'base_url = "{base_url}"\napi_key_env = "FINBENCH_TEST_KEY"\n'
            f'knowledge_cutoff = 2025-01-10\n{extra}')


def test_the_memorisation_table_splits_at_the_cutoff_against_reference_and_twin(
        tmp_path, sample_store, server):
    from finbench.reports.build import report

    path = tmp_path / "memory.toml"
    path.write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\ntickers = ["AAPL", "MSFT"]\n'
                    'start = "2025-01-06"\nend = "2025-01-15"\n'
                    '[context.company_names]\nAAPL = ["Apple"]\nMSFT = ["Microsoft"]\n'
                    '[[models]]\nname = "coin"\nkind = "coin"\n'
                    + model("named", server.base_url)
                    + model("anon", server.base_url, "anonymize = true\n"))
    out = run(path, tmp_path / "out", **QUIET)
    report(out)
    table = pd.read_csv(out / "tables" / "memorisation.csv")
    assert table[["model", "versus", "against"]].values.tolist() == [
        ["named", "reference", "coin"], ["named", "anonymized", "anon"],
        ["anon", "reference", "coin"]]
    rows = pd.read_parquet(out / "rows.parquet")
    rows = rows[rows["scored"]]
    for _, r in table.iterrows():
        mine = rows[rows["model"] == r["model"]].set_index("task_id")
        theirs = rows[rows["model"] == r["against"]].set_index("task_id")
        shared = mine.index.intersection(theirs.index)
        d = mine.loc[shared, "brier"] - theirs.loc[shared, "brier"]
        before = mine.loc[shared, "session"] <= "2025-01-10"
        assert (r["n_before"], r["n_after"]) == (before.sum(), (~before).sum())
        assert r["sessions_before"] == mine.loc[shared[before.to_numpy()], "session"].nunique()
        assert r["before"] == pytest.approx(d[before].mean(), abs=1e-9)
        assert r["after"] == pytest.approx(d[~before].mean(), abs=1e-9)
        assert r["gap"] == pytest.approx(d[~before].mean() - d[before].mean(), abs=1e-9)
    # named 0.6 against anonymized 0.55: a difference, the same on both sides of the cutoff
    twin = table[table["versus"] == "anonymized"].iloc[0]
    assert twin["before"] != 0 and np.isfinite(twin["gap_lo"])
    assert "Memorisation" in (out / "report.html").read_text()


def test_the_gap_interval_resamples_each_side_within_itself():
    rng = np.random.default_rng(3)
    first = rng.normal(-0.02, 0.05, 300)
    second = rng.normal(0.01, 0.05, 200)
    a, b, gap = gap_ci(first, np.repeat(np.arange(30), 10), second,
                       np.repeat(np.arange(20), 10), replicates=2000, seed=5)
    assert gap.estimate == pytest.approx(second.mean() - first.mean(), abs=1e-15)
    assert (gap.n, gap.clusters) == (500, 50)
    assert gap.lower < gap.estimate < gap.upper
    # its width is about that of two independent means: sqrt(se_a^2 + se_b^2)
    width = (gap.upper - gap.lower) / 2
    each = [(x.upper - x.lower) / 2 for x in (a, b)]
    assert width == pytest.approx(np.hypot(*each), rel=0.15)
    # a side of fewer than two sessions: no interval
    _, _, none = gap_ci(first[:10], np.zeros(10), second, np.repeat(np.arange(20), 10))
    assert np.isnan(none.lower) and np.isfinite(none.estimate)


def test_the_event_track_splits_at_the_cutoff_by_resolution_date(tmp_path, server):
    """The event track no longer ignores a model's knowledge_cutoff: its Brier against each
    reference on markets resolved up to the cutoff and after it."""
    from finbench.reports.build import report
    from tests.test_mcp import EVENT_STORE

    path = tmp_path / "events.toml"
    path.write_text(f'track = "events"\n[data]\nstore = "{EVENT_STORE}"\n[tasks]\n'
                    'resolved_from = 2024-03-01\nresolved_to = 2024-06-30\ncutoff = "lead"\n'
                    'lead_hours = 72\n[[models]]\nname = "market"\nkind = "market_price"\n'
                    + model("llm", server.base_url).replace("2025-01-10", "2024-04-15"))
    out = run(path, tmp_path / "out", **QUIET)
    report(out)
    table = pd.read_csv(out / "tables" / "event_memorisation.csv").iloc[0]
    rows = pd.read_parquet(out / "rows.parquet")
    rows = rows[rows["scored"]]
    tasks = pd.read_parquet(out / "tasks.parquet").set_index("task_id")
    mine = rows[rows["model"] == "llm"].set_index("task_id")
    theirs = rows[rows["model"] == "market"].set_index("task_id")
    shared = mine.index.intersection(theirs.index)
    d = mine.loc[shared, "brier"] - theirs.loc[shared, "brier"]
    before = (tasks.loc[shared, "resolved_at"].dt.date <= pd.Timestamp("2024-04-15").date())
    assert 0 < before.sum() < len(shared)
    assert (table["n_before"], table["n_after"]) == (before.sum(), (~before).sum())
    assert table["before"] == pytest.approx(d[before.to_numpy()].mean(), abs=1e-9)
    assert table["gap"] == pytest.approx(d[~before.to_numpy()].mean()
                                         - d[before.to_numpy()].mean(), abs=1e-9)
    assert "Memorisation" in (out / "report.html").read_text()


def test_what_retrieval_adds_is_a_paired_difference_with_its_interval(tmp_path, server):
    from finbench.reports.build import report
    from tests.test_mcp import EVENT_STORE

    def llm(name, extra=""):
        return (f'[[models]]\nname = "{name}"\nkind = "openai"\nmodel = "variants"\n'
                f'base_url = "{server.base_url}"\napi_key_env = "FINBENCH_TEST_KEY"\n{extra}')

    path = tmp_path / "events.toml"
    path.write_text(f'track = "events"\n[data]\nstore = "{EVENT_STORE}"\n[tasks]\n'
                    'resolved_from = 2024-03-01\nresolved_to = 2024-06-30\ncutoff = "lead"\n'
                    'lead_hours = 72\n[[models]]\nname = "market"\nkind = "market_price"\n'
                    + llm("posts") + llm("bare", 'retrieval = "none"\n'))
    out = run(path, tmp_path / "out", **QUIET)
    report(out)
    table = pd.read_csv(out / "tables" / "event_retrieval_effect.csv")
    assert table[["model", "without_retrieval"]].values.tolist() == [["posts", "bare"]]
    rows = pd.read_parquet(out / "rows.parquet")
    rows = rows[rows["scored"]]
    mine = rows[rows["model"] == "posts"].set_index("task_id")["brier"]
    theirs = rows[rows["model"] == "bare"].set_index("task_id")["brier"]
    shared = mine.index.intersection(theirs.index)
    r = table.iloc[0]
    assert r["n"] == len(shared) and r["groups"] > 2
    assert r["diff"] == pytest.approx((mine[shared] - theirs[shared]).mean(), abs=1e-9)
    assert r["diff_lo"] <= r["diff"] <= r["diff_hi"] and r["mde"] > 0
    assert "What retrieval adds" in (out / "report.html").read_text()
    # every two models paired the same way, the event pilot's power per comparison
    paired = pd.read_csv(out / "tables" / "event_paired_brier.csv")
    assert paired[["model", "versus"]].values.tolist() == [
        ["market", "posts"], ["market", "bare"], ["posts", "bare"]]
    market = rows[rows["model"] == "market"].set_index("task_id")["brier"]
    first = paired.iloc[0]
    common = market.index.intersection(mine.index)
    assert first["n"] == len(common)
    assert first["diff"] == pytest.approx((market[common] - mine[common]).mean(), abs=1e-9)
    assert np.isfinite(first["mde"]) and 0 <= first["p_value"] <= first["p_holm"] <= 1
