"""Declared slices (``[[slices]]``): each task's value in each, in ``slices.parquet``, against
independent answers (the volatility regime by a loop over the run's own labels; calendars
and groups by hand), the same whatever the run's dates, re-derived by the audit, and the
report's scores in each value computed again from the rows; bad files named before a run
makes its folder."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.core.errors import ConfigError, DataError
from finbench.core.slices import TOO_LITTLE, calendar_hits
from finbench.runner import run
from finbench.tracks.configs import load_config

QUIET = {"echo": lambda *_: None}
CALENDAR = ("time,label,ticker\n"
            "2025-01-08T14:00:00-05:00,FOMC minutes,\n"  # a Wednesday, inside MORNING/MIDDAY
            "2025-01-10T08:30:00-05:00,payrolls,\n"      # before the open
            "2025-01-14T16:05:00-05:00,earnings,NVDA\n")  # after the target, NVDA's own


def config(tmp_path, store, start, end, slices, tickers=("AAPL", "MSFT", "NVDA"), name="c"):
    path = tmp_path / f"{name}.toml"
    path.write_text(f'[data]\nstore = "{store}"\n[tasks]\ntickers = {list(tickers)!r}\n'
                    f'start = "{start}"\nend = "{end}"\n'
                    '[[models]]\nname = "coin"\nkind = "coin"\n'
                    '[[models]]\nname = "climatology"\nkind = "climatology"\n' + slices)
    return path


VOL = '[[slices]]\nname = "regime"\nkind = "volatility"\nlookback = 5\nwindow = 10\nmin_count = 4\n'


def naive_regimes(tasks: pd.DataFrame, labels: pd.DataFrame, lookback: int, window: int,
                  min_count: int) -> pd.DataFrame:
    """Per task, by a loop: the returns of its ticker and horizon known strictly before its
    forecast time, in the order they became known; their last ``lookback`` give rv, and the
    rv at each of the up to ``window`` places before give the terciles."""
    every = tasks.merge(labels, on="task_id")
    every = every[every["status"] == "ok"]
    out = []
    for t in tasks.itertuples():
        mine = every[(every["ticker"] == t.ticker) & (every["horizon"] == t.horizon)
                     & (every["label_known_at"] < t.t_forecast)].sort_values("label_known_at")
        r = mine["r"].to_numpy(float)
        k = len(r)
        if k < lookback:
            out.append((t.task_id, TOO_LITTLE, np.nan, np.nan, np.nan, 0))
            continue
        rv = float(np.sqrt(np.mean(r[k - lookback:] ** 2)))
        earlier = [float(np.sqrt(np.mean(r[q - lookback:q] ** 2)))
                   for q in range(max(lookback, k - window), k)]
        if len(earlier) < min_count:
            out.append((t.task_id, TOO_LITTLE, rv, np.nan, np.nan, len(earlier)))
            continue
        low, high = np.quantile(earlier, [1 / 3, 2 / 3])
        value = "low" if rv <= low else ("high" if rv > high else "mid")
        out.append((t.task_id, value, rv, low, high, len(earlier)))
    return pd.DataFrame(out, columns=["task_id", "value", "rv", "rv_low", "rv_high", "rv_count"])


@pytest.fixture(scope="module")
def long_run(tmp_path_factory, sample_store):
    """The sample's first session to its last: the history is the run itself."""
    tmp = tmp_path_factory.mktemp("slices")
    (tmp / "fomc.csv").write_text(CALENDAR)
    slices = VOL + ('[[slices]]\nname = "sector"\nkind = "groups"\n'
                    'groups = { chips = ["NVDA"], software = ["MSFT"] }\n'
                    f'[[slices]]\nname = "fomc"\nkind = "calendar"\nfile = "{tmp / "fomc.csv"}"\n')
    return run(config(tmp, sample_store, "2024-09-20", "2025-01-15", slices, name="long"),
               tmp / "long", **QUIET)


def test_volatility_regimes_equal_a_loop_over_the_runs_own_labels(long_run):
    tasks = pd.read_parquet(long_run / "tasks.parquet")
    labels = pd.read_parquet(long_run / "labels.parquet")
    got = pd.read_parquet(long_run / "slices.parquet")
    got = got[got["slice"] == "regime"].reset_index(drop=True)
    want = naive_regimes(tasks, labels, 5, 10, 4)
    assert got["task_id"].tolist() == tasks["task_id"].tolist()
    assert got["value"].tolist() == want["value"].tolist()
    for column in ("rv", "rv_low", "rv_high"):
        np.testing.assert_allclose(got[column].to_numpy(float), want[column].to_numpy(float),
                                   rtol=1e-12, atol=0, equal_nan=True)
    assert got["rv_count"].fillna(0).astype(int).tolist() == want["rv_count"].tolist()
    assert set(got["value"]) == {"low", "mid", "high", TOO_LITTLE}
    # the latest return read is known before the forecast, and it is the series' last one
    known = got["rv_known_at"].dropna()
    assert (known.to_numpy() < tasks.loc[known.index, "t_forecast"].to_numpy()).all()


def test_a_tasks_regime_is_the_same_whatever_the_runs_dates(long_run, tmp_path, sample_store):
    short = run(config(tmp_path, sample_store, "2025-01-13", "2025-01-15", VOL), tmp_path / "s",
                **QUIET)
    got = pd.read_parquet(short / "slices.parquet")
    every = pd.read_parquet(long_run / "slices.parquet")
    every = every[every["slice"] == "regime"].set_index("task_id").loc[got["task_id"]]
    assert len(got) == 27
    pd.testing.assert_frame_equal(got.set_index("task_id"), every, check_names=False,
                                  check_dtype=False)


def test_calendar_and_groups_by_hand(long_run):
    got = pd.read_parquet(long_run / "slices.parquet")
    fomc = got[got["slice"] == "fomc"].set_index("task_id")
    days = {"2025-01-08": 1, "2025-01-10": 1}  # market-wide announcements, on their day
    expected = {tid: days.get(tid.split("|")[1], 0)
                + (tid.startswith("NVDA|2025-01-14")) for tid in fomc.index}
    assert fomc["announcements"].astype(int).to_dict() == expected
    assert (fomc["value"] == "event").sum() == 9 + 9 + 3
    sector = got[got["slice"] == "sector"].set_index("task_id")["value"]
    assert set(sector[sector.index.str.startswith("AAPL")]) == {"(ungrouped)"}
    assert set(sector[sector.index.str.startswith("NVDA")]) == {"chips"}
    assert set(sector[sector.index.str.startswith("MSFT")]) == {"software"}


def test_calendar_matches_by_window_and_minutes_by_hand():
    ns = pd.Timestamp  # UTC instants as int64 nanoseconds
    now = np.array([ns("2025-01-08T14:30Z").value, ns("2025-01-08T17:30Z").value,
                    ns("2025-01-08T20:30Z").value, ns("2025-01-10T14:30Z").value,
                    ns("2025-01-14T20:30Z").value])
    end = now - now % (86_400 * 10**9) + ns("1970-01-01T20:55Z").value
    key = np.array(["AAPL", "AAPL", "AAPL", "MSFT", "NVDA"], object)
    events = np.array([ns("2025-01-08T19:00Z").value, ns("2025-01-10T13:30Z").value,
                       ns("2025-01-14T21:05Z").value])
    owner = np.array(["", "", "NVDA"], object)
    # after the forecast and at or before 20:55: the 19:00 one for the two earlier horizons
    assert calendar_hits(now, end, key, events, owner, match="window").tolist() == [1, 1, 0,
                                                                                     0, 0]
    # within 60 minutes either side: 13:30 is 60 before 14:30 (kept), 21:05 35 after 20:30
    assert calendar_hits(now, end, key, events, owner, match="minutes",
                         minutes=60).tolist() == [0, 0, 0, 1, 1]
    assert calendar_hits(now, end, key, events, owner, match="minutes",
                         minutes=59).tolist() == [0, 0, 0, 0, 1]
    # another ticker's announcement is not MSFT's
    assert calendar_hits(now[3:4], end[3:4], np.array(["MSFT"], object), events[2:],
                         owner[2:], match="minutes", minutes=10_000).tolist() == [0]


def test_a_calendars_local_times_follow_the_zone_across_a_dst_change(tmp_path, sample_store):
    """08:30 New York is 12:30 UTC before 2024-11-03 and 13:30 after: within 60 minutes of
    the 09:30 forecast (13:30 and 14:30 UTC) on both days."""
    (tmp_path / "cal.csv").write_text("time,label\n2024-11-01 08:30,jobs\n2024-11-08 08:30,x\n")
    slices = (f'[[slices]]\nname = "jobs"\nkind = "calendar"\nfile = "{tmp_path / "cal.csv"}"'
              '\ntimezone = "America/New_York"\nmatch = "minutes"\nminutes = 60\n')
    out = run(config(tmp_path, sample_store, "2024-11-01", "2024-11-08", slices,
                     tickers=("AAPL",)), tmp_path / "dst", **QUIET)
    got = pd.read_parquet(out / "slices.parquet").set_index("task_id")["value"]
    assert sorted(got[got == "event"].index) == ["AAPL|2024-11-01|MORNING",
                                                 "AAPL|2024-11-08|MORNING"]


def test_the_report_scores_each_value_on_its_own_rows(long_run):
    from finbench.reports.build import report
    from finbench.scoring.bootstrap import mean_ci, skill_ci

    report(long_run)
    table = pd.read_csv(long_run / "tables" / "scores_by_slice.csv")
    rows = pd.read_parquet(long_run / "rows.parquet")
    slices = pd.read_parquet(long_run / "slices.parquet")
    assert table["slice"].drop_duplicates().tolist() == ["regime", "sector", "fomc"]
    assert table[table["slice"] == "regime"]["value"].drop_duplicates().tolist() == [
        "low", "mid", "high", TOO_LITTLE]
    assert table[table["slice"] == "sector"]["value"].drop_duplicates().tolist() == [
        "chips", "software", "(ungrouped)"]
    for r in table.itertuples():
        ids = set(slices[(slices["slice"] == r.slice) & (slices["value"] == r.value)]["task_id"])
        assert r.tasks == len(ids)
        mine = rows[(rows["model"] == r.model) & rows["scored"] & rows["task_id"].isin(ids)]
        assert r.n == len(mine)
        assert r.brier == pytest.approx(mine["brier"].mean(), abs=1e-9)  # the CSV's digits
        sessions = pd.factorize(mine["session"], sort=True)[0]
        ci = mean_ci(mine["brier"].to_numpy(float), sessions, replicates=2000, seed=20250115)
        assert (r.brier_lo, r.brier_hi) == pytest.approx((ci.lower, ci.upper), abs=1e-9)
        if r.model == "climatology":
            coin = rows[(rows["model"] == "coin") & rows["scored"]].set_index("task_id")
            both = mine[mine["task_id"].isin(coin.index)]
            a = both["brier"].to_numpy(float)
            b = coin.loc[both["task_id"], "brier"].to_numpy(float)
            sk = skill_ci(a, b, pd.factorize(both["session"], sort=True)[0], replicates=2000,
                          seed=20250115)
            assert r.bss_n == len(both)
            assert r.bss == pytest.approx(1 - a.sum() / b.sum(), abs=1e-9)
            assert (r.bss_lo, r.bss_hi) == pytest.approx((sk.lower, sk.upper), abs=1e-9)
    assert "Declared slices" in (long_run / "report.html").read_text()


def test_declaring_slices_changes_no_score(long_run, tmp_path, sample_store):
    plain = run(config(tmp_path, sample_store, "2024-09-20", "2025-01-15", ""), tmp_path / "p",
                **QUIET)
    for name in ("labels.parquet", "scores.parquet", "rows.parquet"):
        assert (plain / name).read_bytes() == (long_run / name).read_bytes(), name
    timed = ["latency"]  # how long each answer took: the only column that may differ
    pd.testing.assert_frame_equal(
        pd.read_parquet(plain / "forecasts.parquet").drop(columns=timed),
        pd.read_parquet(long_run / "forecasts.parquet").drop(columns=timed))
    assert not (plain / "slices.parquet").exists()


def test_the_audit_names_an_edited_slice_value(long_run, tmp_path):
    import shutil

    from finbench.audit import audit_run
    from finbench.data.store import sha256_file

    copy = tmp_path / "copy"
    shutil.copytree(long_run, copy)
    table = pd.read_parquet(copy / "slices.parquet")
    at = table.index[(table["slice"] == "regime") & (table["value"] == "low")][0]
    table.loc[at, "value"] = "high"
    import pyarrow as pa
    import pyarrow.parquet as pq

    from finbench.core.slices import SLICE_SCHEMA
    pq.write_table(pa.Table.from_pandas(table, schema=SLICE_SCHEMA, preserve_index=False),
                   copy / "slices.parquet")
    import json

    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["files"]["slices.parquet"] = sha256_file(copy / "slices.parquet")
    (copy / "manifest.json").write_text(json.dumps(manifest))
    problems = audit_run(copy, echo=lambda *_: None)
    task = table.loc[at, "task_id"]
    assert any(p.startswith(f"slices.parquet: row {task}/regime, value is 'high'")
               for p in problems), problems


@pytest.mark.parametrize(("slices", "said"), [
    ('[[slices]]\nname = "a"\nkind = "volatility"\n[[slices]]\nname = "a"\nkind = "volatility"\n',
     "slices.a: two slices have this name"),
    ('[[slices]]\nname = "v"\nkind = "volatility"\nwindow = 10\nmin_count = 11\n',
     "min_count 11 is more than the window 10 holds"),
    ('[[slices]]\nname = "g"\nkind = "groups"\ngroups = { a = ["AAPL"], b = ["AAPL"] }\n',
     "'AAPL' is in group 'a' and in 'b'"),
    ('[[slices]]\nname = "g"\nkind = "groups"\n', "give groups or file, one of them"),
    ('[[slices]]\nname = "c"\nkind = "calendar"\nfile = "x.csv"\nmatch = "minutes"\n',
     "minutes goes with match = 'minutes'"),
])
def test_a_bad_slice_is_a_config_error(tmp_path, sample_store, slices, said):
    path = config(tmp_path, sample_store, "2025-01-15", "2025-01-15", slices)
    with pytest.raises(ConfigError, match=said.replace("(", r"\(").replace(")", r"\)")):
        load_config(path)


def test_an_event_config_refuses_a_volatility_regime(tmp_path):
    path = tmp_path / "e.toml"
    path.write_text('track = "events"\n[data]\nstore = "x"\n[tasks]\nresolved_from = 2024-03-01\n'
                    'resolved_to = 2024-06-30\ncutoff = "lead"\nlead_hours = 72\n'
                    '[[slices]]\nname = "v"\nkind = "volatility"\n')
    with pytest.raises(ConfigError, match="a volatility regime is the intraday track's"):
        load_config(path)


@pytest.mark.parametrize(("text", "said"), [
    ("when,label\n2025-01-08T14:00Z,x\n", "a calendar needs columns time and label (missing: "
                                          "time"),
    ("time,label\n2025-01-08T14:00Z,x\n2025-01-09 14:00,y\n",
     "row 2: time '2025-01-09 14:00' has no UTC offset"),
    ("time,label\n2025-01-08T14:00Z,x\nsoon,y\n", "row 2: time 'soon' is not a time"),
    ("time,label\n2025-01-08T14:00Z,\n", "row 1: label is empty"),
])
def test_a_bad_calendar_is_named_by_row_and_no_folder_is_made(tmp_path, sample_store, text,
                                                              said):
    (tmp_path / "cal.csv").write_text(text)
    slices = f'[[slices]]\nname = "c"\nkind = "calendar"\nfile = "{tmp_path / "cal.csv"}"\n'
    path = config(tmp_path, sample_store, "2025-01-15", "2025-01-15", slices)
    done = subprocess.run([sys.executable, "-m", "finbench", "run", str(path), "--out",
                           str(tmp_path / "r")], capture_output=True, text=True)
    assert done.returncode != 0
    assert f"DataError: {tmp_path / 'cal.csv'}: {said}" in done.stderr
    assert not (tmp_path / "r").exists()


def test_a_calendar_label_not_in_the_file_and_a_grouping_file_are_checked(tmp_path):
    from finbench.data.slice_files import read_calendar, read_groups

    (tmp_path / "cal.csv").write_text("time,label\n2025-01-08T14:00Z,FOMC\n")
    with pytest.raises(DataError, match="no announcement is labelled 'CPI'"):
        read_calendar(tmp_path / "cal.csv", key="ticker", labels=["CPI"])
    (tmp_path / "g.csv").write_text("ticker,group\nAAPL,tech\nAAPL,retail\n")
    with pytest.raises(DataError, match="row 2: ticker 'AAPL' is in group 'tech' and in "
                                        "'retail'"):
        read_groups(tmp_path / "g.csv", keys=("ticker",))
    (tmp_path / "g.csv").write_text("symbol,group\nAAPL,tech\n")
    with pytest.raises(DataError, match="a grouping needs a column group and one of ticker"):
        read_groups(tmp_path / "g.csv", keys=("ticker",))
    (tmp_path / "g.csv").write_text("ticker,group\nAAPL,tech\nNA,tech\n")  # Nano Labs
    assert read_groups(tmp_path / "g.csv", keys=("ticker",)) == ("ticker", {"AAPL": "tech",
                                                                           "NA": "tech"})


def test_event_slices_by_hand_and_in_the_report(tmp_path):
    from finbench.reports.build import report
    from tests.test_mcp import EVENT_STORE

    (tmp_path / "cal.csv").write_text("time,label,category\n2024-03-12T12:30:00Z,CPI,\n"
                                      "2024-04-10T12:30:00Z,CPI,economics\n")
    (tmp_path / "g.csv").write_text("market_id,group\nm040,first\nm041,first\n")
    path = tmp_path / "events.toml"
    path.write_text(f'track = "events"\n[data]\nstore = "{EVENT_STORE}"\n[tasks]\n'
                    'resolved_from = 2024-03-01\nresolved_to = 2024-06-30\ncutoff = "lead"\n'
                    'lead_hours = 72\n[[models]]\nname = "market"\nkind = "market_price"\n'
                    '[[models]]\nname = "half"\nkind = "constant"\np = 0.5\n'
                    '[[slices]]\nname = "macro"\nkind = "groups"\n'
                    'groups = { macro = ["economics", "crypto"] }\n'
                    f'[[slices]]\nname = "firsts"\nkind = "groups"\nfile = "{tmp_path / "g.csv"}"\n'
                    f'[[slices]]\nname = "cpi"\nkind = "calendar"\nfile = "{tmp_path / "cal.csv"}"\n'
                    'match = "minutes"\nminutes = 2880\n')
    out = run(path, tmp_path / "out", **QUIET)
    tasks = pd.read_parquet(out / "tasks.parquet")
    got = pd.read_parquet(out / "slices.parquet")
    macro = got[got["slice"] == "macro"].set_index("task_id")["value"]
    want = np.where(tasks["category"].isin(["economics", "crypto"]), "macro", "(ungrouped)")
    assert macro.loc[tasks["task_id"]].tolist() == want.tolist()
    firsts = got[got["slice"] == "firsts"].set_index("task_id")["value"]
    assert firsts.loc[tasks["task_id"]].tolist() == np.where(
        tasks["market_id"].isin(["m040", "m041"]), "first", "(ungrouped)").tolist()
    cpi = got[got["slice"] == "cpi"].set_index("task_id")["announcements"]
    t0 = tasks["t0"]
    near = lambda at: (abs(t0 - pd.Timestamp(at)) <= pd.Timedelta(minutes=2880)).to_numpy()  # noqa: E731
    want = near("2024-03-12T12:30:00Z").astype(int) + (
        near("2024-04-10T12:30:00Z") & (tasks["category"] == "economics").to_numpy())
    assert cpi.loc[tasks["task_id"]].astype(int).tolist() == want.tolist()
    assert want.sum() > 0
    report(out)
    table = pd.read_csv(out / "tables" / "event_scores_by_slice.csv")
    rows = pd.read_parquet(out / "rows.parquet")
    for r in table.itertuples():
        ids = set(got[(got["slice"] == r.slice_kind) & (got["value"] == r.slice)]["task_id"])
        mine = rows[(rows["model"] == r.model) & rows["scored"] & rows["task_id"].isin(ids)]
        assert (r.tasks, r.n) == (len(ids), len(mine))
        assert r.brier == pytest.approx(mine["brier"].mean(), abs=1e-9)
    skill = pd.read_csv(out / "tables" / "event_skill_by_slice.csv")
    first = skill[(skill["model"] == "market") & (skill["reference"] == "half")
                  & (skill["slice"] == "macro")].iloc[0]
    ids = set(got[(got["slice"] == "macro") & (got["value"] == "macro")]["task_id"])
    m = rows[(rows["model"] == "market") & rows["scored"] & rows["task_id"].isin(ids)]
    h = rows[(rows["model"] == "half") & rows["scored"]].set_index("task_id").loc[m["task_id"]]
    assert first["bss"] == pytest.approx(1 - m["brier"].mean() / h["brier"].mean(), abs=1e-9)
    from finbench.audit import audit_run

    assert audit_run(out, echo=lambda *_: None) == []


def test_shards_merge_into_the_slices_of_the_whole_run(tmp_path, sample_store):
    """Each shard reads its own history back, so its tasks' regimes are the whole run's; the
    merge orders them as the whole run does, byte for byte, and audits clean."""
    from finbench.audit import audit_run
    from finbench.shards import merge_shards

    (tmp_path / "fomc.csv").write_text(CALENDAR)
    slices = VOL + f'[[slices]]\nname = "fomc"\nkind = "calendar"\nfile = "{tmp_path / "fomc.csv"}"\n'
    cfg = config(tmp_path, sample_store, "2025-01-08", "2025-01-15", slices)
    whole = run(cfg, tmp_path / "whole", **QUIET)
    a = run(cfg, tmp_path / "a", shard=("2025-01-08", "2025-01-10"), **QUIET)
    b = run(cfg, tmp_path / "b", shard=("2025-01-13", "2025-01-15"), **QUIET)
    merged = merge_shards([b, a], tmp_path / "merged")
    assert (merged / "slices.parquet").read_bytes() == (whole / "slices.parquet").read_bytes()
    assert audit_run(merged, echo=lambda *_: None) == []


@settings(max_examples=200)
@given(st.lists(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=12), min_size=1,
                max_size=20))
def test_row_quantiles_are_numpys_on_each_rows_values(rows):
    """The thresholds' fast path: each row sorted with its padding last, its quantile taken
    by numpy's rule, equal bit for bit to numpy.quantile of the row's values."""
    from finbench.tracks.intraday.slices import row_quantile

    width = max(len(r) for r in rows)
    values = np.full((len(rows), width), np.nan)
    for i, r in enumerate(rows):
        values[i, :len(r)] = r
    counts = np.array([len(r) for r in rows])
    ordered = np.sort(values, axis=1)
    for p in (1 / 3, 2 / 3):
        want = [np.quantile(np.array(r), p) for r in rows]
        assert row_quantile(ordered, counts, p).tolist() == want
