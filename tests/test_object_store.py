"""Stores and run directories on object storage, against a loopback S3-compatible server
(moto in server mode on 127.0.0.1, started by the test), credentials from the environment
only: the store is read in place, a run's folder is kept mirrored there, a shard retried on
another worker resumes from what reached the bucket, and the results equal the local run's."""

import json
import logging
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.fs as pafs
import pytest

from finbench.audit import audit_run
from finbench.cli import main
from finbench.core.errors import RunError, StoreError
from finbench.core.location import files_under, filesystem, read_file
from finbench.data.store import Store
from finbench.runlog.mirror import local_copy
from finbench.runner import run
from tests.helpers import damaged_store, llm_toml, month_shards_config

pytest.importorskip("moto")
BUCKET = "finbench-test"
IN_BUCKET = 20  # answers a shard's journal holds in the bucket when its worker is killed
REQUESTS: list[tuple[str, str]] = []  # (method, path) of every request the server answered


@pytest.fixture(scope="module")
def s3_server():
    """moto's S3 service alone, served on a loopback port. (moto's ``ThreadedMotoServer``
    serves every AWS service and finds each request's among them anew, listing its modules
    and matching its URL patterns: about as much CPU as the S3 call itself, in this process.)"""
    from moto.moto_server.threaded_moto_server import MotoRequestHandler
    from moto.server import create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request
    app = create_backend_app("s3")

    def counted(environ, start_response):  # each request's method and path, for the tests
        REQUESTS.append((environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")))
        return app(environ, start_response)

    server = make_server("127.0.0.1", 0, counted, threaded=True,
                         request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    yield f"http://{host}:{port}"
    server.shutdown()
    thread.join()


@pytest.fixture
def s3(s3_server, monkeypatch):
    """A fresh bucket; the credentials and endpoint only in the environment (which worker
    processes started by the test inherit)."""
    for key, value in {"AWS_ACCESS_KEY_ID": "finbench", "AWS_SECRET_ACCESS_KEY": "test-only",
                       "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
                       "AWS_ENDPOINT_URL": s3_server, "AWS_EC2_METADATA_DISABLED": "true"
                       }.items():
        monkeypatch.setenv(key, value)
    admin = pafs.S3FileSystem(endpoint_override=s3_server, scheme="http",
                              allow_bucket_creation=True, allow_bucket_deletion=True)
    if admin.get_file_info(BUCKET).type != pafs.FileType.NotFound:
        admin.delete_dir(BUCKET)
    admin.create_dir(BUCKET)
    return f"s3://{BUCKET}"


@pytest.fixture
def s3_store(s3, sample_store, capsys):
    """The sample store uploaded with `finbench data copy`."""
    assert main(["data", "copy", str(sample_store), f"{s3}/store"]) == 0
    said = capsys.readouterr().out
    assert f"store snapshot {Store(sample_store).snapshot_sha256}" in said
    return f"{s3}/store"


def config(tmp_path, store, extra="", name="cfg.toml"):
    return month_shards_config(tmp_path / name, store, extra)


def test_a_store_on_object_storage_reads_as_its_local_copy(s3_store, sample_store):
    remote, local = Store(s3_store), Store(sample_store)
    assert remote.remote and remote.snapshot_sha256 == local.snapshot_sha256
    day = local.dates("bars")[3]
    a, b = remote.read_day_arrays(day), local.read_day_arrays(day)
    assert np.array_equal(a.ts, b.ts) and np.array_equal(a.high, b.high)
    assert a.bounds == b.bounds
    pd.testing.assert_frame_equal(remote.read_headlines(), local.read_headlines())
    assert remote.verify() == []
    with pytest.raises(StoreError, match="read in place, never changed there"):
        remote.save_manifest()
    with pytest.raises(StoreError, match="written on a local disk"):
        Store.open_or_create(f"{s3_store}-new")


def test_a_copy_laid_out_by_ticker_is_read_and_checked_in_a_bucket(tmp_path, s3,
                                                                    sample_store, capsys):
    # written locally, uploaded, then run over in place: the same rows as on the store
    assert main(["data", "copy", str(sample_store), str(tmp_path / "copy"),
                 "--layout", "ticker"]) == 0
    assert main(["data", "copy", str(tmp_path / "copy"), f"{s3}/copy"]) == 0
    remote, local = Store(f"{s3}/copy"), Store(tmp_path / "copy")
    assert remote.remote and remote.layout == "ticker"
    assert remote.snapshot_sha256 == local.snapshot_sha256
    assert remote.verify() == []
    del REQUESTS[:]
    on_copy = run(config(tmp_path, f"{s3}/copy", name="copy.toml"), tmp_path / "on_copy",
                  echo=lambda *_: None)
    gets = [path for method, path in REQUESTS if method == "GET" and "/bars/ticker=" in path]
    assert len(gets) == len(set(gets)) == 9  # three tickers' files of three quarters, once
    on_store = run(config(tmp_path, sample_store, name="store.toml"), tmp_path / "on_store",
                   echo=lambda *_: None)
    for name in ("rows.parquet", "scores.parquet"):
        assert (on_copy / name).read_bytes() == (on_store / name).read_bytes()
    with pytest.raises(StoreError, match="read-only copy"):
        remote.add_bars(local.read_bars().head(1), sources=[])
    capsys.readouterr()
    assert main(["data", "copy", str(sample_store), f"{s3}/other", "--layout", "ticker"]) == 2
    assert "written on a local disk; write the copy there" in capsys.readouterr().err


def test_a_run_fetches_each_partition_it_reads_in_one_request(tmp_path, s3_store,
                                                             sample_store):
    """Read by path, each column chunk of each row group of a partition was a request of its
    own, and each day without a partition was asked for (a HEAD and a listing): round trips a
    run over a bucket pays one after the other. A partition read is now its size's HEAD and
    one GET of it whole; a day the manifest lists no partition for is never asked for."""
    del REQUESTS[:]
    run(config(tmp_path, s3_store), tmp_path / "out", echo=lambda *_: None)
    bars = [(method, path) for method, path in REQUESTS if "/bars/date=" in path]
    gets = [path for method, path in bars if method == "GET"]
    assert len(gets) == len(set(gets)) > 20  # each partition read once, in one request
    assert sorted(path for method, path in bars if method == "HEAD") == sorted(gets)
    assert len(bars) == 2 * len(gets)  # nothing else asked of them
    assert not [p for m, p in REQUESTS if m == "GET" and p.rstrip("/").endswith(BUCKET)]  # lists


def test_a_store_in_a_bucket_is_read_ahead_by_several_threads(s3_store, sample_store):
    """A read from object storage is mostly a round trip's wait: several are made at once
    (benchmarks/bench_object_store.py measures it with answers made late); from local disk
    one thread reads, as the label pass needs the other core. Either way the same tables."""
    from finbench.data.store import REMOTE_READERS

    days = Store(sample_store).dates("bars")[-12:]
    tables = []
    for where, readers in ((s3_store, REMOTE_READERS), (sample_store, 1)):
        store = Store(where)
        store.read_ahead(days, ("high", "low"))
        assert len(store._ahead._threads) == readers
        tables.append([store.read_day_table(d, columns=("high", "low")) for d in days])
        store.stop_reading_ahead()
    assert REMOTE_READERS > 1 and all(a.equals(b) for a, b in zip(*tables, strict=True))


def test_verify_finds_a_partition_changed_in_the_bucket(s3_store, sample_store):
    fs, root = filesystem(s3_store)
    rel = f"bars/date={Store(sample_store).dates('bars')[0].isoformat()}/part.parquet"
    with fs.open_output_stream(f"{root}/{rel}") as out:
        out.write(b"not parquet")
    problems = Store(s3_store).verify()
    assert problems[0].startswith(f"{rel}: content hash") and len(problems) == 1


def test_a_helper_process_checks_a_store_in_a_bucket_as_this_process_does(s3_store,
                                                                          sample_store):
    """The store check's helper process opens the bucket with the credentials of the
    environment alone, and says what the check in this process says."""
    from finbench.data.store_check import StoreCheck

    fs, root = filesystem(s3_store)
    rel = f"bars/date={Store(sample_store).dates('bars')[2].isoformat()}/part.parquet"
    with fs.open_output_stream(f"{root}/{rel}") as out:
        out.write(b"not parquet")
    lines = []
    with StoreCheck(Store(s3_store), lines.append, helper_bytes=0) as check:
        assert check.helped
        assert check.problems() == Store(s3_store).verify()
    assert lines[-1].startswith("store: ")  # its progress, relayed
    assert Store(s3_store).verify()[0].startswith(f"{rel}: content hash")


def test_a_run_into_a_bucket_equals_the_local_run(tmp_path, s3, s3_store, sample_store,
                                                  monkeypatch):
    monkeypatch.setenv("FINBENCH_SCRATCH", str(tmp_path / "scratch"))
    out = f"{s3}/runs/one"
    assert main(["run", str(config(tmp_path, s3_store)), "--out", out]) == 0
    single = run(config(tmp_path, sample_store, name="local.toml"), tmp_path / "local",
                 echo=lambda *_: None)
    for name in ("scores.csv", "labels.parquet", "tasks.parquet"):
        assert read_file(out, name) == (single / name).read_bytes(), name
    fs, root = filesystem(out)
    assert ".finbench.lock" not in files_under(fs, root)
    assert list((tmp_path / "scratch").iterdir()) == []  # scratch folders are removed
    with pytest.raises(RunError, match="read from a local copy: finbench data copy"):
        audit_run(out)  # the library reads local folders; the command line copies
    assert main(["audit", out]) == 0  # on a scratch copy; reads the store from the bucket too
    assert main(["report", out]) == 0  # ... and uploads what it wrote
    fs, root = filesystem(out)
    uploaded = files_under(fs, root)
    assert "report.html" in uploaded and "tables/scores_aggregate.csv" in uploaded
    assert main(["data", "copy", out, str(tmp_path / "copy")]) == 0
    assert audit_run(tmp_path / "copy") == []
    with pytest.raises(RunError, match="no run directory there"), local_copy(f"{s3}/runs/none"):
        pass
    manifest = json.loads(read_file(out, "manifest.json"))
    assert manifest["data"]["store"] == s3_store
    assert "AWS" not in json.dumps(manifest) and "test-only" not in json.dumps(manifest)
    # the same command again finds the run finished in the bucket and changes nothing
    before = read_file(out, "forecasts.parquet")
    run(config(tmp_path, s3_store), out, echo=lambda *_: None)
    assert read_file(out, "forecasts.parquet") == before


def test_the_event_track_names_what_it_cannot_read_from_a_bucket(s3):
    from finbench.tracks.events.store import EventStore

    with pytest.raises(StoreError, match="local folder, not from object storage"):
        EventStore(f"{s3}/events")


def test_a_copy_the_object_store_refuses_is_one_line(s3, sample_store, capsys):
    """A bucket that does not exist: the server refuses the first write; one line naming
    both places, no traceback."""
    assert main(["data", "copy", str(sample_store), "s3://no-such-bucket/store"]) == 2
    err = capsys.readouterr().err
    assert f"LocationError: copying {sample_store} to s3://no-such-bucket/store: " in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_shards_over_a_bucket_survive_a_killed_worker(tmp_path, s3, s3_store, sample_store,
                                                      server, llm_env, monkeypatch):
    """A LocalCluster of 2 workers, store and run directory in the bucket, no path shared
    but the config's (sent as text): a worker is killed as soon as its shard's journal has
    reached the bucket with IN_BUCKET answers; the retried shard carries on from there, and
    the merged run equals the single-process run."""
    from finbench.cluster import run_on_dask

    pytest.importorskip("distributed")
    scratch = tmp_path / "scratch"
    monkeypatch.setenv("FINBENCH_SCRATCH", str(scratch))
    server.delay = 0.05
    llm = llm_toml(server.base_url, "concurrency = 1\nrequests_per_minute = 6000\n")
    out = f"{s3}/runs/sharded"
    fs, root = filesystem(out)
    killed = []

    def kill_once_answers_reach_the_bucket():
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            for rel in [r for r in files_under(fs, root) if r.endswith("/journal.jsonl")]:
                shard = rel.split("/")[1]
                if read_file(out, rel).count(b"\n") >= IN_BUCKET:
                    for lock in scratch.glob(f"finbench-{shard}-*/run/.finbench.lock"):
                        pid = json.loads(lock.read_text() or "{}").get("pid")
                        if pid:
                            killed.append((shard, server.total))
                            os.kill(pid, signal.SIGKILL)
                            server.delay = 0  # the delay was there to kill mid-shard
                            return
            time.sleep(0.1)  # each look lists the bucket: moto answers in this process

    killer = threading.Thread(target=kill_once_answers_reach_the_bucket, daemon=True)
    killer.start()
    merged = run_on_dask(config(tmp_path, s3_store, llm), out, workers=2, echo=lambda *_: None)
    killer.join()
    assert merged == out and killed, "no worker was killed before the shards finished"
    copy = tmp_path / "merged"
    assert main(["data", "copy", out, str(copy)]) == 0
    rows = pd.read_parquet(copy / "forecasts.parquet")
    assert rows.groupby(["task_id", "model"]).size().eq(1).all()
    assert len(rows[rows["model"] == "m"]) == 252 and rows["valid"].all()
    # answers that had reached the bucket (IN_BUCKET or more) are never asked again; only
    # those made in the moment between that upload and the kill (and one in flight) may be:
    # a shard started over would repeat at least IN_BUCKET
    # (asked again of the server, or answered from the response cache the killed worker
    # filled, which the row's detail says)
    repeats = sum(v - 1 for v in server.counts.values())
    cached = sum(json.loads(d)["cached"] for d in rows.loc[rows["model"] == "m", "detail"])
    assert repeats + cached < IN_BUCKET // 2, (repeats, cached, killed)
    problems = audit_run(copy)
    assert problems == [], (problems, killed)
    manifest = json.loads((copy / "manifest.json").read_text())
    assert all(m.startswith(f"{out}/shards/") for m in manifest["merged_from"])
    single = run(config(tmp_path, sample_store, llm, name="local.toml"), tmp_path / "single",
                 echo=lambda *_: None)
    for name in ("scores.csv", "labels.parquet", "tasks.parquet", "rows.parquet"):
        assert (copy / name).read_bytes() == (single / name).read_bytes(), name
    assert not any(Path(p).exists() for p in scratch.glob("finbench-merge-*"))


def test_the_mirror_sends_what_changed_the_journal_last_and_never_the_lock(tmp_path):
    """What a mirror sends, in which order, and what a pull brings back (a local folder stands
    in for the bucket: the mirror takes any location)."""
    import sqlite3

    from finbench.runlog.mirror import Mirror

    local, remote = tmp_path / "run", tmp_path / "bucket"
    (local / "journal.parts").mkdir(parents=True)
    (local / "journal.jsonl").write_text('{"a": 1}\n')
    (local / "journal.parts" / "000000.parquet").write_bytes(b"part")
    (local / ".finbench.lock").write_text('{"pid": 1}')
    (local / "scores.csv.tmp").write_text("half")
    db = sqlite3.connect(local / "transcripts.sqlite", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE t (x)")
    db.execute("INSERT INTO t VALUES (1)")  # in the write-ahead log, not yet in the file
    mirror = Mirror(local, str(remote))
    sent = mirror.sync()
    assert sorted(sent) == ["journal.jsonl", "journal.parts/000000.parquet",
                            "transcripts.sqlite"]
    assert sent[-1] == "journal.jsonl"  # after the transcripts it was copied before
    copy = sqlite3.connect(remote / "transcripts.sqlite")
    assert copy.execute("SELECT x FROM t").fetchall() == [(1,)]
    copy.close()
    assert mirror.sync() == []  # nothing changed
    with open(local / "journal.jsonl", "a") as fh:
        fh.write('{"a": 2}\n')
    assert mirror.sync() == ["journal.jsonl"]
    db.close()
    (local / "journal.parts" / "000000.parquet").unlink()
    mirror.sync(final=True)
    assert sorted(p.relative_to(remote).as_posix() for p in remote.rglob("*") if p.is_file()
                  ) == ["journal.jsonl", "transcripts.sqlite"]
    again = Mirror(tmp_path / "again", str(remote))
    assert again.pull() == 2
    assert (tmp_path / "again" / "journal.jsonl").read_text() == '{"a": 1}\n{"a": 2}\n'


def test_a_run_that_fails_keeps_its_error_when_its_last_upload_fails_too(tmp_path):
    """The run's own error is the one raised; the failed upload is a note on it."""
    from finbench.runlog.mirror import Mirror

    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the bucket's folder would be")
    mirror = Mirror(tmp_path / "run", str(tmp_path / "bucket"))
    with pytest.raises(RuntimeError, match="the run failed") as caught, mirror:
        (tmp_path / "run").mkdir()
        (tmp_path / "run" / "journal.jsonl").write_text("{}\n")
        mirror.fs, mirror.root = filesystem(blocker / "inside")  # uploads cannot succeed
        raise RuntimeError("the run failed")
    assert any(note.startswith(f"and the last upload to {tmp_path / 'bucket'} failed too")
               for note in caught.value.__notes__)
    with pytest.raises(OSError), Mirror(tmp_path / "run2", str(blocker / "inside")) as other:
        (other.local).mkdir()
        (other.local / "journal.jsonl").write_text("{}\n")  # no error of its own: raised


def test_a_partition_unreadable_from_object_storage_is_left_to_dasks_retries(s3, tmp_path):
    """Read from object storage, a partition that cannot be read may read the next time (the
    storage did not answer): the shard raises, so Dask retries it; the message is the same as
    for a local store. (A damaged local partition is handed back instead: test_cluster.py.)"""
    from finbench.cluster import run_shard
    from finbench.core.config import ConfigText

    store, rel = damaged_store(tmp_path)
    assert main(["data", "copy", str(store), f"{s3}/damaged"]) == 0
    cfg = ConfigText.read(month_shards_config(tmp_path / "cfg.toml", f"{s3}/damaged"))
    with pytest.raises(StoreError, match=f"{BUCKET}/damaged/{rel}: cannot be read") as info:
        run_shard(cfg, str(tmp_path / "shard"), "2024-12-02", "2024-12-31", 1.0)
    assert info.value.may_pass_again
