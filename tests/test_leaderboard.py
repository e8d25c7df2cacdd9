"""``finbench leaderboard``: the runs whose audit passes, each track on its board, models
compared on the tasks they share (checked by hand from the runs' rows), and a
difficulty-adjusted Brier that is the dummy-variable regression's (numpy's least squares)."""

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from finbench.reports.leaderboard import (
    COLUMNS,
    LEVEL,
    REPLICATES,
    SEED,
    _adjusted,
    _board,
    _cutoff_sides,
    fixed_effects,
    leaderboard,
)
from finbench.runner import run
from finbench.scoring import bootstrap
from tests.helpers import cli
from tests.reference import naive_board

ROOT = Path(__file__).resolve().parents[1]


def _lstsq_effects(values, model, task):
    """The two-way fit by dummies: value = a[model] + b[task], b summing to zero over tasks
    (so a + mean(b) is a), solved by numpy's least squares."""
    m, t = model.max() + 1, task.max() + 1
    design = np.zeros((len(values), m + t - 1))
    design[np.arange(len(values)), model] = 1.0
    for i, k in enumerate(task):  # task effects with the last as minus the sum of the others
        if k < t - 1:
            design[i, m + k] = 1.0
        else:
            design[i, m:] = -1.0
    coef = np.linalg.lstsq(design, values, rcond=None)[0]
    return coef[:m]


@settings(max_examples=60)
@given(seed=st.integers(0, 10_000), models=st.integers(2, 5), tasks=st.integers(3, 12))
def test_the_adjusted_brier_is_the_dummy_regressions_on_any_connected_design(seed, models,
                                                                             tasks):
    rng = np.random.default_rng(seed)
    cells = [(m, t) for m in range(models) for t in range(tasks)
             if t == 0 or rng.random() < 0.6]  # task 0 shared by all: connected
    model = np.array([c[0] for c in cells])
    task = np.array([c[1] for c in cells])
    _, task = np.unique(task, return_inverse=True)
    values = rng.random(len(cells))
    np.testing.assert_allclose(fixed_effects(values, model, task),
                               _lstsq_effects(values, model, task), atol=1e-9)


def test_on_a_complete_design_the_adjusted_brier_is_the_mean():
    rng = np.random.default_rng(3)
    model, task = np.repeat(np.arange(3), 5), np.tile(np.arange(5), 3)
    values = rng.random(15)
    np.testing.assert_allclose(fixed_effects(values, model, task),
                               values.reshape(3, 5).mean(axis=1), atol=1e-12)


TASKS = ["AAPL|2025-01-14|MORNING", "AAPL|2025-01-14|CLOSE", "MSFT|2025-01-14|MORNING",
         "MSFT|2025-01-15|MIDDAY", "\u00c4|2025-01-15|CLOSE", "a|2025-01-15|CLOSE"]


@st.composite
def board_parts(draw):
    """One to three runs' per-row scores: models of a small pool, tasks of :data:`TASKS` (a
    run's label of a task drawn once, so that runs may disagree), rows left out, unscored,
    of unknown label or declared memorised at random; clustered by session or by task. Some
    Brier scores far apart in size, so that sums in another order differ in their bits."""
    parts = []
    for number in range(draw(st.integers(1, 3))):
        models = draw(st.lists(st.sampled_from(["coin", "m1", "m2"]), min_size=1, max_size=3,
                               unique=True))
        tasks = draw(st.lists(st.sampled_from(TASKS), min_size=1, max_size=6, unique=True))
        label = {t: draw(st.sampled_from([0.0, 1.0, np.nan])) for t in tasks}
        rows = [{"model": m, "task_id": t, "y": label[t],
                 "brier": draw(st.sampled_from([1e-16, 0.1, 1.0]) | st.floats(0, 1)),
                 "scored": draw(st.integers(0, 4)) > 0,
                 "session": t.split("|")[1],
                 "possibly_memorised": draw(st.sampled_from([True, False, None]))}
                for m in models for t in tasks if draw(st.integers(0, 5))]
        frame = pd.DataFrame(rows, columns=["model", "task_id", "y", "brier", "scored",
                                            "session", "possibly_memorised"])
        if draw(st.booleans()):
            frame = frame.drop(columns="possibly_memorised")
        parts.append((f"r{number}", frame, draw(st.sampled_from(["session", "task_id"])),
                      set(models[:1]), {}))
    return parts


def _unsorted_part():
    """A run whose rows are not in task-id order, with Brier scores whose sum in that order
    differs in its last bit from their sum in task-id order."""
    tasks = [TASKS[3], TASKS[0], TASKS[1], TASKS[5]]
    brier = [1e-16, 1e-16, 1.0, 0.1]
    rows = pd.DataFrame({"model": ["coin"] * 4 + ["m1"] * 4, "task_id": tasks * 2,
                         "y": [1.0] * 8, "brier": brier + brier[::-1], "scored": [True] * 8,
                         "session": [t.split("|")[1] for t in tasks] * 2})
    return [("r0", rows, "session", set(), {})]


@settings(max_examples=80)
@given(board_parts(), st.sampled_from([None, "coin", "m2", "absent"]))
@example(_unsorted_part(), "coin")
def test_the_board_is_the_naive_boards_bit_for_bit(parts, reference):
    """The board made on integer codes is the one made of sets of task ids and pandas
    filters (tests.reference), every number the same bits: labels that differ between runs,
    tasks not every model scored, a reference absent or without a scored row."""
    def skill_ci(errors, reference_errors, clusters):
        return bootstrap.skill_ci(errors, reference_errors, clusters, replicates=REPLICATES,
                                  seed=SEED, level=LEVEL)

    outcomes = []
    for make in (lambda: _board("t", parts, reference),
                 lambda: naive_board("t", parts, reference, skill_ci=skill_ci,
                                     adjusted=_adjusted, cutoff_sides=_cutoff_sides,
                                     columns=COLUMNS)):
        try:
            outcomes.append(make())
        except Exception as exc:  # the same failure, if any
            outcomes.append((type(exc), str(exc)))
    fast, naive = outcomes
    if isinstance(naive[0], type):
        assert fast == naive
        return
    assert fast[1] == naive[1]
    pd.testing.assert_frame_equal(fast[0], naive[0], check_exact=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The pilot, a longer sample run (eight sessions, the pilot's among them), the event
    pilot, and a copy of the longer run with an edited score."""
    tmp = tmp_path_factory.mktemp("board")
    texts = {"pilot": (ROOT / "configs" / "pilot.toml").read_text(),
             "events": (ROOT / "configs" / "pilot_events.toml").read_text()}
    texts["longer"] = texts["pilot"].replace('start = "2025-01-15"', 'start = "2025-01-06"')
    out = {}
    for name, text in texts.items():
        cfg = tmp / f"{name}.toml"
        cfg.write_text(text.replace('"../data/', f'"{ROOT}/data/'))
        out[name] = run(cfg, tmp / name, echo=lambda *_: None)
    shutil.copytree(out["longer"], tmp / "edited")
    scores = tmp / "edited" / "scores.csv"
    scores.write_text(scores.read_text().replace("0.25,", "0.24,", 1))
    out["edited"] = tmp / "edited"
    return tmp, out


def test_the_board_compares_models_on_their_shared_tasks_and_leaves_off_failed_runs(runs):
    tmp, out = runs
    said = []
    from finbench.audit import audit_run

    page = leaderboard([out["pilot"], out["longer"], out["events"], out["edited"]],
                       tmp / "board", echo=said.append,
                       audit=lambda d: audit_run(d, echo=lambda *_: None))
    listed = pd.read_csv(tmp / "board" / "runs.csv").set_index("run")
    assert listed["audit"].to_dict() == {"pilot": "passed", "longer": "passed",
                                         "events": "passed", "edited": "failed"}
    assert "scores.csv" in listed.loc["edited", "violations"]
    assert "edited: audit failed" in "\n".join(said)
    board = pd.read_csv(tmp / "board" / "leaderboard.csv")
    assert set(board["track"]) == {"intraday", "events"}
    assert not board["model"].str.startswith("edited/").any()
    intraday = board[board["track"] == "intraday"].set_index("model")
    # the shared tasks: the pilot's nine, which the longer run holds too
    pilot_rows = pd.read_parquet(out["pilot"] / "rows.parquet")
    longer_rows = pd.read_parquet(out["longer"] / "rows.parquet")
    shared = set(pilot_rows["task_id"])
    assert shared <= set(longer_rows["task_id"])
    assert (intraday["n_shared"] == 9).all()
    coin = pilot_rows[pilot_rows["model"] == "coin"].set_index("task_id")["brier"]
    for label, rows in (("pilot", pilot_rows), ("longer", longer_rows)):
        for model, mine in rows[rows["scored"]].groupby("model"):
            entry = intraday.loc[f"{label}/{model}"]
            on = mine[mine["task_id"].isin(shared)].set_index("task_id")["brier"]
            assert entry["n"] == len(mine)
            assert entry["brier"] == pytest.approx(mine["brier"].mean(), rel=1e-9)
            assert entry["brier_shared"] == pytest.approx(on.mean(), rel=1e-9)
            assert entry["bss_shared"] == pytest.approx(1 - on.sum() / coin[on.index].sum(),
                                                        rel=1e-9, abs=1e-12)
    assert intraday.loc["pilot/coin", "reference"] == "pilot/coin"
    events = board[board["track"] == "events"]
    assert (events["model"].str.startswith("events/")).all() and (events["n_shared"] == 42).all()
    # each track's own reference: the event board's skill is against its first reference,
    # the market price (there is no coin there), and no board says it lacks one
    assert (events["reference"] == "events/market").all()
    event_rows = pd.read_parquet(out["events"] / "rows.parquet")
    event_rows = event_rows[event_rows["scored"]]
    market = event_rows[event_rows["model"] == "market"].set_index("task_id")["brier"]
    for model, mine in event_rows.groupby("model"):
        entry = events.set_index("model").loc[f"events/{model}"]
        on = mine.set_index("task_id")["brier"]
        assert entry["bss_shared"] == pytest.approx(1 - on.sum() / market[on.index].sum(),
                                                    rel=1e-9, abs=1e-12)
        assert entry["bss_lo"] <= entry["bss_shared"] <= entry["bss_hi"] or model == "market"
    assert not any("no skill" in line for line in said)
    text = page.read_text()
    assert "Track: intraday" in text and "Track: events" in text and "<script>" in text
    # each run's receipts are text that may wrap anywhere, never numbers (whatever digits a
    # hash begins with)
    receipt = listed.loc["pilot", "manifest_sha256"]
    assert f'<td class="hash">{receipt}</td>' in text
    snapshot = listed.loc["pilot", "snapshot_sha256"]
    assert f'<td class="hash">{snapshot}</td>' in text


def test_the_command_writes_the_page(runs):
    tmp, out = runs
    done = cli("leaderboard", out["pilot"], out["events"], "--out", tmp / "cmd")
    assert done.returncode == 0, done.stderr
    assert (tmp / "cmd" / "leaderboard.html").is_file()
    assert len(pd.read_csv(tmp / "cmd" / "runs.csv")) == 2
    # a reference named on the command line is every board's: the event runs have no coin
    done = cli("leaderboard", out["pilot"], out["events"], "--out", tmp / "coin",
               "--reference", "coin")
    assert done.returncode == 0, done.stderr
    assert "events: no model named 'coin' in the runs: no skill" in done.stderr
    board = pd.read_csv(tmp / "coin" / "leaderboard.csv")
    assert board.loc[board["track"] == "events", "bss_shared"].isna().all()
    assert (board.loc[board["track"] == "intraday", "reference"] == "pilot/coin").all()


def test_a_model_with_a_cutoff_is_scored_apart_on_each_side_and_agents_are_marked(
        tmp_path, sample_store):
    """A replayed model declaring a knowledge cutoff: its Brier up to the cutoff (possibly
    memorised) and after it, each on its own rows; the board says which models had tools."""
    from finbench.audit import audit_run
    from tests.helpers import aapl_config, baselines_toml

    tasks = [f"AAPL|{d}|{h}" for d in ("2025-01-14", "2025-01-15")
             for h in ("MORNING", "MIDDAY", "CLOSE")]
    (tmp_path / "r.csv").write_text("task_id,p_up\n" + "".join(f"{t},0.6\n" for t in tasks))
    cfg = aapl_config(tmp_path / "c.toml", sample_store, baselines_toml("coin")
                      + '[[models]]\nname = "old"\nkind = "replay"\npath = "r.csv"\n'
                        'knowledge_cutoff = "2025-01-14"\n', start="2025-01-14")
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    leaderboard([out], tmp_path / "board", echo=lambda *_: None,
                audit=lambda d: audit_run(d, echo=lambda *_: None))
    board = pd.read_csv(tmp_path / "board" / "leaderboard.csv").set_index("model")
    rows = pd.read_parquet(out / "rows.parquet")
    mine = rows[(rows["model"] == "old") & rows["scored"]]
    before = mine[mine["session"] <= "2025-01-14"]
    after = mine[mine["session"] > "2025-01-14"]
    entry = board.loc["run/old"]
    assert (entry["n_before_cutoff"], entry["n_after_cutoff"]) == (len(before), len(after))
    assert entry["brier_before_cutoff"] == pytest.approx(before["brier"].mean(), rel=1e-9)
    assert entry["brier_after_cutoff"] == pytest.approx(after["brier"].mean(), rel=1e-9)
    assert pd.isna(board.loc["run/coin", "n_before_cutoff"])
    assert set(board["tools"]) == {"no"}
