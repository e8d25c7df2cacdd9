"""The store's check beside other work (finbench.data.store_check): a helper process says what
Store.verify says in this process, problems, progress and errors alike, and the audit's
verdict does not depend on which checked the store."""

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import finbench.data.store_check as store_check
from finbench.audit import audit_run
from finbench.core.errors import RunError, StoreError
from finbench.data.store import Store, sha256_file, snapshot_hash
from finbench.data.store_check import StoreCheck
from finbench.runner import run
from tests.helpers import aapl_config, baselines_toml


def damaged(store_path, *, readable=False):
    """The sample store with a partition's bytes changed (its footer broken, or with
    ``readable`` a price changed) and another's rows out of order (re-listed, so its hash
    holds)."""
    store = Store(store_path)
    bars = sorted(r for r in store.manifest["partitions"] if r.startswith("bars/"))
    tampered = store.path / bars[-2]
    if readable:
        table = pq.read_table(tampered)
        high = table.column("high").to_pylist()
        high[5] += 0.5
        pq.write_table(table.set_column(table.schema.get_field_index("high"), "high",
                                        pa.array(high)), tampered)
    else:
        tampered.write_bytes(tampered.read_bytes()[:-3] + b"xyz")
    table = pq.read_table(store.path / bars[3])
    pq.write_table(table.take([1, 0, *range(2, table.num_rows)]), store.path / bars[3])
    store.manifest["partitions"][bars[3]] = sha256_file(store.path / bars[3])
    store.manifest["snapshot_sha256"] = snapshot_hash(store.manifest["partitions"],
                                                      store.manifest)
    store.save_manifest()
    return bars


def progress(lines):
    return [line.split(",")[0] for line in lines]


@pytest.mark.parametrize("store_state", ["clean", "damaged"])
def test_a_helper_process_says_what_the_check_in_this_process_says(sample_copy, store_state):
    if store_state == "damaged":
        bars = damaged(sample_copy)
    here, there = [], []
    want = Store(sample_copy).verify(echo=here.append)
    if store_state == "damaged":
        assert [p.split(":")[0] for p in want] == [bars[-2], bars[3]]  # hashes, then rules
    with StoreCheck(Store(sample_copy), there.append, helper_bytes=0) as check:
        assert check.helped
        assert check.problems() == want
    assert progress(there) == progress(here) == [
        f"store: {len(Store(sample_copy).manifest['partitions'])}/"
        f"{len(Store(sample_copy).manifest['partitions'])} partitions hashed and checked"]


def test_a_small_store_is_checked_in_this_process_when_asked(sample_copy, monkeypatch):
    calls = []
    real = Store.verify
    monkeypatch.setattr(Store, "verify", lambda self, echo=None: calls.append(1) or real(self))
    check = StoreCheck(Store(sample_copy))  # the sample: far below HELPER_BYTES
    assert not check.helped and calls == []
    assert check.problems() == [] and calls == [1]


def test_the_helpers_error_is_raised_here_with_its_class_and_words(sample_copy):
    """A manifest broken after the store was opened here: the helper's StoreError is raised
    in this process, with the words Store() gives in this process."""
    store = Store(sample_copy)
    (sample_copy / "manifest.json").write_text("{not json")
    with pytest.raises(StoreError) as here:
        Store(sample_copy)
    with StoreCheck(store, helper_bytes=0) as check, pytest.raises(StoreError) as there:
        check.problems()
    assert str(there.value) == str(here.value)


def test_a_helper_that_ends_without_an_answer_is_an_error_and_close_ends_a_running_one(
        sample_copy, monkeypatch):
    monkeypatch.setattr(store_check, "_CHILD", "import sys; sys.exit(3)")
    with StoreCheck(Store(sample_copy), helper_bytes=0) as check, pytest.raises(
            Exception, match=r"ended without an answer \(exit code 3\)"):
        check.problems()
    monkeypatch.setattr(store_check, "_CHILD", "import time; time.sleep(60)")
    with StoreCheck(Store(sample_copy), helper_bytes=0) as check:
        process = check.process
        # Ctrl-C at a terminal signals its foreground process group: not the helper's
        assert os.getpgid(process.pid) != os.getpgid(0)
    assert process.poll() is not None  # leaving the block ended it


def test_an_error_class_the_project_does_not_have_keeps_its_name(sample_copy, monkeypatch):
    assert store_check._error_class("StoreError") is StoreError
    assert store_check._error_class("NoSuchError").__name__ == "RunError"
    monkeypatch.setattr(store_check, "_CHILD", 'print("error\\t" + \'["OSError", "disk gone"]\')')
    with StoreCheck(Store(sample_copy), helper_bytes=0) as check, pytest.raises(
            RunError, match=r"^OSError: disk gone$"):
        check.problems()


def test_the_audit_says_the_same_whichever_process_checks_the_store(tmp_path, sample_copy,
                                                                    monkeypatch):
    """A run over a store changed after it ran (a price, rows reordered): the audit's
    problems are the same, in the same order, with the store checked here or by a helper
    process; the store's come first, then what the changed price changes."""
    cfg = aapl_config(tmp_path / "cfg.toml", sample_copy, baselines_toml("coin", "momentum"),
                      start="2024-12-02", end="2025-01-15")
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    bars = damaged(sample_copy, readable=True)
    said = {}
    for least in (1 << 40, 0):
        monkeypatch.setattr(store_check, "HELPER_BYTES", least)
        lines = []
        said[least] = audit_run(out, echo=lines.append)
        assert progress(lines)[-1].startswith("store: ") or least == 0
    assert said[0] == said[1 << 40]
    store = [p for p in said[0] if p.startswith("store: ")]
    assert "snapshot" in said[0][0]  # the manifest was re-listed: another snapshot
    assert said[0][1:1 + len(store)] == store
    assert [p.split(":")[1].strip() for p in store] == [bars[-2], bars[3]]
    # the reordered partition is in the run's range: nothing is derived again from it
    assert said[0][1 + len(store):] == [
        "labels, answers and receipts not derived again: the store's data could not be read "
        "(ValueError: bars must be sorted by ticker then ts, one bar per (ticker, ts))"]


def test_an_audit_over_a_store_that_cannot_be_read_names_the_store_s_problems(
        tmp_path, sample_copy):
    """A partition in the run's range damaged after the run: the audit says which, from the
    store check, where it stopped on the label pass's StoreError before."""
    cfg = aapl_config(tmp_path / "cfg.toml", sample_copy, baselines_toml("coin"),
                      start="2024-12-02", end="2025-01-15")
    out = run(cfg, tmp_path / "run", echo=lambda *_: None)
    store = Store(sample_copy)
    rel = "bars/date=2024-12-10/part.parquet"
    data = (store.path / rel).read_bytes()
    (store.path / rel).write_bytes(data[:len(data) // 2] + data[len(data) // 2 + 10:])
    problems = audit_run(out)
    assert problems[0].startswith(f"store: {rel}: content hash ")
    assert problems[-1].startswith("labels, answers and receipts not derived again: the "
                                   f"store's data could not be read (StoreError: {store.path / rel}")


def test_a_run_reads_the_partitions_its_snapshot_lists_and_no_file_it_does_not(
        tmp_path, sample_copy):
    """A bars file the store's manifest does not list (left by an ingest killed before it
    saved the manifest, or put there by hand) is no part of the snapshot: a run reads the
    same as without it, whichever way it reads the bars, and the audit names the file."""
    import json
    import shutil

    import pandas as pd

    from tests.helpers import month_shards_config

    manifest = json.loads((sample_copy / "manifest.json").read_text())
    rel = "bars/date=2024-12-16/part.parquet"
    del manifest["partitions"][rel]
    manifest["snapshot_sha256"] = snapshot_hash(manifest["partitions"], manifest)
    (sample_copy / "manifest.json").write_text(json.dumps(manifest))
    without = tmp_path / "store_without"
    shutil.copytree(sample_copy, without)
    (without / rel).unlink()
    runs = {}
    for name, store in (("unlisted", sample_copy), ("without", without)):
        runs[name] = run(month_shards_config(tmp_path / f"{name}.toml", store),
                         tmp_path / name, echo=lambda *_: None)
    for name in ("labels.parquet", "scores.csv", "rows.parquet"):
        assert (runs["unlisted"] / name).read_bytes() == (runs["without"] / name).read_bytes()
    labels = pd.read_parquet(runs["unlisted"] / "labels.parquet")
    assert (labels.loc[labels["task_id"].str.contains("2024-12-16"), "status"] != "ok").all()
    assert audit_run(runs["without"]) == []
    assert audit_run(runs["unlisted"]) == [f"store: {rel}: file is not listed in the manifest"]
