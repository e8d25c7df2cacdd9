"""Bad input gets a message naming the file, row or key and the rule, never a traceback and
never invented data; surprises are said, with counts. Through the CLI, as a user meets them."""

import json
import os
import re
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from finbench.core.errors import RunError
from finbench.tracks.intraday.labels import label_frame
from tests.helpers import (
    HEADER,
    bar_rows,
    cli,
    damaged_store,
    llm_toml,
    month_shards_config,
    store_files,
    write,
)

ROOT = Path(__file__).resolve().parents[1]
ENV_PATH = {"PYTHONPATH": str(ROOT)}


def finbench(*args, limit: int | None = None) -> subprocess.CompletedProcess:
    """The command as a user gives it, its exit code and what it printed: in this process
    (:func:`tests.helpers.cli`), or, under a file-size ``limit``, ``python -m finbench`` in a
    process of its own (the limit is the process's; its environment this one's)."""
    argv = [str(a) for a in args]
    if limit is None:
        return cli(*argv)

    def cap():  # a file-size limit: writes past it fail as on a full disk
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run([sys.executable, "-m", "finbench", *argv],
                          env={**os.environ, **ENV_PATH}, capture_output=True, text=True,
                          timeout=300, preexec_fn=cap)


def message(result: subprocess.CompletedProcess) -> str:
    """The one error line a failed command printed (no traceback), with the lines of notes
    after it: what stderr holds from that line on (progress comes before it)."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines(keepends=True)
    first = next((i for i, line in enumerate(lines)
                  if re.match(r"[A-Za-z]+(Error|Stopped): ", line)), 0)
    return "".join(lines[first:])


def pilot(tmp_path: Path, store: Path, **tasks) -> Path:
    spec = {"tickers": ["AAPL", "MSFT"], "start": "2025-01-15", "end": "2025-01-15", **tasks}
    lines = "\n".join(f"{k} = {json.dumps(v)}" for k, v in spec.items())
    return write(tmp_path / "cfg.toml", f'[data]\nstore = "{store}"\n[tasks]\n{lines}\n'
                 '[[models]]\nname = "coin"\nkind = "coin"\n[[models]]\nname = "base_rate"\n'
                 'kind = "base_rate"\n')


BARS = HEADER + bar_rows("AAPL", [("2025-01-15T14:30:00Z", 101.0, 100.0)])


def test_an_output_that_is_a_file_is_named(tmp_path, sample_store):
    f, taken = write(tmp_path / "bars.csv", BARS), write(tmp_path / "taken", "x")
    assert "StoreError: " + str(taken) + ": is a file, not a store directory" in message(
        finbench("data", "ingest", f, "--out", taken))
    assert f"RunError: {taken}: is a file, not a run directory" in message(
        finbench("run", pilot(tmp_path, sample_store), "--out", taken))


def test_an_unknown_calendar_is_named_as_a_config_key_and_nothing_is_made(tmp_path,
                                                                         sample_store):
    cfg = pilot(tmp_path, sample_store, calendar="XXXX")
    assert (f"ConfigError: {cfg}: key 'tasks.calendar': Value error, 'XXXX' is not an "
            "exchange-calendars calendar") in message(
        finbench("run", cfg, "--out", tmp_path / "r"))
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("tasks", "said"), [
    ('target = "4pm"', "key 'tasks.target': Value error, '4pm' is not a clock time"),
    ('horizons = {LATE = "25:00"}', "key 'tasks.horizons': Value error, horizon LATE: '25:00' "
                                    "is not a clock time HH:MM or HH:MM:SS"),
    ('horizons = {LATE = "16:00"}', "key 'tasks': Value error, horizons.LATE: 16:00 is not "
                                    "before the target 15:55"),
    ('target = "12:00"', "key 'tasks': Value error, horizons.MIDDAY: 12:30 is not before the "
                         "target 12:00"),
])
def test_clock_times_are_checked_as_config_keys_before_the_run_starts(tmp_path, sample_store,
                                                                     tasks, said):
    """These were CalendarErrors naming no file, raised once the run directory was made."""
    cfg = write(tmp_path / "cfg.toml", pilot(tmp_path, sample_store).read_text().replace(
        "[tasks]\n", f"[tasks]\n{tasks}\n"))
    assert f"ConfigError: {cfg}: {said}" in message(finbench("run", cfg, "--out",
                                                               tmp_path / "r"))
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("prefix", "said"), [
    (b"\xef\xbb\xbf", "starts with a byte-order mark (BOM), which TOML does not allow"),
    (b'# caf\xe9\n', "not valid TOML ('utf-8' codec can't decode byte 0xe9"),
    (b"[data\n", "not valid TOML (Expected ']'"),
])
def test_a_config_that_is_not_utf8_toml_is_named(tmp_path, sample_store, prefix, said):
    """A byte-order mark (as some editors save) was 'Invalid statement (at line 1, column
    1)', naming nothing the user could see."""
    cfg = tmp_path / "cfg.toml"
    cfg.write_bytes(prefix + pilot(tmp_path, sample_store).read_bytes())
    assert f"ConfigError: {cfg}: {said}" in message(finbench("run", cfg, "--out",
                                                               tmp_path / "r"))
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("manifest", "said"), [
    (None, "not a run's manifest (format 'finbench-store', not 'finbench-run')"),
    ("not json", "not valid JSON (Expecting value"),
    ("[1]", "not a run's manifest (format 'list', not 'finbench-run')"),
])
def test_a_folder_holding_another_manifest_is_no_run_to_resume(tmp_path, sample_store,
                                                              manifest, said):
    """A store given as --out was 'holds a run of a different config (?): (the run's config,
    which this FinBench cannot read) differ'; a manifest that is not JSON, a traceback."""
    import shutil

    out = tmp_path / "out"
    if manifest is None:
        shutil.copytree(sample_store, out)
    else:
        out.mkdir()
        (out / "manifest.json").write_text(manifest)
    def held():  # the lock file is the run's lock, taken before the folder is looked at
        return {p: p.read_bytes() for p in sorted(out.rglob("*"))
                if p.is_file() and p.name != ".finbench.lock"}

    before = held()
    assert f"RunError: {out / 'manifest.json'}: {said}" in message(
        finbench("run", pilot(tmp_path, sample_store), "--out", out))
    assert held() == before


def test_a_negative_seed_is_refused_where_it_is_given(tmp_path, sample_store):
    """numpy's generators take none: the sample's generator ended in "ValueError: expected
    non-negative integer", and a config's report seed let the run finish and then ended
    every report so."""
    for verb in ("synth", "synth-events"):
        got = finbench("data", verb, "--out", tmp_path / verb, "--seed", "-1")
        assert got.returncode == 2 and (f"finbench data {verb}: error: argument --seed: '-1' is "
                                        "not a whole number >= 0") in got.stderr
        assert not (tmp_path / verb).exists()
    cfg = write(tmp_path / "cfg.toml", pilot(tmp_path, sample_store).read_text()
                + "[report]\nseed = -5\n")
    assert (f"ConfigError: {cfg}: key 'report.seed': Input should be greater than or equal to "
            "0") in message(finbench("run", cfg, "--out", tmp_path / "r"))


@pytest.mark.parametrize("store", ["sample", "events_sample/store"])
@pytest.mark.parametrize(("written", "said"), [
    (b"{", "not valid JSON (Expecting property name"),
    (b"[1]", "not a store manifest (a JSON list, not an object)"),
    (b"\xff\xfe\x00", "not valid JSON"),
    ("snapshot_sha256", "snapshot_sha256 is 5, not a text: the manifest was changed or damaged"),
    ("synthetic", "synthetic is 5, not true or false"),
    ("files", "does not map each file to its SHA-256"),
])
def test_a_store_manifest_that_is_no_json_object_is_named(tmp_path, store, written, said):
    """A list ended `data validate` in AttributeError, an event store's damaged manifest a run
    in JSONDecodeError, and a field of another kind in a TypeError further on."""
    import shutil

    copy = tmp_path / "store"
    shutil.copytree(ROOT / "data" / store, copy)
    if isinstance(written, str):  # a field of the manifest changed to a number
        manifest = json.loads((copy / "manifest.json").read_text())
        field = "partitions" if written == "files" and "partitions" in manifest else written
        if written == "files":
            manifest[field] = {name: 5 for name in manifest[field]}
            said = f"{field} {said}"
        else:
            manifest[field] = 5
        written = json.dumps(manifest).encode()
    (copy / "manifest.json").write_bytes(written)
    assert f"StoreError: {copy / 'manifest.json'}: {said}" in message(
        finbench("data", "validate", copy))
    if store.startswith("events"):  # a run reads it as an event store
        cfg = write(tmp_path / "events.toml", f'track = "events"\n[data]\nstore = "{copy}"\n'
                    "[tasks]\nresolved_from = 2024-03-01\nresolved_to = 2024-06-30\n"
                    'cutoff = "lead"\nlead_hours = 72\n[[models]]\nname = "c"\n'
                    'kind = "constant"\np = 0.2\n')
        assert f"StoreError: {copy / 'manifest.json'}: {said}" in message(
            finbench("run", cfg, "--out", tmp_path / "r"))


def test_a_shard_that_is_not_two_dates_is_named(tmp_path, sample_store):
    assert "shard garbage:x is not START:END" in message(
        finbench("run", pilot(tmp_path, sample_store), "--out", tmp_path / "r", "--shard",
                 "garbage:x"))


@pytest.mark.parametrize("line, rule", [
    ('["not", "an", "object"]', "line 1: a JSON object per line (got list)"),
    ('{"id": 1, "published_at": "2025-01-15T14:00:00Z", "tickers": {"AAPL": 1}, '
     '"headline": "x", "source": "y"}', "tickers is a list of symbols or a ';'-joined text"),
    ('{"id": 1, "published_at": "2025-01-15T14:00:00Z", "tickers": ["AA\\nPL"], '
     '"headline": "x", "source": "y"}', "every ticker has no whitespace, control character"),
    # it would have stood twice in AAPL's context (and counted twice against max_headlines)
    ('{"id": 1, "published_at": "2025-01-15T14:00:00Z", "tickers": ["AAPL", "MSFT", "AAPL"], '
     '"headline": "x", "source": "y"}', "rule 'tickers lists each symbol once' broken in 1 "
                                        "row(s): row 1 (tickers=['AAPL', 'MSFT', 'AAPL'])"),
    ('{"id": 1, "published_at": "2025-01-15T14:00:00Z", "tickers": "AAPL;AAPL", '
     '"headline": "x", "source": "y"}', "tickers lists each symbol once"),
])
def test_headline_lines_that_break_a_rule_are_named_and_nothing_is_written(tmp_path, line, rule):
    f = write(tmp_path / "news.jsonl", line + "\n")
    assert rule in message(finbench("data", "ingest", "--headlines", f, "--out",
                                    tmp_path / "store"))
    assert store_files(tmp_path / "store") == {}


@pytest.mark.parametrize("ticker, price, rule", [
    ("AAPL", 1.7e308, "prices lie in [1e-12, 1e+12]"),
    ('"AA\nPL"', 100.0, "ticker has no whitespace, control character or '|'"),
    ('"AA\x00PL"', 100.0, "ticker has no whitespace, control character or '|'"),
    ("AA|PL", 100.0, "ticker has no whitespace, control character or '|'"),
])
def test_bars_that_would_make_labels_meaningless_are_refused(tmp_path, ticker, price, rule):
    """Prices of 1.7e308 made the mid overflow, and the labels r = NaN, y = 0, status ok; a
    newline, NUL or '|' (the task id's separator) in a ticker was accepted."""
    f = write(tmp_path / "bars.csv", HEADER + f"{ticker},2025-01-15T14:30:00Z,{price},{price},"
              f"{price},{price},100\n")
    assert rule in message(finbench("data", "ingest", f, "--out", tmp_path / "store"))
    assert store_files(tmp_path / "store") == {}


NEWS = ('{"id": 1, "published_at": "2025-01-15T14:00:00Z", "tickers": ["AAPL"], '
        '"headline": "x", "source": "y"}\n')


def test_bars_and_headlines_given_together_are_ingested_all_or_nothing(tmp_path, sample_copy):
    """The headlines were written first: bars that then broke a rule left them in the store,
    a new store was made for 60-second bars whatever --bar-seconds said (so five-minute
    bars with --headlines never went in), and a bars file given with --markets or --prices
    was ingested before the command was refused."""
    news = write(tmp_path / "news.jsonl", NEWS)
    five = write(tmp_path / "bars5.csv", HEADER + bar_rows("AAPL", [
        ("2025-01-15T14:30:00Z", 101.0, 100.0), ("2025-01-15T14:35:00Z", 102.0, 101.0)]))
    broken = write(tmp_path / "broken.csv", HEADER + "AAPL,2025-01-15T14:30:00Z,1,2,3,4,x\n")
    new = tmp_path / "new"
    assert "volume" in message(finbench("data", "ingest", broken, "--headlines", news,
                                        "--out", new))
    assert store_files(new) == {}
    before = store_files(sample_copy)
    message(finbench("data", "ingest", broken, "--headlines", news, "--out", sample_copy))
    assert store_files(sample_copy) == before
    assert "store holds 60-second bars, not 300" in message(finbench(
        "data", "ingest", five, "--headlines", news, "--bar-seconds", 300, "--out", sample_copy))
    assert store_files(sample_copy) == before
    for other in ("--markets", "--prices"):
        said = message(finbench("data", "ingest", five, other, news, "--out", tmp_path / "ev"))
        assert "an event store takes" in said or "--prices goes with --markets" in said
        assert store_files(tmp_path / "ev") == {}
    done = finbench("data", "ingest", five, "--headlines", news, "--bar-seconds", 300,
                    "--out", new)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == [
        f"ingested 1 headlines into {new}", f"ingested 2 bars of AAPL into {new} (1 date "
                                            "partition(s))"]
    manifest = json.loads((new / "manifest.json").read_text())
    assert manifest["bar_seconds"] == 300


def test_a_label_is_never_ok_without_a_finite_return():
    with pytest.raises(ValueError, match=r"task T\|2025-01-15\|H: reference price 1e-300 and "
                       r"target price 1e\+300 give no finite log return"):
        label_frame(pd.Series(["T|2025-01-15|H"]).to_numpy(object),
                    pd.Series(pd.to_datetime(["2025-01-15 20:55"], utc=True)),
                    pd.Series([1e-300]).to_numpy(), pd.Series([1e300]).to_numpy(),
                    pd.Series([0]).to_numpy(), pd.Series([0]).to_numpy(), [True])


def test_ingest_says_what_it_replaces_and_dry_run_writes_nothing(tmp_path, sample_copy):
    """One AAPL bar for a day replaced the 502 stored ones without a word."""
    f = write(tmp_path / "bars.csv", BARS)
    before = store_files(sample_copy)
    stored = len(pd.read_parquet(sample_copy / "bars/date=2025-01-15/part.parquet")
                 .query("ticker == 'AAPL'"))
    dry = finbench("data", "ingest", f, "--out", sample_copy, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"would replace AAPL on 2025-01-15: {stored} stored bar(s) by 1" in dry.stdout
    assert "dry run: nothing was written" in dry.stdout
    assert store_files(sample_copy) == before
    done = finbench("data", "ingest", f, "--out", sample_copy)
    assert f"replaced AAPL on 2025-01-15: {stored} stored bar(s) by 1" in done.stdout


def test_runs_with_nothing_to_score_fail_and_partial_ones_warn_with_counts(tmp_path,
                                                                          sample_store):
    weekend = pilot(tmp_path, sample_store, start="2025-01-18", end="2025-01-19")
    said = message(finbench("run", weekend, "--out", tmp_path / "a"))
    assert said.startswith("RunError: no tasks: 2025-01-18..2025-01-19 gives none: the exchange "
                           "XNYS holds no session") and said.count("\n") == 1  # nothing else
    late = pilot(tmp_path, sample_store, target="16:30")
    assert "every session is left out (early_close: 6 tasks; the target 16:30 is at or after " \
           "the close)" in message(finbench("run", late, "--out", tmp_path / "b"))
    future = pilot(tmp_path, sample_store, start="2026-03-02", end="2026-03-03")
    said = message(finbench("run", future, "--out", tmp_path / "c"))
    assert "nothing can be scored: all 12 tasks are unscorable" in said
    assert "2 session(s) lie outside the store's dates 2024-09-20..2025-01-15" in said
    unknown = pilot(tmp_path, sample_store, tickers=["AAPL", "ZZZZ"])
    result = finbench("run", unknown, "--out", tmp_path / "d")
    assert result.returncode == 0, result.stderr
    assert "warning: ZZZZ: no scorable task on these dates" in result.stderr  # a message
    assert "3 tasks unscorable" in result.stderr and "warning" not in result.stdout


def test_a_torn_run_file_is_named_by_every_command(tmp_path, sample_store):
    out = tmp_path / "run"
    assert finbench("run", pilot(tmp_path, sample_store), "--out", out).returncode == 0
    data = (out / "labels.parquet").read_bytes()
    (out / "labels.parquet").write_bytes(data[: len(data) // 2])
    for command in ("score", "audit", "report"):
        assert f"{out / 'labels.parquet'}: cannot be read" in message(finbench(command, out))


@pytest.mark.slow
@pytest.mark.parametrize("limit", [3_000, 5_800, 12_000, 15_000])  # bytes: the run's
# files are 2-20 kB, so each level fails at another file (manifest, labels, journal, scores)
def test_a_full_disk_is_one_line_naming_the_file_and_leaves_no_torn_file(tmp_path,
                                                                         sample_store, limit):
    """A full disk gave OSError 28 tracebacks and left a torn scores.parquet in a folder that
    looked finished. Here every write past ``limit`` bytes fails as on a full disk."""
    out = tmp_path / "run"
    result = finbench("run", pilot(tmp_path, sample_store), "--out", out, limit=limit)
    said = message(result)
    assert said.startswith("DiskFullError: ") and said.count("\n") == 1
    assert "cannot be written: file too large (a file-size limit)" in said
    assert not list(out.rglob("*.tmp"))
    for path in out.glob("*.parquet"):
        pq.read_metadata(path)  # whatever is there is whole
    if (out / "scores.parquet").exists():
        assert pq.read_table(out / "scores.parquet").num_rows > 0
    again = finbench("run", pilot(tmp_path, sample_store), "--out", out)  # room again
    assert again.returncode == 0, again.stderr
    assert finbench("audit", out).returncode == 0


def llm_pilot(tmp_path: Path, store: Path, base_url: str) -> Path:
    """Three tickers over three sessions with a language model: 27 calls, transcripts and
    all."""
    return write(tmp_path / "llm.toml", f'[data]\nstore = "{store}"\n[tasks]\ntickers = '
                 '["AAPL", "MSFT", "NVDA"]\nstart = "2025-01-13"\nend = "2025-01-15"\n'
                 '[[models]]\nname = "coin"\nkind = "coin"\n' + llm_toml(base_url))


@pytest.mark.slow
@pytest.mark.parametrize("limit", [40_000, 60_000, 100_000, 150_000, 200_000])  # bytes: the
# transcripts file and its write-ahead log pass each at another call
def test_a_full_disk_while_transcripts_are_written_is_the_same_one_line(
        tmp_path, sample_store, server, monkeypatch, limit):
    """SQLite says "disk I/O error" when its log passes a file-size limit (or fills a disk):
    it was a raw sqlite3.OperationalError traceback. The run now ends as every other write
    does, and the same command with room resumes it to the run made without a limit."""
    monkeypatch.setenv("FINBENCH_TEST_KEY", "sk-test")
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))
    cfg = llm_pilot(tmp_path, sample_store, server.base_url)
    out = tmp_path / "run"
    said = message(finbench("run", cfg, "--out", out, limit=limit))
    assert said.startswith(f"DiskFullError: {out / 'transcripts.sqlite'}: cannot be written: "
                           "file too large (a file-size limit)") and said.count("\n") == 1
    assert not list(out.rglob("*.tmp"))
    again = finbench("run", cfg, "--out", out)  # room again
    assert again.returncode == 0, again.stderr
    assert finbench("audit", out).returncode == 0
    whole = tmp_path / "whole"
    assert finbench("run", cfg, "--out", whole).returncode == 0
    got, want = (pd.read_parquet(d / "forecasts.parquet").drop(columns=["latency", "detail"])
                 for d in (out, whole))
    pd.testing.assert_frame_equal(got, want)
    for name in ("scores.parquet", "rows.parquet", "labels.parquet"):
        assert (out / name).read_bytes() == (whole / name).read_bytes(), name
    assert not (out / "transcripts.sqlite-wal").exists()  # truncated and closed


def test_the_transcripts_log_stays_small_and_is_gone_when_the_run_ends(tmp_path, sample_store,
                                                                       server, monkeypatch):
    """The write-ahead log of transcripts.sqlite grew to SQLite's default checkpoint of 1000
    pages (4 MB) beside a database of a few dozen kB; it is checkpointed every 64 pages,
    kept under 1 MiB, and truncated when the run closes the file."""
    from finbench.runlog.transcripts import CHECKPOINT_PAGES, WAL_BYTES, Transcripts

    monkeypatch.setenv("FINBENCH_TEST_KEY", "sk-test")
    monkeypatch.setenv("FINBENCH_CACHE_DIR", str(tmp_path / "cache"))
    transcripts = Transcripts(tmp_path)
    largest = 0
    for i in range(400):  # 400 calls of 4 kB each, one transaction each
        transcripts.put([{"model": "m", "task_id": f"T|2025-01-15|{i}", "attempt": 1,
                          "input_sha256": "0" * 64,
                          "messages": [{"role": "user", "content": os.urandom(2048).hex()}],
                          "response": {"i": i}}])
        largest = max(largest, (tmp_path / "transcripts.sqlite-wal").stat().st_size)
    assert largest <= (CHECKPOINT_PAGES + 8) * 4096 < WAL_BYTES
    transcripts.close()
    wal = tmp_path / "transcripts.sqlite-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    assert len(list(Transcripts(tmp_path).each_last("m"))) == 400


def test_a_copy_over_another_store_is_refused_before_anything_is_copied(tmp_path):
    """`finbench data copy` into a folder holding files the source lacks would mix two stores
    (a partition of one beside the other's manifest): refused, naming them, the folder left as
    it was. A copy again over its own copy (an interrupted copy resumed) goes through."""
    target = tmp_path / "store"
    first = finbench("data", "copy", ROOT / "data" / "sample", target)
    assert first.returncode == 0 and "copied 161 files" in first.stdout, first.stderr
    assert finbench("data", "copy", ROOT / "data" / "sample", target).returncode == 0
    before = store_files(target)
    done = finbench("data", "copy", ROOT / "data" / "events_sample" / "store", target)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"LocationError: {target}: holds 160 file(s) that " in done.stderr
    assert "(bars/date=2024-09-20/part.parquet, " in done.stderr
    assert store_files(target) == before


def test_a_copy_into_itself_or_a_bucket_not_named_is_refused(tmp_path):
    """A folder copied onto itself, or into a folder inside it (whose files the next copy
    would carry along), and a URI naming no bucket: one line each, nothing written."""
    source = tmp_path / "store"
    assert finbench("data", "copy", ROOT / "data" / "sample", source).returncode == 0
    before = store_files(source)
    for target in (source, source / ".." / "store", source / "inside"):
        assert (f"LocationError: {target}: is {source} or inside it; copy to a folder of its "
                "own") in message(finbench("data", "copy", source, target))
    assert "LocationError: s3://: names no bucket; a store or run lives in a folder of one" in \
        message(finbench("data", "copy", source, "s3://"))
    assert store_files(source) == before


def test_a_damaged_partition_stops_a_run_naming_it(tmp_path):
    store, rel = damaged_store(tmp_path)
    cfg = month_shards_config(tmp_path / "cfg.toml", store)
    done = finbench("run", cfg, "--out", tmp_path / "run")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"StoreError: {store / rel}: cannot be read (" in done.stderr
    assert f"`finbench data validate {store}` names every partition" in done.stderr
    checked = finbench("data", "validate", store)
    assert checked.returncode != 0 and f"{rel}: content hash" in checked.stdout + checked.stderr


def _as_from_a_shell() -> None:
    """In the child before it runs: SIGINT at its default and not blocked, as a shell starts a
    command in the foreground. The suite may run with SIGINT ignored (started in the
    background: `nohup`, or `make test &` from a script, which starts commands so); a child
    inherits that, Python then keeps SIGINT ignored, and the run went on to its end."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_is_said_in_a_line_and_the_run_goes_on_when_given_again(tmp_path, server,
                                                                      llm_env):
    """SIGINT (Ctrl-C) while a run makes its forecasts (a language model answering, each
    answer 20 ms late, so the run is still at it when the signal comes): exit 130 with one
    line, no traceback; the same command then finishes the run, whose scores are those of a
    run never stopped."""
    import time

    server.delay = 0.02
    cfg = month_shards_config(
        tmp_path / "cfg.toml", ROOT / "data" / "sample",
        llm_toml(server.base_url, "concurrency = 4\n"))
    started = subprocess.Popen([sys.executable, "-m", "finbench", "run", str(cfg), "--out",
                                str(tmp_path / "run")], env={**os.environ, **ENV_PATH},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=_as_from_a_shell)
    deadline = time.monotonic() + 120
    while server.total < 5 and started.poll() is None:  # the model has begun answering
        assert time.monotonic() < deadline
        time.sleep(0.01)
    started.send_signal(signal.SIGINT)
    out, err = started.communicate(timeout=120)
    server.delay = 0
    assert started.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().endswith("finbench run: interrupted; what it finished is kept "
                                "(`finbench run` and `finbench data fetch`, given again, go on "
                                "from there)")
    assert finbench("run", cfg, "--out", tmp_path / "run").returncode == 0
    assert finbench("run", cfg, "--out", tmp_path / "whole").returncode == 0
    assert (tmp_path / "run" / "scores.csv").read_bytes() == (
        tmp_path / "whole" / "scores.csv").read_bytes()


def test_a_reader_that_stops_reading_ends_the_command_as_sigpipe_would(tmp_path):
    """`finbench tasks CONFIG | head -0`: stdout's reader has gone before the command writes.
    It ends as a command killed by SIGPIPE (exit 141), without a traceback, its files
    written."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "finbench", "tasks",
                               str(ROOT / "configs" / "pilot.toml"), "--out", str(tmp_path)],
                              stdout=write_end, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, **ENV_PATH}, timeout=300)
    finally:
        os.close(write_end)
    assert done.returncode == 128 + signal.SIGPIPE, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert (tmp_path / "tasks.parquet").is_file() and (tmp_path / "labels.parquet").is_file()


def test_a_broken_pipe_other_than_stdout_is_an_error(tmp_path, monkeypatch):
    """A pipe to another process that broke (stdout still open) is not taken for a reader of
    stdout gone: it is raised."""
    import finbench.cli

    def fails(args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(finbench.cli, "_score", fails)
    with open(tmp_path / "stdout.txt", "w") as stdout:
        monkeypatch.setattr(sys, "stdout", stdout)
        with pytest.raises(BrokenPipeError):
            finbench.cli.main(["score", str(tmp_path)])


@pytest.mark.parametrize(("raised", "first"), [
    (lambda: RunError("/x: the run failed"), "RunError: /x: the run failed"),
    (KeyboardInterrupt, "finbench run: interrupted; what it finished is kept (`finbench run` and "
                        "`finbench data fetch`, given again, go on from there)"),
])
def test_what_else_failed_while_a_command_stopped_is_said_after_its_line(
        tmp_path, monkeypatch, raised, first):
    """An error can carry notes of what else failed while the command stopped (the last
    upload of a run in a bucket, a journal part): each is a line of its own after the error's
    line, not dropped."""
    import finbench.cli

    def fails(args):
        error = raised()
        error.add_note("and the last upload to s3://b/runs/x failed too: no route to host")
        raise error

    monkeypatch.setattr(finbench.cli, "_run", fails)
    done = cli("run", tmp_path / "cfg.toml")
    assert done.returncode == (2 if first.startswith("RunError") else 130)
    assert done.stderr == (f"{first}\n  and the last upload to s3://b/runs/x failed too: no "
                           "route to host\n")
