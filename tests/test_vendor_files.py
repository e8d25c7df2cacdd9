"""Bars and headlines as vendors and tools export them (yfinance's three header rows, Alpaca
and Massive/Polygon news, API answers saved as JSON), several files in one ingest, and the
rules each real-world quirk meets: a byte-order mark, epoch times in JSON, a null ticker."""

import hashlib
import json

import pandas as pd
import pytest

from finbench.core.errors import DataError
from finbench.data.ingest import ingest_bars, ingest_files, ingest_headlines
from finbench.data.store import Store
from finbench.data.user_files import read_table_file
from tests.helpers import HEADER, bar_rows, cli, store_files, write

BOM = "\ufeff"

YF_ONE = ("Price,Close,High,Low,Open,Volume\n"
          "Ticker,AAPL,AAPL,AAPL,AAPL,AAPL\n"
          "Datetime,,,,,\n"
          "2025-01-13 09:29:00-05:00,234.1,234.5,233.9,234.0,1000\n"
          "2025-01-13 09:30:00-05:00,234.2,234.6,233.8,234.1,900\n")
# yf.download(["AAPL", "MSFT"]): fields grouped, a ticker's cells empty where it had no bar
YF_TWO = ("Price,Close,Close,High,High,Low,Low,Open,Open,Volume,Volume\n"
          "Ticker,AAPL,MSFT,AAPL,MSFT,AAPL,MSFT,AAPL,MSFT,AAPL,MSFT\n"
          "Datetime,,,,,,,,,,\n"
          "2025-01-13 09:29:00-05:00,234.1,420,234.5,421,233.9,419,234.0,420,1000,500\n"
          "2025-01-13 09:30:00-05:00,234.2,,234.6,,233.8,,234.1,,900,\n"
          "2025-01-13 09:31:00-05:00,234.2,421,234.6,{high},233.8,419,234.1,420,900,1\n")


def test_a_yfinance_csv_with_its_three_header_rows_is_read(tmp_path):
    done = ingest_bars(write(tmp_path / "aapl.csv", YF_ONE), tmp_path / "s")
    assert done["rows"] == 2 and done["tickers"] == ["AAPL"]
    bars = Store(tmp_path / "s").read_bars()
    assert bars["ts"].tolist() == [pd.Timestamp("2025-01-13 14:29", tz="UTC"),
                                   pd.Timestamp("2025-01-13 14:30", tz="UTC")]
    assert bars[["open", "high", "low", "close", "volume"]].iloc[0].tolist() == [
        234.0, 234.5, 233.9, 234.1, 1000.0]


def test_a_yfinance_csv_of_two_tickers_is_one_row_per_bar_and_names_rows_as_written(tmp_path):
    ingest_bars(write(tmp_path / "two.csv", YF_TWO.format(high=421)), tmp_path / "s")
    bars = Store(tmp_path / "s").read_bars()
    # MSFT had no bar at 09:30: the wide layout's empty cells are no bar, not a broken one
    assert bars.groupby("ticker").size().to_dict() == {"AAPL": 3, "MSFT": 2}
    msft = bars[bars["ticker"] == "MSFT"]
    assert msft["ts"].dt.strftime("%H:%M").tolist() == ["14:29", "14:31"]
    assert msft["close"].tolist() == [420.0, 421.0]
    bad = write(tmp_path / "bad.csv", YF_TWO.format(high=420))  # close 421 above high 420
    with pytest.raises(DataError) as info:
        ingest_bars(bad, tmp_path / "s2")
    assert ("rule 'low <= close <= high' broken in 1 row(s): data row 3, MSFT (open=420.0, "
            "high=420.0, low=419.0, close=421.0)") in str(info.value)
    assert not (tmp_path / "s2").exists()


def test_several_bars_files_are_one_ingest_all_or_nothing(tmp_path):
    a = write(tmp_path / "a.csv", HEADER + bar_rows("AAPL", [("2025-01-15T14:29:00Z", 101, 100)]))
    b = write(tmp_path / "b.csv", HEADER + bar_rows("MSFT", [("2025-01-15T14:29:00Z", 201, 200)]))
    done = cli("data", "ingest", a, b, "--out", tmp_path / "s")
    assert done.returncode == 0, done.stderr
    assert "ingested 2 bars of AAPL, MSFT" in done.stdout
    store = Store(tmp_path / "s")
    assert [s["file"] for s in store.manifest["sources"]] == ["a.csv", "b.csv"]
    # the same bar in two files: refused naming both, nothing written
    again = write(tmp_path / "c.csv", HEADER + bar_rows("AAPL", [("2025-01-15T14:29:00Z", 102,
                                                                   100)]))
    broken = write(tmp_path / "d.csv", HEADER + "AAPL,not a time,1,1,1,1,1\n")
    before = store_files(tmp_path / "s")
    done = cli("data", "ingest", a, again, "--out", tmp_path / "s")
    assert done.returncode == 2
    assert ("1 bar (ticker, ts)(s) given in two files (rule: each in one file only); nothing "
            "was written") in done.stderr
    assert "AAPL 2025-01-15 14:29:00+00:00: in a.csv, c.csv" in done.stderr
    done = cli("data", "ingest", b, broken, "--out", tmp_path / "s")  # the second is bad
    assert done.returncode == 2 and "d.csv" in done.stderr
    assert store_files(tmp_path / "s") == before


ALPACA = {"id": 24803233, "headline": "Apple up", "author": "Benzinga Newsdesk",
          "created_at": "2025-01-15T14:04:00Z", "updated_at": "2025-01-15T14:06:00Z",
          "summary": "short", "content": "<p>long</p>", "url": "https://x", "images": [],
          "symbols": ["AAPL"], "source": "benzinga"}
MASSIVE = {"id": "8ec6387", "publisher": {"name": "Benzinga", "homepage_url": "https://b/"},
           "title": "Microsoft falls", "author": "R. Writer",
           "published_utc": "2025-01-15T15:04:00Z", "article_url": "https://x",
           "tickers": ["MSFT", "AAPL"], "description": "MS fell", "keywords": ["tech"]}


def test_alpaca_and_massive_news_as_their_apis_answer(tmp_path):
    """Alpaca names a source and an author, a summary and content; Massive (Polygon) names a
    publisher object and an author, and stamps published_utc. Both were refused ("several
    columns match", "a column for published_at is required")."""
    write(tmp_path / "alpaca.json", json.dumps({"news": [ALPACA], "next_page_token": None}))
    write(tmp_path / "massive.jsonl", json.dumps(MASSIVE) + "\n")
    write(tmp_path / "massive.json", json.dumps({"results": [MASSIVE], "status": "OK"}))
    ingest_headlines([tmp_path / "alpaca.json", tmp_path / "massive.jsonl"], tmp_path / "s")
    news = Store(tmp_path / "s").read_headlines().set_index("id")
    assert news.loc["24803233", ["source", "body", "headline"]].tolist() == [
        "benzinga", "short", "Apple up"]  # source before author, summary before content
    assert news.loc["8ec6387", ["source", "body"]].tolist() == ["Benzinga", "MS fell"]
    assert news.loc["8ec6387", "published_at"] == pd.Timestamp("2025-01-15 15:04", tz="UTC")
    assert list(news.loc["8ec6387", "tickers"]) == ["MSFT", "AAPL"]
    same = read_table_file(tmp_path / "massive.json")  # the API answer saved whole
    assert same["title"].tolist() == ["Microsoft falls"]
    write(tmp_path / "other.json", json.dumps({"items": [MASSIVE]}))
    with pytest.raises(DataError, match=r"under one of results, news, data \(found keys: items\)"):
        read_table_file(tmp_path / "other.json")


def test_a_headline_without_an_id_gets_one_made_from_what_it_says(tmp_path):
    rows = [{"published_at": "2025-01-15T14:00:00Z", "tickers": ["AAPL"], "headline": "Up",
             "source": "s"},
            {"published_at": "2025-01-15T15:00:00Z", "tickers": ["AAPL", "MSFT"],
             "headline": "Down", "source": "t"}]
    write(tmp_path / "a.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    write(tmp_path / "b.jsonl", "".join(json.dumps(r) + "\n" for r in rows[::-1]))
    done = cli("data", "ingest", "--headlines", tmp_path / "a.jsonl", "--out", tmp_path / "s")
    assert done.returncode == 0, done.stderr
    assert "ids made from each headline's published_at, tickers, headline and source" in done.stdout
    ingest_headlines(tmp_path / "b.jsonl", tmp_path / "t")  # another file, another order
    first = Store(tmp_path / "s").read_headlines()
    assert first["id"].tolist() == Store(tmp_path / "t").read_headlines()["id"].tolist()
    # the rule written in docs/data.md, computed here by hand
    text = "\x1f".join(["finbench-headline-id-v1", str(1736949600 * 10**9), "AAPL", "Up", "s"])
    assert first["id"].iloc[0] == "h-" + hashlib.sha256(text.encode()).hexdigest()[:20]
    write(tmp_path / "twice.jsonl", "".join(json.dumps(rows[0]) + "\n" for _ in range(2)))
    with pytest.raises(DataError, match=r"one headline per id \(the file has no id column.*"
                                        r"broken in 2 row\(s\)"):
        ingest_headlines(tmp_path / "twice.jsonl", tmp_path / "u")


@pytest.mark.parametrize("form", ["jsonl", "parquet"])
def test_a_null_among_a_headlines_tickers_is_refused(tmp_path, form):
    """``tickers: [null]`` was stored as the ticker "None"."""
    rows = [{"id": "1", "published_at": "2025-01-15T14:00:00Z", "tickers": [None],
             "headline": "h", "source": "s"},
            {"id": "2", "published_at": "2025-01-15T14:00:00Z", "tickers": ["AAPL", None],
             "headline": "h", "source": "s"}]
    path = tmp_path / f"news.{form}"
    if form == "jsonl":
        write(path, "".join(json.dumps(r) + "\n" for r in rows))
    else:
        pd.DataFrame(rows).to_parquet(path)
    with pytest.raises(DataError) as info:
        ingest_headlines(path, tmp_path / "s")
    assert ("rule 'tickers lists texts (a null or a number in the list is no symbol)' broken in "
            "2 row(s)") in str(info.value)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("suffix", ["csv", "jsonl", "json"])
def test_a_byte_order_mark_is_read_the_same_in_every_format(tmp_path, suffix):
    row = {"id": "1", "published_at": "2025-01-15T14:00:00Z", "tickers": "AAPL",
           "headline": "h", "source": "s"}
    text = {"csv": "id,published_at,tickers,headline,source\n1,2025-01-15T14:00:00Z,AAPL,h,s\n",
            "jsonl": json.dumps(row) + "\n", "json": json.dumps([row])}[suffix]
    (tmp_path / f"n.{suffix}").write_text(BOM + text, encoding="utf-8")
    ingest_headlines(tmp_path / f"n.{suffix}", tmp_path / "s")
    assert Store(tmp_path / "s").read_headlines()["id"].tolist() == ["1"]
    (tmp_path / "b.csv").write_text(BOM + HEADER + bar_rows("AAPL", [("2025-01-15T14:29:00Z",
                                                                      101, 100)]))
    assert ingest_bars(tmp_path / "b.csv", tmp_path / "s")["tickers"] == ["AAPL"]


def test_epoch_times_in_json_are_read_or_refused_by_the_rule_they_break(tmp_path):
    """A JSON-lines file giving some times as numbers and others as text was refused whole
    with "does not parse as a date-time"; each value is now read by its kind, and a bad one
    names the rule of that kind."""
    def line(i, when):
        return json.dumps({"id": str(i), "published_at": when, "tickers": ["AAPL"],
                           "headline": "h", "source": "s"}) + "\n"

    write(tmp_path / "ok.jsonl", line(1, 1736949600) + line(2, "2025-01-15T14:00:00Z")
          + line(3, 1736949600123) + line(4, 1736949600.5))
    ingest_headlines(tmp_path / "ok.jsonl", tmp_path / "s")
    got = Store(tmp_path / "s").read_headlines().set_index("id")["published_at"]
    whole = pd.Timestamp("2025-01-15 14:00", tz="UTC")
    assert got.to_dict() == {"1": whole, "2": whole, "3": whole + pd.Timedelta(milliseconds=123),
                             "4": whole + pd.Timedelta(milliseconds=500)}
    write(tmp_path / "bad.jsonl", line(1, "1736949600") + line(2, 12345) + line(3, True)
          + line(4, "2025-13-01T00:00:00Z"))
    with pytest.raises(DataError) as info:
        ingest_headlines(tmp_path / "bad.jsonl", tmp_path / "s2")
    text = str(info.value)
    assert ("rule 'published_at given as a text of digits: a text is a date-time (ISO 8601, "
            "e.g. 2025-01-15T14:30:00Z), and digits alone are none: an epoch count is given as "
            "a number (a JSON number, a Parquet integer)' broken in 1 row(s): row 1 "
            "('1736949600')") in text
    assert ("rule 'published_at given as a number: a number is a Unix epoch count: seconds "
            "from 1e9, milliseconds from 1e12, microseconds from 1e15, nanoseconds from 1e18 "
            "(each from 2001), before 2262' broken in 1 row(s): row 2 (12345)") in text
    assert ("rule 'published_at parses as a date-time of the years 1678-2261' broken in 2 "
            "row(s): row 3 (True), row 4 ('2025-13-01T00:00:00Z')") in text


def test_a_ticker_flag_that_is_no_ticker_is_refused(tmp_path):
    f = write(tmp_path / "one.csv", "ts,open,high,low,close,volume\n"
              "2025-01-15T14:29:00Z,1,1,1,1,1\n")
    for bad in ("A|B", "A B", ""):
        done = cli("data", "ingest", f, "--ticker", bad, "--out", tmp_path / "s")
        assert done.returncode == 2 and "--ticker: " in done.stderr, bad
    assert not (tmp_path / "s").exists()


def test_bars_without_the_premarket_minute_are_warned_of_at_ingest(tmp_path):
    """Bars from the open (09:30) on: no bar ends at 09:30, so every MORNING task has no
    reference price; the ingest says so, naming the rule and the fix."""
    rows = [(f"2025-01-{d}T{h}:{m:02d}:00-05:00", 101.0, 100.0) for d in (14, 15)
            for h, m in (("09", 30), ("09", 31), ("12", 29), ("15", 54))]
    rows.append(("2025-01-16T09:29:00-05:00", 101.0, 100.0))  # this day has it
    rows.append(("2025-01-16T09:31:00-05:00", 101.0, 100.0))
    f = write(tmp_path / "regular.csv", HEADER + bar_rows("ACME", rows))
    done = cli("data", "ingest", f, "--out", tmp_path / "s")
    assert done.returncode == 0, done.stderr
    assert ("warning: ACME: on 2 of 3 days no bar ends at 09:30 America/New_York (the bar that "
            "starts at 09:29, before the open; e.g. 2025-01-14): a task at 09:30 (the default "
            "MORNING horizon) on those days has no reference price") in done.stderr
    assert "ingest the bars with extended hours" in done.stderr
    done = ingest_files(tmp_path / "dry", bars=f, dry_run=True)  # a dry run says it too
    assert len(done["bars"]["warnings"]) == 1
