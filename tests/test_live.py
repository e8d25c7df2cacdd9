"""``finbench live`` and ``finbench verify`` on a fake clock: a store filled by a feed as the
clock passes (tests/live_feed.py), the tests' own RFC 3161 authority stamping at the clock's
time (tests/tsa_server.py), the loopback chat server answering a language model. A season is
sealed on time and verifies; its run's scores are a backtest's; a restart never asks a sealed
horizon again and records the horizons it slept through as missed; a TSA down past the
deadline makes a late seal, kept and never scored as on time; every kind of edit of the
published directory is named by ``verify``."""

import datetime as dt
import json
import shutil

import pandas as pd
import pytest

from finbench.core.errors import ConfigError
from finbench.live.clock import FakeClock
from finbench.live.ledger import Ledger, canonical, entry_hash
from finbench.live.season import live, slots_of
from finbench.live.verify import verify_live
from finbench.runner import run
from finbench.tracks import plugin_of
from finbench.tracks.configs import load_config
from tests.live_feed import LiveFeed
from tests.tsa_server import TimestampAuthority

QUIET = {"echo": lambda *_: None}
FIRST, LAST = dt.date(2025, 1, 13), dt.date(2025, 1, 15)
OPEN = dt.datetime(2025, 1, 13, 13, 0, tzinfo=dt.UTC)  # 08:00 in New York


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("FINBENCH_TEST_KEY", "sk-live-test")
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))


class Season:
    """A store, a feed, a fake clock, a TSA on that clock, and a config that lives by them."""

    def __init__(self, tmp_path, sample_store, server, start=OPEN, first=FIRST, last=LAST,
                 llm=True):
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.tmp = tmp_path
        self.feed = LiveFeed(sample_store, tmp_path / "store", ["AAPL", "MSFT"], first)
        self.clock = FakeClock(start, on_advance=self.feed)
        self.feed(start)
        self.tsa = TimestampAuthority(clock=self.clock.now)
        (tmp_path / "root.pem").write_bytes(self.tsa.ca_pem())
        models = ('[[models]]\nname = "coin"\nkind = "coin"\n'
                  '[[models]]\nname = "climatology"\nkind = "climatology"\n')
        if llm:
            models += (f'[[models]]\nname = "llm"\nkind = "openai"\nmodel = "variants"\n'
                       f'base_url = "{server.base_url}"\napi_key_env = "FINBENCH_TEST_KEY"\n')
        self.body = (f'[data]\nstore = "store"\n[tasks]\ntickers = ["AAPL", "MSFT"]\n'
                     f'start = "{first}"\nend = "{last}"\n' + models)
        self.config = tmp_path / "season.toml"
        self.config.write_text(self.body + f'[live]\ntsa_url = "{self.tsa.url}"\n'
                                           'tsa_root = "root.pem"\n')
        self.out = tmp_path / "season"

    def live(self, **kw):
        return live(self.config, self.out, clock=self.clock, **{"until": LAST, **kw}, **QUIET)


def kinds(out) -> pd.Series:
    return pd.Series([e["kind"] for e in Ledger(out).entries()]).value_counts()


def test_a_season_is_sealed_on_time_verifies_and_scores_as_a_backtest(tmp_path, sample_store,
                                                                     server):
    s = Season(tmp_path, sample_store, server)
    out = s.live()
    counts = kinds(out)
    # 3 sessions x 3 horizons, each of 2 tickers x 3 models
    assert (counts["seal"], counts["commit"], counts["reveal"]) == (9, 54, 54)
    problems, facts = verify_live(out)
    assert problems == [] and facts == {"commits": 54, "seals": 9, "on_time": 54, "late": 0,
                                        "missed": 0, "revealed": 54}
    for e in Ledger(out).entries():
        if e["kind"] == "seal":  # stamped within the allowance, by the fake clock
            assert pd.Timestamp(e["at"]) <= pd.Timestamp(e["tsa_time"]) <= pd.Timestamp(
                e["deadline"])
        if e["kind"] == "reveal":  # nothing the answer read was available after its time
            receipt = e["payload"]["receipt"]
            if receipt["max_input_time"] is not None:
                assert receipt["max_input_time"] <= e["payload"]["t_forecast"]
    # a backtest of the same config on the same bars scores exactly as the sealed season
    (tmp_path / "backtest.toml").write_text(s.body)
    backtest = run(tmp_path / "backtest.toml", tmp_path / "backtest", **QUIET)
    columns = ["slice_kind", "slice", "model", "n", "brier", "log_loss", "n_interval",
               "coverage", "winkler"]
    pd.testing.assert_frame_equal(pd.read_parquet(out / "run" / "scores.parquet")[columns],
                                  pd.read_parquet(backtest / "scores.parquet")[columns])
    # the language model's sealed answers are the backtest's rows
    a = pd.read_parquet(out / "run" / "forecasts.parquet").query("model == 'llm'")
    b = pd.read_parquet(backtest / "forecasts.parquet").query("model == 'llm'")
    assert a["p_up"].tolist() == b["p_up"].tolist()


def test_the_schedule_follows_the_exchange_across_dst_and_an_early_close(tmp_path):
    (tmp_path / "c.toml").write_text(
        f'[data]\nstore = "{tmp_path}"\n[tasks]\ntickers = ["AAPL"]\nstart = "2024-11-01"\n'
        'end = "2024-12-02"\n[[models]]\nname = "coin"\nkind = "coin"\n')
    config = load_config(tmp_path / "c.toml")
    from tests.conftest import SAMPLE

    config = config.model_copy(update={"data": config.data.model_copy(update={"store": SAMPLE})})
    slots = slots_of(config, plugin_of(config), dt.date(2024, 11, 1), dt.date(2024, 12, 2))
    at = {(s["session"], s["horizon"]): s["at"] for s in slots}
    assert at[("2024-11-01", "MORNING")] == dt.datetime(2024, 11, 1, 13, 30, tzinfo=dt.UTC)
    assert at[("2024-11-04", "MORNING")] == dt.datetime(2024, 11, 4, 14, 30, tzinfo=dt.UTC)
    sessions = {s["session"] for s in slots}
    assert "2024-11-28" not in sessions  # Thanksgiving: closed
    assert "2024-11-29" not in sessions  # an early close (13:00): its tasks skipped
    assert [s["at"] for s in slots] == sorted(s["at"] for s in slots)


def test_a_restart_never_asks_a_sealed_horizon_again_and_records_missed_ones(
        tmp_path, sample_store, server):
    s = Season(tmp_path, sample_store, server)
    crash_at = dt.datetime(2025, 1, 13, 17, 30, tzinfo=dt.UTC)  # the first MIDDAY

    def feed_then_die(now):
        s.feed(now)
        if now >= crash_at:
            raise KeyboardInterrupt  # the process is killed waiting for MIDDAY
    s.clock.on_advance = feed_then_die
    with pytest.raises(KeyboardInterrupt):
        s.live()
    assert kinds(s.out)["seal"] == 1  # MORNING sealed
    asked = len(server.requests)
    # started again the next day at 12:00 New York: the first day's MIDDAY and CLOSE and the
    # next day's MORNING passed while it was down
    s.clock.on_advance = s.feed
    s.clock.sleep_until(dt.datetime(2025, 1, 14, 17, 0, tzinfo=dt.UTC))
    out = s.live()
    counts = kinds(out)
    assert counts["missed"] == 3 and counts["seal"] == 6
    missed = [(e["session"], e["horizon"]) for e in Ledger(out).entries()
              if e["kind"] == "missed"]
    assert missed == [("2025-01-13", "MIDDAY"), ("2025-01-13", "CLOSE"),
                      ("2025-01-14", "MORNING")]
    # the first MORNING was not asked again: 2 tickers at each of the 5 later horizons
    llm = [r for r in server.requests[asked:] if r.get("model") == "variants"]
    assert len(llm) == 2 * 5
    problems, facts = verify_live(out)
    assert problems == [] and facts["missed"] == 3 and facts["on_time"] == 6 * 6
    rows = pd.read_parquet(out / "run" / "forecasts.parquet")
    llm_tasks = set(rows.loc[rows["model"] == "llm", "task_id"])
    assert not any(t.endswith("2025-01-13|MIDDAY") or t.startswith("AAPL|2025-01-14|MORNING")
                   for t in llm_tasks)  # never forecast late
    assert len(llm_tasks) == 2 * 6


def test_a_tsa_down_past_the_deadline_makes_a_late_seal_never_scored_on_time(
        tmp_path, sample_store, server):
    s = Season(tmp_path, sample_store, server, llm=False)
    s.tsa.refuse = True  # down: the live process asks again every 2 s to the deadline
    late_day = dt.datetime(2025, 1, 13, 15, 0, tzinfo=dt.UTC)

    def heal(now):
        s.feed(now)
        if now >= late_day:
            s.tsa.refuse = False
    s.clock.on_advance = heal
    out = s.live()
    seals = [e for e in Ledger(out).entries() if e["kind"] == "seal"]
    assert [e["on_time"] for e in seals][:2] == [False, True]
    assert seals[0]["token"] is None and "503" in seals[0]["reason"]
    problems, facts = verify_live(out)
    assert problems == [] and facts["late"] == 4 and facts["on_time"] == 8 * 4
    rows = pd.read_parquet(out / "run" / "forecasts.parquet")
    # the coin is a baseline (computed again); no forecasting model here but the baselines
    assert set(rows["model"]) == {"coin", "climatology"}


@pytest.fixture(scope="module")
def sealed(tmp_path_factory, sample_store):
    """One sealed season (no language model), for the edits below."""
    tmp = tmp_path_factory.mktemp("sealed")
    import os

    os.environ["FINBENCH_CACHE_DIR"] = str(tmp / "cache")
    s = Season(tmp, sample_store, None, llm=False, last=dt.date(2025, 1, 14))
    s.live(until=dt.date(2025, 1, 14))
    assert verify_live(s.out)[0] == []
    return s.out


def _copy(sealed, tmp_path):
    copy = tmp_path / "season"
    shutil.copytree(sealed, copy)
    shutil.copytree(sealed.parent / "store", tmp_path / "store")
    return copy


def _rewrite(copy, edit):
    """Edit the ledger's entries and chain them again (what a forger able to rehash does)."""
    entries = Ledger(copy).entries()
    edit(entries)
    prev = "0" * 64
    for i, e in enumerate(entries):
        e["seq"], e["prev"] = i, prev
        e["hash"] = entry_hash(e)
        prev = e["hash"]
    (copy / "ledger.jsonl").write_bytes(b"".join(canonical(e) + b"\n" for e in entries))


def _first(entries, kind):
    return next(e for e in entries if e["kind"] == kind)


def _edit_line(copy):
    lines = (copy / "ledger.jsonl").read_bytes().splitlines()
    lines[1] = lines[1].replace(b'"commitment":"', b'"commitment":"0')
    (copy / "ledger.jsonl").write_bytes(b"\n".join(lines) + b"\n")


def _edit_answer(entries):
    _first(entries, "reveal")["payload"]["answer"]["p_up"] = 0.9


def _edit_nonce(entries):
    e = _first(entries, "reveal")
    e["nonce"] = ("0" if e["nonce"][0] != "0" else "1") + e["nonce"][1:]


def _edit_token(entries):
    import base64

    seal = _first(entries, "seal")
    raw = bytearray(base64.b64decode(seal["token"]))
    raw[-20] ^= 1
    seal["token"] = base64.b64encode(bytes(raw)).decode()


def _edit_deadline(entries):
    seal = _first(entries, "seal")
    seal["deadline"] = seal["at"]  # as if its allowance were none


def _edit_inserted(entries):  # a commitment slipped in before the seal, chained again
    i = entries.index(_first(entries, "seal"))
    entries.insert(i, {**entries[i - 1], "commitment": "f" * 64})


def _edit_score(copy):
    scores = pd.read_parquet(copy / "run" / "scores.parquet")
    scores.loc[0, "brier"] = 0.123
    scores.to_parquet(copy / "run" / "scores.parquet", index=False)


def _edit_row(copy):  # a row of the season's run (a baseline's here) against what it sealed
    rows = pd.read_parquet(copy / "run" / "forecasts.parquet")
    rows.loc[0, "p_up"] = 0.51
    rows.to_parquet(copy / "run" / "forecasts.parquet", index=False)


EDITS = {  # what is edited: (a file edit, or a ledger edit chained again), what verify says
    "line": (_edit_line, None, "ledger.jsonl: line 2: its hash is not its content's"),
    "answer": (None, _edit_answer, "SHA-256(payload || nonce) is not the commitment"),
    "nonce": (None, _edit_nonce, "SHA-256(payload || nonce) is not the commitment"),
    "token": (None, _edit_token, "its time-stamp token does not verify"),
    "deadline": (None, _edit_deadline, "is not its horizon's time plus 60 s"),
    "inserted": (None, _edit_inserted, "the seal's head is not the hash of the line before"),
    "score": (_edit_score, None, "are not those of the sealed answers scored again"),
    "row": (_edit_row, None, "but it sealed p_up"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_every_kind_of_edit_is_named(sealed, tmp_path, edit):
    copy = _copy(sealed, tmp_path)
    on_file, on_ledger, said = EDITS[edit]
    if on_file is not None:
        on_file(copy)
    else:
        _rewrite(copy, on_ledger)
    problems, _ = verify_live(copy)
    assert any(said in p for p in problems), problems


def test_a_config_without_live_settings_is_refused(tmp_path, sample_store):
    (tmp_path / "c.toml").write_text(f'[data]\nstore = "{sample_store}"\n[tasks]\n'
                                     'tickers = ["AAPL"]\nstart = "2025-01-15"\n'
                                     'end = "2025-01-15"\n[[models]]\nname = "coin"\n'
                                     'kind = "coin"\n')
    with pytest.raises(ConfigError, match=r"no \[live\] section"):
        live(tmp_path / "c.toml", tmp_path / "out", clock=FakeClock(OPEN), **QUIET)


def test_one_horizon_then_exit_as_a_scheduler_runs_it(tmp_path, sample_store, server):
    s = Season(tmp_path, sample_store, server)
    s.live(horizon="MORNING")
    entries = Ledger(s.out).entries()
    assert [(e["session"], e["horizon"]) for e in entries if e["kind"] == "seal"] == [
        ("2025-01-13", "MORNING")]
    assert not (s.out / "run").exists()  # nothing revealed yet: no session complete
    assert json.loads((s.out / "live.json").read_text())["seal_within_seconds"] == 60.0


def test_the_committed_sample_season_verifies_wherever_it_is_copied(tmp_path):
    """data/live_sample (make_live_sample.py beside it): a stranger's copy verifies."""
    from tests.conftest import SAMPLE

    copy = tmp_path / "elsewhere" / "live_sample"
    shutil.copytree(SAMPLE.parent / "live_sample", copy)
    problems, facts = verify_live(copy)
    assert problems == []
    assert (facts["seals"], facts["commits"], facts["on_time"]) == (9, 18, 18)


def test_a_season_across_a_dst_change_and_an_early_close_runs_on_the_fake_clock(
        tmp_path, sample_store, server):
    """New York leaves daylight saving on 2024-11-03 (09:30 is 13:30 UTC before, 14:30
    after); 2024-11-29 closes at 13:00 (its tasks skipped, as a backtest skips them)."""
    s = Season(tmp_path / "dst", sample_store, server, llm=False,
               start=dt.datetime(2024, 11, 1, 12, 0, tzinfo=dt.UTC),
               first=dt.date(2024, 11, 1), last=dt.date(2024, 11, 4))
    s.live(until=dt.date(2024, 11, 4))
    seals = {(e["session"], e["horizon"]): e["at"] for e in Ledger(s.out).entries()
             if e["kind"] == "seal"}
    assert seals[("2024-11-01", "MORNING")] == "2024-11-01T13:30:00.000000Z"
    assert seals[("2024-11-04", "MORNING")] == "2024-11-04T14:30:00.000000Z"
    assert verify_live(s.out)[0] == []
    t = Season(tmp_path / "early", sample_store, server, llm=False,
               start=dt.datetime(2024, 11, 27, 12, 0, tzinfo=dt.UTC),
               first=dt.date(2024, 11, 27), last=dt.date(2024, 11, 29))
    t.live(until=dt.date(2024, 11, 29))
    sessions = {e["session"] for e in Ledger(t.out).entries() if e["kind"] == "seal"}
    assert sessions == {"2024-11-27"}
    assert verify_live(t.out)[0] == []


def test_a_store_written_while_a_horizon_reads_it_is_read_again(tmp_path, sample_store, server,
                                                                 monkeypatch):
    from finbench.core.errors import StoreError
    from finbench.live import season as module

    s = Season(tmp_path, sample_store, server, llm=False)
    real, calls, said = module.run, [], []

    def changed_once(*args, **kw):
        calls.append(1)
        if len(calls) == 1:
            raise StoreError("store: bars/date=2025-01-13/part.parquet changed while read")
        return real(*args, **kw)
    monkeypatch.setattr(module, "run", changed_once)
    live(s.config, s.out, clock=s.clock, until=FIRST, echo=said.append)
    assert any("the store changed while it was read" in x and "reading it again" in x
               for x in said)
    seals = [e for e in Ledger(s.out).entries() if e["kind"] == "seal"]
    assert len(seals) == 3 and all(e["on_time"] for e in seals)


def test_bars_asked_of_a_vendor_at_each_horizon_seal_as_the_store_does(
        tmp_path, sample_store, server, monkeypatch):
    """[live] source = "alpaca": at each horizon the official client asks the (loopback)
    vendor for the day's bars that ended by then; the season seals and verifies, and scores
    as the same season fed by the store."""
    from tests.alpaca_server import AlpacaBars

    s = Season(tmp_path / "vendor", sample_store, server, llm=False, last=dt.date(2025, 1, 14))
    vendor = AlpacaBars(sample_store, s.clock.now)
    monkeypatch.setenv("ALPACA_API_KEY", "key")
    monkeypatch.setenv("ALPACA_SECRET_KEY", "secret")
    monkeypatch.setenv("ALPACA_DATA_URL", vendor.url)
    s.clock.on_advance = None  # the store gets today's bars from the vendor alone
    s.config.write_text(s.config.read_text() + 'source = "alpaca"\nfeed = "iex"\n')
    try:
        out = s.live(until=dt.date(2025, 1, 14))
    finally:
        vendor.close()
    asked = [pd.Timestamp(r["end"]) for r in vendor.requests if r["path"] == "/v2/stocks/bars"]
    # each horizon asks the day's bars to its time (the first day's three, in order), and a
    # day asked before its end is asked whole before the next day's first horizon
    ends = list(dict.fromkeys(asked))  # (each ticker asked apart, at the same time)
    assert ends[:3] == [pd.Timestamp(f"2025-01-13T{t}:00Z") for t in ("14:30", "17:30",
                                                                        "20:30")]
    assert pd.Timestamp("2025-01-14T01:00:00Z") in asked  # 2025-01-13 whole (to 20:00 local)
    problems, facts = verify_live(out)
    assert problems == [] and facts["on_time"] == facts["commits"] == 6 * 2 * 2
    fed = Season(tmp_path / "fed", sample_store, server, llm=False, last=dt.date(2025, 1, 14))
    fed_out = fed.live(until=dt.date(2025, 1, 14))
    columns = ["slice_kind", "slice", "model", "n", "brier"]
    pd.testing.assert_frame_equal(pd.read_parquet(out / "run" / "scores.parquet")[columns],
                                  pd.read_parquet(fed_out / "run" / "scores.parquet")[columns])


def test_a_vendor_fed_season_restarted_after_a_day_down_asks_that_day_whole_first(
        tmp_path, sample_store, server, monkeypatch):
    """Killed after the first horizon's bars were asked of the vendor, before its answers
    were committed, and down to the next day's noon: nothing of the first day is revealed,
    yet the day is asked of the vendor whole before the next horizon reads the store, so
    the baselines read its labels as a backtest does (verify scores it all again)."""
    from finbench.live import season as module
    from tests.alpaca_server import AlpacaBars

    s = Season(tmp_path, sample_store, server, llm=False)
    vendor = AlpacaBars(sample_store, s.clock.now)
    monkeypatch.setenv("ALPACA_API_KEY", "key")
    monkeypatch.setenv("ALPACA_SECRET_KEY", "secret")
    monkeypatch.setenv("ALPACA_DATA_URL", vendor.url)
    s.config.write_text(s.config.read_text() + 'source = "alpaca"\n')
    s.clock.on_advance = None
    real = module.commit_horizon

    def killed(*args, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(module, "commit_horizon", killed)
    try:
        with pytest.raises(KeyboardInterrupt):
            s.live()
        monkeypatch.setattr(module, "commit_horizon", real)
        s.clock.sleep_until(dt.datetime(2025, 1, 14, 17, 0, tzinfo=dt.UTC))
        out = s.live()
    finally:
        vendor.close()
    assert [e["horizon"] for e in Ledger(out).entries() if e["kind"] == "missed"] == [
        "MORNING", "MIDDAY", "CLOSE", "MORNING"]
    assert json.loads((out / "fetched.json").read_text())[0] == "2025-01-13"
    problems, facts = verify_live(out)
    assert problems == [] and facts["missed"] == 4
