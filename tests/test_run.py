"""End to end on the synthetic sample: run, resume, score byte-identical, audit, config errors."""

import hashlib
import json
import re
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from finbench.audit import audit_run
from finbench.core.errors import ConfigError
from finbench.data.store import Store, sha256_file
from finbench.runlog.forecast_table import ordered_table
from finbench.runlog.journal import Journal
from finbench.runlog.rundir import load_run_config, read_manifest, record_files
from finbench.runner import run
from finbench.runner.scores import score_run
from finbench.tracks.configs import load_config
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[1]

CONFIG = """
invalid_policy = "exclude"
[data]
store = "{store}"
[tasks]
tickers = ["AAPL", "MSFT", "NVDA"]
start = "2025-01-13"
end = "2025-01-15"
[[models]]
name = "coin"
kind = "coin"
[[models]]
name = "base_rate"
kind = "base_rate"
[[models]]
name = "momentum"
kind = "momentum"
[[models]]
name = "climatology"
kind = "climatology"
[[models]]
name = "frozen"
kind = "base_rate"
variant = "frozen"
train_start = "2024-10-01"
train_end = "2024-12-31"
[[models]]
name = "scripted"
kind = "scripted"
answers = [
  '{{"p_up": 0.7, "lower": -0.01, "upper": 0.01}}',
  '{{"p_up": 1.3, "lower": 0, "upper": 1}}',
  'not json',
]
[[models]]
name = "replayed"
kind = "replay"
path = "replay.csv"
[[models]]
name = "llm"
kind = "openai"
model = "gpt-4o-mini"
api_key_env = "FINBENCH_TEST_NO_SUCH_KEY"
"""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, sample_store):
    base = tmp_path_factory.mktemp("run")
    (base / "replay.csv").write_text(
        "ticker,session,horizon,p_up,lower,upper\n"
        "AAPL,2025-01-15,MORNING,0.55,-0.01,0.012\n"
        "MSFT,2025-01-15,MIDDAY,0.4,0.02,-0.02\n"
        "ZZZZ,2025-01-15,MIDDAY,0.4,-0.02,0.02\n")
    cfg = base / "cfg.toml"
    cfg.write_text(CONFIG.format(store=sample_store))
    out = run(cfg, base / "out", echo=lambda *_: None)
    return out


def test_run_writes_every_table_with_one_row_per_task_and_model(run_dir):
    tasks = pd.read_parquet(run_dir / "tasks.parquet")
    forecasts = pd.read_parquet(run_dir / "forecasts.parquet")
    assert len(tasks) == 3 * 3 * 3
    assert forecasts.groupby("model").size().to_dict() == {
        m: 27 for m in ("coin", "base_rate", "momentum", "climatology", "frozen", "scripted",
                        "replayed")}
    assert not forecasts.duplicated(["task_id", "model"]).any()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["skipped_models"] == {
        "llm": "API key variable FINBENCH_TEST_NO_SUCH_KEY is not set"}
    assert manifest["data"]["synthetic"] is True and len(manifest["config_sha256"]) == 64
    for name in ("labels.parquet", "scores.parquet", "scores.csv"):
        assert (run_dir / name).is_file()


def test_rows_export_reads_back_as_plain_text_with_each_rows_task_and_label(run_dir):
    """rows.parquet's text columns, written as codes and their texts, read back as text
    (no dictionary types), each row naming its own task's ticker, session and horizon and
    its label's status, and its model's name."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.read_schema(run_dir / "rows.parquet")
    for name in ("task_id", "model", "ticker", "session", "horizon", "status"):
        assert schema.field(name).type == pa.string(), name
    rows = pd.read_parquet(run_dir / "rows.parquet")
    tasks = pd.read_parquet(run_dir / "tasks.parquet").set_index("task_id")
    labels = pd.read_parquet(run_dir / "labels.parquet").set_index("task_id")
    for col in ("ticker", "session", "horizon"):
        assert (rows[col].to_numpy() == tasks.loc[rows["task_id"], col].to_numpy()).all(), col
    assert (rows["status"].to_numpy() == labels.loc[rows["task_id"], "status"].to_numpy()).all()
    forecasts = pd.read_parquet(run_dir / "forecasts.parquet", columns=["task_id", "model"])
    scored = forecasts[~forecasts["model"].isin(["llm"])]
    assert sorted(zip(rows["task_id"], rows["model"], strict=True)) == sorted(
        zip(scored["task_id"], scored["model"], strict=True))


def test_invalid_answers_are_kept_with_reasons_and_counted(run_dir):
    f = pd.read_parquet(run_dir / "forecasts.parquet")
    scripted = f[f["model"] == "scripted"]
    # a task's scripted answer: answers[crc32(task_id) % 3] (valid, p_up 1.3, not JSON)
    kind = scripted["task_id"].map(lambda t: zlib.crc32(t.encode()) % 3).to_numpy()
    counts = [int((kind == k).sum()) for k in range(3)]
    assert min(counts) > 0 and sum(counts) == 27
    assert list(scripted["valid"]) == list(kind == 0)
    assert scripted["error"].str.startswith("schema: p_up").sum() == counts[1]
    assert (scripted["error"].str.startswith("not_json")).sum() == counts[2]
    assert (scripted.loc[~scripted["valid"], "raw"] != "").all()
    replayed = f[f["model"] == "replayed"].set_index("task_id")
    assert replayed.loc["AAPL|2025-01-15|MORNING", "valid"]
    assert "lower 0.02 is above upper -0.02" in replayed.loc["MSFT|2025-01-15|MIDDAY", "error"]
    assert (replayed["error"].fillna("").str.startswith("missing")).sum() == 25
    scores = pd.read_parquet(run_dir / "scores.parquet")
    row = scores[(scores["model"] == "scripted") & (scores["slice_kind"] == "overall")].iloc[0]
    assert row["n_tasks"] == 27 and row["n_valid"] == counts[0]
    assert row["validity"] == pytest.approx(counts[0] / 27)
    labels = pd.read_parquet(run_dir / "labels.parquet").set_index("task_id")
    ok_valid = scripted[scripted["valid"]]["task_id"].map(labels["status"]).eq("ok").sum()
    assert row["n"] == ok_valid and row["n_unscorable"] == (labels["status"] != "ok").sum()
    assert row["bss_coin_n"] == row["n"]  # paired only on the rows scripted scored


def test_baseline_rows_record_history_used_before_the_horizon(run_dir):
    f = pd.read_parquet(run_dir / "forecasts.parquet")
    tasks = pd.read_parquet(run_dir / "tasks.parquet").set_index("task_id")
    base = f[f["model"] == "base_rate"].set_index("task_id")
    t_fc = tasks.loc[base.index, "t_forecast"]
    assert (base["history_max_input_time"] < t_fc).all()
    assert (base["max_input_time"] <= t_fc).all()
    assert (base["history_count"] == 60).all()
    detail = json.loads(base["detail"].iloc[0])
    assert detail["rate_count"] == 60 and 0 < detail["p"] < 1


def test_score_recomputes_byte_identical_tables(run_dir):
    before = {n: (run_dir / n).read_bytes() for n in ("scores.parquet", "scores.csv")}
    score_run(run_dir)
    assert before == {n: (run_dir / n).read_bytes() for n in ("scores.parquet", "scores.csv")}


def test_audit_passes_on_a_clean_run_and_names_a_late_input(run_dir, tmp_path):
    assert audit_run(run_dir) == []
    bad = tmp_path / "bad"
    import shutil

    shutil.copytree(run_dir, bad)
    f = pd.read_parquet(bad / "forecasts.parquet")
    t = pd.read_parquet(bad / "tasks.parquet").set_index("task_id")
    row = f.index[f["model"] == "momentum"][4]
    late = t.loc[f.at[row, "task_id"], "t_forecast"] + pd.Timedelta(minutes=1)
    f.at[row, "max_input_time"] = late
    f.at[row, "context_max_input_time"] = late
    f.to_parquet(bad / "forecasts.parquet", index=False)
    problems = audit_run(bad)
    assert any(f"row {row + 1} " in p and "after the horizon" in p for p in problems)
    done = cli("audit", bad)
    assert done.returncode == 1 and f"row {row + 1} " in done.stderr
    progress = [x.split(",")[0] for x in done.stderr.splitlines() if "elapsed, ETA" in x]
    store = Store(load_run_config(bad).data.store)
    n_files = len(store.manifest["partitions"])
    # the store's check runs beside the rest (a store this small: in this process, last)
    assert progress.count(f"store: {n_files}/{n_files} partitions hashed and checked") == 1
    rest = [line for line in progress if not line.startswith("store: ")]
    assert re.fullmatch(r"labels: (\d+)/\1 reads", rest[0])  # a small run: done at once
    assert rest[1:] == [f"audit: {len(f)}/{len(f)} forecast rows checked"]
    assert done.stdout == ""  # a failed audit says so on stderr, with its violations


def test_audit_tolerates_a_libm_ulp_in_r_and_names_any_real_label_change(run_dir, tmp_path):
    """A run made on another CPU may hold r one ULP from this machine's np.log: the audit
    passes it. Prices, y, status and a larger change of r are named, field by field."""
    import shutil

    import numpy as np

    other_cpu = tmp_path / "other_cpu"
    shutil.copytree(run_dir, other_cpu)
    labels = pd.read_parquet(other_cpu / "labels.parquet")
    ok = labels.index[labels["status"] == "ok"]
    labels.loc[ok, "r"] = np.nextafter(labels.loc[ok, "r"].to_numpy(), np.inf)
    labels.to_parquet(other_cpu / "labels.parquet", index=False)
    manifest = json.loads((other_cpu / "manifest.json").read_text())  # as that run recorded
    manifest["files"]["labels.parquet"] = sha256_file(other_cpu / "labels.parquet")
    (other_cpu / "manifest.json").write_text(json.dumps(manifest))
    assert audit_run(other_cpu) == []

    edited = tmp_path / "edited"
    shutil.copytree(run_dir, edited)
    labels = pd.read_parquet(edited / "labels.parquet")
    a, b, c = ok[:3]
    labels.loc[a, "r"] += 1e-9
    labels.loc[b, "p_ref"] = np.nextafter(labels.loc[b, "p_ref"], np.inf)  # exact: 1 ULP counts
    labels.loc[c, "y"] = 1 - labels.loc[c, "y"]
    labels.to_parquet(edited / "labels.parquet", index=False)
    problems = [p for p in audit_run(edited) if p.startswith("labels.parquet task")]
    ids = labels["task_id"]
    against_store = [p for p in problems if "store gives" in p]
    assert len(against_store) == 3
    assert against_store[0].startswith(f"labels.parquet task {ids[a]}: r ")
    assert against_store[1].startswith(f"labels.parquet task {ids[b]}: p_ref ")
    assert against_store[2].startswith(f"labels.parquet task {ids[c]}: y ")
    # and against themselves: r is no longer ln(p_target / p_ref), y no longer follows r
    assert any(p.startswith(f"labels.parquet task {ids[a]}: r is not ln") for p in problems)
    assert any(p.startswith(f"labels.parquet task {ids[b]}: r is not ln") for p in problems)
    assert any(p.startswith(f"labels.parquet task {ids[c]}: y is not 1 if r > 0") for p in problems)


def test_receipts_are_the_same_in_two_processes_when_history_starts_before_the_store(
        tmp_path, sample_store):
    """Days before the store's first one have no bars; their (empty) daily summaries once
    turned the summary columns into Python objects, and context digests hashed memory
    addresses: two identical runs disagreed on almost every replay row's input_sha256."""
    first_day = Store(sample_store).dates("bars")[0].isoformat()
    (tmp_path / "replay.csv").write_text(
        f"ticker,session,horizon,p_up,lower,upper\nAAPL,{first_day},MORNING,0.55,-0.01,0.01\n")
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(f"""
[data]
store = "{sample_store}"
[tasks]
tickers = ["AAPL", "MSFT"]
start = "{first_day}"
end = "2024-09-26"
[[models]]
name = "replayed"
kind = "replay"
path = "replay.csv"
""")
    digests = []
    for name in ("one", "two"):
        subprocess.run([sys.executable, "-m", "finbench", "run", str(cfg), "--out",
                        str(tmp_path / name)], check=True, capture_output=True)
        assert audit_run(tmp_path / name) == []
        digests.append(pd.read_parquet(tmp_path / name / "forecasts.parquet",
                                       columns=["input_sha256"])["input_sha256"])
    assert len(digests[0]) == 2 * 5 * 3 and digests[0].notna().all()
    pd.testing.assert_series_equal(digests[0], digests[1])


def test_interrupted_run_resumes_without_recomputing(run_dir, tmp_path):
    import shutil

    resumed = tmp_path / "resumed"
    shutil.copytree(run_dir, resumed)
    parts = sorted((resumed / "journal.parts").glob("*.parquet"))
    assert len(parts) == 7  # one batch per forecaster here
    for part in parts[4:]:
        part.unlink()  # as if the run had been killed after four forecasters
    marked = pd.read_parquet(parts[0])
    marked["latency"] = 12345.0  # a sentinel: a recomputed row would not carry it
    marked.to_parquet(parts[0], index=False)
    (resumed / "journal.parts" / "000009.tmp").write_bytes(b"PAR1 torn")  # an unfinished part
    (resumed / "forecasts.parquet").unlink()
    cfg = run_dir.parent / "cfg.toml"
    run(cfg, resumed, echo=lambda *_: None)
    f = pd.read_parquet(resumed / "forecasts.parquet")
    assert len(f) == 7 * 27 and not f.duplicated(["task_id", "model"]).any()
    kept = f[f["model"] == marked["model"].iloc[0]]
    assert (kept["latency"] == 12345.0).all()
    assert Journal(resumed).frame().shape[0] == 7 * 27
    original = pd.read_parquet(run_dir / "scores.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(resumed / "scores.parquet"), original)


def test_a_torn_json_line_is_dropped_and_the_next_append_starts_clean(tmp_path):
    journal = Journal(tmp_path)
    row = {"task_id": "A|2025-01-15|MORNING", "model": "m", "kind": "openai", "p_up": 0.5,
           "lower": -0.01, "upper": 0.01, "valid": True, "history_count": -1, "latency": 0.1}
    journal.append_records([row])
    with open(journal.path, "a") as fh:
        fh.write('{"task_id": "B|2025-01-15|MORNING", "mod')  # killed mid-write
    assert journal.done() == {("A|2025-01-15|MORNING", "m")}
    journal.append_records([{**row, "task_id": "C|2025-01-15|MORNING"}])
    assert journal.done() == {("A|2025-01-15|MORNING", "m"), ("C|2025-01-15|MORNING", "m")}
    assert len(journal.frame()) == 2


@pytest.mark.parametrize(("text", "message"), [
    ("[tasks]\ntickers=['A']\nstart='2025-01-15'\nend='2025-01-15'\nfoo=1\n", "unknown key 'tasks.foo'"),
    ("[tasks]\ntickers=['A']\nstart='2025-01-15'\nend='2025-01-15'\nearly_close='later'\n",
     "key 'tasks.early_close'"),
    ("[tasks]\ntickers=['A']\nstart='2025-01-15'\nend='2025-01-15'\n[[models]]\nname='m'\n"
     "kind='oracle'\n", "models.0"),
    ("invalid_policy='fallback:nope'\n[tasks]\ntickers=['A']\nstart='2025-01-15'\n"
     "end='2025-01-15'\n", "not a baseline model"),
])
def test_config_errors_name_the_key(tmp_path, text, message):
    cfg = tmp_path / "c.toml"
    head, sep, rest = text.partition("[tasks]")  # top-level keys must precede the tables
    cfg.write_text(head + "[data]\nstore='x'\n" + sep + rest)
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        load_config(cfg)


def test_pilot_config_parses_and_points_at_the_sample():
    config = load_config(ROOT / "configs" / "pilot.toml")
    assert config.data.store == (ROOT / "data" / "sample").resolve()
    assert [m.kind for m in config.models][:4] == ["coin", "base_rate", "momentum", "climatology"]


@pytest.mark.parametrize("shuffled", [False, True])
def test_shards_merge_into_a_run_with_byte_identical_scores(run_dir, tmp_path, monkeypatch,
                                                            shuffled):
    """Shards' forecast tables are copied (model, shard) by shard, never all in memory; a
    shard whose table is out of order (``shuffled``) is ordered in memory, same result."""
    import finbench.shards as shards
    from finbench.runlog.journal import PARTS
    from finbench.runlog.parquet_join import row_groups_are_files

    cfg = run_dir.parent / "cfg.toml"
    a = run(cfg, tmp_path / "a", echo=lambda *_: None, shard=("2025-01-13", "2025-01-13"))
    b = run(cfg, tmp_path / "b", echo=lambda *_: None, shard=("2025-01-14", "2025-01-15"))
    if shuffled:  # recorded as the shard's own: a merge refuses a file its shard did not record
        rows = pd.read_parquet(b / "forecasts.parquet")
        rows.sample(frac=1, random_state=0).to_parquet(b / "forecasts.parquet", index=False)
        record_files(b, read_manifest(b), ["forecasts.parquet"])
    calls = []
    monkeypatch.setattr(shards, "ordered_table",
                        lambda *args: calls.append(1) or ordered_table(*args))
    merged = shards.merge_shards([b, a], tmp_path / "merged")  # order of shards is free
    assert len(calls) == shuffled
    for name in ("scores.parquet", "scores.csv", "tasks.parquet", "labels.parquet"):
        assert (merged / name).read_bytes() == (run_dir / name).read_bytes(), name
    whole = pd.read_parquet(run_dir / "forecasts.parquet").drop(columns=["latency"])
    parts = pd.read_parquet(merged / "forecasts.parquet").drop(columns=["latency"])
    pd.testing.assert_frame_equal(parts, whole)
    assert str(whole["tokens"].dtype) == "Int64"  # the journal's pandas metadata travels along
    # in order, the shards' row groups are copied as they are: the merged table is then its
    # journal parts (the shards') joined, as a run's is, and the audit knows it from bytes
    assert row_groups_are_files(merged / "forecasts.parquet",
                                sorted((merged / PARTS).glob("*.parquet"))) is not shuffled
    assert not list(merged.glob("*.tmp"))
    assert audit_run(merged) == []


def test_a_shard_left_for_its_merge_to_score_writes_no_scores_and_merges_alike(run_dir,
                                                                              tmp_path):
    """A cluster's shards are run with ``score=False`` (the merge scores every row again):
    no score file, a line saying so, the same merge; `finbench score` scores it later as a
    scored shard is scored."""
    from finbench.runlog.rundir import SCORE_OUTPUTS
    from finbench.runner.scores import rescore
    from finbench.shards import merge_shards

    cfg = run_dir.parent / "cfg.toml"
    said = []
    a = run(cfg, tmp_path / "a", echo=said.append, shard=("2025-01-13", "2025-01-13"),
            score=False)
    b = run(cfg, tmp_path / "b", echo=lambda *_: None, shard=("2025-01-14", "2025-01-15"),
            score=False)
    assert not [n for n in (*SCORE_OUTPUTS, "scores.csv") if (a / n).exists()]
    assert f"{a}: not scored (its merge scores it; alone: finbench score)" in said
    assert not any(line.startswith("By horizon:") for line in said)
    merged = merge_shards([a, b], tmp_path / "merged")
    for name in ("scores.parquet", "scores.csv", "rows.parquet", "tasks.parquet"):
        assert (merged / name).read_bytes() == (run_dir / name).read_bytes(), name
    assert audit_run(merged) == []
    scored = run(cfg, tmp_path / "scored", echo=lambda *_: None,
                 shard=("2025-01-13", "2025-01-13"))
    rescore(a)
    for name in ("scores.parquet", "rows.parquet"):
        assert (a / name).read_bytes() == (scored / name).read_bytes(), name


def test_overlapping_shards_are_refused(run_dir, tmp_path):
    from finbench.core.errors import RunError
    from finbench.shards import merge_shards

    cfg = run_dir.parent / "cfg.toml"
    a = run(cfg, tmp_path / "a", echo=lambda *_: None, shard=("2025-01-13", "2025-01-14"))
    b = run(cfg, tmp_path / "b", echo=lambda *_: None, shard=("2025-01-14", "2025-01-15"))
    with pytest.raises(RunError, match="shards overlap"):
        merge_shards([a, b], tmp_path / "m")


@pytest.mark.parametrize(("key", "value"), [("package_version", "0.0.9"),
                                          ("git_revision", "0" * 40)])
def test_shards_made_by_another_finbench_are_refused_by_the_merge(run_dir, tmp_path, key,
                                                                  value):
    """A run's shards and its merge (which scores them) come from one FinBench: a shard whose
    manifest names another version or git revision than the merging program's is refused,
    naming both, before anything is written (the merged manifest would name one of them for
    all). The same shards merge once remade alike."""
    from finbench.core.errors import RunError
    from finbench.core.version import code_version
    from finbench.shards import merge_shards

    cfg = run_dir.parent / "cfg.toml"
    a = run(cfg, tmp_path / "a", echo=lambda *_: None, shard=("2025-01-13", "2025-01-13"))
    b = run(cfg, tmp_path / "b", echo=lambda *_: None, shard=("2025-01-14", "2025-01-15"))
    manifest = json.loads((b / "manifest.json").read_text())
    ours = code_version()
    assert {k: manifest[k] for k in ours} == ours
    (b / "manifest.json").write_text(json.dumps({**manifest, key: value}))
    theirs = {**ours, key: value}
    with pytest.raises(RunError) as caught:
        merge_shards([a, b], tmp_path / "m")
    assert str(caught.value) == (
        f"{b}: made by FinBench {theirs['package_version']} (git "
        f"{str(theirs['git_revision'])[:12]}), but this merge is FinBench "
        f"{ours['package_version']} (git {str(ours['git_revision'])[:12]}): a run's shards "
        "and its merge come from one FinBench; run the shard again with this one, or merge "
        "with the shard's")
    assert not (tmp_path / "m").exists()
    (b / "manifest.json").write_text(json.dumps(manifest))
    done = cli("merge", a, b, "--out", tmp_path / "m")  # as a user merges, with the receipt
    digest = hashlib.sha256((tmp_path / "m" / "manifest.json").read_bytes()).hexdigest()
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and lines[0] == f"merged 2 shard(s) into {tmp_path / 'm'}"
    assert lines[-1] == (f"receipt: manifest.json sha256 {digest} (keep it: `finbench audit` "
                         "checks every file against the hashes this manifest records)")
    alone = []  # the tables between: those the run in one process prints, in one piece
    run(cfg, tmp_path / "one", echo=alone.append, shard=("2025-01-13", "2025-01-15"))
    assert lines[1].startswith("By horizon:") and "\n".join(lines[1:-1]) in "\n".join(alone)


def test_a_merge_never_writes_over_a_shard_or_another_run(run_dir, tmp_path):
    """``merge A B --out A`` wrote the merged run over shard A (SameFileError midway, A's
    files changed); ``--out`` holding another run got the merged files beside that run's
    report, tables and figures. A merge given again, or over the unsharded run of the same
    config, goes on, and a journal part of the run held before is not left behind (the last
    written row of a task counts, so it would have stood for the merged answer)."""
    from finbench.core.errors import RunError
    from finbench.runlog.journal import PARTS
    from finbench.shards import merge_shards

    cfg = run_dir.parent / "cfg.toml"
    a = run(cfg, tmp_path / "a", echo=lambda *_: None, shard=("2025-01-13", "2025-01-13"))
    b = run(cfg, tmp_path / "b", echo=lambda *_: None, shard=("2025-01-14", "2025-01-15"))
    before = {p: p.read_bytes() for p in sorted(a.rglob("*")) if p.is_file()}
    for out in (a, a / "inside"):
        with pytest.raises(RunError, match=rf"--out {out} is the shard {a} or lies inside it"):
            merge_shards([a, b], out)
    assert {p: p.read_bytes() for p in sorted(a.rglob("*")) if p.is_file()} == before
    other = run(cfg, tmp_path / "other", echo=lambda *_: None,
                shard=("2025-01-13", "2025-01-14"))
    with pytest.raises(RunError, match="other holds a run of other tasks"):
        merge_shards([a, b], other)
    merged = merge_shards([a, b], tmp_path / "m")
    stale = merged / PARTS / "000099.parquet"
    stale.write_bytes((a / PARTS / "000000.parquet").read_bytes())
    merge_shards([a, b], merged)
    assert not stale.exists() and audit_run(merged) == []
    whole = tmp_path / "whole"
    shutil.copytree(run_dir, whole)
    merge_shards([a, b], whole)
    assert (whole / "scores.csv").read_bytes() == (run_dir / "scores.csv").read_bytes()


@pytest.mark.parametrize("batch_rows", [1 << 19, 7])
def test_audit_rederives_baseline_receipts_and_names_a_forged_one(run_dir, tmp_path,
                                                                  monkeypatch, batch_rows):
    import shutil

    import finbench.tracks.intraday.audit

    monkeypatch.setattr(finbench.tracks.intraday.audit, "BATCH_ROWS", batch_rows)  # rows read at a time

    f = pd.read_parquet(run_dir / "forecasts.parquet")
    base = f[f["kind"].isin(["coin", "base_rate", "momentum", "climatology"])]
    # coin, base rate and climatology read the same input, so one digest; momentum's line
    # adds the sign it reads
    plain = base[base["model"] != "momentum"]
    assert (plain.groupby("task_id")["input_sha256"].nunique() == 1).all()
    both = base.groupby("task_id")["input_sha256"].nunique()
    assert (both == 2).all()
    # momentum read bars; the others read none
    assert base.loc[base["model"] == "momentum", "context_max_input_time"].notna().any()
    assert base.loc[base["model"] == "coin", "context_max_input_time"].isna().all()
    bad = tmp_path / "forged"
    shutil.copytree(run_dir, bad)
    rows = [base.index[base["model"] == "coin"][3], base.index[base["model"] == "climatology"][-2]]
    f.loc[rows, "input_sha256"] = "0" * 64
    f.to_parquet(bad / "forecasts.parquet", index=False)
    problems = audit_run(bad)
    for row in rows:
        assert any(f"row {row + 1} " in p and "input_sha256 000000000000 does not match the "
                   "re-derived" in p for p in problems)
    assert any(p.startswith("forecasts.parquet: content differs from the hash") for p in problems)


def test_audit_names_a_foreign_row_a_moved_input_time_and_a_forged_context(run_dir, tmp_path,
                                                                           monkeypatch):
    import shutil

    import finbench.tracks.intraday.audit

    monkeypatch.setattr(finbench.tracks.intraday.audit, "BATCH_ROWS", 10)
    bad = tmp_path / "bad"
    shutil.copytree(run_dir, bad)
    f = pd.read_parquet(bad / "forecasts.parquet")
    foreign = f.index[f["model"] == "base_rate"][2]
    moved = f.index[(f["model"] == "momentum") & f["context_max_input_time"].notna()][1]
    forged = f.index[f["model"] == "replayed"][5]
    f.at[foreign, "task_id"] = "ZZZZ|2025-01-15|CLOSE"
    f.at[moved, "context_max_input_time"] -= pd.Timedelta(minutes=1)  # earlier: not late
    f.at[forged, "input_sha256"] = "f" * 64
    f.to_parquet(bad / "forecasts.parquet", index=False)
    problems = audit_run(bad)
    assert f"forecasts.parquet row {foreign + 1} (ZZZZ|2025-01-15|CLOSE, base_rate): task is " \
           "not part of this run" in problems
    assert any(f"row {moved + 1} " in p and "does not match the re-derived" in p
               for p in problems)
    assert any(f"row {forged + 1} " in p and "input_sha256 ffffffffffff" in p for p in problems)


@pytest.mark.parametrize("change", ["swap", "drop", "rename"])
def test_audit_names_a_task_list_that_is_not_the_configs(run_dir, tmp_path, change):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(run_dir, bad)
    tasks = pd.read_parquet(bad / "tasks.parquet")
    if change == "swap":  # the same tasks in another order
        tasks = tasks.iloc[[1, 0, *range(2, len(tasks))]]
    elif change == "drop":
        tasks = tasks.iloc[:-1]
    else:
        tasks = tasks.assign(task_id=tasks["task_id"].where(tasks.index != 3, "ZZZZ|x|y"))
    tasks.to_parquet(bad / "tasks.parquet", index=False)
    problems = audit_run(bad)
    assert "tasks.parquet: task list differs from the one the config gives" in problems
    assert problems[0].startswith("tasks.parquet: content differs from the hash manifest.json")


@pytest.mark.parametrize("policy", ["exclude", "fallback:coin"])
def test_scores_model_by_model_equal_scores_of_all_rows_at_once(run_dir, tmp_path, policy,
                                                                monkeypatch):
    """score_run reads one model's rows at a time, each once (the fallback baseline's too:
    every model's reference and its own answers); the table equals the one computed from
    every row in memory (the scripted model's invalid answers take coin's under fallback)."""
    import shutil
    from collections import Counter

    from finbench.runlog import forecast_table
    from finbench.runlog.rundir import load_run_config
    from finbench.tracks.intraday.config import baseline_names, interval_reference
    from finbench.tracks.intraday.score_cells import SCORED_COLUMNS, aggregate, row_scores

    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["config"]["invalid_policy"] = policy
    (copy / "manifest.json").write_text(json.dumps(manifest))
    reads, read = Counter(), forecast_table.model_rows

    def counted(path, model, columns):
        reads[model] += 1
        return read(path, model, columns)

    monkeypatch.setattr(forecast_table, "model_rows", counted)
    streamed = score_run(copy)
    assert set(reads.values()) == {1}, reads
    config = load_run_config(copy)
    skipped = manifest.get("skipped_models", {})
    rows = row_scores(pd.read_parquet(copy / "forecasts.parquet", columns=list(SCORED_COLUMNS)),
                      pd.read_parquet(copy / "labels.parquet"),
                      pd.read_parquet(copy / "tasks.parquet"), invalid_policy=policy)
    whole = aggregate(rows, models=[m.name for m in config.models if m.name not in skipped],
                      baselines=[b for b in baseline_names(config) if b not in skipped],
                      interval_reference=interval_reference(config),
                      horizon_order=list(config.tasks.horizons))
    pd.testing.assert_frame_equal(streamed, whole)
    fallback = streamed[(streamed["model"] == "scripted") & (streamed["slice_kind"] == "overall")]
    assert (fallback["n_fallback"] > 0).all() == (policy != "exclude")


def test_a_forecast_row_for_a_task_not_in_the_run_is_named(run_dir, tmp_path):
    import shutil

    from finbench.core.errors import RunError

    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    f = pd.read_parquet(copy / "forecasts.parquet")
    f.loc[f.index[f["model"] == "momentum"][0], "task_id"] = "ZZZ|2025-01-13|MORNING"
    f.to_parquet(copy / "forecasts.parquet", index=False)
    with pytest.raises(RunError, match=r"forecasts\.parquet \(recorded "):
        score_run(copy)  # first: not the table the run recorded
    record_files(copy, read_manifest(copy), ["forecasts.parquet"])  # as if the run wrote it
    with pytest.raises(RunError, match=r"model momentum has a row for ZZZ\|2025-01-13\|MORNING"):
        score_run(copy)


def test_a_run_reports_where_its_time_went(run_dir, tmp_path, monkeypatch):
    """Wall seconds per step, and CPU seconds (all threads, and the caller's): a step that
    sleeps takes time but no CPU; one that computes on the caller's thread takes both."""
    import gc
    import time

    from finbench.runner.steps import RunSteps

    table, score = RunSteps.write_forecast_table, RunSteps.score

    def sleeping(self):
        time.sleep(0.3)
        return table(self)

    def computing(self):
        start = time.thread_time()
        while time.thread_time() - start < 0.3:
            pass
        return score(self)

    # once before: what a step imports the first time in this process costs CPU then
    run(run_dir.parent / "cfg.toml", tmp_path / "warm", echo=lambda *_: None,
        shard=("2025-01-13", "2025-01-13"))
    monkeypatch.setattr(RunSteps, "write_forecast_table", sleeping)
    monkeypatch.setattr(RunSteps, "score", computing)
    timings: dict[str, float] = {}
    cpu: dict[str, tuple[float, float]] = {}
    gc.collect()  # a collection of what earlier tests left would count as a step's CPU
    gc.disable()
    try:
        run(run_dir.parent / "cfg.toml", tmp_path / "t", echo=lambda *_: None,
            shard=("2025-01-13", "2025-01-13"), timings=timings, cpu_timings=cpu)
    finally:
        gc.enable()
    assert list(timings) == list(cpu) == ["plan", "label pass", "forecasts", "forecast table",
                                          "scores", "manifest"]
    assert all(seconds >= 0 for seconds in timings.values())
    # the caller's thread: threads other tests left behind may spend CPU meanwhile
    assert timings["forecast table"] >= 0.3 > cpu["forecast table"][1] + 0.1
    assert timings["scores"] >= 0.3 and cpu["scores"][1] >= 0.3
    assert all(process >= thread - 0.02 >= -0.02 for process, thread in cpu.values())


def test_baselines_only_run_writes_the_forecast_table_as_answers_arrive(
        sample_store, tmp_path, monkeypatch):
    """Baselines answering every task hand each journal part (a row group of the table) to
    the forecast table, which copies its bytes: every row is encoded once. The file equals the
    journal ordered in memory, and a resumed run (nothing left to answer) writes it from the
    journal instead, to the same bytes."""
    from finbench.runlog import forecast_table
    from finbench.runlog import journal as journal_module

    orig_encode = forecast_table.encode_rows
    cfg = tmp_path / "b.toml"
    cfg.write_text(CONFIG.format(store=sample_store).split('[[models]]\nname = "frozen"')[0]
                   .replace('start = "2025-01-13"', 'start = "2024-12-16"'))
    orig, calls = Journal.write_ordered, []

    def spy(self, *args, **kwargs):
        calls.append(args)
        return orig(self, *args, **kwargs)

    monkeypatch.setattr(Journal, "write_ordered", spy)
    encoded = []
    monkeypatch.setattr(forecast_table, "encode_rows", lambda table, where: (
        encoded.append(table.num_rows), orig_encode(table, where)))
    monkeypatch.setattr(journal_module, "encode_rows", forecast_table.encode_rows)
    out = run(cfg, tmp_path / "out", echo=lambda *_: None)
    assert calls == []  # streamed: the journal was never ordered in memory
    parts = sorted((out / "journal.parts").iterdir())
    assert len(parts) == 4  # 4 models, each one row group (fewer than ROW_GROUP tasks)
    assert not list(out.glob("*.tmp"))
    # each row encoded once, into its journal part; the table copied the parts' bytes
    assert encoded == [pq.ParquetFile(p).metadata.num_rows for p in parts]
    table_bytes = (out / "forecasts.parquet").read_bytes()
    for part in parts:
        body = part.read_bytes()
        assert body[4:-8 - int.from_bytes(body[-8:-4], "little")] in table_bytes
    tasks = pd.read_parquet(out / "tasks.parquet")
    names = ["coin", "base_rate", "momentum", "climatology"]
    want = ordered_table(Journal(out).table(), tasks["task_id"].to_numpy(object), names)
    got = pd.read_parquet(out / "forecasts.parquet")
    pd.testing.assert_frame_equal(got, want.to_pandas())
    meta = pq.ParquetFile(out / "forecasts.parquet").metadata
    at = meta.schema.names.index("model")
    assert [meta.row_group(g).column(at).statistics.max
            for g in range(meta.num_row_groups)] == names  # a row group per model, none mixed
    before, streamed = (out / "scores.csv").read_bytes(), (out / "forecasts.parquet").read_bytes()
    run(cfg, out, echo=lambda *_: None)  # resumed: nothing to answer, table from the journal
    assert len(calls) == 1
    assert (out / "forecasts.parquet").read_bytes() == streamed  # its bytes: its rows' alone
    assert (out / "scores.csv").read_bytes() == before


def test_row_groups_of_baselines_with_receipts_hashed_in_a_helper_process(
        sample_store, tmp_path, monkeypatch):
    """Baselines answer a row group of the table at a time, the digests of the next group's
    receipts made meanwhile in a helper process: the rows are those of a run answering all
    at once and hashing here, the table is its parts joined, and the audit passes. Where no
    helper can be started, the receipts are hashed in the run's process, to the same rows."""
    from finbench.runlog import forecast_table
    from finbench.runner import forecasting

    cfg = tmp_path / "b.toml"
    cfg.write_text(CONFIG.format(store=sample_store).split('[[models]]\nname = "frozen"')[0]
                   .replace('start = "2025-01-13"', 'start = "2024-12-16"'))
    whole = run(cfg, tmp_path / "whole", echo=lambda *_: None)
    monkeypatch.setattr(forecast_table, "ROW_GROUP", 10)
    monkeypatch.setattr(forecasting, "HELPER_TASKS", 1)
    started = []
    original = forecasting.Sha256Helper

    def spy():
        started.append(1)
        return original()

    monkeypatch.setattr(forecasting, "Sha256Helper", spy)
    grouped = run(cfg, tmp_path / "grouped", echo=lambda *_: None)
    assert started == [1]
    n = len(pd.read_parquet(whole / "tasks.parquet"))
    parts = sorted((grouped / "journal.parts").glob("*.parquet"))
    assert len(parts) == 4 * -(-n // 10)  # four baselines, a part per row group of 10
    meta = pq.ParquetFile(grouped / "forecasts.parquet").metadata
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == (
        [10] * (n // 10) + ([n % 10] if n % 10 else [])) * 4
    a = pd.read_parquet(whole / "forecasts.parquet").drop(columns="latency")
    b = pd.read_parquet(grouped / "forecasts.parquet").drop(columns="latency")
    pd.testing.assert_frame_equal(a, b)
    assert (grouped / "scores.csv").read_bytes() == (whole / "scores.csv").read_bytes()
    assert audit_run(grouped) == []

    def unstartable():
        raise OSError("no subprocess here")

    monkeypatch.setattr(forecasting, "Sha256Helper", unstartable)  # receipts hashed here
    here = run(cfg, tmp_path / "here", echo=lambda *_: None)
    c = pd.read_parquet(here / "forecasts.parquet").drop(columns="latency")
    pd.testing.assert_frame_equal(a, c)


def test_receipts_still_being_hashed_are_put_in_on_the_journals_writer_thread(
        sample_store, tmp_path, monkeypatch):
    """The pass does not wait for a group's digests: rows whose digests the helper is still
    making go to the journal's writer thread, which puts them in before writing the part (the
    rows are those of a run hashing here). A helper failing meanwhile fails the run with its
    error, and no table is published."""
    import threading
    import time

    from finbench.core import digests as digests_module
    from finbench.core.errors import RunError
    from finbench.runlog import forecast_table
    from finbench.runlog.journal import Journal
    from finbench.runner import forecasting

    cfg = tmp_path / "b.toml"
    cfg.write_text(CONFIG.format(store=sample_store).split('[[models]]\nname = "frozen"')[0])
    whole = run(cfg, tmp_path / "whole", echo=lambda *_: None)
    monkeypatch.setattr(forecast_table, "ROW_GROUP", 10)
    monkeypatch.setattr(forecasting, "HELPER_TASKS", 1)
    hash_once = digests_module.Sha256Helper._hash

    def slow(self, texts):
        time.sleep(0.05)
        return hash_once(self, texts)

    monkeypatch.setattr(digests_module.Sha256Helper, "_hash", slow)
    finished_by = []
    append = Journal.append

    def spy(self, rows, *, background=False, finish=None):
        if finish is not None:
            def traced(table):
                finished_by.append(threading.current_thread().name)
                return finish(table)
            return append(self, rows, background=background, finish=traced)
        return append(self, rows, background=background)

    monkeypatch.setattr(Journal, "append", spy)
    late = run(cfg, tmp_path / "late", echo=lambda *_: None)
    assert finished_by and all(name.startswith("journal") for name in finished_by)
    a = pd.read_parquet(whole / "forecasts.parquet").drop(columns="latency")
    b = pd.read_parquet(late / "forecasts.parquet").drop(columns="latency")
    pd.testing.assert_frame_equal(a, b)
    assert audit_run(late) == []

    def dying(self, texts):
        time.sleep(0.05)
        raise RunError("the hashing helper process ended (exit code -9): receipts cannot "
                       "be made")

    monkeypatch.setattr(digests_module.Sha256Helper, "_hash", dying)
    with pytest.raises(RunError, match="hashing helper process ended"):
        run(cfg, tmp_path / "dead", echo=lambda *_: None)
    assert not (tmp_path / "dead" / "forecasts.parquet").exists()


def test_a_failing_forecaster_leaves_every_earlier_answer_on_disk_and_no_table(
        sample_store, tmp_path, monkeypatch):
    """Journal parts are written by the journal's thread while the next are computed. When a
    forecaster fails, the run waits for the parts already handed over (they are on disk when
    the error reaches the caller), publishes no table, and the same command resumes to the
    clean result."""
    import time

    from finbench.runlog import journal as journal_module
    from finbench.tracks.intraday.baselines import Momentum

    cfg = tmp_path / "b.toml"
    cfg.write_text(CONFIG.format(store=sample_store).split('[[models]]\nname = "frozen"')[0]
                   .replace('start = "2025-01-13"', 'start = "2024-12-16"'))
    clean = run(cfg, tmp_path / "clean", echo=lambda *_: None)
    slow_write, answer = journal_module._write_part, Momentum._answer

    def slow(table, final):
        time.sleep(0.2)  # the writer lags the forecasters
        return slow_write(table, final)

    def fail(self, inputs):
        raise RuntimeError("momentum failed")

    monkeypatch.setattr(journal_module, "_write_part", slow)
    monkeypatch.setattr(Momentum, "_answer", fail)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="momentum failed"):
        run(cfg, out, echo=lambda *_: None)
    assert len(list((out / "journal.parts").glob("*.parquet"))) == 2  # coin, base_rate
    assert not (out / "forecasts.parquet").exists() and not list(out.glob("*.tmp"))
    monkeypatch.setattr(Momentum, "_answer", answer)
    run(cfg, out, echo=lambda *_: None)
    assert (out / "scores.csv").read_bytes() == (clean / "scores.csv").read_bytes()


def test_tasks_command_prints_json_on_stdout_and_progress_on_stderr(run_dir, tmp_path):
    done = cli("tasks", run_dir.parent / "cfg.toml", "--out", tmp_path / "t")
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)  # nothing but the summary
    tasks = pd.read_parquet(tmp_path / "t" / "tasks.parquet")
    assert facts["tasks"] == len(tasks) == len(pd.read_parquet(run_dir / "tasks.parquet"))
    assert pd.read_parquet(tmp_path / "t" / "labels.parquet").equals(
        pd.read_parquet(run_dir / "labels.parquet"))
    assert re.fullmatch(r"labels: (\d+)/\1 reads, [\d.]+s elapsed, ETA 0\.0s\n", done.stderr)
    # into a run's folder, they replaced its tasks and labels (its audit then failed)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    done = cli("tasks", run_dir.parent / "cfg.toml", "--out", run_dir)
    assert done.returncode == 2 and (f"RunError: {run_dir}: holds manifest.json (a run's or a "
                                     "store's), whose tasks and labels are its own") in done.stderr
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before


def test_label_files_written_beside_the_forecasts_stop_a_run_that_cannot_write_them(
        run_dir, tmp_path, monkeypatch):
    """The tasks and labels are written on a thread of their own while the forecasts are made.
    When labels.parquet cannot be written the run stops with that error before its forecast
    table, with no writer thread left and nothing torn; the same command then finishes the
    run, with the clean run's files."""
    import threading

    from finbench.core.outputs import DiskFullError
    from finbench.runner import steps

    write = steps.write_atomic

    def full_at_labels(path, writer):
        if path.name == "labels.parquet":
            raise DiskFullError(f"{path}: cannot be written: no space left on device")
        write(path, writer)

    monkeypatch.setattr(steps, "write_atomic", full_at_labels)
    cfg, out = run_dir.parent / "cfg.toml", tmp_path / "out"
    with pytest.raises(DiskFullError, match=r"labels.parquet: cannot be written"):
        run(cfg, out, echo=lambda *_: None)
    assert not any(t.name.startswith("label-files") for t in threading.enumerate())
    assert (out / "tasks.parquet").is_file() and not (out / "labels.parquet").exists()
    assert not (out / "forecasts.parquet").exists() and not list(out.glob("*.tmp"))
    assert len(list((out / "journal.parts").glob("*.parquet"))) == 7  # the answers are kept
    monkeypatch.undo()
    run(cfg, out, echo=lambda *_: None)
    for name in ("tasks.parquet", "labels.parquet", "scores.parquet", "rows.parquet"):
        assert (out / name).read_bytes() == (run_dir / name).read_bytes(), name
