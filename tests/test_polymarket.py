"""A Polymarket dump as the public APIs give it: a ``/markets`` or ``/events`` answer holding
open, non-binary and unresolved markets beside resolved ones, final prices a hair from 0/1,
CLOB histories named by token id and stamped in milliseconds; an event ingest whose posts
fail writes nothing; a truncated dump says where."""

import json

import pandas as pd
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from finbench.core.errors import DataError
from finbench.tracks.events.markets import parse_instants
from finbench.tracks.events.store import MANIFEST, EventStore
from tests.helpers import cli, store_files
from tests.reference import naive_parse_instants


def gamma(i: int, **changes) -> dict:
    """A resolved Yes/No Gamma market (fields as the API names them, JSON text and all)."""
    base = {"id": str(500 + i), "question": f"Will thing {i} happen?", "conditionId": f"0x{i}",
            "slug": f"thing-{i}", "description": "Resolves YES if it happens.",
            "category": "Politics", "startDate": "2024-01-02T15:00:00Z",
            "endDate": "2024-03-01T00:00:00Z", "closedTime": "2024-03-01 06:00:00+00",
            "closed": True, "active": True, "archived": False,
            "outcomes": '["Yes", "No"]', "outcomePrices": '["1", "0"]',
            "clobTokenIds": json.dumps([f"7{i}01", f"7{i}02"]),
            "umaResolutionStatus": "resolved"}
    return {**base, **changes}


def dump(folder):
    """Markets of a real ``/markets`` answer, each kind a dump holds."""
    return [
        gamma(0),                                                          # YES
        gamma(1, outcomePrices='["0.0000004", "0.9999996"]'),             # NO, to the 7th digit
        gamma(2, outcomePrices='["0.9999996", "0.0000004"]'),             # YES, likewise
        gamma(3, outcomePrices='["0.5", "0.5"]'),                         # void
        gamma(4, closed=False, outcomePrices='["0.62", "0.38"]'),         # still open
        gamma(5, outcomes='["Over", "Under"]'),                           # not Yes/No
        gamma(6, outcomes='["Lakers", "Celtics", "Draw"]',
              outcomePrices='["1", "0", "0"]'),                           # three outcomes
        gamma(7, outcomePrices='["0.35", "0.65"]'),                       # annulled, priced
    ]


def test_a_real_markets_dump_is_ingested_with_the_unusable_skipped_and_counted(tmp_path):
    (tmp_path / "markets.json").write_text(json.dumps(dump(tmp_path)))
    prices = tmp_path / "prices"
    prices.mkdir()
    # named by the market's YES token (clobTokenIds), t in milliseconds; one by market id
    (prices / "7001.json").write_text(json.dumps({"history": [
        {"t": 1704207600000, "p": 0.41}, {"t": 1704211200000, "p": 0.43}]}))
    (prices / "501.json").write_text(json.dumps({"history": [{"t": 1704207600, "p": 0.2}]}))
    (prices / "7201.json").write_text(json.dumps({"history": []}))  # no trades: no price
    done = cli("data", "ingest", "--markets", tmp_path / "markets.json", "--prices", prices,
               "--out", tmp_path / "store")
    assert done.returncode == 0, done.stderr
    assert "ingested 4 markets (1 void) and 3 prices" in done.stdout
    assert ("skipped 4 market(s) no binary question can be asked of: not Yes/No (Over/Under, "
            "teams, several outcomes) 2, still open 1, closed at prices that are no resolution "
            "1") in done.stdout
    assert "1 price file(s) hold an empty history" in done.stdout
    store = EventStore(tmp_path / "store")
    markets = store.markets().set_index("market_id")
    assert markets["outcome"].to_dict() == {"500": "YES", "501": "NO", "502": "YES",
                                            "503": "void"}
    assert markets.loc["500", "resolved_at"] == pd.Timestamp("2024-03-01 06:00", tz="UTC")
    got = store.prices()
    assert got["market_id"].tolist() == ["500", "500", "501"]
    assert got["time"].tolist() == [pd.Timestamp("2024-01-02 15:00", tz="UTC"),
                                    pd.Timestamp("2024-01-02 16:00", tz="UTC"),
                                    pd.Timestamp("2024-01-02 15:00", tz="UTC")]
    # refused instead, each named with its rule, and nothing written
    done = cli("data", "ingest", "--markets", tmp_path / "markets.json", "--unusable",
               "refuse", "--out", tmp_path / "strict")
    assert done.returncode == 2
    for said in ("market 5 (id 504): closed is not true", "market 6 (id 505): outcomes "
                 "'[\"Over\", \"Under\"]'", "market 8 (id 507): outcomePrices [0.35, 0.65]: "
                 "not a resolution"):
        assert said in done.stderr
    assert not (tmp_path / "strict").exists()


def test_an_events_answer_is_read_with_each_event_the_group_of_its_markets(tmp_path):
    events = [{"id": "9001", "title": "Election", "category": "Politics",
               "markets": [gamma(0, category=None), gamma(1, category=None,
                                                          outcomePrices='["0", "1"]')]},
              {"id": "9002", "title": "Game", "markets": [gamma(2, outcomes='["A", "B"]')]}]
    (tmp_path / "events.json").write_text(json.dumps(events))
    store = EventStore.open_or_create(tmp_path / "store")
    done = store.ingest(markets=tmp_path / "events.json")
    assert done["markets"] == 2 and done["skipped"] == {"not_binary": 1}
    markets = store.markets().set_index("market_id")
    assert markets["event_group"].to_dict() == {"500": "9001", "501": "9001"}
    assert markets["category"].to_dict() == {"500": "Politics", "501": "Politics"}


def test_price_files_that_are_no_answer_say_why_not_a_traceback(tmp_path):
    (tmp_path / "markets.json").write_text(json.dumps([gamma(0), gamma(1)]))
    cases = {  # file content -> what is said
        '{"history": [{"t": 99999999999999999999, "p": 0.5}]}': "7001.json point 1: t "
        "99999999999999999999: a number is a Unix epoch count",
        '{"history": [{"t": 17042076, "p": 0.5}]}': "7001.json point 1: t 17042076: a number",
        '{"history": [{"t": "2024-01-02", "p": 0.5}]}': "7001.json point 1: t '2024-01-02'",
        '{"history": [{"time": 1704207600, "p": 0.5}]}': "7001.json point 1: not an object "
        "with t and p",
        '{"prices": []}': "7001.json: no history list",
        "[1, 2": "7001.json: not JSON",
    }
    for text, said in cases.items():
        prices = tmp_path / "p"
        prices.mkdir(exist_ok=True)
        (prices / "7001.json").write_text(text)
        with pytest.raises(DataError) as err:
            EventStore.open_or_create(tmp_path / "s").ingest(markets=tmp_path / "markets.json",
                                                             prices=prices)
        assert said in str(err.value), (text, str(err.value))
    (prices / "7001.json").unlink()
    (prices / "7002.json").write_text('{"history": [{"t": 1704207600, "p": 0.5}]}')
    with pytest.raises(DataError, match=r"7002\.json: the CLOB token of market 500's NO "
                                        r"outcome; FinBench reads the YES token's prices"):
        EventStore.open_or_create(tmp_path / "s").ingest(markets=tmp_path / "markets.json",
                                                         prices=prices)
    assert not (tmp_path / "s").exists()


def test_an_event_ingest_whose_posts_fail_writes_nothing(tmp_path):
    """Markets and prices were left in the store after "nothing was written" of the posts."""
    (tmp_path / "markets.json").write_text(json.dumps([gamma(0)]))
    (tmp_path / "bad.jsonl").write_text('{"id": "a", "subreddit": "x", "body": "no time"}\n')
    done = cli("data", "ingest", "--markets", tmp_path / "markets.json", "--posts",
               tmp_path / "bad.jsonl", "--out", tmp_path / "store")
    assert done.returncode == 2 and "created_utc None" in done.stderr
    assert not (tmp_path / "store").exists()
    ok = tmp_path / "ok.jsonl"
    ok.write_text('{"id": "a", "created_utc": 1704207600, "subreddit": "x", "body": "hi"}\n')
    assert cli("data", "ingest", "--posts", ok, "--out", tmp_path / "store").returncode == 0
    before = store_files(tmp_path / "store")
    done = cli("data", "ingest", "--markets", tmp_path / "markets.json", "--posts",
               tmp_path / "bad.jsonl", "--out", tmp_path / "store")
    assert done.returncode == 2
    assert store_files(tmp_path / "store") == before
    assert "markets.parquet" not in json.loads((tmp_path / "store" / MANIFEST).read_text())[
        "files"]


def test_a_truncated_dump_names_its_file_and_byte_offset(tmp_path):
    lines = "".join(json.dumps({"id": f"p{i}", "created_utc": 1704207600 + i, "subreddit": "x",
                                "body": "words " * 8}) + "\n" for i in range(300))
    whole = zstandard.ZstdCompressor().compress(lines.encode())
    cut = tmp_path / "RC_2024-01.zst"
    cut.write_bytes(whole[:-7])  # a download that stopped 7 bytes short
    done = cli("data", "ingest", "--posts", cut, "--out", tmp_path / "store")
    assert done.returncode == 2
    assert (f"{cut}: the zstd stream ends inside a frame that began at byte 0 and never "
            f"completes: the file is truncated at byte {len(whole) - 7}") in done.stderr
    assert not (tmp_path / "store").exists()
    two = tmp_path / "two.zst"  # two whole frames, then a third cut short
    frame = zstandard.ZstdCompressor().compress
    first, second = frame(lines[:900].encode()), frame(lines[900:].encode())
    two.write_bytes(first + second + frame(b'{"id": "z"}\n')[:5])
    with pytest.raises(DataError, match=f"a frame that began at byte {len(first) + len(second)} "
                                        "and never completes"):
        EventStore.open_or_create(tmp_path / "s2").add_posts(two)
    two.write_bytes(first + second)  # whole: every post of both frames
    assert EventStore.open_or_create(tmp_path / "s3").add_posts(two)["posts"] == 300


INSTANT_TEXTS = st.builds(
    lambda y, mo, d, h, mi, sec, frac, sep, zone: f"{y:04d}-{mo:02d}-{d:02d}{sep}{h:02d}:{mi:02d}"
    f"{sec}{frac}{zone}",
    st.sampled_from([1899, 1970, 2024, 2261, 2262, 2300]), st.integers(1, 13),
    st.integers(1, 31), st.integers(0, 24), st.integers(0, 59),
    st.sampled_from(["", ":00", ":59", ":60"]), st.sampled_from(["", ".5", ".123456789"]),
    st.sampled_from(["T", " "]), st.sampled_from(["Z", "+02:00", "-0530", "+14:00", "", " UTC"]))


@settings(max_examples=200)
@given(st.lists(st.one_of(INSTANT_TEXTS, st.sampled_from(
    ["2024-03-01", "garbage", "", None, 5, 1.5, "2024-03-01T12:00:00+0000"])),
    min_size=1, max_size=12))
def test_instants_read_a_column_at_a_time_as_one_by_one(values):
    """ISO texts with a zone are read together, the rest one by one: every value's time and
    flag are those of reading each value on its own (tests/reference.py)."""
    column = pd.Series(values, dtype=object)
    got, bad = parse_instants(column)
    want, want_bad = naive_parse_instants(column)
    assert bad.tolist() == want_bad.tolist()
    assert all((pd.isna(a) and pd.isna(b)) or a == b for a, b in zip(got, want, strict=True))
