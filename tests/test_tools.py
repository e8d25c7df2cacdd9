"""The intraday agent tools: answered at the task's ``now`` from the snapshot alone, later
asks refused, every answer checked against the store read naively."""

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from finbench.core.errors import LookaheadError
from finbench.data.store import Store
from finbench.data.synth import CANARY_MARK
from finbench.tracks.intraday.config import TasksConfig
from finbench.tracks.intraday.tools import MAX_ITEMS, RESOLUTIONS, IntradayTools
from finbench.tracks.tools import answered, arguments_of, canonical, items_text

TICKERS = ["AAPL", "MSFT", "NVDA", "ZZZZ"]  # ZZZZ: in no store


@pytest.fixture(scope="module")
def tools(sample_store):
    return IntradayTools(Store(sample_store), TasksConfig(tickers=["AAPL"], start="2025-01-15",
                                                          end="2025-01-15"))


@pytest.fixture(scope="module")
def stored_headlines(sample_store):
    return Store(sample_store).read_headlines()


def call(tools, name, now, **args):
    result = tools.call(name, json.dumps(args), pd.Timestamp(now, tz="UTC"))
    return result, json.loads(result.content)


def test_bars_are_the_stores_bars_complete_by_end_summed_into_buckets(tools, sample_store):
    now = "2025-01-15 17:30"  # 12:30 in New York
    result, body = call(tools, "bars", now, ticker="AAPL", start="2025-01-15T11:00",
                        end=None, resolution="15min")
    raw = Store(sample_store).read_bars(tickers=["AAPL"], start=pd.Timestamp("2025-01-15").date(),
                                        end=pd.Timestamp("2025-01-15").date())
    start, stop = pd.Timestamp("2025-01-15 16:00", tz="UTC"), pd.Timestamp(now, tz="UTC")
    kept = raw[(raw["ts"] >= start) & (raw["ts"] + pd.Timedelta(minutes=1) <= stop)]
    assert result.refusal is None and result.items == len(body["items"]) == 6  # 11:00-12:30
    first = body["items"][0]
    head = kept.iloc[:15]
    assert first["start"] == "2025-01-15T16:00:00Z" and first["bars"] == 15
    assert first["open"] == head["open"].iloc[0] and first["close"] == head["close"].iloc[-1]
    assert first["high"] == head["high"].max() and first["low"] == head["low"].min()
    assert first["volume"] == head["volume"].sum()
    assert first["available_at"] == "2025-01-15T16:15:00Z"
    assert sum(b["bars"] for b in body["items"]) == len(kept) == 90
    assert result.max_available == stop  # the 12:29 bar, complete at 12:30


def test_a_window_ending_after_now_is_refused_not_clipped(tools):
    result, body = call(tools, "bars", "2025-01-15 17:30", ticker="AAPL",
                        start="2025-01-15T09:30", end="2025-01-15T12:31", resolution="1min")
    assert result.refusal == "future" and result.items == 0 and "items" not in body
    assert "after now" in body["message"]
    result, _ = call(tools, "calendar", "2025-01-15 17:30", date="2025-01-16")
    assert result.refusal == "future"


def test_bad_arguments_and_unknown_tools_are_refused_with_the_rule(tools):
    now = "2025-01-15 17:30"
    for name, args, said in [
            ("bars", {"ticker": "AAPL"}, "missing argument(s): start, resolution"),
            ("bars", {"ticker": "AAPL", "start": "x", "end": None, "resolution": "1min"},
             "start: 'x' is no ISO 8601 instant"),
            ("bars", {"ticker": "AAPL", "start": "2025-01-15", "end": None, "resolution": "2h"},
             "resolution: '2h' is not one of"),
            ("bars", {"ticker": "AAPL", "start": "2024-11-03T01:30", "end": None,
                      "resolution": "1h"}, "is no single instant in America/New_York"),
            ("bars", {"ticker": "AAPL", "start": "2024-03-10T02:30", "end": None,
                      "resolution": "1h"}, "(a clock change): give its offset"),
            ("daily", {"ticker": "AAPL", "sessions": 0}, "sessions: 0 is below 1"),
            ("daily", {"ticker": "AAPL", "sessions": True}, "sessions: True is not an integer"),
            ("daily", {"ticker": "AAPL", "sessions": 3, "more": 1}, "unknown argument(s): more"),
            ("headlines", {"query": " ", "ticker": None, "limit": 3}, "query: is empty")]:
        result, body = call(tools, name, now, **args)
        assert result.refusal == "bad_arguments" and said in body["message"], (args, body)
    result = tools.call("bars", "{not json", pd.Timestamp(now, tz="UTC"))
    assert result.refusal == "bad_arguments"
    result, body = call(tools, "orders", now)
    assert result.refusal == "unknown_tool" and "bars, daily, headlines, calendar" in body["message"]


def test_more_bars_than_a_call_gives_are_refused(tools):
    result, body = call(tools, "bars", "2025-01-15 20:00", ticker="AAPL",
                        start="2025-01-01T00:00", end=None, resolution="1min")
    assert result.refusal == "too_many" and f"more than {MAX_ITEMS}" in body["message"]
    result, _ = call(tools, "bars", "2025-01-15 20:00", ticker="AAPL",
                     start="2025-01-01T00:00", end=None, resolution="1d")
    assert result.refusal is None and result.items == 9  # 2-15 Jan, but 9 Jan (closed)


def test_daily_summaries_are_sessions_complete_by_now(tools):
    result, body = call(tools, "daily", "2025-01-15 17:30", ticker="MSFT", sessions=3)
    assert [d["session"] for d in body["items"]] == ["2025-01-10", "2025-01-13", "2025-01-14"]
    result, body = call(tools, "daily", "2025-01-15 21:00", ticker="MSFT", sessions=1)
    assert [d["session"] for d in body["items"]] == ["2025-01-15"]  # closed at 16:00


def test_calendar_says_early_closes_and_the_targets_rule(tools):
    _, body = call(tools, "calendar", "2025-01-15 17:30", date="2024-12-24")
    assert body["items"] == [{"date": "2024-12-24", "session": True,
                              "open": "2024-12-24T14:30:00Z", "close": "2024-12-24T18:00:00Z",
                              "early_close": True, "target": None}]  # early_close = "skip"
    _, body = call(tools, "calendar", "2025-01-15 17:30", date="2025-01-15")
    assert body["items"][0]["target"] == "2025-01-15T20:55:00Z"
    _, body = call(tools, "calendar", "2025-01-15 17:30", date="2025-01-11")
    assert body["items"] == [{"date": "2025-01-11", "session": False}]


def test_headline_search_sees_only_what_was_available_and_its_statistics(tools):
    now = pd.Timestamp("2025-01-15 17:30", tz="UTC")
    result, body = call(tools, "headlines", "2025-01-15 17:30", query=f"{CANARY_MARK} AAPL mid ended",
                        ticker="AAPL", limit=20)
    assert result.refusal is None and body["items"]
    for item in body["items"]:
        assert pd.Timestamp(item["available_at"]) <= now and "AAPL" in item["tickers"]
    # a canary is available 10 minutes after its day's target: the day before's is seen,
    # today's is not
    ids = [item["id"] for item in body["items"]]
    assert "canary-AAPL-2025-01-14" in ids and "canary-AAPL-2025-01-15" not in ids
    # scores are those of an index of the available headlines alone
    later = tools.call("headlines", canonical({"query": "AAPL earnings", "ticker": None,
                                               "limit": 5}), now + pd.Timedelta(days=30))
    again = tools.call("headlines", canonical({"query": "AAPL earnings", "ticker": None,
                                               "limit": 5}), now)
    assert again.content == tools.call("headlines", canonical(
        {"query": "AAPL earnings", "ticker": None, "limit": 5}), now).content
    assert later.content != again.content


def test_an_item_later_than_now_is_a_lookahead_error_whatever_answered():
    now = pd.Timestamp("2025-01-15 17:30", tz="UTC")
    with pytest.raises(LookaheadError, match="tool bars: an item available at"):
        answered("bars", now, [{}], [(now + pd.Timedelta(seconds=1)).value])


def test_a_nullable_argument_left_out_is_null_and_others_are_required():
    schema = {"properties": {"a": {"type": "string"}, "b": {"type": ["string", "null"]}},
              "required": ["a", "b"]}
    assert arguments_of('{"a": "x"}', schema) == ({"a": "x", "b": None}, None)
    assert arguments_of('{"b": "x"}', schema) == (None, "missing argument(s): a")
    assert arguments_of("[1]", schema) == (None, "the arguments are no JSON object")


NOW = st.datetimes(min_value=pd.Timestamp("2024-12-20").to_pydatetime(),
                   max_value=pd.Timestamp("2025-01-20").to_pydatetime())
MINUTES = st.integers(-3 * 24 * 60, 24 * 60)  # from three days before now to a day after


def instant(draw, now: pd.Timestamp, minutes=MINUTES):
    """An instant near ``now`` (before or after it, in UTC or local text), or junk."""
    kind = draw(st.sampled_from(["utc", "local", "date", "junk"]))
    at = now + pd.Timedelta(minutes=draw(minutes))
    if kind == "utc":
        return at.isoformat()
    if kind == "local":
        return at.tz_convert("America/New_York").tz_localize(None).isoformat()
    return at.date().isoformat() if kind == "date" else draw(st.sampled_from(["soon", ""]))


@st.composite
def calls(draw):
    now = pd.Timestamp(draw(NOW), tz="UTC")
    name = draw(st.sampled_from(["bars", "bars", "daily", "headlines", "calendar"]))
    if name == "bars":  # (a start mostly before now: a window that has bars)
        args = {"ticker": draw(st.sampled_from(TICKERS)),
                "start": instant(draw, now, st.integers(-3 * 24 * 60, 120)),
                "end": draw(st.one_of(st.none(), st.just(0))),
                "resolution": draw(st.sampled_from(list(RESOLUTIONS)))}
        if args["end"] == 0:
            args["end"] = instant(draw, now)
    elif name == "daily":
        args = {"ticker": draw(st.sampled_from(TICKERS)),
                "sessions": draw(st.integers(-1, 70))}
    elif name == "headlines":
        args = {"query": draw(st.sampled_from([CANARY_MARK, "earnings", "ABOVE BELOW",
                                               "Apple shares", "x"])),
                "ticker": draw(st.sampled_from([None, *TICKERS])),
                "limit": draw(st.integers(0, 21))}
    else:
        args = {"date": (now + pd.Timedelta(minutes=draw(MINUTES))).date().isoformat()}
    if draw(st.integers(0, 9)) == 0:  # now and then an argument left out
        args.pop(draw(st.sampled_from(sorted(args))))
    return now, name, args


def _target(day: str) -> pd.Timestamp:
    """A session's target instant: 15:55 New York time, or 5 minutes before an early close."""
    from finbench.core.calendar import session_grid

    return session_grid(day, day, horizons={"_": "00:00"}, early_close="shift"
                        ).table["t_target"].iloc[0]


ANSWERED = []  # (tool, items) of every call answered, for the test below to check its reach


@settings(max_examples=300)
@given(call=calls())
@example(call=(pd.Timestamp("2024-12-24 18:05", tz="UTC"), "headlines",  # an early close's
               {"query": "CANARY", "ticker": None, "limit": 1}))  # canary, just available
def test_no_tool_answers_anything_available_after_now(tools, call):
    """Any tool, any arguments, any ``now``: every item answered was available by ``now``
    (each item's own ``available_at``, and the result's latest), no canary of a day whose
    target is not yet passed is returned, and a window or date after ``now`` is refused."""
    now, name, args = call
    result = tools.call(name, json.dumps(args), now)
    body = json.loads(result.content)
    if result.refusal is not None:
        assert result.items == 0 and body["refused"] == result.refusal
        return
    ANSWERED.append((name, result.items))
    assert len(body["items"]) == result.items
    times = [pd.Timestamp(i["available_at"]) for i in body["items"] if "available_at" in i]
    assert all(t <= now for t in times)
    if result.max_available is not None:
        assert result.max_available <= now and result.max_available == max(times)
    for item in body["items"]:
        if CANARY_MARK in item.get("headline", ""):  # its day's target (15:55, or 5 minutes
            # before an early close, as the sample's) is past
            assert _target(item["id"][-10:]) < now
    if name == "bars" and args.get("end") not in (None, "soon", ""):
        end = pd.Timestamp(args["end"])
        assert (end.tz_localize("America/New_York") if end.tzinfo is None else end) <= now
    if name == "calendar":
        assert pd.Timestamp(args["date"]).date() <= now.tz_convert("America/New_York").date()


def test_the_property_test_reaches_answers_with_items(tools):
    """The random calls above are answered with items by every tool, bars among them (a
    property test that reached only refusals would prove nothing): run here again, counted."""
    ANSWERED.clear()
    test_no_tool_answers_anything_available_after_now(tools)
    reached = {name for name, items in ANSWERED if items}
    assert reached == {"bars", "daily", "headlines", "calendar"}


@settings(max_examples=80)
@given(when=st.datetimes(min_value=pd.Timestamp("2024-09-20").to_pydatetime(),
                        max_value=pd.Timestamp("2025-01-21").to_pydatetime()),
       query=st.sampled_from(["earnings", "Apple shares", "AAPL MSFT guidance",
                              "Regulators widen inquiry", CANARY_MARK, "x"]),
       ticker=st.sampled_from([None, *TICKERS]), limit=st.integers(1, 20))
def test_headlines_are_the_naive_filter_of_the_available_ones(
        tools, stored_headlines, when, query, ticker, limit):
    """``headlines`` ranks only the headlines that can be best: with a ticker, its tagged
    rows (tags flattened once), without, those the query's postings give. The naive
    reference reads the store's headlines, keeps those available by ``now`` (whose tags hold
    the ticker), and orders every one that scored in Python (score, the later first, id)."""
    now = pd.Timestamp(when, tz="UTC")
    available = stored_headlines[stored_headlines["available_at"] <= now]
    scores = tools.index.scores(0, len(available), query)
    want = sorted(((-s, -r.available_at.value, r.id) for r, s in zip(
        available.itertuples(), scores, strict=True)
        if s > 0 and (ticker is None or ticker in list(r.tickers))))
    result = tools.call("headlines", canonical({"query": query, "ticker": ticker,
                                                "limit": limit}), now)
    body = json.loads(result.content)
    assert [i["id"] for i in body["items"]] == [i for _, _, i in want[:limit]]
    assert [i["score"] for i in body["items"]] == [round(float(-s), 6) for s, _, _ in
                                                   want[:limit]]
    assert ticker is None or all(ticker in i["tickers"] for i in body["items"])
    # what each item shows: its stored row's, read from the frame a row at a time
    rows = stored_headlines.set_index("id")
    assert [{k: v for k, v in i.items() if k not in ("id", "score")} for i in body["items"]] == [
        {"headline": r.headline, "source": r.source, "tickers": list(r.tickers),
         "published_at": r.published_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
         "available_at": r.available_at.strftime("%Y-%m-%dT%H:%M:%SZ")}
        for r in (rows.loc[i] for _, _, i in want[:limit])]


def test_a_headline_seen_after_it_was_published_shows_both_instants(tools, stored_headlines):
    """An item shows when its headline was published and when it became available (first
    seen later): the sample's headlines of both instants, each found by its own text."""
    late = stored_headlines[stored_headlines["published_at"] != stored_headlines["available_at"]]
    assert len(late) >= 10
    for r in late.itertuples():
        result = tools.call("headlines", canonical({"query": r.headline, "ticker": None,
                                                    "limit": 20}), r.available_at)
        item = next(i for i in json.loads(result.content)["items"] if i["id"] == r.id)
        assert (item["published_at"], item["available_at"], item["source"]) == (
            r.published_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            r.available_at.strftime("%Y-%m-%dT%H:%M:%SZ"), r.source)
        assert item["published_at"] < item["available_at"]


FLOATS = st.floats(allow_nan=False, allow_infinity=False)
# a few values drawn again and again: a window's prices repeat (each written once)
PRICES = st.sampled_from([0.0, -0.0, 0.1, 0.30000000000000004, 1e16, 1e-7, 187.23, -5e-324])


def column_of(n: int):
    """A column of ``n`` values: a list of floats, ints, texts or anything JSON holds, or a
    numpy array of floats (often repeated) or ints."""
    return st.one_of(
        st.lists(FLOATS, min_size=n, max_size=n),
        st.lists(st.integers(-2**70, 2**70), min_size=n, max_size=n),
        st.lists(st.text(), min_size=n, max_size=n),
        st.lists(st.one_of(st.none(), st.booleans(), FLOATS, st.text(),
                           st.lists(st.integers(), max_size=2)), min_size=n, max_size=n),
        st.lists(st.one_of(PRICES, FLOATS), min_size=n, max_size=n).map(np.array),
        st.lists(st.integers(-2**63, 2**63 - 1), min_size=n, max_size=n).map(
            lambda v: np.array(v, np.int64)),
        st.lists(st.booleans(), min_size=n, max_size=n).map(np.array),
        st.lists(st.text(), min_size=n, max_size=n).map(lambda v: np.array(v, object)))


@given(data=st.data())
def test_items_written_a_column_at_a_time_are_the_canonical_text(data):
    """:func:`items_text` writes objects a column at a time: the text :func:`canonical`
    writes of them, byte for byte (keys and texts with quotes, escapes, ``%`` and any
    character; floats of every magnitude, ``-0.0`` apart from ``0.0``, repeated within and
    across numpy columns; ints past 64 bits; mixed columns), and an answer holding it is the
    canonical text of the whole."""
    n = data.draw(st.integers(0, 8))
    columns = data.draw(st.dictionaries(st.text(min_size=1), column_of(n), max_size=6))
    rows = [{k: v.tolist()[i] if isinstance(v, np.ndarray) else v[i]
             for k, v in columns.items()} for i in range(n if columns else 0)]
    written = items_text(columns)
    assert (written.text, len(written)) == (canonical(rows), len(rows))
    now = pd.Timestamp("2025-01-15 15:00", tz="UTC")
    extra = {"ticker": '"items":[]', "a": {"items": [], "é": [1.5, None]}}
    result = answered("bars", now, written, [], **extra)
    assert result.content == canonical({"tool": "bars", "now": "2025-01-15T15:00:00Z",
                                        **extra, "items": rows})


@given(data=st.data())
def test_instants_written_a_column_at_a_time_are_numpys(data):
    """:func:`instants_text` writes what numpy writes of each instant to the second, with a
    ``Z``: few or many, any int64 (before 1970, numpy's NaT among them), a window's instants
    a few days apart or years, in order or not."""
    from finbench.tracks.tools import CLOCK_TABLES_FROM, instants_text

    n = data.draw(st.one_of(st.integers(0, 5), st.integers(CLOCK_TABLES_FROM, 150)))
    base = data.draw(st.integers(-2**61, 2**61))
    spread = data.draw(st.sampled_from([10**9, 86_400 * 10**9 * 3, 10**15, 2**62]))
    ns = np.array(data.draw(st.lists(st.one_of(
        st.integers(-spread, spread).map(lambda d: base + d),
        st.integers(-2**63 + 1, 2**63 - 1)), min_size=n, max_size=n)), np.int64)
    if data.draw(st.booleans()):
        ns.sort()
    if n and data.draw(st.integers(0, 3)) == 0:  # numpy's NaT (int64's least) among them
        ns[data.draw(st.integers(0, n - 1))] = np.iinfo(np.int64).min
    numpy = np.datetime_as_string(ns.astype("datetime64[ns]"), unit="s")
    assert instants_text(ns) == [f"{t}Z" for t in numpy.tolist()]


def test_a_float_json_cannot_write_is_refused_as_json_refuses_it():
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="not JSON compliant"):
            canonical([{"x": bad}])
        with pytest.raises(ValueError, match="not JSON compliant"):
            items_text({"x": [1.0, bad]})
        with pytest.raises(ValueError, match="not JSON compliant"):
            items_text({"x": np.array([1.0, bad]), "y": np.array([2.0, 3.0])})


def test_answers_do_not_depend_on_calls_made_before(tools):
    """A call's answer is a function of its arguments, ``now`` and the snapshot: asked
    after other calls (other tickers, later instants) it is the same bytes."""
    args = canonical({"ticker": "NVDA", "start": "2025-01-14T09:30", "end": None,
                      "resolution": "5min"})
    now = pd.Timestamp("2025-01-15 15:00", tz="UTC")
    first = tools.call("bars", args, now)
    for when in np.arange(5):
        tools.call("headlines", canonical({"query": "earnings", "ticker": None, "limit": 5}),
                   now + pd.Timedelta(days=int(when)))
    assert tools.call("bars", args, now) == first


@settings(max_examples=60)
@given(ticker=st.sampled_from(TICKERS), when=NOW, back=st.integers(0, 4 * 24 * 60),
       resolution=st.sampled_from(list(RESOLUTIONS)), sessions=st.integers(1, 12))
def test_bars_and_daily_are_the_naive_readings_of_the_store(tools, sample_store, ticker, when,
                                                             back, resolution, sessions):
    """The tools read date partitions held in memory and sum buckets with numpy; the naive
    reference reads the store through pandas, groups by pandas, and sums sessions by a loop
    over the library's calendar: the same items. (``daily`` answers the calendar's last
    sessions complete by now: those the store has no bars of are not looked for further
    back.)"""
    from tests.reference import library_calendar, naive_daily, naive_tool_bars

    store = Store(sample_store)
    now = pd.Timestamp(when, tz="UTC")
    first = now - pd.Timedelta(minutes=back)
    result = tools.call("bars", canonical({"ticker": ticker, "start": first.isoformat(),
                                           "end": None, "resolution": resolution}), now)
    want = naive_tool_bars(store, ticker, first, now, RESOLUTIONS[resolution],
                           "America/New_York")
    if result.refusal == "too_many":
        assert len(want) > MAX_ITEMS
    else:
        assert json.loads(result.content)["items"] == want
        # its items written a column at a time: the canonical text, byte for byte
        assert result.content == canonical(json.loads(result.content))
    result = tools.call("daily", canonical({"ticker": ticker, "sessions": sessions}), now)
    bars = store.read_bars(tickers=[ticker], start=(now - pd.Timedelta(days=40)).date(),
                           end=now.date())
    cal = library_calendar("XNYS", "2024-10-01", "2025-02-28")
    daily = naive_daily(bars, cal) if len(bars) else pd.DataFrame({"available_ns": []})
    # the calendar's last sessions before today, and today's, as the gate sums them up:
    # those complete by now, the last ``sessions`` of them (a session without bars has none)
    today = now.tz_convert("America/New_York").date()
    listed = [str(d.date()) for d in cal.sessions if d.date() <= today]
    keep = set(listed[-sessions:] if listed and listed[-1] != str(today)
               else listed[-sessions - 1:])
    if len(daily):
        daily = daily[daily["session"].isin(keep) & (daily["available_ns"] <= now.value)]
        daily = daily.tail(sessions)
    assert [(d["session"], d["close"], d["volume"]) for d in json.loads(
        result.content)["items"]] == list(zip(daily.get("session", []), daily.get(
            "close", []), daily.get("volume", []), strict=True))


# -- the event track's tools ---------------------------------------------------------------
def event_config():
    """The event pilot's config."""
    from pathlib import Path

    from finbench.core.config import ConfigText
    from finbench.tracks.configs import load_config_file

    path = Path(__file__).resolve().parents[1] / "configs" / "pilot_events.toml"
    return load_config_file(ConfigText.read(path))[0]


@pytest.fixture(scope="module")
def event_tools():
    from finbench.tracks.events.track import EventsTrack

    track = EventsTrack(event_config())
    return track.tools(), track.plan.tasks, track.plan.markets.set_index("market_id")


EVENT_QUERIES = ["CANARY resolved YES", "CANARY resolved NO", "win final match", "election",
                 "Will price above", "x"]


@settings(max_examples=200)
@given(data=st.data())
def test_no_event_tool_answers_anything_known_only_from_its_cutoff_on(event_tools, data):
    """Any tool, arguments, task and ``now`` (its cutoff, or any instant): no post made at or
    after ``now``, no price after it, no market not created and resolved before it (so
    neither the task's own nor a sibling still open), no canary of the task's own question;
    a start after ``now`` refused."""
    tools, tasks, markets = event_tools
    task = tasks.iloc[data.draw(st.integers(0, len(tasks) - 1))].to_dict()
    now = tools.now(task) + pd.Timedelta(hours=data.draw(st.sampled_from([0, 0, -100, 500])))
    name = data.draw(st.sampled_from(["posts", "prices", "markets"]))
    if name == "posts":
        args = {"query": data.draw(st.sampled_from(EVENT_QUERIES)),
                "days": data.draw(st.integers(0, 400)), "limit": data.draw(st.integers(0, 21))}
    elif name == "prices":
        args = {"start": data.draw(st.one_of(st.none(), st.integers(-2000, 200).map(
            lambda h: (now + pd.Timedelta(hours=h)).isoformat())))}
    else:
        args = {"query": data.draw(st.sampled_from(EVENT_QUERIES)),
                "limit": data.draw(st.integers(0, 21))}
    result = tools.call(name, json.dumps(args), now, task)
    body = json.loads(result.content)
    if result.refusal is not None:
        assert result.items == 0
        return
    question = markets.loc[task["market_id"], "question"]
    for item in body["items"]:
        at = pd.Timestamp(item["available_at"])
        assert at < now if name != "prices" else at <= now
        assert not ("CANARY" in item.get("text", "") and question in item["text"]
                    and now <= tools.now(task))
        if name == "markets":
            assert pd.Timestamp(item["opened_at"]) < now and pd.Timestamp(
                item["resolved_at"]) < now  # (at its cutoff, a task's own market is open)
            own = markets.loc[task["market_id"], "resolved_at"]  # (a task whose cutoff is
            assert item["market_id"] != task["market_id"] or own < now  # past it: never asked)
    if name == "prices" and args["start"] is not None:
        assert pd.Timestamp(args["start"]) <= now


@settings(max_examples=100)
@given(data=st.data())
def test_the_prices_tool_answers_the_markets_prices_the_slow_way(event_tools, data):
    """The ``prices`` tool's items are the task's market's stored prices made at or before
    ``now`` and at or after ``start``, in time order, as filtering the store's prices table
    gives them (a market without prices: none)."""
    from finbench.tracks.tools import instant_text

    tools, tasks, _ = event_tools
    task = tasks.iloc[data.draw(st.integers(0, len(tasks) - 1))].to_dict()
    if data.draw(st.booleans()):
        task = {**task, "market_id": "no-such-market"}
    now = tools.now(task) + pd.Timedelta(hours=data.draw(st.sampled_from([0, -100, 500])))
    start = data.draw(st.one_of(st.none(), st.integers(-2000, 0).map(
        lambda h: now + pd.Timedelta(hours=h))))
    args = {"start": None if start is None else start.isoformat()}
    body = json.loads(tools.call("prices", json.dumps(args), now, task).content)
    prices = tools.store.prices()
    mine = prices[(prices["market_id"] == task["market_id"]) & (prices["time"] <= now)
                  & (True if start is None else prices["time"] >= start)
                  ].sort_values("time", kind="stable")
    assert body["items"] == [{"time": instant_text(t), "price": p, "available_at":
                              instant_text(t)} for t, p in zip(mine["time"], mine["price"],
                                                               strict=True)]


@settings(max_examples=100)
@given(data=st.data())
def test_the_markets_tool_ranks_the_markets_known_before_now_the_slow_way(event_tools, data):
    """The ``markets`` tool ranks only the markets its query's postings say can be best; the
    naive reference takes the markets resolved before ``now``, scores them with an index of
    those alone, keeps those opened before ``now`` and orders every one that scored in Python
    (score, the later resolved first, then id)."""
    from finbench.core.bm25 import PostIndex

    tools, tasks, _ = event_tools
    task = tasks.iloc[data.draw(st.integers(0, len(tasks) - 1))].to_dict()
    now = tools.now(task) + pd.Timedelta(hours=data.draw(st.sampled_from([0, -500, 500, 3000])))
    query = data.draw(st.sampled_from([*EVENT_QUERIES, "Will the", "match final election"]))
    limit = data.draw(st.integers(1, 20))
    markets = tools.store.markets()
    known = markets[markets["outcome"].notna() & (markets["resolved_at"] < now)]
    scores = PostIndex(known["question"].astype(str).tolist()).scores(0, len(known), query)
    want = sorted((-float(s), -r.resolved_at.value, r.market_id) for r, s in zip(
        known.itertuples(), scores, strict=True) if s > 0 and r.opened_at < now)
    body = json.loads(tools.call("markets", json.dumps({"query": query, "limit": limit}), now,
                                 task).content)
    assert [(i["market_id"], i["score"]) for i in body["items"]] == [
        (m, round(-s, 6)) for s, _, m in want[:limit]]
    rows = known.set_index("market_id")  # what each item shows: its market's row
    assert [{k: v for k, v in i.items() if k not in ("market_id", "score")}
            for i in body["items"]] == [
        {"question": r.question, "category": r.category, "event_group": r.event_group,
         "opened_at": r.opened_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
         "resolved_at": r.resolved_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
         "available_at": r.resolved_at.strftime("%Y-%m-%dT%H:%M:%SZ"), "outcome": r.outcome}
        for r in (rows.loc[m] for _, _, m in want[:limit])]


@pytest.fixture(scope="module")
def every_post(event_tools):
    """Every post of the event pilot's store, sorted by time, as one table."""
    return event_tools[0].store.read_posts(pd.Timestamp("2000-01-01", tz="UTC"),
                                           pd.Timestamp("2100-01-01", tz="UTC"))


def naive_posts(posts, now: pd.Timestamp, days: int, query: str, limit: int, max_chars: int
                ) -> list[tuple]:
    """The posts tool's answer the slow way: the posts of ``posts`` made in the window taken
    out of them, and one index built over those alone."""
    import pyarrow as pa

    from finbench.core.bm25 import PostIndex, top_k

    at = posts.column("created_utc").cast(pa.int64()).to_numpy()
    posts = posts.filter((at >= (now - pd.Timedelta(days=days)).value) & (at < now.value))
    created = posts.column("created_utc").cast(pa.int64()).to_numpy()
    ids = np.asarray(posts.column("post_id").to_pylist(), dtype=object)
    texts, subs = posts.column("text").to_pylist(), posts.column("subreddit").to_pylist()
    scores = PostIndex(texts).scores(0, len(texts), query)
    return [(ids[j], subs[j], texts[j][:max_chars], pd.Timestamp(created[j], tz="UTC"),
             round(float(scores[j]), 6)) for j in top_k(scores, created, ids, limit)]


@settings(max_examples=25)
@given(calls=st.lists(st.tuples(st.integers(0, 10**6), st.integers(-24 * 200, 24 * 40),
                                st.integers(1, 365), st.sampled_from(EVENT_QUERIES),
                                st.integers(1, 20)), min_size=1, max_size=5),
       budget=st.sampled_from([-1, 10**6]))
def test_event_posts_are_one_index_over_the_window_alone(event_tools, every_post, calls,
                                                          budget):
    """The posts tool, holding an index a month (as few months as it may, or all, and
    whatever it was asked before), answers what one index built over the window's posts
    alone ranks: the same posts in the same order, the same scores."""
    from unittest import mock

    import finbench.tracks.events.post_months as module
    from finbench.tracks.events.tools import EventTools

    store, tasks = event_tools[0].store, event_tools[1]
    with mock.patch.object(module, "POSTS_HELD", budget):
        tools = EventTools(store, event_config())
        for pick, hours, days, query, limit in calls:
            task = tasks.iloc[pick % len(tasks)].to_dict()
            now = tools.now(task) + pd.Timedelta(hours=hours)
            args = json.dumps({"query": query, "days": days, "limit": limit})
            result = tools.call("posts", args, now, task)
            got = [(i["post_id"], i["subreddit"], i["text"], pd.Timestamp(i["created_utc"]),
                    i["score"]) for i in json.loads(result.content)["items"]]
            assert got == naive_posts(every_post, now, days, query, limit, tools.max_chars)
            first, last = now - pd.Timedelta(days=days), now - pd.Timedelta(1)  # (UTC)
            spans = len(pd.period_range(first.tz_localize(None).to_period("M"),
                                        last.tz_localize(None).to_period("M"), freq="M"))
            assert len(tools.posts.held) <= spans + 1 or budget > 0  # (and one more)

