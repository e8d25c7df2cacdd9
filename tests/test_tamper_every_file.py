"""The audit finds every edit, whatever hash it was given: every file of a run directory and
of its store, each column kind of each table (and every column of the tasks and labels),
edited alone and again with its hash made again where one is kept (the run's manifest, the
store's, the report's receipt), so that only re-deriving it can find the edit. The event
track likewise. (tests/test_tamper.py names what each edit of a few is found as.)"""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from finbench.audit import audit_run
from finbench.reports.build import report
from finbench.runner import run
from finbench.tracks.events.store import EventStore, event_snapshot_hash
from tests.llm_server import ChatServer

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- one cell of a table changed, by the kind of its column --------------------------------
def kind_of(t: pa.DataType) -> str | None:
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    if pa.types.is_timestamp(t):
        return "time"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t):
        return "text"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return "list"
    return None


def changed(value, kind: str):
    """Another value of the same kind."""
    missing = value is None or (isinstance(value, float) and np.isnan(value))
    if kind == "bool":
        return not bool(value)
    if kind == "int":
        return 1 if missing else int(value) + 1
    if kind == "float":
        return 0.5 if missing else float(value) + 0.125
    if kind == "time":
        return (pd.Timestamp("2025-01-15 15:00", tz="UTC") if missing
                else pd.Timestamp(value) + pd.Timedelta(hours=1))
    if kind == "list":
        return ["ZZZ"] if missing or not len(value) else [*value, "ZZZ"]
    return "x" if missing else f"{value}~"


def edit_cell(path: Path, column: str, row: int | None = None) -> str:
    """Change the cell of ``column`` at ``row`` (the middle row by default) in the Parquet
    file ``path``, keeping the file's schema; what was done."""
    table = pq.read_table(path)
    kind = kind_of(table.schema.field(column).type)
    values = table.column(column).to_pylist()
    i = len(values) // 2 if row is None else row
    old = values[i]
    values[i] = new = changed(old, kind)
    field = table.schema.field(column)
    array = pa.array(values, type=field.type.value_type if pa.types.is_dictionary(field.type)
                     else field.type)
    table = table.set_column(table.schema.get_field_index(column), field, array)
    pq.write_table(table, path)
    return f"{path.name} row {i} {column}: {old!r} -> {new!r}"


def columns_by_kind(path: Path, *, every: bool = False) -> list[str]:
    """The first column of each kind of a table (every column with ``every``)."""
    schema = pq.read_schema(path)
    seen, out = set(), []
    for field in schema:
        kind = kind_of(field.type)
        if kind is not None and (every or kind not in seen):
            seen.add(kind)
            out.append(field.name)
    return out


def rehash(run_dir: Path, rel: str) -> None:
    """The run's manifest given the file's new hash (as an editor covering its tracks)."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["files"][rel] = sha(run_dir / rel)
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))


def found(run_dir: Path, rel: str, rehashed: bool) -> list[str]:
    """What the audit says of a run with ``rel`` edited. Edited alone, the file is found by
    its hash, the audit's first check (:func:`~finbench.audit.files.hash_problems`, which
    stops nothing after it): only that check is run, for speed. With its hash made again,
    the whole audit runs, and it must find the edit otherwise than by the hash."""
    from finbench.audit.files import hash_problems

    if not rehashed:
        manifest = json.loads((run_dir / "manifest.json").read_text())
        return [p for p in hash_problems(run_dir, manifest) if p.startswith(rel)]
    return [p for p in audit_run(run_dir)
            if not p.startswith(f"{rel}: content differs from the hash manifest.json")]


def caught(run_dir: Path, what: str, rel: str, rehashed: bool) -> None:
    assert found(run_dir, rel, rehashed), f"not found: {what}"


# -- the intraday run ------------------------------------------------------------------------
# baselines of short windows over a store of the sessions they read: each audit of the run
# (hundreds here) reads and checks a few partitions, not the sample's 160
SHORT_WINDOWS = "".join(
    f'[[models]]\nname = "{k}"\nkind = "{k}"\n' + ("window = 5\nmin_count = 2\n"
                                                 if k != "coin" and k != "class_uniform" else "")
    for k in ("coin", "base_rate", "momentum", "climatology", "class_uniform",
              "class_frequency"))


def small_store(sample_store: Path, base: Path) -> Path:
    """The sample's bars and headlines of 2025-01-02 to 2025-01-15, ingested into a store of
    their own (through the real ingest)."""
    import datetime as dt

    from finbench.data.ingest import ingest_files
    from finbench.data.store import Store

    sample = Store(sample_store)
    first, last = dt.date(2025, 1, 2), dt.date(2025, 1, 15)
    sample.read_bars(start=first, end=last).to_parquet(base / "bars.parquet", index=False)
    news = sample.read_headlines(start=first, end=last).drop(columns="available_at")
    news.to_parquet(base / "news.parquet", index=False)
    ingest_files(base / "store", bars=base / "bars.parquet", headlines=base / "news.parquet")
    return base / "store"

@pytest.fixture(scope="module")
def clean(tmp_path_factory, sample_store):
    base = tmp_path_factory.mktemp("every")
    store = small_store(sample_store, base)
    server = ChatServer()
    mp = pytest.MonkeyPatch()
    mp.setenv("FINBENCH_EVERY_KEY", "sk-every")
    mp.setenv("FINBENCH_CACHE_DIR", str(base / "cache"))
    (base / "replay.csv").write_text("task_id,p_up,lower,upper\n" + "".join(
        f"{t}|2025-01-{d}|{h},0.5{i % 9},-0.01,0.01\n" for i, (t, d, h) in enumerate(
            (t, d, h) for t in ("AAPL", "MSFT") for d in ("14", "15")
            for h in ("MORNING", "MIDDAY", "CLOSE"))))
    (base / "cfg.toml").write_text(f"""
[data]
store = "{store}"
[tasks]
tickers = ["AAPL", "MSFT"]
start = "2025-01-14"
end = "2025-01-15"
[tasks.classes]
band = 0.004
[scores]
rows_csv = true
{SHORT_WINDOWS}[[models]]
name = "scripted"
kind = "scripted"
answers = ['{{"p_up": 0.7, "lower": -0.01, "upper": 0.01}}', 'not json']
[[models]]
name = "replayed"
kind = "replay"
path = "replay.csv"
[[models]]
name = "llm"
kind = "openai"
model = "valid"
base_url = "{server.base_url}"
api_key_env = "FINBENCH_EVERY_KEY"
""")
    out = run(base / "cfg.toml", base / "clean", echo=lambda *_: None)
    server.close()
    assert audit_run(out) == []
    yield out, store
    mp.undo()


RUN_TABLES = ["tasks.parquet", "labels.parquet", "forecasts.parquet", "scores.parquet",
              "rows.parquet", "scores3.parquet", "rows3.parquet"]


@pytest.fixture
def copy(clean, tmp_path):
    run_dir, _ = clean
    target = tmp_path / "run"
    shutil.copytree(run_dir, target)
    return target


def missed_edits(run_dir: Path, tmp_path: Path, rel: str, rehashed: bool, *,
                 every: bool = False, row: int | None = None) -> list[str]:
    """The edits of the table ``rel`` of ``run_dir`` (one per column kind, or per column
    with ``every``), each on a copy of its own, that the audit does not find."""
    missed = []
    for column in columns_by_kind(run_dir / rel, every=every):
        target = tmp_path / f"run-{column}"
        shutil.copytree(run_dir, target)
        what = edit_cell(target / rel, column, row=row)
        if rehashed:
            rehash(target, rel)
        if not found(target, rel, rehashed):
            missed.append(what)
        shutil.rmtree(target)
    return missed


@pytest.mark.parametrize("rehashed", [False, True], ids=["alone", "rehashed"])
@pytest.mark.parametrize("name", RUN_TABLES)
def test_every_column_kind_of_every_run_table(clean, tmp_path, name, rehashed):
    every = name in ("tasks.parquet", "labels.parquet")
    assert missed_edits(clean[0], tmp_path, name, rehashed, every=every) == []


@pytest.mark.parametrize("rehashed", [False, True], ids=["alone", "rehashed"])
def test_every_column_kind_of_a_journal_part(clean, tmp_path, rehashed):
    part = sorted((clean[0] / "journal.parts").glob("*.parquet"))[1]
    assert missed_edits(clean[0], tmp_path, f"journal.parts/{part.name}", rehashed,
                        row=0) == []


@pytest.mark.parametrize("rehashed", [False, True], ids=["alone", "rehashed"])
@pytest.mark.parametrize("name", ["scores.csv", "rows.csv", "scores3.csv", "rows3.csv",
                                  "journal.jsonl"])
def test_every_text_file_of_a_run(copy, name, rehashed):
    lines = (copy / name).read_text().splitlines()
    i = len(lines) // 2
    lines[i] = lines[i].replace("0", "1", 1) if "0" in lines[i] else lines[i] + "x"
    (copy / name).write_text("\n".join(lines) + "\n")
    if rehashed:
        rehash(copy, name)
    caught(copy, f"{name} line {i + 1}", name, rehashed)


@pytest.mark.parametrize("column", ["messages", "response"])
def test_the_transcripts_of_a_call(copy, column):
    """Not hashed (SQLite's bytes vary): its messages are the prompt rendered again, its
    response the row's raw text."""
    from finbench.runlog.transcripts import Transcripts, pack

    entry = next(iter(Transcripts(copy).each_last("llm")))
    db = sqlite3.connect(copy / "transcripts.sqlite")
    zdict = db.execute("SELECT zdict FROM dictionary WHERE id = 1").fetchone()[0]
    value = entry[column]
    if column == "messages":
        value = [{**value[0], "content": value[0]["content"] + " (edited)"}, *value[1:]]
    else:  # what came back, as the body says it (the run reads the body)
        body = json.loads(json.dumps(value["body"]))
        body["choices"][0]["message"]["content"] = '{"p_up": 0.01}'
        value = {**value, "body": body}
    db.execute(f"UPDATE transcripts SET {column} = ? WHERE model = ? AND task_id = ?",
               (pack(value, zdict), "llm", entry["task_id"]))
    db.commit()
    db.close()
    assert audit_run(copy)


# -- the report ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def reported(clean, tmp_path_factory):
    run_dir, _ = clean
    target = tmp_path_factory.mktemp("reported") / "clean"
    shutil.copytree(run_dir, target)
    report(target)
    assert audit_run(target) == []
    return target


REPORT_FILES = ["tables/scores_aggregate.csv", "tables/scores_by_horizon.md",
                "tables/paired_brier.tex", "tables/scores_three_class.csv",
                "figures/reliability.png", "figures/kelly_wealth.pdf", "report.html"]


@pytest.mark.parametrize("rehashed", [False, True], ids=["alone", "rehashed"])
def test_every_kind_of_report_file(reported, tmp_path, rehashed):
    """Every kind edited in one copy, one audit: each file is compared on its own (with its
    receipt's hash, and with the report drawn again), so each edit is named, and only the
    edited files are (an edit that hid another, or named a file it did not touch, fails)."""
    target = tmp_path / "clean"
    shutil.copytree(reported, target)
    receipt = json.loads((target / "report.json").read_text())
    for rel in REPORT_FILES:
        data = (target / rel).read_bytes()
        at = len(data) // 2
        (target / rel).write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1:])
        if rehashed:
            receipt["files"][rel] = sha(target / rel)
    if rehashed:
        (target / "report.json").write_text(json.dumps(receipt, indent=2))
    problems = audit_run(target)
    assert all(p.startswith(tuple(REPORT_FILES)) for p in problems), problems
    for said in ("content differs from the hash", "not what the report draws"):
        named = {rel for rel in REPORT_FILES if any(p.startswith(rel) and said in p
                                                    for p in problems)}
        assert named == (set() if rehashed and "hash" in said else set(REPORT_FILES)), (
            said, problems)


def test_the_reports_receipt_and_a_stale_report(reported, tmp_path):
    target = tmp_path / "clean"
    shutil.copytree(reported, target)
    receipt = json.loads((target / "report.json").read_text())
    receipt["manifest_sha256"] = "0" * 64
    (target / "report.json").write_text(json.dumps(receipt))
    assert any("the report was made from another state of the run" in p
               for p in audit_run(target))
    (target / "report.json").unlink()
    assert any("without their receipt report.json" in p for p in audit_run(target))


# -- the store ---------------------------------------------------------------------------------
def _store_manifest(store: Path) -> dict:
    return json.loads((store / "manifest.json").read_text())


STORE_EDITS = [("bars/date=2025-01-15/part.parquet", c) for c in
               ("ticker", "ts", "high", "volume")] + [
    ("headlines/date=2025-01-15/part.parquet", c) for c in
    ("id", "published_at", "tickers", "headline")]


@pytest.mark.parametrize("cover", ["alone", "partition hash", "and snapshot"])
@pytest.mark.parametrize("rel,column", STORE_EDITS)
def test_every_column_kind_of_a_store_partition(clean, rel, column, cover):
    """The store is edited where the run's config finds it, and put back."""
    from finbench.data.store import Store, snapshot_hash

    run_dir, store = clean
    saved = {p: p.read_bytes() for p in (store / rel, store / "manifest.json")}
    try:
        edit_cell(store / rel, column)
        if cover != "alone":
            manifest = _store_manifest(store)
            manifest["partitions"][rel] = sha(store / rel)
            if cover == "and snapshot":
                manifest["snapshot_sha256"] = snapshot_hash(manifest["partitions"], manifest)
            (store / "manifest.json").write_text(json.dumps(manifest, indent=2))
        if cover == "and snapshot":  # only the run's own record can tell
            assert audit_run(run_dir), (rel, column, cover)
        else:  # the store's hashes tell (the audit re-hashes every partition the same way)
            assert Store(store).verify(), (rel, column, cover)
    finally:
        for path, data in saved.items():
            path.write_bytes(data)


@pytest.mark.parametrize("key,value", [("bar_seconds", 30), ("timezone", "Europe/London"),
                                       ("bar_timestamp", "end")])
def test_a_setting_of_the_stores_manifest(clean, key, value):
    run_dir, store = clean
    saved = (store / "manifest.json").read_bytes()
    try:
        manifest = _store_manifest(store)
        manifest[key] = value
        (store / "manifest.json").write_text(json.dumps(manifest, indent=2))
        assert audit_run(run_dir)
    finally:
        (store / "manifest.json").write_bytes(saved)


# -- the event track ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def events(tmp_path_factory):
    base = tmp_path_factory.mktemp("events")
    store = base / "store"
    shutil.copytree(ROOT / "data" / "events_sample" / "store", store)
    server = ChatServer()
    mp = pytest.MonkeyPatch()
    mp.setenv("FINBENCH_EVERY_KEY", "sk-every")
    mp.setenv("FINBENCH_CACHE_DIR", str(base / "cache"))
    text = (ROOT / "configs" / "pilot_events.toml").read_text().replace(
        'store = "../data/events_sample/store"', f'store = "{store}"').replace(
        'model = "gpt-4o-mini"', f'model = "event-a"\nbase_url = "{server.base_url}"\n'
        'api_key_env = "FINBENCH_EVERY_KEY"').replace('"../data/', f'"{ROOT}/data/')
    (base / "events.toml").write_text(text)
    out = run(base / "events.toml", base / "clean", echo=lambda *_: None)
    server.close()
    assert audit_run(out) == []
    yield out, store
    mp.undo()


EVENT_TABLES = ["tasks.parquet", "labels.parquet", "retrieval.parquet", "forecasts.parquet",
                "scores.parquet", "skill.parquet", "rows.parquet"]


@pytest.mark.parametrize("rehashed", [False, True], ids=["alone", "rehashed"])
@pytest.mark.parametrize("name", EVENT_TABLES)
def test_every_column_kind_of_every_event_table(events, tmp_path, name, rehashed):
    assert missed_edits(events[0], tmp_path, name, rehashed,
                        every=name == "tasks.parquet") == []


@pytest.mark.parametrize("rehashed", [False, True], ids=["alone", "rehashed"])
@pytest.mark.parametrize("name", ["scores.csv", "skill.csv", "rows.csv", "exclusions.csv",
                                  "market_gap.csv"])
def test_every_csv_of_an_event_run(events, tmp_path, name, rehashed):
    run_dir, _ = events
    target = tmp_path / "run"
    shutil.copytree(run_dir, target)
    lines = (target / name).read_text().splitlines()
    i = len(lines) // 2
    lines[i] = lines[i].replace("0", "1", 1) if "0" in lines[i] else lines[i] + "x"
    (target / name).write_text("\n".join(lines) + "\n")
    if rehashed:
        rehash(target, name)
    caught(target, f"{name} line {i + 1}", name, rehashed)


@pytest.mark.parametrize("cover", ["alone", "file hash", "and snapshot"])
@pytest.mark.parametrize("rel,column", [("markets.parquet", "question"),
                                        ("markets.parquet", "resolved_at"),
                                        ("prices.parquet", "price"),
                                        ("posts/date=2024-03-10/part.parquet", "text"),
                                        ("posts/date=2024-03-10/part.parquet", "created_utc")])
def test_every_kind_of_event_store_file(events, rel, column, cover):
    run_dir, store = events
    saved = {p: p.read_bytes() for p in (store / rel, store / "manifest.json")}
    try:
        edit_cell(store / rel, column)
        if cover != "alone":
            manifest = _store_manifest(store)
            manifest["files"][rel] = sha(store / rel)
            if cover == "and snapshot":
                manifest["snapshot_sha256"] = event_snapshot_hash(manifest["files"])
            (store / "manifest.json").write_text(json.dumps(manifest, indent=2))
        if cover == "and snapshot":  # only the run's own record can tell
            assert audit_run(run_dir), (rel, column, cover)
        else:  # the store's hashes tell (the audit checks the store the same way)
            assert EventStore(store).verify(), (rel, column, cover)
    finally:
        for path, data in saved.items():
            path.write_bytes(data)
