"""The event track end to end: ingest of the public shapes (and bad input named), the gate
and retrieval (planted posts at and after t0 never seen), a run with language models on the
loopback server, the audit, and a forecast that depends on its task alone."""

import datetime as dt
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.audit import audit_run
from finbench.core.bm25 import PostIndex, candidates, top_k, window_scores
from finbench.core.errors import ConfigError, DataError, StoreError
from finbench.runner import run
from finbench.tracks.configs import load_config
from finbench.tracks.events.gate import retrieve
from finbench.tracks.events.store import MANIFEST, EventStore
from finbench.tracks.events.synth import CUTOFF_LEAD, write_event_sample
from tests.event_helpers import constants, event_config, make_store, market
from tests.helpers import cli
from tests.llm_server import ChatServer
from tests.reference import naive_bm25_scores

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "events_sample"


def test_an_event_stores_files_name_no_pandas_so_its_snapshot_is_the_rows_alone(
        tmp_path, monkeypatch):
    """pandas writes its own version into a Parquet file's metadata: a store's markets and
    prices written so changed their bytes, and the snapshot, with each pandas release (the
    sample's did with pandas 3.1.2). They carry no such metadata, and read back as the frames
    the store wrote (the same columns, dtypes and values)."""
    import pyarrow.parquet as pq

    from finbench.tracks.events import store as store_module

    written, writer = {}, store_module._writer

    def recording(frame):  # the last frame written of each file, told apart by its columns
        written["prices" if "time" in frame.columns else "markets"] = frame
        return writer(frame)

    monkeypatch.setattr(store_module, "_writer", recording)
    store = write_event_sample(tmp_path / "s")
    for name in ("markets.parquet", "prices.parquet"):
        assert b"pandas" not in (pq.read_metadata(store.path / name).metadata or {}), name
    pd.testing.assert_frame_equal(store.markets(), written["markets"])
    pd.testing.assert_frame_equal(store.prices(), written["prices"])


def test_the_sample_is_reproducible_from_its_raw_files_in_the_public_shapes(tmp_path):
    store = write_event_sample(tmp_path / "s")
    assert store.snapshot_sha256 == EventStore(SAMPLE / "store").snapshot_sha256
    assert store.synthetic and "SYNTHETIC" in store.manifest["description"]
    markets = store.markets().set_index("market_id")
    assert (markets["outcome"] == "void").sum() == 2  # the 0.5/0.5 resolutions
    assert markets.loc["m001", "event_group"] == markets.loc["m005", "event_group"] == "ev-0"
    assert markets.loc["m000", "event_group"] == "market:m000"  # no event: its own group
    assert store.verify() == []
    # written again into the same folder: refused before anything changes (before: the raw
    # files rewritten, then "post id(s) ... appear twice" from the ingest of the posts)
    before = {p: p.read_bytes() for p in sorted((tmp_path / "s").rglob("*")) if p.is_file()}
    with pytest.raises(StoreError, match=r"s/store: holds an event store already; the sample "
                                         r"is written into a new folder"):
        write_event_sample(tmp_path / "s")
    assert {p: p.read_bytes() for p in sorted((tmp_path / "s").rglob("*"))
            if p.is_file()} == before


def _gamma(**changes) -> dict:
    base = {"id": "1", "question": "Will it rain?", "category": "weather", "closed": True,
            "startDate": "2024-01-01T00:00:00Z", "endDate": "2024-02-01T00:00:00Z",
            "closedTime": "2024-02-01 06:00:00+00", "outcomes": '["Yes", "No"]',
            "outcomePrices": '["1", "0"]'}
    return {**base, **changes}


def test_bad_markets_are_named_and_nothing_is_written(tmp_path):
    file = tmp_path / "markets.json"
    file.write_text(json.dumps([
        _gamma(id="1"), _gamma(id="2", outcomePrices='["0.7", "0.3"]'),
        _gamma(id="3", outcomes='["A", "B", "C"]', outcomePrices='["1", "0", "0"]'),
        _gamma(id="4", category=None), _gamma(id="5 x"), _gamma(id="6", closed=False),
        _gamma(id="7", startDate="2024-01-01 00:00")]))
    with pytest.raises(DataError) as err:
        EventStore.open_or_create(tmp_path / "store").add_markets(file, None, unusable="refuse")
    text = str(err.value)
    assert "market 2 (id 2): outcomePrices [0.7, 0.3]: not a resolution" in text
    assert "market 3 (id 3)" in text and "not a binary Yes/No market" in text
    assert "market 4 (id 4): category: missing" in text
    assert "market_id '5 x'" in text
    assert "market 6 (id 6): closed is not true" in text
    assert "opened_at '2024-01-01 00:00': an instant with its zone" in text
    assert not (tmp_path / "store").exists()
    # each field's problem once: not again as "outcome None: one of ..." or "category is
    # empty" by the row rules that follow the reading
    assert "outcome None" not in text and "category is empty" not in text
    assert len(err.value.problems) == 6, err.value.problems


def test_bad_prices_and_dump_lines_are_named_and_nothing_is_written(tmp_path):
    store = make_store(tmp_path / "d", [market(0, "NO", resolved="2024-03-02T12:00Z")])
    before = (store / MANIFEST).read_text()
    prices = tmp_path / "prices.csv"
    prices.write_text("market_id,time,price\nq0000,2024-02-01T00:00Z,1.2\n"
                      "nope,2024-02-01T00:00Z,0.5\n")
    with pytest.raises(DataError) as err:
        EventStore(store).add_markets(tmp_path / "d" / "markets.csv", prices)
    assert "row 2: price '1.2': a number in [0, 1]" in str(err.value)
    assert "row 3: market_id 'nope': no such market" in str(err.value)
    folder = tmp_path / "histories"  # the CLOB's /prices-history answers: numbers, not texts
    folder.mkdir()
    (folder / "q0000.json").write_text('{"history": [{"t": 1706745600, "p": 1.5}]}')
    with pytest.raises(DataError, match=r"q0000\.json point 1: price 1\.5: a number in"):
        EventStore(store).add_markets(tmp_path / "d" / "markets.csv", folder)
    lines = [json.dumps({"id": "a", "created_utc": 1704067200, "subreddit": "x", "body": "ok"}),
             "{not json", json.dumps({"id": "b", "subreddit": "x", "body": "no time"}),
             json.dumps({"id": "c", "created_utc": "1704067200", "subreddit": "x"})]
    dump = tmp_path / "RC_bad.zst"
    dump.write_bytes(zstandard.ZstdCompressor().compress(("\n".join(lines) + "\n").encode()))
    with pytest.raises(DataError) as err:
        EventStore(store).add_posts(dump)
    text = str(err.value)
    assert "line 2: not JSON" in text and "line 3: created_utc None" in text
    assert "line 4: neither title (a submission) nor body (a comment)" in text
    assert (store / MANIFEST).read_text() == before  # nothing was written
    assert not list(store.parent.glob(".finbench-ingest-*"))


def test_far_years_empty_times_and_vast_numbers_are_named_not_raised(tmp_path):
    """A time of the year 9999 ended the ingest of markets or prices, and the reading of a
    cutoffs file, in pandas' AssertionError ("please report a bug"); an integer of 400 digits
    as a post's created_utc ended it in OverflowError. An empty cell showed as ``nan``."""
    store = make_store(tmp_path / "d", [market(0, "NO", resolved="2024-03-02T12:00Z")])
    folder = tmp_path / "d"
    far = pd.read_csv(folder / "markets.csv").assign(closes_at="9999-01-01T00:00:00Z")
    far.to_csv(folder / "far.csv", index=False)
    prices = tmp_path / "prices.csv"
    prices.write_text("market_id,time,price\nq0000,2300-02-01T00:00Z,0.5\nq0000,,0.5\n")
    with pytest.raises(DataError) as err:
        EventStore(store).add_markets(folder / "far.csv", prices)
    assert ("row 2: closes_at '9999-01-01T00:00:00Z': an instant with its zone, of the years "
            "1678-2261") in str(err.value)
    with pytest.raises(DataError) as err:
        EventStore(store).add_markets(folder / "markets.csv", prices)
    text = str(err.value)
    assert "row 2: time '2300-02-01T00:00Z': an instant with its zone" in text
    assert "row 3: time (empty): an instant with its zone" in text
    dump = tmp_path / "vast.jsonl"
    dump.write_text('{"id": "v", "created_utc": 1' + "0" * 400 + ', "subreddit": "x", '
                    '"body": "b"}\n')
    with pytest.raises(DataError, match=r"line 1: created_utc 10000.*: whole seconds"):
        EventStore(store).add_posts(dump)
    cutoffs = tmp_path / "cutoffs.csv"
    for t0, said in (("9999-01-01T00:00:00Z", "'9999-01-01T00:00:00Z'"), ("", "(empty)")):
        cutoffs.write_text(f"market_id,t0\nq0000,{t0}\n")
        cfg = event_config(tmp_path, store, constants(0.3), extra=f'cutoffs_file = "{cutoffs}"')
        cfg.write_text(cfg.read_text().replace('cutoff = "lead"\nlead_hours = 24\n',
                                               'cutoff = "given"\n'))
        with pytest.raises(DataError) as err:
            run(cfg, tmp_path / "run", echo=lambda *_: None)
        assert f"row 2: t0 {said}: an instant with its zone, of the years 1678-2261" in str(
            err.value.problems)


@pytest.mark.parametrize(("cutoff", "key"), [
    ('cutoff = "lead"\nlead_hours = 1e12', "lead_hours"),
    ('cutoff = "lead"\nlead_hours = 24\nprice_max_age_hours = 1e300', "price_max_age_hours"),
    ('cutoff = "open"\nopen_delay_hours = 1e12', "open_delay_hours"),
])
def test_spans_past_ten_years_are_refused_as_config_keys(tmp_path, cutoff, key):
    """Each ended the run in pandas' OutOfBoundsTimedelta once the markets were read."""
    store = make_store(tmp_path / "d", [market(0, "NO", resolved="2024-03-02T12:00Z")])
    cfg = event_config(tmp_path, store, constants(0.3))
    cfg.write_text(cfg.read_text().replace('cutoff = "lead"\nlead_hours = 24', cutoff))
    with pytest.raises(ConfigError, match=rf"key 'tasks.{key}': Input should be less than or "
                                          r"equal to 87672"):
        load_config(cfg)


def test_a_negative_bootstrap_seed_is_refused(tmp_path):
    """numpy's generators take none: the run finished, and every report ended in
    'ValueError: expected non-negative integer'."""
    store = make_store(tmp_path / "d", [market(0, "NO", resolved="2024-03-02T12:00Z")])
    cfg = event_config(tmp_path, store, constants(0.3))
    cfg.write_text(cfg.read_text().replace("bootstrap_replicates = 200", "seed = -1"))
    with pytest.raises(ConfigError, match=r"key 'scores.seed': Input should be greater than "
                                          r"or equal to 0 \(given -1\)"):
        load_config(cfg)


def test_a_market_not_open_at_its_cutoff_is_asked_of_no_model(tmp_path):
    """A lead longer than a market's life put its t0 before it opened: building its context
    (the question did not exist yet) ended the whole run in LookaheadError. Such a task is
    now asked of no model (no forecast row), the others go on, and the audit holds it so."""
    short = market(1, "YES", resolved="2024-04-02T12:00Z", days_open=2)  # opened 2 days before
    store = make_store(tmp_path / "d", [market(0, "NO", resolved="2024-04-01T12:00Z"), short])
    cfg = event_config(tmp_path, store, constants(0.3), lead_hours=24 * 5)
    said = []
    out = run(cfg, tmp_path / "run", echo=said.append)
    labels = pd.read_parquet(out / "labels.parquet").set_index("market_id")
    assert labels.loc["q0001", "status"] == "t0_before_open"
    assert labels.loc["q0000", "status"] == "ok"
    rows = pd.read_parquet(out / "forecasts.parquet")
    assert rows["task_id"].str.startswith("q0000|").all() and len(rows) == 1
    assert any("1 task(s) are asked of no model, excluded before forecasting "
               "(t0_before_open 1): 0 language-model call(s) saved" in s for s in said)
    assert audit_run(out) == []
    extra = rows.assign(task_id=labels.loc["q0001", "task_id"])  # a row no model could give
    pd.concat([rows, extra]).to_parquet(out / "forecasts.parquet", index=False)
    assert any("has a row of task q0001|" in p
               and "excluded before forecasting (t0_before_open: no model is asked it)" in p
               for p in audit_run(out))


def test_an_event_store_changed_while_a_run_reads_it_stops_the_run(tmp_path, monkeypatch):
    """The event track did not check its store for changes during a run (the intraday track
    does): prices replaced by another process after the run read them were recorded under
    the snapshot it opened. Now such a run stops, naming the file; posts added for days it
    did not read leave it going on."""
    import finbench.tracks.events.track as track_module

    markets = [market(0, "NO", resolved="2024-04-01T12:00Z"),
               market(1, "YES", resolved="2024-04-03T12:00Z")]
    store = make_store(tmp_path / "d", markets)
    cfg = event_config(tmp_path, store, constants(0.3))
    label = track_module.EventsTrack.label
    change = {}

    def label_then_changed(self, **kwargs):
        labels = label(self, **kwargs)
        change["then"]()
        return labels

    monkeypatch.setattr(track_module.EventsTrack, "label", label_then_changed)
    later = tmp_path / "later.jsonl"
    later.write_text(json.dumps({"id": "y1", "created_utc": 1735689600, "subreddit": "misc",
                                 "title": "a later day", "selftext": ""}) + "\n")
    change["then"] = lambda: EventStore(store).add_posts(later)  # 2025-01-01: not read
    run(cfg, tmp_path / "a", echo=lambda *_: None)
    assert (tmp_path / "a" / "scores.csv").is_file()
    prices = pd.read_csv(tmp_path / "d" / "prices.csv").assign(price=0.9)
    prices.to_csv(tmp_path / "d" / "prices2.csv", index=False)
    change["then"] = lambda: EventStore(store).add_markets(tmp_path / "d" / "markets.csv",
                                                           tmp_path / "d" / "prices2.csv")
    with pytest.raises(StoreError, match=rf"{store}: changed while it was read \(1 file\(s\) "
                                         r"read were replaced or removed \(prices.parquet\)\)"):
        run(cfg, tmp_path / "b", echo=lambda *_: None)
    assert not (tmp_path / "b" / "scores.csv").exists()


def test_a_post_id_twice_is_refused(tmp_path):
    post = {"id": "a", "created_utc": 1704067200, "subreddit": "x", "body": "same"}
    with pytest.raises(DataError, match="post id.* appear twice"):
        make_store(tmp_path, [market(0, "NO", resolved="2024-03-02T12:00Z")], [post, post])


def _posts(times: list[int], texts: list[str], ids: list[int] | None = None) -> pa.Table:
    order = np.argsort(times, kind="stable")
    ids = list(range(len(times))) if ids is None else ids
    return pa.table({
        "post_id": [f"t1_{ids[i]}" for i in order],
        "created_utc": pa.array(np.asarray(times, np.int64)[order] * 10**9).cast(
            pa.timestamp("ns", "UTC")),
        "subreddit": ["x"] * len(times), "kind": ["comment"] * len(times),
        "text": [texts[i] for i in order]})


def _task(t0: int) -> pd.DataFrame:
    return pd.DataFrame({"task_id": ["m|t"], "question": ["Will the river dam break?"],
                         "t0": [pd.Timestamp(t0, unit="s", tz="UTC")]})


def test_a_window_of_posts_with_no_term_retrieves_nothing():
    """Posts of stopwords or one-letter words only ("this", "ok?", "a") in a market's window
    ended the run in bm25s' "max() arg is an empty sequence"."""
    t0 = 1_710_000_000
    posts = _posts([t0 - 3600, t0 - 60], ["this", "a ?"])
    found = retrieve(posts, _task(t0), lookback=pd.Timedelta(days=30), k=5)[0]
    assert found.post_ids == [] and found.scores == []


def test_posts_at_or_after_t0_are_never_retrieved_even_when_they_match_best():
    t0 = 1_710_000_000
    best = "Will the river dam break? The river dam broke: resolved YES"
    posts = _posts([t0 - 3600, t0, t0 + 1, t0 - 7200],
                   ["talk of the river dam", best, best, "the dam may break"])
    found = retrieve(posts, _task(t0), lookback=pd.Timedelta(days=30), k=5)[0]
    assert found.post_ids == ["t1_0", "t1_3"]  # the two earlier posts, best first
    assert all(c < pd.Timestamp(t0, unit="s", tz="UTC") for c in found.created)


@settings(max_examples=60)
@given(st.lists(st.integers(-5000, 5000), min_size=1, max_size=40),
       st.integers(100, 4000), st.sampled_from([1, 3600]))
def test_retrieval_is_blind_to_every_post_not_before_t0(offsets, lookback, unit):
    """Whatever posts come at or after t0 (or before the lookback), the retrieved posts and
    their scores are those of the window alone: filtered before ranking, statistics too (in
    seconds, and in hours: posts and windows across months, each indexed apart)."""
    t0 = 1_710_000_000
    offsets, lookback = [o * unit for o in offsets], lookback * unit
    texts = [f"river dam {'break' if i % 3 else 'flood'} note {i}" for i in range(len(offsets))]
    posts = _posts([t0 + o for o in offsets], texts)
    window = [i for i, o in enumerate(offsets) if -lookback <= o < 0]
    # the same posts by the same ids (a tie of score and time ranks by id)
    alone = _posts([t0 + offsets[i] for i in window], [texts[i] for i in window], window)
    a = retrieve(posts, _task(t0), lookback=pd.Timedelta(seconds=lookback), k=5)[0]
    b = retrieve(alone, _task(t0), lookback=pd.Timedelta(seconds=lookback), k=5)[0]
    assert a.created == b.created and a.texts == b.texts and a.scores == b.scores
    assert all(t0 - lookback <= c.timestamp() < t0 for c in a.created)
    # and what a bm25s index of the window's posts alone ranks
    ids = np.asarray(alone.column("post_id").to_pylist(), object)
    created = alone.column("created_utc").cast(pa.int64()).to_numpy()
    want = naive_bm25_scores(alone.column("text").to_pylist(), _task(t0)["question"].iat[0])
    best = top_k(want, created, ids, 5)
    assert a.post_ids == ids[best].tolist() and a.scores == want[best].tolist()


@pytest.fixture(scope="module")
def sample_posts():
    """The event sample's store and every post of it."""
    store = EventStore(SAMPLE / "store")
    return store, store.read_posts(pd.Timestamp("2000-01-01", tz="UTC"),
                                   pd.Timestamp("2100-01-01", tz="UTC"))


@settings(max_examples=40)
@given(st.integers(-20 * 24, 200 * 24), st.integers(0, 62 * 24))
def test_read_posts_is_every_post_in_its_span_and_reads_no_later_day(sample_posts, first,
                                                                      hours):
    """``read_posts(start, end)`` holds the sample's posts made in ``[start, end)``, in
    order, whatever the hours (midnights among them); an end at midnight reads no
    partition of its own date (all its posts are later)."""
    store, every = sample_posts
    start = pd.Timestamp("2023-12-21", tz="UTC") + pd.Timedelta(hours=first)
    end = start + pd.Timedelta(hours=hours)
    at = every.column("created_utc").cast(pa.int64()).to_numpy()
    want = every.filter((at >= start.value) & (at < end.value))
    store.files_read.clear()
    assert store.read_posts(start, end).equals(want)
    read = {dt.date.fromisoformat(rel.split("=")[1].split("/")[0]) for rel in store.files_read}
    assert all(start.date() <= d and pd.Timestamp(d, tz="UTC") < end for d in read)


def test_a_look_back_of_years_reads_its_months_once_for_its_tasks():
    """A window spanning many months (a look back of years) keeps them all for the next
    task of the same cutoffs: read once, not once a task; a later window reads only the
    month it adds."""
    from unittest import mock

    import finbench.tracks.events.post_months as post_months

    t0 = 1_710_000_000
    table = _posts([t0 - d * 86_400 for d in range(0, 900, 5)],
                   [f"river dam note {d}" for d in range(0, 900, 5)])
    asked = []
    months = post_months.PostMonths.of(table)
    read = months.read
    months.read = lambda start, end: asked.append(start) or read(start, end)
    at = pd.Timestamp(t0, unit="s", tz="UTC")
    with mock.patch.object(post_months, "POSTS_HELD", -1):  # (no month held but the window's)
        first = months.search(at - pd.Timedelta(days=800), at, "river dam", 5)
        spanned = len(asked)
        again = months.search(at - pd.Timedelta(days=800), at, "river dam", 5)
        assert len(asked) == spanned == 28  # (December 2021 to March 2024)
        assert (again.ids, again.scores) == (first.ids, first.scores) and first.ids
        months.search(at + pd.Timedelta(days=31) - pd.Timedelta(days=800),
                      at + pd.Timedelta(days=31), "river dam", 5)
        assert len(asked) == spanned + 1  # the month it adds
        assert len(months.held) == 29  # (the window's 28 and one more)


WORDS = ("river dam break flood the a of will vote election senate bitcoin price rise fall "
         "storm team win match final ok is").split()


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.25, 1.25, 2.0, 3.5]),
                          st.integers(0, 4)), max_size=40),
       st.integers(0, 45), st.randoms(use_true_random=False))
def test_the_best_posts_are_those_an_order_of_every_scoring_post_gives(rows, k, random):
    """``top_k`` orders only the posts that can be among the best (at least the k-th best
    score) and returns what ordering every post that scored returns: by score, the later
    post first, then id, ties in all three sides included."""
    ids = [f"p{i:02d}" for i in range(len(rows))]
    random.shuffle(ids)
    scores = np.array([r[0] for r in rows], np.float32)
    created = np.array([r[1] for r in rows], np.int64)
    ids = np.array(ids, object)
    keep = np.flatnonzero(scores > 0)
    want = keep[np.lexsort((ids[keep], -created[keep], -scores[keep]))][:k]
    assert top_k(scores, created, ids, k).tolist() == want.tolist()


@settings(max_examples=60)
@given(st.lists(st.lists(st.sampled_from(WORDS), max_size=25), min_size=1, max_size=60),
       st.data())
def test_one_index_scores_every_window_as_an_index_of_that_window_alone(docs, data):
    """One index over a batch of posts, queried with a window's statistics, gives the scores
    of a bm25s index built of that window alone, bit for bit (tests/reference.py), so the
    same posts in the same order: for random texts, windows and questions."""
    texts = [" ".join(d) for d in docs]
    index = PostIndex(texts)
    lo = data.draw(st.integers(0, len(texts)))
    hi = data.draw(st.integers(lo, len(texts)))
    query = " ".join(data.draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8)))
    got, want = index.scores(lo, hi, query), naive_bm25_scores(texts[lo:hi], query)
    assert got.tolist() == want.tolist()
    created, ids = np.arange(hi - lo), np.array([f"p{i}" for i in range(hi - lo)], object)
    assert top_k(got, created, ids, 5).tolist() == top_k(want, created, ids, 5).tolist()


@settings(max_examples=60)
@given(st.lists(st.lists(st.sampled_from(WORDS[:5]), min_size=1, max_size=4), min_size=20,
                max_size=80), st.data())
def test_many_short_posts_score_as_an_index_of_their_window_alone(docs, data):
    """The same, where a term's posts outnumber the longest post's terms (each post's length
    part then read from a table of every length): many posts of few words."""
    texts = [" ".join(d) for d in docs]
    index = PostIndex(texts)
    lo = data.draw(st.integers(0, len(texts) // 4))
    hi = data.draw(st.integers(len(texts) // 2, len(texts)))
    query = " ".join(data.draw(st.lists(st.sampled_from(WORDS[:6]), min_size=1, max_size=4)))
    assert index.scores(lo, hi, query).tolist() == naive_bm25_scores(texts[lo:hi],
                                                                     query).tolist()


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(1, 300), st.integers(1, 40)), min_size=1, max_size=80),
       st.integers(1, 10_000), st.floats(0.5, 400.0), st.data())
def test_a_terms_scores_are_bm25s_float64_steps_before_rounding(posts, df, mean_length, data):
    """Each post's term score before it is rounded to float32, bit for bit the float64 a
    post's score is in ``bm25s`` (tests/reference.py, a post at a time), so that a change of
    one ulp in float64, which the float32 scores compared above would mostly round away, is
    found; and a term's postings scored by their pairs (length, count), one at a time or
    from a score of every pair the index holds (taken when the postings outnumber the
    pairs), are those float64s rounded to float32."""
    from finbench.core.bm25 import _pair_scores, _pairs, _term_scores
    from tests.reference import naive_term_scores

    lengths = np.array([n for n, _ in posts], np.int64)
    tf = np.array([c for _, c in posts], np.int64)
    n = df + data.draw(st.integers(0, 10_000))
    idf = np.float32(np.log(1 + (n - df + 0.5) / (df + 0.5)))
    want = naive_term_scores(lengths, tf, idf, mean_length)
    got = _pair_scores(lengths, tf.astype(np.float32), idf, mean_length)
    assert got.dtype == np.float64
    assert got.view(np.int64).tolist() == want.view(np.int64).tolist()
    index = PostIndex.__new__(PostIndex)  # the fields a term's scores read
    index.pair, index.pair_length, index.pair_tf = _pairs(lengths, tf)
    assert index.pair_length[index.pair].tolist() == lengths.tolist()
    assert index.pair_tf[index.pair].tolist() == tf.tolist()
    few = index.pair[:len(index.pair_tf)]  # no more postings than pairs: one at a time
    many = np.tile(index.pair, len(index.pair_tf) // len(posts) + 1)  # more: the table
    for codes in (few, many):
        got = _term_scores(index, codes, idf, mean_length)
        assert got.dtype == np.float32
        assert got.tolist() == want.astype(np.float32)[np.resize(np.arange(len(posts)),
                                                                  len(codes))].tolist()


@settings(max_examples=100)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 40)), max_size=60),
       st.lists(st.tuples(st.integers(0, 10**7), st.integers(1, 5_000)), max_size=60))
def test_a_postings_pair_is_its_posts_length_and_its_count(short, long):
    """The index's table of pairs (a post's length, a term's count in it) holds each pair
    of its postings once, by length then count, and each posting's code names its own pair:
    for posts of a few words (the pairs marked in an array) and of millions (sorted)."""
    from finbench.core.bm25 import _pairs

    for posts in (short, long, short + long):
        lengths = np.array([n for n, _ in posts], np.int64)
        tf = np.array([c for _, c in posts], np.int64)
        code, length, count = _pairs(lengths, tf)
        assert sorted(set(posts)) == list(zip(length.tolist(), count.tolist(), strict=True))
        assert length[code].tolist() == lengths.tolist()
        assert count[code].tolist() == tf.tolist()
        assert count.dtype == np.float32 and code.dtype.kind == "u"


def _llm_config(tmp_path: Path, server: ChatServer, source: Path = ROOT / "configs" /
                "pilot_events.toml") -> Path:
    text = source.read_text().replace(
        'store = "../data/events_sample/store"', f'store = "{SAMPLE / "store"}"').replace(
        'model = "gpt-4o-mini"', f'model = "event-a"\nbase_url = "{server.base_url}"\n'
        'api_key_env = "FINBENCH_TEST_KEY"').replace('"../data/', f'"{ROOT}/data/')
    path = tmp_path / "pilot_events.toml"
    path.write_text(text)
    return path


@pytest.fixture
def loopback(monkeypatch, tmp_path):
    monkeypatch.setenv("FINBENCH_TEST_KEY", "sk-test")
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))
    server = ChatServer()
    yield server
    server.close()


def test_the_event_pilot_with_language_models_is_gated_and_audits_clean(tmp_path, loopback):
    out = run(_llm_config(tmp_path, loopback), tmp_path / "run", echo=lambda *_: None)
    labels = pd.read_parquet(out / "labels.parquet").set_index("task_id")
    prompts = [r["body"]["messages"][-1]["content"] for r in loopback.requests]
    ok = (labels["status"] == "ok").sum()  # every market that can be scored, both models, once
    assert len(prompts) == 2 * ok and ok == len(labels) - 4
    for text in prompts:  # no prompt holds the canary of its own question
        question = text.split("\n")[0].removeprefix("Question: ")
        assert not any("CANARY" in line and question in line for line in text.split("\n"))
    with_posts = sum("<posts>" in p for p in prompts)
    assert with_posts == ok  # the model without retrieval is shown no post
    retrieved = pd.read_parquet(out / "retrieval.parquet")
    t0 = retrieved["task_id"].map(labels["t0"])
    assert (retrieved["created_utc"] < t0).all() and len(retrieved) > 100
    summary = json.loads((out / "manifest.json").read_text())["tasks"]
    assert summary["excluded"] == {"void": 2, "t0_not_before_resolution": 1, "no_price": 1}
    skill = pd.read_parquet(out / "skill.parquet")
    with_posts = skill[(skill["model"] == "GPT-4o Mini with posts")
                       & (skill["reference"] == "frozen_jan_feb")].set_index("slice")["bss"]
    # retrieval helps where the snapshot held relevant posts before t0, not elsewhere
    assert with_posts["relevant posts before t0"] > 0.2
    assert with_posts["no relevant posts before t0"] < 0.05
    gap = pd.read_csv(out / "market_gap.csv")
    assert set(gap["model"]) >= {"GPT-4o Mini with posts"} and (gap["n"] == 42).all()
    assert audit_run(out) == []


def test_the_audit_names_a_retrieved_post_made_at_t0(tmp_path, loopback):
    out = run(_llm_config(tmp_path, loopback), tmp_path / "run", echo=lambda *_: None)
    path = out / "retrieval.parquet"
    table = pd.read_parquet(path)
    labels = pd.read_parquet(out / "labels.parquet").set_index("task_id")
    table.loc[0, "created_utc"] = labels.loc[table.loc[0, "task_id"], "t0"]
    table.to_parquet(path, index=False)
    problems = audit_run(out)
    assert any("retrieval.parquet: content differs from the hash" in p for p in problems)
    assert any(f"was shown post {table.loc[0, 'post_id']}" in p and "not before its t0" in p
               for p in problems)


def test_a_forecast_depends_on_its_market_and_the_snapshot_alone(tmp_path):
    """The same market asked in a one-month run and in a four-month run with other
    markets: every reference's row is the same (category rate included)."""
    models = ('[[models]]\nname = "category_rate"\nkind = "category_rate"\nmin_count = 3\n'
              '[[models]]\nname = "market"\nkind = "market_price"\n')
    store = SAMPLE / "store"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    short = run(event_config(tmp_path / "a", store, models, start="2024-04-01",
                             end="2024-04-30", lead_hours=72), tmp_path / "short",
                echo=lambda *_: None)
    long = run(event_config(tmp_path / "b", store, models, lead_hours=72), tmp_path / "long",
               echo=lambda *_: None)
    cols = ["task_id", "model", "p_up", "input_sha256", "max_input_time", "history_count"]
    a = pd.read_parquet(short / "forecasts.parquet")[cols]
    b = pd.read_parquet(long / "forecasts.parquet")[cols]
    both = a.merge(b, on=["task_id", "model"], suffixes=("", "_long"))
    assert len(both) == len(a) > 10
    for c in cols[2:]:
        x, y = both[c], both[f"{c}_long"]
        assert ((x == y) | (x.isna() & y.isna())).all(), c


def test_the_sample_plants_a_canary_at_and_after_every_cutoff():
    """Each market's canaries are made exactly at its cutoff (the strict boundary) and an
    hour after; none before it."""
    from finbench.tracks.events.posts import read_dump

    markets = json.loads((SAMPLE / "raw" / "markets.json").read_text())
    cutoff = {m["id"]: pd.Timestamp(m["endDate"]) - CUTOFF_LEAD for m in markets}
    posts = pa.concat_tables(read_dump(SAMPLE / "raw" / "RS_2024_sample.zst", {})).to_pandas()
    canaries = posts[posts["subreddit"] == "canary"]
    offset = canaries["created_utc"] - canaries["text"].str.split().str[1].map(cutoff)
    assert len(canaries) == 2 * len(markets)
    assert sorted(offset.value_counts().to_dict().items()) == [
        (pd.Timedelta(0), len(markets)), (pd.Timedelta(hours=1), len(markets))]


def test_pilot_events_config_runs_offline_with_references_only(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    said = []
    shutil.copy(ROOT / "configs" / "pilot_events.toml", tmp_path / "p.toml")
    text = (tmp_path / "p.toml").read_text().replace("../data/events_sample/store",
                                                     str(SAMPLE / "store")).replace(
        '"../data/', f'"{ROOT}/data/')
    (tmp_path / "p.toml").write_text(text)
    out = run(tmp_path / "p.toml", tmp_path / "run", echo=said.append)
    assert any("skip GPT-4o Mini with posts: API key variable OPENAI_API_KEY" in s
               for s in said)
    scores = pd.read_parquet(out / "scores.parquet")
    assert set(scores["model"]) == {"market", "one_percent", "frozen_jan_feb",
                                    "category_rate", "memoriser-replay",
                                    "in-sample frequency"}
    # the report's tables hold the stored numbers, rounded for reading, each skill with its
    # n and both raw scores (the gap table printed 12 digits)
    from finbench.reports.build import report

    tables, _ = report(out)
    assert {p.name for p in tables} >= {"event_skill.md", "event_market_gap.md",
                                        "event_scores.csv", "event_exclusions.tex"}
    skill = pd.read_parquet(out / "skill.parquet").query("slice_kind == 'overall'")
    text = (out / "tables" / "event_skill.md").read_text()
    for rec in skill.itertuples():
        assert (f"| {rec.model} | {rec.reference} | all | {rec.n} | {rec.positives} | "
                f"{rec.brier_model:.4f} | {rec.brier_reference:.4f} | {rec.bss:.4f} [") in text
    gap = pd.read_csv(out / "market_gap.csv")
    text = (out / "tables" / "event_market_gap.md").read_text()
    for rec in gap.itertuples():
        assert (f"| {rec.model} | market | {rec.n} | {rec.mean_abs_gap:.4f} | "
                f"{rec.median_abs_gap:.4f} | {rec.max_abs_gap:.4f} |") in text
    pd.testing.assert_frame_equal(pd.read_csv(out / "tables" / "event_market_gap.csv"), gap)
    # reliability: each model's bins hold its scored rows, its YES and its mean forecast
    overall = scores.query("slice_kind == 'overall'").set_index("model")
    bins = pd.read_csv(out / "tables" / "event_reliability.csv")
    rows = pd.read_parquet(out / "rows.parquet").query("scored")
    for model, part in bins.groupby("model"):
        assert part["count"].sum() == part["n"].iloc[0] == overall.loc[model, "n"]
        assert part["yes"].sum() == overall.loc[model, "positives"]
        mine = rows[rows["model"] == model]
        assert (part["count"] * part["mean_prob"]).sum() == pytest.approx(mine["p_yes"].sum())
    constant = bins[bins["model"] == "one_percent"]  # ties share a bin: one
    assert constant[["count", "yes", "mean_prob"]].values.tolist() == [[42, 11, 0.01]]
    _, figures = report(out)
    assert sorted(p.name for p in figures) == [
        "event_murphy.pdf", "event_murphy.png", "event_reliability.pdf",
        "event_reliability.png", "event_reliability_corp.pdf", "event_reliability_corp.png",
        "event_skill.pdf", "event_skill.png"]
    drawn = {p.name: p.read_bytes() for p in figures}
    _, figures = report(out)  # the same run's report again: the same bytes
    assert {p.name: p.read_bytes() for p in figures} == drawn


def test_event_reliability_bins_each_model_on_its_own_scored_rows():
    """20 distinct forecasts make 10 equal-mass bins of 2; an unscored row (an invalid
    answer) is in no bin; a model whose forecasts all tie has one bin."""
    from finbench.tracks.events.figures import event_reliability

    p = [round(0.01 * k, 2) for k in range(1, 21)]
    y = [0, 0, 1, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 1]
    rows = pd.DataFrame({
        "model": ["llm"] * 21 + ["flat"] * 3, "p_yes": p + [0.99, 0.3, 0.3, 0.3],
        "y": y + [1, 0, 1, 0], "scored": [True] * 20 + [False] + [True] * 3})
    bins = event_reliability(rows)
    llm = bins[bins["model"] == "llm"]
    assert llm["bin"].tolist() == list(range(10)) and (llm["n"] == 20).all()
    assert llm["count"].tolist() == [2] * 10
    assert llm["yes"].tolist() == [0, 1, 0, 2, 1, 0, 0, 2, 2, 1]
    assert llm["mean_prob"].tolist() == pytest.approx([0.015 + 0.02 * k for k in range(10)])
    assert llm["obs_freq"].tolist() == [0, 0.5, 0, 1, 0.5, 0, 0, 1, 1, 0.5]
    flat = bins[bins["model"] == "flat"]
    assert flat[["n", "count", "yes", "mean_prob"]].values.tolist() == [[3, 3, 1, 0.3]]
    assert flat["obs_freq"].iloc[0] == pytest.approx(1 / 3)


def test_a_torn_event_table_is_named_and_score_mends_the_score_outputs(tmp_path, monkeypatch):
    """A skill.parquet or retrieval.parquet that is no Parquet ended the audit in Arrow's
    traceback; score now writes the score outputs again even when one is torn."""
    from finbench.core.errors import RunError
    from finbench.runner.scores import score_run

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    text = (ROOT / "configs" / "pilot_events.toml").read_text().replace(
        "../data/events_sample/store", str(SAMPLE / "store")).replace(
        '"../data/', f'"{ROOT}/data/')
    (tmp_path / "p.toml").write_text(text)
    out = run(tmp_path / "p.toml", tmp_path / "run", echo=lambda *_: None)
    kept = (out / "skill.parquet").read_bytes()
    (out / "skill.parquet").write_bytes(b"torn")
    with pytest.raises(RunError, match="skill.parquet: cannot be read"):
        audit_run(out)
    score_run(out)
    assert (out / "skill.parquet").read_bytes() == kept and audit_run(out) == []
    (out / "retrieval.parquet").write_bytes(b"torn")
    with pytest.raises(RunError, match="retrieval.parquet: cannot be read"):
        audit_run(out)


def test_the_readme_event_config_runs_as_written(tmp_path, monkeypatch):
    import re

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # no request leaves this machine
    part = (ROOT / "README.md").read_text().split("## Events", 1)[1].split("\n## ", 1)[0]
    text = re.search(r"```toml\n(.*?)```", part, re.S).group(1)
    (tmp_path / "c.toml").write_text(text.replace("data/events_sample/store",
                                                  str(SAMPLE / "store")))
    said = []
    out = run(tmp_path / "c.toml", tmp_path / "run", echo=said.append)
    scores = pd.read_parquet(out / "scores.parquet")
    assert {"market", "one_percent"} <= set(scores["model"])
    assert any("skip llm: API key variable OPENAI_API_KEY is not set" in s for s in said)


def test_tasks_verb_and_show_on_an_event_run(tmp_path, capsys):
    from finbench.cli import main
    from finbench.core.errors import RunError
    from finbench.reports.show import show

    cfg = tmp_path / "p.toml"
    cfg.write_text((ROOT / "configs" / "pilot_events.toml").read_text().replace(
        "../data/events_sample/store", str(SAMPLE / "store")).replace(
        '"../data/', f'"{ROOT}/data/'))
    assert main(["tasks", str(cfg), "--out", str(tmp_path / "t")]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["tasks"] == 46 and facts["labels"] == {"YES": 11, "NO": 31}
    assert len(pd.read_parquet(tmp_path / "t" / "labels.parquet")) == 46
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    with pytest.raises(RunError, match=r"no task 'm999\|2024-03-01T18:00:00Z' \(task ids look "
                       r"like 'm"):
        show(out, "m999|2024-03-01T18:00:00Z")
    # a task's view: its label, the posts retrieved before t0 (each earlier), every answer
    labels = pd.read_parquet(out / "labels.parquet")
    task = labels.loc[labels["status"] == "ok", "task_id"].iat[0]
    found = show(out, task)
    t0 = pd.read_parquet(out / "tasks.parquet").set_index("task_id").loc[task, "t0"]
    retrieval = pd.read_parquet(out / "retrieval.parquet")
    assert [p["post_id"] for p in found["retrieved"]] == retrieval.loc[
        retrieval["task_id"] == task].sort_values("rank")["post_id"].tolist()
    assert all(pd.Timestamp(p["created_utc"]) < t0 for p in found["retrieved"])
    rows = pd.read_parquet(out / "rows.parquet")
    mine = rows[rows["task_id"] == task].set_index("model")
    assert {m["model"]: m["p_yes"] for m in found["models"]} == mine["p_yes"].to_dict()
    assert {m["model"]: m["scores"]["brier"] for m in found["models"]} == mine["brier"].to_dict()
    capsys.readouterr()
    assert main(["show", str(out), task]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"task {task}: market ") and "retrieved before t0" in text


def test_shards_and_the_dask_executor_refuse_an_event_run(tmp_path):

    cfg = tmp_path / "p.toml"
    cfg.write_text((ROOT / "configs" / "pilot_events.toml").read_text().replace(
        "../data/events_sample/store", str(SAMPLE / "store")).replace(
        '"../data/', f'"{ROOT}/data/'))
    for extra in (["--shard", "2024-03-01:2024-03-31"], ["--executor", "dask"]):
        done = cli("run", cfg, "--out", tmp_path / "r", *extra)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert "a run of track 'events' runs whole" in done.stderr
    cfg.write_text(cfg.read_text() + '\n[executor]\nkind = "dask"\n')
    done = cli("run", cfg, "--out", tmp_path / "r")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert ("key 'executor': Value error, shards split an intraday run's sessions; a run of "
            "track 'events' runs whole, in one process (remove [executor])") in done.stderr


def test_a_damaged_event_store_is_named_by_validate_and_by_the_run(tmp_path, capsys):
    """`finbench data validate` reads an event store too (before: "format is not
    'finbench-store'"); a post partition a run cannot read is a StoreError naming it and the
    command that lists every damaged file (before: Arrow's traceback)."""
    from finbench.cli import main
    from finbench.core.errors import StoreError

    store = tmp_path / "store"
    shutil.copytree(SAMPLE / "store", store)
    assert main(["data", "validate", str(store)]) == 0
    assert f"{store}: valid event store; 166 files, 164 post dates; snapshot " \
           f"{EventStore(store).snapshot_sha256}" in capsys.readouterr().out
    part = store / "posts" / "date=2024-03-10" / "part.parquet"
    part.write_bytes(part.read_bytes()[:-10])
    assert main(["data", "validate", str(store)]) == 1
    err = capsys.readouterr().err
    assert f"{part}: SHA-256 differs from the manifest (changed after ingest)" in err
    assert f"{store}: 1 problem(s)" in err
    cfg = tmp_path / "p.toml"
    cfg.write_text((ROOT / "configs" / "pilot_events.toml").read_text().replace(
        "../data/events_sample/store", str(store)).replace(
        '"../data/', f'"{ROOT}/data/'))
    with pytest.raises(StoreError, match=rf"{part}: cannot be read \(.*\); `finbench data "
                                         rf"validate {store}` names every file"):
        run(cfg, tmp_path / "run", echo=lambda *_: None)


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("event_run")
    cfg = tmp / "p.toml"
    cfg.write_text((ROOT / "configs" / "pilot_events.toml").read_text().replace(
        "../data/events_sample/store", str(SAMPLE / "store")).replace(
        '"../data/', f'"{ROOT}/data/'))
    return run(cfg, tmp / "run", echo=lambda *_: None)


@pytest.mark.parametrize("table, column, named", [
    ("labels", "task_id", "labels.parquet: has no column task_id (the audit reads it"),
    ("tasks", "t0", "tasks.parquet: has no column t0 (the audit reads it"),
    ("retrieval", "rank", "retrieval.parquet: has no column rank (the audit reads it"),
    ("labels", "outcome", "labels.parquet: column outcome is missing"),
    ("scores", "model", "scores: column model is missing"),
    ("skill", "reference", "skill: column reference is missing"),
])
def test_the_event_audit_names_a_column_taken_from_a_table(reference_run, tmp_path, table,
                                                          column, named):
    """Before, a key column taken away (task_id, t0, rank, model) was a pandas KeyError."""
    import pyarrow.parquet as pq

    copy = tmp_path / "run"
    shutil.copytree(reference_run, copy)
    path = copy / f"{table}.parquet"
    pq.write_table(pq.read_table(path).drop_columns([column]), path)
    problems = audit_run(copy)
    assert any(p.startswith(f"{table}.parquet: content differs from the hash") for p in problems)
    assert any(named in p for p in problems), problems


DUMP_VALUES = {
    "id": st.sampled_from(["abc", "", " ", "a b", "a\u2003b", "x\x1fy", 5, None, ["a"], "é1",
                           "a\udfff"]),
    "created_utc": st.sampled_from([1704207600, 1704207600.0, 1704207600.5, "1704207600",
                                    " 1704207600 ", "1.7e9", True, None, 10**400, 2**63,
                                    1104537599, 4102444800, 4102444799, -5, "nan", 1e400]),
    "subreddit": st.sampled_from(["x", "", None, 3, "wallstreetbets"]),
    "title": st.sampled_from(["T", "", None, 4]), "selftext": st.sampled_from(["", "  ", "b", None]),
    "body": st.sampled_from(["words", "", None, 7, "ü", "\ud800x", "\U0001f600"]),
}


ABSENT = object()
WELL_FORMED = [{"id": "abc", "created_utc": 1704207600, "subreddit": "x", "body": "words"},
               {"id": "q1", "created_utc": 1704207601, "subreddit": "x", "title": "T",
                "selftext": "b"}]


def _dump_line(base: dict, changes: dict) -> str:
    obj = {**base, **changes}
    return json.dumps({k: v for k, v in obj.items() if v is not ABSENT})


# a well-formed line with up to three fields changed (to another value, or taken away), or a
# line that is no JSON object
DUMP_LINES = st.one_of(
    st.builds(_dump_line, st.sampled_from(WELL_FORMED), st.dictionaries(
        st.sampled_from(sorted(DUMP_VALUES)), st.none(), max_size=3).flatmap(
        lambda keys: st.fixed_dictionaries({k: st.one_of(st.just(ABSENT), DUMP_VALUES[k])
                                            for k in keys}))),
    st.sampled_from(["[1]", "{x", '"text"', "{} {}", '{"id": "a", "id": "b"}']))


@settings(max_examples=300)
@given(st.lists(DUMP_LINES, min_size=1, max_size=12))
def test_dump_lines_read_as_every_rule_checked_in_turn(lines):
    """A dump's lines (well-formed or breaking any rule, in any mix) give the posts and the
    problems of a reader checking every rule of every line in turn (tests/reference.py): the
    shortcut for well-formed lines takes nothing the rules refuse, and the same values."""
    from finbench.tracks.events.posts import POSTS_SCHEMA, _post
    from tests.reference import naive_dump_post

    columns = {name: [] for name in POSTS_SCHEMA.names}
    problems, want_rows, want_problems = [], [], []
    for number, line in enumerate(lines, 1):
        _post(line, number, columns, problems)
        row, why = naive_dump_post(line, number)
        want_problems += why
        want_rows += [row] if row else []
    assert problems == want_problems
    assert list(zip(*columns.values(), strict=True)) == want_rows


def test_a_dump_is_stored_a_date_at_a_time_as_the_whole_table_would_be(tmp_path, monkeypatch):
    """Posts read in batches of 7 lines, spread over three dates (one already in the store):
    each date's partition is the one all its posts, old and new, sorted by time and id, give
    when written whole; the spilled batches are gone as each date is done."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    import finbench.tracks.events.posts as posts
    from finbench.tracks.events.posts import POSTS_SCHEMA, read_dump

    monkeypatch.setattr(posts, "BATCH_LINES", 7)
    day = 1704067200  # 2024-01-01
    first = tmp_path / "first.jsonl"
    first.write_text("".join(json.dumps({"id": f"a{i}", "created_utc": day + 86_400 + i * 97,
                                         "subreddit": "x", "body": f"old {i}"}) + "\n"
                             for i in range(5)))
    second = tmp_path / "second.jsonl"
    second.write_text("".join(json.dumps({"id": f"b{i}", "created_utc": day + (i % 3) * 86_400
                                          + (40 - i) * 61, "subreddit": "y", "title": f"t{i}",
                                          "selftext": ""}) + "\n" for i in range(40)))
    store = EventStore.open_or_create(tmp_path / "store")
    store.add_posts(first)
    spilled = []
    real = pq.write_table
    monkeypatch.setattr(pq, "write_table", lambda t, f, **k: spilled.append(Path(f)) or real(
        t, f, **k))
    assert store.add_posts(second)["posts"] == 40
    every = pa.concat_tables([t for dump in (first, second) for t in read_dump(dump, {})])
    dates = every.column("created_utc").to_pandas().dt.date
    for d in sorted(set(dates)):
        want = every.filter(pa.array((dates == d).to_numpy()))
        want = want.take(pc.sort_indices(want, [("created_utc", "ascending"),
                                                ("post_id", "ascending")]))
        reference = tmp_path / f"want-{d}.parquet"
        real(want, reference)
        stored = tmp_path / "store" / f"posts/date={d}/part.parquet"
        assert stored.read_bytes() == reference.read_bytes(), d
        assert pq.read_table(stored).schema.equals(POSTS_SCHEMA)
    assert spilled and not any(f.exists() for f in spilled)  # spills and finished dates moved


@settings(max_examples=200)
@given(st.lists(st.lists(st.sampled_from(WORDS), max_size=12), min_size=1, max_size=80),
       st.data())
def test_scoring_only_some_posts_gives_their_bits_of_the_whole_window(docs, data):
    """``window_scores(at=...)`` scores only the posts at those positions (a ticker's
    headlines), each found in the postings of each term: their scores are the window's, bit
    for bit (the statistics are the window's whoever is scored), every other post's zero,
    for windows across two indexes and queries with repeated terms."""
    texts = [" ".join(d) for d in docs]
    cut = data.draw(st.integers(0, len(texts)))
    first, second = PostIndex(texts[:cut]), PostIndex(texts[cut:])
    parts = [(first, data.draw(st.integers(0, cut)), cut),
             (second, 0, data.draw(st.integers(0, len(texts) - cut)))]
    query = " ".join(data.draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=10)))
    whole = window_scores(parts, query)
    at = np.array(sorted(data.draw(st.sets(st.integers(0, max(len(whole) - 1, 0)))
                                   if len(whole) else st.just(set()))), np.int64)
    touched: list = []
    some = window_scores(parts, query, at=at, touched=touched)
    assert some.view(np.uint32)[at].tolist() == whole.view(np.uint32)[at].tolist()
    assert not np.delete(some, at).any()
    assert all(np.isin(t, at).all() and (some[t] > 0).all() for t in touched)


@settings(max_examples=200)
@given(st.lists(st.lists(st.sampled_from(WORDS), max_size=12), min_size=1, max_size=80),
       st.data())
def test_the_candidates_of_a_search_hold_its_best_posts(docs, data):
    """The posts a search orders (:func:`candidates`, from the postings of its terms, without
    a pass over every score) hold its best: ranking them gives what ranking every post that
    scored gives, for windows across two indexes, queries with repeated terms, any ``k``;
    each candidate once, ascending, and above zero."""
    texts = [" ".join(d) for d in docs]
    cut = data.draw(st.integers(0, len(texts)))
    first, second = PostIndex(texts[:cut]), PostIndex(texts[cut:])
    lo = data.draw(st.integers(0, cut))
    hi = data.draw(st.integers(0, len(texts) - cut))
    query = " ".join(data.draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=10)))
    k = data.draw(st.integers(0, 12))
    touched: list = []
    scores = window_scores([(first, lo, cut), (second, 0, hi)], query, touched=touched)
    assert scores.tolist() == window_scores([(first, lo, cut), (second, 0, hi)],
                                            query).tolist()
    n = len(scores)
    created = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)),
                       np.int64)
    ids = np.array([f"p{(7 * i) % max(n, 1):03d}" for i in range(n)], object)
    keep = candidates(scores, touched, k)
    assert (np.diff(keep) > 0).all() and (scores[keep] > 0).all()
    assert keep[top_k(scores[keep], created[keep], ids[keep], k)].tolist() == top_k(
        scores, created, ids, k).tolist()
